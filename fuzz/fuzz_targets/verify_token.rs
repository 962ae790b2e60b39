//! Fuzz target `verify_token`: arbitrary bytes as a token string (the bytes
//! themselves when they are UTF-8, otherwise their lossy UTF-8 conversion)
//! through `UntrustedToken::parse`, `Codec::verify::<ciborium::Value>` (any
//! step, and step `confirm`) and `Codec::unseal`, under a keyring of
//! HMAC-SHA256 and XChaCha20-Poly1305 keys with fixed fuzz-only secrets and a
//! `FixedClock`.
//!
//! Asserts: nothing panics; no call ever returns `Ok` for a fuzz input (an
//! `Ok` would be a forged token); a token that `UntrustedToken::parse` refuses
//! is refused by `verify` (any step or one step) and `unseal` with that same
//! refusal; a parsed token reports version 1, its own length, and at least the
//! header + key id + tag (+ nonce) bytes; every refusal displays and has one of
//! the reasons of `Refusal::REASONS`.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use reqstate::{Aad, Algorithm, Codec, Policy, Refusal, UntrustedToken};
use reqstate_fuzz::{
    binding, codec, roomy_policy, vector_layout_keyring_with_fuzz_secrets, AAD, CONTEXT, TOOL,
};

/// The codec under test: the default policy (8192-character tokens).
fn fixture() -> &'static Codec {
    static CODEC: OnceLock<Codec> = OnceLock::new();
    CODEC.get_or_init(|| codec(vector_layout_keyring_with_fuzz_secrets(), Policy::new()))
}

fn check_refusal(e: &Refusal) {
    let shown = e.to_string();
    assert!(!shown.is_empty(), "a refusal displays as nothing: {e:?}");
    assert!(Refusal::REASONS.contains(&e.reason()), "unknown reason {:?}", e.reason());
    let _ = format!("{e:?}");
}

fn check(token: &str) {
    let codec = fixture();

    // The untrusted view, at the default limit and at the highest one.
    let mut parse_error = None;
    for policy in [Policy::new(), roomy_policy()] {
        match UntrustedToken::parse(token, &policy) {
            Ok(t) => {
                assert_eq!(t.version(), 1);
                assert_eq!(t.encoded_len(), token.len());
                let nonce = match t.algorithm() {
                    Algorithm::XChaCha20Poly1305 => 24,
                    _ => 0,
                };
                assert!(t.decoded_len() >= 2 + nonce + 16, "short token parsed: {t:?}");
                let _ = format!("{t:?}");
            }
            Err(e) => {
                check_refusal(&e);
                if policy == Policy::new() {
                    parse_error = Some(e);
                }
            }
        }
    }

    for context in [CONTEXT, b"".as_slice()] {
        let right_tool = binding(TOOL, context);
        let verified = codec.verify::<ciborium::Value>(token, right_tool.any_step());
        let stepped = codec.verify::<ciborium::Value>(token, right_tool.step("confirm"));
        let other_tool = codec.verify::<ciborium::Value>(token, binding("delete-everything", context).any_step());
        for result in [verified, stepped, other_tool] {
            match result {
                Ok(v) => panic!("FORGERY: a fuzz input verified: {v:?} (token {token:?})"),
                Err(e) => {
                    check_refusal(&e);
                    if let Some(p) = &parse_error {
                        assert_eq!(&e, p, "verify and parse disagree on {token:?}");
                    }
                }
            }
        }
    }
    for aad in [AAD, b"".as_slice()] {
        let aad = Aad::new(aad).expect("a fixture aad is valid");
        match codec.unseal(token, aad) {
            Ok(u) => panic!(
                "FORGERY: a fuzz input unsealed to {:02x?} (token {token:?})",
                u.payload
            ),
            Err(e) => {
                check_refusal(&e);
                if let Some(p) = &parse_error {
                    assert_eq!(&e, p, "unseal and parse disagree on {token:?}");
                }
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    match std::str::from_utf8(data) {
        Ok(token) => check(token),
        Err(_) => check(&String::from_utf8_lossy(data)),
    }
});
