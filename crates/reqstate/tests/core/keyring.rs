//! Keyring files: what loads, and that every refusal names its line and key.
//!
//! The core reads no file and no environment variable: `secret_file` and
//! `secret_env` are resolved by a `SecretSource` given to
//! `Keyring::from_toml_with`. The sidecar's source, and what it checks, is
//! tested in `crates/reqstate-sidecar/tests/sidecar/secret_refs.rs`; here, that the core alone refuses
//! both references without repeating them.

use crate::misplaced_secrets;

use std::cell::RefCell;

use reqstate::{Algorithm, Error, KeyId, KeyStatus, Keyring, SecretRef, SecretSource};
use zeroize::Zeroizing;

const S1: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
const S2: &str = "ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8=";

fn refusal(toml: &str) -> reqstate::KeyringError {
    match Keyring::from_toml(toml) {
        Err(e) => {
            assert_eq!(e.reason(), "invalid_keyring", "{e}");
            e
        }
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
    assert_eq!(
        (e.line(), e.key_id()),
        (Some(6), Some(KeyId::new(2))),
        "{e}"
    );
    assert!(e.message().contains("more than one primary"), "{e}");
}

#[test]
fn no_primary_is_refused() {
    let e = refusal(&format!(
        "[[key]]\nid = 1\nstatus = \"active\"\nsecret = \"{S1}\"\n"
    ));
    assert!(e.message().contains("no primary"), "{e}");
}

#[test]
fn duplicate_ids_are_refused_naming_both_lines() {
    let e = refusal(&format!(
        "[[key]]\nid = 4\nstatus = \"primary\"\nsecret = \"{S1}\"\n[[key]]\nid = 4\nstatus = \"active\"\nsecret = \"{S2}\"\n"
    ));
    assert_eq!(
        (e.line(), e.key_id()),
        (Some(5), Some(KeyId::new(4))),
        "{e}"
    );
    assert!(e.message().contains("line 1"), "{e}");
}

#[test]
fn short_secrets_are_refused() {
    let e =
        refusal("[[key]]\nid = 1\nstatus = \"primary\"\nsecret = \"AAECAwQFBgcICQoLDA0ODw==\"\n");
    assert_eq!(
        (e.line(), e.key_id()),
        (Some(1), Some(KeyId::new(1))),
        "{e}"
    );
    assert!(e.message().contains("16 bytes"), "{e}");
}

#[test]
fn unknown_algorithm_status_and_fields_are_refused() {
    let e = refusal(&format!(
        "[[key]]\nid = 1\nalgorithm = \"aes-128-ecb\"\nstatus = \"primary\"\nsecret = \"{S1}\"\n"
    ));
    assert!(e.message().contains("unknown algorithm"), "{e}");
    let e = refusal(&format!(
        "[[key]]\nid = 1\nstatus = \"main\"\nsecret = \"{S1}\"\n"
    ));
    assert!(e.message().contains("unknown status"), "{e}");
    let e = refusal(&format!(
        "[[key]]\nid = 1\nstatus = \"primary\"\nsecert = \"{S1}\"\n"
    ));
    assert_eq!(e.line(), Some(4), "{e}");
    assert!(e.message().contains("secert"), "{e}");
}

#[test]
fn secret_sources_must_be_exactly_one() {
    let e = refusal("[[key]]\nid = 1\nstatus = \"primary\"\n");
    assert!(e.message().contains("exactly one of secret"), "{e}");
    let e = refusal(&format!(
        "[[key]]\nid = 1\nstatus = \"primary\"\nsecret = \"{S1}\"\nsecret_env = \"X\"\n"
    ));
    assert!(e.message().contains("exactly one of secret"), "{e}");
}

#[test]
fn ids_out_of_range_and_bad_base64_are_refused() {
    let e = refusal(&format!(
        "[[key]]\nid = -1\nstatus = \"primary\"\nsecret = \"{S1}\"\n"
    ));
    assert!(e.message().contains("not in 0..=4294967295"), "{e}");
    let e = refusal("[[key]]\nid = 1\nstatus = \"primary\"\nsecret = \"not base64!\"\n");
    assert!(e.message().contains("not valid base64"), "{e}");
}

#[test]
fn errors_never_echo_the_secret() {
    // A syntax error on the secret's own line must not print the line.
    let toml = format!("[[key]]\nid = 1\nstatus = \"primary\"\nsecret = \"{S1}\" garbage\n");
    let shown = Error::InvalidKeyring(refusal(&toml)).to_string();
    assert!(!shown.contains(S1), "{shown}");
}

/// A source that records what it is asked and resolves everything to `S1`.
#[derive(Default)]
struct Recording(RefCell<Vec<String>>);

impl SecretSource for Recording {
    fn resolve(&self, reference: SecretRef<'_>) -> Result<Zeroizing<String>, String> {
        self.0.borrow_mut().push(format!("{reference:?}"));
        Ok(Zeroizing::new(S1.to_owned()))
    }
}

/// The core alone reads no file and no environment variable: `from_toml`
/// refuses both references, pointing at `from_toml_with`, naming the line,
/// the key and the field, and never repeating the reference (a path or a
/// variable name that may be a secret pasted into the wrong field).
#[test]
fn the_core_alone_refuses_secret_references_without_repeating_them() {
    let secret = misplaced_secrets::misplaced();
    let needles = misplaced_secrets::needles(&secret, &misplaced_secrets::misplaced_bytes());
    let path = "/run/secrets/reqstate-key-1";
    let var = "REQSTATE_TEST_SECRET_FROM_ENV";
    for (field, value, hidden) in [
        (
            "secret_file",
            path,
            vec![path.to_owned(), "reqstate-key-1".to_owned()],
        ),
        ("secret_env", var, vec![var.to_owned()]),
        ("secret_file", secret.as_str(), needles.clone()),
        ("secret_env", secret.as_str(), needles.clone()),
    ] {
        let toml = format!(
            "[[key]]\nid = 1\nstatus = \"primary\"\nsecret = \"{S1}\"\n\n[[key]]\nid = 2\nstatus = \"active\"\n{field} = \"{value}\"\n"
        );
        let e = refusal(&toml);
        assert_eq!(
            (e.line(), e.key_id()),
            (Some(6), Some(KeyId::new(2))),
            "{field}: {e}"
        );
        assert!(e.message().contains(field), "{field}: {e}");
        assert!(
            e.message().contains("from_toml_with"),
            "{field}: does not name from_toml_with: {e}"
        );
        let text = format!(
            "{e}\n{e:?}\n{}\n{:?}",
            Error::from(e.clone()),
            Error::from(e.clone())
        );
        let found = misplaced_secrets::found_in(&text, &hidden);
        assert!(found.is_empty(), "{field}: repeats {found:?}: {text}");
        // With a source, the same text loads, and the source is asked for
        // exactly that reference.
        let source = Recording::default();
        let ring = Keyring::from_toml_with(&toml, &source).expect("resolved by the source");
        assert_eq!(ring.len(), 2);
        let expected = match field {
            "secret_file" => format!("{:?}", SecretRef::File(value)),
            _ => format!("{:?}", SecretRef::Env(value)),
        };
        assert_eq!(*source.0.borrow(), [expected], "{field}");
    }
}

/// A source's failure is reported with the field, line and key; what the
/// source read is never repeated, nor the reference.
#[test]
fn a_source_failure_names_the_field_line_and_key() {
    struct Failing;
    impl SecretSource for Failing {
        fn resolve(&self, _: SecretRef<'_>) -> Result<Zeroizing<String>, String> {
            Err("cannot read: permission denied".into())
        }
    }
    struct NotBase64;
    impl SecretSource for NotBase64 {
        fn resolve(&self, _: SecretRef<'_>) -> Result<Zeroizing<String>, String> {
            Ok(Zeroizing::new("not base64! but secret-looking text".into()))
        }
    }
    let toml = format!(
        "[[key]]\nid = 1\nstatus = \"primary\"\nsecret = \"{S1}\"\n[[key]]\nid = 9\nstatus = \"active\"\nsecret_env = \"SOME_VAR\"\n"
    );
    let e = Keyring::from_toml_with(&toml, &Failing).expect_err("refused");
    assert_eq!(
        (e.line(), e.key_id()),
        (Some(5), Some(KeyId::new(9))),
        "{e}"
    );
    assert!(e.message().contains("secret_env"), "{e}");
    assert!(e.message().contains("permission denied"), "{e}");
    assert!(!e.to_string().contains("SOME_VAR"), "{e}");
    let e = Keyring::from_toml_with(&toml, &NotBase64).expect_err("refused");
    assert_eq!(
        (e.line(), e.key_id()),
        (Some(5), Some(KeyId::new(9))),
        "{e}"
    );
    assert!(e.message().contains("secret_env"), "{e}");
    assert!(e.message().contains("not valid base64"), "{e}");
    let shown = format!("{e} {e:?}");
    assert!(!shown.contains("secret-looking"), "{shown}");
    assert!(!shown.contains("SOME_VAR"), "{shown}");
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

/// Every way the error for `toml` can be shown.
fn shown(toml: &str) -> Option<String> {
    match Keyring::from_toml(toml) {
        Ok(_) => None,
        Err(k) => {
            let e = Error::from(k.clone());
            Some(format!("{e}\n{e:?}\n{k} / {k:?} / {}", k.message()))
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
        assert!(e.line().is_some(), "{name}: no line: {e}");
        assert!(
            e.message().contains(field),
            "{name}: does not name {field}: {e}"
        );
    }
}

#[test]
fn secrets_are_read_by_one_base64_rule() {
    use reqstate::Secret;
    // 34 bytes: 48 characters with `==`; 32 bytes: 44 characters with `=`.
    let padded2 = "QkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCAQ==";
    let padded1 = "QkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkI=";
    let bytes = |text: &str| Secret::from_base64(text).map(|s| s.len());
    assert_eq!(bytes(padded2).unwrap(), 34);
    assert_eq!(bytes(padded1).unwrap(), 32);
    // Padding optional; around it space, tab, CR and LF are ignored.
    assert_eq!(bytes(padded2.trim_end_matches('=')).unwrap(), 34);
    assert_eq!(bytes(&format!(" \t{padded1}\r\n")).unwrap(), 32);
    for (why, text) in [
        ("partial padding", padded2[..padded2.len() - 1].to_string()),
        ("too much padding", format!("{padded1}=")),
        (
            "padding inside",
            format!("{}={}", &padded1[..4], &padded1[4..]),
        ),
        (
            "a space inside",
            format!("{} {}", &padded1[..20], &padded1[20..]),
        ),
        (
            "a line break inside",
            format!("{}\n{}", &padded1[..20], &padded1[20..]),
        ),
        ("base64url", padded1.replace('Q', "-")),
        ("non-zero unused bits", padded1.replace("QkI=", "QkJ=")),
        ("a no-break space around", format!("\u{a0}{padded1}")),
        ("a form feed around", format!("{padded1}\u{c}")),
        (
            "4n+1 characters",
            format!("{}QQ", padded1.trim_end_matches('=')),
        ),
    ] {
        let e = Secret::from_base64(&text)
            .err()
            .unwrap_or_else(|| panic!("{why}: accepted"));
        assert_eq!(e.reason(), "invalid_keyring", "{why}");
    }
}

/// The schedule example of docs/KEYRING.md: key 1 mints until key 2 takes
/// over at 12:05, and is refused from 12:16.
fn scheduled(retire_at: &str) -> String {
    format!(
        r#"
[[key]]
id = 1
algorithm = "hmac-sha256"
status = "primary"
retire_at = {retire_at}
secret = "{S1}"

[[key]]
id = 2
status = "active"
mint_from = 2026-12-01T12:05:00Z
secret = "{S2}"
"#
    )
}

/// 2026-12-01T12:05:00Z in unix seconds.
const TAKEOVER: u64 = 1_796_126_700;

#[test]
fn a_schedule_hands_minting_over_and_retires_at_its_instants() {
    let ring = Keyring::from_toml(&scheduled("2026-12-01T12:16:00Z")).expect("loads");
    let policy = reqstate::Policy::new()
        .with_max_lifetime(std::time::Duration::from_secs(600))
        .expect("policy");
    ring.check_schedule(&policy)
        .expect("safe under 600 s + 60 s");
    let (one, two) = (
        ring.get(KeyId::new(1)).expect("key 1"),
        ring.get(KeyId::new(2)).expect("key 2"),
    );
    assert_eq!(two.mint_from(), Some(TAKEOVER));
    assert_eq!(one.retire_at(), Some(TAKEOVER + 660));
    for (now, minting, one_is) in [
        (TAKEOVER - 1, 1, KeyStatus::Primary),
        (TAKEOVER, 2, KeyStatus::Active),
        (TAKEOVER + 659, 2, KeyStatus::Active),
        (TAKEOVER + 660, 2, KeyStatus::Retired),
    ] {
        assert_eq!(ring.minting_key(now).id(), KeyId::new(minting), "at {now}");
        assert_eq!(ring.status_at(one, now), one_is, "at {now}");
        assert_eq!(one.is_retired_at(now), one_is == KeyStatus::Retired);
    }
    // The file's statuses stay what it writes.
    assert_eq!(
        (one.status(), two.status()),
        (KeyStatus::Primary, KeyStatus::Active)
    );
    let transitions: Vec<_> = ring
        .transitions()
        .iter()
        .map(|t| (t.at, t.key_id.get(), t.kind))
        .collect();
    use reqstate::TransitionKind::{Retires, StartsMinting};
    assert_eq!(
        transitions,
        [(TAKEOVER, 2, StartsMinting), (TAKEOVER + 660, 1, Retires)]
    );
    assert_eq!(
        ring.next_transition(TAKEOVER - 1).map(|t| t.at),
        Some(TAKEOVER)
    );
    assert_eq!(
        ring.next_transition(TAKEOVER).map(|t| t.at),
        Some(TAKEOVER + 660)
    );
    assert_eq!(ring.next_transition(TAKEOVER + 660), None);
}

#[test]
fn an_unsafe_retirement_is_refused_naming_the_line_key_and_instants() {
    let ring = Keyring::from_toml(&scheduled("2026-12-01T12:15:59Z")).expect("structurally fine");
    let policy = reqstate::Policy::new()
        .with_max_lifetime(std::time::Duration::from_secs(600))
        .expect("policy");
    let e = ring.check_schedule(&policy).expect_err("one second short");
    assert_eq!(e.reason(), "invalid_keyring");
    assert_eq!((e.line(), e.key_id()), (Some(2), Some(KeyId::new(1))));
    let text = e.to_string();
    for part in [
        "line 2: key 1: retire_at 2026-12-01T12:15:59Z refuses live tokens",
        "key 2 takes over at 2026-12-01T12:05:00Z",
        "accepted until 2026-12-01T12:16:00Z",
        "max lifetime 600 s + clock leeway 60 s",
    ] {
        assert!(text.contains(part), "{text:?} lacks {part:?}");
    }
    // The default policy (a day) needs a day and a minute.
    assert!(
        Keyring::from_toml(&scheduled("2026-12-01T12:16:00Z"))
            .expect("loads")
            .check_schedule(&reqstate::Policy::new())
            .is_err()
    );
}

#[test]
fn structural_schedule_errors_name_what_is_wrong() {
    let cases = [
        (
            scheduled("2026-12-01T12:04:59Z"),
            "line 2: key 1: retire_at 2026-12-01T12:04:59Z comes before key 2 takes over",
        ),
        (
            scheduled("2026-12-01T12:16:00Z")
                .replace("status = \"active\"", "status = \"retired\""),
            "key 2: `mint_from` is for a key with status = \"active\"",
        ),
        (
            format!(
                "[[key]]\nid = 1\nstatus = \"primary\"\nretire_at = 2027-01-01T00:00:00Z\nsecret = \"{S1}\"\n"
            ),
            "line 1: key 1: retire_at 2027-01-01T00:00:00Z: key 1 is the last key to mint",
        ),
        (
            format!(
                "{}\n[[key]]\nid = 3\nstatus = \"active\"\nmint_from = 2026-12-01T12:05:00Z\nsecret = \"{S1}\"\n",
                scheduled("2026-12-01T12:16:00Z")
            ),
            "key 3: mint_from 2026-12-01T12:05:00Z is also key 2's (line 9)",
        ),
        (
            scheduled("2026-12-01T12:16:00.5Z"),
            "key 1: `retire_at` must be a whole second",
        ),
        (
            scheduled("\"2026-12-01T12:16:00Z\""),
            "`retire_at` must be a TOML date-time",
        ),
    ];
    for (toml, want) in cases {
        let text = refusal(&toml).to_string();
        assert!(text.contains(want), "{text:?} lacks {want:?}");
    }
}
