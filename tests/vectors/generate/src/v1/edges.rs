//! The boundaries and orders the first vectors missed, found by breaking an
//! independent verifier's rules one at a time (issue 24's audit): contexts
//! and aads of exactly 65536 bytes, the policy's knobs honoured by every
//! check that reads them (not only their defaults), lengths counted in
//! bytes, base64's 4-bit remainder, unseal's key checks, consume decoding
//! before it records, and the orders of minting and sealing around the
//! random source. Claims bodies at head boundaries are in `bodies` and
//! `accepted`, beside the others.

use super::accepted::{accept_claims, unseal_accepted};
use super::codec::record_name;
use super::forge::{claims_body, deep, forge, with_key_id};
use super::invalid::invalid;
use super::minted::{Minted, mint_vector_at, reference, seal_vector};
use super::{NOW, REFERENCE_CONTEXT};
use crate::schema::{
    AcceptedVector, InvalidVector, MintInvalidVector, SealedVector, ValidVector, VectorPolicy,
};

/// What the edges add to the file's sections that `Minted` owns.
pub(super) struct Extra {
    pub(super) valid: Vec<ValidVector>,
    pub(super) sealed: Vec<SealedVector>,
}

fn policy(f: impl FnOnce(&mut VectorPolicy)) -> Option<VectorPolicy> {
    let mut p = VectorPolicy::default();
    f(&mut p);
    Some(p)
}

const B64URL: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// An unseal of `s`'s token, `token` in its place, refused with `reason`.
fn unseal_refused(s: &SealedVector, name: &str, token: String, reason: &str) -> InvalidVector {
    InvalidVector {
        name: name.into(),
        operation: "unseal".into(),
        token,
        tool: String::new(),
        context: s.aad.clone(),
        expected_step: None,
        now: s.now,
        policy: s.policy,
        decode_as: None,
        spent: Vec::new(),
        expect_fail: reason.into(),
    }
}

/// Appends the edges to `bad`, `accepted` and `mint_invalid`; returns the
/// `valid` and `sealed` vectors to append once `m` is taken apart.
pub(super) fn edges(
    m: &Minted,
    bad: &mut Vec<InvalidVector>,
    accepted: &mut Vec<AcceptedVector>,
    mint_invalid: &mut Vec<MintInvalidVector>,
) -> Extra {
    let keys = &m.keys;
    let hmac = m.hmac();
    let st = hex::decode(&hmac.state_cbor).expect("hex");
    let mut extra = Extra {
        valid: Vec::new(),
        sealed: Vec::new(),
    };

    // §2: a 4n+2-character token carries 4 unused bits in its last
    // character (4n+3 carries 2, pinned elsewhere).
    let short = mint_vector_at(
        keys,
        "",
        1,
        &hmac.tool,
        "confirm",
        serde_json::Value::Null,
        600,
        REFERENCE_CONTEXT,
        0,
        NOW,
        None,
    );
    assert_eq!(short.token.len() % 4, 2, "a 4n+2-character token");
    let mut chars = short.token.clone().into_bytes();
    let last = chars.last_mut().expect("a character");
    let value = B64URL.iter().position(|c| c == last).expect("base64url");
    assert_eq!(value % 16, 0, "canonical: the 4 unused bits are zero");
    *last = B64URL[value + 1];
    bad.push(invalid(
        &short,
        "§2: non-zero unused bits after 4n+2 characters (4 bits)",
        String::from_utf8(chars).expect("ascii"),
        "malformed",
    ));
    accepted.push(accept_claims(
        &short,
        "§2: a genuine token of 4n+2 characters",
        NOW,
        &[0xf6],
    ));

    // §4, step 0 and mint refusal 1: a context of exactly 65536 bytes.
    let ctx = vec![0xabu8; 65_536];
    extra.valid.push(mint_vector_at(
        keys,
        "hmac context of 65536 bytes, the most",
        1,
        &hmac.tool,
        &hmac.step,
        reference(),
        600,
        &ctx,
        0,
        NOW,
        None,
    ));
    // Step 0 (unseal) and sealing: an aad of exactly 65536 bytes.
    extra.sealed.push(seal_vector(
        &m.keys,
        "sealed payload with an aad of 65536 bytes, the most",
        1,
        9,
        b"payload",
        &ctx,
        None,
    ));
    // Sealing's too_large boundary: exactly max_token_len characters.
    let s1 = &m.sealed[0];
    let at_limit = policy(|p| p.max_token_len = Some(s1.token.len()));
    extra.sealed.push(seal_vector(
        &m.keys,
        "sealed payload under key 1, exactly max_token_len characters",
        1,
        9,
        &hex::decode(&s1.payload).expect("hex"),
        &hex::decode(&s1.aad).expect("hex"),
        at_limit,
    ));
    // Unseal honours the policy (step 1).
    let mut too_long = unseal_refused(
        s1,
        "step 1: unseal under max_token_len one below the token's length",
        s1.token.clone(),
        "too_large",
    );
    too_long.policy = policy(|p| p.max_token_len = Some(s1.token.len() - 1));
    bad.push(too_long);
    accepted.push(unseal_accepted(
        s1,
        "step 1: unseal under max_token_len equal to the token's length",
        at_limit,
    ));
    // Step 7 under unseal: unknown, retired, algorithm mismatch.
    bad.push(unseal_refused(
        s1,
        "step 7: unseal, unknown key 5 (no other key is tried)",
        with_key_id(&s1.token, &[5]),
        "unknown_key",
    ));
    let under_retired = seal_vector(&m.keys, "", 3, 9, b"payload", b"aad", None);
    bad.push(unseal_refused(
        &under_retired,
        "step 7: unseal, a genuine payload under retired key 3",
        under_retired.token.clone(),
        "retired_key",
    ));
    let swapped = {
        use base64::Engine as _;
        let engine = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let mut raw = engine.decode(&s1.token).expect("base64url");
        assert_eq!(raw[0], 0x15, "a sealed HMAC header");
        raw[0] = 0x16;
        assert!(
            raw.len() >= 2 + 24 + 16,
            "long enough for step 5 under XChaCha"
        );
        engine.encode(raw)
    };
    bad.push(unseal_refused(
        s1,
        "step 7: unseal, key 1 (hmac) named by an xchacha header",
        swapped,
        "algorithm_mismatch",
    ));

    // The policy's knobs, set away from their defaults, decide.
    let ttl601 = mint_vector_at(
        keys,
        "",
        1,
        &hmac.tool,
        &hmac.step,
        reference(),
        601,
        REFERENCE_CONTEXT,
        0,
        NOW,
        None,
    );
    let life600 = policy(|p| p.max_lifetime = Some(600));
    let mut over = invalid(
        &ttl601,
        "step 10: policy max_lifetime 600, a lifetime of 601 s",
        ttl601.token.clone(),
        "lifetime_too_long",
    );
    over.policy = life600;
    bad.push(over);
    accepted.push(AcceptedVector {
        policy: life600,
        ..accept_claims(
            hmac,
            "step 10: policy max_lifetime 600, a lifetime of 600 s",
            NOW,
            &st,
        )
    });
    extra.valid.push(mint_vector_at(
        keys,
        "hmac lifetime = max_lifetime 600 of the policy",
        1,
        &hmac.tool,
        &hmac.step,
        reference(),
        600,
        REFERENCE_CONTEXT,
        0,
        NOW,
        life600,
    ));
    let mut early = invalid(
        hmac,
        "step 11: policy clock_leeway 0, issued_at = now + 1",
        hmac.token.clone(),
        "not_yet_valid",
    );
    early.now = hmac.issued_at - 1;
    early.policy = policy(|p| p.clock_leeway = Some(0));
    bad.push(early);
    accepted.push(AcceptedVector {
        policy: policy(|p| p.clock_leeway = Some(600)),
        ..accept_claims(
            hmac,
            "step 11: policy clock_leeway 600, issued_at = now + 600",
            hmac.issued_at - 600,
            &st,
        )
    });

    // Step 13: an expected step no token can carry just never matches.
    let mut long_step = invalid(
        hmac,
        "step 13: an expected step of 257 bytes is wrong_step, not an argument error",
        hmac.token.clone(),
        "wrong_step",
    );
    long_step.expected_step = Some("x".repeat(257));
    bad.push(long_step);

    // Step 0: the tool is counted in bytes.
    let mut wide_tool = invalid(
        hmac,
        "step 0: a tool of 129 characters in 258 bytes",
        hmac.token.clone(),
        "invalid_argument",
    );
    wide_tool.tool = "é".repeat(129);
    bad.push(wide_tool);

    // Consume: the record lives until expires_at + the policy's leeway, and
    // a state that does not decode is refused before anything is recorded.
    let su = &m.single_use[0];
    let token_id = hex::decode(&su.token_id).expect("hex");
    accepted.push(AcceptedVector {
        name: "single-use: step 15: hmac, policy clock_leeway 600, kept until expires_at + 600"
            .into(),
        operation: "consume".into(),
        token: su.token.clone(),
        tool: su.tool.clone(),
        context: su.context.clone(),
        expected_step: Some(su.step.clone()),
        now: su.now,
        policy: policy(|p| p.clock_leeway = Some(600)),
        decode_as: None,
        issued_at: Some(su.issued_at),
        expires_at: Some(su.expires_at),
        step: Some(su.step.clone()),
        state_cbor: Some(su.state_cbor.clone()),
        payload: None,
        key_id: Some(su.key_id),
        spent: Vec::new(),
        spent_record: Some(record_name(su.key_id, &token_id)),
        record_until: Some(su.expires_at + 600),
    });
    bad.push(InvalidVector {
        name: "single-use: step 14 before 15: hmac, a state that does not decode is not recorded"
            .into(),
        operation: "consume".into(),
        token: su.token.clone(),
        tool: su.tool.clone(),
        context: su.context.clone(),
        expected_step: Some(su.step.clone()),
        now: su.now,
        policy: su.policy,
        decode_as: Some("uint".into()),
        spent: Vec::new(),
        expect_fail: "state_decoding".into(),
    });

    // A genuine token issued at 2^32, its issued_at in the 8-byte head.
    let at = 1u64 << 32;
    let wide = forge(
        keys,
        1,
        &claims_body(at, 600, "s", &[0xf6]),
        hmac.tool.as_bytes(),
        REFERENCE_CONTEXT,
        &[],
    );
    accepted.push(AcceptedVector {
        token: wide,
        step: Some("s".into()),
        issued_at: Some(at),
        expires_at: Some(at + 600),
        state_cbor: Some("f6".into()),
        ..accept_claims(
            hmac,
            "hmac: key holder's body: issued_at 2^32, the least 8-byte head, at now = 2^32",
            at,
            &[0xf6],
        )
    });

    // Minting and sealing: what is refused, and in which order.
    let base = super::mint_invalid::mint_base(hmac);
    let mk = |name: &str, reason: &str, f: &dyn Fn(&mut MintInvalidVector)| {
        let mut v = base.clone();
        v.name = name.into();
        v.expect_fail = reason.into();
        f(&mut v);
        v
    };
    let seal = |v: &mut MintInvalidVector| {
        v.operation = "seal".into();
        v.tool = String::new();
        v.step = String::new();
        v.state_cbor = String::new();
        v.ttl = 0;
        v.key_id = 2;
        v.payload = hex::encode(b"payload");
        v.context = hex::encode(b"aad");
    };
    mint_invalid.extend([
        mk(
            "mint refusal 1: a tool of 129 characters in 258 bytes",
            "invalid_argument",
            &|v| v.tool = "é".repeat(129),
        ),
        mk(
            "mint refusal 1: a step of 129 characters in 258 bytes",
            "invalid_argument",
            &|v| v.step = "é".repeat(129),
        ),
        mk(
            "mint refusal 2: policy max_lifetime 600, ttl 601",
            "lifetime_too_long",
            &|v| {
                v.ttl = 601;
                v.policy = life600;
            },
        ),
        mk(
            "mint refusal 4: state bytes with a trailing byte (f6 00)",
            "state_encoding",
            &|v| v.state_cbor = "f600".into(),
        ),
        mk(
            "mint refusal 4: state bytes not well-formed (1c, reserved)",
            "state_encoding",
            &|v| v.state_cbor = "1c".into(),
        ),
        mk(
            "mint refusal 4 before 5: xchacha, state nested 17 levels, no random bytes",
            "state_encoding",
            &|v| {
                v.key_id = 2;
                v.state_cbor = hex::encode(deep(&[0x81], &[], 17));
            },
        ),
        mk(
            "sealing: xchacha, aad of 65537 bytes before the random source",
            "invalid_argument",
            &|v| {
                seal(v);
                v.context = hex::encode(vec![0u8; 65_537]);
            },
        ),
        mk(
            "sealing: xchacha, the random source before too_large",
            "randomness_unavailable",
            &|v| {
                seal(v);
                v.payload = hex::encode([0x70u8; 100]);
                v.policy = policy(|p| p.max_token_len = Some(64));
            },
        ),
    ]);
    extra
}
