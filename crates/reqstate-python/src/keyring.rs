//! `Keyring` (`PyKeyring`) and `KeyInfo` (`PyKeyInfo`), and the package's one
//! live keyring ([`KeyringState`]): the keys in use, swapped whole when a
//! reload changes them, which every `Codec` over the keyring reads on each
//! call.
//!
//! A keyring comes from TOML text, from a fresh random key, or from a file
//! read and checked by the shared `reqstate-keyring-file` crate (the
//! sidecar's loader: ownership, mode, directories, secret files;
//! docs/KEYRING.md). A file is reloaded on request or, with `auto_reload`,
//! on use at most once per interval; a reload swaps the keys in only if the
//! file or a secret it names changed (the crate's `contents`, the sidecar's
//! rule), and keeps the last good keys on error.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use pyo3::prelude::*;
use reqstate::{BufferedRandom, Codec, KeyStatus, Policy};
// The sidecar's keyring file loader: the same ownership, mode, directory and
// secret-file checks (docs/KEYRING.md).
use reqstate_keyring_file::{KeyringLoadError, KeyringPermissions, load_keyring_file};
use zeroize::Zeroizing;

use crate::clock::CallClock;
use crate::errors;

/// The codec over `keyring`: the default policy (replaced per `Codec`), the
/// call's clock, and the core's default randomness, [`BufferedRandom`]
/// (what `Codec::new` uses): nonce hedges from a per-thread pool, single-use
/// token ids and keys from the OS on every draw. After any clone of the
/// process (`fork`, a child in a new PID namespace that keeps the pid, a VM
/// snapshot) the pool may repeat, which the hedge turns into the same nonce
/// only for the very same message (the very same token); token ids never
/// repeat (FORMAT.md §4.2, the core's `design` notes).
fn new_codec(keyring: reqstate::Keyring) -> Codec {
    Codec::with_parts(keyring, Policy::new(), CallClock, BufferedRandom)
}

/// The keyword of `Keyring.from_file` that accepts a keyring (or secret)
/// file group or others may read: what a Python caller passes where the
/// sidecar's user passes `--allow-insecure-keyring-permissions`.
/// `python -m reqstate` (`reqstate/_cli.py`) turns it back into its flag.
pub(crate) const ALLOW_READABLE: &str = "allow_insecure_permissions=True";

/// The message of a keyring file that did not load, in the Python API's
/// terms: the shared loader (`reqstate-keyring-file`) speaks to the
/// sidecar's user (its flags, "the sidecar's user"); here the option is
/// `Keyring.from_file`'s keyword and the user is this process's.
fn file_error(e: &KeyringLoadError) -> String {
    let message = match e {
        // The keyring file itself: written from the error's fields.
        KeyringLoadError::InsecurePermissions { path, mode, .. } if mode & 0o022 != 0 => format!(
            "keyring {}: mode {:04o} lets group or others write it (and so inject keys); \
             run `chmod 600 {}` ({ALLOW_READABLE} does not allow this)",
            path.display(),
            mode & 0o7777,
            path.display()
        ),
        KeyringLoadError::InsecurePermissions { path, mode, .. } => format!(
            "keyring {}: mode {:04o} lets group or others read it; \
             run `chmod 600 {}` (or pass {ALLOW_READABLE} to Keyring.from_file)",
            path.display(),
            mode & 0o7777,
            path.display()
        ),
        // A secret file's error reaches here as the core's keyring error,
        // whose text the loader wrote with the sidecar's flag in it.
        other => other.to_string().replace(
            "reqstate serve --allow-insecure-keyring-permissions",
            &format!("{ALLOW_READABLE} to Keyring.from_file"),
        ),
    };
    message
        .replace("the sidecar's user", "this process's user")
        .replace("the sidecar's uid", "this process's uid")
}

/// A keyring file and how it is checked and watched.
struct FileSource {
    path: PathBuf,
    permissions: KeyringPermissions,
    /// `Some(interval)`: on use, at most once per interval, read the file
    /// and the secrets it names again and reload if any changed.
    auto_reload: Option<Duration>,
}

struct Watch {
    last_check: Instant,
    last_error: Option<String>,
    /// The failure last reported through `logging` (once per distinct
    /// failure: a bad file read again every interval is not reported again).
    reported: Option<String>,
    /// What to report, taken by the next call that holds the GIL.
    to_report: Option<Report>,
}

/// What a reload has to say through `logging`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Report {
    /// A reload failed (a failure not reported yet): a warning.
    Failed(String),
    /// A reload succeeded after a reported failure: an info line.
    Recovered {
        /// Whether the file brought new keys (else the keys in use were
        /// already what it holds).
        changed: bool,
        /// The generation in use after it.
        generation: u64,
    },
}

/// The keys in use, swapped whole on reload: a call sees the old keys or
/// the new ones, never a mix, and the generation that goes with them.
pub(crate) struct Loaded {
    /// The keys, in a codec with the default policy, the call's clock and
    /// the core's randomness; a `Codec` applies its own policy to a clone
    /// of it per call (`Codec::with_policy`: no copy of the keys).
    pub(crate) codec: Codec,
    /// 1 for the keys first loaded, one more per reload that changed them.
    generation: u64,
    /// What the keys were built from: the file's bytes and the text of
    /// every secret it names (`secret_file`, `secret_env`), as
    /// `reqstate_keyring_file` gives it (zeroized on drop), to tell a real
    /// change, of the file or of a secret, from a touch.
    contents: Option<Zeroizing<Vec<u8>>>,
}

impl Loaded {
    /// 1 for the keys first loaded, one more per reload that changed them.
    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }
}

/// The live keyring: the keys in use and where they came from.
pub(crate) struct KeyringState {
    current: ArcSwap<Loaded>,
    source: Option<FileSource>,
    /// Held for a whole reload: reloads never interleave (an older read
    /// never replaces a newer one, and generations count up by one).
    watch: Mutex<Watch>,
    /// Whether `watch.to_report` holds a failure (read without the lock on
    /// every call).
    pending_report: AtomicBool,
}

impl KeyringState {
    fn new(codec: Codec, contents: Option<Zeroizing<Vec<u8>>>, source: Option<FileSource>) -> Self {
        KeyringState {
            current: ArcSwap::from_pointee(Loaded {
                codec,
                generation: 1,
                contents,
            }),
            source,
            watch: Mutex::new(Watch {
                last_check: Instant::now(),
                last_error: None,
                reported: None,
                to_report: None,
            }),
            pending_report: AtomicBool::new(false),
        }
    }

    /// Loads the file and the secrets it names again; swaps the keys in if
    /// any of them changed, the sidecar's rule (a rotated `secret_file`
    /// whose keyring text stayed the same is a change). On error the keys
    /// in use stay.
    fn reload(&self) -> Result<bool, String> {
        let mut watch = self.watch.lock().unwrap_or_else(|p| p.into_inner());
        self.reload_holding(&mut watch)
    }

    /// [`KeyringState::reload`] with the watch lock held.
    fn reload_holding(&self, watch: &mut Watch) -> Result<bool, String> {
        let Some(source) = &self.source else {
            return Err(
                "this keyring was not loaded from a file: there is nothing to reload".into(),
            );
        };
        let loaded =
            load_keyring_file(&source.path, source.permissions).map_err(|e| file_error(&e));
        watch.last_check = Instant::now();
        let loaded = match loaded {
            Ok(loaded) => loaded,
            Err(e) => {
                if watch.reported.as_ref() != Some(&e) {
                    watch.reported = Some(e.clone());
                    watch.to_report = Some(Report::Failed(e.clone()));
                    self.pending_report.store(true, Ordering::Release);
                }
                watch.last_error = Some(e.clone());
                return Err(e);
            }
        };
        watch.last_error = None;
        let recovered = watch.reported.take().is_some();
        let current = self.current.load();
        let changed = current.contents.as_deref().map(|c| &c[..]) != Some(&loaded.contents[..]);
        let generation = if changed {
            self.current.store(Arc::new(Loaded {
                codec: new_codec(loaded.keyring),
                generation: current.generation + 1,
                contents: Some(loaded.contents),
            }));
            current.generation + 1
        } else {
            current.generation
        };
        if recovered {
            watch.to_report = Some(Report::Recovered {
                changed,
                generation,
            });
            self.pending_report.store(true, Ordering::Release);
        }
        Ok(changed)
    }

    /// With `auto_reload`: at most once per interval, reload (read the file
    /// and every secret it names again, and swap the keys in if any
    /// changed: a `stat` of the keyring file alone would miss a rotated
    /// `secret_file`). Never fails: an error is kept in `last_error` and the
    /// last good keyring stays in use.
    fn maybe_reload(&self) {
        let Some(FileSource {
            auto_reload: Some(interval),
            ..
        }) = &self.source
        else {
            return;
        };
        // Another thread checking right now is enough.
        let Ok(mut watch) = self.watch.try_lock() else {
            return;
        };
        if watch.last_check.elapsed() < *interval {
            return;
        }
        let _ = self.reload_holding(&mut watch);
    }

    /// The keys to use for a call: reloaded first if `auto_reload` is due.
    pub(crate) fn in_use(&self) -> Arc<Loaded> {
        self.maybe_reload();
        self.current.load_full()
    }

    /// What a reload has to say and has not said yet, taken once.
    fn take_report(&self) -> Option<Report> {
        if !self.pending_report.swap(false, Ordering::Acquire) {
            return None;
        }
        self.watch
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .to_report
            .take()
    }

    /// Writes what a reload has to say, once, to the `reqstate` logger: a
    /// warning when a reload failed (once per distinct failure: the same
    /// bad file read again at every interval is not reported again), an
    /// info line when one succeeds after that. Called with the GIL by every
    /// call that uses the keys.
    pub(crate) fn report(&self, py: Python<'_>) {
        let Some(report) = self.take_report() else {
            return;
        };
        let path = self
            .source
            .as_ref()
            .map(|s| s.path.display().to_string())
            .unwrap_or_default();
        match report {
            Report::Failed(failure) => log(
                py,
                "warning",
                &format!("keyring reload refused; still using the previous keys: {failure}"),
            ),
            Report::Recovered {
                changed,
                generation,
            } => log(
                py,
                "info",
                &format!(
                    "keyring {path} loads again after a refused reload; {} (generation {generation})",
                    if changed {
                        "its keys are in use"
                    } else {
                        "its keys are the ones already in use"
                    }
                ),
            ),
        }
    }
}

/// Writes `message` at `level` (`"warning"`, `"info"`) to the `reqstate`
/// logger of Python's `logging` (where applications already route their
/// logs; `reqstate.mcp` logs there too). A failure of logging itself is not
/// the caller's error and is dropped.
pub(crate) fn log(py: Python<'_>, level: &str, message: &str) {
    let logged = py
        .import("logging")
        .and_then(|logging| logging.call_method1("getLogger", ("reqstate",)))
        .and_then(|logger| logger.call_method1(level, (message,)));
    if let Err(e) = logged {
        e.print(py);
    }
}

/// One key of a keyring, as `Keyring.keys()` lists it (no secret).
#[pyclass(module = "reqstate._native", name = "KeyInfo", frozen, get_all)]
pub(crate) struct PyKeyInfo {
    /// The key id.
    id: u32,
    /// `"hmac-sha256"` or `"xchacha20-poly1305"`.
    algorithm: &'static str,
    /// `"primary"`, `"active"` or `"retired"`.
    status: &'static str,
    /// The key's `created` time, unix seconds, if the keyring gives it.
    created_at: Option<u64>,
    /// When the key starts minting (`mint_from`), unix seconds, if scheduled.
    mint_from: Option<u64>,
    /// When its tokens start being refused (`retire_at`), unix seconds, if scheduled.
    retire_at: Option<u64>,
}

#[pymethods]
impl PyKeyInfo {
    fn __repr__(&self) -> String {
        format!(
            "KeyInfo(id={}, algorithm={:?}, status={:?})",
            self.id, self.algorithm, self.status
        )
    }
}

/// A keyring: keys by id, one primary that mints, active keys that verify,
/// retired keys whose tokens are refused (docs/KEYRING.md).
#[pyclass(module = "reqstate._native", name = "Keyring", frozen)]
pub(crate) struct PyKeyring {
    /// The live keyring (a `Codec` reaches it through its `Keyring`).
    pub(crate) state: KeyringState,
}

fn keyring_error(py: Python<'_>, e: &reqstate::KeyringError) -> PyErr {
    errors::keyring(py, &e.to_string())
}

#[pymethods]
impl PyKeyring {
    /// A keyring from TOML text with inline secrets (`secret = "..."`).
    /// `secret_file` and `secret_env` need `Keyring.from_file`.
    #[staticmethod]
    fn from_toml(py: Python<'_>, text: &str) -> PyResult<Self> {
        let keyring = reqstate::Keyring::from_toml(text).map_err(|e| keyring_error(py, &e))?;
        Ok(Self::of(keyring, None, None))
    }

    /// A keyring file, checked as the sidecar checks it: owned by this
    /// process's user or root, not writable by others, not readable by them
    /// unless `allow_insecure_permissions`, on a path no other user can
    /// replace; `secret_file` and `secret_env` resolved and checked too.
    ///
    /// `auto_reload=True`: on use, at most once per `check_interval`
    /// seconds, the file and the secrets it names are read again and the
    /// keys swapped in if any of them changed (a rotated `secret_file`
    /// included); a file that does not load leaves the last good keyring in
    /// use (`last_reload_error` says why).
    #[staticmethod]
    #[pyo3(signature = (path, *, allow_insecure_permissions = false, auto_reload = false, check_interval = 1.0))]
    fn from_file(
        py: Python<'_>,
        path: PathBuf,
        allow_insecure_permissions: bool,
        auto_reload: bool,
        check_interval: f64,
    ) -> PyResult<Self> {
        if !(check_interval.is_finite() && check_interval >= 0.0) {
            return Err(errors::invalid_argument(
                py,
                "check_interval must be a finite number of seconds, at least 0",
            ));
        }
        let permissions = if allow_insecure_permissions {
            KeyringPermissions::AllowGroupOrOtherReadable
        } else {
            KeyringPermissions::OwnerOnly
        };
        let loaded = py
            .detach(|| load_keyring_file(&path, permissions).map_err(|e| file_error(&e)))
            .map_err(|e| errors::keyring(py, &e))?;
        let source = FileSource {
            path,
            permissions,
            auto_reload: auto_reload.then(|| Duration::from_secs_f64(check_interval)),
        };
        Ok(Self::of(
            loaded.keyring,
            Some(loaded.contents),
            Some(source),
        ))
    }

    /// A keyring of one fresh random primary key that exists only in this
    /// process: for tests and single-process servers.
    #[staticmethod]
    #[pyo3(signature = (algorithm = "xchacha20-poly1305"))]
    fn ephemeral(py: Python<'_>, algorithm: &str) -> PyResult<Self> {
        let algorithm = reqstate::Algorithm::from_name(algorithm).ok_or_else(|| {
            errors::invalid_argument(
                py,
                "algorithm must be \"xchacha20-poly1305\" or \"hmac-sha256\"",
            )
        })?;
        let keyring = reqstate::Keyring::ephemeral(algorithm, &reqstate::OsRandom::new())
            .map_err(|e| errors::any(py, &e.into()))?;
        Ok(Self::of(keyring, None, None))
    }

    /// Reads the keyring file and every secret it names again (with every
    /// check) and, if any of them changed, uses the new keys from the next
    /// call on. Returns whether they changed. On any error raises
    /// `KeyringError` and keeps the keys in use.
    fn reload(&self, py: Python<'_>) -> PyResult<bool> {
        py.detach(|| self.state.reload())
            .map_err(|e| errors::keyring(py, &e))
    }

    /// The keyring file, or `None` for a keyring from text.
    #[getter]
    fn path(&self) -> Option<PathBuf> {
        self.state.source.as_ref().map(|s| s.path.clone())
    }

    /// Whether the file is reloaded on use when it changes.
    #[getter]
    fn auto_reload(&self) -> bool {
        self.state
            .source
            .as_ref()
            .is_some_and(|s| s.auto_reload.is_some())
    }

    /// Why the last reload failed (the last good keyring stayed in use), or
    /// `None` when it succeeded or none failed.
    #[getter]
    fn last_reload_error(&self) -> Option<String> {
        self.state
            .watch
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .last_error
            .clone()
    }

    /// Counts the keyrings this object has held: 1, plus one per reload
    /// that changed the keys.
    #[getter]
    fn generation(&self) -> u64 {
        self.state.current.load().generation
    }

    /// The id of the key that mints and seals now (docs/KEYRING.md, "Keys
    /// on a schedule": the primary until a scheduled key takes over).
    #[getter]
    fn primary_key_id(&self, py: Python<'_>) -> u32 {
        let loaded = self.state.in_use();
        self.state.report(py);
        loaded.codec.keyring().minting_key(unix_now()).id().get()
    }

    /// The keys, by id (no secrets).
    fn keys(&self, py: Python<'_>) -> Vec<PyKeyInfo> {
        let loaded = self.state.in_use();
        self.state.report(py);
        loaded
            .codec
            .keyring()
            .keys()
            .into_iter()
            .map(|k| PyKeyInfo {
                id: k.id().get(),
                algorithm: k.algorithm().name(),
                status: status_name(k.status()),
                created_at: k.created_at(),
                mint_from: k.mint_from(),
                retire_at: k.retire_at(),
            })
            .collect()
    }

    /// What key `key_id` does at `now` (unix seconds; default the system
    /// clock) under the keyring's schedule: `"primary"` (it mints),
    /// `"active"` (it verifies only) or `"retired"` (its tokens are refused).
    /// `None` for an id not in the keyring.
    #[pyo3(signature = (key_id, now = None))]
    fn status_at(&self, py: Python<'_>, key_id: u32, now: Option<u64>) -> Option<&'static str> {
        let loaded = self.state.in_use();
        self.state.report(py);
        let keyring = loaded.codec.keyring();
        let key = keyring.get(reqstate::KeyId::new(key_id))?;
        Some(status_name(
            keyring.status_at(key, now.unwrap_or_else(unix_now)),
        ))
    }

    fn __len__(&self) -> usize {
        self.state.current.load().codec.keyring().len()
    }

    fn __repr__(&self) -> String {
        let loaded = self.state.current.load();
        let keys: Vec<String> = loaded
            .codec
            .keyring()
            .keys()
            .into_iter()
            .map(|k| {
                format!(
                    "{} {} {}",
                    k.id(),
                    status_name(k.status()),
                    k.algorithm().name()
                )
            })
            .collect();
        match &self.state.source {
            Some(s) => format!("Keyring(path={:?}, keys=[{}])", s.path, keys.join(", ")),
            None => format!("Keyring(keys=[{}])", keys.join(", ")),
        }
    }
}

/// The system clock, unix seconds.
fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn status_name(status: KeyStatus) -> &'static str {
    status.name()
}

impl PyKeyring {
    fn of(
        keyring: reqstate::Keyring,
        contents: Option<Zeroizing<Vec<u8>>>,
        source: Option<FileSource>,
    ) -> Self {
        PyKeyring {
            state: KeyringState::new(new_codec(keyring), contents, source),
        }
    }
}
