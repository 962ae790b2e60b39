//! Fuzz target `keyring_toml`: arbitrary UTF-8 through `Keyring::from_toml`
//! (inline secrets only) and `Keyring::from_toml_with` a `SecretSource` of
//! this file that answers every `secret_file` and `secret_env` reference with
//! a fixed fake secret (an empty reference with an error), so references are
//! parsed and resolved without any I/O.
//!
//! Asserts: nothing panics; every error displays (`Display` and `Debug`)
//! without panicking, with a non-empty message and the reason
//! `invalid_keyring`; an error never repeats an inline `secret` value of the
//! input, nor a fake secret the source handed out (a keyring error must not
//! leak key material); a keyring that loads has exactly one primary key, its
//! `len` matches `keys()`, its `Debug` shows no secret, and it mints a token
//! that verifies; whatever `from_toml` loads, `from_toml_with` loads too, with
//! the same keys (the source is only asked about references, which
//! `from_toml` refuses).
#![no_main]

use std::time::Duration;

use base64::Engine as _;
use libfuzzer_sys::fuzz_target;
use reqstate::{Keyring, KeyringError, KeyStatus, Policy, SecretRef, SecretSource};
use reqstate_fuzz::{binding, codec, fuzz_secret};
use zeroize::Zeroizing;

/// The fake secret of a `secret_file` reference.
fn file_secret() -> String {
    base64::engine::general_purpose::STANDARD.encode(fuzz_secret(0xf1))
}

/// The fake secret of a `secret_env` reference.
fn env_secret() -> String {
    base64::engine::general_purpose::STANDARD.encode(fuzz_secret(0xe1))
}

/// Answers every reference without reading anything: a file with its fake
/// secret and a trailing newline (as a file written by `echo` would hold),
/// a variable with its fake secret, an empty reference with an error.
struct FakeSecrets;

impl SecretSource for FakeSecrets {
    fn resolve(&self, reference: SecretRef<'_>) -> Result<Zeroizing<String>, String> {
        match reference {
            SecretRef::File("") | SecretRef::Env("") => Err("the reference is empty".into()),
            SecretRef::File(_) => Ok(Zeroizing::new(format!("{}\n", file_secret()))),
            SecretRef::Env(_) => Ok(Zeroizing::new(env_secret())),
            _ => Err("a kind of reference this source does not know".into()),
        }
    }
}

/// Inline secrets of the input long enough to be real (32 bytes = 43 base64
/// characters) and written exactly once (so a message that quotes another
/// field cannot be mistaken for a leak), and the fake secrets.
fn secrets(source: &str) -> Vec<String> {
    let mut out = vec![file_secret(), env_secret()];
    let Ok(table) = toml::from_str::<toml::Table>(source) else {
        return out;
    };
    let Some(keys) = table.get("key").and_then(|k| k.as_array()) else {
        return out;
    };
    out.extend(
        keys.iter()
            .filter_map(|entry| entry.get("secret")?.as_str())
            .filter(|s| s.trim().len() >= 43 && source.matches(s.trim()).count() == 1)
            .map(|s| s.trim().to_string()),
    );
    out
}

/// The checks on one loader's result.
fn check(result: &Result<Keyring, KeyringError>, secrets: &[String]) {
    match result {
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
            for secret in secrets {
                assert!(!shown.contains(secret), "Debug of a keyring shows a secret");
            }
        }
        Err(e) => {
            let shown = e.to_string();
            let debug = format!("{e:?}");
            assert!(!shown.is_empty());
            assert!(!e.message().is_empty());
            assert_eq!(e.reason(), "invalid_keyring");
            for secret in secrets {
                assert!(
                    !shown.contains(secret) && !debug.contains(secret),
                    "a keyring error repeats a secret: {shown}"
                );
            }
        }
    }
}

/// A loaded keyring works: its primary mints, and the token verifies.
fn mint_and_verify(keyring: Keyring) {
    let codec = codec(keyring, Policy::new());
    let bound = binding("fuzz-tool", b"ctx");
    let minted = codec
        .mint(bound, "step", &1u8, Duration::from_secs(60))
        .expect("a loaded keyring mints");
    let verified = codec
        .verify::<u8>(&minted.token, bound.step("step"))
        .expect("a token minted under a loaded keyring verifies");
    assert_eq!(verified.state, 1);
}

/// What a keyring holds, secrets aside.
fn layout(keyring: &Keyring) -> Vec<String> {
    keyring.keys().iter().map(|k| format!("{k:?}")).collect()
}

fuzz_target!(|data: &[u8]| {
    let Ok(source) = std::str::from_utf8(data) else {
        return;
    };
    let secrets = secrets(source);
    let inline = Keyring::from_toml(source);
    let resolved = Keyring::from_toml_with(source, &FakeSecrets);
    check(&inline, &secrets);
    check(&resolved, &secrets);
    if let Ok(inline) = &inline {
        let resolved = resolved
            .as_ref()
            .unwrap_or_else(|e| panic!("from_toml loads, from_toml_with refuses: {e}"));
        assert_eq!(layout(inline), layout(resolved));
        assert_eq!(inline.primary().id(), resolved.primary().id());
    }
    // Each loaded keyring mints and verifies (once: the inline one, when it
    // loads, is the resolved one).
    match (inline, resolved) {
        (Ok(keyring), _) | (Err(_), Ok(keyring)) => mint_and_verify(keyring),
        (Err(_), Err(_)) => {}
    }
});
