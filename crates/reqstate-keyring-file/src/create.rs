//! Writing keyring files: a fresh one with a random key ([`create_new`]) and
//! an edited one, atomically ([`replace_keyring_file`]).

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use reqstate::{Algorithm, Keyring, OsRandom, Secret, Zeroizing};

use crate::{
    KeyringLoadError, KeyringPermissions, KeyringSecrets, load_keyring_file, watched_directory,
};

/// The first lines of a keyring file [`create_new`] writes (those of
/// `reqstate keys new`).
const HEADER: &str = "\
# reqstate keyring (format: docs/KEYRING.md). Keep this file mode 0600.
# Rotate with `reqstate keys rotate` on a timer (runbook: docs/ROTATION.md).
version = 1
";

fn io_error(path: &Path) -> impl Fn(std::io::Error) -> KeyringLoadError + '_ {
    move |error| KeyringLoadError::Io {
        path: path.to_path_buf(),
        error,
    }
}

/// Creates a keyring file at `path` holding one fresh key: id 1, `primary`,
/// of `algorithm`, its 32-byte secret drawn from the operating system's
/// random source, `created` now. What `reqstate keys new --keyring FILE`
/// does for a missing file.
///
/// The file is created with mode `0600` and never replaces anything: an
/// existing file (or symlink) at `path` is an error. It is then loaded with
/// [`load_keyring_file`]'s checks; when they refuse it (a directory on the
/// path others may write, say) the new file is removed again, so that no
/// secret is left where others could replace it, and the error says why.
///
/// ```
/// use reqstate::Algorithm;
/// use reqstate_keyring_file::{KeyringFile, create_new};
///
/// # let dir = tempfile::tempdir()?;
/// let path = dir.path().join("keyring.toml");
/// create_new(&path, Algorithm::XChaCha20Poly1305)?;
/// let keys = KeyringFile::open(&path)?;
/// assert_eq!(keys.current().keyring().primary().id().get(), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn create_new(path: impl AsRef<Path>, algorithm: Algorithm) -> Result<(), KeyringLoadError> {
    let path = path.as_ref();
    let secret = Secret::generate(&OsRandom::new())
        .map_err(|_| io_error(path)(std::io::Error::other("no randomness from the OS")))?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .map_err(|_| io_error(path)(std::io::Error::other("the clock is before 1970")))?;
    let mut text = Zeroizing::new(String::with_capacity(512));
    text.push_str(HEADER);
    text.push_str("\n[[key]]\nid = 1\nalgorithm = \"");
    text.push_str(algorithm.name());
    text.push_str("\"\nstatus = \"primary\"\ncreated = ");
    text.push_str(&reqstate::rfc3339_utc(now));
    text.push_str("\nsecret = \"");
    text.push_str(&secret.to_base64());
    text.push_str("\"\n");
    // The text is ours; a refusal here is a bug, reported rather than written.
    Keyring::from_toml(&text).map_err(|error| KeyringLoadError::Invalid {
        path: path.to_path_buf(),
        error,
    })?;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(io_error(path))?;
    let written = file
        .write_all(text.as_bytes())
        .and_then(|()| file.sync_all());
    drop(file);
    let checked = written
        .map_err(io_error(path))
        .and_then(|()| load_keyring_file(path, KeyringPermissions::OwnerOnly).map(drop));
    if let Err(error) = checked {
        // Best effort: the error that matters is the one returned.
        let _ = std::fs::remove_file(path);
        return Err(error);
    }
    sync_directory(path)
}

/// Replaces the keyring file at `path` with `text`, atomically, as
/// `reqstate keys` does: `text` is validated first (a keyring that would
/// not load is refused and nothing is written), then written to a
/// temporary file with mode `0600` in the same directory, flushed to disk
/// and renamed over the file. A reader ([`KeyringFile`](crate::KeyringFile),
/// a sidecar) sees the old file or the new one, never a part. A `path` that
/// is a symlink is replaced where it points; the link stays.
///
/// `secret_file` and `secret_env` references in `text` must resolve (the
/// secret files' owners and directories are checked; their read permissions
/// are left to the loader). The schedule is not checked against a policy
/// here: the loader checks it with the policy it serves.
pub fn replace_keyring_file(path: impl AsRef<Path>, text: &str) -> Result<(), KeyringLoadError> {
    let path = path.as_ref();
    let secrets = KeyringSecrets::new(
        &watched_directory(path),
        KeyringPermissions::AllowGroupOrOtherReadable,
    );
    Keyring::from_toml_with(text, &secrets).map_err(|error| KeyringLoadError::Invalid {
        path: path.to_path_buf(),
        error,
    })?;
    write_keyring_text(path, text).map_err(io_error(path))
}

/// Writes `text` to the keyring file at `path` atomically, without checking
/// it (callers validate first, as [`replace_keyring_file`] and `reqstate
/// keys` do): a temporary file in the same directory, mode `0600`, flushed
/// to disk, renamed over the file, the directory flushed. A reader (or a
/// watching sidecar) sees the old file or the new one, never a partial one.
/// A symlinked keyring is written where it really lives, so the link
/// survives (renaming over it would replace it with a plain file).
pub fn write_keyring_text(path: &Path, text: &str) -> std::io::Result<()> {
    let target = match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => std::fs::canonicalize(path)?,
        _ => path.to_path_buf(),
    };
    let temporary = temporary_name(&target);
    let written = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temporary)?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&temporary, &target)
    })();
    if let Err(error) = written {
        let _ = std::fs::remove_file(&temporary);
        return Err(error);
    }
    // The rename itself made durable, in the directory it happened in.
    std::fs::File::open(watched_directory(&target))?.sync_all()
}

/// A fresh name next to `target`: `.NAME.tmp-PID-N`.
fn temporary_name(target: &Path) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    target.with_file_name(format!(".{name}.tmp-{}-{n}", std::process::id()))
}

/// Flushes the directory entry of `path` (the creation or the rename).
fn sync_directory(path: &Path) -> Result<(), KeyringLoadError> {
    std::fs::File::open(watched_directory(path))
        .and_then(|dir| dir.sync_all())
        .map_err(io_error(path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    fn private_dir() -> Result<tempfile::TempDir, Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700))?;
        Ok(dir)
    }

    #[test]
    fn create_new_writes_a_private_loadable_file_with_a_fresh_secret()
    -> Result<(), Box<dyn std::error::Error>> {
        let dir = private_dir()?;
        let (a, b) = (dir.path().join("a.toml"), dir.path().join("b.toml"));
        create_new(&a, Algorithm::XChaCha20Poly1305)?;
        create_new(&b, Algorithm::HmacSha256)?;
        assert_eq!(std::fs::metadata(&a)?.mode() & 0o777, 0o600);
        let loaded = load_keyring_file(&a, KeyringPermissions::OwnerOnly)?;
        assert_eq!(loaded.keyring.len(), 1);
        let primary = loaded.keyring.primary();
        assert_eq!(primary.algorithm(), Algorithm::XChaCha20Poly1305);
        assert!(primary.created_at().is_some());
        let other = load_keyring_file(&b, KeyringPermissions::OwnerOnly)?;
        assert_eq!(other.keyring.primary().algorithm(), Algorithm::HmacSha256);
        // Two files, two secrets: the lines holding them differ.
        let secret_line = |path: &Path| -> std::io::Result<Option<String>> {
            Ok(std::fs::read_to_string(path)?
                .lines()
                .find(|l| l.starts_with("secret = "))
                .map(str::to_owned))
        };
        let (sa, sb) = (secret_line(&a)?, secret_line(&b)?);
        assert!(sa.is_some() && sb.is_some());
        assert_ne!(sa, sb, "two new keyrings got the same secret");
        Ok(())
    }

    #[test]
    fn create_new_never_replaces_a_file() -> Result<(), Box<dyn std::error::Error>> {
        let dir = private_dir()?;
        let path = dir.path().join("keyring.toml");
        std::fs::write(&path, "mine")?;
        let err = create_new(&path, Algorithm::XChaCha20Poly1305)
            .err()
            .ok_or("an existing file was replaced")?;
        assert!(err.to_string().contains("exists"), "{err}");
        assert_eq!(std::fs::read_to_string(&path)?, "mine");
        Ok(())
    }

    #[test]
    fn create_new_in_a_directory_others_may_write_leaves_nothing()
    -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777))?;
        let path = dir.path().join("keyring.toml");
        let err = create_new(&path, Algorithm::XChaCha20Poly1305)
            .err()
            .ok_or("a keyring was created in a world-writable directory")?;
        assert!(
            matches!(err, KeyringLoadError::InsecureDirectory { .. }),
            "{err}"
        );
        assert!(!path.exists(), "the refused file was left behind");
        Ok(())
    }

    #[test]
    fn replace_refuses_an_invalid_keyring_and_keeps_the_file()
    -> Result<(), Box<dyn std::error::Error>> {
        let dir = private_dir()?;
        let path = dir.path().join("keyring.toml");
        create_new(&path, Algorithm::XChaCha20Poly1305)?;
        let before = std::fs::read(&path)?;
        let err = replace_keyring_file(&path, "[[key]]\nid = 1\nstatus = \"active\"\n")
            .err()
            .ok_or("an invalid keyring was written")?;
        assert!(matches!(err, KeyringLoadError::Invalid { .. }), "{err}");
        assert_eq!(std::fs::read(&path)?, before);
        assert_eq!(
            std::fs::read_dir(dir.path())?.count(),
            1,
            "a temporary file was left"
        );
        Ok(())
    }

    #[test]
    fn replace_writes_through_a_symlink_with_mode_0600() -> Result<(), Box<dyn std::error::Error>> {
        let dir = private_dir()?;
        let real = dir.path().join("real.toml");
        let link = dir.path().join("keyring.toml");
        create_new(&real, Algorithm::XChaCha20Poly1305)?;
        std::os::unix::fs::symlink(&real, &link)?;
        let text = std::fs::read_to_string(&real)?.replace("id = 1", "id = 7");
        replace_keyring_file(&link, &text)?;
        assert!(std::fs::symlink_metadata(&link)?.file_type().is_symlink());
        assert_eq!(std::fs::metadata(&real)?.mode() & 0o777, 0o600);
        let loaded = load_keyring_file(&link, KeyringPermissions::OwnerOnly)?;
        assert_eq!(loaded.keyring.primary().id().get(), 7);
        Ok(())
    }
}
