//! `schedules`: keyring files whose keys carry `mint_from` and `retire_at`
//! (docs/KEYRING.md, "Keys on a schedule"). Each vector states by hand what
//! the file does at instants around its transitions (which key mints, which
//! keys' tokens verify, which are refused) or that it is refused; the core
//! must agree, and the tokens written are the core's.

use std::time::Duration;

use base64::Engine as _;
use reqstate::{Aad, Codec, FixedClock, Keyring, MemoryReplayStore, Refusal};

use super::REFERENCE_CONTEXT;
use super::codec::{Scripted, base64_standard, bind, keyring_file_toml, try_policy};
use super::minted::reference;
use crate::schema::{
    KeyringEntry, ScheduleCheck, ScheduleClaims, ScheduleOther, ScheduleToken, ScheduleVector,
    VectorPolicy,
};

/// 2026-12-01T12:00:00Z.
const T0: u64 = 1_796_126_400;
/// The policy most vectors are served under: the sidecar's defaults
/// (max ttl 600 s, leeway 60 s), so a key's tokens live 660 s after it
/// stops minting.
const LIVE: u64 = 660;
const TOOL: &str = "increase-counter";
const STEP: &str = "confirm";
const TTL: u64 = 600;

fn served() -> VectorPolicy {
    VectorPolicy {
        max_token_len: None,
        clock_leeway: Some(60),
        max_lifetime: Some(600),
    }
}

fn at(t: u64) -> String {
    reqstate::rfc3339_utc(t)
}

/// A key with a secret of its own (32 bytes of `0x40 + id`).
fn key(id: u32, algorithm: &str, status: &str) -> KeyringEntry {
    KeyringEntry {
        id: Some(id.into()),
        algorithm: Some(algorithm.into()),
        status: Some(status.into()),
        secret: Some(base64_standard(&[0x40u8.wrapping_add(id as u8); 32])),
        ..KeyringEntry::default()
    }
}

fn mint_from(mut k: KeyringEntry, t: u64) -> KeyringEntry {
    k.mint_from = Some(at(t));
    k
}

fn retire_at(mut k: KeyringEntry, t: u64) -> KeyringEntry {
    k.retire_at = Some(at(t));
    k
}

/// What a vector says the file does at `now`: the minting key, and the keys
/// whose tokens are refused (every other key's verify).
struct Expect {
    now: u64,
    minting: u32,
    refused: &'static [u32],
}

fn expect(now: u64, minting: u32, refused: &'static [u32]) -> Expect {
    Expect {
        now,
        minting,
        refused,
    }
}

const H: &str = "hmac-sha256";
const X: &str = "xchacha20-poly1305";

/// The schedule vectors, in file order.
pub(super) fn schedules() -> Vec<ScheduleVector> {
    let (m2, m3) = (T0 + 300, T0 + 1_200);
    let mut all = Vec::new();
    let mut ok = |name: &str, keys: Vec<KeyringEntry>, policy: VectorPolicy, at: Vec<Expect>| {
        all.push(accepted(name, keys, policy, &at));
    };
    ok(
        "no schedule: the statuses alone",
        vec![
            key(1, H, "primary"),
            key(2, H, "active"),
            key(3, H, "retired"),
        ],
        served(),
        vec![expect(T0, 1, &[3])],
    );
    ok(
        "a scheduled key verifies before its mint_from and mints from it (mint_from - 1 s, at, + 1 s)",
        vec![key(1, H, "primary"), mint_from(key(2, H, "active"), m2)],
        served(),
        vec![
            expect(m2 - 1, 1, &[]),
            expect(m2, 2, &[]),
            expect(m2 + 1, 2, &[]),
        ],
    );
    ok(
        "retire_at at the earliest safe instant: successor's mint_from + max lifetime + leeway",
        vec![
            retire_at(key(1, H, "primary"), m2 + LIVE),
            mint_from(key(2, H, "active"), m2),
        ],
        served(),
        vec![
            expect(T0, 1, &[]),
            expect(m2, 2, &[]),
            expect(m2 + LIVE - 1, 2, &[]),
            expect(m2 + LIVE, 2, &[1]),
            expect(m2 + LIVE + 1, 2, &[1]),
        ],
    );
    ok(
        "three keys in mint order, each retired when its tokens are dead",
        vec![
            retire_at(key(1, H, "primary"), m2 + LIVE),
            retire_at(mint_from(key(2, H, "active"), m2), m3 + LIVE),
            mint_from(key(3, H, "active"), m3),
        ],
        served(),
        vec![
            expect(m2 - 1, 1, &[]),
            expect(m2 + LIVE, 2, &[1]),
            expect(m3 - 1, 2, &[1]),
            expect(m3, 3, &[1]),
            expect(m3 + LIVE, 3, &[1, 2]),
        ],
    );
    ok(
        "the mint order is by mint_from, not by file order or id",
        vec![
            mint_from(key(7, H, "active"), m3),
            mint_from(key(3, H, "active"), m2),
            key(5, H, "primary"),
        ],
        served(),
        vec![
            expect(m2 - 1, 5, &[]),
            expect(m2, 3, &[]),
            expect(m3 - 1, 3, &[]),
            expect(m3, 7, &[]),
        ],
    );
    ok(
        "the mint order is by mint_from where id order differs (key 9 takes over before key 3)",
        vec![
            key(5, H, "primary"),
            mint_from(key(3, H, "active"), m3),
            mint_from(key(9, H, "active"), m2),
        ],
        served(),
        vec![
            expect(m2 - 1, 5, &[]),
            expect(m2, 9, &[]),
            expect(m3 - 1, 9, &[]),
            expect(m3, 3, &[]),
            expect(m3 + 1, 3, &[]),
        ],
    );
    ok(
        "retire_at ends every kind: state, single-use and sealed tokens of an XChaCha20-Poly1305 key",
        vec![
            retire_at(key(1, X, "primary"), m2 + LIVE),
            mint_from(key(2, X, "active"), m2),
        ],
        served(),
        vec![
            expect(m2 - 1, 1, &[]),
            expect(m2 + LIVE - 1, 2, &[]),
            expect(m2 + LIVE, 2, &[1]),
        ],
    );
    ok(
        "a mint_from in the past: the scheduled key mints at once",
        vec![
            key(1, H, "primary"),
            mint_from(key(2, H, "active"), T0 - 86_400),
        ],
        served(),
        vec![expect(T0, 2, &[])],
    );
    ok(
        "a retire_at on a key outside the mint order is not checked against the policy",
        vec![
            key(1, H, "primary"),
            retire_at(key(2, H, "active"), T0 + 10),
        ],
        served(),
        vec![expect(T0 + 9, 1, &[]), expect(T0 + 10, 1, &[2])],
    );
    ok(
        "a scheduled takeover by an XChaCha20-Poly1305 key, a retired key beside",
        vec![
            retire_at(key(1, H, "primary"), m2 + LIVE),
            mint_from(key(2, X, "active"), m2),
            key(3, X, "retired"),
        ],
        served(),
        vec![expect(m2 - 1, 1, &[3]), expect(m2, 2, &[3])],
    );
    ok(
        "the policy decides what is safe: a day's lifetime needs a day and a minute",
        vec![
            retire_at(key(1, H, "primary"), m2 + 86_400 + 60),
            mint_from(key(2, H, "active"), m2),
        ],
        VectorPolicy::default(),
        vec![
            expect(m2 + 86_400 + 59, 2, &[]),
            expect(m2 + 86_400 + 60, 2, &[1]),
        ],
    );
    ok(
        "leeway 0 and a lifetime of 1 s: retire_at one second after the takeover",
        vec![
            retire_at(key(1, H, "primary"), m2 + 1),
            mint_from(key(2, H, "active"), m2),
        ],
        VectorPolicy {
            max_token_len: None,
            clock_leeway: Some(0),
            max_lifetime: Some(1),
        },
        vec![expect(m2, 2, &[]), expect(m2 + 1, 2, &[1])],
    );

    let refused =
        |name: &str, keys: Vec<KeyringEntry>, policy: VectorPolicy| refused(name, keys, policy);
    let mut bad = vec![
        refused(
            "retire_at one second before the earliest safe instant",
            vec![
                retire_at(key(1, H, "primary"), m2 + LIVE - 1),
                mint_from(key(2, H, "active"), m2),
            ],
            served(),
        ),
        refused(
            "the same file served with a day's lifetime (the default policy)",
            vec![
                retire_at(key(1, H, "primary"), m2 + LIVE),
                mint_from(key(2, H, "active"), m2),
            ],
            VectorPolicy::default(),
        ),
        refused(
            "a middle key retired too early",
            vec![
                retire_at(key(1, H, "primary"), m2 + LIVE),
                retire_at(mint_from(key(2, H, "active"), m2), m3 + LIVE - 1),
                mint_from(key(3, H, "active"), m3),
            ],
            served(),
        ),
        refused(
            "retire_at before the successor takes over: no key would mint in between",
            vec![
                retire_at(key(1, H, "primary"), m2 - 1),
                mint_from(key(2, H, "active"), m2),
            ],
            served(),
        ),
        refused(
            "retire_at on the primary with no successor",
            vec![retire_at(key(1, H, "primary"), T0 + 86_400)],
            served(),
        ),
        refused(
            "retire_at on the last key of the mint order",
            vec![
                retire_at(key(1, H, "primary"), m2 + LIVE),
                retire_at(mint_from(key(2, H, "active"), m2), m2 + 86_400),
            ],
            served(),
        ),
        refused(
            "two keys start minting at the same instant",
            vec![
                key(1, H, "primary"),
                mint_from(key(2, H, "active"), m2),
                mint_from(key(3, H, "active"), m2),
            ],
            served(),
        ),
        refused(
            "mint_from on the primary",
            vec![mint_from(key(1, H, "primary"), m2)],
            served(),
        ),
        refused(
            "mint_from on a retired key",
            vec![key(1, H, "primary"), mint_from(key(2, H, "retired"), m2)],
            served(),
        ),
        refused(
            "retire_at on a retired key",
            vec![key(1, H, "primary"), retire_at(key(2, H, "retired"), m2)],
            served(),
        ),
        refused(
            "a schedule without a primary key",
            vec![mint_from(key(1, H, "active"), T0 - 10)],
            served(),
        ),
    ];
    let written = |name: &str, field: &str, text: &str| {
        let mut k = key(2, H, "active");
        match field {
            "mint_from" => k.mint_from = Some(text.into()),
            _ => k.retire_at = Some(text.into()),
        }
        refused(name, vec![key(1, H, "primary"), k], served())
    };
    bad.extend([
        written("mint_from in month 00", "mint_from", "2026-00-01T12:05:00Z"),
        written(
            "mint_from with a fraction of a second",
            "mint_from",
            "2026-12-01T12:05:00.5Z",
        ),
        written(
            "mint_from without an offset (a local date-time)",
            "mint_from",
            "2026-12-01T12:05:00",
        ),
        written("mint_from as a date alone", "mint_from", "2026-12-01"),
        written("retire_at before 1970", "retire_at", "1969-12-31T23:59:59Z"),
        written(
            "mint_from on second 60 (a leap second)",
            "mint_from",
            "2016-12-31T23:59:60Z",
        ),
        written("mint_from on Feb 30", "mint_from", "2026-02-30T00:00:00Z"),
        written(
            "mint_from with a zero fraction (no fraction however written)",
            "mint_from",
            "2026-12-01T12:05:00.0Z",
        ),
        written(
            "retire_at with a fraction of a second",
            "retire_at",
            "2026-12-01T12:05:00.001Z",
        ),
    ]);
    all.extend(bad);
    all
}

fn claims() -> (ScheduleClaims, ciborium::Value) {
    let state: ciborium::Value = serde_json::from_value(reference()).expect("state");
    let mut state_cbor = Vec::new();
    ciborium::into_writer(&state, &mut state_cbor).expect("cbor");
    let claims = ScheduleClaims {
        tool: TOOL.into(),
        context: hex::encode(REFERENCE_CONTEXT),
        step: STEP.into(),
        state_cbor: hex::encode(state_cbor),
        ttl: TTL,
    };
    (claims, state)
}

/// Loads a schedule vector's file under its policy, as every loader does:
/// the keyring, then its schedule against the policy.
fn load(keys: &[KeyringEntry], policy: VectorPolicy) -> Result<Keyring, reqstate::KeyringError> {
    let keyring = Keyring::from_toml(&keyring_file_toml(None, keys))?;
    keyring.check_schedule(&try_policy(policy).expect("a valid policy"))?;
    Ok(keyring)
}

fn refused(name: &str, keys: Vec<KeyringEntry>, policy: VectorPolicy) -> ScheduleVector {
    match load(&keys, policy) {
        Err(e) if e.reason() == "invalid_keyring" => {}
        other => panic!("{name}: the core loads it ({:?})", other.map(|_| ())),
    }
    ScheduleVector {
        name: name.into(),
        keys,
        policy,
        expect_fail: Some("invalid_keyring".into()),
        claims: None,
        at: Vec::new(),
    }
}

/// The random bytes a check's mints draw (the first 24: its
/// XChaCha20-Poly1305 state token's; then single-use token ids and nonces).
fn random() -> Vec<u8> {
    (0..240u8)
        .map(|i| i.wrapping_mul(11).wrapping_add(5))
        .collect()
}

fn accepted(
    name: &str,
    keys: Vec<KeyringEntry>,
    policy: VectorPolicy,
    expected: &[Expect],
) -> ScheduleVector {
    let (mut claims, state) = claims();
    let served = try_policy(policy).expect("a valid policy");
    claims.ttl = TTL.min(served.max_lifetime());
    let ttl = Duration::from_secs(claims.ttl);
    let binding = bind(TOOL, REFERENCE_CONTEXT);
    let mut at = Vec::new();
    for e in expected {
        let keyring = load(&keys, policy).unwrap_or_else(|err| panic!("{name}: {err}"));
        let algorithm = |id: u32| {
            keyring
                .get(reqstate::KeyId::new(id))
                .expect("a key of the file")
                .algorithm()
        };
        let deterministic = algorithm(e.minting) == reqstate::Algorithm::HmacSha256;
        let codec = Codec::with_parts(keyring, served, FixedClock(e.now), Scripted::new(&random()));
        let minted = codec.mint(binding, STEP, &state, ttl).expect("mints");
        assert_eq!(minted.key_id.get(), e.minting, "{name} at {}", e.now);
        // Every kind is minted by the key that mints at `now`.
        let single_use = codec
            .mint_single_use(binding, STEP, &state, ttl)
            .expect("mints");
        assert_eq!(single_use.key_id.get(), e.minting, "{name} at {}", e.now);
        let sealed = codec.seal(&state_cbor(&state), aad()).expect("seals");
        assert_eq!(sealed.key_id.get(), e.minting, "{name} at {}", e.now);
        codec
            .verify::<ciborium::Value>(&minted.token, binding.step(STEP))
            .unwrap_or_else(|r| panic!("{name} at {}: its own token: {r}", e.now));
        let mut tokens = Vec::new();
        for k in &keys {
            let id =
                u32::try_from(k.id.as_ref().and_then(|v| v.as_u64()).expect("id")).expect("id");
            let alone = KeyringEntry {
                status: Some("primary".into()),
                mint_from: None,
                retire_at: None,
                ..k.clone()
            };
            let one = Keyring::from_toml(&keyring_file_toml(None, &[alone])).expect("one key");
            let own = Codec::with_parts(one, served, FixedClock(e.now), Scripted::new(&random()));
            let token = own.mint(binding, STEP, &state, ttl).expect("mints").token;
            let result = match codec.verify::<ciborium::Value>(&token, binding.step(STEP)) {
                Ok(v) => {
                    assert_eq!(v.key_id.get(), id);
                    "ok"
                }
                Err(Refusal::RetiredKey(_)) => "retired_key",
                Err(other) => panic!("{name} at {}: key {id}: {other}", e.now),
            };
            assert_eq!(
                result == "retired_key",
                e.refused.contains(&id),
                "{name} at {}: key {id}",
                e.now
            );
            let others = others(&codec, &own, k, e.now, &token, result, &state);
            tokens.push(ScheduleToken {
                key_id: id,
                token,
                result: result.into(),
                others,
            });
        }
        at.push(ScheduleCheck {
            now: e.now,
            minting: e.minting,
            deterministic,
            token: minted.token,
            tokens,
        });
    }
    ScheduleVector {
        name: name.into(),
        keys,
        policy,
        expect_fail: None,
        claims: Some(claims),
        at,
    }
}

fn state_cbor(state: &ciborium::Value) -> Vec<u8> {
    let mut out = Vec::new();
    ciborium::into_writer(state, &mut out).expect("cbor");
    out
}

fn aad() -> Aad<'static> {
    Aad::new(REFERENCE_CONTEXT).expect("a short aad")
}

/// The reason of a verify, consume or unseal, "ok" if accepted.
fn outcome<T, E: core::fmt::Display>(
    r: Result<T, E>,
    reason: impl Fn(&E) -> &'static str,
) -> String {
    match r {
        Ok(_) => "ok".into(),
        Err(e) => reason(&e).into(),
    }
}

/// Key `k`'s other tokens at `now` (`own`: a codec with `k` as its only,
/// primary key) put through the scheduled keyring's `codec`: its
/// single-use token consumed and its sealed payload unsealed (`retire_at`
/// ends every kind), and tokens that pin where step 7 checks `retire_at`:
/// after step 6 (the kind), before the algorithm and before the tag.
fn others(
    codec: &Codec,
    own: &Codec,
    k: &KeyringEntry,
    now: u64,
    token: &str,
    result: &str,
    state: &ciborium::Value,
) -> Vec<ScheduleOther> {
    let binding = bind(TOOL, REFERENCE_CONTEXT);
    let ttl = Duration::from_secs(TTL.min(codec.policy().max_lifetime()));
    let retired = result == "retired_key";
    let or = |refused: &str| if retired { "retired_key" } else { refused }.to_string();
    let verify = |t: &str| outcome(codec.verify_raw(t, binding.step(STEP)), |e| e.reason());
    let consume = |t: &str| {
        let store = MemoryReplayStore::new(16);
        outcome(
            codec.consume::<ciborium::Value>(t, binding.step(STEP), &store),
            |e| e.reason(),
        )
    };
    let single_use = own
        .mint_single_use(binding, STEP, state, ttl)
        .expect("mints")
        .token;
    let sealed = own.seal(&state_cbor(state), aad()).expect("seals").token;
    // The same key id and secret under the other algorithm: a genuine token
    // whose algorithm is not the key's.
    let other_algorithm = KeyringEntry {
        algorithm: Some(
            if k.algorithm.as_deref() == Some(H) {
                X
            } else {
                H
            }
            .into(),
        ),
        status: Some("primary".into()),
        mint_from: None,
        retire_at: None,
        ..k.clone()
    };
    let other = Keyring::from_toml(&keyring_file_toml(None, &[other_algorithm])).expect("one key");
    let other = Codec::with_parts(
        other,
        *codec.policy(),
        FixedClock(now),
        Scripted::new(&random()),
    );
    let wrong_algorithm = other.mint(binding, STEP, state, ttl).expect("mints").token;
    let engine = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let mut raw = engine.decode(token).expect("base64url");
    *raw.last_mut().expect("a tag") ^= 1;
    let bad_tag = engine.encode(raw);
    let unsealed = outcome(codec.unseal(&sealed, aad()), |e| e.reason());
    let list = [
        (
            "its single-use token, consumed",
            "consume",
            single_use.clone(),
            consume(&single_use),
            or("ok"),
        ),
        (
            "its sealed payload, unsealed",
            "unseal",
            sealed,
            unsealed,
            or("ok"),
        ),
        (
            "its single-use token, verified (step 6 comes before step 7)",
            "verify",
            single_use,
            String::new(),
            "single_use".into(),
        ),
        (
            "its state token, consumed (step 6 comes before step 7)",
            "consume",
            token.to_string(),
            consume(token),
            "wrong_kind".into(),
        ),
        (
            "a genuine token of the other algorithm under its id and secret",
            "verify",
            wrong_algorithm.clone(),
            verify(&wrong_algorithm),
            or("algorithm_mismatch"),
        ),
        (
            "its state token with the last tag byte flipped",
            "verify",
            bad_tag.clone(),
            verify(&bad_tag),
            or("authentication_failed"),
        ),
    ];
    list.into_iter()
        .map(|(what, operation, token, got, want)| {
            let got = if got.is_empty() { verify(&token) } else { got };
            assert_eq!(got, want, "{what} at {now}");
            ScheduleOther {
                what: what.into(),
                operation: operation.into(),
                token,
                result: want,
            }
        })
        .collect()
}
