//! Fuzz target `verify_token`: arbitrary bytes as a token string (the bytes
//! themselves when they are UTF-8, otherwise their lossy UTF-8 conversion)
//! through `UntrustedToken::parse`, `Codec::verify::<ciborium::Value>`,
//! `Codec::verify_step` and `Codec::unseal`, under a keyring of HMAC-SHA256
//! and XChaCha20-Poly1305 keys with fixed fuzz-only secrets and a `FixedClock`.
//!
//! Asserts: nothing panics; no call ever returns `Ok` for a fuzz input (an
//! `Ok` would be a forged token); a token that `UntrustedToken::parse` refuses
//! is refused by `verify`, `verify_step` and `unseal` with that same error;
//! a parsed token reports version 1, its own length, and at least the
//! header + key id + tag (+ nonce) bytes; every error displays.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use reqstate::{Algorithm, Codec, Error, Policy, UntrustedToken};
use reqstate_fuzz::{codec, vector_layout_keyring_with_fuzz_secrets, AAD, CONTEXT, TOOL};

/// The codec under test: the default policy (8192-character tokens).
fn fixture() -> &'static Codec {
    static CODEC: OnceLock<Codec> = OnceLock::new();
    CODEC.get_or_init(|| codec(vector_layout_keyring_with_fuzz_secrets(), Policy::new()))
}

fn check_error(e: &Error) {
    let shown = e.to_string();
    assert!(!shown.is_empty(), "an error displays as nothing: {e:?}");
    assert!(!e.reason().is_empty());
    let _ = format!("{e:?}");
}

fn check(token: &str) {
    let codec = fixture();

    // The untrusted view, at the default limit and at the highest one.
    let mut parse_error = None;
    for max in [Policy::DEFAULT_MAX_TOKEN_LEN, Policy::MAX_MAX_TOKEN_LEN] {
        match UntrustedToken::parse(token, max) {
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
                check_error(&e);
                if max == Policy::DEFAULT_MAX_TOKEN_LEN {
                    parse_error = Some(e);
                }
            }
        }
    }

    for context in [CONTEXT, b"".as_slice()] {
        let verified = codec.verify::<ciborium::Value>(token, TOOL, context);
        let stepped = codec.verify_step::<ciborium::Value>(token, TOOL, "confirm", context);
        let other_tool = codec.verify::<ciborium::Value>(token, "delete-everything", context);
        for result in [verified, stepped, other_tool] {
            match result {
                Ok(v) => panic!("FORGERY: a fuzz input verified: {v:?} (token {token:?})"),
                Err(e) => {
                    check_error(&e);
                    if let Some(p) = &parse_error {
                        assert_eq!(&e, p, "verify and parse disagree on {token:?}");
                    }
                }
            }
        }
    }
    for aad in [AAD, b"".as_slice()] {
        match codec.unseal(token, aad) {
            Ok(payload) => panic!("FORGERY: a fuzz input unsealed to {payload:02x?} (token {token:?})"),
            Err(e) => {
                check_error(&e);
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
