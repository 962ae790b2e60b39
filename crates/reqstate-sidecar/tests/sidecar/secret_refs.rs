//! Keyring secrets kept outside the keyring file: `secret_file` and
//! `secret_env`, resolved by the sidecar's source
//! (`reqstate_sidecar::keyring_source::KeyringSecrets`) through
//! `Keyring::from_toml_with`. The core reads no file and no environment
//! variable (`crates/reqstate/tests/core/keyring.rs` checks that it refuses both alone).
//!
//! What is checked here: relative paths resolve against the keyring's
//! directory; only small regular files are read, with the keyring file's own
//! mode checks; a path swapped for a FIFO never blocks loading; environment
//! variables are read; and no error repeats a path, a variable's name or what
//! was read (any of them could be a secret pasted into the wrong field).

use crate::misplaced_secrets;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use reqstate::{
    Algorithm, Binding, Codec, Error, KeyId, KeySpec, KeyStatus, Keyring, KeyringError, Secret,
};
use reqstate_sidecar::keyring_source::{KeyringPermissions, KeyringSecrets};

const S1: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";

/// The variable the environment tests read. Never set in this process
/// (setting variables races other test threads): only in the helper process
/// that [`a_set_secret_env_is_read_and_its_value_never_repeated`] starts.
const VAR: &str = "REQSTATE_TEST_SECRET_FROM_ENV";
/// A set variable whose value is not base64.
const BAD_VAR: &str = "REQSTATE_TEST_SECRET_NOT_BASE64";
const BAD_VALUE: &str = "not base64: secret-looking-text";
/// Set in that helper process.
const ENV_HELPER: &str = "REQSTATE_TEST_SECRET_ENV_HELPER";

/// The sidecar's source for a keyring in `dir`, secret files owner-only.
fn secrets(dir: &Path) -> KeyringSecrets {
    KeyringSecrets::new(dir, KeyringPermissions::OwnerOnly)
}

/// Writes a secret file with `mode`.
fn write_secret(path: &Path, text: &str, mode: u32) {
    std::fs::write(path, text).expect("write secret");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

fn refusal(toml: &str, source: &KeyringSecrets) -> KeyringError {
    match Keyring::from_toml_with(toml, source) {
        Err(e) => {
            assert_eq!(e.reason(), "invalid_keyring", "{e}");
            e
        }
        Ok(k) => panic!("expected a refusal, loaded {k:?}"),
    }
}

/// Every way the error can be shown.
fn shown(e: &KeyringError) -> String {
    let umbrella = Error::from(e.clone());
    format!("{e}\n{e:?}\n{}\n{umbrella}\n{umbrella:?}", e.message())
}

fn one_key(field: &str, value: &str) -> String {
    format!("[[key]]\nid = 1\nstatus = \"primary\"\n{field} = \"{value}\"\n")
}

/// Whether `ring`'s primary key is the key of secret `S1`: a token minted
/// under an inline `S1` keyring verifies under it.
fn holds_s1(ring: Keyring) -> bool {
    let reference = Codec::new(
        Keyring::new([KeySpec::new(
            KeyId::new(1),
            Algorithm::XChaCha20Poly1305,
            KeyStatus::Primary,
            Secret::from_base64(S1).expect("base64"),
        )])
        .expect("keyring"),
    );
    let binding = Binding::with_context_bytes("t", b"c").expect("binding");
    let token = reference
        .mint(binding, "s", &1u8, Duration::from_secs(60))
        .expect("mint")
        .token;
    Codec::new(ring)
        .verify::<u8>(&token, binding.any_step())
        .is_ok()
}

#[test]
fn secrets_load_from_files_and_environment() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("k1");
    write_secret(&file, &format!("{S1}\n"), 0o600);
    let source = secrets(dir.path());
    // The variable is unset: a clear error naming the field and the line,
    // not the variable (a templater may have put a secret there).
    let e = refusal(
        &format!(
            "[[key]]\nid = 1\nstatus = \"primary\"\nsecret_file = \"{}\"\n[[key]]\nid = 2\nstatus = \"active\"\nsecret_env = \"{VAR}\"\n",
            file.display()
        ),
        &source,
    );
    assert!(e.message().contains("secret_env"), "{e}");
    assert!(!shown(&e).contains(VAR), "{e}");
    assert_eq!(
        (e.line(), e.key_id()),
        (Some(5), Some(KeyId::new(2))),
        "{e}"
    );
    // An absolute path is read as it is, whatever the keyring's directory.
    let elsewhere = tempfile::tempdir().expect("temp dir");
    let ring = Keyring::from_toml_with(
        &one_key("secret_file", &file.display().to_string()),
        &secrets(elsewhere.path()),
    )
    .expect("secret from file");
    assert_eq!(ring.primary().id(), KeyId::new(1));
    assert!(holds_s1(ring), "the key is not the file's secret");
    // A missing file: "cannot read", without the path.
    let missing = dir.path().join("nonexistent-reqstate-secret");
    let e = refusal(
        &one_key("secret_file", &missing.display().to_string()),
        &source,
    );
    assert!(e.message().contains("secret_file"), "{e}");
    assert!(e.message().contains("cannot read"), "{e}");
    assert_eq!(
        (e.line(), e.key_id()),
        (Some(1), Some(KeyId::new(1))),
        "{e}"
    );
    assert!(
        !shown(&e).contains("nonexistent-reqstate-secret"),
        "{}",
        shown(&e)
    );
}

/// A set `secret_env` is read, and a set variable that is not base64 is
/// refused without repeating its value. Variables are set only in a helper
/// process (this test binary, started again with them in its environment).
#[test]
fn a_set_secret_env_is_read_and_its_value_never_repeated() {
    if std::env::var_os(ENV_HELPER).is_some() {
        secret_env_helper();
        return;
    }
    let exe = std::env::current_exe().expect("test binary");
    let out = std::process::Command::new(exe)
        .args([
            "--exact",
            "secret_refs::a_set_secret_env_is_read_and_its_value_never_repeated",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ENV_HELPER, "1")
        .env(VAR, S1)
        .env(BAD_VAR, BAD_VALUE)
        .output()
        .expect("start the helper");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "helper failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("SECRET_ENV loaded=true refused=true"),
        "the helper did not run: {stdout}"
    );
}

fn secret_env_helper() {
    assert_eq!(
        std::env::var(VAR).as_deref(),
        Ok(S1),
        "the helper's environment"
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let source = secrets(dir.path());
    let ring =
        Keyring::from_toml_with(&one_key("secret_env", VAR), &source).expect("secret from env");
    assert_eq!(ring.primary().id(), KeyId::new(1));
    assert!(holds_s1(ring), "the key is not the variable's secret");
    let e = refusal(&one_key("secret_env", BAD_VAR), &source);
    assert!(e.message().contains("secret_env"), "{e}");
    assert!(e.message().contains("not valid base64"), "{e}");
    let text = shown(&e);
    assert!(!text.contains(BAD_VAR), "{text}");
    assert!(!text.contains("secret-looking"), "{text}");
    println!("SECRET_ENV loaded=true refused=true");
}

#[test]
fn relative_secret_files_resolve_against_the_keyring_directory() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir(dir.path().join("secrets")).expect("secrets dir");
    write_secret(&dir.path().join("secrets/k1"), S1, 0o600);
    let toml = one_key("secret_file", "secrets/k1");
    let ring = Keyring::from_toml_with(&toml, &secrets(dir.path()))
        .expect("relative to the keyring's directory");
    assert_eq!(ring.primary().id(), KeyId::new(1));
    assert!(holds_s1(ring), "the key is not the file's secret");
    // Relative to another directory (here the working directory), where it is not.
    for other in [Path::new("."), &std::env::temp_dir()] {
        let e = refusal(&toml, &secrets(other));
        assert!(
            e.message().contains("cannot read"),
            "{}: {e}",
            other.display()
        );
        assert!(!shown(&e).contains("secrets/k1"), "{}", shown(&e));
    }
}

#[test]
fn secret_files_must_be_small_regular_files() {
    let source = secrets(Path::new("/"));
    for (path, why) in [
        ("/dev/zero", "not a regular file"),
        ("/", "not a regular file"),
    ] {
        let e = refusal(&one_key("secret_file", path), &source);
        assert!(e.message().contains("secret_file"), "{path}: {e}");
        assert!(e.message().contains(why), "{path}: {e}");
    }
    let dir = tempfile::tempdir().expect("temp dir");
    write_secret(&dir.path().join("big"), &"A".repeat(10_000), 0o600);
    let e = refusal(&one_key("secret_file", "big"), &secrets(dir.path()));
    assert!(e.message().contains("longer than 4096 bytes"), "{e}");
    // Just under the limit is read (and then refused only as a secret:
    // 4095 bytes of base64 decode to more than the longest secret).
    write_secret(&dir.path().join("long"), &"A".repeat(4092), 0o600);
    let e = refusal(&one_key("secret_file", "long"), &secrets(dir.path()));
    assert!(!e.message().contains("4096"), "{e}");
    assert!(e.message().contains("at most 1024"), "{e}");
}

/// A secret file gets the keyring file's mode checks: readable by others
/// only when allowed, writable by others never.
#[test]
fn secret_files_are_checked_like_the_keyring_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let toml = one_key("secret_file", "k");
    let path = dir.path().join("k");
    let allow = KeyringSecrets::new(dir.path(), KeyringPermissions::AllowGroupOrOtherReadable);
    for (mode, owner_only, allowed) in [
        (0o600, true, true),
        (0o400, true, true),
        (0o640, false, true),
        (0o644, false, true),
        (0o620, false, false),
        (0o666, false, false),
    ] {
        write_secret(&path, S1, mode);
        for (source, expect_ok) in [(secrets(dir.path()), owner_only), (allow.clone(), allowed)] {
            match Keyring::from_toml_with(&toml, &source) {
                Ok(ring) => {
                    assert!(expect_ok, "mode {mode:o} accepted by {source:?}");
                    assert!(holds_s1(ring));
                }
                Err(e) => {
                    assert!(!expect_ok, "mode {mode:o} refused by {source:?}: {e}");
                    assert!(e.message().contains("secret_file"), "{e}");
                    assert!(e.message().contains("mode"), "{e}");
                    assert!(!shown(&e).contains(&*dir.path().to_string_lossy()), "{e}");
                }
            }
        }
        std::fs::remove_file(&path).expect("remove");
    }
}

/// A `secret_file` path swapped between a regular file and a FIFO as fast as
/// possible: a check made before opening (stat, then open) can pass on the
/// file and open the FIFO, which blocks for ever without a writer. Loading
/// must return every time, with the secret or with "not a regular file".
#[test]
fn a_secret_file_swapped_for_a_fifo_never_blocks_loading() {
    let dir = tempfile::tempdir().expect("temp dir");
    let dir = dir.path().to_path_buf();
    write_secret(&dir.join("regular"), S1, 0o600);
    let made = std::process::Command::new("mkfifo")
        .arg("-m")
        .arg("600")
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
    let toml = one_key("secret_file", &target.display().to_string());
    {
        let stop = stop.clone();
        let source = secrets(&dir);
        std::thread::spawn(move || {
            let started = Instant::now();
            while !stop.load(Ordering::SeqCst) && started.elapsed() < Duration::from_secs(3) {
                let outcome = match Keyring::from_toml_with(&toml, &source) {
                    Ok(_) => "loaded",
                    Err(e) if e.message().contains("not a regular file") => "fifo refused",
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

/// The misplaced-secret keyrings of `crates/reqstate/tests/core/keyring.rs`, loaded through
/// the sidecar's source: the `secret_file` and `secret_env` cases now reach
/// a real file lookup and a real environment lookup, and their errors must
/// still not repeat the secret.
#[test]
fn misplaced_secrets_are_never_echoed_through_the_source() {
    let secret = misplaced_secrets::misplaced();
    let needles = misplaced_secrets::needles(&secret, &misplaced_secrets::misplaced_bytes());
    let dir = tempfile::tempdir().expect("temp dir");
    let source = secrets(dir.path());
    let mut all = misplaced_secrets::cases(&secret);
    assert_eq!(all.len(), 11);
    all.extend(misplaced_secrets::variants(&secret));
    let mut echoed = Vec::new();
    for (name, toml) in &all {
        let e = match Keyring::from_toml_with(toml, &source) {
            Ok(_) => panic!("{name}: the keyring loaded"),
            Err(e) => e,
        };
        let text = shown(&e);
        if !misplaced_secrets::found_in(&text, &needles).is_empty() {
            echoed.push(format!("{name}: {text}"));
        }
    }
    println!("{} misplaced secrets refused", all.len());
    assert!(
        echoed.is_empty(),
        "errors echo the secret:\n{}",
        echoed.join("\n")
    );
    // The two references still say what is wrong, where.
    for (name, field) in [
        ("1 secret_file holds the secret", "secret_file"),
        ("2 secret_env holds the secret", "secret_env"),
    ] {
        let (_, toml) = all.iter().find(|(n, _)| *n == name).expect("case");
        let e = refusal(toml, &source);
        assert_eq!(
            (e.line(), e.key_id()),
            (Some(1), Some(KeyId::new(1))),
            "{name}: {e}"
        );
        assert!(e.message().contains(field), "{name}: {e}");
        assert!(!e.message().contains("from_toml_with"), "{name}: {e}");
    }
}
