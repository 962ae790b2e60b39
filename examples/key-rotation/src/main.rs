//! A Rust program's first key rotation, end to end, in a temporary directory:
//!
//! 1. create a keyring file with a fresh random key (never a copied secret),
//! 2. mint a token with it,
//! 3. add key 2 (`active`), reload: the old token verifies, key 1 still mints,
//! 4. promote key 2 (`primary`, key 1 `active`), reload: new tokens are key 2's,
//!    the old token still verifies,
//! 5. retire key 1, reload: the old token is refused (`retired_key`),
//! 6. broken TOML is refused and the last good keyring stays in service,
//! 7. so is a world-readable file, with the Rust option that would allow it,
//! 8. the file fixed: the keyring in service is the file's again.
//!
//! The file is edited the way an operator's tool would (the format of
//! docs/KEYRING.md, written atomically with mode 0600); the program reloads
//! it with [`KeyringFile::reload_if_changed`], as a server would per request
//! or on a timer. Every step prints one line; a broken promise ends the
//! program with exit code 1.
//!
//! ```text
//! cargo run -p reqstate-example-key-rotation
//! ```
//!
//! This is the status-based rotation of docs/ROTATION.md ("The manual
//! flow"); a fleet uses `reqstate keys rotate`, which writes the same file
//! with a schedule (`mint_from`, `retire_at`) that `KeyringFile` serves as
//! it is.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use reqstate::{Algorithm, Binding, OsRandom, Policy, Refusal, Secret, UntrustedToken};
use reqstate_keyring_file::{KeyringFile, Reload, create_new, replace_keyring_file};
use toml_edit::{DocumentMut, value};

type Result<T, E = Box<dyn std::error::Error>> = std::result::Result<T, E>;

const TOOL: &str = "increase-counter";
const TTL: Duration = Duration::from_secs(600);

fn main() -> ExitCode {
    match run() {
        Ok(()) => {
            println!("ok: every promise held");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("key-rotation: broken promise: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Fails with `what` unless `holds`.
fn promise(holds: bool, what: &str) -> Result<()> {
    if holds { Ok(()) } else { Err(what.into()) }
}

/// The id of the key a token names (read before verifying).
fn key_of(token: &str) -> Result<u32> {
    Ok(UntrustedToken::parse(token, &Policy::new())?.key_id().get())
}

/// Reads the keyring file as an editable document.
fn read(path: &Path) -> Result<DocumentMut> {
    Ok(std::fs::read_to_string(path)?.parse::<DocumentMut>()?)
}

/// Sets key `id`'s status in the document.
fn set_status(doc: &mut DocumentMut, id: i64, status: &str) -> Result<()> {
    let keys = doc["key"]
        .as_array_of_tables_mut()
        .ok_or("the keyring has no [[key]] tables")?;
    let key = keys
        .iter_mut()
        .find(|k| k.get("id").and_then(|v| v.as_integer()) == Some(id))
        .ok_or_else(|| format!("no key {id} in the keyring"))?;
    key["status"] = value(status);
    Ok(())
}

fn run() -> Result<()> {
    // A private directory (mode 0700): the loader checks every directory
    // on the keyring's path.
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("keyring.toml");

    // 1. A fresh keyring: key 1, primary, a 32-byte secret from the OS.
    create_new(&path, Algorithm::XChaCha20Poly1305)?;
    let mode = std::fs::metadata(&path)?.permissions().mode() & 0o777;
    promise(mode == 0o600, "create_new wrote a file others may read")?;
    let keys = KeyringFile::open(&path)?;
    println!(
        "1 created {} (mode {mode:04o}): key 1 primary, generation {}",
        path.display(),
        keys.generation()
    );

    // 2. A token minted under key 1, bound to this call.
    let context = reqstate::call_context(&reqstate::Call {
        principal: "user-42",
        audience: "counter-server",
        method: "tools/call",
        arguments: reqstate::Arguments::Json(r#"{"current":10}"#),
    })?;
    let binding = Binding::new(TOOL, &context)?;
    let step = binding.step("confirm");
    let old = keys.current().mint(binding, "confirm", &15u64, TTL)?.token;
    promise(key_of(&old)? == 1, "the first token is not key 1's")?;
    println!("2 minted token A under key {}", key_of(&old)?);

    // 3. Add key 2, active: it verifies everywhere before it mints anywhere.
    let mut doc = read(&path)?;
    let secret = Secret::generate(&OsRandom::new())?;
    let mut table = toml_edit::Table::new();
    table["id"] = value(2);
    table["algorithm"] = value(Algorithm::XChaCha20Poly1305.name());
    table["status"] = value("active");
    table["secret"] = value(&*secret.to_base64());
    doc["key"]
        .as_array_of_tables_mut()
        .ok_or("the keyring has no [[key]] tables")?
        .push(table);
    replace_keyring_file(&path, &doc.to_string())?;
    let reload = keys.reload_if_changed()?;
    promise(
        reload == Reload::Applied { generation: 2 },
        "adding key 2 was not applied",
    )?;
    let codec = keys.current();
    codec.verify::<u64>(&old, step)?;
    let minted = codec.mint(binding, "confirm", &15u64, TTL)?.token;
    promise(key_of(&minted)? == 1, "key 2 minted before its promotion")?;
    println!(
        "3 added key 2 (active), reloaded to generation 2: token A verifies, key {} still mints",
        key_of(&minted)?
    );

    // 4. Promote key 2; key 1 stays active while its tokens are alive.
    let mut doc = read(&path)?;
    set_status(&mut doc, 2, "primary")?;
    set_status(&mut doc, 1, "active")?;
    replace_keyring_file(&path, &doc.to_string())?;
    let reload = keys.reload_if_changed()?;
    promise(
        reload == Reload::Applied { generation: 3 },
        "promoting key 2 was not applied",
    )?;
    let codec = keys.current();
    codec.verify::<u64>(&old, step)?;
    let new = codec.mint(binding, "confirm", &20u64, TTL)?.token;
    promise(key_of(&new)? == 2, "new tokens are not key 2's")?;
    println!(
        "4 promoted key 2, reloaded to generation 3: token A (key 1) verifies, token B minted under key {}",
        key_of(&new)?
    );

    // 5. Retire key 1 (once its tokens have expired; here, at once).
    let mut doc = read(&path)?;
    set_status(&mut doc, 1, "retired")?;
    replace_keyring_file(&path, &doc.to_string())?;
    let reload = keys.reload_if_changed()?;
    promise(
        reload == Reload::Applied { generation: 4 },
        "retiring key 1 was not applied",
    )?;
    let codec = keys.current();
    let refused = codec.verify::<u64>(&old, step).err();
    promise(
        matches!(refused, Some(Refusal::RetiredKey(id)) if id.get() == 1),
        "token A was not refused as retired_key",
    )?;
    promise(
        codec.verify::<u64>(&new, step)?.state == 20,
        "token B lost its state",
    )?;
    println!(
        "5 retired key 1, reloaded to generation 4: token A refused ({}), token B verifies",
        refused.map(|r| r.reason()).unwrap_or("accepted")
    );

    // 6. A broken edit, written in place as an editor would: refused, and
    // the last good keyring stays in service.
    let good = std::fs::read_to_string(&path)?;
    std::fs::write(&path, good.replacen("[[key]]", "[[key]", 1))?;
    let error = keys
        .reload_if_changed()
        .err()
        .ok_or("broken TOML was applied")?;
    let codec = keys.current();
    promise(
        keys.generation() == 4 && codec.verify::<u64>(&new, step).is_ok(),
        "the last good keyring left service after a broken edit",
    )?;
    promise(
        key_of(&codec.mint(binding, "confirm", &1u64, TTL)?.token)? == 2,
        "the keyring in service no longer mints with key 2",
    )?;
    promise(
        keys.reload_if_changed()? == Reload::Unchanged && keys.last_error().is_some(),
        "the same broken version was reported twice, or forgotten",
    )?;
    println!("6 broken TOML refused, generation 4 still serves: {error}");

    // 7. The good text back, but readable by everyone: refused too, with
    // the Rust option that would allow it.
    std::fs::write(&path, &good)?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644))?;
    let error = keys
        .reload_if_changed()
        .err()
        .ok_or("a world-readable keyring was applied")?;
    promise(
        error
            .to_string()
            .contains("allow_group_or_other_readable()"),
        "the refusal does not name the Rust option",
    )?;
    promise(
        keys.generation() == 4 && keys.current().verify::<u64>(&new, step).is_ok(),
        "the last good keyring left service after a chmod",
    )?;
    println!("7 mode 0644 refused, generation 4 still serves: {error}");

    // 8. Fixed: the file is the keyring in service again; nothing to apply.
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
    let reload = keys.reload_if_changed()?;
    promise(
        reload == Reload::Unchanged && keys.last_error().is_none(),
        "the fixed file was not recognised as the keyring in service",
    )?;
    println!(
        "8 mode 0600 again: {reload:?}, generation {}, no error",
        keys.generation()
    );
    Ok(())
}
