//! Keyring files for Rust programs that mint and verify `requestState`
//! tokens with [`reqstate`]: read from disk with the checks every reqstate
//! program makes (who may read the file, who may replace it), validated by
//! the core, kept in service and reloaded when the program asks.
//!
//! - [`KeyringFile`]: the keyring file in service, as a [`reqstate::Codec`]
//!   ([`KeyringFile::current`], an atomic load), reloaded with
//!   [`KeyringFile::reload_if_changed`] (one `stat` when nothing changed) or
//!   [`KeyringFile::reload`]; a bad file is refused and the last good
//!   keyring stays.
//! - [`create_new`]: a new keyring file with a fresh random key, mode `0600`
//!   (what `reqstate keys new --keyring FILE` does).
//! - [`replace_keyring_file`]: an edited keyring, validated, then written
//!   atomically with mode `0600`.
//! - [`load_keyring_file`]: one checked read, for programs that manage
//!   reloads themselves (the `reqstate` sidecar, the Python package);
//!   [`KeyringSecrets`] resolves `secret_file` and `secret_env` with the
//!   same checks (the core's [`reqstate::SecretSource`]).
//!
//! The checks (docs/KEYRING.md, "Ownership and permissions"): the file is a
//! regular file of at most 1 MiB, owned by this process's user or root, not
//! writable by group or others and not readable by them unless allowed
//! ([`KeyringFileOptions::allow_group_or_other_readable`]); every directory
//! on its path is owned by this process's user or root and not writable by
//! others (sticky directories excepted). `reqstate::Keyring::from_toml`
//! checks none of this: it takes text.
//!
//! ```
//! use reqstate::Algorithm;
//! use reqstate_keyring_file::{KeyringFile, create_new};
//!
//! # let dir = tempfile::tempdir()?;
//! # let path = dir.path().join("keyring.toml");
//! // Once, at install time (or `reqstate keys new --keyring keyring.toml`).
//! create_new(&path, Algorithm::XChaCha20Poly1305)?;
//!
//! let keys = KeyringFile::open(&path)?;
//! // Per request, or on the program's own timer:
//! if let Err(error) = keys.reload_if_changed() {
//!     eprintln!("{error}; still serving the previous keyring");
//! }
//! let codec = keys.current(); // mint and verify with it
//! # assert_eq!(codec.keyring().len(), 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Unix only (the checks read owners and modes).

#![forbid(unsafe_code)]

use std::ffi::OsStr;
use std::fmt;
use std::fs::Metadata;
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use reqstate::{Keyring, KeyringError, SecretRef, SecretSource};
use zeroize::Zeroizing;

mod create;
mod reloading;

pub use create::{create_new, replace_keyring_file, write_keyring_text};
pub use reloading::{KeyringFile, KeyringFileOptions, Reload};

/// The README's snippets, compiled as doctests so they cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

/// How the command lines allow a keyring file others may read (`reqstate`,
/// `reqstate-ts`, `python -m reqstate`): the hint of
/// [`KeyringLoadError::InsecurePermissions`] from [`load_keyring_file`].
pub const ALLOW_READABLE_CLI: &str = "--allow-insecure-keyring-permissions";

/// How a Rust program allows a keyring file others may read: the hint of
/// [`KeyringLoadError::InsecurePermissions`] from [`KeyringFile`].
pub const ALLOW_READABLE_RUST: &str = "`KeyringFile::options().allow_group_or_other_readable()`";

/// Longest keyring file read, in bytes. A key takes about 200 bytes; a
/// keyring a thousand times larger than any real one is not a keyring.
pub const MAX_KEYRING_FILE_LEN: u64 = 1024 * 1024;

/// Whether a keyring file that group or others may read is accepted.
///
/// Only reading is ever allowed: a keyring file that anyone but its owner
/// may write, a file owned by anyone but the sidecar's user or root, and a
/// directory on its path that others may write are refused whatever this
/// says (whoever can replace the file can inject keys).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyringPermissions {
    /// Refuse the file unless only its owner may read it (the default, as ssh
    /// does for private keys).
    OwnerOnly,
    /// Accept a file that group or others may read (on the command lines
    /// `--allow-insecure-keyring-permissions`; in Rust
    /// [`KeyringFileOptions::allow_group_or_other_readable`]) (a Kubernetes Secret's default mode 0644, an
    /// `fsGroup`'s 0440). Writing and ownership are still checked.
    AllowGroupOrOtherReadable,
}

/// A keyring file that was read and validated.
pub struct LoadedKeyringFile {
    /// The keyring.
    pub keyring: Keyring,
    /// What the keyring was built from: the file's bytes, then the text of
    /// every secret it names (`secret_file`, `secret_env`), each preceded by
    /// its length, in the order the keys name them. Comparing it tells a real
    /// change, of the file or of any secret it names, from a touch: a reload
    /// applies a rotated `secret_file` whose keyring text stayed the same.
    /// Zeroized on drop: secrets are in it.
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
    /// The path does not lead to a regular file (a FIFO, a device, a
    /// directory), or the file is larger than [`MAX_KEYRING_FILE_LEN`].
    NotAKeyringFile {
        /// The file.
        path: PathBuf,
        /// What it is instead.
        what: &'static str,
    },
    /// Group or others may read the file, and that was not allowed; or
    /// they may write it, which is never allowed.
    InsecurePermissions {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
        /// The option of the caller's interface that accepts a file others
        /// may read, named in the message ("or pass" an option starting
        /// with `--`, "or allow it with" any other): [`ALLOW_READABLE_CLI`]
        /// from [`load_keyring_file`], [`ALLOW_READABLE_RUST`] from
        /// [`KeyringFile`]; another interface names its own with
        /// [`KeyringLoadError::allowed_by`].
        allow: &'static str,
    },
    /// The file belongs to a user other than the sidecar's or root.
    InsecureOwner {
        /// The file.
        path: PathBuf,
        /// The file's owner.
        owner: u32,
        /// The sidecar's effective uid.
        uid: u32,
    },
    /// A directory on the way to the file, or the watched directory, lets
    /// another user replace the file.
    InsecureDirectory {
        /// The file.
        path: PathBuf,
        /// The directory.
        directory: PathBuf,
        /// What is wrong with it.
        problem: DirectoryProblem,
    },
    /// The file is not UTF-8 text.
    NotUtf8 {
        /// The file.
        path: PathBuf,
    },
    /// The file failed validation.
    Invalid {
        /// The file.
        path: PathBuf,
        /// The core's error, with line and key id.
        error: KeyringError,
    },
}

/// Why a directory lets another user replace the keyring.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DirectoryProblem {
    /// Owned by a user other than the sidecar's or root.
    Owner(u32),
    /// Group or others may write it, and it is not sticky.
    Writable(u32),
    /// Sticky and writable by others, and the entry followed in it belongs
    /// to another user (who could replace it).
    StickyEntry {
        /// The entry's name.
        entry: String,
        /// Its owner.
        owner: u32,
    },
    /// It (or the entry followed in it) changed while it was being checked.
    Unchecked,
}

impl fmt::Display for KeyringLoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyringLoadError::Io { path, error } => match error.kind() {
                // The next step, not only the OS's words (issue 40 item 9).
                std::io::ErrorKind::NotFound => write!(
                    f,
                    "keyring {}: there is no such file (make one with `reqstate keys new \
                     --keyring {}`, or name the right file)",
                    path.display(),
                    path.display()
                ),
                std::io::ErrorKind::PermissionDenied => write!(
                    f,
                    "keyring {}: permission denied: this process's user cannot open it (run as \
                     its owner, or give this user read access to it and its directories)",
                    path.display()
                ),
                _ => write!(f, "keyring {}: {error}", path.display()),
            },
            KeyringLoadError::NotAKeyringFile { path, what } => {
                write!(f, "keyring {}: {what}", path.display())
            }
            KeyringLoadError::InsecurePermissions { path, mode, allow } if mode & 0o022 != 0 => {
                write!(
                    f,
                    "keyring {}: mode {:04o} lets group or others write it (and so inject keys); \
                     run `chmod 600 {}` ({allow} does not allow this)",
                    path.display(),
                    mode & 0o7777,
                    path.display()
                )
            }
            KeyringLoadError::InsecurePermissions { path, mode, allow } => {
                let how = if allow.starts_with("--") {
                    "pass"
                } else {
                    "allow it with"
                };
                write!(
                    f,
                    "keyring {}: mode {:04o} lets group or others read it; \
                     run `chmod 600 {}` (or {how} {allow})",
                    path.display(),
                    mode & 0o7777,
                    path.display()
                )
            }
            KeyringLoadError::InsecureOwner { path, owner, uid } => write!(
                f,
                "keyring {}: owned by uid {owner}, not by this process's user (uid {uid}) or root; \
                 whoever owns it can inject keys. Run `chown {uid} {}`",
                path.display(),
                path.display()
            ),
            KeyringLoadError::InsecureDirectory {
                path,
                directory,
                problem,
            } => {
                write!(
                    f,
                    "keyring {}: directory {} ",
                    path.display(),
                    directory.display()
                )?;
                match problem {
                    DirectoryProblem::Owner(owner) => write!(
                        f,
                        "is owned by uid {owner}, not by this process's user or root; \
                         its owner can replace the keyring"
                    ),
                    DirectoryProblem::Writable(mode) => write!(
                        f,
                        "has mode {:04o}: group or others can replace the keyring in it; \
                         run `chmod go-w {}`",
                        mode & 0o7777,
                        directory.display()
                    ),
                    DirectoryProblem::StickyEntry { entry, owner } => write!(
                        f,
                        "is writable by others (sticky), and its entry {entry:?} belongs to \
                         uid {owner}, who can replace it"
                    ),
                    DirectoryProblem::Unchecked => f.write_str(
                        "changed while it was being checked; the next reload checks it again",
                    ),
                }
            }
            KeyringLoadError::NotUtf8 { path } => {
                write!(f, "keyring {}: not UTF-8 text", path.display())
            }
            KeyringLoadError::Invalid { path, error } => {
                write!(f, "keyring {}: invalid keyring: {error}", path.display())
            }
        }
    }
}

impl std::error::Error for KeyringLoadError {}

/// The sidecar's effective uid: the owner a keyring and its directories may
/// have, besides root.
fn effective_uid() -> u32 {
    nix::unistd::geteuid().as_raw()
}

fn trusted_owner(owner: u32, uid: u32) -> bool {
    owner == uid || owner == 0
}

/// Checks one directory on the keyring's path, as ssh does for the
/// directories above `authorized_keys`: owned by the sidecar's user or
/// root, and not writable by group or others, unless it is sticky (`/tmp`,
/// a Kubernetes Secret volume's tmpfs: 1777), where others cannot replace
/// an entry they do not own, so `entry` (the name followed in it) must be
/// owned by the sidecar's user or root.
fn check_directory(directory: &Path, entry: &OsStr, uid: u32) -> Result<(), DirectoryProblem> {
    let Ok(meta) = std::fs::metadata(directory) else {
        return Err(DirectoryProblem::Unchecked);
    };
    if !trusted_owner(meta.uid(), uid) {
        return Err(DirectoryProblem::Owner(meta.uid()));
    }
    let mode = meta.permissions().mode();
    if mode & 0o022 == 0 {
        return Ok(());
    }
    if mode & 0o1000 == 0 {
        return Err(DirectoryProblem::Writable(mode));
    }
    let Ok(entry_owner) = std::fs::symlink_metadata(directory.join(entry)).map(|m| m.uid()) else {
        return Err(DirectoryProblem::Unchecked);
    };
    if trusted_owner(entry_owner, uid) {
        Ok(())
    } else {
        Err(DirectoryProblem::StickyEntry {
            entry: entry.to_string_lossy().into_owned(),
            owner: entry_owner,
        })
    }
}

/// Checks every directory from `start` (whose entry `entry` is followed) up
/// to `/`. `start` must be canonical.
fn check_ancestors(
    start: &Path,
    entry: &OsStr,
    uid: u32,
) -> Result<(), (PathBuf, DirectoryProblem)> {
    let mut directory = Some(start);
    let mut entry = entry.to_os_string();
    while let Some(dir) = directory {
        check_directory(dir, &entry, uid).map_err(|p| (dir.to_path_buf(), p))?;
        entry = dir.file_name().map(OsStr::to_os_string).unwrap_or_default();
        directory = dir.parent();
    }
    Ok(())
}

/// The type, ownership and mode checks of an opened keyring file (its
/// `fstat`); its length is checked against the caller's limit by
/// [`open_protected`].
fn check_file(
    path: &Path,
    meta: &Metadata,
    permissions: KeyringPermissions,
    uid: u32,
) -> Result<(), KeyringLoadError> {
    if !meta.is_file() {
        return Err(KeyringLoadError::NotAKeyringFile {
            path: path.to_path_buf(),
            what: "not a regular file",
        });
    }
    if !trusted_owner(meta.uid(), uid) {
        return Err(KeyringLoadError::InsecureOwner {
            path: path.to_path_buf(),
            owner: meta.uid(),
            uid,
        });
    }
    let mode = meta.permissions().mode();
    let readable_by_others = mode & 0o077 != 0;
    let writable_by_others = mode & 0o022 != 0;
    if writable_by_others || (readable_by_others && permissions == KeyringPermissions::OwnerOnly) {
        return Err(KeyringLoadError::InsecurePermissions {
            path: path.to_path_buf(),
            mode,
            allow: ALLOW_READABLE_CLI,
        });
    }
    Ok(())
}

/// The directories a keyring at `path` depends on: every directory from
/// the resolved file up to `/`, and the directory that is watched (the
/// path's own parent, where a Kubernetes `..data` symlink or an editor's
/// rename replaces it) with its ancestors. `opened` is the opened file's
/// `fstat`: a resolved path that no longer leads to it is
/// [`PathCheck::Replaced`], and its directories are not checked (they may
/// not be the opened file's).
fn check_directories(
    path: &Path,
    opened: &Metadata,
    uid: u32,
) -> Result<PathCheck, KeyringLoadError> {
    let io_error = |error| KeyringLoadError::Io {
        path: path.to_path_buf(),
        error,
    };
    let insecure = |(directory, problem)| KeyringLoadError::InsecureDirectory {
        path: path.to_path_buf(),
        directory,
        problem,
    };
    let resolved = std::fs::canonicalize(path).map_err(io_error)?;
    let now = std::fs::metadata(&resolved).map_err(io_error)?;
    if (now.dev(), now.ino()) != (opened.dev(), opened.ino()) {
        return Ok(PathCheck::Replaced);
    }
    let (Some(parent), Some(name)) = (resolved.parent(), resolved.file_name()) else {
        return Err(KeyringLoadError::NotAKeyringFile {
            path: path.to_path_buf(),
            what: "not a file path",
        });
    };
    check_ancestors(parent, name, uid).map_err(insecure)?;
    let watched = watched_directory(path);
    let watched = std::fs::canonicalize(&watched).map_err(io_error)?;
    let entry = path.file_name().unwrap_or(name);
    if watched != parent {
        check_ancestors(&watched, entry, uid).map_err(insecure)?;
    } else if entry != name {
        // A symlink next to its target: the link itself is an entry others
        // could replace in a sticky directory.
        check_directory(&watched, entry, uid).map_err(|p| insecure((watched.clone(), p)))?;
    }
    Ok(PathCheck::Safe)
}

/// What [`check_directories`] found of a path that no other user can replace.
enum PathCheck {
    /// The path still leads to the opened file.
    Safe,
    /// The path now leads to another file: it was replaced (renamed over,
    /// a Kubernetes `..data` symlink swapped) after it was opened.
    Replaced,
}

/// How many times a file replaced between its open and the check of its
/// path is opened again before the read is refused. A rotation renames a
/// new keyring over the old one once; a file replaced this many times in a
/// row within microseconds is being churned, and the next reload retries.
const REOPENS: usize = 8;

/// Opens `path` without blocking and following symlinks, and checks the
/// opened file: a regular file of at most `max_len` bytes (`too_long` says
/// what a longer one is not), then [`check_file`] and [`check_directories`].
/// A file replaced between the open and the check of its path was being
/// rotated, which is not an error: the new file is opened and checked in
/// its turn, up to [`REOPENS`] times.
fn open_protected(
    path: &Path,
    permissions: KeyringPermissions,
    uid: u32,
    max_len: u64,
    too_long: &'static str,
) -> Result<(std::fs::File, Metadata), KeyringLoadError> {
    let io_error = |error| KeyringLoadError::Io {
        path: path.to_path_buf(),
        error,
    };
    for _ in 0..=REOPENS {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_NOCTTY)
            .open(path)
            .map_err(io_error)?;
        let meta = file.metadata().map_err(io_error)?;
        if meta.is_file() && meta.len() > max_len {
            return Err(KeyringLoadError::NotAKeyringFile {
                path: path.to_path_buf(),
                what: too_long,
            });
        }
        check_file(path, &meta, permissions, uid)?;
        match check_directories(path, &meta, uid)? {
            PathCheck::Safe => return Ok((file, meta)),
            PathCheck::Replaced => continue,
        }
    }
    Err(io_error(std::io::Error::other(format!(
        "the file was replaced while it was being read, {} times in a row; \
         the next reload reads it again",
        REOPENS + 1
    ))))
}

/// The directory to watch for a keyring path: its parent, or `.` for a bare
/// file name.
pub fn watched_directory(path: &Path) -> PathBuf {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Opens, checks and parses a keyring file.
///
/// The file is opened without blocking (a FIFO put in its place must not
/// hang a reload) and following symlinks (Kubernetes Secret volumes are
/// symlinks), and the opened file itself is checked: a regular file of at
/// most [`MAX_KEYRING_FILE_LEN`] bytes, owned by the sidecar's user or root,
/// not writable by group or others, and (unless `permissions` allows it)
/// not readable by them. Then every directory from the resolved file up to
/// `/`, and the watched directory, must be owned by the sidecar's user or
/// root and not writable by group or others (sticky directories excepted
/// when the entry followed is owned by the sidecar's user or root).
pub fn load_keyring_file(
    path: &Path,
    permissions: KeyringPermissions,
) -> Result<LoadedKeyringFile, KeyringLoadError> {
    load_as(path, permissions, ALLOW_READABLE_CLI)
}

/// [`load_keyring_file`], its refusals of a readable keyring or secret file
/// naming `allow` as the option that accepts one.
pub(crate) fn load_as(
    path: &Path,
    permissions: KeyringPermissions,
    allow: &'static str,
) -> Result<LoadedKeyringFile, KeyringLoadError> {
    let contents = read_protected_file(path, permissions, MAX_KEYRING_FILE_LEN)
        .map_err(|e| e.allowed_by(allow))?;
    let text = std::str::from_utf8(&contents).map_err(|_| KeyringLoadError::NotUtf8 {
        path: path.to_path_buf(),
    })?;
    let secrets = Recording {
        source: KeyringSecrets::new(&watched_directory(path), permissions).allowed_by(allow),
        resolved: std::cell::RefCell::new(Vec::new()),
    };
    let keyring =
        Keyring::from_toml_with(text, &secrets).map_err(|error| KeyringLoadError::Invalid {
            path: path.to_path_buf(),
            error,
        })?;
    let resolved = secrets.resolved.into_inner();
    // Sized once, so that no reallocation leaves a copy of a secret behind.
    let len = contents.len() + resolved.iter().map(|s| 8 + s.len()).sum::<usize>();
    let mut all = Zeroizing::new(Vec::with_capacity(len));
    all.extend_from_slice(&contents);
    for secret in &resolved {
        all.extend_from_slice(&(secret.len() as u64).to_be_bytes());
        all.extend_from_slice(secret.as_bytes());
    }
    Ok(LoadedKeyringFile {
        keyring,
        contents: all,
    })
}

/// A [`SecretSource`] that keeps what it resolved, for
/// [`LoadedKeyringFile::contents`].
struct Recording {
    source: KeyringSecrets,
    resolved: std::cell::RefCell<Vec<Zeroizing<String>>>,
}

impl SecretSource for Recording {
    fn resolve(&self, reference: SecretRef<'_>) -> Result<Zeroizing<String>, String> {
        let secret = self.source.resolve(reference)?;
        self.resolved.borrow_mut().push(secret.clone());
        Ok(secret)
    }
}

/// Reads a file that grants whoever can write it power over the sidecar
/// (a keyring, the bearer tokens of `--auth-token-file`) with the keyring
/// file's checks: opened without blocking and following symlinks, a regular
/// file of at most `max_len` bytes, owned by this process's user or root,
/// never writable by group or others and (unless `permissions` allows it)
/// not readable by them, on a path no other user can replace (every
/// directory up to `/`, as [`load_keyring_file`] says). Zeroized on drop.
pub fn read_protected_file(
    path: &Path,
    permissions: KeyringPermissions,
    max_len: u64,
) -> Result<Zeroizing<Vec<u8>>, KeyringLoadError> {
    let io_error = |error| KeyringLoadError::Io {
        path: path.to_path_buf(),
        error,
    };
    let too_long = if max_len == MAX_KEYRING_FILE_LEN {
        "larger than 1 MiB; not a keyring"
    } else {
        "larger than its limit"
    };
    let (file, meta) = open_protected(path, permissions, effective_uid(), max_len, too_long)?;
    let mut contents = Zeroizing::new(Vec::with_capacity(meta.len().min(max_len) as usize + 1));
    file.take(max_len + 1)
        .read_to_end(&mut contents)
        .map_err(io_error)?;
    if contents.len() as u64 > max_len {
        return Err(KeyringLoadError::NotAKeyringFile {
            path: path.to_path_buf(),
            what: too_long,
        });
    }
    Ok(contents)
}

/// Longest `secret_file` read, in bytes: a 1024-byte secret is 1368 base64
/// characters; anything much longer is not a secret file.
pub const MAX_SECRET_FILE_LEN: u64 = 4096;

/// Resolves a keyring's `secret_file` and `secret_env` references: the
/// sidecar's [`SecretSource`], used by every keyring it loads.
///
/// A `secret_file` gets the keyring file's own checks: opened without
/// blocking and following symlinks, a regular file of at most
/// [`MAX_SECRET_FILE_LEN`] bytes, owned by the sidecar's user or root, never
/// writable by others and (unless `permissions` allows it) not readable by
/// them, on a path no other user can replace. A relative path is resolved
/// against the keyring file's directory, so a keyring and its secrets move
/// together (a Kubernetes Secret volume). A `secret_env` is read from the
/// process environment. Errors never repeat the path or the variable's name
/// (a secret put there by mistake would be); the core adds the line and key id.
#[derive(Debug, Clone)]
pub struct KeyringSecrets {
    dir: PathBuf,
    permissions: KeyringPermissions,
    allow: &'static str,
}

impl KeyringSecrets {
    /// A source for a keyring file in `keyring_dir`, checking secret files
    /// as `permissions` says.
    pub fn new(keyring_dir: &Path, permissions: KeyringPermissions) -> Self {
        KeyringSecrets {
            dir: keyring_dir.to_path_buf(),
            permissions,
            allow: ALLOW_READABLE_CLI,
        }
    }

    /// The same source, its refusals of a readable secret file naming
    /// `allow` as the option that accepts one (as
    /// [`KeyringLoadError::allowed_by`] does; [`ALLOW_READABLE_CLI`] by
    /// default).
    pub fn allowed_by(mut self, allow: &'static str) -> Self {
        self.allow = allow;
        self
    }

    fn read_file(&self, path: &str) -> Result<Zeroizing<String>, String> {
        let resolved = self.dir.join(path);
        let (file, _) = open_protected(
            &resolved,
            self.permissions,
            effective_uid(),
            MAX_SECRET_FILE_LEN,
            "longer than 4096 bytes; not a secret file",
        )
        .map_err(|e| pathless(&e.allowed_by(self.allow)))?;
        let mut bytes = Zeroizing::new(Vec::new());
        file.take(MAX_SECRET_FILE_LEN + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| format!("cannot read: {}", io_reason(&e)))?;
        if bytes.len() as u64 > MAX_SECRET_FILE_LEN {
            return Err("cannot read: longer than 4096 bytes; not a secret file".into());
        }
        let text = std::str::from_utf8(&bytes).map_err(|_| "not base64 text".to_string())?;
        Ok(Zeroizing::new(text.to_owned()))
    }
}

impl SecretSource for KeyringSecrets {
    fn resolve(&self, reference: SecretRef<'_>) -> Result<Zeroizing<String>, String> {
        match reference {
            SecretRef::File(path) => self.read_file(path),
            SecretRef::Env(name) => std::env::var(name).map(Zeroizing::new).map_err(|_| {
                "the environment variable it names is not set or not UTF-8 \
                 (the name is not shown: it could be key material)"
                    .to_string()
            }),
            _ => Err("a kind of secret reference this sidecar does not know".into()),
        }
    }
}

/// An I/O error without a path: the OS's description of its error code, or
/// the message of an error made here (which names no path).
fn io_reason(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(code) => nix::errno::Errno::from_raw(code).desc().to_string(),
        None => e.to_string(),
    }
}

/// A [`KeyringLoadError`] of a secret file, described without its path.
fn pathless(e: &KeyringLoadError) -> String {
    e.describe_as("secret file")
}

impl KeyringLoadError {
    /// The same error, its message naming `allow` as the way to accept a
    /// keyring file others may read (an option of the caller's interface:
    /// `"allow_insecure_permissions=True"`). Only
    /// [`KeyringLoadError::InsecurePermissions`] names one; other errors are
    /// returned as they are.
    pub fn allowed_by(self, allow: &'static str) -> Self {
        match self {
            KeyringLoadError::InsecurePermissions { path, mode, .. } => {
                KeyringLoadError::InsecurePermissions { path, mode, allow }
            }
            other => other,
        }
    }

    /// The file the error is about.
    pub fn path(&self) -> &Path {
        match self {
            KeyringLoadError::Io { path, .. }
            | KeyringLoadError::NotAKeyringFile { path, .. }
            | KeyringLoadError::InsecurePermissions { path, .. }
            | KeyringLoadError::InsecureOwner { path, .. }
            | KeyringLoadError::InsecureDirectory { path, .. }
            | KeyringLoadError::NotUtf8 { path }
            | KeyringLoadError::Invalid { path, .. } => path,
        }
    }

    /// What went wrong, for a file that is not the keyring itself (`file`
    /// names its kind: "secret file", "bearer token file"), without its path
    /// (a secret file's path could be key material: the caller adds what it
    /// may show).
    pub fn describe_as(&self, file: &str) -> String {
        let e = self;
        match e {
            KeyringLoadError::Io { error, .. } => format!("cannot read: {}", io_reason(error)),
            KeyringLoadError::NotAKeyringFile { what, .. } => format!("cannot read: {what}"),
            KeyringLoadError::InsecurePermissions { mode, .. } if mode & 0o022 != 0 => format!(
                "mode {:04o} lets other users write the {file}; never accepted",
                mode & 0o7777
            ),
            KeyringLoadError::InsecurePermissions { mode, allow, .. } => format!(
                "mode {:04o} lets other users read the {file}; `chmod 600` it, or allow \
             readable keyring files ({}{allow}) if a volume's mode is fixed",
                mode & 0o7777,
                if *allow == ALLOW_READABLE_CLI {
                    "reqstate serve "
                } else {
                    ""
                }
            ),
            KeyringLoadError::InsecureOwner { owner, uid, .. } => {
                format!(
                    "the {file} belongs to uid {owner}, not to this process's uid {uid} or root"
                )
            }
            // Neither the directory nor the entry is named: both are parts of the path.
            KeyringLoadError::InsecureDirectory { problem, .. } => match problem {
                DirectoryProblem::Owner(owner) => format!(
                    "a directory on the {file}'s path belongs to uid {owner}, \
                 not to this process's user or root"
                ),
                DirectoryProblem::Writable(mode) => format!(
                    "a directory on the {file}'s path has mode {:04o}: \
                 other users can replace the file",
                    mode & 0o7777
                ),
                DirectoryProblem::StickyEntry { owner, .. } => format!(
                    "a sticky directory on the {file}'s path holds an entry of uid {owner}, \
                 who can replace it"
                ),
                DirectoryProblem::Unchecked => {
                    format!("a directory on the {file}'s path changed while it was being checked")
                }
            },
            KeyringLoadError::NotUtf8 { .. } => "not UTF-8 text".into(),
            KeyringLoadError::Invalid { error, .. } => error.to_string(),
        }
    }
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

    /// A keyring renamed over while it is being loaded is a rotation in
    /// progress, not an error: the load opens the new file (CI once saw a
    /// reload refused with "the file was replaced while it was being read").
    #[test]
    fn a_file_renamed_over_during_loads_is_read_not_refused()
    -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700))?;
        let path = dir.path().join("keyring.toml");
        let write = |to: &Path| -> std::io::Result<()> {
            std::fs::write(to, GOOD)?;
            std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o600))
        };
        write(&path)?;
        let done = std::sync::atomic::AtomicBool::new(false);
        let loads = std::thread::scope(|scope| -> Result<u32, Box<dyn std::error::Error>> {
            let loader = scope.spawn(|| -> Result<u32, String> {
                let mut loads = 0;
                while !done.load(std::sync::atomic::Ordering::Relaxed) {
                    load_keyring_file(&path, KeyringPermissions::OwnerOnly)
                        .map_err(|e| format!("load {loads}: {e}"))?;
                    loads += 1;
                }
                Ok(loads)
            });
            let next = dir.path().join("keyring.toml.new");
            for _ in 0..2000 {
                write(&next)?;
                std::fs::rename(&next, &path)?;
                std::thread::sleep(std::time::Duration::from_micros(100));
            }
            done.store(true, std::sync::atomic::Ordering::Relaxed);
            Ok(loader.join().map_err(|_| "the loader panicked")??)
        })?;
        assert!(loads > 0);
        Ok(())
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
    fn writable_by_others_is_refused_even_when_reading_is_allowed()
    -> Result<(), Box<dyn std::error::Error>> {
        for mode in [0o620, 0o602, 0o666] {
            let file = write_keyring(mode, GOOD)?;
            let err = load_keyring_file(file.path(), KeyringPermissions::AllowGroupOrOtherReadable)
                .err()
                .ok_or("a keyring others may write was loaded")?;
            assert!(matches!(err, KeyringLoadError::InsecurePermissions { .. }));
            assert!(err.to_string().contains("write"), "{err}");
        }
        Ok(())
    }

    #[test]
    fn fifos_and_huge_files_are_not_read() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo")
            .arg("-m")
            .arg("600")
            .arg(&fifo)
            .status()?;
        assert!(made.success());
        // Returns at once (no writer will ever come), refused.
        let err = load_keyring_file(&fifo, KeyringPermissions::OwnerOnly)
            .err()
            .ok_or("a FIFO was loaded")?;
        assert!(err.to_string().contains("not a regular file"), "{err}");
        let big = write_keyring(0o600, &"#".repeat(2 * 1024 * 1024))?;
        let err = load_keyring_file(big.path(), KeyringPermissions::OwnerOnly)
            .err()
            .ok_or("a 2 MiB file was loaded")?;
        assert!(err.to_string().contains("larger than 1 MiB"), "{err}");
        Ok(())
    }

    /// A reload must see a rotated `secret_file` even when the keyring text
    /// is unchanged (security review round 3, finding 6).
    #[test]
    fn contents_change_when_a_named_secret_changes() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700))?;
        let secret = dir.path().join("secret");
        let keyring = dir.path().join("keyring.toml");
        let write = |path: &Path, text: &str| -> std::io::Result<()> {
            std::fs::write(path, text)?;
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        };
        write(&secret, "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=")?;
        write(
            &keyring,
            "[[key]]\nid = 1\nstatus = \"primary\"\nsecret_file = \"secret\"\n",
        )?;
        let first = load_keyring_file(&keyring, KeyringPermissions::OwnerOnly)?;
        let again = load_keyring_file(&keyring, KeyringPermissions::OwnerOnly)?;
        assert_eq!(first.contents, again.contents, "nothing changed");
        write(&secret, "ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8=")?;
        let rotated = load_keyring_file(&keyring, KeyringPermissions::OwnerOnly)?;
        assert_ne!(
            first.contents, rotated.contents,
            "a changed secret_file left the contents as they were"
        );
        assert!(rotated.contents.starts_with(&std::fs::read(&keyring)?));
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
