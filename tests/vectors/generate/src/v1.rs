//! `tests/vectors/v1.json`: the token format's vectors, one module per
//! family, assembled in file order by [`generate`].
//!
//! Every token is minted by the crate with a fixed clock and a scripted
//! random source ([`minted`]), or made from FORMAT.md directly with the
//! derived key ([`forge`]) where only a key holder could make it; so the
//! file is the same on every run.

mod accepted;
mod bodies;
mod codec;
mod config;
mod defaults;
mod edges;
mod forge;
mod invalid;
mod keyring_texts;
mod mint_invalid;
mod minted;
mod rules;
mod schedules;
mod single_use;

use reqstate::Policy;

use crate::schema::{VectorFile, VectorPolicy};

/// The vectors' clock: 2025-11-30T00:00:00Z.
const NOW: u64 = 1_764_460_800;
/// The reference context: what a server binds for user-42's `tools/call`.
const REFERENCE_CONTEXT: &[u8] = b"principal=user-42;audience=counter-server;method=tools/call";

/// The whole file, from the definitions.
pub(crate) fn generate() -> VectorFile {
    let m = minted::Minted::new();
    let mut bad = invalid::tampered(&m);
    rules::rules(&m, &mut bad);
    bodies::bodies(&m, &mut bad);
    let mut accepted = accepted::accepted(&m);
    let mut mint_invalid = mint_invalid::mint_invalid(&m);
    single_use::single_use_rules(&m, &mut bad, &mut accepted, &mut mint_invalid);
    defaults::defaults(&m, &mut bad, &mut accepted);
    let extra = edges::edges(&m, &mut bad, &mut accepted, &mut mint_invalid);
    let keyrings = config::keyrings();
    let policies = config::policies();
    let shared_lifetimes = config::shared_lifetimes();
    let schedules = schedules::schedules();
    let keyring_texts = keyring_texts::keyring_texts();
    let minted::Minted {
        keys,
        mut valid,
        mut sealed,
        single_use,
        retired: _,
    } = m;
    valid.extend(extra.valid);
    sealed.extend(extra.sealed);
    VectorFile {
        description: "reqstate token format v1 test vectors (docs/FORMAT.md). Every token is verified \
                      under the keyring `keys` with the statuses given, at the vector's `now` (unix seconds), \
                      and under the file's `policy` unless the vector carries its own `policy`, whose knobs left \
                      out take FORMAT.md section 8's defaults (max_token_len 8192, clock_leeway 60, \
                      max_lifetime 86400), not the file's. `valid` and \
                      `sealed` tokens were minted under their key_id as the only, primary key, at `now`, with \
                      `random` as the random bytes drawn; an XChaCha20-Poly1305 token's `nonce` is then \
                      HMAC-SHA256(nonce_key, random ‖ A ‖ body)[0..24] (FORMAT.md section 4.2). `accepted` \
                      tokens verify (operation \"verify\", with `tool`, `context` and, if set, \
                      `expected_step`) or unseal (operation \"unseal\", `context` is the aad, `tool` is \
                      empty) to the claims or payload given; `invalid` ones fail with `expect_fail`, the \
                      first failing step of FORMAT.md section 8. `decode_as` names the caller's type for the \
                      state (step 14): absent, the state is not decoded; \"uint\", an unsigned integer \
                      (major type 0). `mint_invalid` are mints (or seals: `payload`, `context` as aad) under \
                      key_id as the only, primary key that must be refused with `expect_fail`; the random \
                      source hands out the bytes of `random` in order, draw after draw, and fails a draw it \
                      has not enough bytes left for; `state_cbor` is the state's bytes, and bytes that are \
                      not one well-formed CBOR item are `state_encoding` (FORMAT.md section 8, mint refusal \
                      4; a command line refuses them itself, docs/CLI.md). \
                      `keyrings` are keyring files to load (docs/KEYRING.md, FORMAT.md section 1): `version`, \
                      when present, is the top-level field; each of `keys` is one `[[key]]` table, field \
                      for field (strings as TOML strings; `created` a date-time's text, written bare as a TOML \
                      value: an offset date-time where accepted, and in the refused ones what TOML reads as a \
                      local date-time, a date or a time; any other field a string); accepted, or refused with `expect_fail`. An \
                      accepted one's `mint`: its `token` verifies under it at `now` (with `tool`, `context`) \
                      to `step` and `state_cbor` from key `key_id`, and minting those claims for `ttl` \
                      seconds under it at `now` mints with key `key_id`, giving `token` itself when \
                      `deterministic`. `policies` are policies to build (FORMAT.md section 8) from the \
                      knobs given, the others defaulted: built, with every knob as in `built`, or refused \
                      with `expect_fail`. \
                      `shared_lifetimes` are the relative lifetimes, in milliseconds, that a \
                      store shared by several verifiers gives a spent record (FORMAT.md section 5.1) of a \
                      token expiring at `expires_at`, recorded by a verifier whose clock reads `now`, for \
                      clocks `max_skew_ms` apart: `lifetime_ms`. `schedules` are keyring files whose keys \
                      carry `mint_from` and `retire_at` (docs/KEYRING.md, Keys on a schedule; written bare as \
                      `created`), loaded and then checked against `policy` (knobs left out defaulted): refused \
                      with `expect_fail`, or, at each `now` of `at`, minting `claims` (with `tool` and \
                      `context`, for `ttl` seconds) uses key `minting` and gives `token` when `deterministic`, \
                      `token` verifies, and each of `tokens` (the claims minted at `now` by that key alone) \
                      verifies from its `key_id` (`result` \"ok\") or is refused with `result`; each of a token's \
                      `others` (`what` says which token) put through `operation` at `now` (\"verify\"; \
                      \"consume\" with an empty store; \"unseal\" with `context` as the aad) gives `result`. \
                      Single-use tokens and sealed payloads minted at `now` are minted by key `minting` too. \
                      `keyring_texts` are keyring files as their TOML `toml` text \
                      (docs/KEYRING.md, How an instant is read), loaded without a policy: refused with \
                      `expect_fail`, or, at each `now` of `at`, the minting key is `minting` and the keys not \
                      retired are `verifying` (ids, increasing; every other key of the file is retired). \
                      `single_use` tokens (FORMAT.md section 5.1, kind 2) were minted \
                      under their key_id as the only, primary key at `now`, the random source handing out \
                      the 16 bytes of `token_id` first and then (XChaCha20-Poly1305) the 24 bytes of \
                      `random`; each is consumed at `now` with an empty store, which succeeds with its \
                      claims and records `spent_record` (FORMAT.md section 5.1's record name, without a \
                      deployment prefix) until `record_until` (expires_at + clock_leeway, saturating); \
                      consuming it again is `replayed`, verifying it is `single_use`. Operation \
                      \"consume\" (in `invalid` and `accepted`) is verify for a single-use token \
                      followed by step 15, with a store that holds the records named in `spent` (live) \
                      before the call; an accepted consume reports `key_id` and adds exactly \
                      `spent_record` until `record_until`; a refused one leaves the store as it was. A \
                      `mint_invalid` vector with `single_use` true mints a single-use token. Names \
                      starting with \"§N\", \"step N\" or \"mint refusal N\" pin \
                      that rule (those of single-use vectors start with \"single-use\" first); names \
                      containing \"key holder's\" carry a genuine tag over a body only \
                      a key holder could make. Encodings: a `keys` secret is standard base64 with padding (a \
                      `keyrings` secret is the text as written in the file); \
                      `derived_key`, `nonce_key`, `random`, `token_id`, `nonce`, `state_cbor`, `payload`, `aad` and \
                      `context` are hex; tokens are base64url without padding."
            .into(),
        format_version: reqstate::VERSION,
        policy: VectorPolicy {
            max_token_len: Some(Policy::DEFAULT_MAX_TOKEN_LEN),
            clock_leeway: Some(Policy::DEFAULT_CLOCK_LEEWAY),
            max_lifetime: Some(Policy::DEFAULT_MAX_LIFETIME),
        },
        keys,
        valid,
        sealed,
        single_use,
        accepted,
        invalid: bad,
        mint_invalid,
        keyrings,
        policies,
        shared_lifetimes,
        schedules,
        keyring_texts,
    }
}
