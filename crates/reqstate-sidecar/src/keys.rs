//! `reqstate keys new|promote|retire|list`: editing a keyring file in place, keeping its comments and layout, validated before an atomic 0600 write.

use std::fmt;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use reqstate::{Algorithm, KeyStatus, OsRandom, Secret};
use toml_edit::{ArrayOfTables, DocumentMut, Item, Table, Value};

use crate::cli::{EXIT_BAD_CONFIG, KeysCommand};
use crate::keyring_source::{
    KeyringLoadError, KeyringPermissions, KeyringSecrets, load_keyring_file, watched_directory,
};

/// Why a keys command did nothing. The file is unchanged in every case.
#[derive(Debug)]
pub enum KeysError {
    /// Reading or writing the file failed.
    Io(PathBuf, std::io::Error),
    /// The file is not TOML, or not shaped like a keyring.
    Format(PathBuf, String),
    /// The operation makes no sense for this keyring (unknown id, retiring
    /// the primary …).
    Refused(String),
    /// The edited keyring would not load; it was not written.
    Invalid(PathBuf, String),
    /// The keyring file does not load (permissions, validation).
    Load(KeyringLoadError),
}

impl fmt::Display for KeysError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeysError::Io(path, e) => write!(f, "{}: {e}", path.display()),
            KeysError::Format(path, e) => write!(f, "{}: {e}", path.display()),
            KeysError::Refused(why) => f.write_str(why),
            KeysError::Invalid(path, e) => write!(
                f,
                "{}: the edited keyring would not load, so nothing was written: {e}",
                path.display()
            ),
            KeysError::Load(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for KeysError {}

/// Runs a keys command; prints its result and returns the exit code.
pub fn run(command: KeysCommand) -> u8 {
    let outcome = match command {
        KeysCommand::New {
            keyring,
            algorithm,
            id,
        } => new_key(&keyring, algorithm.into(), id),
        KeysCommand::Promote { keyring, id } => promote(&keyring, id),
        KeysCommand::Retire { keyring, id } => retire(&keyring, id),
        KeysCommand::List {
            keyring,
            json,
            allow_insecure_keyring_permissions,
        } => list(&keyring, json, allow_insecure_keyring_permissions),
    };
    match outcome {
        Ok(message) => {
            println!("{message}");
            0
        }
        Err(e) => {
            eprintln!("reqstate keys: {e}");
            match e {
                KeysError::Io(..) => 1,
                _ => EXIT_BAD_CONFIG,
            }
        }
    }
}

const NEW_FILE_HEADER: &str = "\
# reqstate keyring (format: docs/KEYRING.md). Keep this file mode 0600.
# Rotate with `reqstate keys new|promote|retire` (runbook: docs/ROTATION.md).
version = 1
";

fn read_document(path: &Path) -> Result<DocumentMut, KeysError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => NEW_FILE_HEADER.to_string(),
        Err(e) => return Err(KeysError::Io(path.to_path_buf(), e)),
    };
    // toml_edit's error display quotes the source line, which may hold a
    // secret; only the position is kept.
    text.parse::<DocumentMut>().map_err(|e| {
        let at = e
            .span()
            .map(|span| {
                let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
                format!(" at line {line}")
            })
            .unwrap_or_default();
        KeysError::Format(path.to_path_buf(), format!("not valid TOML{at}"))
    })
}

fn key_tables<'d>(
    doc: &'d mut DocumentMut,
    path: &Path,
) -> Result<&'d mut ArrayOfTables, KeysError> {
    let item = doc
        .as_table_mut()
        .entry("key")
        .or_insert(Item::ArrayOfTables(ArrayOfTables::new()));
    item.as_array_of_tables_mut().ok_or_else(|| {
        KeysError::Format(
            path.to_path_buf(),
            "`key` must be an array of [[key]] tables".into(),
        )
    })
}

fn table_id(table: &Table) -> Option<i64> {
    table.get("id").and_then(Item::as_integer)
}

fn table_status(table: &Table) -> Option<&str> {
    table.get("status").and_then(Item::as_str)
}

/// Replaces a string value, keeping the comment and spacing around it.
fn set_string(table: &mut Table, key: &str, new: &str) {
    if let Some(value) = table.get_mut(key).and_then(Item::as_value_mut) {
        let decor = value.decor().clone();
        *value = Value::from(new);
        *value.decor_mut() = decor;
        return;
    }
    table.insert(key, toml_edit::value(new));
}

fn find_key(tables: &mut ArrayOfTables, id: u32) -> Result<&mut Table, KeysError> {
    tables
        .iter_mut()
        .find(|t| table_id(t) == Some(i64::from(id)))
        .ok_or_else(|| KeysError::Refused(format!("no key with id {id} in the keyring")))
}

/// Validates the edited text with the sidecar's own loader rules, then
/// writes it atomically: a temporary file in the same directory, mode 0600,
/// flushed to disk, renamed over the original. A reader (or a watching
/// sidecar) sees the old file or the new one, never a partial one.
fn validate_and_write(path: &Path, doc: &DocumentMut) -> Result<(), KeysError> {
    let text = zeroize::Zeroizing::new(doc.to_string());
    // Validated as the sidecar will load it (relative secret files from the
    // configured path's directory, with the sidecar's ownership checks; their
    // read permissions are `serve`'s to judge, under its own flag) ...
    let secrets = KeyringSecrets::new(
        &watched_directory(path),
        KeyringPermissions::AllowGroupOrOtherReadable,
    );
    reqstate::Keyring::from_toml_with(&text, &secrets)
        .map_err(|e| KeysError::Invalid(path.to_path_buf(), e.to_string()))?;
    // ... and written where a symlinked keyring really lives, so the link
    // survives (renaming over it would replace it with a plain file).
    let resolved = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let path = resolved.as_path();
    let io = |e| KeysError::Io(path.to_path_buf(), e);
    let file_name = path.file_name().ok_or_else(|| {
        KeysError::Io(
            path.to_path_buf(),
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a file path"),
        )
    })?;
    let mut temporary_name = std::ffi::OsString::from(".");
    temporary_name.push(file_name);
    temporary_name.push(format!(".{}.tmp", std::process::id()));
    let temporary = path.with_file_name(temporary_name);
    let written = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temporary)?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&temporary, path)?;
        // Make the rename itself durable.
        let dir = match path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir,
            _ => Path::new("."),
        };
        std::fs::File::open(dir)?.sync_all()
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    written.map_err(io)
}

fn new_key(path: &Path, algorithm: Algorithm, id: Option<u32>) -> Result<String, KeysError> {
    let mut doc = read_document(path)?;
    let tables = key_tables(&mut doc, path)?;
    let ids: Vec<i64> = tables.iter().filter_map(table_id).collect();
    let id = match id {
        Some(id) if ids.contains(&i64::from(id)) => {
            return Err(KeysError::Refused(format!("key id {id} is already in use")));
        }
        Some(id) => id,
        None => {
            let highest = ids.iter().copied().max().unwrap_or(0);
            u32::try_from(highest + 1).map_err(|_| {
                KeysError::Refused("no key id left above the highest; pass --id".into())
            })?
        }
    };
    let has_primary = tables
        .iter()
        .any(|t| table_status(t) == Some(KeyStatus::Primary.name()));
    let status = if has_primary {
        KeyStatus::Active
    } else {
        KeyStatus::Primary
    };
    let secret = Secret::generate(&OsRandom::new())
        .map_err(|e| KeysError::Refused(format!("cannot generate a key: {e}")))?;
    let created: toml_edit::Datetime =
        reqstate::rfc3339_utc(reqstate::Clock::now(&reqstate::SystemClock))
            .parse()
            .map_err(|_| KeysError::Refused("the clock gives an unrepresentable time".into()))?;
    let mut table = Table::new();
    table.insert("id", toml_edit::value(i64::from(id)));
    table.insert("algorithm", toml_edit::value(algorithm.name()));
    table.insert("status", toml_edit::value(status.name()));
    table.insert("created", toml_edit::value(created));
    table.insert("secret", toml_edit::value(secret.to_base64().as_str()));
    tables.push(table);
    validate_and_write(path, &doc)?;
    Ok(match status {
        KeyStatus::Primary => {
            format!("added key {id} ({algorithm}) as primary: the keyring had none")
        }
        _ => format!(
            "added key {id} ({algorithm}) as active; roll it out to every sidecar, \
             then `reqstate keys promote {id}` (docs/ROTATION.md)"
        ),
    })
}

fn promote(path: &Path, id: u32) -> Result<String, KeysError> {
    let mut doc = read_document(path)?;
    let tables = key_tables(&mut doc, path)?;
    let target = find_key(tables, id)?;
    match table_status(target) {
        Some("primary") => return Ok(format!("key {id} is already the primary")),
        Some("retired") => {
            return Err(KeysError::Refused(format!(
                "key {id} is retired; a retired key is never brought back. Add a new key"
            )));
        }
        _ => {}
    }
    let mut demoted = Vec::new();
    for table in tables.iter_mut() {
        if table_status(table) == Some("primary") {
            set_string(table, "status", KeyStatus::Active.name());
            demoted.extend(table_id(table));
        }
    }
    set_string(find_key(tables, id)?, "status", KeyStatus::Primary.name());
    validate_and_write(path, &doc)?;
    let demoted: Vec<String> = demoted.iter().map(i64::to_string).collect();
    Ok(if demoted.is_empty() {
        format!("key {id} is now the primary")
    } else {
        format!(
            "key {id} is now the primary; key {} is active and still verifies. \
             Retire it once the longest TTL plus leeway has passed",
            demoted.join(", ")
        )
    })
}

fn retire(path: &Path, id: u32) -> Result<String, KeysError> {
    let mut doc = read_document(path)?;
    let tables = key_tables(&mut doc, path)?;
    let target = find_key(tables, id)?;
    match table_status(target) {
        Some("primary") => Err(KeysError::Refused(format!(
            "key {id} is the primary; promote another key first"
        ))),
        Some("retired") => Ok(format!("key {id} is already retired")),
        _ => {
            set_string(target, "status", KeyStatus::Retired.name());
            validate_and_write(path, &doc)?;
            Ok(format!(
                "key {id} is retired: sidecars refuse its tokens once they reload"
            ))
        }
    }
}

fn list(path: &Path, json: bool, allow_insecure: bool) -> Result<String, KeysError> {
    let permissions = if allow_insecure {
        KeyringPermissions::AllowGroupOrOtherReadable
    } else {
        KeyringPermissions::OwnerOnly
    };
    let loaded = load_keyring_file(path, permissions).map_err(KeysError::Load)?;
    let keys = loaded.keyring.keys();
    if json {
        let rows: Vec<serde_json::Value> = keys
            .iter()
            .map(|k| {
                serde_json::json!({
                    "id": k.id().get(),
                    "status": k.status().name(),
                    "algorithm": k.algorithm().name(),
                    "created_at": k.created_at(),
                })
            })
            .collect();
        return Ok(serde_json::Value::Array(rows).to_string());
    }
    let mut out = format!("{:<6} {:<8} {:<19} CREATED", "ID", "STATUS", "ALGORITHM");
    for k in keys {
        out.push_str(&format!(
            "\n{:<6} {:<8} {:<19} {}",
            k.id().get(),
            k.status().name(),
            k.algorithm().name(),
            k.created_at()
                .map(reqstate::rfc3339_utc)
                .unwrap_or_else(|| "-".into())
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn promote_keeps_comments_and_demotes_the_old_primary() -> Result<(), Box<dyn std::error::Error>>
    {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("keyring.toml");
        new_key(&path, Algorithm::XChaCha20Poly1305, None)?;
        let mut text = std::fs::read_to_string(&path)?;
        text.push_str("# operator note: key 2 is for the March rotation\n");
        std::fs::write(&path, text)?;
        new_key(&path, Algorithm::HmacSha256, None)?;
        promote(&path, 2)?;
        let text = std::fs::read_to_string(&path)?;
        assert!(text.contains("# operator note"), "{text}");
        let keyring = reqstate::Keyring::from_toml(&text)?;
        assert_eq!(keyring.primary().id().get(), 2);
        assert_eq!(
            keyring.get(reqstate::KeyId::new(1)).map(|k| k.status()),
            Some(KeyStatus::Active)
        );
        Ok(())
    }

    #[test]
    fn a_symlinked_keyring_is_edited_through_the_link() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let target = dir.path().join("keyring-prod.toml");
        new_key(&target, Algorithm::XChaCha20Poly1305, None)?;
        let link = dir.path().join("keyring.toml");
        std::os::unix::fs::symlink("keyring-prod.toml", &link)?;
        new_key(&link, Algorithm::XChaCha20Poly1305, None)?;
        assert!(
            std::fs::symlink_metadata(&link)?.file_type().is_symlink(),
            "the link was replaced"
        );
        let keyring = reqstate::Keyring::from_toml(&std::fs::read_to_string(&target)?)?;
        assert_eq!(keyring.len(), 2);
        Ok(())
    }

    #[test]
    fn retiring_the_primary_is_refused() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("keyring.toml");
        new_key(&path, Algorithm::XChaCha20Poly1305, None)?;
        let before = std::fs::read(&path)?;
        assert!(matches!(retire(&path, 1), Err(KeysError::Refused(_))));
        assert_eq!(std::fs::read(&path)?, before);
        Ok(())
    }
}
