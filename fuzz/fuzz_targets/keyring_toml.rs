//! Fuzz target `keyring_toml`: arbitrary UTF-8 through `Keyring::from_toml`.
//!
//! Asserts: nothing panics; every error displays (`Display` and `Debug`)
//! without panicking and with a non-empty message; an error never repeats an
//! inline `secret` value of the input (a keyring error must not leak key
//! material); a keyring that loads has exactly one primary key, its `len`
//! matches `keys()`, and it mints a token that verifies.
//!
//! Inputs whose `secret_file` names anything but a small regular file are
//! skipped: reading `/dev/zero` or a FIFO would hang the fuzzer, not test the
//! parser (the file is operator-controlled; see README.md "Observations").
#![no_main]

use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use reqstate::{KeyStatus, Keyring, Policy};
use reqstate_fuzz::codec;

/// Whether the input is safe to hand to the loader: every `secret_file` it
/// would open is a regular file of at most 64 KiB.
fn secret_files_are_safe(source: &str) -> bool {
    let Ok(table) = toml::from_str::<toml::Table>(source) else {
        return true; // the loader fails at the same syntax error before any read
    };
    let Some(keys) = table.get("key").and_then(|k| k.as_array()) else {
        return true;
    };
    keys.iter().all(|entry| match entry.get("secret_file") {
        Some(toml::Value::String(path)) => std::fs::metadata(path)
            .map(|m| m.is_file() && m.len() <= 64 * 1024)
            .unwrap_or(true), // missing: the loader reports it
        _ => true,
    })
}

/// Inline secrets of the input long enough to be real (32 bytes = 43 base64
/// characters) and written exactly once (so a message that quotes another
/// field cannot be mistaken for a leak).
fn inline_secrets(source: &str) -> Vec<String> {
    let Ok(table) = toml::from_str::<toml::Table>(source) else {
        return Vec::new();
    };
    let Some(keys) = table.get("key").and_then(|k| k.as_array()) else {
        return Vec::new();
    };
    keys.iter()
        .filter_map(|entry| entry.get("secret")?.as_str())
        .filter(|s| s.trim().len() >= 43 && source.matches(s.trim()).count() == 1)
        .map(|s| s.trim().to_string())
        .collect()
}

fuzz_target!(|data: &[u8]| {
    let Ok(source) = std::str::from_utf8(data) else {
        return;
    };
    if !secret_files_are_safe(source) {
        return;
    }
    match Keyring::from_toml(source) {
        Ok(keyring) => {
            let keys = keyring.keys();
            assert_eq!(keys.len(), keyring.len());
            assert!(!keyring.is_empty());
            let primaries = keys.iter().filter(|k| k.status() == KeyStatus::Primary).count();
            assert_eq!(primaries, 1, "a loaded keyring has {primaries} primary keys");
            assert_eq!(keyring.primary().status(), KeyStatus::Primary);
            for key in &keys {
                assert!(keyring.get(key.id()).is_some());
                let _ = format!("{key:?}");
            }
            let shown = format!("{keyring:?}");
            for secret in inline_secrets(source) {
                assert!(!shown.contains(&secret), "Debug of a keyring shows a secret");
            }
            // A loaded keyring works: its primary mints, and the token verifies.
            let codec = codec(keyring, Policy::new());
            let token = codec
                .mint("fuzz-tool", "step", &1u8, Duration::from_secs(60), b"ctx")
                .expect("a loaded keyring mints");
            let verified = codec
                .verify::<u8>(&token, "fuzz-tool", b"ctx")
                .expect("a token minted under a loaded keyring verifies");
            assert_eq!(verified.state, 1);
        }
        Err(e) => {
            let shown = e.to_string();
            let debug = format!("{e:?}");
            assert!(!shown.is_empty());
            assert!(!e.reason().is_empty());
            for secret in inline_secrets(source) {
                assert!(
                    !shown.contains(&secret) && !debug.contains(&secret),
                    "a keyring error repeats an inline secret: {shown}"
                );
            }
        }
    }
});
