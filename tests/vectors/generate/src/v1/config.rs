//! `keyrings` to load (FORMAT.md §1) and `policies` to build (FORMAT.md §8):
//! both sides of every bound.

use super::codec::{base64_standard, default_vector_policy};
use crate::schema::{KeyringEntry, KeyringVector, PolicyVector, VectorPolicy};

/// The keyring vectors, in file order.
pub(super) fn keyrings() -> Vec<KeyringVector> {
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
    vec![
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
    ]
}

/// The policy vectors, in file order.
pub(super) fn policies() -> Vec<PolicyVector> {
    let d = default_vector_policy();
    let policy = |name: &str, p: VectorPolicy, fail: bool| PolicyVector {
        name: name.into(),
        policy: p,
        expect_fail: fail.then(|| "invalid_argument".into()),
    };
    let len = |max_token_len| VectorPolicy { max_token_len, ..d };
    let leeway = |clock_leeway| VectorPolicy { clock_leeway, ..d };
    let life = |max_lifetime| VectorPolicy { max_lifetime, ..d };
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
            "§8 policy: every knob at its bound at once",
            VectorPolicy {
                max_token_len: 1_048_576,
                clock_leeway: 600,
                max_lifetime: 2_592_000,
            },
            false,
        ),
    ]
}
