//! A keyring file in service: loaded with the checks, reloaded when the
//! program asks, the last good keyring kept when the file goes bad.

use std::fmt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use arc_swap::ArcSwap;
use reqstate::{Codec, Policy, Zeroizing};

use crate::{ALLOW_READABLE_RUST, KeyringLoadError, KeyringPermissions, load_as};

/// How to open a [`KeyringFile`]: its permission rule and the policy of the
/// codec it serves. `KeyringFile::options()` starts from the defaults:
/// owner-only files, [`Policy::new`].
#[derive(Debug, Clone)]
pub struct KeyringFileOptions {
    permissions: KeyringPermissions,
    policy: Policy,
}

impl Default for KeyringFileOptions {
    fn default() -> Self {
        KeyringFileOptions {
            permissions: KeyringPermissions::OwnerOnly,
            policy: Policy::new(),
        }
    }
}

impl KeyringFileOptions {
    /// Accept a keyring file (and secret files) that group or others may
    /// read: a Kubernetes Secret's default `0644`, an `fsGroup`'s `0440`.
    /// The Rust form of `--allow-insecure-keyring-permissions`; writing and
    /// ownership are checked whatever this says.
    pub fn allow_group_or_other_readable(mut self) -> Self {
        self.permissions = KeyringPermissions::AllowGroupOrOtherReadable;
        self
    }

    /// The permission rule, as a value.
    pub fn permissions(mut self, permissions: KeyringPermissions) -> Self {
        self.permissions = permissions;
        self
    }

    /// The codec's policy (longest lifetime, clock leeway, token length).
    /// Every load checks the keyring's schedule against it
    /// ([`reqstate::Keyring::check_schedule`]): a `retire_at` that would
    /// refuse live tokens is refused like any invalid file.
    pub fn policy(mut self, policy: Policy) -> Self {
        self.policy = policy;
        self
    }

    /// Loads the keyring file at `path` with [`load_keyring_file`](crate::load_keyring_file)'s checks,
    /// and the codec around it ([`Codec::new`] with the policy).
    pub fn open(self, path: impl AsRef<Path>) -> Result<KeyringFile, KeyringLoadError> {
        let path = path.as_ref().to_path_buf();
        let stamp = Stamp::of(&path);
        let loaded = load_as(&path, self.permissions, ALLOW_READABLE_RUST)?;
        let codec = Codec::new(loaded.keyring).with_policy(self.policy);
        check_schedule(&path, &codec)?;
        Ok(KeyringFile {
            path,
            permissions: self.permissions,
            current: ArcSwap::from_pointee(codec),
            state: Mutex::new(State {
                stamp,
                last_good: loaded.contents,
                refused: None,
                last_error: None,
                generation: 1,
            }),
        })
    }
}

/// What a reload did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reload {
    /// A new keyring is in service: [`KeyringFile::current`] returns it
    /// from now on.
    Applied {
        /// 1 for the keyring loaded by `open`, one more per applied reload.
        generation: u64,
    },
    /// The keyring in service stays: the file did not change, or changed
    /// to the same keyring (a touch, a rewrite of the same bytes), or it is
    /// a refused version already reported (see [`KeyringFile::last_error`]).
    Unchanged,
}

/// A keyring file in service, for a Rust program that mints and verifies
/// with it (an MCP server): loaded with the checks of
/// [`load_keyring_file`](crate::load_keyring_file), served as a [`Codec`], reloaded when the program
/// asks.
///
/// - [`current`](KeyringFile::current) is cheap (an atomic load, no lock, no
///   I/O): call it per request, and mint and verify with the codec it gives.
///   A request keeps the codec it took; a reload never changes it halfway.
/// - [`reload_if_changed`](KeyringFile::reload_if_changed) costs one `stat`
///   when nothing changed: call it per request, or from a timer the program
///   owns. It reads the file again when the file's identity changed (device,
///   inode, size, modification or change time: a write, a rename over it, a
///   Kubernetes `..data` swap, a `chmod`).
/// - [`reload`](KeyringFile::reload) always reads the file again (what a
///   `SIGHUP` handler calls): the way to apply a changed `secret_file` or
///   environment variable, which no `stat` of the keyring sees.
///
/// A file that fails a check or validation never replaces the keyring in
/// service: the reload returns the error, the last good keyring stays, and
/// [`last_error`](KeyringFile::last_error) says why until a good file is
/// loaded. `reload_if_changed` returns a refused version's error once, then
/// [`Reload::Unchanged`] until the file changes again, so a program that
/// logs every error it gets logs each bad version once. This crate logs
/// nothing.
///
/// There is no watcher thread: the program decides when to look, which
/// suits a library (no runtime, no thread to stop). The `reqstate` sidecar
/// watches the directory with `notify` and reloads on `SIGHUP` instead.
/// A reload reads the file on the calling thread (a few hundred bytes, one
/// key derivation per key); where the file lives on a file system that can
/// hang (a network mount), call the reloads from a thread of their own
/// rather than from request handlers.
///
/// ```
/// use std::time::Duration;
/// use reqstate::{Algorithm, Binding};
/// use reqstate_keyring_file::{KeyringFile, Reload, create_new};
///
/// # let dir = tempfile::tempdir()?;
/// # let path = dir.path().join("keyring.toml");
/// # create_new(&path, Algorithm::XChaCha20Poly1305)?;
/// let keys = KeyringFile::open(&path)?;
///
/// // Per request: look for a new file (one stat), then use the codec in service.
/// if let Err(error) = keys.reload_if_changed() {
///     eprintln!("{error}; still serving the previous keyring");
/// }
/// let codec = keys.current();
/// let context = reqstate::call_context(&reqstate::Call {
///     principal: "user-42",
///     audience: "counter-server",
///     method: "tools/call",
///     arguments: reqstate::Arguments::Json(r#"{"current":10}"#),
/// })?;
/// let binding = Binding::new("increase-counter", &context)?;
/// let minted = codec.mint(binding, "confirm", &5u32, Duration::from_secs(600))?;
/// assert_eq!(codec.verify::<u32>(&minted.token, binding.step("confirm"))?.state, 5);
/// assert_eq!(keys.reload_if_changed()?, Reload::Unchanged);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct KeyringFile {
    path: PathBuf,
    permissions: KeyringPermissions,
    current: ArcSwap<Codec>,
    state: Mutex<State>,
}

/// What reloads remember; one reload at a time holds it.
struct State {
    /// The identity of the file the keyring in service was read from (as
    /// seen just before reading it); `None` if it could not be seen.
    stamp: Option<Stamp>,
    /// [`crate::LoadedKeyringFile::contents`] of the keyring in service.
    last_good: Zeroizing<Vec<u8>>,
    /// The identity of the last refused version, reported once.
    refused: Option<Option<Stamp>>,
    /// Why the last reload was refused, until one succeeds.
    last_error: Option<String>,
    generation: u64,
}

/// What tells one version of the file from another without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    /// The file at `path`, after symlinks; `None` when it cannot be seen.
    fn of(path: &Path) -> Option<Stamp> {
        let meta = std::fs::metadata(path).ok()?;
        Some(Stamp {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        })
    }
}

fn check_schedule(path: &Path, codec: &Codec) -> Result<(), KeyringLoadError> {
    codec
        .keyring()
        .check_schedule(codec.policy())
        .map_err(|error| KeyringLoadError::Invalid {
            path: path.to_path_buf(),
            error,
        })
}

impl KeyringFile {
    /// Loads the keyring file at `path` with the default options: a file
    /// only its owner may read, [`Policy::new`]. A file group or others may
    /// read is refused with an error naming
    /// [`KeyringFileOptions::allow_group_or_other_readable`].
    pub fn open(path: impl AsRef<Path>) -> Result<KeyringFile, KeyringLoadError> {
        KeyringFileOptions::default().open(path)
    }

    /// Options to open a keyring file with: `KeyringFile::options()
    /// .allow_group_or_other_readable().policy(policy).open(path)`.
    pub fn options() -> KeyringFileOptions {
        KeyringFileOptions::default()
    }

    /// The codec around the keyring in service. Cheap (an atomic load): take
    /// it per request.
    pub fn current(&self) -> Arc<Codec> {
        self.current.load_full()
    }

    /// The file's path, as given to `open`.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// 1 for the keyring loaded by `open`, one more per applied reload.
    pub fn generation(&self) -> u64 {
        self.lock().generation
    }

    /// Why the last reload was refused (the error's message, which never
    /// holds key material), or `None` when the file in service is the file
    /// on disk as last read.
    pub fn last_error(&self) -> Option<String> {
        self.lock().last_error.clone()
    }

    /// Reads the file again if its identity changed since it was last read
    /// (one `stat` otherwise), and puts its keyring in service if it is
    /// valid and different. A version of the file already refused is not
    /// read again: [`Reload::Unchanged`], with
    /// [`last_error`](KeyringFile::last_error) still saying why.
    ///
    /// Made for every request: while another thread is reloading, it
    /// returns [`Reload::Unchanged`] at once instead of waiting for that
    /// thread's read (the next call looks again).
    pub fn reload_if_changed(&self) -> Result<Reload, KeyringLoadError> {
        let mut state = match self.state.try_lock() {
            Ok(state) => state,
            Err(std::sync::TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return Ok(Reload::Unchanged),
        };
        let stamp = Stamp::of(&self.path);
        if stamp.is_some() && stamp == state.stamp && state.last_error.is_none() {
            return Ok(Reload::Unchanged);
        }
        if state.refused == Some(stamp) {
            return Ok(Reload::Unchanged);
        }
        self.reload_locked(&mut state, stamp)
    }

    /// Reads the file again whatever its identity (after a `secret_file` or
    /// an environment variable it names changed, or on `SIGHUP`), and puts
    /// its keyring in service if it is valid and different.
    pub fn reload(&self) -> Result<Reload, KeyringLoadError> {
        let mut state = self.lock();
        let stamp = Stamp::of(&self.path);
        self.reload_locked(&mut state, stamp)
    }

    fn reload_locked(
        &self,
        state: &mut State,
        stamp: Option<Stamp>,
    ) -> Result<Reload, KeyringLoadError> {
        let loaded =
            load_as(&self.path, self.permissions, ALLOW_READABLE_RUST).and_then(|loaded| {
                if loaded.contents == state.last_good {
                    return Ok(None);
                }
                let codec = self.current.load().with_keyring(loaded.keyring);
                check_schedule(&self.path, &codec)?;
                Ok(Some((codec, loaded.contents)))
            });
        match loaded {
            Err(error) => {
                state.refused = Some(stamp);
                state.last_error = Some(error.to_string());
                Err(error)
            }
            Ok(found) => {
                state.stamp = stamp;
                state.refused = None;
                state.last_error = None;
                let Some((codec, contents)) = found else {
                    return Ok(Reload::Unchanged);
                };
                self.current.store(Arc::new(codec));
                state.last_good = contents;
                state.generation += 1;
                Ok(Reload::Applied {
                    generation: state.generation,
                })
            }
        }
    }

    /// The reload state. A panic while it was held (none is expected: no
    /// code under it panics) leaves it consistent, so poisoning is ignored.
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl fmt::Debug for KeyringFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyringFile")
            .field("path", &self.path)
            .field("permissions", &self.permissions)
            .field("keyring", self.current.load().keyring())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{create_new, load_keyring_file, replace_keyring_file};
    use reqstate::{Algorithm, Binding, CallContext, Refusal};
    use std::os::unix::fs::PermissionsExt;
    use std::time::Duration;

    type TestResult = Result<(), Box<dyn std::error::Error>>;

    fn keyring_in_private_dir() -> Result<(tempfile::TempDir, PathBuf), Box<dyn std::error::Error>>
    {
        let dir = tempfile::tempdir()?;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700))?;
        let path = dir.path().join("keyring.toml");
        create_new(&path, Algorithm::XChaCha20Poly1305)?;
        Ok((dir, path))
    }

    fn chmod(path: &Path, mode: u32) -> std::io::Result<()> {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
    }

    /// The file with key `id` added as `status`, its secret fresh.
    fn with_key(path: &Path, id: u32, status: &str) -> Result<String, Box<dyn std::error::Error>> {
        with_key_text(&std::fs::read_to_string(path)?, id, status)
    }

    /// `text` with key `id` added as `status`, its secret fresh.
    fn with_key_text(
        text: &str,
        id: u32,
        status: &str,
    ) -> Result<String, Box<dyn std::error::Error>> {
        let secret = reqstate::Secret::generate(&reqstate::OsRandom::new())?;
        Ok(format!(
            "{text}\n[[key]]\nid = {id}\nstatus = \"{status}\"\nsecret = \"{}\"\n",
            &*secret.to_base64()
        ))
    }

    #[test]
    fn a_world_readable_file_is_refused_naming_the_rust_option() -> TestResult {
        let (_dir, path) = keyring_in_private_dir()?;
        chmod(&path, 0o644)?;
        let err = KeyringFile::open(&path)
            .err()
            .ok_or("a world-readable keyring was opened")?;
        let text = err.to_string();
        assert!(text.contains("0644"), "{text}");
        assert!(text.contains("allow_group_or_other_readable()"), "{text}");
        assert!(!text.contains("--allow"), "{text}");
        // Writing is never allowed, and the message says so with the same option.
        chmod(&path, 0o666)?;
        let err = KeyringFile::options()
            .allow_group_or_other_readable()
            .open(&path)
            .err()
            .ok_or("a world-writable keyring was opened")?;
        assert!(
            err.to_string().contains(
                "(`KeyringFile::options().allow_group_or_other_readable()` does not allow this)"
            ),
            "{err}"
        );
        chmod(&path, 0o644)?;
        let keys = KeyringFile::options()
            .allow_group_or_other_readable()
            .open(&path)?;
        assert_eq!(keys.current().keyring().len(), 1);
        // The command lines' loader keeps the command lines' option.
        let cli = load_keyring_file(&path, KeyringPermissions::OwnerOnly)
            .err()
            .ok_or("a world-readable keyring was loaded")?;
        assert!(
            cli.to_string()
                .contains("pass --allow-insecure-keyring-permissions"),
            "{cli}"
        );
        Ok(())
    }

    #[test]
    fn a_readable_secret_file_is_refused_naming_the_rust_option() -> TestResult {
        let (dir, path) = keyring_in_private_dir()?;
        let secret = dir.path().join("key-1");
        std::fs::write(&secret, "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n")?;
        chmod(&secret, 0o644)?;
        std::fs::write(
            &path,
            "[[key]]\nid = 1\nstatus = \"primary\"\nsecret_file = \"key-1\"\n",
        )?;
        let err = KeyringFile::open(&path)
            .err()
            .ok_or("a world-readable secret file was accepted")?;
        let text = err.to_string();
        assert!(text.contains("secret_file: mode 0644"), "{text}");
        assert!(text.contains("allow_group_or_other_readable()"), "{text}");
        assert!(!text.contains("reqstate serve"), "{text}");
        // The command lines' loader names their flag.
        let cli = load_keyring_file(&path, KeyringPermissions::OwnerOnly)
            .err()
            .ok_or("a world-readable secret file was accepted")?;
        assert!(
            cli.to_string()
                .contains("(reqstate serve --allow-insecure-keyring-permissions)"),
            "{cli}"
        );
        let keys = KeyringFile::options()
            .allow_group_or_other_readable()
            .open(&path)?;
        assert_eq!(keys.current().keyring().len(), 1);
        Ok(())
    }

    #[test]
    fn nothing_changed_reads_nothing_and_a_touch_applies_nothing() -> TestResult {
        let (_dir, path) = keyring_in_private_dir()?;
        let keys = KeyringFile::open(&path)?;
        let before = keys.current();
        assert_eq!(keys.reload_if_changed()?, Reload::Unchanged);
        // Same bytes, new inode: read, found equal, not applied.
        replace_keyring_file(&path, &std::fs::read_to_string(&path)?)?;
        assert_eq!(keys.reload_if_changed()?, Reload::Unchanged);
        assert_eq!(keys.reload()?, Reload::Unchanged);
        assert!(Arc::ptr_eq(&before, &keys.current()));
        assert_eq!(keys.generation(), 1);
        Ok(())
    }

    #[test]
    fn a_new_key_is_applied_and_old_tokens_follow_their_key() -> TestResult {
        let (_dir, path) = keyring_in_private_dir()?;
        let keys = KeyringFile::open(&path)?;
        let context = CallContext::from_bytes([7; reqstate::CALL_CONTEXT_LEN]);
        let binding = Binding::new("tool", &context)?;
        let old = keys
            .current()
            .mint(binding, "s", &1u8, Duration::from_secs(60))?;

        // Key 2 primary, key 1 active: old tokens verify, new ones use key 2.
        let text = with_key(&path, 2, "primary")?.replacen(
            "status = \"primary\"",
            "status = \"active\"",
            1,
        );
        replace_keyring_file(&path, &text)?;
        assert_eq!(keys.reload_if_changed()?, Reload::Applied { generation: 2 });
        let codec = keys.current();
        assert_eq!(codec.keyring().primary().id().get(), 2);
        codec.verify::<u8>(&old.token, binding.step("s"))?;
        let new = codec.mint(binding, "s", &2u8, Duration::from_secs(60))?;
        assert_eq!(
            reqstate::UntrustedToken::parse(&new.token, &Policy::new())?
                .key_id()
                .get(),
            2
        );

        // Key 1 retired: its token is refused as retired.
        replace_keyring_file(
            &path,
            &text.replacen("status = \"active\"", "status = \"retired\"", 1),
        )?;
        assert_eq!(keys.reload_if_changed()?, Reload::Applied { generation: 3 });
        let refused = keys
            .current()
            .verify::<u8>(&old.token, binding.step("s"))
            .err()
            .ok_or("a retired key's token verified")?;
        assert!(
            matches!(refused, Refusal::RetiredKey(id) if id.get() == 1),
            "{refused}"
        );
        Ok(())
    }

    #[test]
    fn a_bad_file_keeps_the_last_good_keyring_and_is_reported_once() -> TestResult {
        let (_dir, path) = keyring_in_private_dir()?;
        let keys = KeyringFile::open(&path)?;
        let good = keys.current();
        let text = std::fs::read_to_string(&path)?;

        std::fs::write(&path, "[[key]\nid = ")?;
        let err = keys
            .reload_if_changed()
            .err()
            .ok_or("broken TOML was applied")?;
        assert!(matches!(err, KeyringLoadError::Invalid { .. }), "{err}");
        assert!(Arc::ptr_eq(&good, &keys.current()));
        assert_eq!(keys.last_error(), Some(err.to_string()));
        // The same bad version: reported already.
        assert_eq!(keys.reload_if_changed()?, Reload::Unchanged);
        assert!(keys.last_error().is_some());
        // A forced reload reports it again.
        assert!(keys.reload().is_err());

        // Fixed, then made world-readable: refused, naming the Rust option.
        std::fs::write(&path, &text)?;
        assert_eq!(keys.reload_if_changed()?, Reload::Unchanged);
        assert_eq!(keys.last_error(), None);
        chmod(&path, 0o644)?;
        let err = keys
            .reload_if_changed()
            .err()
            .ok_or("a world-readable keyring was applied")?;
        assert!(
            err.to_string().contains("allow_group_or_other_readable"),
            "{err}"
        );
        chmod(&path, 0o600)?;
        assert_eq!(keys.reload_if_changed()?, Reload::Unchanged);

        // A missing file: refused once, the keyring stays.
        std::fs::remove_file(&path)?;
        assert!(matches!(
            keys.reload_if_changed(),
            Err(KeyringLoadError::Io { .. })
        ));
        assert_eq!(keys.reload_if_changed()?, Reload::Unchanged);
        assert!(Arc::ptr_eq(&good, &keys.current()));
        assert_eq!(keys.generation(), 1);
        Ok(())
    }

    /// Requests on several threads take the codec and look for changes while
    /// the file is rotated under them: every token minted verifies with the
    /// codec that minted it, and the last rotation is what they all end with.
    #[test]
    fn requests_on_many_threads_see_whole_keyrings_during_rotations() -> TestResult {
        let (_dir, path) = keyring_in_private_dir()?;
        let keys = KeyringFile::open(&path)?;
        let context = CallContext::from_bytes([1; reqstate::CALL_CONTEXT_LEN]);
        let done = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|scope| -> TestResult {
            let workers: Vec<_> = (0..4)
                .map(|_| {
                    scope.spawn(|| -> Result<u32, String> {
                        let binding = Binding::new("tool", &context).map_err(|e| e.to_string())?;
                        let mut rounds = 0;
                        while !done.load(std::sync::atomic::Ordering::Relaxed) || rounds == 0 {
                            // A reload refused here would be a bug: every file written is valid.
                            keys.reload_if_changed().map_err(|e| e.to_string())?;
                            let codec = keys.current();
                            let minted = codec
                                .mint(binding, "s", &rounds, Duration::from_secs(60))
                                .map_err(|e| e.to_string())?;
                            let back = codec
                                .verify::<u32>(&minted.token, binding.step("s"))
                                .map_err(|e| e.to_string())?;
                            if back.state != rounds {
                                return Err("a token came back with another state".into());
                            }
                            rounds += 1;
                        }
                        Ok(rounds)
                    })
                })
                .collect();
            let mut text = std::fs::read_to_string(&path)?;
            for id in 2..=6 {
                text = with_key_text(&text, id, "primary")?.replacen(
                    "status = \"primary\"",
                    "status = \"active\"",
                    1,
                );
                replace_keyring_file(&path, &text)?;
                std::thread::sleep(Duration::from_millis(20));
            }
            done.store(true, std::sync::atomic::Ordering::Relaxed);
            for worker in workers {
                let rounds = worker.join().map_err(|_| "a worker panicked")??;
                assert!(rounds > 0);
            }
            Ok(())
        })?;
        // The workers most likely applied the last file; if not, this does.
        keys.reload_if_changed()?;
        assert_eq!(keys.reload_if_changed()?, Reload::Unchanged);
        assert_eq!(keys.current().keyring().primary().id().get(), 6);
        assert_eq!(keys.current().keyring().len(), 6);
        Ok(())
    }

    #[test]
    fn a_schedule_that_refuses_live_tokens_under_the_policy_is_refused() -> TestResult {
        let (_dir, path) = keyring_in_private_dir()?;
        let keys = KeyringFile::open(&path)?;
        // Key 2 takes over at 12:05; key 1 retires at 12:10, within the
        // default policy's 86400 s lifetime of its last tokens.
        let text = with_key(&path, 2, "active")?
            .replacen(
                "status = \"primary\"",
                "status = \"primary\"\nretire_at = 2026-12-01T12:10:00Z",
                1,
            )
            .replacen(
                "status = \"active\"",
                "status = \"active\"\nmint_from = 2026-12-01T12:05:00Z",
                1,
            );
        replace_keyring_file(&path, &text)?;
        let err = keys
            .reload_if_changed()
            .err()
            .ok_or("a schedule refusing live tokens was applied")?;
        assert!(err.to_string().contains("refuses live tokens"), "{err}");
        assert_eq!(keys.current().keyring().len(), 1);
        Ok(())
    }
}
