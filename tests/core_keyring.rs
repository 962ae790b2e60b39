//! Keyring files: what loads, and that every refusal names its line and key.

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
    // The variable is unset: a clear error naming it.
    match ring {
        Err(Error::InvalidKeyring(e)) => assert!(e.message.contains(var), "{e}"),
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
