//! The serde types of the shared vector files: `tests/vectors/v1.json`
//! ([`VectorFile`]) and `tests/vectors/call_context.json` ([`CallContextFile`]).
//!
//! One definition for both sides: the generator (this package) writes the
//! files through these types, and the core's tests
//! (`crates/reqstate/tests/core/`, which include this file) read them back
//! through the same ones. Field order is file order.

use serde::{Deserialize, Serialize};

/// `tests/vectors/v1.json`: the token format's vectors (FORMAT.md). The
/// file's `description` says what each section means.
#[derive(Serialize, Deserialize, PartialEq, Debug)]
pub(crate) struct VectorFile {
    pub(crate) description: String,
    pub(crate) format_version: u8,
    pub(crate) policy: VectorPolicy,
    pub(crate) keys: Vec<VectorKey>,
    pub(crate) valid: Vec<ValidVector>,
    pub(crate) sealed: Vec<SealedVector>,
    pub(crate) single_use: Vec<SingleUseVector>,
    pub(crate) accepted: Vec<AcceptedVector>,
    pub(crate) invalid: Vec<InvalidVector>,
    pub(crate) mint_invalid: Vec<MintInvalidVector>,
    pub(crate) keyrings: Vec<KeyringVector>,
    pub(crate) policies: Vec<PolicyVector>,
    pub(crate) shared_lifetimes: Vec<SharedLifetimeVector>,
    pub(crate) schedules: Vec<ScheduleVector>,
    pub(crate) keyring_texts: Vec<KeyringTextVector>,
}

/// A keyring file as its TOML text (docs/KEYRING.md, "How an instant is
/// read"), loaded without a policy: refused with `expect_fail`, or, at each
/// instant of `at`, minting with one key and verifying with the keys given.
#[derive(Serialize, Deserialize, PartialEq, Debug, Clone)]
pub(crate) struct KeyringTextVector {
    pub(crate) name: String,
    pub(crate) toml: String,
    /// The refusal's name (`invalid_keyring`); absent if the file loads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) expect_fail: Option<String>,
    /// What the keyring does at given instants, when it loads.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) at: Vec<KeyringTextCheck>,
}

/// A keyring text at one instant: the minting key, and the ids of the keys
/// not retired then (in increasing id; every other key is retired).
#[derive(Serialize, Deserialize, PartialEq, Debug, Clone)]
pub(crate) struct KeyringTextCheck {
    pub(crate) now: u64,
    pub(crate) minting: u32,
    pub(crate) verifying: Vec<u32>,
}

/// A keyring file whose keys carry a schedule (docs/KEYRING.md, "Keys on a
/// schedule"), served under `policy`: refused with `expect_fail`, or, at
/// each instant of `at`, minting with one key and verifying or refusing
/// each key's tokens.
#[derive(Serialize, Deserialize, PartialEq, Debug, Clone)]
pub(crate) struct ScheduleVector {
    pub(crate) name: String,
    /// The `[[key]]` tables, as in `keyrings`.
    pub(crate) keys: Vec<KeyringEntry>,
    /// The policy the file is served under; knobs left out take their
    /// FORMAT.md §8 defaults.
    pub(crate) policy: VectorPolicy,
    /// The refusal's name (`invalid_keyring`); absent if the file loads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) expect_fail: Option<String>,
    /// The claims every check mints and every token carries, when it loads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) claims: Option<ScheduleClaims>,
    /// What the keyring does at given instants, when it loads.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) at: Vec<ScheduleCheck>,
}

/// The claims of a schedule vector's tokens.
#[derive(Serialize, Deserialize, PartialEq, Debug, Clone)]
pub(crate) struct ScheduleClaims {
    pub(crate) tool: String,
    pub(crate) context: String,
    pub(crate) step: String,
    pub(crate) state_cbor: String,
    pub(crate) ttl: u64,
}

/// A schedule vector at one instant: minting the claims at `now` uses key
/// `minting` and gives `token` when `deterministic` (an HMAC-SHA256 key);
/// `token` verifies at `now`; each of `tokens`, the claims minted at `now`
/// by one key of the file alone, verifies at `now` (`result` "ok") or is
/// refused (`result` "retired_key").
#[derive(Serialize, Deserialize, PartialEq, Debug, Clone)]
pub(crate) struct ScheduleCheck {
    pub(crate) now: u64,
    pub(crate) minting: u32,
    pub(crate) deterministic: bool,
    pub(crate) token: String,
    pub(crate) tokens: Vec<ScheduleToken>,
}

/// One key's token in a [`ScheduleCheck`].
#[derive(Serialize, Deserialize, PartialEq, Debug, Clone)]
pub(crate) struct ScheduleToken {
    pub(crate) key_id: u32,
    pub(crate) token: String,
    pub(crate) result: String,
    /// More of that key's tokens, each put through `operation` at `now`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) others: Vec<ScheduleOther>,
}

/// One more token of a key in a [`ScheduleToken`]: `operation` ("verify",
/// "consume" with an empty store, "unseal" with the claims' context as the
/// aad) at `now` gives `result` ("ok" or the refusal's name). `what` says
/// which token it is.
#[derive(Serialize, Deserialize, PartialEq, Debug, Clone)]
pub(crate) struct ScheduleOther {
    pub(crate) what: String,
    pub(crate) operation: String,
    pub(crate) token: String,
    pub(crate) result: String,
}

/// How long a store shared by several verifiers keeps a spent record
/// (FORMAT.md §5.1): the relative lifetime, in milliseconds, that a verifier
/// whose clock read `now` gives the record of a token expiring at
/// `expires_at`, allowing clocks `max_skew_ms` apart.
#[derive(Serialize, Deserialize, PartialEq, Debug, Clone)]
pub(crate) struct SharedLifetimeVector {
    pub(crate) name: String,
    pub(crate) expires_at: u64,
    pub(crate) now: u64,
    pub(crate) max_skew_ms: u64,
    pub(crate) lifetime_ms: u64,
}

/// A policy to build (FORMAT.md §8): accepted, or refused with
/// `invalid_argument`. Both sides of each knob's range.
#[derive(Serialize, Deserialize, PartialEq, Debug, Clone)]
pub(crate) struct PolicyVector {
    pub(crate) name: String,
    /// The knobs given; a knob left out takes its FORMAT.md §8 default.
    pub(crate) policy: VectorPolicy,
    /// The refusal's name; absent if the policy is built.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) expect_fail: Option<String>,
    /// The policy built (every knob), when it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) built: Option<VectorPolicy>,
}

/// A keyring to load (FORMAT.md §1, docs/KEYRING.md): accepted, or refused.
#[derive(Serialize, Deserialize, PartialEq, Debug, Clone)]
pub(crate) struct KeyringVector {
    pub(crate) name: String,
    /// The file's top-level `version`, when the vector sets it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) version: Option<u64>,
    /// The `[[key]]` tables, one per key, as JSON objects.
    pub(crate) keys: Vec<KeyringEntry>,
    /// The refusal's name; absent if the keyring loads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) expect_fail: Option<String>,
    /// A mint and a verification under the loaded keyring.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) mint: Option<KeyringMint>,
}

/// One `[[key]]` table of a keyring vector (docs/KEYRING.md), field for
/// field; `created` is a date-time's text, written bare (an offset date-time
/// where the keyring is accepted; a local date-time, a date or a time where
/// a vector shows it refused).
#[derive(Serialize, Deserialize, PartialEq, Debug, Clone, Default)]
pub(crate) struct KeyringEntry {
    /// An integer, or (to be refused) another JSON value; absent, refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) id: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) algorithm: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) status: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) created: Option<String>,
    /// A date-time's text, written bare, as `created`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) mint_from: Option<String>,
    /// A date-time's text, written bare, as `created`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) retire_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) secret: Option<String>,
    /// A second secret source beside `secret` (to be refused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) secret_env: Option<String>,
    /// Fields KEYRING.md does not define (string values), to be refused.
    #[serde(flatten)]
    pub(crate) unknown: std::collections::BTreeMap<String, String>,
}

/// What a loaded keyring vector mints and verifies: `token` verifies under
/// it at `now` to these claims with key `key_id`; minting the same claims
/// under it at `now` uses key `key_id`, and gives `token` itself when
/// `deterministic` (an HMAC-SHA256 primary key).
#[derive(Serialize, Deserialize, PartialEq, Debug, Clone)]
pub(crate) struct KeyringMint {
    pub(crate) tool: String,
    pub(crate) context: String,
    pub(crate) step: String,
    pub(crate) state_cbor: String,
    pub(crate) ttl: u64,
    pub(crate) now: u64,
    pub(crate) key_id: u32,
    pub(crate) deterministic: bool,
    pub(crate) token: String,
}

/// A verification and minting policy (FORMAT.md §8), in seconds and
/// characters. A knob left out takes its default (8192, 60, 86400), not the
/// file's.
#[derive(Serialize, Deserialize, PartialEq, Debug, Clone, Copy, Default)]
pub(crate) struct VectorPolicy {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) max_token_len: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) clock_leeway: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) max_lifetime: Option<u64>,
}

/// A key of the file's keyring (FORMAT.md §1), with what HKDF derives from it.
#[derive(Serialize, Deserialize, PartialEq, Debug, Clone)]
pub(crate) struct VectorKey {
    pub(crate) id: u32,
    pub(crate) algorithm: String,
    pub(crate) status: String,
    /// The configured secret, standard base64.
    pub(crate) secret: String,
    /// The working key after HKDF, hex: lets another implementation check its derivation.
    pub(crate) derived_key: String,
    /// The nonce key `K_n` after HKDF, hex (XChaCha20-Poly1305 keys; empty for HMAC).
    pub(crate) nonce_key: String,
}

/// A state token (kind 0) minted under its key as the only, primary key at
/// `now` with `random` as the random bytes drawn; it verifies at `now` to
/// these claims.
#[derive(Serialize, Deserialize, PartialEq, Debug, Clone)]
pub(crate) struct ValidVector {
    pub(crate) name: String,
    pub(crate) key_id: u32,
    pub(crate) tool: String,
    pub(crate) step: String,
    /// The state as the CBOR bytes stored in the token, hex.
    pub(crate) state_cbor: String,
    /// The same state as JSON, for reading.
    pub(crate) state_json: serde_json::Value,
    pub(crate) ttl: u64,
    /// Context bytes, hex (bound, not stored).
    pub(crate) context: String,
    /// Clock at mint and verify, unix seconds.
    pub(crate) now: u64,
    /// The random bytes the minting codec drew (FORMAT.md §4.2's `r`), hex;
    /// empty for HMAC.
    pub(crate) random: String,
    /// The XChaCha20-Poly1305 nonce in the token, hex; empty for HMAC.
    pub(crate) nonce: String,
    pub(crate) issued_at: u64,
    pub(crate) expires_at: u64,
    pub(crate) token: String,
    pub(crate) token_chars: usize,
    /// The policy minted and verified under, if not the file's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) policy: Option<VectorPolicy>,
}

/// A single-use state token (FORMAT.md §5.1, kind 2) minted under its key
/// as the only, primary key at `now`, the random source handing out
/// `token_id` and then (XChaCha20-Poly1305) `random`. Consuming it at `now`
/// with an empty store succeeds with these claims and records
/// `spent_record` until `record_until`; consuming it again is `replayed`;
/// verifying it (not consuming) is `single_use`.
#[derive(Serialize, Deserialize, PartialEq, Debug, Clone)]
pub(crate) struct SingleUseVector {
    pub(crate) name: String,
    pub(crate) key_id: u32,
    pub(crate) tool: String,
    pub(crate) step: String,
    pub(crate) state_cbor: String,
    pub(crate) state_json: serde_json::Value,
    pub(crate) ttl: u64,
    pub(crate) context: String,
    pub(crate) now: u64,
    /// The 16 bytes of token id the random source handed out first, hex.
    pub(crate) token_id: String,
    /// The 24 bytes that hedged the nonce (FORMAT.md §4.2's `r`), drawn after
    /// the token id, hex; empty for HMAC.
    pub(crate) random: String,
    pub(crate) nonce: String,
    pub(crate) issued_at: u64,
    pub(crate) expires_at: u64,
    pub(crate) token: String,
    pub(crate) token_chars: usize,
    /// The record's name (FORMAT.md §5.1, without a deployment prefix).
    pub(crate) spent_record: String,
    /// `expires_at + clock_leeway`, saturating: how long the record is kept.
    pub(crate) record_until: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) policy: Option<VectorPolicy>,
}

/// A sealed payload (kind 1) made under its key as the only, primary key at
/// `now`; it unseals with `aad` to `payload`.
#[derive(Serialize, Deserialize, PartialEq, Debug, Clone)]
pub(crate) struct SealedVector {
    pub(crate) name: String,
    pub(crate) key_id: u32,
    pub(crate) now: u64,
    pub(crate) payload: String,
    pub(crate) aad: String,
    /// The random bytes drawn, hex.
    pub(crate) random: String,
    /// The nonce in the token, hex.
    pub(crate) nonce: String,
    pub(crate) token: String,
    /// The policy it was sealed and unseals under, if not the file's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) policy: Option<VectorPolicy>,
}

/// A token (with its operation's arguments) that must be refused with
/// `expect_fail`, the first failing step of FORMAT.md §8.
#[derive(Serialize, Deserialize, PartialEq, Debug, Clone)]
pub(crate) struct InvalidVector {
    pub(crate) name: String,
    /// "verify" (with `tool`, `context` and, if set, `expected_step`),
    /// "consume" (as verify, with a store holding `spent`) or "unseal" (with
    /// `context` as aad).
    pub(crate) operation: String,
    pub(crate) token: String,
    pub(crate) tool: String,
    pub(crate) context: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) expected_step: Option<String>,
    pub(crate) now: u64,
    /// The policy to verify under, if not the file's default `policy`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) policy: Option<VectorPolicy>,
    /// The caller's type for the state (FORMAT.md §8 step 14): absent, the
    /// state is not decoded; "uint", an unsigned integer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) decode_as: Option<String>,
    /// consume: the records (FORMAT.md §5.1 names) the store holds, live,
    /// before the call. A refused consume leaves the store as it was.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) spent: Vec<String>,
    pub(crate) expect_fail: String,
}

/// A token that verifies (or unseals), typically at the accepted side of a
/// boundary; most carry a body only a key holder could make.
#[derive(Serialize, Deserialize, PartialEq, Debug, Clone)]
pub(crate) struct AcceptedVector {
    pub(crate) name: String,
    /// "verify", "consume" or "unseal", as for invalid vectors.
    pub(crate) operation: String,
    pub(crate) token: String,
    pub(crate) tool: String,
    pub(crate) context: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) expected_step: Option<String>,
    pub(crate) now: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) policy: Option<VectorPolicy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) decode_as: Option<String>,
    /// verify: the claims found (the state as its exact CBOR bytes, hex).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) issued_at: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) expires_at: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) step: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) state_cbor: Option<String>,
    /// unseal: the payload, hex.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) payload: Option<String>,
    /// consume: the key id of the token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) key_id: Option<u32>,
    /// consume: the records the store holds before the call (none of them
    /// this token's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) spent: Vec<String>,
    /// consume: the record the call adds, and until when it is kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) spent_record: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) record_until: Option<u64>,
}

/// A mint (or seal) that must be refused: the inputs and the reason.
#[derive(Serialize, Deserialize, PartialEq, Debug, Clone)]
pub(crate) struct MintInvalidVector {
    pub(crate) name: String,
    /// "mint" (tool, step, state_cbor, ttl, context) or "seal" (payload, context as aad).
    pub(crate) operation: String,
    /// The key minted under, as the keyring's only, primary key.
    pub(crate) key_id: u32,
    pub(crate) tool: String,
    pub(crate) step: String,
    /// mint: the state's CBOR, hex.
    pub(crate) state_cbor: String,
    /// seal: the payload, hex.
    pub(crate) payload: String,
    pub(crate) ttl: u64,
    pub(crate) context: String,
    pub(crate) now: u64,
    /// What the random source hands out, hex; a draw of any other length fails.
    pub(crate) random: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) policy: Option<VectorPolicy>,
    /// mint: a single-use token (FORMAT.md §5.1), whose 16-byte token id is
    /// drawn from the random source after the state is checked.
    #[serde(default, skip_serializing_if = "is_false")]
    pub(crate) single_use: bool,
    pub(crate) expect_fail: String,
}

/// `skip_serializing_if` for a flag that is absent when false.
pub(crate) fn is_false(b: &bool) -> bool {
    !*b
}

/// `tests/vectors/call_context.json`: the call-context corpus (FORMAT.md §7).
#[derive(Serialize, Deserialize, PartialEq, Debug)]
pub(crate) struct CallContextFile {
    pub(crate) description: String,
    /// The domain-separation label of the context's hash.
    pub(crate) label: String,
    pub(crate) cases: Vec<CallContextCase>,
}

/// One call: accepted (`canonical` and `context` set) or refused (`refused`
/// and `reason` set).
#[derive(Serialize, Deserialize, PartialEq, Debug)]
pub(crate) struct CallContextCase {
    pub(crate) name: String,
    pub(crate) principal: String,
    pub(crate) audience: String,
    pub(crate) method: String,
    /// The arguments as a client sends them: any spacing and key order.
    pub(crate) arguments_json: String,
    /// The arguments' JCS text (RFC 8785).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) canonical: Option<String>,
    /// The call context, hex.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) context: Option<String>,
    /// `"invalid_argument"` for a refusal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) refused: Option<String>,
    /// Which rule refuses: `not_json`, `duplicate_key`, `inexact_number`,
    /// `lone_surrogate` or `too_deep`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) reason: Option<String>,
}
