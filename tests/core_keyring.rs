//! Keyring files: what loads, and that every refusal names its line and key.

#[path = "support/misplaced_secrets.rs"]
mod misplaced_secrets;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use reqstate::{Algorithm, Error, KeyId, KeyStatus, Keyring};

const S1: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
const S2: &str = "ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8=";

fn refusal(toml: &str) -> reqstate::KeyringError {
    match Keyring::from_toml(toml) {
        Err(Error::InvalidKeyring(e)) => e,
        Err(other) => panic!("expected InvalidKeyring, got {other:?}"),
        Ok(k) => panic!("expected a refusal, loaded {k:?}"),
    }
}

#[test]
fn a_full_keyring_loads_with_statuses_algorithms_and_dates() {
    let ring = Keyring::from_toml(&format!(
        r#"
version = 1

[[key]]
id = 1
algorithm = "hmac-sha256"
status = "retired"
secret = "{S1}"

[[key]]
id = 2
status = "primary"
created = 2026-11-30T12:00:00Z
secret = "{S2}"

[[key]]
id = 300
algorithm = "xchacha20-poly1305"
status = "active"
created = 2026-11-30T13:00:00+01:00
secret = "{}"
"#,
        S2.trim_end_matches('=')
    ))
    .expect("valid keyring");
    assert_eq!(ring.len(), 3);
    assert_eq!(ring.primary().id(), KeyId::new(2));
    assert_eq!(
        ring.primary().algorithm(),
        Algorithm::XChaCha20Poly1305,
        "default algorithm"
    );
    assert_eq!(ring.primary().created_at(), Some(1_796_040_000));
    let k300 = ring.get(KeyId::new(300)).expect("key 300");
    assert_eq!(
        (k300.status(), k300.created_at()),
        (KeyStatus::Active, Some(1_796_040_000))
    );
    assert_eq!(
        ring.get(KeyId::new(1)).expect("key 1").algorithm(),
        Algorithm::HmacSha256
    );
    let ids: Vec<u32> = ring.keys().iter().map(|k| k.id().get()).collect();
    assert_eq!(ids, [1, 2, 300]);
}

#[test]
fn two_primaries_are_refused_naming_the_second() {
    let e = refusal(&format!(
        "[[key]]\nid = 1\nstatus = \"primary\"\nsecret = \"{S1}\"\n\n[[key]]\nid = 2\nstatus = \"primary\"\nsecret = \"{S2}\"\n"
    ));
    assert_eq!((e.line, e.key_id), (Some(6), Some(KeyId::new(2))), "{e}");
    assert!(e.message.contains("more than one primary"), "{e}");
}

#[test]
fn no_primary_is_refused() {
    let e = refusal(&format!(
        "[[key]]\nid = 1\nstatus = \"active\"\nsecret = \"{S1}\"\n"
    ));
    assert!(e.message.contains("no primary"), "{e}");
}

#[test]
fn duplicate_ids_are_refused_naming_both_lines() {
    let e = refusal(&format!(
        "[[key]]\nid = 4\nstatus = \"primary\"\nsecret = \"{S1}\"\n[[key]]\nid = 4\nstatus = \"active\"\nsecret = \"{S2}\"\n"
    ));
    assert_eq!((e.line, e.key_id), (Some(5), Some(KeyId::new(4))), "{e}");
    assert!(e.message.contains("line 1"), "{e}");
}

#[test]
fn short_secrets_are_refused() {
    let e =
        refusal("[[key]]\nid = 1\nstatus = \"primary\"\nsecret = \"AAECAwQFBgcICQoLDA0ODw==\"\n");
    assert_eq!((e.line, e.key_id), (Some(1), Some(KeyId::new(1))), "{e}");
    assert!(e.message.contains("16 bytes"), "{e}");
}

#[test]
fn unknown_algorithm_status_and_fields_are_refused() {
    let e = refusal(&format!(
        "[[key]]\nid = 1\nalgorithm = \"aes-128-ecb\"\nstatus = \"primary\"\nsecret = \"{S1}\"\n"
    ));
    assert!(e.message.contains("unknown algorithm"), "{e}");
    let e = refusal(&format!(
        "[[key]]\nid = 1\nstatus = \"main\"\nsecret = \"{S1}\"\n"
    ));
    assert!(e.message.contains("unknown status"), "{e}");
    let e = refusal(&format!(
        "[[key]]\nid = 1\nstatus = \"primary\"\nsecert = \"{S1}\"\n"
    ));
    assert_eq!(e.line, Some(4), "{e}");
    assert!(e.message.contains("secert"), "{e}");
}

#[test]
fn secret_sources_must_be_exactly_one() {
    let e = refusal("[[key]]\nid = 1\nstatus = \"primary\"\n");
    assert!(e.message.contains("exactly one of secret"), "{e}");
    let e = refusal(&format!(
        "[[key]]\nid = 1\nstatus = \"primary\"\nsecret = \"{S1}\"\nsecret_env = \"X\"\n"
    ));
    assert!(e.message.contains("exactly one of secret"), "{e}");
}

#[test]
fn ids_out_of_range_and_bad_base64_are_refused() {
    let e = refusal(&format!(
        "[[key]]\nid = -1\nstatus = \"primary\"\nsecret = \"{S1}\"\n"
    ));
    assert!(e.message.contains("not in 0..=4294967295"), "{e}");
    let e = refusal("[[key]]\nid = 1\nstatus = \"primary\"\nsecret = \"not base64!\"\n");
    assert!(e.message.contains("not valid base64"), "{e}");
}

#[test]
fn errors_never_echo_the_secret() {
    // A syntax error on the secret's own line must not print the line.
    let toml = format!("[[key]]\nid = 1\nstatus = \"primary\"\nsecret = \"{S1}\" garbage\n");
    let shown = Error::InvalidKeyring(refusal(&toml)).to_string();
    assert!(!shown.contains(S1), "{shown}");
}

#[test]
fn secrets_load_from_files_and_environment() {
    let dir = std::env::temp_dir().join(format!("reqstate-keyring-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("k1");
    std::fs::write(&file, format!("{S1}\n")).expect("write secret");
    // Never set (setting variables races other test threads): the refusal is the point.
    let var = "REQSTATE_TEST_SECRET_FROM_ENV";
    let ring = Keyring::from_toml(&format!(
        "[[key]]\nid = 1\nstatus = \"primary\"\nsecret_file = \"{}\"\n[[key]]\nid = 2\nstatus = \"active\"\nsecret_env = \"{var}\"\n",
        file.display()
    ));
    // The variable is unset: a clear error naming the field and the line,
    // not the variable (a templater may have put a secret there).
    match ring {
        Err(Error::InvalidKeyring(e)) => {
            assert!(e.message.contains("secret_env"), "{e}");
            assert!(!e.to_string().contains(var), "{e}");
            assert_eq!((e.line, e.key_id), (Some(5), Some(KeyId::new(2))), "{e}");
        }
        other => panic!("expected a refusal for the unset variable, got {other:?}"),
    }
    let ring = Keyring::from_toml(&format!(
        "[[key]]\nid = 1\nstatus = \"primary\"\nsecret_file = \"{}\"\n",
        file.display()
    ))
    .expect("secret from file");
    assert_eq!(ring.primary().id(), KeyId::new(1));
    let missing =
        refusal("[[key]]\nid = 1\nstatus = \"primary\"\nsecret_file = \"/nonexistent/reqstate\"\n");
    assert!(
        missing.message.contains("cannot read secret_file"),
        "{missing}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn secrets_are_wiped_on_drop() {
    // A type-level promise (zeroize's marker trait): a Secret that stopped
    // wiping itself would no longer compile here.
    fn wiped_on_drop<T: zeroize::ZeroizeOnDrop>(_: &T) {}
    let secret = reqstate::Secret::new(vec![7; 32]);
    wiped_on_drop(&secret);
    assert_eq!(format!("{secret:?}"), "Secret(<redacted>)");
}

#[test]
fn relative_secret_files_resolve_against_the_keyring_directory() {
    let dir = std::env::temp_dir().join(format!("reqstate-keyring-dir-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("secrets")).expect("temp dir");
    std::fs::write(dir.join("secrets/k1"), S1).expect("write secret");
    let toml = "[[key]]\nid = 1\nstatus = \"primary\"\nsecret_file = \"secrets/k1\"\n";
    let ring = Keyring::from_toml_in_dir(toml, &dir).expect("relative to the keyring's directory");
    assert_eq!(ring.primary().id(), KeyId::new(1));
    // Without a directory the path is relative to the working directory, where it is not.
    let e = refusal(toml);
    assert!(e.message.contains("cannot read secret_file"), "{e}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn secret_files_must_be_small_regular_files() {
    for (path, why) in [
        ("/dev/zero", "not a regular file"),
        ("/", "not a regular file"),
    ] {
        let e = refusal(&format!(
            "[[key]]\nid = 1\nstatus = \"primary\"\nsecret_file = \"{path}\"\n"
        ));
        assert!(e.message.contains(why), "{path}: {e}");
    }
    let dir = std::env::temp_dir().join(format!("reqstate-big-secret-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    std::fs::write(dir.join("big"), "A".repeat(10_000)).expect("write");
    let e = refusal(&format!(
        "[[key]]\nid = 1\nstatus = \"primary\"\nsecret_file = \"{}\"\n",
        dir.join("big").display()
    ));
    assert!(e.message.contains("longer than 4096 bytes"), "{e}");
    std::fs::remove_dir_all(&dir).ok();
}

/// Every way the error for `toml` can be shown.
fn shown(toml: &str) -> Option<String> {
    match Keyring::from_toml(toml) {
        Ok(_) => None,
        Err(e) => {
            let inner = match &e {
                Error::InvalidKeyring(k) => format!("{k} / {k:?} / {}", k.message),
                _ => String::new(),
            };
            Some(format!("{e}\n{e:?}\n{inner}"))
        }
    }
}

#[test]
fn misplaced_secrets_are_never_echoed() {
    let secret = misplaced_secrets::misplaced();
    let needles = misplaced_secrets::needles(&secret, &misplaced_secrets::misplaced_bytes());
    let cases = misplaced_secrets::cases(&secret);
    assert_eq!(cases.len(), 11);
    let mut refused = 0;
    let mut echoed = Vec::new();
    for (name, toml) in &cases {
        let Some(text) = shown(toml) else {
            panic!("{name}: the keyring loaded");
        };
        refused += 1;
        let found = misplaced_secrets::found_in(&text, &needles);
        if !found.is_empty() {
            echoed.push(format!("{name}: {text}"));
        }
    }
    println!(
        "{} of {} misplaced secrets refused, {} echoed",
        refused,
        cases.len(),
        echoed.len()
    );
    assert!(
        echoed.is_empty(),
        "errors echo the secret:\n{}",
        echoed.join("\n")
    );
}

#[test]
fn misplaced_secret_variants_are_never_echoed() {
    let secret = misplaced_secrets::misplaced();
    let needles = misplaced_secrets::needles(&secret, &misplaced_secrets::misplaced_bytes());
    let variants = misplaced_secrets::variants(&secret);
    let mut echoed = Vec::new();
    for (name, toml) in &variants {
        let Some(text) = shown(toml) else {
            panic!("{name}: the keyring loaded");
        };
        if !misplaced_secrets::found_in(&text, &needles).is_empty() {
            echoed.push(format!("{name}: {text}"));
        }
    }
    println!(
        "{} variants refused, {} echoed",
        variants.len(),
        echoed.len()
    );
    assert!(
        echoed.is_empty(),
        "errors echo the secret:\n{}",
        echoed.join("\n")
    );
}

#[test]
fn errors_still_say_what_is_wrong_without_the_value() {
    let secret = misplaced_secrets::misplaced();
    for (name, field) in [
        ("1 secret_file holds the secret", "secret_file"),
        ("2 secret_env holds the secret", "secret_env"),
        ("3 status holds the secret", "status"),
        ("4 algorithm holds the secret", "algorithm"),
        ("5 id is the secret, as a string", "id"),
        ("6 created holds the secret", "created"),
        ("7 an unknown key's value", "note"),
        ("9 a misspelled field name `secrets`", "secrets"),
        ("10 a second `secret` in the same entry", "secret"),
        ("11 the keyring-level field `version`", "version"),
    ] {
        let (_, toml) = misplaced_secrets::cases(&secret)
            .into_iter()
            .find(|(n, _)| *n == name)
            .expect("case");
        let e = refusal(&toml);
        assert!(e.line.is_some(), "{name}: no line: {e}");
        assert!(
            e.message.contains(field),
            "{name}: does not name {field}: {e}"
        );
    }
}

/// A `secret_file` path swapped between a regular file and a FIFO as fast as
/// possible: a check made before opening (stat, then open) can pass on the
/// file and open the FIFO, which blocks for ever without a writer. Loading
/// must return every time, with the secret or with "not a regular file".
#[test]
fn a_secret_file_swapped_for_a_fifo_never_blocks_loading() {
    let dir = std::env::temp_dir().join(format!("reqstate-fifo-swap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    std::fs::write(dir.join("regular"), S1).expect("write secret");
    let made = std::process::Command::new("mkfifo")
        .arg(dir.join("fifo"))
        .status()
        .expect("mkfifo");
    assert!(made.success());
    let target = dir.join("k");
    std::fs::hard_link(dir.join("regular"), &target).expect("link");

    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let (dir, target, stop) = (dir.clone(), target.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut swaps = 0u64;
            while !stop.load(Ordering::SeqCst) {
                for (source, tmp) in [("fifo", "tmp-fifo"), ("regular", "tmp-regular")] {
                    let tmp = dir.join(tmp);
                    let _ = std::fs::remove_file(&tmp);
                    if std::fs::hard_link(dir.join(source), &tmp).is_ok()
                        && std::fs::rename(&tmp, &target).is_ok()
                    {
                        swaps += 1;
                    }
                }
            }
            swaps
        })
    };
    let (tx, rx) = std::sync::mpsc::channel();
    let toml = format!(
        "[[key]]\nid = 1\nstatus = \"primary\"\nsecret_file = \"{}\"\n",
        target.display()
    );
    {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let started = Instant::now();
            while !stop.load(Ordering::SeqCst) && started.elapsed() < Duration::from_secs(3) {
                let outcome = match Keyring::from_toml(&toml) {
                    Ok(_) => "loaded",
                    Err(Error::InvalidKeyring(e)) if e.message.contains("not a regular file") => {
                        "fifo refused"
                    }
                    Err(_) => "other refusal",
                };
                if tx.send(Some(outcome)).is_err() {
                    return;
                }
            }
            let _ = tx.send(None);
        });
    }
    let mut counts = std::collections::BTreeMap::new();
    loop {
        match rx.recv_timeout(Duration::from_secs(5)) {
            Ok(Some(outcome)) => *counts.entry(outcome).or_insert(0u64) += 1,
            Ok(None) => break,
            Err(_) => {
                stop.store(true, Ordering::SeqCst);
                panic!("loading the keyring blocked on the FIFO; so far {counts:?}");
            }
        }
    }
    stop.store(true, Ordering::SeqCst);
    let swaps = swapper.join().expect("swapper");
    println!("{swaps} swaps, loads: {counts:?}");
    assert!(counts.get("loaded").copied().unwrap_or(0) > 0, "{counts:?}");
    assert!(
        counts.get("fifo refused").copied().unwrap_or(0) > 0,
        "{counts:?}"
    );
    std::fs::remove_dir_all(&dir).ok();
}
