//! Token format v1 test vectors (tests/vectors/v1.json), checked in both
//! directions: minting with the vector's clock and nonce reproduces its bytes,
//! and verifying yields its claims or its error.
//!
//! `REQSTATE_WRITE_VECTORS=1 cargo test --test core_vectors` rewrites the file
//! from the definitions below; without it the file must match them exactly.

#[path = "support/golden.rs"]
mod golden;

use std::time::Duration;

use reqstate::{
    Aad, Algorithm, Binding, Codec, Error, FixedClock, KeyId, KeySpec, KeyStatus, Keyring,
    MAX_CONTEXT_LEN, MAX_TOOL_LEN, MemoryReplayStore, Policy, RandomnessUnavailable, ReplayStore,
    Secret, SecureRandom, SpentId, StoreError,
};
use serde::{Deserialize, Serialize};

const VECTORS_PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/vectors/v1.json");

/// A scripted "random" source: hands out its bytes in order, one draw after
/// the other, and fails a draw it has not enough bytes left for. Only for
/// reproducing vectors: a single-use mint draws its 16-byte token id, then
/// (XChaCha20-Poly1305) the 24 bytes that hedge the nonce (FORMAT.md §4.2,
/// §8's mint list), so its script is `token_id ‖ random`.
struct Scripted(std::sync::Mutex<Vec<u8>>);

impl Scripted {
    fn new(bytes: &[u8]) -> Self {
        Scripted(std::sync::Mutex::new(bytes.to_vec()))
    }
}

impl SecureRandom for Scripted {
    fn fill(&self, dest: &mut [u8]) -> Result<(), RandomnessUnavailable> {
        let mut left = self.0.lock().map_err(|_| RandomnessUnavailable)?;
        if dest.len() > left.len() {
            return Err(RandomnessUnavailable);
        }
        dest.copy_from_slice(&left[..dest.len()]);
        left.drain(..dest.len());
        Ok(())
    }
}

/// The FORMAT.md §5.1 record name (without a deployment prefix) of a
/// single-use token, written here from the spec rather than by the crate.
fn record_name(key_id: u32, token_id: &[u8]) -> String {
    format!("spent:v1:{key_id}:{}", hex::encode(token_id))
}

/// A spent-token store over record names (FORMAT.md §5.1), as the vectors
/// model it: `spent` names are live records; what a consume records is kept
/// with its `until`.
#[derive(Default)]
struct NamedStore(std::sync::Mutex<std::collections::BTreeMap<String, u64>>);

impl NamedStore {
    fn holding(names: &[String]) -> Self {
        NamedStore(std::sync::Mutex::new(
            names.iter().map(|n| (n.clone(), u64::MAX)).collect(),
        ))
    }

    fn records(&self) -> std::collections::BTreeMap<String, u64> {
        self.0.lock().expect("store lock").clone()
    }
}

impl ReplayStore for NamedStore {
    fn insert_if_absent(&self, id: &SpentId, until: u64, now: u64) -> Result<bool, StoreError> {
        let mut records = self.0.lock().map_err(|_| StoreError::Unavailable)?;
        let name = id.record_name();
        match records.get(&name) {
            Some(&live_until) if live_until > now => Ok(false),
            _ => {
                records.insert(name, until);
                Ok(true)
            }
        }
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
    single_use: Vec<SingleUseVector>,
    accepted: Vec<AcceptedVector>,
    invalid: Vec<InvalidVector>,
    mint_invalid: Vec<MintInvalidVector>,
    keyrings: Vec<KeyringVector>,
    policies: Vec<PolicyVector>,
}

/// A policy to build (FORMAT.md §8): accepted, or refused with
/// `invalid_argument`. Both sides of each knob's range.
#[derive(Serialize, Deserialize, PartialEq, Debug, Clone)]
struct PolicyVector {
    name: String,
    policy: VectorPolicy,
    /// The refusal's name; absent if the policy is built.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    expect_fail: Option<String>,
}

/// A keyring to load (FORMAT.md §1, docs/KEYRING.md): accepted, or refused.
#[derive(Serialize, Deserialize, PartialEq, Debug, Clone)]
struct KeyringVector {
    name: String,
    /// (id, algorithm, status, secret as standard base64) per key.
    keys: Vec<KeyringEntry>,
    /// The refusal's name; absent if the keyring loads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    expect_fail: Option<String>,
}

#[derive(Serialize, Deserialize, PartialEq, Debug, Clone)]
struct KeyringEntry {
    id: u32,
    algorithm: String,
    status: String,
    secret: String,
}

#[derive(Serialize, Deserialize, PartialEq, Debug, Clone, Copy)]
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
    /// The policy minted and verified under, if not the file's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    policy: Option<VectorPolicy>,
}

/// A single-use state token (FORMAT.md §5.1, kind 2) minted under its key
/// as the only, primary key at `now`, the random source handing out
/// `token_id` and then (XChaCha20-Poly1305) `random`. Consuming it at `now`
/// with an empty store succeeds with these claims and records
/// `spent_record` until `record_until`; consuming it again is `replayed`;
/// verifying it (not consuming) is `single_use`.
#[derive(Serialize, Deserialize, PartialEq, Debug, Clone)]
struct SingleUseVector {
    name: String,
    key_id: u32,
    tool: String,
    step: String,
    state_cbor: String,
    state_json: serde_json::Value,
    ttl: u64,
    context: String,
    now: u64,
    /// The 16 bytes of token id the random source handed out first, hex.
    token_id: String,
    /// The 24 bytes that hedged the nonce (FORMAT.md §4.2's `r`), drawn after
    /// the token id, hex; empty for HMAC.
    random: String,
    nonce: String,
    issued_at: u64,
    expires_at: u64,
    token: String,
    token_chars: usize,
    /// The record's name (FORMAT.md §5.1, without a deployment prefix).
    spent_record: String,
    /// `expires_at + clock_leeway`, saturating: how long the record is kept.
    record_until: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    policy: Option<VectorPolicy>,
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
    /// "verify" (with `tool`, `context` and, if set, `expected_step`),
    /// "consume" (as verify, with a store holding `spent`) or "unseal" (with
    /// `context` as aad).
    operation: String,
    token: String,
    tool: String,
    context: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    expected_step: Option<String>,
    now: u64,
    /// The policy to verify under, if not the file's default `policy`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    policy: Option<VectorPolicy>,
    /// The caller's type for the state (FORMAT.md §8 step 14): absent, the
    /// state is not decoded; "uint", an unsigned integer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    decode_as: Option<String>,
    /// consume: the records (FORMAT.md §5.1 names) the store holds, live,
    /// before the call. A refused consume leaves the store as it was.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    spent: Vec<String>,
    expect_fail: String,
}

/// A token that verifies (or unseals), typically at the accepted side of a
/// boundary; most carry a body only a key holder could make.
#[derive(Serialize, Deserialize, PartialEq, Debug, Clone)]
struct AcceptedVector {
    name: String,
    /// "verify", "consume" or "unseal", as for invalid vectors.
    operation: String,
    token: String,
    tool: String,
    context: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    expected_step: Option<String>,
    now: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    policy: Option<VectorPolicy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    decode_as: Option<String>,
    /// verify: the claims found (the state as its exact CBOR bytes, hex).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    issued_at: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    expires_at: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    step: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    state_cbor: Option<String>,
    /// unseal: the payload, hex.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    payload: Option<String>,
    /// consume: the key id of the token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    key_id: Option<u32>,
    /// consume: the records the store holds before the call (none of them
    /// this token's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    spent: Vec<String>,
    /// consume: the record the call adds, and until when it is kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    spent_record: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    record_until: Option<u64>,
}

/// A mint (or seal) that must be refused: the inputs and the reason.
#[derive(Serialize, Deserialize, PartialEq, Debug, Clone)]
struct MintInvalidVector {
    name: String,
    /// "mint" (tool, step, state_cbor, ttl, context) or "seal" (payload, context as aad).
    operation: String,
    /// The key minted under, as the keyring's only, primary key.
    key_id: u32,
    tool: String,
    step: String,
    /// mint: the state's CBOR, hex.
    state_cbor: String,
    /// seal: the payload, hex.
    payload: String,
    ttl: u64,
    context: String,
    now: u64,
    /// What the random source hands out, hex; a draw of any other length fails.
    random: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    policy: Option<VectorPolicy>,
    /// mint: a single-use token (FORMAT.md §5.1), whose 16-byte token id is
    /// drawn from the random source after the state is checked.
    #[serde(default, skip_serializing_if = "is_false")]
    single_use: bool,
    expect_fail: String,
}

fn is_false(b: &bool) -> bool {
    !*b
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
        key(u32::MAX, Algorithm::HmacSha256, KeyStatus::Active, 0x50),
    ]
}

fn base64_standard(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn spec_of(k: &VectorKey, status: KeyStatus) -> KeySpec {
    KeySpec::new(
        KeyId::new(k.id),
        Algorithm::from_name(&k.algorithm).expect("known algorithm"),
        status,
        Secret::from_base64(&k.secret).expect("base64 secret"),
    )
}

/// The binding of a vector that is known to be in range.
fn bind<'a>(tool: &'a str, context: &'a [u8]) -> Binding<'a> {
    Binding::with_context_bytes(tool, context).expect("binding")
}

/// Associated data of a vector that is known to be in range.
fn aad(bytes: &[u8]) -> Aad<'_> {
    Aad::new(bytes).expect("aad")
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
    Codec::with_parts(keyring, policy, FixedClock(now), Scripted::new(nonce))
}

/// A vector's policy, or the default one.
fn policy_of(p: Option<VectorPolicy>) -> Policy {
    match p {
        None => Policy::new(),
        Some(p) => Policy::new()
            .with_max_token_len(p.max_token_len)
            .and_then(|q| q.with_clock_leeway(Duration::from_secs(p.clock_leeway)))
            .and_then(|q| q.with_max_lifetime(Duration::from_secs(p.max_lifetime)))
            .expect("vector policy is within bounds"),
    }
}

fn default_vector_policy() -> VectorPolicy {
    VectorPolicy {
        max_token_len: Policy::DEFAULT_MAX_TOKEN_LEN,
        clock_leeway: Policy::DEFAULT_CLOCK_LEEWAY,
        max_lifetime: Policy::DEFAULT_MAX_LIFETIME,
    }
}

fn verifying_codec(keys: &[VectorKey], now: u64) -> Codec {
    verifying_codec_with(keys, now, None)
}

fn verifying_codec_with(keys: &[VectorKey], now: u64, policy: Option<VectorPolicy>) -> Codec {
    Codec::with_parts(
        verification_keyring(keys),
        policy_of(policy),
        FixedClock(now),
        Scripted::new(&[]),
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
    mint_vector_at(
        keys, name, key_id, tool, step, state_json, ttl, context, seed, NOW, None,
    )
}

#[allow(clippy::too_many_arguments)]
fn mint_vector_at(
    keys: &[VectorKey],
    name: &str,
    key_id: u32,
    tool: &str,
    step: &str,
    state_json: serde_json::Value,
    ttl: u64,
    context: &[u8],
    seed: u8,
    now: u64,
    policy: Option<VectorPolicy>,
) -> ValidVector {
    let random = random_for(keys, key_id, seed);
    let codec = minting_codec(keys, key_id, now, &random, policy_of(policy));
    let state: ciborium::Value = serde_json::from_value(state_json.clone()).expect("state");
    let mut state_cbor = Vec::new();
    ciborium::into_writer(&state, &mut state_cbor).expect("cbor");
    let minted = codec
        .mint(bind(tool, context), step, &state, Duration::from_secs(ttl))
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
        now,
        random: hex::encode(&random),
        nonce: nonce_in(&minted.token),
        issued_at: minted.issued_at,
        expires_at: minted.expires_at,
        token_chars: minted.token.len(),
        token: minted.token,
        policy,
    }
}

/// A single-use token id for the vectors: every byte value class that a hex
/// encoder can get wrong (leading zero nibbles, letters) appears.
fn token_id_for(seed: u8) -> [u8; 16] {
    let mut id = [
        0x00, 0x0a, 0xf0, 0xff, 0x10, 0x7f, 0x80, 0x01, 0, 0, 0, 0, 0, 0, 0, 0,
    ];
    for (i, b) in id.iter_mut().enumerate().skip(8) {
        *b = (i as u8)
            .wrapping_mul(37)
            .wrapping_add(seed.wrapping_mul(11));
    }
    id[0] = seed;
    id
}

/// Mints a single-use vector (FORMAT.md §5.1) with a scripted random source.
#[allow(clippy::too_many_arguments)]
fn single_use_vector(
    keys: &[VectorKey],
    name: &str,
    key_id: u32,
    tool: &str,
    step: &str,
    state_json: serde_json::Value,
    ttl: u64,
    context: &[u8],
    id_seed: u8,
    seed: u8,
    now: u64,
    policy: Option<VectorPolicy>,
) -> SingleUseVector {
    let token_id = token_id_for(id_seed);
    let random = random_for(keys, key_id, seed);
    let script = [&token_id[..], &random[..]].concat();
    let codec = minting_codec(keys, key_id, now, &script, policy_of(policy));
    let state: ciborium::Value = serde_json::from_value(state_json.clone()).expect("state");
    let mut state_cbor = Vec::new();
    ciborium::into_writer(&state, &mut state_cbor).expect("cbor");
    let minted = codec
        .mint_single_use(bind(tool, context), step, &state, Duration::from_secs(ttl))
        .expect("single-use vector mints");
    let leeway = policy.unwrap_or_else(default_vector_policy).clock_leeway;
    SingleUseVector {
        name: name.into(),
        key_id,
        tool: tool.into(),
        step: step.into(),
        state_cbor: hex::encode(state_cbor),
        state_json,
        ttl,
        context: hex::encode(context),
        now,
        token_id: hex::encode(token_id),
        random: hex::encode(&random),
        nonce: nonce_in(&minted.token),
        issued_at: minted.issued_at,
        expires_at: minted.expires_at,
        token_chars: minted.token.len(),
        token: minted.token,
        spent_record: record_name(key_id, &token_id),
        record_until: minted.expires_at.saturating_add(leeway),
        policy,
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
        policy: v.policy,
        decode_as: None,
        spent: Vec::new(),
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
    let mut valid = vec![
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

    // Boundaries a genuine mint reaches (FORMAT.md §3, §4, §8).
    valid.push(mint_vector(
        &keys,
        "hmac five-byte key id 2^32 - 1",
        u32::MAX,
        "increase-counter",
        "confirm",
        reference.clone(),
        600,
        REFERENCE_CONTEXT,
        0,
    ));
    valid.push(mint_vector_at(
        &keys,
        "hmac at the end of the clock: expires_at = 2^64 - 1 (leeway sum saturates)",
        1,
        "increase-counter",
        "confirm",
        reference.clone(),
        1,
        REFERENCE_CONTEXT,
        0,
        u64::MAX - 1,
        None,
    ));
    valid.push(mint_vector(
        &keys,
        "xchacha lifetime = max_lifetime",
        2,
        "increase-counter",
        "confirm",
        reference.clone(),
        Policy::DEFAULT_MAX_LIFETIME,
        REFERENCE_CONTEXT,
        8,
    ));
    valid.push(mint_vector(
        &keys,
        "hmac tool and step of 256 bytes, non-ASCII step",
        1,
        &"t".repeat(256),
        &format!("{}é", "s".repeat(254)),
        serde_json::json!([1, "two"]),
        600,
        b"",
        0,
    ));
    valid.push(mint_vector(
        &keys,
        "xchacha state nested 16 levels",
        2,
        "increase-counter",
        "confirm",
        (0..15).fold(serde_json::json!([0]), |v, _| serde_json::json!([v])),
        600,
        REFERENCE_CONTEXT,
        9,
    ));
    valid.push(mint_vector_at(
        &keys,
        "hmac token of exactly max_token_len characters",
        1,
        "increase-counter",
        "confirm",
        reference.clone(),
        600,
        REFERENCE_CONTEXT,
        0,
        NOW,
        Some(VectorPolicy {
            max_token_len: 76,
            ..default_vector_policy()
        }),
    ));
    assert_eq!(valid.last().expect("vector").token_chars, 76);

    let sealed = [
        (
            1u32,
            3u8,
            &b"{\"v\":1,\"t\":\"increase-counter\",\"s\":\"opaque to reqstate\"}"[..],
        ),
        (
            2,
            4,
            &b"{\"v\":1,\"t\":\"increase-counter\",\"s\":\"opaque to reqstate\"}"[..],
        ),
        (1, 0, &b""[..]),
    ]
    .into_iter()
    .map(|(key_id, seed, payload)| {
        let random = random_for(&keys, key_id, seed);
        let codec = minting_codec(&keys, key_id, NOW, &random, Policy::new());
        let aad_bytes = b"tools/call";
        let token = codec.seal(payload, aad(aad_bytes)).expect("seal").token;
        SealedVector {
            name: if payload.is_empty() {
                format!("empty sealed payload under key {key_id} (the shortest token)")
            } else {
                format!("sealed payload under key {key_id}")
            },
            key_id,
            now: NOW,
            payload: hex::encode(payload),
            aad: hex::encode(aad_bytes),
            random: hex::encode(&random),
            nonce: nonce_in(&token),
            token,
        }
    })
    .collect::<Vec<_>>();

    // Single-use tokens (FORMAT.md §5.1): minted with a scripted token id.
    let su = |name: &str, key_id: u32, id_seed: u8, seed: u8| {
        single_use_vector(
            &keys,
            name,
            key_id,
            "increase-counter",
            "confirm",
            reference.clone(),
            600,
            REFERENCE_CONTEXT,
            id_seed,
            seed,
            NOW,
            None,
        )
    };
    let mut single_use = vec![
        su("hmac single-use reference claims", 1, 0, 0),
        su("xchacha single-use reference claims", 2, 1, 10),
        su(
            "hmac single-use, same claims, another token id: another token",
            1,
            6,
            0,
        ),
        su(
            "xchacha single-use, same claims and r, another token id: another token",
            2,
            5,
            10,
        ),
        su(
            "hmac single-use under key id 2^32 - 1 (the record name's key id is decimal)",
            u32::MAX,
            2,
            0,
        ),
    ];
    single_use.push(single_use_vector(
        &keys,
        "hmac single-use at the end of the clock: record_until saturates at 2^64 - 1",
        1,
        "increase-counter",
        "confirm",
        reference.clone(),
        1,
        REFERENCE_CONTEXT,
        3,
        0,
        u64::MAX - 1,
        None,
    ));
    single_use.push(single_use_vector(
        &keys,
        "hmac single-use token of exactly max_token_len characters (100)",
        1,
        "increase-counter",
        "confirm",
        reference.clone(),
        600,
        REFERENCE_CONTEXT,
        4,
        0,
        NOW,
        Some(VectorPolicy {
            max_token_len: 100,
            ..default_vector_policy()
        }),
    ));
    assert_eq!(single_use.last().expect("vector").token_chars, 100);
    assert_eq!(
        single_use[0].token_chars,
        valid[0].token_chars + 24,
        "§5.1: a token id costs 24 characters"
    );

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
                bind("increase-counter", REFERENCE_CONTEXT),
                "confirm",
                &reference,
                Duration::from_secs(2 * 86_400),
            )
            .expect("mint")
            .token
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
        "step 6: kind 2 to verify is single_use, before the key and the tag",
        flip_bit(&hmac.token, 0, 0x08),
        "single_use",
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

    // ---- Both sides of every rule of FORMAT.md §2-§8 (names start with the
    // ---- section or step they pin).
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let raw_of = |t: &str| b64.decode(t).expect("valid token");
    let enc = |b: &[u8]| b64.encode(b);
    let hmac_raw = raw_of(&hmac.token);
    let xchacha_raw = raw_of(&xchacha.token);
    let rule = |name: &str, token: String, expect: &str| invalid(hmac, name, token, expect);
    let with_header = |h: u8| {
        let mut r = hmac_raw.clone();
        r[0] = h;
        enc(&r)
    };
    let with_bytes = |bytes: &[u8]| enc(bytes);
    let pad = |prefix: &[u8], n: usize| {
        let mut r = prefix.to_vec();
        r.extend(std::iter::repeat_n(0x5au8, n));
        enc(&r)
    };

    // §2 base64url.
    let dash = valid
        .iter()
        .find(|v| v.token.contains('-') && v.policy.is_none())
        .expect("a vector token with '-'");
    let underscore = valid
        .iter()
        .find(|v| v.token.contains('_') && v.policy.is_none())
        .expect("a vector token with '_'");
    bad.push(invalid(
        dash,
        "§2: '+' in place of '-' (standard alphabet)",
        dash.token.replacen('-', "+", 1),
        "malformed",
    ));
    bad.push(invalid(
        underscore,
        "§2: '/' in place of '_' (standard alphabet)",
        underscore.token.replacen('_', "/", 1),
        "malformed",
    ));
    assert_eq!(short.token_chars % 4, 3);
    bad.push(invalid(
        short,
        "§2: correct padding '=' appended",
        format!("{}=", short.token),
        "malformed",
    ));
    bad.push(rule(
        "§2: line feed inside",
        format!("{}\n{}", &hmac.token[..40], &hmac.token[40..]),
        "malformed",
    ));
    bad.push(rule(
        "§2: trailing space",
        format!("{} ", hmac.token),
        "malformed",
    ));
    assert_eq!(hmac.token_chars % 4, 0);
    bad.push(rule(
        "§2: 4n+1 characters",
        format!("{}A", hmac.token),
        "malformed",
    ));
    bad.push(rule("§2: 4n+1 characters, 1", "A".into(), "malformed"));

    // §3 header, §8 step 3 and its order.
    bad.push(rule(
        "§3: version 0",
        with_header(0x01),
        "unsupported_version",
    ));
    bad.push(rule(
        "§3: version 15",
        with_header(0xf1),
        "unsupported_version",
    ));
    bad.push(rule("§3: reserved kind 3", with_header(0x1d), "malformed"));
    bad.push(rule(
        "§3: algorithm identifier 0",
        with_header(0x10),
        "unsupported_algorithm",
    ));
    bad.push(rule(
        "step 3 order: version 2, kind 3, algorithm 0",
        with_header(0x2c),
        "unsupported_version",
    ));
    bad.push(rule(
        "step 3 order: version 0, kind 2, algorithm 1",
        with_header(0x09),
        "unsupported_version",
    ));
    bad.push(rule(
        "step 3: kind 2 is not reserved: kind 2, algorithm 0",
        with_header(0x18),
        "unsupported_algorithm",
    ));
    bad.push(rule(
        "step 3 order: kind 3, algorithm 3",
        with_header(0x1f),
        "malformed",
    ));
    bad.push(rule(
        "step 3 before 4: header byte only, version 2",
        with_bytes(&[0x21]),
        "unsupported_version",
    ));
    bad.push(rule(
        "step 3 before 4: header byte only, algorithm 0",
        with_bytes(&[0x10]),
        "unsupported_algorithm",
    ));
    bad.push(rule(
        "step 3 before 4: header byte only, kind 3",
        with_bytes(&[0x1e]),
        "malformed",
    ));

    // §3 key id, §8 step 4.
    bad.push(rule(
        "step 4: header byte only (key id missing)",
        with_bytes(&[0x11]),
        "malformed",
    ));
    bad.push(rule(
        "step 4: key id truncated after 3 continuation bytes",
        with_bytes(&[0x11, 0x80, 0x80, 0x80]),
        "malformed",
    ));
    bad.push(rule(
        "step 4: five-byte key id 2^28 is read (unknown)",
        with_key_id(&hmac.token, &[0x80, 0x80, 0x80, 0x80, 0x01]),
        "unknown_key",
    ));
    bad.push(rule(
        "step 4: five-byte key id not minimal",
        with_key_id(&hmac.token, &[0x81, 0x80, 0x80, 0x80, 0x00]),
        "malformed",
    ));
    bad.push(rule(
        "step 4: key id 2^35 - 1",
        with_key_id(&hmac.token, &[0xff, 0xff, 0xff, 0xff, 0x7f]),
        "malformed",
    ));
    bad.push(rule(
        "step 4: two-byte key id 0",
        with_key_id(&hmac.token, &[0x80, 0x00]),
        "malformed",
    ));

    // §8 step 5, by the header's algorithm.
    bad.push(rule(
        "step 5: hmac, prefix + 15 bytes",
        enc(&hmac_raw[..17]),
        "malformed",
    ));
    bad.push(rule(
        "step 5: hmac, prefix + 16 bytes (empty body) reaches the tag",
        enc(&hmac_raw[..18]),
        "authentication_failed",
    ));
    bad.push(invalid(
        xchacha,
        "step 5: xchacha, prefix + 39 bytes",
        enc(&xchacha_raw[..41]),
        "malformed",
    ));
    bad.push(invalid(
        xchacha,
        "step 5: xchacha, prefix + 40 bytes (empty body) reaches the tag",
        enc(&xchacha_raw[..42]),
        "authentication_failed",
    ));
    bad.push(rule(
        "step 5 uses the header's algorithm: hmac header, xchacha key 2, 20 bytes",
        pad(&[0x11, 0x02], 18),
        "algorithm_mismatch",
    ));
    bad.push(rule(
        "step 5 uses the header's algorithm: xchacha header, hmac key 1, 20 bytes",
        pad(&[0x12, 0x01], 18),
        "malformed",
    ));
    bad.push(rule(
        "step 5 before 6: short sealed token to verify",
        pad(&[0x15, 0x01], 15),
        "malformed",
    ));
    // §8 steps 6 and 7 and their order.
    bad.push(rule(
        "step 6 before 7: sealed token under unknown key 5 to verify",
        pad(&[0x15, 0x05], 16),
        "wrong_kind",
    ));
    let mut unseal_retired = invalid(
        &retired,
        "step 6 before 7: state token under retired key 3 to unseal",
        retired.token.clone(),
        "wrong_kind",
    );
    unseal_retired.operation = "unseal".into();
    unseal_retired.tool = String::new();
    bad.push(unseal_retired);
    bad.push(rule(
        "step 7: unknown key 5",
        pad(&[0x11, 0x05], 16),
        "unknown_key",
    ));
    bad.push(rule(
        "step 7 order: retired key 3 (xchacha) named by an hmac header",
        pad(&[0x11, 0x03], 16),
        "retired_key",
    ));

    // §8 steps 0 and 1.
    let mut no_tool = rule("step 0: empty tool", hmac.token.clone(), "invalid_argument");
    no_tool.tool = String::new();
    bad.push(no_tool);
    let mut long_tool = rule(
        "step 0: tool of 257 bytes",
        hmac.token.clone(),
        "invalid_argument",
    );
    long_tool.tool = "t".repeat(257);
    bad.push(long_tool);
    let mut long_context = rule(
        "step 0: context of 65537 bytes",
        hmac.token.clone(),
        "invalid_argument",
    );
    long_context.context = hex::encode(vec![0u8; 65_537]);
    bad.push(long_context);
    let mut before_size = rule(
        "step 0 before 1: empty tool and 8193 characters",
        "A".repeat(Policy::DEFAULT_MAX_TOKEN_LEN + 1),
        "invalid_argument",
    );
    before_size.tool = String::new();
    bad.push(before_size);
    let mut long_aad = invalid(
        hmac,
        "step 0: unseal with an aad of 65537 bytes",
        sealed[0].token.clone(),
        "invalid_argument",
    );
    long_aad.operation = "unseal".into();
    long_aad.tool = String::new();
    long_aad.context = hex::encode(vec![0u8; 65_537]);
    bad.push(long_aad);
    bad.push(rule(
        "step 1: exactly max_token_len characters are decoded",
        "A".repeat(Policy::DEFAULT_MAX_TOKEN_LEN),
        "unsupported_version",
    ));
    bad.push(rule(
        "step 1 before 2: 8193 characters outside the alphabet",
        "!".repeat(Policy::DEFAULT_MAX_TOKEN_LEN + 1),
        "too_large",
    ));
    let mut one_over = rule(
        "step 1: max_token_len + 1 characters (policy 75, token 76)",
        hmac.token.clone(),
        "too_large",
    );
    one_over.policy = Some(VectorPolicy {
        max_token_len: 75,
        ..default_vector_policy()
    });
    bad.push(one_over);

    // §8 steps 10-14 on genuine tokens.
    let leeway = Policy::DEFAULT_CLOCK_LEEWAY;
    let mut early_step = rule(
        "step 11 before 13: not yet valid and wrong step",
        hmac.token.clone(),
        "not_yet_valid",
    );
    early_step.now = hmac.issued_at - leeway - 1;
    early_step.expected_step = Some("amount".into());
    bad.push(early_step);
    let mut late_step = rule(
        "step 12 before 13: expired and wrong step",
        hmac.token.clone(),
        "expired",
    );
    late_step.now = hmac.expires_at + leeway;
    late_step.expected_step = Some("amount".into());
    bad.push(late_step);
    let end = valid
        .iter()
        .find(|v| v.now == u64::MAX - 1)
        .expect("end-of-clock vector");
    let mut saturated = invalid(
        end,
        "step 12: now = 2^64 - 1 >= expires_at + leeway saturated to 2^64 - 1",
        end.token.clone(),
        "expired",
    );
    saturated.now = u64::MAX;
    bad.push(saturated);
    for (name, expected) in [
        ("step 13: empty expected step", ""),
        ("step 13: expected step differs in case", "Confirm"),
        ("step 13: expected step with a trailing space", "confirm "),
    ] {
        let mut v = rule(name, hmac.token.clone(), "wrong_step");
        v.expected_step = Some(expected.into());
        bad.push(v);
    }
    let mut not_uint = rule(
        "step 14: state is a map, the caller wants an unsigned integer",
        hmac.token.clone(),
        "state_decoding",
    );
    not_uint.decode_as = Some("uint".into());
    bad.push(not_uint);
    let mut step_first = rule(
        "step 13 before 14: wrong step and a state that does not decode",
        hmac.token.clone(),
        "wrong_step",
    );
    step_first.decode_as = Some("uint".into());
    step_first.expected_step = Some("amount".into());
    bad.push(step_first);

    // Key holder's bodies with their expected reasons (steps 9-13).
    let st = hex::decode(&hmac.state_cbor).expect("hex");
    let deep = |open: &[u8], close: &[u8], n: usize| {
        let mut b = open.repeat(n);
        b.push(0x00);
        b.extend(close.repeat(n));
        b
    };
    let m = "malformed";
    let reasoned: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "claims map of 3 entries",
            {
                let mut b = claims_body(NOW, 600, "confirm", &[]);
                b[0] = 0xa3;
                b.pop();
                b
            },
            m,
        ),
        (
            "claims map of 5 entries",
            {
                let mut b = claims_body(NOW, 600, "confirm", &st);
                b[0] = 0xa5;
                b.extend([0x05, 0xf6]);
                b
            },
            m,
        ),
        (
            "indefinite-length claims map",
            {
                let mut b = claims_body(NOW, 600, "confirm", &st);
                b[0] = 0xbf;
                b.push(0xff);
                b
            },
            m,
        ),
        (
            "claims key 1 not in shortest form",
            {
                let b = claims_body(NOW, 600, "confirm", &st);
                [&[0xa4, 0x18, 0x01][..], &b[2..]].concat()
            },
            m,
        ),
        (
            "lifetime not in shortest form",
            {
                let mut b = vec![0xa4, 0x01];
                b.extend(cbor_head(0, NOW));
                b.extend([0x02, 0x1a, 0, 0, 0x02, 0x58, 0x03, 0x67]);
                b.extend(b"confirm");
                b.push(0x04);
                b.extend(&st);
                b
            },
            m,
        ),
        (
            "step length not in shortest form",
            {
                let mut b = vec![0xa4, 0x01];
                b.extend(cbor_head(0, NOW));
                b.extend([0x02, 0x19, 0x02, 0x58, 0x03, 0x78, 0x07]);
                b.extend(b"confirm");
                b.push(0x04);
                b.extend(&st);
                b
            },
            m,
        ),
        (
            "indefinite-length step",
            {
                let mut b = vec![0xa4, 0x01];
                b.extend(cbor_head(0, NOW));
                b.extend([0x02, 0x19, 0x02, 0x58, 0x03, 0x7f, 0x67]);
                b.extend(b"confirm");
                b.extend([0xff, 0x04]);
                b.extend(&st);
                b
            },
            m,
        ),
        (
            "step as a byte string",
            {
                let mut b = claims_body(NOW, 600, "confirm", &st);
                let at = b.iter().position(|&x| x == 0x67).expect("step head");
                b[at] = 0x47;
                b
            },
            m,
        ),
        (
            "negative issued_at",
            {
                let mut b = claims_body(NOW, 600, "confirm", &st);
                b[2] = 0x3a;
                b
            },
            m,
        ),
        (
            "state nested 17 levels through maps",
            claims_body(NOW, 600, "s", &deep(&[0xa1, 0x00], &[], 17)),
            m,
        ),
        (
            "state nested 17 levels through tags",
            claims_body(NOW, 600, "s", &deep(&[0xc6], &[], 17)),
            m,
        ),
        (
            "state nested 17 levels through indefinite arrays",
            claims_body(NOW, 600, "s", &deep(&[0x9f], &[0xff], 17)),
            m,
        ),
        (
            "state nested 17 levels, a tag inside 16 arrays",
            claims_body(NOW, 600, "s", &[vec![0x81; 16], vec![0xc6, 0x00]].concat()),
            m,
        ),
        (
            "state: reserved additional information 28",
            claims_body(NOW, 600, "s", &[0x1c]),
            m,
        ),
        (
            "state: reserved additional information 29",
            claims_body(NOW, 600, "s", &[0x5d]),
            m,
        ),
        (
            "state: reserved additional information 30",
            claims_body(NOW, 600, "s", &[0xfe]),
            m,
        ),
        ("state: stray break", claims_body(NOW, 600, "s", &[0xff]), m),
        (
            "state: break inside a definite array",
            claims_body(NOW, 600, "s", &[0x82, 0x01, 0xff]),
            m,
        ),
        (
            "state: indefinite text with a byte-string chunk",
            claims_body(NOW, 600, "s", &[0x7f, 0x41, 0x61, 0xff]),
            m,
        ),
        (
            "state: indefinite text with an indefinite chunk",
            claims_body(NOW, 600, "s", &[0x7f, 0x7f, 0xff, 0xff]),
            m,
        ),
        (
            "state: indefinite byte string with an integer chunk",
            claims_body(NOW, 600, "s", &[0x5f, 0x01, 0xff]),
            m,
        ),
        (
            "state: indefinite unsigned integer",
            claims_body(NOW, 600, "s", &[0x1f]),
            m,
        ),
        (
            "state: indefinite negative integer",
            claims_body(NOW, 600, "s", &[0x3f]),
            m,
        ),
        (
            "state: indefinite tag",
            claims_body(NOW, 600, "s", &[0xdf, 0x00]),
            m,
        ),
        (
            "state: indefinite map, key without value",
            claims_body(NOW, 600, "s", &[0xbf, 0x01, 0xff]),
            m,
        ),
        (
            "state: definite map, key without value",
            claims_body(NOW, 600, "s", &[0xa1, 0x01]),
            m,
        ),
        (
            "state: truncated 8-byte argument",
            claims_body(NOW, 600, "s", &[0x1b, 0x00, 0x00]),
            m,
        ),
        (
            "state: map key not UTF-8",
            claims_body(NOW, 600, "s", &[0xa1, 0x62, 0xc3, 0x28, 0x00]),
            m,
        ),
        (
            "state: text chunk not UTF-8",
            claims_body(NOW, 600, "s", &[0x7f, 0x62, 0xc3, 0x28, 0xff]),
            m,
        ),
        (
            "state: character split across text chunks",
            claims_body(NOW, 600, "s", &[0x7f, 0x61, 0xc3, 0x61, 0xa9, 0xff]),
            m,
        ),
        (
            "state: two-byte simple value 0",
            claims_body(NOW, 600, "s", &[0xf8, 0x00]),
            m,
        ),
        (
            "state: two-byte simple value 20 (false)",
            claims_body(NOW, 600, "s", &[0xf8, 0x14]),
            m,
        ),
        (
            "state: two-byte simple value 31",
            claims_body(NOW, 600, "s", &[0xf8, 0x1f]),
            m,
        ),
        // Well-formed, so it passes step 9 and reaches the caller's decoder.
        (
            "step 14: two-byte simple value 32 is well-formed, not an unsigned integer",
            claims_body(NOW, 600, "s", &[0xf8, 0x20]),
            "state_decoding",
        ),
        (
            "lifetime over the maximum",
            claims_body(NOW, Policy::DEFAULT_MAX_LIFETIME + 1, "s", &[0xf6]),
            "lifetime_too_long",
        ),
        (
            "step 10 before 11: lifetime over the maximum, issued in the future",
            claims_body(NOW + 1000, Policy::DEFAULT_MAX_LIFETIME + 1, "s", &[0xf6]),
            "lifetime_too_long",
        ),
        (
            "step 10 before 11: lifetime zero, issued in the future",
            claims_body(NOW + 1000, 0, "s", &[0xf6]),
            m,
        ),
        (
            "issued_at = now + leeway + 1",
            claims_body(NOW + leeway + 1, 600, "s", &[0xf6]),
            "not_yet_valid",
        ),
        (
            "expires_at + leeway = now",
            claims_body(NOW - 600 - leeway, 600, "s", &[0xf6]),
            "expired",
        ),
        (
            "step 13: NFD expected for an NFC step",
            claims_body(NOW, 600, "café", &[0xf6]),
            "wrong_step",
        ),
    ];
    for (key_id, alg) in [(1u32, "hmac"), (2, "xchacha")] {
        let base = if key_id == 1 { hmac } else { xchacha };
        for (name, body, reason) in &reasoned {
            let token = forge(
                &keys,
                key_id,
                body,
                base.tool.as_bytes(),
                REFERENCE_CONTEXT,
                &random_for(&keys, key_id, 7),
            );
            let mut v = invalid(
                base,
                &format!("{alg}: key holder's body: {name}"),
                token,
                reason,
            );
            if name.starts_with("step 13") {
                v.expected_step = Some("cafe\u{301}".into());
            }
            if name.starts_with("step 14") {
                v.decode_as = Some("uint".into());
            }
            bad.push(v);
        }
    }

    // Accepted sides of the same rules.
    let mut accepted = Vec::new();
    let accept_token =
        |name: &str, token: &str, now: u64, step: &str, iat: u64, exp: u64, state: &[u8]| {
            AcceptedVector {
                name: name.into(),
                operation: "verify".into(),
                token: token.into(),
                tool: hmac.tool.clone(),
                context: hex::encode(REFERENCE_CONTEXT),
                expected_step: None,
                now,
                policy: None,
                decode_as: None,
                issued_at: Some(iat),
                expires_at: Some(exp),
                step: Some(step.into()),
                state_cbor: Some(hex::encode(state)),
                payload: None,
                key_id: None,
                spent: Vec::new(),
                spent_record: None,
                record_until: None,
            }
        };
    accepted.push(accept_token(
        "step 11: issued_at = now + leeway",
        &hmac.token,
        hmac.issued_at - leeway,
        &hmac.step,
        hmac.issued_at,
        hmac.expires_at,
        &st,
    ));
    accepted.push(accept_token(
        "step 12: now = expires_at + leeway - 1",
        &hmac.token,
        hmac.expires_at + leeway - 1,
        &hmac.step,
        hmac.issued_at,
        hmac.expires_at,
        &st,
    ));
    accepted.push(AcceptedVector {
        policy: Some(VectorPolicy {
            clock_leeway: 600,
            ..default_vector_policy()
        }),
        ..accept_token(
            "step 12: policy leeway 600, now = expires_at + 599",
            &hmac.token,
            hmac.expires_at + 599,
            &hmac.step,
            hmac.issued_at,
            hmac.expires_at,
            &st,
        )
    });
    let accepted_bodies: Vec<(&str, &str, u64, Vec<u8>)> = vec![
        (
            "state nested 16 levels through arrays",
            "s",
            600,
            deep(&[0x81], &[], 16),
        ),
        (
            "state nested 16 levels through maps",
            "s",
            600,
            deep(&[0xa1, 0x00], &[], 16),
        ),
        (
            "state nested 16 levels through tags",
            "s",
            600,
            deep(&[0xc6], &[], 16),
        ),
        (
            "state nested 16 levels through indefinite arrays and maps",
            "s",
            600,
            {
                let mut b = [0x9f, 0xbf, 0x00].repeat(8);
                b.push(0x00);
                b.extend([0xff, 0xff].repeat(8));
                b
            },
        ),
        (
            "state: indefinite strings with valid chunks",
            "s",
            600,
            vec![
                0x82, 0x7f, 0x61, 0x61, 0x62, 0xc3, 0xa9, 0x60, 0xff, 0x5f, 0x41, 0x00, 0x40, 0xff,
            ],
        ),
        ("state: empty indefinite text", "s", 600, vec![0x7f, 0xff]),
        (
            "state: duplicate map keys are not refused",
            "s",
            600,
            vec![0xa2, 0x61, 0x61, 0x01, 0x61, 0x61, 0x02],
        ),
        (
            "state: map keys unsorted, integers and lengths not shortest (the serializer's bytes)",
            "s",
            600,
            vec![
                0xa2, 0x61, 0x62, 0x18, 0x01, 0x78, 0x01, 0x61, 0x19, 0x00, 0x02,
            ],
        ),
        (
            "state: half, single and double floats",
            "s",
            600,
            vec![
                0x83, 0xf9, 0x3c, 0x00, 0xfa, 0x3f, 0xc0, 0x00, 0x00, 0xfb, 0x40, 0x09, 0x21, 0xfb,
                0x54, 0x44, 0x2d, 0x18,
            ],
        ),
        ("step of 256 bytes", "", 600, vec![0xf6]),
        (
            "lifetime = max_lifetime",
            "s",
            Policy::DEFAULT_MAX_LIFETIME,
            vec![0xf6],
        ),
    ];
    let step256 = "x".repeat(256);
    for (key_id, alg) in [(1u32, "hmac"), (2, "xchacha")] {
        for (name, step, lifetime, state) in &accepted_bodies {
            let step = if step.is_empty() {
                step256.as_str()
            } else {
                step
            };
            let body = claims_body(NOW, *lifetime, step, state);
            let token = forge(
                &keys,
                key_id,
                &body,
                hmac.tool.as_bytes(),
                REFERENCE_CONTEXT,
                &random_for(&keys, key_id, 7),
            );
            accepted.push(accept_token(
                &format!("{alg}: key holder's body: {name}"),
                &token,
                NOW,
                step,
                NOW,
                NOW + lifetime,
                state,
            ));
        }
    }
    let uint_token = forge(
        &keys,
        1,
        &claims_body(NOW, 600, "s", &[0x05]),
        hmac.tool.as_bytes(),
        REFERENCE_CONTEXT,
        &[],
    );
    accepted.push(AcceptedVector {
        decode_as: Some("uint".into()),
        ..accept_token(
            "step 14: the caller wants an unsigned integer and gets 5",
            &uint_token,
            NOW,
            "s",
            NOW,
            NOW + 600,
            &[0x05],
        )
    });
    let nfc_token = forge(
        &keys,
        1,
        &claims_body(NOW, 600, "café", &[0xf6]),
        hmac.tool.as_bytes(),
        REFERENCE_CONTEXT,
        &[],
    );
    accepted.push(AcceptedVector {
        expected_step: Some("café".into()),
        ..accept_token(
            "step 13: the expected step, byte for byte",
            &nfc_token,
            NOW,
            "café",
            NOW,
            NOW + 600,
            &[0xf6],
        )
    });
    for s in &sealed {
        accepted.push(AcceptedVector {
            name: format!("unseal: {}", s.name),
            operation: "unseal".into(),
            token: s.token.clone(),
            tool: String::new(),
            context: s.aad.clone(),
            expected_step: None,
            now: s.now,
            policy: None,
            decode_as: None,
            issued_at: None,
            expires_at: None,
            step: None,
            state_cbor: None,
            payload: Some(s.payload.clone()),
            key_id: None,
            spent: Vec::new(),
            spent_record: None,
            record_until: None,
        });
    }

    // Refused mints, in the order of FORMAT.md §8's minting list.
    let mint_base = MintInvalidVector {
        name: String::new(),
        operation: "mint".into(),
        key_id: 1,
        tool: hmac.tool.clone(),
        step: hmac.step.clone(),
        state_cbor: hmac.state_cbor.clone(),
        payload: String::new(),
        ttl: 600,
        context: hex::encode(REFERENCE_CONTEXT),
        now: NOW,
        random: String::new(),
        policy: None,
        single_use: false,
        expect_fail: String::new(),
    };
    let small = Some(VectorPolicy {
        max_token_len: 64,
        ..default_vector_policy()
    });
    let deep17 = |open: &[u8]| hex::encode(deep(open, &[], 17));
    let mk = |name: &str, expect: &str, f: &dyn Fn(&mut MintInvalidVector)| {
        let mut v = mint_base.clone();
        v.name = name.into();
        v.expect_fail = expect.into();
        f(&mut v);
        v
    };
    let ia = "invalid_argument";
    let mut mint_invalid = vec![
        mk("mint refusal 1: empty tool", ia, &|v| {
            v.tool = String::new()
        }),
        mk("mint refusal 1: tool of 257 bytes", ia, &|v| {
            v.tool = "t".repeat(257)
        }),
        mk("mint refusal 1: empty step", ia, &|v| {
            v.step = String::new()
        }),
        mk("mint refusal 1: step of 257 bytes", ia, &|v| {
            v.step = "s".repeat(257)
        }),
        mk("mint refusal 1: context of 65537 bytes", ia, &|v| {
            v.context = hex::encode(vec![0u8; 65_537])
        }),
        mk("mint refusal 1: ttl 0", ia, &|v| v.ttl = 0),
        mk(
            "mint refusal 1 before 2: empty tool, ttl over max_lifetime",
            ia,
            &|v| {
                v.tool = String::new();
                v.ttl = Policy::DEFAULT_MAX_LIFETIME + 1;
            },
        ),
        mk(
            "mint refusal 2: ttl = max_lifetime + 1",
            "lifetime_too_long",
            &|v| v.ttl = Policy::DEFAULT_MAX_LIFETIME + 1,
        ),
        mk(
            "mint refusal 2 before 3: ttl over max_lifetime, now + ttl overflows",
            "lifetime_too_long",
            &|v| {
                v.ttl = Policy::DEFAULT_MAX_LIFETIME + 1;
                v.now = u64::MAX;
            },
        ),
        mk("mint refusal 3: now = 2^64 - 1, ttl 1", ia, &|v| {
            v.ttl = 1;
            v.now = u64::MAX;
        }),
        mk("mint refusal 3: now + ttl = 2^64 exactly", ia, &|v| {
            v.now = u64::MAX - 599
        }),
        mk(
            "mint refusal 3 before 4: now + ttl overflows, state nested 17 levels",
            ia,
            &|v| {
                v.now = u64::MAX;
                v.state_cbor = deep17(&[0x81]);
            },
        ),
        mk(
            "mint refusal 4: state nested 17 levels through arrays",
            "state_encoding",
            &|v| v.state_cbor = deep17(&[0x81]),
        ),
        mk(
            "mint refusal 4: state nested 17 levels through maps",
            "state_encoding",
            &|v| v.state_cbor = deep17(&[0xa1, 0x00]),
        ),
        mk(
            "mint refusal 4: state nested 17 levels through tags",
            "state_encoding",
            &|v| v.state_cbor = deep17(&[0xc6]),
        ),
        mk(
            "mint refusal 4 before 6: state nested 17 levels, max_token_len 64",
            "state_encoding",
            &|v| {
                v.state_cbor = deep17(&[0x81]);
                v.policy = small;
            },
        ),
        mk(
            "mint refusal 5: xchacha, the random source fails",
            "randomness_unavailable",
            &|v| v.key_id = 2,
        ),
        mk(
            "mint refusal 5 before 6: xchacha, the random source fails, max_token_len 64",
            "randomness_unavailable",
            &|v| {
                v.key_id = 2;
                v.policy = small;
            },
        ),
        mk(
            "mint refusal 6: max_token_len + 1 characters (policy 75, token 76)",
            "too_large",
            &|v| {
                v.policy = Some(VectorPolicy {
                    max_token_len: 75,
                    ..default_vector_policy()
                })
            },
        ),
        mk("seal: aad of 65537 bytes", ia, &|v| {
            v.operation = "seal".into();
            v.context = hex::encode(vec![0u8; 65_537]);
        }),
        mk(
            "seal: xchacha, the random source fails",
            "randomness_unavailable",
            &|v| {
                v.operation = "seal".into();
                v.key_id = 2;
            },
        ),
        mk(
            "seal: 100-byte payload, max_token_len 64",
            "too_large",
            &|v| {
                v.operation = "seal".into();
                v.payload = hex::encode([7u8; 100]);
                v.policy = small;
            },
        ),
    ];

    single_use_rules(
        &keys,
        &single_use,
        &valid,
        &sealed,
        &mut bad,
        &mut accepted,
        &mut mint_invalid,
    );

    let entry = |id: u32, algorithm: &str, status: &str, len: usize| KeyringEntry {
        id,
        algorithm: algorithm.into(),
        status: status.into(),
        secret: base64_standard(&vec![0x42u8; len]),
    };
    let (h, x) = ("hmac-sha256", "xchacha20-poly1305");
    let keyring = |name: &str, keys: Vec<KeyringEntry>, fail: Option<&str>| KeyringVector {
        name: name.into(),
        keys,
        expect_fail: fail.map(Into::into),
    };
    let ik = Some("invalid_keyring");
    let keyrings = vec![
        keyring(
            "secrets of 32 and 1024 bytes, ids 0 and 2^32 - 1",
            vec![
                entry(0, h, "primary", 32),
                entry(u32::MAX, x, "retired", 1024),
            ],
            None,
        ),
        keyring(
            "one secret under both algorithms",
            vec![entry(1, h, "primary", 32), entry(2, x, "active", 32)],
            None,
        ),
        keyring(
            "duplicate key id",
            vec![entry(1, h, "active", 32), entry(1, x, "primary", 32)],
            ik,
        ),
        keyring("secret of 31 bytes", vec![entry(1, h, "primary", 31)], ik),
        keyring(
            "secret of 1025 bytes",
            vec![entry(1, x, "primary", 1025)],
            ik,
        ),
        keyring(
            "no primary key",
            vec![entry(1, h, "active", 32), entry(2, h, "retired", 32)],
            ik,
        ),
        keyring(
            "two primary keys",
            vec![entry(1, h, "primary", 32), entry(2, x, "primary", 32)],
            ik,
        ),
        keyring("no key at all", vec![], ik),
    ];

    let d = default_vector_policy();
    let policy = |name: &str, p: VectorPolicy, fail: bool| PolicyVector {
        name: name.into(),
        policy: p,
        expect_fail: fail.then(|| "invalid_argument".into()),
    };
    let len = |max_token_len| VectorPolicy { max_token_len, ..d };
    let leeway = |clock_leeway| VectorPolicy { clock_leeway, ..d };
    let life = |max_lifetime| VectorPolicy { max_lifetime, ..d };
    let policies = vec![
        policy("§8 policy: the defaults", d, false),
        policy("§8 policy: max_token_len 64, the least", len(64), false),
        policy("§8 policy: max_token_len 63", len(63), true),
        policy(
            "§8 policy: max_token_len 1048576, the most",
            len(1_048_576),
            false,
        ),
        policy("§8 policy: max_token_len 1048577", len(1_048_577), true),
        policy("§8 policy: max_token_len 0", len(0), true),
        policy("§8 policy: clock_leeway 0, the least", leeway(0), false),
        policy("§8 policy: clock_leeway 600, the most", leeway(600), false),
        policy("§8 policy: clock_leeway 601", leeway(601), true),
        policy("§8 policy: max_lifetime 1, the least", life(1), false),
        policy("§8 policy: max_lifetime 0", life(0), true),
        policy(
            "§8 policy: max_lifetime 2592000, the most",
            life(2_592_000),
            false,
        ),
        policy("§8 policy: max_lifetime 2592001", life(2_592_001), true),
        policy(
            "§8 policy: every knob at its bound at once",
            VectorPolicy {
                max_token_len: 1_048_576,
                clock_leeway: 600,
                max_lifetime: 2_592_000,
            },
            false,
        ),
    ];

    VectorFile {
        description: "reqstate token format v1 test vectors (docs/FORMAT.md). Every token is verified \
                      under the keyring `keys` with the statuses given, at the vector's `now` (unix seconds), \
                      and under the file's `policy` unless the vector carries its own `policy`. `valid` and \
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
                      has not enough bytes left for. \
                      `keyrings` are keyrings to load (FORMAT.md section 1): accepted, or refused with \
                      `expect_fail`; `policies` are policies to build (FORMAT.md section 8), likewise. `single_use` tokens (FORMAT.md section 5.1, kind 2) were minted \
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
                      a key holder could make. Encodings: `secret` is standard base64 with padding; \
                      `derived_key`, `nonce_key`, `random`, `token_id`, `nonce`, `state_cbor`, `payload`, `aad` and \
                      `context` are hex; tokens are base64url without padding."
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
        single_use,
        accepted,
        invalid: bad,
        mint_invalid,
        keyrings,
        policies,
    }
}

/// Both sides of every single-use rule (FORMAT.md §5.1, §8 steps 6, 9 and
/// 15, and the single-use mint order). Names start with "single-use".
#[allow(clippy::too_many_arguments)]
fn single_use_rules(
    keys: &[VectorKey],
    single_use: &[SingleUseVector],
    valid: &[ValidVector],
    sealed: &[SealedVector],
    bad: &mut Vec<InvalidVector>,
    accepted: &mut Vec<AcceptedVector>,
    mint_invalid: &mut Vec<MintInvalidVector>,
) {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let enc = |b: &[u8]| b64.encode(b);
    let leeway = Policy::DEFAULT_CLOCK_LEEWAY;
    let (hmac, xchacha) = (&valid[0], &valid[1]);
    let (su_hmac, su_xchacha) = (&single_use[0], &single_use[1]);
    let op = |operation: &str,
              v: &SingleUseVector,
              name: &str,
              token: String,
              expect: &str|
     -> InvalidVector {
        InvalidVector {
            name: format!("single-use: {name}"),
            operation: operation.into(),
            token,
            tool: v.tool.clone(),
            context: v.context.clone(),
            expected_step: None,
            now: v.now,
            policy: v.policy,
            decode_as: None,
            spent: Vec::new(),
            expect_fail: expect.into(),
        }
    };
    let consume = |v: &SingleUseVector, name: &str, token: String, expect: &str| {
        op("consume", v, name, token, expect)
    };
    let pad = |prefix: &[u8], n: usize| {
        let mut r = prefix.to_vec();
        r.extend(std::iter::repeat_n(0x5au8, n));
        enc(&r)
    };

    // Step 6: verify refuses a single-use token; consume refuses any other.
    for v in [su_hmac, su_xchacha] {
        let alg = if v.key_id == 1 { "hmac" } else { "xchacha" };
        bad.push(op(
            "verify",
            v,
            &format!("step 6: {alg}, a genuine single-use token to verify"),
            v.token.clone(),
            "single_use",
        ));
        let mut replay = consume(
            v,
            &format!("step 15: {alg}, consumed before (its record is in the store)"),
            v.token.clone(),
            "replayed",
        );
        replay.spent = vec![v.spent_record.clone()];
        bad.push(replay);
        // Step 15 comes last: a spent token fails every earlier check first.
        let mut other_tool = consume(
            v,
            &format!("step 8 before 15: {alg}, spent and presented to another tool"),
            v.token.clone(),
            "authentication_failed",
        );
        other_tool.tool = "delete-everything".into();
        other_tool.spent = vec![v.spent_record.clone()];
        bad.push(other_tool);
        let mut expired = consume(
            v,
            &format!("step 12 before 15: {alg}, spent and expired (now = expires_at + leeway)"),
            v.token.clone(),
            "expired",
        );
        expired.now = v.expires_at + leeway;
        expired.spent = vec![v.spent_record.clone()];
        bad.push(expired);
        let mut early = consume(
            v,
            &format!("step 11 before 15: {alg}, spent and issued beyond the leeway"),
            v.token.clone(),
            "not_yet_valid",
        );
        early.now = v.issued_at - leeway - 1;
        early.spent = vec![v.spent_record.clone()];
        bad.push(early);
        let mut step = consume(
            v,
            &format!("step 13 before 15: {alg}, spent and the wrong step"),
            v.token.clone(),
            "wrong_step",
        );
        step.expected_step = Some("amount".into());
        step.spent = vec![v.spent_record.clone()];
        bad.push(step);
        let last = v.token_chars * 3 / 4 - 1;
        bad.push(consume(
            v,
            &format!("step 8: {alg}, last tag bit flipped"),
            flip_bit(&v.token, last, 0x01),
            "authentication_failed",
        ));
        bad.push(consume(
            v,
            &format!("step 8: {alg}, a token id bit flipped"),
            flip_bit(&v.token, 8 + 24 * usize::from(v.key_id == 2), 0x01),
            "authentication_failed",
        ));
        bad.push(op(
            "verify",
            v,
            &format!(
                "step 8: {alg}, kind 2 turned into kind 0 to verify (the kind is authenticated)"
            ),
            flip_bit(&v.token, 0, 0x08),
            "authentication_failed",
        ));
        bad.push(consume(
            v,
            &format!("step 7: {alg}, algorithm bits swapped"),
            flip_bit(&v.token, 0, 0x03),
            "algorithm_mismatch",
        ));
        let mut unseal = op(
            "unseal",
            v,
            &format!("step 6: {alg}, a single-use token to unseal"),
            v.token.clone(),
            "wrong_kind",
        );
        unseal.tool = String::new();
        bad.push(unseal);
    }
    for (v, base) in [(hmac, su_hmac), (xchacha, su_xchacha)] {
        let alg = if v.key_id == 1 { "hmac" } else { "xchacha" };
        let mut plain = consume(
            base,
            &format!("step 6: {alg}, a state token (kind 0) to consume"),
            v.token.clone(),
            "wrong_kind",
        );
        plain.context = v.context.clone();
        bad.push(plain);
        let mut flipped = consume(
            base,
            &format!(
                "step 8: {alg}, kind 0 turned into kind 2 to consume (the kind is authenticated)"
            ),
            flip_bit(&v.token, 0, 0x08),
            "authentication_failed",
        );
        flipped.context = v.context.clone();
        bad.push(flipped);
    }
    let mut sealed_in = consume(
        su_hmac,
        "step 6: a sealed payload to consume",
        sealed[0].token.clone(),
        "wrong_kind",
    );
    sealed_in.context = sealed[0].aad.clone();
    bad.push(sealed_in);
    bad.push(consume(
        su_hmac,
        "step 6 before 7: a state token under unknown key 5 to consume",
        pad(&[0x11, 0x05], 16),
        "wrong_kind",
    ));
    bad.push(op(
        "verify",
        su_hmac,
        "step 6 before 7: a single-use token under unknown key 5 to verify",
        pad(&[0x19, 0x05], 16),
        "single_use",
    ));
    bad.push(consume(
        su_hmac,
        "step 7: a single-use token under unknown key 5",
        pad(&[0x19, 0x05], 16),
        "unknown_key",
    ));
    bad.push(consume(
        su_hmac,
        "step 7: a single-use token under retired key 3",
        pad(&[0x1a, 0x03], 40),
        "retired_key",
    ));
    bad.push(consume(
        su_hmac,
        "step 3: reserved kind 3 to consume",
        pad(&[0x1d, 0x01], 16),
        "malformed",
    ));
    bad.push(consume(
        su_hmac,
        "step 5 before 6: a short single-use token to consume",
        pad(&[0x19, 0x01], 15),
        "malformed",
    ));
    bad.push(op(
        "verify",
        su_hmac,
        "step 5 before 6: a short single-use token to verify",
        pad(&[0x19, 0x01], 15),
        "malformed",
    ));
    bad.push(consume(
        su_hmac,
        "step 2: not base64url",
        "!!!!".into(),
        "malformed",
    ));
    let mut no_tool = consume(
        su_hmac,
        "step 0: empty tool",
        su_hmac.token.clone(),
        "invalid_argument",
    );
    no_tool.tool = String::new();
    bad.push(no_tool);
    let mut one_over = consume(
        &single_use[6],
        "step 1: max_token_len + 1 characters (policy 99, token 100)",
        single_use[6].token.clone(),
        "too_large",
    );
    one_over.policy = Some(VectorPolicy {
        max_token_len: 99,
        ..default_vector_policy()
    });
    bad.push(one_over);

    // Step 9 for kind 2 (§5.1): bodies only a key holder can make.
    let st = hex::decode(&su_hmac.state_cbor).expect("hex");
    let id = token_id_for(0x42);
    let plain = claims_body(NOW, 600, "confirm", &st);
    let with_id = |head: &[u8], id: &[u8], rest: &[u8]| [head, id, rest].concat();
    let su_body = with_id(&[0xa5, 0x00, 0x50], &id, &plain[1..]);
    let iat = cbor_head(0, NOW);
    let m = "malformed";
    let kind2: Vec<(&str, Vec<u8>, &str)> = vec![
        ("a 4-entry map (no token id)", plain.clone(), m),
        (
            "a 6-entry map",
            {
                let mut b = su_body.clone();
                b[0] = 0xa6;
                b.extend([0x05, 0xf6]);
                b
            },
            m,
        ),
        (
            "a 4-entry map head over 5 entries",
            {
                let mut b = su_body.clone();
                b[0] = 0xa4;
                b
            },
            m,
        ),
        (
            "an indefinite-length map",
            {
                let mut b = su_body.clone();
                b[0] = 0xbf;
                b.push(0xff);
                b
            },
            m,
        ),
        (
            "a 15-byte token id",
            with_id(&[0xa5, 0x00, 0x4f], &id[..15], &plain[1..]),
            m,
        ),
        (
            "a 17-byte token id",
            with_id(
                &[0xa5, 0x00, 0x51],
                &[&id[..], &[0x00]].concat(),
                &plain[1..],
            ),
            m,
        ),
        (
            "a token id as a text string",
            with_id(&[0xa5, 0x00, 0x70], b"0123456789abcdef", &plain[1..]),
            m,
        ),
        (
            "a token id as an unsigned integer",
            [&[0xa5, 0x00, 0x1b][..], &id[..8], &plain[1..]].concat(),
            m,
        ),
        (
            "the token id last (keys 1, 2, 3, 4, 0)",
            {
                let mut b = vec![0xa5];
                b.extend(&plain[1..]);
                b.extend([0x00, 0x50]);
                b.extend(id);
                b
            },
            m,
        ),
        (
            "the token id second (keys 1, 0, 2, 3, 4)",
            {
                let mut b = vec![0xa5, 0x01];
                b.extend(&iat);
                b.extend([0x00, 0x50]);
                b.extend(id);
                b.extend(&plain[2 + iat.len()..]);
                b
            },
            m,
        ),
        (
            "a token id head not in shortest form (58 10)",
            with_id(&[0xa5, 0x00, 0x58, 0x10], &id, &plain[1..]),
            m,
        ),
        (
            "key 0 not in shortest form (18 00)",
            with_id(&[0xa5, 0x18, 0x00, 0x50], &id, &plain[1..]),
            m,
        ),
        (
            "a token id as an indefinite-length byte string",
            [&[0xa5, 0x00, 0x5f, 0x50][..], &id[..], &[0xff], &plain[1..]].concat(),
            m,
        ),
        (
            "key 5 in place of key 0",
            with_id(&[0xa5, 0x05, 0x50], &id, &plain[1..]),
            m,
        ),
        (
            "lifetime zero",
            with_id(
                &[0xa5, 0x00, 0x50],
                &id,
                &claims_body(NOW, 0, "confirm", &st)[1..],
            ),
            m,
        ),
        (
            "trailing byte after the state",
            {
                let mut b = su_body.clone();
                b.push(0x00);
                b
            },
            m,
        ),
    ];
    for (key_id, alg, base) in [(1u32, "hmac", su_hmac), (2, "xchacha", su_xchacha)] {
        for (name, body, reason) in &kind2 {
            let token = forge_kind(
                keys,
                2,
                key_id,
                body,
                base.tool.as_bytes(),
                REFERENCE_CONTEXT,
                &random_for(keys, key_id, 7),
            );
            bad.push(consume(
                base,
                &format!("step 9: {alg}, key holder's kind-2 body: {name}"),
                token,
                reason,
            ));
        }
        // §5.1: kind 0 never carries a token id.
        let token = forge_kind(
            keys,
            0,
            key_id,
            &su_body,
            base.tool.as_bytes(),
            REFERENCE_CONTEXT,
            &random_for(keys, key_id, 7),
        );
        bad.push(op(
            "verify",
            base,
            &format!("step 9: {alg}, key holder's kind-0 body with a token id (a 5-entry map)"),
            token,
            m,
        ));
    }

    // Accepted consumes.
    let accept =
        |v: &SingleUseVector, name: &str, token: &str, token_id: &[u8], now: u64| AcceptedVector {
            name: format!("single-use: {name}"),
            operation: "consume".into(),
            token: token.into(),
            tool: v.tool.clone(),
            context: v.context.clone(),
            expected_step: Some(v.step.clone()),
            now,
            policy: v.policy,
            decode_as: None,
            issued_at: Some(v.issued_at),
            expires_at: Some(v.expires_at),
            step: Some(v.step.clone()),
            state_cbor: Some(v.state_cbor.clone()),
            payload: None,
            key_id: Some(v.key_id),
            spent: Vec::new(),
            spent_record: Some(record_name(v.key_id, token_id)),
            record_until: Some(v.record_until),
        };
    for v in [su_hmac, su_xchacha] {
        let alg = if v.key_id == 1 { "hmac" } else { "xchacha" };
        let id = hex::decode(&v.token_id).expect("hex");
        let mut other = accept(
            v,
            &format!(
                "step 15: {alg}, the store holds its token id under another key and another id under its key"
            ),
            &v.token,
            &id,
            v.now,
        );
        let mut other_id = id.clone();
        other_id[15] ^= 1;
        other.spent = vec![record_name(200, &id), record_name(v.key_id, &other_id)];
        accepted.push(other);
        accepted.push(accept(
            v,
            &format!("step 12: {alg}, now = expires_at + leeway - 1"),
            &v.token,
            &id,
            v.expires_at + leeway - 1,
        ));
        accepted.push(accept(
            v,
            &format!("step 11: {alg}, issued_at = now + leeway"),
            &v.token,
            &id,
            v.issued_at - leeway,
        ));
        let zeros = [0u8; 16];
        let body = with_id(&[0xa5, 0x00, 0x50], &zeros, &plain[1..]);
        let token = forge_kind(
            keys,
            2,
            v.key_id,
            &body,
            v.tool.as_bytes(),
            REFERENCE_CONTEXT,
            &random_for(keys, v.key_id, 7),
        );
        accepted.push(AcceptedVector {
            issued_at: Some(NOW),
            expires_at: Some(NOW + 600),
            record_until: Some(NOW + 600 + leeway),
            ..accept(
                v,
                &format!("step 9: {alg}, key holder's kind-2 body: a token id of 16 zero bytes"),
                &token,
                &zeros,
                NOW,
            )
        });
    }

    // The single-use mint order (FORMAT.md §8): the token id is drawn after
    // check 4, under either algorithm.
    let base = MintInvalidVector {
        name: String::new(),
        operation: "mint".into(),
        key_id: 1,
        tool: hmac.tool.clone(),
        step: hmac.step.clone(),
        state_cbor: hmac.state_cbor.clone(),
        payload: String::new(),
        ttl: 600,
        context: hex::encode(REFERENCE_CONTEXT),
        now: NOW,
        random: String::new(),
        policy: None,
        single_use: true,
        expect_fail: String::new(),
    };
    let mk = |name: &str, expect: &str, f: &dyn Fn(&mut MintInvalidVector)| {
        let mut v = base.clone();
        v.name = format!("single-use mint: {name}");
        v.expect_fail = expect.into();
        f(&mut v);
        v
    };
    let deep17 = {
        let mut b = vec![0x81u8; 17];
        b.push(0x00);
        hex::encode(b)
    };
    let id16 = hex::encode(token_id_for(9));
    let ru = "randomness_unavailable";
    mint_invalid.extend([
        mk("hmac draws a token id: the random source fails", ru, &|_| {}),
        mk(
            "xchacha: the source has the token id but not the 24 bytes of r",
            ru,
            &|v| {
                v.key_id = 2;
                v.random = id16.clone();
            },
        ),
        mk(
            "refusal 4 before the token id: hmac, state nested 17 levels, the random source fails",
            "state_encoding",
            &|v| v.state_cbor = deep17.clone(),
        ),
        mk(
            "refusal 4 before the token id: xchacha, state nested 17 levels, the random source fails",
            "state_encoding",
            &|v| {
                v.key_id = 2;
                v.state_cbor = deep17.clone();
            },
        ),
        mk(
            "refusal 1 before the token id: empty step, the random source fails",
            "invalid_argument",
            &|v| v.step = String::new(),
        ),
        mk(
            "refusal 2 before the token id: ttl over max_lifetime, the random source fails",
            "lifetime_too_long",
            &|v| v.ttl = Policy::DEFAULT_MAX_LIFETIME + 1,
        ),
        mk(
            "the token id before refusal 6: hmac, the random source fails, max_token_len 64",
            ru,
            &|v| {
                v.policy = Some(VectorPolicy {
                    max_token_len: 64,
                    ..default_vector_policy()
                })
            },
        ),
        mk(
            "refusal 6: max_token_len + 1 characters (policy 99, token 100)",
            "too_large",
            &|v| {
                v.random = id16.clone();
                v.policy = Some(VectorPolicy {
                    max_token_len: 99,
                    ..default_vector_policy()
                })
            },
        ),
    ]);
}

/// The LEB128 encoding of a key id (FORMAT.md §3).
fn leb128(mut v: u32) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return out;
        }
        out.push(b | 0x80);
    }
}

/// A CBOR head (major type and argument), shortest form.
fn cbor_head(major: u8, v: u64) -> Vec<u8> {
    let m = major << 5;
    match v {
        0..=23 => vec![m | v as u8],
        24..=0xff => vec![m | 24, v as u8],
        0x100..=0xffff => [vec![m | 25], (v as u16).to_be_bytes().to_vec()].concat(),
        0x1_0000..=0xffff_ffff => [vec![m | 26], (v as u32).to_be_bytes().to_vec()].concat(),
        _ => [vec![m | 27], v.to_be_bytes().to_vec()].concat(),
    }
}

/// A claims envelope (FORMAT.md §5) around raw state bytes.
fn claims_body(issued_at: u64, lifetime: u64, step: &str, state: &[u8]) -> Vec<u8> {
    let mut b = vec![0xa4, 0x01];
    b.extend(cbor_head(0, issued_at));
    b.push(0x02);
    b.extend(cbor_head(0, lifetime));
    b.push(0x03);
    b.extend(cbor_head(3, step.len() as u64));
    b.extend_from_slice(step.as_bytes());
    b.push(0x04);
    b.extend_from_slice(state);
    b
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
    forge_kind(keys, 0, key_id, body, tool, context, nonce)
}

/// [`forge`] with the header's kind given (2: single-use, FORMAT.md §5.1).
fn forge_kind(
    keys: &[VectorKey],
    kind: u8,
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
        | (kind << 2)
        | if algorithm == Algorithm::HmacSha256 {
            1
        } else {
            2
        };
    let mut prefix = vec![header];
    prefix.extend_from_slice(&leb128(key_id));
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
    golden::load(VECTORS_PATH)
}

// ---- Tests.

#[test]
fn vector_file_matches_its_definitions() {
    golden::check(VECTORS_PATH, &generate());
}

#[test]
fn valid_vectors_mint_to_the_same_bytes() {
    let file = load();
    for v in &file.valid {
        let random = hex::decode(&v.random).expect("hex");
        let codec = minting_codec(&file.keys, v.key_id, v.now, &random, policy_of(v.policy));
        let state: ciborium::Value =
            ciborium::from_reader(&hex::decode(&v.state_cbor).expect("hex")[..]).expect("cbor");
        let context = hex::decode(&v.context).expect("hex");
        let minted = codec
            .mint(
                bind(&v.tool, &context),
                &v.step,
                &state,
                Duration::from_secs(v.ttl),
            )
            .expect("mint");
        assert_eq!(minted.token, v.token, "{}", v.name);
        assert_eq!(minted.token.len(), v.token_chars, "{}", v.name);
        assert_eq!(
            (minted.key_id.get(), minted.issued_at, minted.expires_at),
            (v.key_id, v.issued_at, v.expires_at),
            "{}",
            v.name
        );
    }
    for s in &file.sealed {
        let random = hex::decode(&s.random).expect("hex");
        let codec = minting_codec(&file.keys, s.key_id, s.now, &random, Policy::new());
        let sealed = codec
            .seal(
                &hex::decode(&s.payload).expect("hex"),
                aad(&hex::decode(&s.aad).expect("hex")),
            )
            .expect("seal");
        assert_eq!(sealed.token, s.token, "{}", s.name);
        assert_eq!(sealed.key_id.get(), s.key_id, "{}", s.name);
    }
}

#[test]
fn single_use_vectors_mint_to_the_same_bytes() {
    let file = load();
    assert!(file.single_use.len() >= 7, "the single_use set shrank");
    for v in &file.single_use {
        let token_id = hex::decode(&v.token_id).expect("hex");
        assert_eq!(token_id.len(), 16, "{}", v.name);
        let script = Scripted::new(&[token_id, hex::decode(&v.random).expect("hex")].concat());
        let k = file.keys.iter().find(|k| k.id == v.key_id).expect("key");
        let keyring = Keyring::new([spec_of(k, KeyStatus::Primary)]).expect("keyring");
        let codec = Codec::with_parts(keyring, policy_of(v.policy), FixedClock(v.now), script);
        let state: ciborium::Value =
            ciborium::from_reader(&hex::decode(&v.state_cbor).expect("hex")[..]).expect("cbor");
        let context = hex::decode(&v.context).expect("hex");
        let minted = codec
            .mint_single_use(
                bind(&v.tool, &context),
                &v.step,
                &state,
                Duration::from_secs(v.ttl),
            )
            .expect("mint");
        assert_eq!(minted.token, v.token, "{}", v.name);
        assert_eq!(minted.token.len(), v.token_chars, "{}", v.name);
        assert_eq!(
            (minted.key_id.get(), minted.issued_at, minted.expires_at),
            (v.key_id, v.issued_at, v.expires_at),
            "{}",
            v.name
        );
        // The whole script was drawn: the id, then r.
        assert!(
            codec
                .mint_single_use(
                    bind(&v.tool, &context),
                    &v.step,
                    &state,
                    Duration::from_secs(v.ttl)
                )
                .is_err(),
            "{}: the script was not used up",
            v.name
        );
    }
    // Equal claims, another id: another token, under either algorithm.
    let tokens: std::collections::BTreeSet<_> = file.single_use.iter().map(|v| &v.token).collect();
    assert_eq!(tokens.len(), file.single_use.len());
}

#[test]
fn single_use_vectors_are_consumed_once_and_never_verified() {
    let file = load();
    for v in &file.single_use {
        let context = hex::decode(&v.context).expect("hex");
        let codec = verifying_codec_with(&file.keys, v.now, v.policy);
        let expected = || bind(&v.tool, &context).step(&v.step);
        // Verify (not consume): single_use.
        let refused = codec
            .verify::<ciborium::Value>(&v.token, expected())
            .expect_err("a single-use token verified");
        assert_eq!(refused.reason(), "single_use", "{}", v.name);
        // The redemption names the record and its time.
        let redemption = codec
            .verify_single_use_raw(&v.token, expected())
            .unwrap_or_else(|e| panic!("{}: {e}", v.name));
        assert_eq!(
            redemption.spent_id().record_name(),
            v.spent_record,
            "{}",
            v.name
        );
        assert_eq!(redemption.spent_id().key_id().get(), v.key_id, "{}", v.name);
        assert_eq!(
            hex::encode(redemption.spent_id().token_id()),
            v.token_id,
            "{}",
            v.name
        );
        assert_eq!(redemption.record_until(), v.record_until, "{}", v.name);
        // Consumed once through the named store, then replayed.
        let (first, records) = run_consume(
            &file,
            &v.token,
            &v.tool,
            &v.context,
            Some(&v.step),
            v.now,
            v.policy,
            &[],
        );
        let got = first.unwrap_or_else(|e| panic!("{}: {e}", v.name));
        assert_eq!(
            (got.0, got.1, got.2.as_str(), hex::encode(&got.3), got.4),
            (
                v.issued_at,
                v.expires_at,
                v.step.as_str(),
                v.state_cbor.clone(),
                v.key_id
            ),
            "{}",
            v.name
        );
        assert_eq!(
            records,
            [(v.spent_record.clone(), v.record_until)].into(),
            "{}",
            v.name
        );
        let (second, _) = run_consume(
            &file,
            &v.token,
            &v.tool,
            &v.context,
            Some(&v.step),
            v.now,
            v.policy,
            std::slice::from_ref(&v.spent_record),
        );
        assert_eq!(
            second.expect_err("replayed").reason(),
            "replayed",
            "{}",
            v.name
        );
        // And through the crate's own store, decoding the state.
        let store = MemoryReplayStore::new(64);
        let state = codec
            .consume::<ciborium::Value>(&v.token, expected(), &store)
            .unwrap_or_else(|e| panic!("{}: {e}", v.name))
            .state;
        assert_eq!(
            serde_json::to_value(&state).expect("json"),
            v.state_json,
            "{}",
            v.name
        );
        let again = codec
            .consume::<ciborium::Value>(&v.token, expected(), &store)
            .expect_err("replay accepted");
        assert_eq!(again.reason(), "replayed", "{}", v.name);
    }
}

#[test]
fn valid_vectors_verify_to_their_claims() {
    let file = load();
    for v in &file.valid {
        let codec = verifying_codec_with(&file.keys, v.now, v.policy);
        let context = hex::decode(&v.context).expect("hex");
        let got = codec
            .verify::<ciborium::Value>(&v.token, bind(&v.tool, &context).step(&v.step))
            .unwrap_or_else(|e| panic!("{}: {e}", v.name));
        assert_eq!(got.step, v.step, "{}", v.name);
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
        let unsealed = codec
            .unseal(&s.token, aad(&hex::decode(&s.aad).expect("hex")))
            .expect("unseal");
        assert_eq!(hex::encode(unsealed.payload), s.payload, "{}", s.name);
        assert_eq!(unsealed.key_id.get(), s.key_id, "{}", s.name);
    }
}

/// Where a vector's operation failed, and the error.
///
/// The caller's arguments are checked where they are built (FORMAT.md §8
/// step 0, "mint refusal 1"): the tool and context by [`Binding`], the
/// associated data by [`Aad`], the step and ttl by `mint`.
#[derive(Debug)]
struct Failure {
    /// "binding", "aad", or the operation: "verify", "unseal", "mint", "seal".
    at: &'static str,
    error: Error,
}

impl Failure {
    fn at(at: &'static str) -> impl FnOnce(Error) -> Failure {
        move |error| Failure { at, error }
    }

    fn reason(&self) -> &'static str {
        self.error.reason()
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}): {}", self.reason(), self.at, self.error)
    }
}

/// Verifies (or unseals) as a vector says: returns the claims' times and step,
/// or the payload for unseal.
#[allow(clippy::too_many_arguments)]
fn run_verify(
    file: &VectorFile,
    operation: &str,
    token: &str,
    tool: &str,
    context: &str,
    expected_step: Option<&str>,
    now: u64,
    policy: Option<VectorPolicy>,
    decode_as: Option<&str>,
) -> Result<(u64, u64, String, Vec<u8>), Failure> {
    let codec = verifying_codec_with(&file.keys, now, policy);
    let context = hex::decode(context).expect("hex");
    fn go<T: serde::de::DeserializeOwned>(
        codec: &Codec,
        token: &str,
        tool: &str,
        step: Option<&str>,
        context: &[u8],
    ) -> Result<(u64, u64, String, Vec<u8>), Failure> {
        let binding = Binding::with_context_bytes(tool, context)
            .map_err(|e| Failure::at("binding")(e.into()))?;
        let expected = match step {
            Some(step) => binding.step(step),
            None => binding.any_step(),
        };
        let v = codec
            .verify::<T>(token, expected)
            .map_err(|e| Failure::at("verify")(e.into()))?;
        Ok((v.issued_at, v.expires_at, v.step, Vec::new()))
    }
    match (operation, decode_as) {
        ("unseal", _) => {
            let aad = Aad::new(&context).map_err(|e| Failure::at("aad")(e.into()))?;
            codec
                .unseal(token, aad)
                .map(|u| (0, 0, String::new(), u.payload))
                .map_err(|e| Failure::at("unseal")(e.into()))
        }
        // Not decoded: any well-formed state passes step 14.
        ("verify", None) => {
            go::<serde::de::IgnoredAny>(&codec, token, tool, expected_step, &context)
        }
        ("verify", Some("uint")) => go::<u64>(&codec, token, tool, expected_step, &context),
        (other, d) => panic!("unknown operation {other} or decode_as {d:?}"),
    }
}

/// What a consume gave: (issued_at, expires_at, step, state CBOR, key id),
/// and the store's records after the call.
type Consumed = (u64, u64, String, Vec<u8>, u32);

/// Consumes as a vector says, with a store holding `spent`: the outcome and
/// the records afterwards.
#[allow(clippy::too_many_arguments)]
fn run_consume(
    file: &VectorFile,
    token: &str,
    tool: &str,
    context: &str,
    expected_step: Option<&str>,
    now: u64,
    policy: Option<VectorPolicy>,
    spent: &[String],
) -> (
    Result<Consumed, Failure>,
    std::collections::BTreeMap<String, u64>,
) {
    let codec = verifying_codec_with(&file.keys, now, policy);
    let context = hex::decode(context).expect("hex");
    let store = NamedStore::holding(spent);
    let result = (|| {
        let binding = Binding::with_context_bytes(tool, &context)
            .map_err(|e| Failure::at("binding")(e.into()))?;
        let expected = match expected_step {
            Some(step) => binding.step(step),
            None => binding.any_step(),
        };
        // The state's exact bytes: the raw half, then the store (what
        // `Codec::consume` does, without decoding the state).
        let v = codec
            .verify_single_use_raw(token, expected)
            .and_then(|redemption| redemption.redeem(&store))
            .map_err(|e| Failure::at("consume")(e.into()))?;
        Ok((v.issued_at, v.expires_at, v.step, v.state, v.key_id.get()))
    })();
    (result, store.records())
}

fn run_invalid(file: &VectorFile, v: &InvalidVector) -> Result<(), Failure> {
    if v.operation == "consume" {
        assert!(
            v.decode_as.is_none(),
            "{}: consume decodes the state",
            v.name
        );
        let (result, records) = run_consume(
            file,
            &v.token,
            &v.tool,
            &v.context,
            v.expected_step.as_deref(),
            v.now,
            v.policy,
            &v.spent,
        );
        // A refused consume records nothing (FORMAT.md §8 step 15).
        let before: std::collections::BTreeMap<String, u64> =
            v.spent.iter().map(|n| (n.clone(), u64::MAX)).collect();
        if result.is_err() {
            assert_eq!(
                records, before,
                "{}: a refused consume changed the store",
                v.name
            );
        }
        return result.map(drop);
    }
    assert!(v.spent.is_empty(), "{}: `spent` without consume", v.name);
    run_verify(
        file,
        &v.operation,
        &v.token,
        &v.tool,
        &v.context,
        v.expected_step.as_deref(),
        v.now,
        v.policy,
        v.decode_as.as_deref(),
    )
    .map(drop)
}

/// Mints (or seals) as a `mint_invalid` vector says.
fn run_mint(file: &VectorFile, v: &MintInvalidVector) -> Result<String, Failure> {
    let random = hex::decode(&v.random).expect("hex");
    let codec = minting_codec(&file.keys, v.key_id, v.now, &random, policy_of(v.policy));
    let context = hex::decode(&v.context).expect("hex");
    match v.operation.as_str() {
        "mint" => {
            let state: ciborium::Value =
                ciborium::from_reader(&hex::decode(&v.state_cbor).expect("hex")[..]).expect("cbor");
            let binding = Binding::with_context_bytes(&v.tool, &context)
                .map_err(|e| Failure::at("binding")(e.into()))?;
            let ttl = Duration::from_secs(v.ttl);
            if v.single_use {
                codec.mint_single_use(binding, &v.step, &state, ttl)
            } else {
                codec.mint(binding, &v.step, &state, ttl)
            }
            .map(|m| m.token)
            .map_err(|e| Failure::at("mint")(e.into()))
        }
        "seal" => {
            let aad = Aad::new(&context).map_err(|e| Failure::at("aad")(e.into()))?;
            codec
                .seal(&hex::decode(&v.payload).expect("hex"), aad)
                .map(|s| s.token)
                .map_err(|e| Failure::at("seal")(e.into()))
        }
        other => panic!("unknown operation {other}"),
    }
}

/// Where an argument check belongs, from the arguments themselves: a tool or
/// context out of range fails when the [`Binding`] is built, associated data
/// out of range when the [`Aad`] is; nothing else is checked there.
fn argument_stage(operation: &str, tool: &str, context_hex: &str) -> Option<&'static str> {
    let context_len = context_hex.len() / 2;
    match operation {
        "verify" | "consume" | "mint"
            if tool.is_empty() || tool.len() > MAX_TOOL_LEN || context_len > MAX_CONTEXT_LEN =>
        {
            Some("binding")
        }
        "unseal" | "seal" if context_len > MAX_CONTEXT_LEN => Some("aad"),
        _ => None,
    }
}

#[test]
fn accepted_vectors_verify() {
    let file = load();
    assert!(file.accepted.len() >= 30, "the accepted set shrank");
    for v in &file.accepted {
        if v.operation == "consume" {
            let (result, records) = run_consume(
                &file,
                &v.token,
                &v.tool,
                &v.context,
                v.expected_step.as_deref(),
                v.now,
                v.policy,
                &v.spent,
            );
            let got = result.unwrap_or_else(|e| panic!("{}: {e}", v.name));
            assert_eq!(
                (
                    Some(got.0),
                    Some(got.1),
                    Some(got.2),
                    Some(hex::encode(&got.3)),
                    Some(got.4)
                ),
                (
                    v.issued_at,
                    v.expires_at,
                    v.step.clone(),
                    v.state_cbor.clone(),
                    v.key_id
                ),
                "{}",
                v.name
            );
            let mut want: std::collections::BTreeMap<String, u64> =
                v.spent.iter().map(|n| (n.clone(), u64::MAX)).collect();
            let record = v.spent_record.clone().expect("spent_record");
            assert!(!want.contains_key(&record), "{}", v.name);
            want.insert(record, v.record_until.expect("record_until"));
            assert_eq!(records, want, "{}: the records after the consume", v.name);
            continue;
        }
        assert!(v.spent.is_empty() && v.spent_record.is_none(), "{}", v.name);
        let got = run_verify(
            &file,
            &v.operation,
            &v.token,
            &v.tool,
            &v.context,
            v.expected_step.as_deref(),
            v.now,
            v.policy,
            v.decode_as.as_deref(),
        )
        .unwrap_or_else(|e| panic!("{}: {e}", v.name));
        if v.operation == "unseal" {
            assert_eq!(Some(hex::encode(&got.3)), v.payload, "{}", v.name);
        } else {
            assert_eq!(
                (Some(got.0), Some(got.1), Some(got.2)),
                (v.issued_at, v.expires_at, v.step.clone()),
                "{}",
                v.name
            );
        }
    }
}

#[test]
fn mint_invalid_vectors_are_refused_with_their_reason() {
    let file = load();
    assert!(file.mint_invalid.len() >= 20, "the mint_invalid set shrank");
    for v in &file.mint_invalid {
        match run_mint(&file, v) {
            Ok(t) => panic!("{}: minted {t}", v.name),
            Err(e) => {
                assert_eq!(e.reason(), v.expect_fail, "{}: {e}", v.name);
                // Refused where the argument is built, or else by the operation.
                let at = argument_stage(&v.operation, &v.tool, &v.context)
                    .unwrap_or(v.operation.as_str());
                assert_eq!(e.at, at, "{}: {e}", v.name);
            }
        }
    }
}

#[test]
fn keyring_vectors_load_or_fail_with_their_reason() {
    let file = load();
    for v in &file.keyrings {
        let specs = v.keys.iter().map(|k| {
            KeySpec::new(
                KeyId::new(k.id),
                Algorithm::from_name(&k.algorithm).expect("algorithm"),
                KeyStatus::from_name(&k.status).expect("status"),
                Secret::from_base64(&k.secret).expect("base64"),
            )
        });
        match (Keyring::new(specs), &v.expect_fail) {
            (Ok(_), None) => {}
            (Err(e), Some(reason)) => assert_eq!(e.reason(), reason, "{}: {e}", v.name),
            (got, want) => panic!("{}: got {:?}, want {want:?}", v.name, got.map(drop)),
        }
    }
}

#[test]
fn policy_vectors_build_or_fail_with_their_reason() {
    let file = load();
    for v in &file.policies {
        let p = v.policy;
        let built = Policy::new()
            .with_max_token_len(p.max_token_len)
            .and_then(|q| q.with_clock_leeway(Duration::from_secs(p.clock_leeway)))
            .and_then(|q| q.with_max_lifetime(Duration::from_secs(p.max_lifetime)));
        match (built, &v.expect_fail) {
            (Ok(q), None) => {
                assert_eq!(q.max_token_len(), p.max_token_len, "{}", v.name);
                assert_eq!(q.clock_leeway(), p.clock_leeway, "{}", v.name);
                assert_eq!(q.max_lifetime(), p.max_lifetime, "{}", v.name);
            }
            (Err(e), Some(reason)) => assert_eq!(e.reason(), reason, "{}", v.name),
            (got, want) => panic!("{}: got {got:?}, want {want:?}", v.name),
        }
    }
}

#[test]
fn every_error_name_of_the_spec_is_produced_by_a_vector() {
    let file = load();
    let mut seen: std::collections::BTreeSet<&str> = file
        .invalid
        .iter()
        .map(|v| v.expect_fail.as_str())
        .collect();
    seen.extend(file.mint_invalid.iter().map(|v| v.expect_fail.as_str()));
    seen.extend(
        file.keyrings
            .iter()
            .filter_map(|v| v.expect_fail.as_deref()),
    );
    seen.extend(
        file.policies
            .iter()
            .filter_map(|v| v.expect_fail.as_deref()),
    );
    let spec = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/FORMAT.md"))
        .expect("FORMAT.md");
    for name in [
        "invalid_argument",
        "too_large",
        "malformed",
        "unsupported_version",
        "unsupported_algorithm",
        "wrong_kind",
        "unknown_key",
        "retired_key",
        "algorithm_mismatch",
        "authentication_failed",
        "lifetime_too_long",
        "not_yet_valid",
        "expired",
        "wrong_step",
        "state_decoding",
        "state_encoding",
        "randomness_unavailable",
        "invalid_keyring",
        "single_use",
        "replayed",
    ] {
        assert!(
            spec.contains(&format!("`{name}`")),
            "FORMAT.md does not name {name}"
        );
        assert!(seen.contains(name), "no vector produces {name}");
    }
    // Named by the spec, produced by no vector, and why; each is tested
    // where the reason is given.
    for (name, why) in [
        (
            "replay_store_full",
            "a store's answer, not a property of a token: the vectors' store is a set of \
             record names that always answers (tests/core_single_use.rs \
             a_store_that_cannot_record_refuses_the_token_and_leaves_it_unspent; the \
             MemoryReplayStore's capacity in crates/reqstate/src/single_use.rs)",
        ),
        (
            "replay_store_unavailable",
            "a store's answer, not a property of a token (tests/core_single_use.rs \
             a_store_that_cannot_record_refuses_the_token_and_leaves_it_unspent)",
        ),
    ] {
        assert!(
            spec.contains(&format!("`{name}`")),
            "FORMAT.md does not name {name}"
        );
        assert!(
            !seen.contains(name),
            "a vector produces {name}: list it above"
        );
        println!("{name}: no vector: {why}");
    }
    // Every refusal the core names is produced by a vector or listed above.
    for name in reqstate::Refusal::REASONS {
        assert!(
            seen.contains(name)
                || ["replay_store_full", "replay_store_unavailable"].contains(&name),
            "the core refuses with {name}, which no vector produces"
        );
    }
}

#[test]
fn invalid_vectors_fail_with_their_reason() {
    let file = load();
    assert!(file.invalid.len() >= 60, "the invalid set shrank");
    for v in &file.invalid {
        match run_invalid(&file, v) {
            Ok(()) => panic!("{}: accepted", v.name),
            Err(e) => {
                assert_eq!(e.reason(), v.expect_fail, "{}: {e}", v.name);
                // Refused where the argument is built, or else by the operation.
                let at = argument_stage(&v.operation, &v.tool, &v.context)
                    .unwrap_or(v.operation.as_str());
                assert_eq!(e.at, at, "{}: {e}", v.name);
            }
        }
    }
}

/// The caller-argument vectors (FORMAT.md §8 step 0, "mint refusal 1" and
/// "mint refusal 3", "seal: aad …") keep their reason, `invalid_argument`,
/// now that the check happens where the argument is built: an out-of-range
/// tool or context where the `Binding` is built, associated data where the
/// `Aad` is, a step, ttl or expiry in `mint`. A tool or context in range at
/// exactly the limit builds.
#[test]
fn invalid_argument_vectors_fail_where_the_argument_is_built() {
    let file = load();
    let mut at = std::collections::BTreeMap::<&str, usize>::new();
    let verifies = file.invalid.iter().map(|v| {
        (
            &v.name,
            &v.expect_fail,
            v.operation.as_str(),
            v.tool.as_str(),
            v.context.as_str(),
            run_invalid(&file, v).err(),
        )
    });
    let mints = file.mint_invalid.iter().map(|v| {
        (
            &v.name,
            &v.expect_fail,
            v.operation.as_str(),
            v.tool.as_str(),
            v.context.as_str(),
            run_mint(&file, v).err(),
        )
    });
    for (name, expect_fail, operation, tool, context, got) in verifies.chain(mints) {
        let e = got.unwrap_or_else(|| panic!("{name}: accepted"));
        let stage = argument_stage(operation, tool, context);
        if let Some(stage) = stage {
            assert_eq!(expect_fail, "invalid_argument", "{name}");
            assert_eq!(e.at, stage, "{name}: {e}");
            assert!(matches!(e.error, Error::InvalidArgument(_)), "{name}: {e}");
        }
        if expect_fail == "invalid_argument" {
            assert_eq!(e.reason(), "invalid_argument", "{name}: {e}");
            // Only a mint checks arguments besides the binding's and aad's.
            assert!(
                stage.is_some() || operation == "mint",
                "{name}: invalid_argument from {}",
                e.at
            );
            *at.entry(e.at).or_default() += 1;
        }
    }
    println!("invalid_argument vectors by where they fail: {at:?}");
    for stage in ["binding", "aad", "mint"] {
        assert!(
            at.contains_key(stage),
            "no invalid_argument vector fails at {stage}: {at:?}"
        );
    }
    // At the limits, the binding and the associated data build.
    let tool = "t".repeat(MAX_TOOL_LEN);
    let context = vec![0u8; MAX_CONTEXT_LEN];
    assert!(Binding::with_context_bytes(&tool, &context).is_ok());
    assert!(Aad::new(&context).is_ok());
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
                    .verify::<ciborium::Value>(&token, bind(&v.tool, &context))
                    .is_err(),
                "{}: byte {i} changed and still accepted",
                v.name
            );
            checked += 1;
        }
    }
    for v in &file.single_use {
        let codec = verifying_codec_with(&file.keys, v.now, v.policy);
        let context = hex::decode(&v.context).expect("hex");
        let raw = engine.decode(&v.token).expect("valid");
        for i in 0..raw.len() {
            let mut changed = raw.clone();
            changed[i] = changed[i].wrapping_add(1);
            let token = engine.encode(&changed);
            assert!(
                codec
                    .verify_single_use_raw(&token, bind(&v.tool, &context))
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
        .chain(file.single_use.iter().map(|v| {
            (
                v.key_id,
                &v.random,
                &v.nonce,
                &v.token,
                v.tool.as_bytes().to_vec(),
                hex::decode(&v.context).expect("hex"),
            )
        }))
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
