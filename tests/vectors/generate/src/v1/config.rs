//! `keyrings` to load (FORMAT.md §1) and `policies` to build (FORMAT.md §8):
//! both sides of every bound.

use std::collections::BTreeMap;
use std::time::Duration;

use reqstate::{Algorithm, Codec, FixedClock, Keyring, Policy};

use super::NOW;
use super::REFERENCE_CONTEXT;
use super::codec::{
    Scripted, base64_standard, bind, default_vector_policy, keyring_toml, try_policy, vector_policy,
};
use super::minted::reference;
use crate::schema::{
    KeyringEntry, KeyringMint, KeyringVector, PolicyVector, SharedLifetimeVector, VectorPolicy,
};

/// The keyring vectors, in file order. Every verdict is the core's own
/// (`Keyring::from_toml` on [`keyring_toml`]'s text), checked against the
/// one written here.
pub(super) fn keyrings() -> Vec<KeyringVector> {
    let (h, x) = ("hmac-sha256", "xchacha20-poly1305");
    let entry = |id: i64, algorithm: &str, status: &str, len: usize| KeyringEntry {
        id: Some(id.into()),
        algorithm: Some(algorithm.into()),
        status: Some(status.into()),
        secret: Some(base64_standard(&vec![0x42u8; len])),
        ..KeyringEntry::default()
    };
    // A 34-byte secret, so that its encoding ends in `==`.
    let secret34 = base64_standard(&[0x42u8; 34]);
    let with_secret = |e: KeyringEntry, secret: String| KeyringEntry {
        secret: Some(secret),
        ..e
    };
    let keyring = |name: &str, keys: Vec<KeyringEntry>, fail: Option<&str>| KeyringVector {
        name: name.into(),
        version: None,
        keys,
        expect_fail: fail.map(Into::into),
        mint: None,
    };
    let ik = Some("invalid_keyring");
    let b64_32 = base64_standard(&[0x42u8; 32]);
    let mut all = vec![
        keyring(
            "secrets of 32 and 1024 bytes, ids 0 and 2^32 - 1",
            vec![
                entry(0, h, "primary", 32),
                entry(i64::from(u32::MAX), x, "retired", 1024),
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
        // §1: which key mints.
        keyring(
            "§1 the primary mints: of ids 5 (active), 6 (primary), 7 (retired), 4 (active), key 6",
            vec![
                with_secret(entry(5, h, "active", 32), base64_standard(&[0x55u8; 32])),
                with_secret(entry(6, h, "primary", 32), base64_standard(&[0x66u8; 32])),
                with_secret(entry(7, h, "retired", 32), base64_standard(&[0x77u8; 32])),
                with_secret(entry(4, x, "active", 32), base64_standard(&[0x44u8; 32])),
            ],
            None,
        ),
        keyring(
            "§1 algorithm absent: xchacha20-poly1305, the default",
            vec![KeyringEntry {
                algorithm: None,
                ..entry(3, x, "primary", 32)
            }],
            None,
        ),
        keyring(
            "§1 the id range: 2^32 refused",
            vec![entry(1 << 32, h, "primary", 32)],
            ik,
        ),
        keyring(
            "§1 the id range: -1 refused",
            vec![entry(-1, h, "primary", 32)],
            ik,
        ),
        // KEYRING.md "How a secret is read".
        keyring(
            "secret: standard base64 without its padding",
            vec![with_secret(
                entry(1, h, "primary", 34),
                secret34.trim_end_matches('=').into(),
            )],
            None,
        ),
        keyring(
            "secret: standard base64 with its padding (==)",
            vec![with_secret(entry(1, h, "primary", 34), secret34.clone())],
            None,
        ),
        keyring(
            "secret: space, tab, CR and LF around it are ignored",
            vec![with_secret(
                entry(1, h, "primary", 32),
                format!(" \t{b64_32}\r\n"),
            )],
            None,
        ),
        keyring(
            "secret: partial padding (one = of two)",
            vec![with_secret(
                entry(1, h, "primary", 34),
                secret34[..secret34.len() - 1].into(),
            )],
            ik,
        ),
        keyring(
            "secret: too much padding (== after a one-= encoding)",
            vec![with_secret(
                entry(1, h, "primary", 32),
                format!("{b64_32}="),
            )],
            ik,
        ),
        keyring(
            "secret: padding after a whole quantum (====)",
            vec![with_secret(
                entry(1, h, "primary", 33),
                format!("{}====", base64_standard(&[0x42u8; 33])),
            )],
            ik,
        ),
        keyring(
            "secret: a space inside (no padding, so only the space is wrong)",
            vec![with_secret(
                entry(1, h, "primary", 32),
                format!("{} {}", &b64_32[..20], b64_32[20..].trim_end_matches('=')),
            )],
            ik,
        ),
        keyring(
            "secret: a line break inside (no padding)",
            vec![with_secret(
                entry(1, h, "primary", 32),
                format!("{}\n{}", &b64_32[..20], b64_32[20..].trim_end_matches('=')),
            )],
            ik,
        ),
        keyring(
            "secret: a no-break space around it (only ASCII space, tab, CR, LF are ignored)",
            vec![with_secret(
                entry(1, h, "primary", 32),
                format!("{b64_32}\u{a0}"),
            )],
            ik,
        ),
        keyring(
            "secret: a form feed around it (not ignored)",
            vec![with_secret(
                entry(1, h, "primary", 32),
                format!("{b64_32}\u{c}"),
            )],
            ik,
        ),
        keyring(
            "secret: a vertical tab around it (not ignored)",
            vec![with_secret(
                entry(1, h, "primary", 32),
                format!("\u{b}{b64_32}"),
            )],
            ik,
        ),
        keyring(
            "secret: = inside (the rest would decode)",
            vec![with_secret(
                entry(1, h, "primary", 32),
                format!("{}={}", &b64_32[..20], b64_32[20..].trim_end_matches('=')),
            )],
            ik,
        ),
        keyring(
            "secret: the base64url alphabet (- and _)",
            vec![with_secret(
                entry(1, h, "primary", 32),
                base64_standard(&[0xfbu8; 33])
                    .replace('+', "-")
                    .replace('/', "_"),
            )],
            ik,
        ),
        keyring(
            "secret: non-zero unused bits in the last character",
            vec![with_secret(
                entry(1, h, "primary", 32),
                b64_32.replace("QkI=", "QkJ="),
            )],
            ik,
        ),
        keyring(
            "secret: 4n+1 characters",
            vec![with_secret(
                entry(1, h, "primary", 32),
                format!("{}AA", b64_32.trim_end_matches('=')),
            )],
            ik,
        ),
        // KEYRING.md: names are exact, unknown fields refused.
        keyring(
            "status: unknown (revoked), beside a primary",
            vec![entry(1, h, "primary", 32), entry(2, h, "revoked", 32)],
            ik,
        ),
        keyring(
            "status: names are exact (Primary)",
            vec![entry(1, h, "Primary", 32)],
            ik,
        ),
        keyring(
            "algorithm: unknown (aes-256-gcm)",
            vec![entry(1, "aes-256-gcm", "primary", 32)],
            ik,
        ),
        keyring(
            "algorithm: names are exact (HMAC-SHA256)",
            vec![entry(1, "HMAC-SHA256", "primary", 32)],
            ik,
        ),
        keyring(
            "an unknown field (comment)",
            vec![KeyringEntry {
                unknown: BTreeMap::from([("comment".into(), "the old key".into())]),
                ..entry(1, h, "primary", 32)
            }],
            ik,
        ),
        keyring(
            "created: an offset date-time with seconds",
            vec![KeyringEntry {
                created: Some("2026-11-30T12:00:00Z".into()),
                ..entry(1, h, "primary", 32)
            }],
            None,
        ),
        keyring(
            "created: a local date-time (no offset) is refused",
            vec![KeyringEntry {
                created: Some("2026-11-30T12:00:00".into()),
                ..entry(1, h, "primary", 32)
            }],
            ik,
        ),
        keyring(
            "created: a time alone is refused",
            vec![KeyringEntry {
                created: Some("12:00:00".into()),
                ..entry(1, h, "primary", 32)
            }],
            ik,
        ),
        keyring(
            "created: a date alone is refused",
            vec![KeyringEntry {
                created: Some("2026-11-30".into()),
                ..entry(1, h, "primary", 32)
            }],
            ik,
        ),
        // KEYRING.md: the required fields, their types, one secret source.
        keyring(
            "id: absent",
            vec![KeyringEntry {
                id: None,
                ..entry(1, h, "primary", 32)
            }],
            ik,
        ),
        keyring(
            "id: a string (\"1\")",
            vec![KeyringEntry {
                id: Some("1".into()),
                ..entry(1, h, "primary", 32)
            }],
            ik,
        ),
        keyring(
            "id: a float (1.5)",
            vec![KeyringEntry {
                id: Some(serde_json::json!(1.5)),
                ..entry(1, h, "primary", 32)
            }],
            ik,
        ),
        keyring(
            "status: absent",
            vec![
                entry(1, h, "primary", 32),
                KeyringEntry {
                    status: None,
                    ..entry(2, h, "active", 32)
                },
            ],
            ik,
        ),
        keyring(
            "secret: no source at all, beside a primary",
            vec![
                entry(1, h, "primary", 32),
                KeyringEntry {
                    secret: None,
                    ..entry(2, h, "active", 32)
                },
            ],
            ik,
        ),
        keyring(
            "secret: two sources (secret and secret_env)",
            vec![KeyringEntry {
                secret_env: Some("REQSTATE_VECTOR_KEY".into()),
                ..entry(1, h, "primary", 32)
            }],
            ik,
        ),
    ];
    let versioned = |name: &str, version: u64, fail: Option<&str>| KeyringVector {
        version: Some(version),
        ..keyring(name, vec![entry(1, h, "primary", 32)], fail)
    };
    all.push(versioned("version 1", 1, None));
    all.push(versioned("version 2", 2, ik));
    for v in &mut all {
        check_and_mint(v);
    }
    all
}

/// Loads `v` with the core and checks its verdict; an accepted keyring gets
/// its `mint`: the reference claims minted under it at [`NOW`] (the random
/// source scripted), which it verifies.
fn check_and_mint(v: &mut KeyringVector) {
    let loaded = Keyring::from_toml(&keyring_toml(v));
    match (&loaded, &v.expect_fail) {
        (Ok(_), None) => {}
        (Err(e), Some(reason)) if e.reason() == reason => return,
        (got, want) => panic!(
            "{}: the core says {:?}, the vector {want:?}",
            v.name,
            got.as_ref().err()
        ),
    }
    let keyring = loaded.expect("accepted");
    let primary = keyring.primary();
    let (key_id, algorithm) = (primary.id().get(), primary.algorithm());
    let random: Vec<u8> = (0..24u8)
        .map(|i| i.wrapping_mul(7).wrapping_add(3))
        .collect();
    let codec = Codec::with_parts(
        keyring,
        Policy::new(),
        FixedClock(NOW),
        Scripted::new(&random),
    );
    let state = reference();
    let state: ciborium::Value = serde_json::from_value(state).expect("state");
    let mut state_cbor = Vec::new();
    ciborium::into_writer(&state, &mut state_cbor).expect("cbor");
    let (tool, step, ttl) = ("increase-counter", "confirm", 600);
    let minted = codec
        .mint(
            bind(tool, REFERENCE_CONTEXT),
            step,
            &state,
            Duration::from_secs(ttl),
        )
        .expect("the keyring mints");
    assert_eq!(minted.key_id.get(), key_id, "{}", v.name);
    v.mint = Some(KeyringMint {
        tool: tool.into(),
        context: hex::encode(REFERENCE_CONTEXT),
        step: step.into(),
        state_cbor: hex::encode(state_cbor),
        ttl,
        now: NOW,
        key_id,
        deterministic: algorithm == Algorithm::HmacSha256,
        token: minted.token,
    });
}

/// The policy vectors, in file order.
pub(super) fn policies() -> Vec<PolicyVector> {
    let d = default_vector_policy();
    let policy = |name: &str, p: VectorPolicy, fail: bool| {
        let built = try_policy(p);
        assert_eq!(built.is_err(), fail, "{name}");
        PolicyVector {
            name: name.into(),
            policy: p,
            expect_fail: fail.then(|| "invalid_argument".into()),
            built: built.ok().as_ref().map(vector_policy),
        }
    };
    let only = VectorPolicy::default;
    let len = |n: usize| VectorPolicy {
        max_token_len: Some(n),
        ..d
    };
    let leeway = |n: u64| VectorPolicy {
        clock_leeway: Some(n),
        ..d
    };
    let life = |n: u64| VectorPolicy {
        max_lifetime: Some(n),
        ..d
    };
    vec![
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
            "§8 policy: no knob given, the defaults (8192, 60, 86400)",
            only(),
            false,
        ),
        policy(
            "§8 policy: only max_token_len 64 (leeway and lifetime default)",
            VectorPolicy {
                max_token_len: Some(64),
                ..only()
            },
            false,
        ),
        policy(
            "§8 policy: only clock_leeway 0 (length and lifetime default)",
            VectorPolicy {
                clock_leeway: Some(0),
                ..only()
            },
            false,
        ),
        policy(
            "§8 policy: only max_lifetime 1 (length and leeway default)",
            VectorPolicy {
                max_lifetime: Some(1),
                ..only()
            },
            false,
        ),
        policy(
            "§8 policy: only clock_leeway 601, refused",
            VectorPolicy {
                clock_leeway: Some(601),
                ..only()
            },
            true,
        ),
        policy(
            "§8 policy: every knob at its bound at once",
            VectorPolicy {
                max_token_len: Some(1_048_576),
                clock_leeway: Some(600),
                max_lifetime: Some(2_592_000),
            },
            false,
        ),
    ]
}

/// The shared store's record lifetimes (FORMAT.md §5.1), each computed here
/// from the formula in exact arithmetic and checked against the core's.
pub(super) fn shared_lifetimes() -> Vec<SharedLifetimeVector> {
    let cap: i128 = 1_000_000_000_000_000;
    let formula = |expires_at: u64, now: u64, skew: u64| -> u64 {
        let ms = (i128::from(expires_at) + 600 - i128::from(now)) * 1000 + 2 * i128::from(skew);
        u64::try_from(ms.clamp(1000, cap)).expect("within u64")
    };
    let exp = NOW + 600;
    let cases: Vec<(&str, u64, u64, u64)> = vec![
        (
            "§5.1 a token expiring in 600 s, recorded now, clocks 2000 ms apart",
            exp,
            NOW,
            2000,
        ),
        (
            "§5.1 recorded at expires_at + 599, the last second a 600-s leeway accepts",
            exp,
            exp + 599,
            2000,
        ),
        ("§5.1 recorded at expires_at + 600", exp, exp + 600, 2000),
        (
            "§5.1 recorded at expires_at + 602: computed exactly, not from zero",
            exp,
            exp + 602,
            2000,
        ),
        (
            "§5.1 recorded at expires_at + 700: the floor of one second",
            exp,
            exp + 700,
            2000,
        ),
        (
            "§5.1 max_skew_ms 0 at expires_at + 600: the floor of one second",
            exp,
            exp + 600,
            0,
        ),
        ("§5.1 max_skew_ms 60000", exp, NOW, 60_000),
        (
            "§5.1 the end of the clock: expires_at = now = 2^64 - 1, not saturated",
            u64::MAX,
            u64::MAX,
            2000,
        ),
        (
            "§5.1 one second under the cap of 10^15 ms",
            1_000_000_000_000 - 605,
            0,
            2000,
        ),
        (
            "§5.1 one second over the cap: 10^15 ms",
            1_000_000_000_000 - 603,
            0,
            2000,
        ),
        (
            "§5.1 expires_at 2^64 - 1 recorded at 0: the cap",
            u64::MAX,
            0,
            2000,
        ),
    ];
    cases
        .into_iter()
        .map(|(name, expires_at, now, skew)| {
            let lifetime_ms = formula(expires_at, now, skew);
            let core =
                reqstate::shared_record_lifetime(expires_at, now, Duration::from_millis(skew));
            assert_eq!(u128::from(lifetime_ms), core.as_millis(), "{name}");
            SharedLifetimeVector {
                name: name.into(),
                expires_at,
                now,
                max_skew_ms: skew,
                lifetime_ms,
            }
        })
        .collect()
}
