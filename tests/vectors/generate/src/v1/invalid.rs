//! `invalid` vectors that tamper with genuine tokens: flipped bits, another
//! tool or context, times either side of the window, the wrong step, bad
//! encodings, and bodies only a key holder could make whose claims FORMAT.md
//! §5 forbids.

use std::time::Duration;

use reqstate::Policy;

use super::codec::{bind, minting_codec, random_for};
use super::forge::{flip_bit, forge, with_key_id};
use super::minted::{Minted, reference};
use super::{NOW, REFERENCE_CONTEXT};
use crate::schema::{InvalidVector, ValidVector};

/// An `invalid` vector: `token` presented to verify as `v`'s was, refused
/// with `expect_fail`.
pub(super) fn invalid(
    v: &ValidVector,
    name: &str,
    token: String,
    expect_fail: &str,
) -> InvalidVector {
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

/// The tampered tokens, in file order.
pub(super) fn tampered(m: &Minted) -> Vec<InvalidVector> {
    let (keys, valid, sealed) = (&m.keys, &m.valid, &m.sealed);
    let reference = reference();
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
    let retired = &m.retired;
    bad.push(invalid(
        retired,
        "genuine token under retired key 3",
        retired.token.clone(),
        "retired_key",
    ));
    let long = {
        let nonce = random_for(keys, 2, 6);
        let policy = Policy::new()
            .with_max_lifetime(Duration::from_secs(2 * 86_400))
            .expect("policy");
        let codec = minting_codec(keys, 2, NOW, &nonce, policy);
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
                keys,
                key_id,
                body,
                base.tool.as_bytes(),
                REFERENCE_CONTEXT,
                &random_for(keys, key_id, 7),
            );
            bad.push(invalid(
                base,
                &format!("{alg}: key holder's body: {name}"),
                token,
                "malformed",
            ));
        }
    }

    bad
}
