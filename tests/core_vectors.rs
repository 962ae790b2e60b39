//! Token format v1 test vectors (tests/vectors/v1.json), checked in both
//! directions: minting with the vector's clock and nonce reproduces its bytes,
//! and verifying yields its claims or its error.
//!
//! `REQSTATE_WRITE_VECTORS=1 cargo test --test core_vectors` rewrites the file
//! from the definitions below; without it the file must match them exactly.

use std::time::Duration;

use reqstate::{
    Algorithm, Codec, Error, FixedClock, KeyId, KeySpec, KeyStatus, Keyring, Policy, Secret,
    SecureRandom,
};
use serde::{Deserialize, Serialize};

const VECTORS_PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/vectors/v1.json");

/// A "random" source that hands out one fixed draw (the bytes that hedge an
/// XChaCha20-Poly1305 nonce, FORMAT.md §4.2): only for reproducing vectors.
struct FixedNonce(Vec<u8>);

impl SecureRandom for FixedNonce {
    fn fill(&self, dest: &mut [u8]) -> Result<(), Error> {
        if dest.len() != self.0.len() {
            return Err(Error::RandomnessUnavailable);
        }
        dest.copy_from_slice(&self.0);
        Ok(())
    }
}

#[derive(Serialize, Deserialize, PartialEq, Debug)]
struct VectorFile {
    description: String,
    format_version: u8,
    policy: VectorPolicy,
    keys: Vec<VectorKey>,
    valid: Vec<ValidVector>,
    sealed: Vec<SealedVector>,
    invalid: Vec<InvalidVector>,
    call_context: Vec<CallContextVector>,
}

#[derive(Serialize, Deserialize, PartialEq, Debug, Clone)]
struct CallContextVector {
    principal: String,
    audience: String,
    method: String,
    /// The arguments as a client might send them (any key order, any spacing).
    arguments_json: String,
    /// FORMAT.md §7's canonical JSON of the arguments.
    canonical_json: String,
    /// The 32-byte context, hex.
    context: String,
}

#[derive(Serialize, Deserialize, PartialEq, Debug)]
struct VectorPolicy {
    max_token_len: usize,
    clock_leeway: u64,
    max_lifetime: u64,
}

#[derive(Serialize, Deserialize, PartialEq, Debug, Clone)]
struct VectorKey {
    id: u32,
    algorithm: String,
    status: String,
    /// The configured secret, standard base64.
    secret: String,
    /// The working key after HKDF, hex: lets another implementation check its derivation.
    derived_key: String,
    /// The nonce key `K_n` after HKDF, hex (XChaCha20-Poly1305 keys; empty for HMAC).
    nonce_key: String,
}

#[derive(Serialize, Deserialize, PartialEq, Debug, Clone)]
struct ValidVector {
    name: String,
    key_id: u32,
    tool: String,
    step: String,
    /// The state as the CBOR bytes stored in the token, hex.
    state_cbor: String,
    /// The same state as JSON, for reading.
    state_json: serde_json::Value,
    ttl: u64,
    /// Context bytes, hex (bound, not stored).
    context: String,
    /// Clock at mint and verify, unix seconds.
    now: u64,
    /// The random bytes the minting codec drew (FORMAT.md §4.2's `r`), hex;
    /// empty for HMAC.
    random: String,
    /// The XChaCha20-Poly1305 nonce in the token, hex; empty for HMAC.
    nonce: String,
    issued_at: u64,
    expires_at: u64,
    token: String,
    token_chars: usize,
}

#[derive(Serialize, Deserialize, PartialEq, Debug, Clone)]
struct SealedVector {
    name: String,
    key_id: u32,
    now: u64,
    payload: String,
    aad: String,
    /// The random bytes drawn, hex.
    random: String,
    /// The nonce in the token, hex.
    nonce: String,
    token: String,
}

#[derive(Serialize, Deserialize, PartialEq, Debug, Clone)]
struct InvalidVector {
    name: String,
    /// "verify" (with `tool`, `context` and, if set, `expected_step`) or "unseal" (with `context` as aad).
    operation: String,
    token: String,
    tool: String,
    context: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    expected_step: Option<String>,
    now: u64,
    expect_fail: String,
}

// ---- Definitions.

const NOW: u64 = 1_764_460_800; // 2025-11-30T00:00:00Z
const REFERENCE_CONTEXT: &[u8] = b"principal=user-42;audience=counter-server;method=tools/call";

fn definition_keys() -> Vec<VectorKey> {
    let key = |id: u32, algorithm: Algorithm, status: KeyStatus, fill: u8| {
        let secret: Vec<u8> = (0..32u8)
            .map(|i| i.wrapping_mul(7).wrapping_add(fill))
            .collect();
        VectorKey {
            id,
            algorithm: algorithm.name().into(),
            status: status.name().into(),
            secret: base64_standard(&secret),
            derived_key: String::new(),
            nonce_key: String::new(),
        }
    };
    vec![
        key(1, Algorithm::HmacSha256, KeyStatus::Active, 0x10),
        key(2, Algorithm::XChaCha20Poly1305, KeyStatus::Primary, 0x20),
        key(3, Algorithm::XChaCha20Poly1305, KeyStatus::Retired, 0x30),
        key(200, Algorithm::HmacSha256, KeyStatus::Active, 0x40),
    ]
}

fn base64_standard(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn spec_of(k: &VectorKey, status: KeyStatus) -> KeySpec {
    KeySpec {
        id: KeyId::new(k.id),
        algorithm: Algorithm::from_name(&k.algorithm).expect("known algorithm"),
        status,
        created_at: None,
        secret: Secret::from_base64(&k.secret).expect("base64 secret"),
    }
}

/// The keyring every vector is verified under, statuses as in the file.
fn verification_keyring(keys: &[VectorKey]) -> Keyring {
    Keyring::new(
        keys.iter()
            .map(|k| spec_of(k, KeyStatus::from_name(&k.status).expect("known status"))),
    )
    .expect("vector keyring is valid")
}

/// A codec that mints under key `id` (as the only, primary key) with the
/// given clock and nonce.
fn minting_codec(keys: &[VectorKey], id: u32, now: u64, nonce: &[u8], policy: Policy) -> Codec {
    let k = keys.iter().find(|k| k.id == id).expect("vector key exists");
    let keyring = Keyring::new([spec_of(k, KeyStatus::Primary)]).expect("one-key keyring");
    Codec::with_parts(keyring, policy, FixedClock(now), FixedNonce(nonce.to_vec()))
}

fn verifying_codec(keys: &[VectorKey], now: u64) -> Codec {
    Codec::with_parts(
        verification_keyring(keys),
        Policy::new(),
        FixedClock(now),
        FixedNonce(vec![]),
    )
}

/// The nonce in an XChaCha20-Poly1305 token (one-byte key id), hex; empty for HMAC.
fn nonce_in(token: &str) -> String {
    use base64::Engine as _;
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .expect("base64url");
    if raw[0] & 0x03 == 2 {
        hex::encode(&raw[2..26])
    } else {
        String::new()
    }
}

fn random_for(keys: &[VectorKey], id: u32, seed: u8) -> Vec<u8> {
    let k = keys.iter().find(|k| k.id == id).expect("vector key exists");
    if k.algorithm == Algorithm::XChaCha20Poly1305.name() {
        (0..24u8)
            .map(|i| i.wrapping_mul(13).wrapping_add(seed))
            .collect()
    } else {
        Vec::new()
    }
}

#[allow(clippy::too_many_arguments)]
fn mint_vector(
    keys: &[VectorKey],
    name: &str,
    key_id: u32,
    tool: &str,
    step: &str,
    state_json: serde_json::Value,
    ttl: u64,
    context: &[u8],
    seed: u8,
) -> ValidVector {
    let random = random_for(keys, key_id, seed);
    let codec = minting_codec(keys, key_id, NOW, &random, Policy::new());
    let state: ciborium::Value = serde_json::from_value(state_json.clone()).expect("state");
    let mut state_cbor = Vec::new();
    ciborium::into_writer(&state, &mut state_cbor).expect("cbor");
    let minted = codec
        .mint_detailed(tool, step, &state, Duration::from_secs(ttl), context)
        .expect("vector mints");
    ValidVector {
        name: name.into(),
        key_id,
        tool: tool.into(),
        step: step.into(),
        state_cbor: hex::encode(state_cbor),
        state_json,
        ttl,
        context: hex::encode(context),
        now: NOW,
        random: hex::encode(&random),
        nonce: nonce_in(&minted.token),
        issued_at: minted.issued_at,
        expires_at: minted.expires_at,
        token_chars: minted.token.len(),
        token: minted.token,
    }
}

fn flip_bit(token: &str, byte: usize, mask: u8) -> String {
    use base64::Engine as _;
    let engine = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let mut raw = engine.decode(token).expect("valid token");
    raw[byte] ^= mask;
    engine.encode(raw)
}

fn invalid(v: &ValidVector, name: &str, token: String, expect_fail: &str) -> InvalidVector {
    InvalidVector {
        name: name.into(),
        operation: "verify".into(),
        token,
        tool: v.tool.clone(),
        context: v.context.clone(),
        expected_step: None,
        now: v.now,
        expect_fail: expect_fail.into(),
    }
}

fn generate() -> VectorFile {
    let mut keys = definition_keys();
    for k in &mut keys {
        k.derived_key = hex::encode(reqstate_derived_key(k));
        if k.algorithm == Algorithm::XChaCha20Poly1305.name() {
            k.nonce_key = hex::encode(hkdf_label(k, "reqstate/v1 xchacha20-poly1305 nonce"));
        }
    }
    let reference = serde_json::json!({"current": 10, "amount": 5});
    let valid = vec![
        mint_vector(
            &keys,
            "hmac reference claims",
            1,
            "increase-counter",
            "confirm",
            reference.clone(),
            600,
            REFERENCE_CONTEXT,
            0,
        ),
        mint_vector(
            &keys,
            "xchacha reference claims",
            2,
            "increase-counter",
            "confirm",
            reference.clone(),
            600,
            REFERENCE_CONTEXT,
            1,
        ),
        mint_vector(
            &keys,
            "hmac empty context, two-byte key id",
            200,
            "whoami",
            "username",
            serde_json::json!(null),
            60,
            b"",
            0,
        ),
        mint_vector(
            &keys,
            "xchacha nested state",
            2,
            "book-flight",
            "pick-seat",
            serde_json::json!({"from": "ZRH", "to": "SFO", "legs": [{"n": 1, "seat": null}, {"n": 2, "seat": "12A"}], "fare": 412.5, "ok": true}),
            3600,
            &[0u8, 1, 2, 3, 255],
            2,
        ),
    ];

    let sealed = [(1u32, 3u8), (2, 4)]
        .into_iter()
        .map(|(key_id, seed)| {
            let random = random_for(&keys, key_id, seed);
            let codec = minting_codec(&keys, key_id, NOW, &random, Policy::new());
            let payload = br#"{"v":1,"t":"increase-counter","s":"opaque to reqstate"}"#;
            let aad = b"tools/call";
            let token = codec.seal(payload, aad).expect("seal");
            SealedVector {
                name: format!("sealed payload under key {key_id}"),
                key_id,
                now: NOW,
                payload: hex::encode(payload),
                aad: hex::encode(aad),
                random: hex::encode(&random),
                nonce: nonce_in(&token),
                token,
            }
        })
        .collect::<Vec<_>>();

    let hmac = &valid[0];
    let xchacha = &valid[1];
    let mut bad = Vec::new();
    for v in [hmac, xchacha] {
        let alg = if v.key_id == 1 { "hmac" } else { "xchacha" };
        let last = v.token_chars * 3 / 4 - 1;
        bad.push(invalid(
            v,
            &format!("{alg}: last tag bit flipped"),
            flip_bit(&v.token, last, 0x01),
            "authentication_failed",
        ));
        bad.push(invalid(
            v,
            &format!("{alg}: body bit flipped"),
            flip_bit(&v.token, 10 + 24 * usize::from(v.key_id == 2), 0x40),
            "authentication_failed",
        ));
        let mut other_tool = invalid(
            v,
            &format!("{alg}: presented to another tool"),
            v.token.clone(),
            "authentication_failed",
        );
        other_tool.tool = "delete-everything".into();
        bad.push(other_tool);
        let mut other_context = invalid(
            v,
            &format!("{alg}: presented with another principal's context"),
            v.token.clone(),
            "authentication_failed",
        );
        other_context.context =
            hex::encode(b"principal=user-43;audience=counter-server;method=tools/call");
        bad.push(other_context);
        let mut expired = invalid(
            v,
            &format!("{alg}: expired (now = expires_at + leeway)"),
            v.token.clone(),
            "expired",
        );
        expired.now = v.expires_at + Policy::DEFAULT_CLOCK_LEEWAY;
        bad.push(expired);
        let mut early = invalid(
            v,
            &format!("{alg}: issued beyond the clock leeway"),
            v.token.clone(),
            "not_yet_valid",
        );
        early.now = v.issued_at - Policy::DEFAULT_CLOCK_LEEWAY - 1;
        bad.push(early);
        let mut step = invalid(
            v,
            &format!("{alg}: wrong step"),
            v.token.clone(),
            "wrong_step",
        );
        step.expected_step = Some("amount".into());
        bad.push(step);
        bad.push(invalid(
            v,
            &format!("{alg}: algorithm bits swapped"),
            flip_bit(&v.token, 0, 0x03),
            "algorithm_mismatch",
        ));
        bad.push(invalid(
            v,
            &format!("{alg}: truncated to 20 characters"),
            v.token[..20].into(),
            "malformed",
        ));
        bad.push(invalid(
            v,
            &format!("{alg}: padded"),
            format!("{}=", v.token),
            "malformed",
        ));
    }
    // Only a token whose byte length is not a multiple of 3 has unused trailing
    // bits in its last character; the two-byte-key-id vector (41 bytes) does.
    let short = &valid[2];
    assert_eq!(
        (short.token_chars * 3 / 4) % 3,
        2,
        "vector no longer has trailing bits"
    );
    bad.push(invalid(
        short,
        "non-canonical trailing base64 bits",
        {
            let mut t = short.token.clone();
            let last = t.pop().expect("non-empty");
            let alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
            let index = alphabet.find(last).expect("base64url");
            // The low two bits of the last sextet are unused: set one of them.
            t.push(alphabet.as_bytes()[index ^ 1] as char);
            t
        },
        "malformed",
    ));
    // Version 2 in the header.
    bad.push(invalid(
        hmac,
        "header version 2",
        flip_bit(&hmac.token, 0, 0x30),
        "unsupported_version",
    ));
    bad.push(invalid(
        hmac,
        "reserved algorithm identifier 3",
        flip_bit(&hmac.token, 0, 0x02),
        "unsupported_algorithm",
    ));
    bad.push(invalid(
        hmac,
        "key id 5 is not in the keyring",
        flip_bit(&hmac.token, 1, 0x04),
        "unknown_key",
    ));
    bad.push(invalid(
        hmac,
        "key id not minimally encoded",
        {
            use base64::Engine as _;
            let engine = base64::engine::general_purpose::URL_SAFE_NO_PAD;
            let mut raw = engine.decode(&hmac.token).expect("valid");
            raw[1] |= 0x80;
            raw.insert(2, 0x00);
            engine.encode(raw)
        },
        "malformed",
    ));
    let retired = mint_vector(
        &keys,
        "under retired key 3",
        3,
        "increase-counter",
        "confirm",
        reference.clone(),
        600,
        REFERENCE_CONTEXT,
        5,
    );
    bad.push(invalid(
        &retired,
        "genuine token under retired key 3",
        retired.token.clone(),
        "retired_key",
    ));
    let long = {
        let nonce = random_for(&keys, 2, 6);
        let policy = Policy::new()
            .with_max_lifetime(Duration::from_secs(2 * 86_400))
            .expect("policy");
        let codec = minting_codec(&keys, 2, NOW, &nonce, policy);
        codec
            .mint(
                "increase-counter",
                "confirm",
                &reference,
                Duration::from_secs(2 * 86_400),
                REFERENCE_CONTEXT,
            )
            .expect("mint")
    };
    bad.push(invalid(
        xchacha,
        "lifetime of two days exceeds the default maximum of one",
        long,
        "lifetime_too_long",
    ));
    let mut kind = invalid(
        hmac,
        "sealed token presented to verify",
        sealed[0].token.clone(),
        "wrong_kind",
    );
    kind.context = sealed[0].aad.clone();
    bad.push(kind);
    let mut unseal_state = invalid(
        hmac,
        "state token presented to unseal",
        hmac.token.clone(),
        "wrong_kind",
    );
    unseal_state.operation = "unseal".into();
    unseal_state.tool = String::new();
    bad.push(unseal_state);
    let mut unseal_aad = invalid(
        hmac,
        "sealed token with another aad",
        sealed[1].token.clone(),
        "authentication_failed",
    );
    unseal_aad.operation = "unseal".into();
    unseal_aad.tool = String::new();
    unseal_aad.context = hex::encode(b"prompts/get");
    bad.push(unseal_aad);
    bad.push(invalid(
        hmac,
        "longer than the 8192-character limit",
        "A".repeat(Policy::DEFAULT_MAX_TOKEN_LEN + 1),
        "too_large",
    ));
    bad.push(invalid(hmac, "empty", String::new(), "malformed"));
    bad.push(invalid(hmac, "not base64url", "!!!!".into(), "malformed"));
    bad.push(invalid(
        hmac,
        "reserved token kind 2",
        flip_bit(&hmac.token, 0, 0x08),
        "malformed",
    ));
    bad.push(invalid(
        hmac,
        "key id of 2^32",
        with_key_id(&hmac.token, &[0x80, 0x80, 0x80, 0x80, 0x10]),
        "malformed",
    ));
    bad.push(invalid(
        hmac,
        "key id encoding of 6 bytes",
        with_key_id(&hmac.token, &[0x81, 0x80, 0x80, 0x80, 0x80, 0x00]),
        "malformed",
    ));

    // Bodies only a key holder can produce: authenticated, then refused by the
    // claims checks (FORMAT.md §8 steps 9-10).
    let state = hex::decode(&hmac.state_cbor).expect("hex");
    let envelope = |iat: &[u8], lifetime: &[u8], step: &[u8], state: &[u8]| {
        let mut b = vec![0xa4, 0x01];
        b.extend_from_slice(iat);
        b.push(0x02);
        b.extend_from_slice(lifetime);
        b.push(0x03);
        b.extend_from_slice(step);
        b.push(0x04);
        b.extend_from_slice(state);
        b
    };
    let iat = [0x1a, 0x69, 0x2b, 0x89, 0x00];
    let ttl = [0x19, 0x02, 0x58];
    let step = [0x67, b'c', b'o', b'n', b'f', b'i', b'r', b'm'];
    let mut long_step = vec![0x79, 0x01, 0x01];
    long_step.extend(std::iter::repeat_n(b'x', 257));
    let mut deep = vec![0x81u8; 17];
    deep.push(0x00);
    let mut trailing = state.clone();
    trailing.push(0x00);
    let forged_bodies: Vec<(&str, Vec<u8>)> = vec![
        ("lifetime zero", envelope(&iat, &[0x00], &step, &state)),
        (
            "expiry overflows 64 bits",
            envelope(
                &[0x1b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
                &[0x01],
                &step,
                &state,
            ),
        ),
        (
            // FORMAT.md §8 step 10: the overflow is `malformed` before the
            // policy's `lifetime_too_long` (172800 s > the default one day).
            "lifetime over the maximum and expiry overflows 64 bits",
            envelope(
                &[0x1b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
                &[0x1a, 0x00, 0x02, 0xa3, 0x00],
                &step,
                &state,
            ),
        ),
        (
            "issued_at not in shortest form",
            envelope(
                &[0x1b, 0, 0, 0, 0, 0x69, 0x2b, 0x89, 0x00],
                &ttl,
                &step,
                &state,
            ),
        ),
        ("map keys out of order", {
            let mut b = vec![0xa4, 0x02];
            b.extend_from_slice(&ttl);
            b.push(0x01);
            b.extend_from_slice(&iat);
            b.push(0x03);
            b.extend_from_slice(&step);
            b.push(0x04);
            b.extend_from_slice(&state);
            b
        }),
        ("empty step", envelope(&iat, &ttl, &[0x60], &state)),
        (
            "step of 257 bytes",
            envelope(&iat, &ttl, &long_step, &state),
        ),
        (
            "step not UTF-8",
            envelope(&iat, &ttl, &[0x62, 0xc3, 0x28], &state),
        ),
        ("state nested 17 levels", envelope(&iat, &ttl, &step, &deep)),
        (
            "state text not UTF-8",
            envelope(&iat, &ttl, &step, &[0x62, 0xc3, 0x28]),
        ),
        (
            "trailing byte after the state",
            envelope(&iat, &ttl, &step, &trailing),
        ),
        ("no state", envelope(&iat, &ttl, &step, &[])),
        (
            "two-byte simple value below 32",
            envelope(&iat, &ttl, &step, &[0xf8, 0x10]),
        ),
    ];
    for (key_id, alg) in [(1u32, "hmac"), (2, "xchacha")] {
        let base = if key_id == 1 { hmac } else { xchacha };
        for (name, body) in &forged_bodies {
            let token = forge(
                &keys,
                key_id,
                body,
                base.tool.as_bytes(),
                REFERENCE_CONTEXT,
                &random_for(&keys, key_id, 7),
            );
            bad.push(invalid(
                base,
                &format!("{alg}: key holder's body: {name}"),
                token,
                "malformed",
            ));
        }
    }

    let call_context = [
        (
            "user-42",
            "counter-server",
            "tools/call",
            r#"{"current": 10}"#,
        ),
        (
            "user-42",
            "counter-server",
            "tools/call",
            r#"{ "b": [1, 2, {"z": null, "a": true}], "a": "x\"y\n", "é": -7 }"#,
        ),
        ("", "", "prompts/get", "{}"),
        (
            "alice@example.com",
            "https://mcp.example.com",
            "resources/read",
            r#"{"uri":"file:///tmp/a b","n":1.5}"#,
        ),
    ]
    .into_iter()
    .map(|(principal, audience, method, arguments_json)| {
        let value: serde_json::Value = serde_json::from_str(arguments_json).expect("json");
        CallContextVector {
            principal: principal.into(),
            audience: audience.into(),
            method: method.into(),
            arguments_json: arguments_json.into(),
            canonical_json: reqstate::canonical_json(&value),
            context: hex::encode(
                reqstate::call_context(principal, audience, method, arguments_json)
                    .expect("context"),
            ),
        }
    })
    .collect();

    VectorFile {
        description: "reqstate token format v1 test vectors (docs/FORMAT.md). Every token verifies under the \
                      keyring `keys` with the statuses given and the default `policy`; each valid and sealed \
                      token was minted under its key_id as the only, primary key, at `now`, with `random` as \
                      the random bytes drawn; an XChaCha20-Poly1305 token's `nonce` is then \
                      HMAC-SHA256(nonce_key, random ‖ A ‖ body)[0..24] (FORMAT.md section 4.2). Encodings: \
                      `secret` is standard base64 with padding; `derived_key`, `nonce_key`, `random`, \
                      `nonce`, `state_cbor`, `payload`, `aad` and `context` are hex; tokens are base64url \
                      without padding. Invalid vectors whose name starts with \"key holder's body\" carry a \
                      genuine tag over a body the format forbids. `call_context` pins FORMAT.md section 7."
            .into(),
        format_version: reqstate::VERSION,
        policy: VectorPolicy {
            max_token_len: Policy::DEFAULT_MAX_TOKEN_LEN,
            clock_leeway: Policy::DEFAULT_CLOCK_LEEWAY,
            max_lifetime: Policy::DEFAULT_MAX_LIFETIME,
        },
        keys,
        valid,
        sealed,
        invalid: bad,
        call_context,
    }
}

/// Replaces a token's key id bytes (keeping the header and the rest).
fn with_key_id(token: &str, key_id: &[u8]) -> String {
    use base64::Engine as _;
    let engine = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let raw = engine.decode(token).expect("valid");
    let mut out = vec![raw[0]];
    out.extend_from_slice(key_id);
    out.extend_from_slice(&raw[2..]);
    engine.encode(out)
}

/// A state token over an arbitrary body, made with the derived key directly as
/// FORMAT.md §4 says: what only a key holder could produce.
fn forge(
    keys: &[VectorKey],
    key_id: u32,
    body: &[u8],
    tool: &[u8],
    context: &[u8],
    nonce: &[u8],
) -> String {
    use base64::Engine as _;
    let k = keys.iter().find(|k| k.id == key_id).expect("key");
    let working = hex::decode(&k.derived_key).expect("hex");
    let algorithm = Algorithm::from_name(&k.algorithm).expect("algorithm");
    let header = 0x10
        | if algorithm == Algorithm::HmacSha256 {
            1
        } else {
            2
        };
    let mut prefix = vec![header];
    assert!(key_id < 128);
    prefix.push(key_id as u8);
    let mut ad = prefix.clone();
    ad.extend_from_slice(&(tool.len() as u32).to_be_bytes());
    ad.extend_from_slice(tool);
    ad.extend_from_slice(&(context.len() as u32).to_be_bytes());
    ad.extend_from_slice(context);
    let mut out = prefix;
    if algorithm == Algorithm::HmacSha256 {
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &working);
        let mut msg = ad;
        msg.extend_from_slice(body);
        out.extend_from_slice(body);
        out.extend_from_slice(&ring::hmac::sign(&key, &msg).as_ref()[..16]);
    } else {
        let hkey = chacha20::Key::try_from(&working[..]).expect("32 bytes");
        let hin: [u8; 16] = nonce[..16].try_into().expect("16 bytes");
        let sub: [u8; 32] = chacha20::hchacha::<chacha20::R20>(&hkey, &hin.into()).into();
        let mut n12 = [0u8; 12];
        n12[4..].copy_from_slice(&nonce[16..24]);
        let key = ring::aead::LessSafeKey::new(
            ring::aead::UnboundKey::new(&ring::aead::CHACHA20_POLY1305, &sub).expect("key"),
        );
        let mut sealed = body.to_vec();
        key.seal_in_place_append_tag(
            ring::aead::Nonce::assume_unique_for_key(n12),
            ring::aead::Aad::from(&ad[..]),
            &mut sealed,
        )
        .expect("seal");
        out.extend_from_slice(nonce);
        out.extend_from_slice(&sealed);
    }
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(out)
}

/// The working key as FORMAT.md derives it, computed independently of the
/// crate with ring's HKDF, so the vector pins the derivation too.
fn reqstate_derived_key(k: &VectorKey) -> [u8; 32] {
    hkdf_label(k, &format!("reqstate/v1 {}", k.algorithm))
}

/// HKDF-SHA256 of a vector key's secret with FORMAT.md §1's salt and `label` as info.
fn hkdf_label(k: &VectorKey, label: &str) -> [u8; 32] {
    struct Len32;
    impl ring::hkdf::KeyType for Len32 {
        fn len(&self) -> usize {
            32
        }
    }
    let secret = Secret::from_base64(&k.secret).expect("secret");
    let prk = ring::hkdf::Salt::new(ring::hkdf::HKDF_SHA256, b"reqstate/v1 keyring")
        .extract(secret.expose());
    let mut out = [0u8; 32];
    prk.expand(&[label.as_bytes()], Len32)
        .expect("expand")
        .fill(&mut out)
        .expect("fill");
    out
}

fn load() -> VectorFile {
    let text = std::fs::read_to_string(VECTORS_PATH).expect("tests/vectors/v1.json is readable");
    serde_json::from_str(&text).expect("tests/vectors/v1.json parses")
}

// ---- Tests.

#[test]
fn vector_file_matches_its_definitions() {
    let generated = generate();
    if std::env::var_os("REQSTATE_WRITE_VECTORS").is_some() {
        let text = serde_json::to_string_pretty(&generated).expect("serialize") + "\n";
        std::fs::write(VECTORS_PATH, text).expect("write vectors");
    }
    assert_eq!(
        load(),
        generated,
        "tests/vectors/v1.json is stale: see this file's header"
    );
}

#[test]
fn valid_vectors_mint_to_the_same_bytes() {
    let file = load();
    for v in &file.valid {
        let random = hex::decode(&v.random).expect("hex");
        let codec = minting_codec(&file.keys, v.key_id, v.now, &random, Policy::new());
        let state: ciborium::Value =
            ciborium::from_reader(&hex::decode(&v.state_cbor).expect("hex")[..]).expect("cbor");
        let context = hex::decode(&v.context).expect("hex");
        let token = codec
            .mint(
                &v.tool,
                &v.step,
                &state,
                Duration::from_secs(v.ttl),
                &context,
            )
            .expect("mint");
        assert_eq!(token, v.token, "{}", v.name);
        assert_eq!(token.len(), v.token_chars, "{}", v.name);
    }
    for s in &file.sealed {
        let random = hex::decode(&s.random).expect("hex");
        let codec = minting_codec(&file.keys, s.key_id, s.now, &random, Policy::new());
        let token = codec
            .seal(
                &hex::decode(&s.payload).expect("hex"),
                &hex::decode(&s.aad).expect("hex"),
            )
            .expect("seal");
        assert_eq!(token, s.token, "{}", s.name);
    }
}

#[test]
fn valid_vectors_verify_to_their_claims() {
    let file = load();
    for v in &file.valid {
        let codec = verifying_codec(&file.keys, v.now);
        let context = hex::decode(&v.context).expect("hex");
        let got = codec
            .verify_step::<ciborium::Value>(&v.token, &v.tool, &v.step, &context)
            .unwrap_or_else(|e| panic!("{}: {e}", v.name));
        let mut state_cbor = Vec::new();
        ciborium::into_writer(&got.state, &mut state_cbor).expect("cbor");
        assert_eq!(hex::encode(state_cbor), v.state_cbor, "{}", v.name);
        let as_json: serde_json::Value = serde_json::to_value(&got.state).expect("json");
        assert_eq!(as_json, v.state_json, "{}", v.name);
        assert_eq!(
            (got.key_id.get(), got.issued_at, got.expires_at),
            (v.key_id, v.issued_at, v.expires_at),
            "{}",
            v.name
        );
    }
    for s in &file.sealed {
        let codec = verifying_codec(&file.keys, s.now);
        let payload = codec
            .unseal(&s.token, &hex::decode(&s.aad).expect("hex"))
            .expect("unseal");
        assert_eq!(hex::encode(payload), s.payload, "{}", s.name);
    }
}

fn run_invalid(file: &VectorFile, v: &InvalidVector) -> Result<(), Error> {
    let codec = verifying_codec(&file.keys, v.now);
    let context = hex::decode(&v.context).expect("hex");
    match (v.operation.as_str(), &v.expected_step) {
        ("unseal", _) => codec.unseal(&v.token, &context).map(drop),
        ("verify", Some(step)) => codec
            .verify_step::<ciborium::Value>(&v.token, &v.tool, step, &context)
            .map(drop),
        ("verify", None) => codec
            .verify::<ciborium::Value>(&v.token, &v.tool, &context)
            .map(drop),
        (other, _) => panic!("unknown operation {other}"),
    }
}

#[test]
fn invalid_vectors_fail_with_their_reason() {
    let file = load();
    assert!(file.invalid.len() >= 60, "the invalid set shrank");
    for v in &file.invalid {
        match run_invalid(&file, v) {
            Ok(()) => panic!("{}: accepted", v.name),
            Err(e) => assert_eq!(e.reason(), v.expect_fail, "{}: {e}", v.name),
        }
    }
}

#[test]
fn every_valid_vector_with_any_one_byte_changed_is_rejected() {
    use base64::Engine as _;
    let engine = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let file = load();
    let mut checked = 0;
    for v in &file.valid {
        let codec = verifying_codec(&file.keys, v.now);
        let context = hex::decode(&v.context).expect("hex");
        let raw = engine.decode(&v.token).expect("valid");
        for i in 0..raw.len() {
            let mut changed = raw.clone();
            changed[i] = changed[i].wrapping_add(1);
            let token = engine.encode(&changed);
            assert!(
                codec
                    .verify::<ciborium::Value>(&token, &v.tool, &context)
                    .is_err(),
                "{}: byte {i} changed and still accepted",
                v.name
            );
            checked += 1;
        }
    }
    assert!(checked > 200);
}

#[test]
fn reference_claims_fit_the_size_targets() {
    let file = load();
    let size = |name: &str| {
        file.valid
            .iter()
            .find(|v| v.name == name)
            .expect("vector")
            .token_chars
    };
    // Targets from the project brief: 96 characters (HMAC), 112 (AEAD).
    assert!(
        size("hmac reference claims") <= 96,
        "{}",
        size("hmac reference claims")
    );
    assert!(
        size("xchacha reference claims") <= 112,
        "{}",
        size("xchacha reference claims")
    );
}

#[test]
fn call_context_vectors_reproduce() {
    let file = load();
    assert!(file.call_context.len() >= 4);
    for v in &file.call_context {
        let value: serde_json::Value = serde_json::from_str(&v.arguments_json).expect("json");
        assert_eq!(reqstate::canonical_json(&value), v.canonical_json);
        let context =
            reqstate::call_context(&v.principal, &v.audience, &v.method, &v.arguments_json)
                .expect("context");
        assert_eq!(hex::encode(context), v.context, "{}", v.arguments_json);
    }
}

#[test]
fn xchacha_nonces_are_hedged_as_the_spec_says() {
    // Recomputed from FORMAT.md §4.2 with ring alone: open the token with the
    // nonce it carries, then check that nonce is HMAC-SHA256(K_n, r ‖ A ‖ body)[0..24].
    use base64::Engine as _;
    let file = load();
    let mut checked = 0;
    let cases = file
        .valid
        .iter()
        .map(|v| {
            (
                v.key_id,
                &v.random,
                &v.nonce,
                &v.token,
                v.tool.as_bytes().to_vec(),
                hex::decode(&v.context).expect("hex"),
            )
        })
        .chain(file.sealed.iter().map(|s| {
            (
                s.key_id,
                &s.random,
                &s.nonce,
                &s.token,
                Vec::new(),
                hex::decode(&s.aad).expect("hex"),
            )
        }));
    for (key_id, random, nonce, token, tool, context) in cases {
        let k = file.keys.iter().find(|k| k.id == key_id).expect("key");
        if k.algorithm != Algorithm::XChaCha20Poly1305.name() {
            assert!(
                random.is_empty() && nonce.is_empty(),
                "an HMAC vector names a nonce"
            );
            continue;
        }
        let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(token)
            .expect("base64url");
        let (prefix, rest) = raw.split_at(2);
        let (in_token, sealed) = rest.split_at(24);
        assert_eq!(hex::encode(in_token), *nonce);
        let mut ad = prefix.to_vec();
        ad.extend_from_slice(&(tool.len() as u32).to_be_bytes());
        ad.extend_from_slice(&tool);
        ad.extend_from_slice(&(context.len() as u32).to_be_bytes());
        ad.extend_from_slice(&context);
        let working = hex::decode(&k.derived_key).expect("hex");
        let hkey = chacha20::Key::try_from(&working[..]).expect("32 bytes");
        let hin: [u8; 16] = in_token[..16].try_into().expect("16 bytes");
        let sub: [u8; 32] = chacha20::hchacha::<chacha20::R20>(&hkey, &hin.into()).into();
        let mut n12 = [0u8; 12];
        n12[4..].copy_from_slice(&in_token[16..]);
        let opening = ring::aead::LessSafeKey::new(
            ring::aead::UnboundKey::new(&ring::aead::CHACHA20_POLY1305, &sub).expect("key"),
        );
        let mut buf = sealed.to_vec();
        let body = opening
            .open_in_place(
                ring::aead::Nonce::assume_unique_for_key(n12),
                ring::aead::Aad::from(&ad[..]),
                &mut buf,
            )
            .expect("the vector opens");
        let nonce_key = ring::hmac::Key::new(
            ring::hmac::HMAC_SHA256,
            &hex::decode(&k.nonce_key).expect("hex"),
        );
        let mut msg = hex::decode(random).expect("hex");
        assert_eq!(msg.len(), 24, "r is 24 bytes");
        msg.extend_from_slice(&ad);
        msg.extend_from_slice(body);
        let expected = ring::hmac::sign(&nonce_key, &msg);
        assert_eq!(
            hex::encode(&expected.as_ref()[..24]),
            *nonce,
            "key {key_id}"
        );
        checked += 1;
    }
    assert!(checked >= 3, "only {checked} XChaCha vectors");
}
