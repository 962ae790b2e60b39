//! `mint_invalid` vectors: mints and seals that must be refused, in the
//! order of FORMAT.md §8's minting list (names start with the refusal they
//! pin).

use reqstate::Policy;

use super::codec::default_vector_policy;
use super::forge::deep;
use super::minted::Minted;
use super::{NOW, REFERENCE_CONTEXT};
use crate::schema::{MintInvalidVector, ValidVector, VectorPolicy};

/// A mint of `hmac`'s claims under key 1 at [`NOW`], no random bytes, to be
/// changed into a refused one (its name and reason left empty).
pub(super) fn mint_base(hmac: &ValidVector) -> MintInvalidVector {
    MintInvalidVector {
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
    }
}

/// The refused mints and seals, in file order (the single-use family
/// appends its own).
pub(super) fn mint_invalid(m: &Minted) -> Vec<MintInvalidVector> {
    let mint_base = mint_base(m.hmac());
    let small = Some(VectorPolicy {
        max_token_len: Some(64),
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
    vec![
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
                    max_token_len: Some(75),
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
    ]
}
