//! Single-use tokens (FORMAT.md §5.1, kind 2): `invalid`, `accepted` and
//! `mint_invalid` vectors on both sides of every single-use rule.

use base64::Engine as _;
use reqstate::Policy;

use super::codec::{default_vector_policy, random_for, record_name};
use super::forge::{cbor_head, claims_body, flip_bit, forge_kind};
use super::minted::{Minted, token_id_for};
use super::{NOW, REFERENCE_CONTEXT};
use crate::schema::{
    AcceptedVector, InvalidVector, MintInvalidVector, SingleUseVector, VectorPolicy,
};

/// Both sides of every single-use rule (FORMAT.md §5.1, §8 steps 6, 9 and
/// 15, and the single-use mint order). Names start with "single-use".
pub(super) fn single_use_rules(
    m: &Minted,
    bad: &mut Vec<InvalidVector>,
    accepted: &mut Vec<AcceptedVector>,
    mint_invalid: &mut Vec<MintInvalidVector>,
) {
    let (keys, single_use, valid, sealed) = (&m.keys, &m.single_use, &m.valid, &m.sealed);
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
        max_token_len: Some(99),
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
        single_use: true,
        ..super::mint_invalid::mint_base(hmac)
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
                    max_token_len: Some(64),
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
                    max_token_len: Some(99),
                    ..default_vector_policy()
                })
            },
        ),
    ]);
}
