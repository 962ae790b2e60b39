//! Reading a keyring file from disk: the permission check, then full validation by the core.

use std::fmt;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use reqstate::Keyring;
use zeroize::Zeroizing;

/// Whether a keyring file that group or others may read is accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyringPermissions {
    /// Refuse the file unless only its owner may read it (the default, as ssh
    /// does for private keys).
    OwnerOnly,
    /// `--allow-insecure-keyring-permissions`: accept any mode.
    AllowGroupOrOtherReadable,
}

/// A keyring file that was read and validated.
pub struct LoadedKeyringFile {
    /// The keyring.
    pub keyring: Keyring,
    /// The file's bytes, to tell a real change from a touch. Zeroized on drop:
    /// inline secrets are in it.
    pub contents: Zeroizing<Vec<u8>>,
}

impl fmt::Debug for LoadedKeyringFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LoadedKeyringFile")
            .field("keyring", &self.keyring)
            .finish_non_exhaustive()
    }
}

/// Why a keyring file could not be loaded. Messages name the file, and the
/// line and key when the error has them; never key material.
#[derive(Debug)]
pub enum KeyringLoadError {
    /// The file could not be opened or read.
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        error: std::io::Error,
    },
    /// Group or others may read the file, and that was not allowed.
    InsecurePermissions {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The file is not UTF-8 text.
    NotUtf8 {
        /// The file.
        path: PathBuf,
    },
    /// The file failed validation (`reqstate::Error::InvalidKeyring`).
    Invalid {
        /// The file.
        path: PathBuf,
        /// The core's error, with line and key id.
        error: reqstate::Error,
    },
}

impl fmt::Display for KeyringLoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyringLoadError::Io { path, error } => {
                write!(f, "keyring {}: {error}", path.display())
            }
            KeyringLoadError::InsecurePermissions { path, mode } => write!(
                f,
                "keyring {}: mode {:04o} lets group or others read it; \
                 run `chmod 600 {}` (or pass --allow-insecure-keyring-permissions)",
                path.display(),
                mode & 0o7777,
                path.display()
            ),
            KeyringLoadError::NotUtf8 { path } => {
                write!(f, "keyring {}: not UTF-8 text", path.display())
            }
            KeyringLoadError::Invalid { path, error } => {
                write!(f, "keyring {}: {error}", path.display())
            }
        }
    }
}

impl std::error::Error for KeyringLoadError {}

/// Opens, checks and parses a keyring file. The permission check is made on
/// the opened file (following symlinks, as Kubernetes Secret volumes need),
/// so what is checked is what is read.
pub fn load_keyring_file(
    path: &Path,
    permissions: KeyringPermissions,
) -> Result<LoadedKeyringFile, KeyringLoadError> {
    let io_error = |error| KeyringLoadError::Io {
        path: path.to_path_buf(),
        error,
    };
    let mut file = std::fs::File::open(path).map_err(io_error)?;
    let mode = file.metadata().map_err(io_error)?.permissions().mode();
    if permissions == KeyringPermissions::OwnerOnly && mode & 0o077 != 0 {
        return Err(KeyringLoadError::InsecurePermissions {
            path: path.to_path_buf(),
            mode,
        });
    }
    let mut contents = Zeroizing::new(Vec::new());
    file.read_to_end(&mut contents).map_err(io_error)?;
    let text = std::str::from_utf8(&contents).map_err(|_| KeyringLoadError::NotUtf8 {
        path: path.to_path_buf(),
    })?;
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    let keyring =
        Keyring::from_toml_in_dir(text, dir).map_err(|error| KeyringLoadError::Invalid {
            path: path.to_path_buf(),
            error,
        })?;
    Ok(LoadedKeyringFile { keyring, contents })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    const GOOD: &str = "[[key]]\nid = 1\nstatus = \"primary\"\nsecret = \"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\"\n";

    fn write_keyring(mode: u32, text: &str) -> Result<tempfile::NamedTempFile, std::io::Error> {
        let mut file = tempfile::NamedTempFile::new()?;
        file.write_all(text.as_bytes())?;
        std::fs::set_permissions(file.path(), std::fs::Permissions::from_mode(mode))?;
        Ok(file)
    }

    #[test]
    fn group_readable_keyring_is_refused_unless_allowed() -> Result<(), Box<dyn std::error::Error>>
    {
        let file = write_keyring(0o640, GOOD)?;
        let err = load_keyring_file(file.path(), KeyringPermissions::OwnerOnly)
            .err()
            .ok_or("a group-readable keyring was loaded")?;
        assert!(matches!(err, KeyringLoadError::InsecurePermissions { .. }));
        assert!(err.to_string().contains("0640"), "{err}");
        load_keyring_file(file.path(), KeyringPermissions::AllowGroupOrOtherReadable)?;
        Ok(())
    }

    #[test]
    fn owner_only_keyring_loads() -> Result<(), Box<dyn std::error::Error>> {
        let file = write_keyring(0o600, GOOD)?;
        let loaded = load_keyring_file(file.path(), KeyringPermissions::OwnerOnly)?;
        assert_eq!(loaded.keyring.len(), 1);
        Ok(())
    }

    #[test]
    fn invalid_keyring_error_names_file_and_line() -> Result<(), Box<dyn std::error::Error>> {
        let file = write_keyring(
            0o600,
            "[[key]]\nid = 1\nstatus = \"boss\"\nsecret = \"AA\"\n",
        )?;
        let err = load_keyring_file(file.path(), KeyringPermissions::OwnerOnly)
            .err()
            .ok_or("an invalid keyring was loaded")?;
        let text = err.to_string();
        assert!(text.contains("line 1"), "{text}");
        assert!(text.contains(&file.path().display().to_string()), "{text}");
        Ok(())
    }
}
