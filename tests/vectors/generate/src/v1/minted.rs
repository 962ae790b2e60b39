//! The genuine mints: the file's keys, and its `valid`, `sealed` and
//! `single_use` vectors, minted by the crate with a fixed clock and a
//! scripted random source. Every other family starts from them.

use std::time::Duration;

use reqstate::{Algorithm, KeyStatus, Policy};

use super::codec::{
    aad, base64_standard, bind, default_vector_policy, minting_codec, nonce_in, policy_of,
    random_for, record_name,
};
use super::forge::{hkdf_label, reqstate_derived_key};
use super::{NOW, REFERENCE_CONTEXT};
use crate::schema::{SealedVector, SingleUseVector, ValidVector, VectorKey, VectorPolicy};

/// The genuine mints every other family starts from.
pub(super) struct Minted {
    /// The file's `keys`, derived keys filled in.
    pub(super) keys: Vec<VectorKey>,
    /// The file's `valid` vectors: `[0]` is the HMAC reference claims, `[1]`
    /// the XChaCha20-Poly1305 ones, `[2]` a token with a two-byte key id.
    pub(super) valid: Vec<ValidVector>,
    /// The file's `sealed` vectors.
    pub(super) sealed: Vec<SealedVector>,
    /// The file's `single_use` vectors: `[0]` HMAC, `[1]` XChaCha20-Poly1305,
    /// `[6]` exactly `max_token_len` (100) characters long.
    pub(super) single_use: Vec<SingleUseVector>,
    /// A genuine token under retired key 3 (not a `valid` vector: it does not verify).
    pub(super) retired: ValidVector,
}

impl Minted {
    /// Mints them all.
    pub(super) fn new() -> Minted {
        let keys = keys();
        let valid = valid(&keys);
        let sealed = sealed(&keys);
        let single_use = single_use(&keys, &valid);
        let retired = mint_vector(
            &keys,
            "under retired key 3",
            3,
            "increase-counter",
            "confirm",
            reference(),
            600,
            REFERENCE_CONTEXT,
            5,
        );
        Minted {
            keys,
            valid,
            sealed,
            single_use,
            retired,
        }
    }

    /// The HMAC reference claims' token.
    pub(super) fn hmac(&self) -> &ValidVector {
        &self.valid[0]
    }

    /// The XChaCha20-Poly1305 reference claims' token.
    pub(super) fn xchacha(&self) -> &ValidVector {
        &self.valid[1]
    }
}

/// The reference claims' state: `{"current": 10, "amount": 5}`.
pub(super) fn reference() -> serde_json::Value {
    serde_json::json!({"current": 10, "amount": 5})
}

/// The file's keys, with the derived keys (and nonce keys) computed from
/// FORMAT.md §1 with ring's HKDF.
fn keys() -> Vec<VectorKey> {
    let mut keys = definition_keys();
    for k in &mut keys {
        k.derived_key = hex::encode(reqstate_derived_key(k));
        if k.algorithm == Algorithm::XChaCha20Poly1305.name() {
            k.nonce_key = hex::encode(hkdf_label(k, "reqstate/v1 xchacha20-poly1305 nonce"));
        }
    }
    keys
}

/// The `valid` vectors: the reference claims, then the boundaries a genuine
/// mint reaches (FORMAT.md §3, §4, §8).
fn valid(keys: &[VectorKey]) -> Vec<ValidVector> {
    let reference = reference();
    let mut valid = vec![
        mint_vector(
            keys,
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
            keys,
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
            keys,
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
            keys,
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
        keys,
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
        keys,
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
        keys,
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
        keys,
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
        keys,
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
        keys,
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
            max_token_len: Some(76),
            ..default_vector_policy()
        }),
    ));
    assert_eq!(valid.last().expect("vector").token_chars, 76);

    valid
}

/// The `sealed` vectors (kind 1); the empty payload's is the shortest token.
fn sealed(keys: &[VectorKey]) -> Vec<SealedVector> {
    [
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
        let name = if payload.is_empty() {
            format!("empty sealed payload under key {key_id} (the shortest token)")
        } else {
            format!("sealed payload under key {key_id}")
        };
        seal_vector(keys, &name, key_id, seed, payload, b"tools/call", None)
    })
    .collect::<Vec<_>>()
}

/// A sealed vector under `key_id` (its only, primary key) at [`NOW`], the
/// random bytes drawn from `seed`, under `policy` (the default if `None`).
pub(super) fn seal_vector(
    keys: &[VectorKey],
    name: &str,
    key_id: u32,
    seed: u8,
    payload: &[u8],
    aad_bytes: &[u8],
    policy: Option<VectorPolicy>,
) -> SealedVector {
    let random = random_for(keys, key_id, seed);
    let codec = minting_codec(keys, key_id, NOW, &random, policy_of(policy));
    let token = codec.seal(payload, aad(aad_bytes)).expect("seal").token;
    SealedVector {
        name: name.into(),
        key_id,
        now: NOW,
        payload: hex::encode(payload),
        aad: hex::encode(aad_bytes),
        random: hex::encode(&random),
        nonce: nonce_in(&token),
        token,
        policy,
    }
}

/// The `single_use` vectors (FORMAT.md §5.1, kind 2).
fn single_use(keys: &[VectorKey], valid: &[ValidVector]) -> Vec<SingleUseVector> {
    let reference = reference();
    // Single-use tokens (FORMAT.md §5.1): minted with a scripted token id.
    let su = |name: &str, key_id: u32, id_seed: u8, seed: u8| {
        single_use_vector(
            keys,
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
        keys,
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
        keys,
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
            max_token_len: Some(100),
            ..default_vector_policy()
        }),
    ));
    assert_eq!(single_use.last().expect("vector").token_chars, 100);
    assert_eq!(
        single_use[0].token_chars,
        valid[0].token_chars + 24,
        "§5.1: a token id costs 24 characters"
    );

    single_use
}

/// The file's keys, before their derived keys are filled in.
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

/// Mints a state-token vector at [`NOW`] under the default policy.
#[allow(clippy::too_many_arguments)]
pub(super) fn mint_vector(
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

/// Mints a state-token vector with a scripted random source.
#[allow(clippy::too_many_arguments)]
pub(super) fn mint_vector_at(
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
pub(super) fn token_id_for(seed: u8) -> [u8; 16] {
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
pub(super) fn single_use_vector(
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
    let leeway = policy_of(policy).clock_leeway();
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
