//! `reqstate keys new|promote|retire|rotate|status|list`: editing a keyring file in place, keeping its comments and layout, validated before an atomic 0600 write; and printing its timeline (docs/ROTATION.md).
//!
//! `rotate`, `promote` and `retire` place instants in the file (`mint_from`,
//! `retire_at`: docs/KEYRING.md, "Keys on a schedule") from the clock, a
//! propagation delay and the fleet's policy, and refuse a move that would
//! refuse live tokens unless `--force`.

mod schedule;
pub mod time;
pub mod timeline;

use std::fmt;
use std::path::{Path, PathBuf};

use reqstate::{Algorithm, KeyStatus, OsRandom, Secret};
use toml_edit::{ArrayOfTables, DocumentMut, Item, Table, Value};

use crate::cli::{EXIT_BAD_CONFIG, FleetPolicyArgs, KeysCommand};
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
    /// A flag's value is malformed.
    Usage(String),
    /// A running sidecar could not be asked (`status --connect`).
    Unreachable(String),
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
            KeysError::Usage(why) => f.write_str(why),
            KeysError::Unreachable(why) => f.write_str(why),
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
        KeysCommand::Promote {
            keyring,
            id,
            at,
            propagation,
            force,
            now,
            policy,
        } => (|| {
            let (now, at) = now_and_at(now.as_deref(), at.as_deref())?;
            let propagation =
                time::parse_duration("--propagation", &propagation).map_err(KeysError::Usage)?;
            schedule::promote(
                &keyring,
                id,
                schedule::PromoteOptions {
                    now,
                    at,
                    propagation,
                    force,
                    policy: fleet_policy(policy)?,
                },
            )
        })(),
        KeysCommand::Retire {
            keyring,
            id,
            at,
            force,
            now,
            policy,
        } => (|| {
            let (now, at) = now_and_at(now.as_deref(), at.as_deref())?;
            schedule::retire(
                &keyring,
                id,
                schedule::RetireOptions {
                    now,
                    at,
                    force,
                    policy: fleet_policy(policy)?,
                },
            )
        })(),
        KeysCommand::Rotate {
            keyring,
            propagation,
            every,
            grace,
            algorithm,
            now,
            policy,
        } => (|| {
            let options = schedule::RotateOptions {
                now: time::now_or_clock(now.as_deref()).map_err(KeysError::Usage)?,
                propagation: time::parse_duration("--propagation", &propagation)
                    .map_err(KeysError::Usage)?,
                every: every
                    .as_deref()
                    .map(|e| time::parse_duration("--every", e))
                    .transpose()
                    .map_err(KeysError::Usage)?,
                grace: time::parse_duration("--grace", &grace).map_err(KeysError::Usage)?,
                algorithm: algorithm.map(Into::into),
                policy: fleet_policy(policy)?,
            };
            schedule::rotate(&keyring, &options)
        })(),
        KeysCommand::Status {
            keyring,
            remote,
            now,
            json,
            allow_insecure_keyring_permissions,
        } => source(keyring, remote, allow_insecure_keyring_permissions)
            .and_then(|source| status(source, now.as_deref(), json)),
        KeysCommand::List {
            keyring,
            remote,
            json,
            allow_insecure_keyring_permissions,
        } => source(keyring, remote, allow_insecure_keyring_permissions).and_then(|source| {
            match source {
                Source::File(path, permissions) => list(&path, json, permissions),
                Source::Sidecar(remote) => list_remote(&remote, json),
            }
        }),
    };
    match outcome {
        Ok(message) => crate::output::line(message, 0),
        Err(e) => {
            eprintln!("reqstate keys: {e}");
            match e {
                KeysError::Io(..) | KeysError::Unreachable(_) => 1,
                _ => EXIT_BAD_CONFIG,
            }
        }
    }
}

/// The fleet's policy from `--max-ttl` and `--leeway`, with the core's bounds.
fn fleet_policy(args: FleetPolicyArgs) -> Result<reqstate::Policy, KeysError> {
    reqstate::Policy::new()
        .with_max_lifetime(std::time::Duration::from_secs(args.max_ttl))
        .map_err(|e| KeysError::Usage(format!("--max-ttl {}: {e}", args.max_ttl)))?
        .with_clock_leeway(std::time::Duration::from_secs(args.clock_leeway))
        .map_err(|e| KeysError::Usage(format!("--leeway {}: {e}", args.clock_leeway)))
}

/// `--now` (or the system clock) and `--at`, read as instants.
fn now_and_at(now: Option<&str>, at: Option<&str>) -> Result<(u64, Option<u64>), KeysError> {
    let now = time::now_or_clock(now).map_err(KeysError::Usage)?;
    let at = at
        .map(|t| time::parse_instant("--at", t))
        .transpose()
        .map_err(KeysError::Usage)?;
    Ok((now, at))
}

const NEW_FILE_HEADER: &str = "\
# reqstate keyring (format: docs/KEYRING.md). Keep this file mode 0600.
# Rotate with `reqstate keys rotate` on a timer (runbook: docs/ROTATION.md).
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
/// writes it atomically ([`reqstate_keyring_file::write_keyring_text`]): a
/// reader (or a watching sidecar) sees the old file or the new one, never a
/// partial one.
fn validate_and_write(
    path: &Path,
    doc: &DocumentMut,
    policy: Option<&reqstate::Policy>,
) -> Result<reqstate::Keyring, KeysError> {
    let text = zeroize::Zeroizing::new(doc.to_string());
    // Validated as the sidecar will load it (relative secret files from the
    // configured path's directory, with the sidecar's ownership checks; their
    // read permissions are `serve`'s to judge, under its own flag) ...
    let secrets = KeyringSecrets::new(
        &watched_directory(path),
        KeyringPermissions::AllowGroupOrOtherReadable,
    );
    let keyring = reqstate::Keyring::from_toml_with(&text, &secrets)
        .map_err(|e| KeysError::Invalid(path.to_path_buf(), e.to_string()))?;
    // ... with the schedule checked against the policy the fleet serves ...
    if let Some(policy) = policy {
        keyring
            .check_schedule(policy)
            .map_err(|e| KeysError::Invalid(path.to_path_buf(), e.to_string()))?;
    }
    // ... and written atomically, 0600, where a symlinked keyring really
    // lives (the same write as the loader crate's replace_keyring_file).
    reqstate_keyring_file::write_keyring_text(path, &text)
        .map_err(|e| KeysError::Io(path.to_path_buf(), e))?;
    Ok(keyring)
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
    validate_and_write(path, &doc, None)?;
    Ok(match status {
        KeyStatus::Primary => {
            format!("added key {id} ({algorithm}) as primary: the keyring had none")
        }
        _ => format!(
            "added key {id} ({algorithm}) as active; roll it out to every sidecar, \
             then `reqstate keys promote --keyring {} {id}` (docs/ROTATION.md; \
             `reqstate keys rotate` does both in one rollout)",
            shell_word(&path.display().to_string())
        ),
    })
}

/// `text` as one shell word: as is when it is made of safe characters,
/// else in single quotes (a printed hint must work when pasted).
pub(crate) fn shell_word(text: &str) -> String {
    let safe = !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-+:=@%,".contains(&b));
    if safe {
        text.to_owned()
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}

/// One line of `keys list`: a key of a file, or of a sidecar's ListKeys.
struct ListedKey {
    id: u32,
    /// What the key does now.
    status: KeyStatus,
    /// What the file writes.
    file_status: KeyStatus,
    algorithm: &'static str,
    created_at: Option<u64>,
    mint_from: Option<u64>,
    retire_at: Option<u64>,
}

fn list(path: &Path, json: bool, permissions: KeyringPermissions) -> Result<String, KeysError> {
    let loaded = load_keyring_file(path, permissions).map_err(KeysError::Load)?;
    let now = reqstate::Clock::now(&reqstate::SystemClock);
    let keyring = &loaded.keyring;
    let rows: Vec<ListedKey> = keyring
        .keys()
        .iter()
        .map(|k| ListedKey {
            id: k.id().get(),
            status: keyring.status_at(k, now),
            file_status: k.status(),
            algorithm: k.algorithm().name(),
            created_at: k.created_at(),
            mint_from: k.mint_from(),
            retire_at: k.retire_at(),
        })
        .collect();
    Ok(render_list(&rows, json))
}

/// `keys list --connect`: the same table (or JSON) from the sidecar's
/// ListKeys, so that a rotation is confirmed on each replica.
fn list_remote(remote: &crate::cli::RemoteArgs, json: bool) -> Result<String, KeysError> {
    use reqstate_proto::v1 as pb;
    let answer = list_keys_of(remote)?;
    let status = |value: i32, field: &str| match pb::KeyStatus::try_from(value) {
        Ok(pb::KeyStatus::Primary) => Ok(KeyStatus::Primary),
        Ok(pb::KeyStatus::Active) => Ok(KeyStatus::Active),
        Ok(pb::KeyStatus::Retired) => Ok(KeyStatus::Retired),
        _ => Err(KeysError::Unreachable(format!(
            "the sidecar's ListKeys has no {field} for a key ({value}): upgrade it"
        ))),
    };
    let rows = answer
        .keys
        .iter()
        .map(|k| {
            let algorithm = match pb::Algorithm::try_from(k.algorithm) {
                Ok(pb::Algorithm::HmacSha256) => reqstate::Algorithm::HmacSha256.name(),
                Ok(pb::Algorithm::Xchacha20Poly1305) => {
                    reqstate::Algorithm::XChaCha20Poly1305.name()
                }
                _ => "unknown",
            };
            Ok(ListedKey {
                id: k.id,
                status: status(k.status, "status")?,
                file_status: status(k.file_status, "file_status")?,
                algorithm,
                created_at: k.created_at,
                mint_from: k.mint_from,
                retire_at: k.retire_at,
            })
        })
        .collect::<Result<Vec<_>, KeysError>>()?;
    Ok(render_list(&rows, json))
}

fn render_list(keys: &[ListedKey], json: bool) -> String {
    if json {
        // `status` is what the key does now (as ListKeys' `status`);
        // `file_status` what the file writes.
        let rows: Vec<serde_json::Value> = keys
            .iter()
            .map(|k| {
                serde_json::json!({
                    "id": k.id,
                    "status": k.status.name(),
                    "file_status": k.file_status.name(),
                    "algorithm": k.algorithm,
                    "created_at": k.created_at,
                    "mint_from": k.mint_from,
                    "retire_at": k.retire_at,
                })
            })
            .collect();
        return serde_json::Value::Array(rows).to_string();
    }
    let instant = |at: Option<u64>| at.map(reqstate::rfc3339_utc).unwrap_or_else(|| "-".into());
    let mut out = format!(
        "{:<6} {:<8} {:<8} {:<19} {:<21} {:<21} {:<21}",
        "ID", "NOW", "STATUS", "ALGORITHM", "CREATED", "MINT_FROM", "RETIRE_AT"
    );
    for k in keys {
        let doing = match k.status {
            KeyStatus::Primary => "mints",
            KeyStatus::Active => "verifies",
            KeyStatus::Retired => "refused",
        };
        out.push_str(&format!(
            "\n{:<6} {:<8} {:<8} {:<19} {:<21} {:<21} {:<21}",
            k.id,
            doing,
            k.file_status.name(),
            k.algorithm,
            instant(k.created_at),
            instant(k.mint_from),
            instant(k.retire_at),
        ));
    }
    timeline::trim_lines(&out)
}

/// Where `keys list` and `keys status` read the keys: a keyring file, or
/// a running sidecar's ListKeys.
enum Source {
    File(PathBuf, KeyringPermissions),
    Sidecar(crate::cli::RemoteArgs),
}

/// The one source the flags name: `--keyring FILE`, or `--connect ADDR`
/// with its own flags (bearer token, TLS, timeout); a flag of the other
/// source is a usage error, not ignored.
fn source(
    keyring: Option<PathBuf>,
    remote: crate::cli::RemoteArgs,
    allow_insecure: bool,
) -> Result<Source, KeysError> {
    match (keyring, &remote.connect) {
        (None, Some(_)) if allow_insecure => Err(KeysError::Usage(
            "--allow-insecure-keyring-permissions has no meaning with --connect: \
             no keyring file is read"
                .into(),
        )),
        (None, Some(_)) => Ok(Source::Sidecar(remote)),
        (Some(path), None)
            if remote.auth_token_file.is_none()
                && !remote.tls.any()
                && remote.timeout_ms.is_none() =>
        {
            let permissions = if allow_insecure {
                KeyringPermissions::AllowGroupOrOtherReadable
            } else {
                KeyringPermissions::OwnerOnly
            };
            Ok(Source::File(path, permissions))
        }
        (Some(path), Some(_)) => Err(KeysError::Usage(format!(
            "--keyring {} has no meaning with --connect: the sidecar's keys are read; \
             drop one of the two",
            path.display()
        ))),
        (Some(_), None) => Err(KeysError::Usage(
            "--auth-token-file, --timeout-ms and the --tls-* flags apply only with --connect ADDR"
                .into(),
        )),
        (None, None) => Err(KeysError::Usage(
            "--keyring FILE or --connect ADDR is needed".into(),
        )),
    }
}

/// The sidecar's ListKeys answer, or why it could not be had.
fn list_keys_of(
    remote: &crate::cli::RemoteArgs,
) -> Result<reqstate_proto::v1::ListKeysResponse, KeysError> {
    crate::remote::list_keys(remote).map_err(|e| {
        if e.is_usage() {
            KeysError::Usage(e.to_string())
        } else {
            KeysError::Unreachable(e.to_string())
        }
    })
}

/// `keys status`: the timeline of a file at `--now`, or of a running sidecar.
fn status(source: Source, now: Option<&str>, json: bool) -> Result<String, KeysError> {
    let timeline = match source {
        Source::Sidecar(remote) => {
            let address = remote.connect.clone().unwrap_or_default();
            let answer = list_keys_of(&remote)?;
            if answer.now == 0 {
                return Err(KeysError::Unreachable(format!(
                    "{address}: the sidecar's ListKeys has no schedule fields (`now` is 0): \
                     it predates keys on a schedule; upgrade it"
                )));
            }
            timeline::Timeline::of_list_keys(&address, &answer)
        }
        Source::File(path, permissions) => {
            let now = time::now_or_clock(now).map_err(KeysError::Usage)?;
            let loaded = load_keyring_file(&path, permissions).map_err(KeysError::Load)?;
            timeline::Timeline::of_keyring(&loaded.keyring, now)
        }
    };
    Ok(if json {
        timeline.to_json().to_string()
    } else {
        timeline.to_text()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> reqstate::Policy {
        reqstate::Policy::new()
    }

    fn promote_at(path: &Path, id: u32, now: u64, force: bool) -> Result<String, KeysError> {
        schedule::promote(
            path,
            id,
            schedule::PromoteOptions {
                now,
                at: None,
                propagation: 300,
                force,
                policy: policy(),
            },
        )
    }

    #[test]
    fn promote_keeps_comments_and_schedules_the_key() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("keyring.toml");
        new_key(&path, Algorithm::XChaCha20Poly1305, None)?;
        let mut text = std::fs::read_to_string(&path)?;
        text.push_str("# operator note: key 2 is for the March rotation\n");
        std::fs::write(&path, text)?;
        new_key(&path, Algorithm::HmacSha256, None)?;
        let created = reqstate::Keyring::from_toml(&std::fs::read_to_string(&path)?)?
            .get(reqstate::KeyId::new(2))
            .and_then(|k| k.created_at())
            .ok_or("key 2 has no created")?;
        // Too early: replicas may not have key 2 yet.
        let before = std::fs::read(&path)?;
        let refused = promote_at(&path, 2, created + 10, false);
        assert!(
            matches!(&refused, Err(KeysError::Refused(why)) if why.contains("unknown_key")
                && why.contains(&reqstate::rfc3339_utc(created + 300))),
            "{refused:?}"
        );
        assert_eq!(std::fs::read(&path)?, before);
        // After the propagation delay: key 2 mints from now on.
        promote_at(&path, 2, created + 300, false)?;
        let text = std::fs::read_to_string(&path)?;
        assert!(text.contains("# operator note"), "{text}");
        let keyring = reqstate::Keyring::from_toml(&text)?;
        assert_eq!(keyring.minting_key(created + 299).id().get(), 1);
        assert_eq!(keyring.minting_key(created + 300).id().get(), 2);
        let key_1 = keyring.get(reqstate::KeyId::new(1)).ok_or("key 1")?;
        assert_eq!(keyring.status_at(key_1, created + 300), KeyStatus::Active);
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
        for force in [false, true] {
            let refused = schedule::retire(
                &path,
                1,
                schedule::RetireOptions {
                    now: reqstate::Clock::now(&reqstate::SystemClock),
                    at: None,
                    force,
                    policy: policy(),
                },
            );
            assert!(
                matches!(&refused, Err(KeysError::Refused(why)) if why.contains("no key to mint")),
                "{refused:?}"
            );
        }
        assert_eq!(std::fs::read(&path)?, before);
        Ok(())
    }

    #[test]
    fn rotate_then_rotate_again_changes_nothing() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("keyring.toml");
        new_key(&path, Algorithm::HmacSha256, None)?;
        let now = reqstate::Clock::now(&reqstate::SystemClock);
        let options = |now| schedule::RotateOptions {
            now,
            propagation: 300,
            every: None,
            grace: 60,
            algorithm: None,
            policy: policy(),
        };
        let said = schedule::rotate(&path, &options(now))?;
        assert!(said.contains("scheduled key 2"), "{said}");
        let once = std::fs::read(&path)?;
        let keyring = reqstate::Keyring::from_toml(std::str::from_utf8(&once)?)?;
        let key_2 = keyring.get(reqstate::KeyId::new(2)).ok_or("key 2")?;
        assert_eq!(key_2.mint_from(), Some(now + 300));
        assert_eq!(key_2.algorithm(), Algorithm::HmacSha256);
        assert_eq!(
            keyring.primary().retire_at(),
            Some(
                now + 300
                    + reqstate::Policy::DEFAULT_MAX_LIFETIME
                    + reqstate::Policy::DEFAULT_CLOCK_LEEWAY
            )
        );
        let said = schedule::rotate(&path, &options(now + 299))?;
        assert!(
            said.contains("in progress") && said.contains("no change"),
            "{said}"
        );
        assert_eq!(std::fs::read(&path)?, once);
        Ok(())
    }
}
