//! `reqstate._native`: the reqstate core crate in-process for Python.
//!
//! The Python package `reqstate` (crates/reqstate-python/python/reqstate)
//! re-exports what is here and adds the pure-Python parts (exceptions, the
//! `mcp` codec, the command line). Nothing here panics across the FFI: every
//! core error becomes a Python exception whose `reason` is the core's reason
//! name (`errors`).
//!
//! - `Keyring` (`PyKeyring`): a keyring from TOML text, or from a file checked as the
//!   sidecar checks it (the shared `reqstate-keyring-file` crate), reloaded on
//!   request or, optionally, when the file or a secret it names changes
//!   (read again on use, at most once per interval, keeping the last good
//!   keyring on error).
//! - `Codec` (`PyCodec`): mint, verify, seal, unseal, consume under a keyring and a
//!   policy; batch calls release the GIL.
//! - `call_context`, `canonical_json`: FORMAT.md §7 (RFC 8785).
//!
//! Randomness: the core's default, [`BufferedRandom`] (as `Codec::new`):
//! no pool logic of its own here, so nothing that a clone of the process
//! keeping its pid could repeat (`new_codec`).

use std::cell::Cell;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString};
use reqstate::{
    Aad, Binding, BufferedRandom, Clock, Codec, KeyStatus, MemoryReplayStore, Policy, SystemClock,
    Verified,
};
use zeroize::Zeroizing;

mod errors;
mod state;

use errors::Kind;
// The sidecar's keyring file loader: the same ownership, mode, directory and
// secret-file checks (docs/KEYRING.md).
use reqstate_keyring_file::{KeyringPermissions, load_keyring_file};

// ------------------------------------------------------------ clock, random

std::thread_local! {
    /// A clock reading given to this call (`now=`), else `None`.
    static CALL_NOW: Cell<Option<u64>> = const { Cell::new(None) };
}

/// The system clock, or the `now=` of the call running on this thread.
#[derive(Debug, Clone, Copy)]
struct CallClock;

impl Clock for CallClock {
    fn now(&self) -> u64 {
        CALL_NOW
            .with(Cell::get)
            .unwrap_or_else(|| SystemClock.now())
    }
}

/// Runs `f` with the clock reading `now` (the system clock if `None`). The
/// reading in force before is restored when `f` returns or unwinds: a panic
/// in `f` (turned into a Python `PanicException` by PyO3) must not leave a
/// pinned clock behind for the next call on this thread.
fn at<R>(now: Option<u64>, f: impl FnOnce() -> R) -> R {
    /// Puts the previous reading back on drop, unwinding included.
    struct Restore(Option<u64>);
    impl Drop for Restore {
        fn drop(&mut self) {
            CALL_NOW.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(CALL_NOW.with(|c| c.replace(now)));
    f()
}

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

// ------------------------------------------------------------------ keyring

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
}

/// The keys in use, swapped whole on reload.
struct Loaded {
    codec: Codec,
    /// What the keys were built from: the file's bytes and the text of
    /// every secret it names (`secret_file`, `secret_env`), as
    /// `reqstate_keyring_file` gives it (zeroized on drop), to tell a real
    /// change, of the file or of a secret, from a touch.
    contents: Option<Zeroizing<Vec<u8>>>,
}

struct KeyringState {
    current: ArcSwap<Loaded>,
    generation: AtomicU64,
    source: Option<FileSource>,
    /// Held for a whole reload: reloads never interleave (an older read
    /// never replaces a newer one).
    watch: Mutex<Watch>,
}

impl KeyringState {
    fn new(loaded: Loaded, source: Option<FileSource>) -> Self {
        KeyringState {
            current: ArcSwap::from_pointee(loaded),
            generation: AtomicU64::new(1),
            source,
            watch: Mutex::new(Watch {
                last_check: Instant::now(),
                last_error: None,
            }),
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
        let loaded = load_keyring_file(&source.path, source.permissions).map_err(|e| e.to_string());
        watch.last_check = Instant::now();
        let loaded = match loaded {
            Ok(loaded) => loaded,
            Err(e) => {
                watch.last_error = Some(e.clone());
                return Err(e);
            }
        };
        watch.last_error = None;
        let current = self.current.load();
        if current.contents.as_deref().map(|c| &c[..]) == Some(&loaded.contents[..]) {
            return Ok(false);
        }
        self.current.store(Arc::new(Loaded {
            codec: new_codec(loaded.keyring),
            contents: Some(loaded.contents),
        }));
        self.generation.fetch_add(1, Ordering::AcqRel);
        Ok(true)
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

    fn codec(&self) -> Arc<Loaded> {
        self.maybe_reload();
        self.current.load_full()
    }
}

/// One key of a keyring, as `Keyring.keys()` lists it (no secret).
#[pyclass(module = "reqstate._native", name = "KeyInfo", frozen, get_all)]
struct PyKeyInfo {
    /// The key id.
    id: u32,
    /// `"hmac-sha256"` or `"xchacha20-poly1305"`.
    algorithm: &'static str,
    /// `"primary"`, `"active"` or `"retired"`.
    status: &'static str,
    /// The key's `created` time, unix seconds, if the keyring gives it.
    created_at: Option<u64>,
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
struct PyKeyring {
    state: Arc<KeyringState>,
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
            .detach(|| load_keyring_file(&path, permissions).map_err(|e| e.to_string()))
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
        let state = Arc::clone(&self.state);
        py.detach(move || state.reload())
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
        self.state.generation.load(Ordering::Acquire)
    }

    /// The primary key's id (the key that mints and seals).
    #[getter]
    fn primary_key_id(&self) -> u32 {
        self.state.codec().codec.keyring().primary().id().get()
    }

    /// The keys, by id (no secrets).
    fn keys(&self) -> Vec<PyKeyInfo> {
        let loaded = self.state.codec();
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
            })
            .collect()
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
            state: Arc::new(KeyringState::new(
                Loaded {
                    codec: new_codec(keyring),
                    contents,
                },
                source,
            )),
        }
    }
}

// ------------------------------------------------------------------ binding

/// What a state token is bound to but does not carry: the tool and the
/// caller's context bytes (usually `call_context(...)`). Checked once.
#[pyclass(module = "reqstate._native", name = "Binding", frozen)]
struct PyBinding {
    tool: String,
    context: Vec<u8>,
}

#[pymethods]
impl PyBinding {
    /// `tool`: 1 to 256 bytes of UTF-8; `context`: at most 65536 bytes
    /// (empty binds to no context). A `str` context is taken as its UTF-8.
    #[new]
    #[pyo3(signature = (tool, context = None))]
    fn new(
        py: Python<'_>,
        tool: &Bound<'_, PyAny>,
        context: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let tool = text_arg(py, tool, "tool")?;
        let context = match context {
            None => Vec::new(),
            Some(c) => bytes_arg(py, c, "context")?,
        };
        Binding::with_context_bytes(&tool, &context)
            .map_err(|e| errors::invalid_argument(py, &e.to_string()))?;
        Ok(PyBinding { tool, context })
    }

    /// The tool name.
    #[getter]
    fn tool(&self) -> &str {
        &self.tool
    }

    /// The context bytes.
    #[getter]
    fn context<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.context)
    }

    fn __repr__(&self) -> String {
        format!(
            "Binding(tool={:?}, context=<{} bytes>)",
            self.tool,
            self.context.len()
        )
    }
}

impl PyBinding {
    /// The core's binding (checked once already, when this was built).
    fn binding(&self, py: Python<'_>) -> PyResult<Binding<'_>> {
        Binding::with_context_bytes(&self.tool, &self.context)
            .map_err(|e| errors::invalid_argument(py, &e.to_string()))
    }
}

fn text_arg(py: Python<'_>, value: &Bound<'_, PyAny>, name: &str) -> PyResult<String> {
    let s = value
        .cast::<PyString>()
        .map_err(|_| errors::invalid_argument(py, &format!("{name} must be a str")))?;
    s.to_cow()
        .map(|s| s.into_owned())
        .map_err(|_| errors::invalid_argument(py, &format!("{name} is not valid Unicode")))
}

fn bytes_arg(py: Python<'_>, value: &Bound<'_, PyAny>, name: &str) -> PyResult<Vec<u8>> {
    if let Ok(s) = value.cast::<PyString>() {
        return s
            .to_cow()
            .map(|s| s.as_bytes().to_vec())
            .map_err(|_| errors::invalid_argument(py, &format!("{name} is not valid Unicode")));
    }
    if let Ok(b) = value.cast::<PyBytes>() {
        return Ok(b.as_bytes().to_vec());
    }
    value.extract::<Vec<u8>>().map_err(|_| {
        errors::invalid_argument(
            py,
            &format!("{name} must be bytes (or str, taken as UTF-8)"),
        )
    })
}

// ------------------------------------------------------------------ results

/// A minted token.
#[pyclass(module = "reqstate._native", name = "Minted", frozen, get_all)]
struct PyMinted {
    /// The token (base64url, no padding).
    token: Py<PyString>,
    /// The key that minted it (the primary).
    key_id: u32,
    /// Issue time, unix seconds.
    issued_at: u64,
    /// Expiry, unix seconds.
    expires_at: u64,
}

#[pymethods]
impl PyMinted {
    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "Minted(token={:?}, key_id={}, issued_at={}, expires_at={})",
            self.token.bind(py).to_string(),
            self.key_id,
            self.issued_at,
            self.expires_at
        )
    }
}

/// A token that passed every check, its state decoded.
#[pyclass(module = "reqstate._native", name = "Verified", frozen, get_all)]
struct PyVerified {
    /// The step the token carries.
    step: Py<PyString>,
    /// The state: None, bool, int, float, str, bytes, list, dict.
    state: Py<PyAny>,
    /// The state's CBOR bytes, as the token carries them.
    state_cbor: Py<PyBytes>,
    /// The key that verified it.
    key_id: u32,
    /// Issue time, unix seconds.
    issued_at: u64,
    /// Expiry, unix seconds.
    expires_at: u64,
}

#[pymethods]
impl PyVerified {
    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "Verified(step={:?}, state={}, key_id={}, issued_at={}, expires_at={})",
            self.step.bind(py).to_string(),
            self.state
                .bind(py)
                .repr()
                .map(|r| r.to_string())
                .unwrap_or_default(),
            self.key_id,
            self.issued_at,
            self.expires_at
        )
    }
}

/// A sealed payload.
#[pyclass(module = "reqstate._native", name = "Sealed", frozen, get_all)]
struct PySealed {
    /// The token.
    token: Py<PyString>,
    /// The key that sealed it (the primary).
    key_id: u32,
}

#[pymethods]
impl PySealed {
    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "Sealed(token={:?}, key_id={})",
            self.token.bind(py).to_string(),
            self.key_id
        )
    }
}

/// An opened sealed payload.
#[pyclass(module = "reqstate._native", name = "Unsealed", frozen, get_all)]
struct PyUnsealed {
    /// The payload given to `seal`.
    payload: Py<PyBytes>,
    /// The key that opened it.
    key_id: u32,
}

#[pymethods]
impl PyUnsealed {
    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "Unsealed(payload=<{} bytes>, key_id={})",
            self.payload.bind(py).as_bytes().len(),
            self.key_id
        )
    }
}

fn minted(py: Python<'_>, m: reqstate::Minted) -> PyMinted {
    PyMinted {
        token: PyString::new(py, &m.token).unbind(),
        key_id: m.key_id.get(),
        issued_at: m.issued_at,
        expires_at: m.expires_at,
    }
}

/// A verified token with its state as bytes, decoded into Python (or
/// `state_decoding` when the state has no Python form).
fn verified(py: Python<'_>, v: Verified<Vec<u8>>, decode: bool) -> PyResult<PyVerified> {
    let state = if decode {
        state::to_py_fast(py, &v.state)
            .map_err(|why| errors::refused(py, &reqstate::Refusal::StateDecoding(why)))?
            .unbind()
    } else {
        py.None()
    };
    Ok(PyVerified {
        step: PyString::new(py, &v.step).unbind(),
        state,
        state_cbor: PyBytes::new(py, &v.state).unbind(),
        key_id: v.key_id.get(),
        issued_at: v.issued_at,
        expires_at: v.expires_at,
    })
}

/// A single-use token's state, decoded (step 14) before the token is
/// recorded (step 15): the Python value (`None` when not asked for), and
/// the bytes as carried.
type DecodedState = (Option<Py<PyAny>>, Vec<u8>);

/// Decodes the state of a redemption that is not recorded yet (FORMAT.md §8
/// step 14 before step 15): a state with no Python form is refused
/// `state_decoding`, and the redemption, never recorded, is dropped.
fn decode_redemption(
    py: Python<'_>,
    redemption: reqstate::Redemption<Vec<u8>>,
    decode: bool,
) -> Result<reqstate::Redemption<DecodedState>, reqstate::Refusal> {
    redemption.try_map_state(|cbor| {
        let value = if decode {
            let value = state::to_py_fast(py, &cbor).map_err(reqstate::Refusal::StateDecoding)?;
            Some(value.unbind())
        } else {
            None
        };
        Ok((value, cbor))
    })
}

/// The `Verified` of a recorded single-use token, its state decoded before.
fn decoded(py: Python<'_>, v: Verified<DecodedState>) -> PyVerified {
    let (value, cbor) = v.state;
    PyVerified {
        step: PyString::new(py, &v.step).unbind(),
        state: value.unwrap_or_else(|| py.None()),
        state_cbor: PyBytes::new(py, &cbor).unbind(),
        key_id: v.key_id.get(),
        issued_at: v.issued_at,
        expires_at: v.expires_at,
    }
}

// -------------------------------------------------------------- replay store

/// A spent-token record for single-use tokens, in this process's memory
/// (the core's `MemoryReplayStore`): single use within one process only.
/// A fleet, or a pre-forked server, needs the sidecar's shared store.
#[pyclass(module = "reqstate._native", name = "MemoryReplayStore", frozen)]
struct PyReplayStore {
    store: Arc<MemoryReplayStore>,
}

#[pymethods]
impl PyReplayStore {
    /// A store of at most `capacity` live records (refusing, `replay_store_full`, beyond).
    #[new]
    #[pyo3(signature = (capacity = 100_000))]
    fn new(py: Python<'_>, capacity: usize) -> PyResult<Self> {
        if capacity == 0 {
            return Err(errors::invalid_argument(py, "capacity must be at least 1"));
        }
        Ok(PyReplayStore {
            store: Arc::new(MemoryReplayStore::new(capacity)),
        })
    }

    fn __len__(&self) -> usize {
        self.store.len()
    }
}

/// One single-use token to record as spent (FORMAT.md §5.1, §8 step 15),
/// as `Codec.consume` hands it to a replay store written in Python
/// (`insert_if_absent(record)`). It names the record, never the token.
#[pyclass(module = "reqstate._native", name = "SpentRecord", frozen, get_all)]
struct PySpentRecord {
    /// The record's name after a shared store's prefix:
    /// `spent:v1:<key id in decimal>:<token id in lowercase hex>`.
    name: String,
    /// The key the token was minted under.
    key_id: u32,
    /// The token's 16 random bytes of id.
    token_id: Py<PyBytes>,
    /// The token's expiry, unix seconds.
    expires_at: u64,
    /// The verifier's clock reading used for this verification, unix
    /// seconds (the call's `now=`, or the system clock).
    now: u64,
    /// This verifier's `clock_leeway`, seconds.
    clock_leeway: u64,
    /// `expires_at + clock_leeway` (saturating): until when a store used by
    /// this verifier alone must keep the record. A store shared by
    /// verifiers with other clocks and leeways keeps it longer (the rule of
    /// `reqstate.redis.record_lifetime_ms`).
    record_until: u64,
}

#[pymethods]
impl PySpentRecord {
    fn __repr__(&self) -> String {
        format!(
            "SpentRecord(name={:?}, expires_at={}, now={}, clock_leeway={})",
            self.name, self.expires_at, self.now, self.clock_leeway
        )
    }
}

/// The record a redemption asks for, under a codec whose leeway is `leeway`.
fn spent_record<T>(
    py: Python<'_>,
    redemption: &reqstate::Redemption<T>,
    leeway: u64,
) -> PySpentRecord {
    let spent = redemption.spent_id();
    PySpentRecord {
        name: spent.record_name(),
        key_id: spent.key_id().get(),
        token_id: PyBytes::new(py, spent.token_id()).unbind(),
        expires_at: redemption.expires_at(),
        now: redemption.now(),
        clock_leeway: leeway,
        record_until: redemption.record_until(),
    }
}

/// Step 15 through a store written in Python: `store.insert_if_absent(record)`.
/// Its `TokenRefused` for a store reason is raised as is; any other
/// exception is refused `replay_store_unavailable`, with it as the cause.
fn ask_store(py: Python<'_>, store: &Bound<'_, PyAny>, record: PySpentRecord) -> PyResult<bool> {
    let answer = store
        .call_method1(pyo3::intern!(py, "insert_if_absent"), (record,))
        .map_err(|e| errors::store_failure(py, e))?;
    match answer.cast::<pyo3::types::PyBool>() {
        Ok(recorded) => Ok(recorded.is_true()),
        Err(_) => Err(errors::error(
            py,
            Kind::Refused,
            "replay_store_unavailable",
            &format!(
                "the replay store's insert_if_absent answered a {}, not a bool: the token \
                 is refused unrecorded",
                answer
                    .get_type()
                    .name()
                    .map(|n| n.to_string())
                    .unwrap_or_else(|_| "value".into())
            ),
        )),
    }
}

// -------------------------------------------------------------------- codec

/// Mints and verifies requestState tokens under a keyring and a policy.
#[pyclass(module = "reqstate._native", name = "Codec", frozen)]
struct PyCodec {
    keyring: Py<PyKeyring>,
    state: Arc<KeyringState>,
    policy: Policy,
    /// The core codec for the keyring's generation it was built for.
    cached: ArcSwap<(u64, Codec)>,
}

/// One batch item's outcome, computed without the GIL.
enum Outcome<T, E> {
    Done(T),
    Failed(E),
}

impl PyCodec {
    /// The core codec: this policy over the keyring's current keys (rebuilt
    /// only when a reload changed them).
    fn core(&self) -> arc_swap::Guard<Arc<(u64, Codec)>> {
        self.state.maybe_reload();
        let generation = self.state.generation.load(Ordering::Acquire);
        let cached = self.cached.load();
        if cached.0 == generation {
            return cached;
        }
        let fresh = self
            .state
            .current
            .load()
            .codec
            .clone()
            .with_policy(self.policy);
        self.cached.store(Arc::new((generation, fresh)));
        self.cached.load()
    }
}

#[pymethods]
impl PyCodec {
    /// A codec over `keyring` with a policy: the longest token (64..=1048576
    /// characters), the clock leeway (0..=600 s) and the longest lifetime
    /// (1..=2592000 s).
    #[new]
    #[pyo3(signature = (keyring, *, max_token_len = Policy::DEFAULT_MAX_TOKEN_LEN, clock_leeway = Policy::DEFAULT_CLOCK_LEEWAY, max_lifetime = Policy::DEFAULT_MAX_LIFETIME))]
    fn new(
        py: Python<'_>,
        keyring: Bound<'_, PyKeyring>,
        max_token_len: usize,
        clock_leeway: u64,
        max_lifetime: u64,
    ) -> PyResult<Self> {
        let invalid = |e: reqstate::InvalidArgument| errors::invalid_argument(py, &e.to_string());
        let policy = Policy::new()
            .with_max_token_len(max_token_len)
            .map_err(invalid)?
            .with_clock_leeway(Duration::from_secs(clock_leeway))
            .map_err(invalid)?
            .with_max_lifetime(Duration::from_secs(max_lifetime))
            .map_err(invalid)?;
        let state = Arc::clone(&keyring.get().state);
        let generation = state.generation.load(Ordering::Acquire);
        let codec = state.current.load().codec.clone().with_policy(policy);
        Ok(PyCodec {
            keyring: keyring.unbind(),
            state,
            policy,
            cached: ArcSwap::from_pointee((generation, codec)),
        })
    }

    /// The keyring.
    #[getter]
    fn keyring(&self, py: Python<'_>) -> Py<PyKeyring> {
        self.keyring.clone_ref(py)
    }

    /// The longest token minted or accepted, in characters.
    #[getter]
    fn max_token_len(&self) -> usize {
        self.policy.max_token_len()
    }

    /// The clock leeway, in seconds.
    #[getter]
    fn clock_leeway(&self) -> u64 {
        self.policy.clock_leeway()
    }

    /// The longest lifetime minted or accepted, in seconds.
    #[getter]
    fn max_lifetime(&self) -> u64 {
        self.policy.max_lifetime()
    }

    /// Mints a token for `binding` at `step` carrying `state` (a
    /// JSON-compatible value, or bytes), valid `ttl` seconds. `single_use`:
    /// a token accepted once, by `consume`. `now`: the clock reading to use
    /// (unix seconds; default the system clock).
    #[pyo3(signature = (binding, step, state = None, *, ttl = 600, single_use = false, now = None))]
    #[allow(clippy::too_many_arguments)]
    fn mint(
        &self,
        py: Python<'_>,
        binding: &PyBinding,
        step: &Bound<'_, PyAny>,
        state: Option<&Bound<'_, PyAny>>,
        ttl: u64,
        single_use: bool,
        now: Option<u64>,
    ) -> PyResult<PyMinted> {
        let step = text_arg(py, step, "step")?;
        let none = py.None().into_bound(py);
        let state = state::PyState::new(state.unwrap_or(&none));
        self.mint_state(py, binding, &step, &state, ttl, single_use, now)
    }

    /// `mint` with the state given as one CBOR item, embedded byte for
    /// byte. It must be in preferred serialization as the core writes it
    /// (docs/CLI.md `--state-cbor-hex`); otherwise `state_encoding`.
    #[pyo3(signature = (binding, step, state_cbor, *, ttl = 600, single_use = false, now = None))]
    #[allow(clippy::too_many_arguments)]
    fn mint_cbor(
        &self,
        py: Python<'_>,
        binding: &PyBinding,
        step: &Bound<'_, PyAny>,
        state_cbor: &[u8],
        ttl: u64,
        single_use: bool,
        now: Option<u64>,
    ) -> PyResult<PyMinted> {
        let step = text_arg(py, step, "step")?;
        let state = match state::from_cbor(state_cbor) {
            Ok(value) => state::State::Value(value),
            Err(why) => state::State::Unencodable(why),
        };
        self.mint_state(py, binding, &step, &state, ttl, single_use, now)
    }

    /// Verifies a state token against `binding` and, if given,
    /// `expected_step`; decodes its state. Raises `TokenRefused` (its
    /// `reason` says why) for any token that is not accepted.
    #[pyo3(signature = (token, binding, *, expected_step = None, now = None))]
    fn verify(
        &self,
        py: Python<'_>,
        token: &str,
        binding: &PyBinding,
        expected_step: Option<&str>,
        now: Option<u64>,
    ) -> PyResult<PyVerified> {
        let v = self.verify_raw_at(py, token, binding, expected_step, now)?;
        verified(py, v, true)
    }

    /// `verify` without decoding the state: `state` is None and
    /// `state_cbor` holds the state item's bytes as the token carries them.
    #[pyo3(signature = (token, binding, *, expected_step = None, now = None))]
    fn verify_cbor(
        &self,
        py: Python<'_>,
        token: &str,
        binding: &PyBinding,
        expected_step: Option<&str>,
        now: Option<u64>,
    ) -> PyResult<PyVerified> {
        let v = self.verify_raw_at(py, token, binding, expected_step, now)?;
        verified(py, v, false)
    }

    /// Consumes a single-use token: verifies it (FORMAT.md §8 steps 0-14,
    /// decoding the state included), then records it as spent in `store`
    /// (step 15, last), and gives its contents only the first time
    /// (`replayed` after). A token that is not single-use is `wrong_kind`.
    ///
    /// `store` is a `MemoryReplayStore` (recorded without leaving Rust) or
    /// any object with `insert_if_absent(record: SpentRecord) -> bool`
    /// (`reqstate.ReplayStore`, such as `reqstate.redis.RedisReplayStore`):
    /// True if this call recorded the token, False if it was recorded
    /// before; it raises `TokenRefused` (`replay_store_unavailable`,
    /// `replay_store_full`) when it cannot record. Any other exception it
    /// raises is refused as `replay_store_unavailable` (its cause attached):
    /// never accepted unrecorded. The store is called outside the call's
    /// `now=` and only once every other check has passed.
    #[pyo3(signature = (token, binding, store, *, expected_step = None, now = None, decode = true))]
    #[allow(clippy::too_many_arguments)]
    fn consume(
        &self,
        py: Python<'_>,
        token: &str,
        binding: &PyBinding,
        store: &Bound<'_, PyAny>,
        expected_step: Option<&str>,
        now: Option<u64>,
        decode: bool,
    ) -> PyResult<PyVerified> {
        let memory = store.cast::<PyReplayStore>().ok();
        if memory.is_none() && !store.hasattr(pyo3::intern!(py, "insert_if_absent"))? {
            return Err(pyo3::exceptions::PyTypeError::new_err(
                "store must be a MemoryReplayStore or have an insert_if_absent(record) method \
                 (reqstate.ReplayStore, e.g. reqstate.redis.RedisReplayStore)",
            ));
        }
        let redemption = {
            let core = self.core();
            let codec = &core.1;
            let b = binding.binding(py)?;
            let expected = b.expecting(expected_step);
            // Steps 0-13 of FORMAT.md §8, under the call's clock.
            at(now, || codec.verify_single_use_raw(token, expected))
                .map_err(|e| errors::refused(py, &e))?
        };
        // Step 14, decoding the state into what the caller asked for, comes
        // before step 15: a state that does not decode is refused unrecorded.
        let redemption =
            decode_redemption(py, redemption, decode).map_err(|e| errors::refused(py, &e))?;
        // Step 15, last.
        let v = match memory {
            Some(memory) => redemption.redeem(&*memory.get().store),
            None => {
                let record = spent_record(py, &redemption, self.policy.clock_leeway());
                let recorded = ask_store(py, store, record)?;
                redemption.finish(Ok(recorded))
            }
        }
        .map_err(|e| errors::refused(py, &e))?;
        Ok(decoded(py, v))
    }

    /// Seals opaque bytes under the primary key, bound to `aad` (at most
    /// 65536 bytes): for SDKs that stamp and check their own claims.
    #[pyo3(signature = (payload, aad = b"".as_slice()))]
    fn seal(&self, py: Python<'_>, payload: &[u8], aad: &[u8]) -> PyResult<PySealed> {
        let aad = Aad::new(aad).map_err(|e| errors::invalid_argument(py, &e.to_string()))?;
        let sealed = self
            .core()
            .1
            .seal(payload, aad)
            .map_err(|e| errors::mint(py, &e))?;
        Ok(PySealed {
            token: PyString::new(py, &sealed.token).unbind(),
            key_id: sealed.key_id.get(),
        })
    }

    /// Opens a token made by `seal` with the same `aad`. Raises
    /// `TokenRefused` otherwise.
    #[pyo3(signature = (token, aad = b"".as_slice()))]
    fn unseal(&self, py: Python<'_>, token: &str, aad: &[u8]) -> PyResult<PyUnsealed> {
        let aad = Aad::new(aad).map_err(|e| errors::invalid_argument(py, &e.to_string()))?;
        let opened = self
            .core()
            .1
            .unseal(token, aad)
            .map_err(|e| errors::refused(py, &e))?;
        Ok(PyUnsealed {
            payload: PyBytes::new(py, &opened.payload).unbind(),
            key_id: opened.key_id.get(),
        })
    }

    /// Mints one token per state, all for `binding` and `step`, with the
    /// GIL released while the core works. Returns, in order, a `Minted` or
    /// the `MintRefused`/`InvalidArgument` exception (not raised) per state.
    #[pyo3(signature = (binding, step, states, *, ttl = 600, now = None))]
    fn mint_many<'py>(
        &self,
        py: Python<'py>,
        binding: &PyBinding,
        step: &Bound<'py, PyAny>,
        states: &Bound<'py, PyAny>,
        ttl: u64,
        now: Option<u64>,
    ) -> PyResult<Bound<'py, PyList>> {
        let step = text_arg(py, step, "step")?;
        let states: Vec<state::State> = states
            .try_iter()?
            .map(|s| s.map(|s| state::from_py(&s)))
            .collect::<PyResult<_>>()?;
        let core = self.core();
        let codec = &core.1;
        let b = binding.binding(py)?;
        let ttl = Duration::from_secs(ttl);
        let outcomes: Vec<Outcome<reqstate::Minted, reqstate::MintError>> = py.detach(|| {
            at(now, || {
                states
                    .iter()
                    .map(|s| match codec.mint(b, &step, s, ttl) {
                        Ok(m) => Outcome::Done(m),
                        Err(e) => Outcome::Failed(e),
                    })
                    .collect()
            })
        });
        let out = PyList::empty(py);
        for outcome in outcomes {
            match outcome {
                Outcome::Done(m) => out.append(Bound::new(py, minted(py, m))?)?,
                Outcome::Failed(e) => {
                    let kind = match e {
                        reqstate::MintError::InvalidArgument(_) => Kind::InvalidArgument,
                        _ => Kind::Mint,
                    };
                    out.append(errors::instance(py, kind, e.reason(), &e.to_string())?)?
                }
            }
        }
        Ok(out)
    }

    /// Verifies many tokens against one `binding` (and `expected_step`),
    /// with the GIL released while the core works. Returns, in order, a
    /// `Verified` or the `TokenRefused` exception (not raised) per token.
    #[pyo3(signature = (tokens, binding, *, expected_step = None, now = None))]
    fn verify_many<'py>(
        &self,
        py: Python<'py>,
        tokens: &Bound<'py, PyAny>,
        binding: &PyBinding,
        expected_step: Option<String>,
        now: Option<u64>,
    ) -> PyResult<Bound<'py, PyList>> {
        let tokens: Vec<String> = tokens
            .try_iter()?
            .map(|t| t.and_then(|t| t.extract::<String>()))
            .collect::<PyResult<_>>()?;
        let core = self.core();
        let codec = &core.1;
        let b = binding.binding(py)?;
        let expected = b.expecting(expected_step.as_deref());
        let outcomes: Vec<Result<Verified<Vec<u8>>, reqstate::Refusal>> = py.detach(|| {
            at(now, || {
                tokens
                    .iter()
                    .map(|t| codec.verify_raw(t, expected))
                    .collect()
            })
        });
        let out = PyList::empty(py);
        for outcome in outcomes {
            let item = match outcome
                .map_err(|e| errors::refused(py, &e))
                .and_then(|v| verified(py, v, true))
            {
                Ok(v) => Bound::new(py, v)?.into_any(),
                Err(e) => e.into_value(py).into_bound(py).into_any(),
            };
            out.append(item)?;
        }
        Ok(out)
    }

    fn __repr__(&self) -> String {
        format!(
            "Codec(max_token_len={}, clock_leeway={}, max_lifetime={})",
            self.policy.max_token_len(),
            self.policy.clock_leeway(),
            self.policy.max_lifetime()
        )
    }
}

impl PyCodec {
    #[allow(clippy::too_many_arguments)]
    fn mint_state(
        &self,
        py: Python<'_>,
        binding: &PyBinding,
        step: &str,
        state: &impl serde::Serialize,
        ttl: u64,
        single_use: bool,
        now: Option<u64>,
    ) -> PyResult<PyMinted> {
        let core = self.core();
        let codec = &core.1;
        let b = binding.binding(py)?;
        let ttl = Duration::from_secs(ttl);
        let m = at(now, || {
            if single_use {
                codec.mint_single_use(b, step, state, ttl)
            } else {
                codec.mint(b, step, state, ttl)
            }
        })
        .map_err(|e| errors::mint(py, &e))?;
        Ok(minted(py, m))
    }

    fn verify_raw_at(
        &self,
        py: Python<'_>,
        token: &str,
        binding: &PyBinding,
        expected_step: Option<&str>,
        now: Option<u64>,
    ) -> PyResult<Verified<Vec<u8>>> {
        let core = self.core();
        let codec = &core.1;
        let b = binding.binding(py)?;
        let expected = b.expecting(expected_step);
        at(now, || codec.verify_raw(token, expected)).map_err(|e| errors::refused(py, &e))
    }
}

// ---------------------------------------------------------------- functions

/// The call context of one MCP call (FORMAT.md §7, RFC 8785): 32 bytes to
/// bind a token to the principal, the audience (this server), the method
/// and the exact arguments (their JSON text). Raises `InvalidArgument` for
/// arguments JCS cannot represent exactly.
#[pyfunction]
fn call_context<'py>(
    py: Python<'py>,
    principal: &str,
    audience: &str,
    method: &str,
    arguments_json: &str,
) -> PyResult<Bound<'py, PyBytes>> {
    let context = reqstate::call_context(principal, audience, method, arguments_json)
        .map_err(|e| errors::invalid_argument(py, &e.to_string()))?;
    Ok(PyBytes::new(py, context.as_bytes()))
}

/// The JCS (RFC 8785) text of one JSON value given as text.
#[pyfunction]
fn canonical_json(py: Python<'_>, arguments_json: &str) -> PyResult<String> {
    reqstate::canonical_json(arguments_json)
        .map_err(|e| errors::invalid_argument(py, &e.to_string()))
}

/// docs/CLI.md `--state-json`: JSON text to the CBOR bytes minted. Raises
/// `ValueError` (a usage error) for text the command line refuses.
#[pyfunction]
fn _cli_state_from_json<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyBytes>> {
    let value = reqstate_cli_state::state_from_json(text)
        .map_err(pyo3::exceptions::PyValueError::new_err)?;
    let bytes = state::encode(&value).map_err(pyo3::exceptions::PyValueError::new_err)?;
    Ok(PyBytes::new(py, &bytes))
}

/// docs/CLI.md `--state-cbor-hex`: the CBOR bytes, checked. Raises
/// `ValueError` (a usage error) for bytes the command line refuses.
#[pyfunction]
fn _cli_check_state_cbor(cbor: &[u8]) -> PyResult<()> {
    state::from_cbor(cbor)
        .map(drop)
        .map_err(pyo3::exceptions::PyValueError::new_err)
}

/// docs/CLI.md `verify`'s `state`: the JSON text of a state's JSON form,
/// or None when it has none.
#[pyfunction]
fn _cli_state_json(cbor: &[u8]) -> Option<String> {
    let value: ciborium::Value = ciborium::from_reader(cbor).ok()?;
    reqstate_cli_state::state_to_json(&value).map(|j| j.to_string())
}

/// For tests only (tests/test_api.py): panics inside the clock override of
/// `now`, as a bug under a call's `now=` would. PyO3 raises the panic as
/// `pyo3_runtime.PanicException`; the next call on this thread must read
/// the system clock again, not `now`.
#[pyfunction]
fn _panic_under_clock_override(now: u64) {
    at(Some(now), || {
        panic!("a panic under the clock override (test)")
    })
}

/// For tests only: the clock reading a call would use on this thread
/// outside any `now=` (the system clock, unless an override leaked).
#[pyfunction]
fn _clock_now() -> u64 {
    CallClock.now()
}

/// Lowercase hex of bytes.
#[pyfunction]
fn _hex(bytes: &[u8]) -> String {
    reqstate_cli_state::encode_hex(bytes)
}

/// The reason names of every core error (`reqstate::Error::reason()`).
fn reasons() -> Vec<&'static str> {
    let mut all: Vec<&'static str> = reqstate::Refusal::REASONS.to_vec();
    for extra in [
        "state_encoding",
        "invalid_argument",
        "randomness_unavailable",
        "invalid_keyring",
    ] {
        if !all.contains(&extra) {
            all.push(extra);
        }
    }
    all
}

/// The native module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyKeyring>()?;
    m.add_class::<PyKeyInfo>()?;
    m.add_class::<PyBinding>()?;
    m.add_class::<PyCodec>()?;
    m.add_class::<PyMinted>()?;
    m.add_class::<PyVerified>()?;
    m.add_class::<PySealed>()?;
    m.add_class::<PyUnsealed>()?;
    m.add_class::<PyReplayStore>()?;
    m.add_class::<PySpentRecord>()?;
    m.add_function(wrap_pyfunction!(call_context, m)?)?;
    m.add_function(wrap_pyfunction!(canonical_json, m)?)?;
    m.add_function(wrap_pyfunction!(_cli_state_from_json, m)?)?;
    m.add_function(wrap_pyfunction!(_cli_check_state_cbor, m)?)?;
    m.add_function(wrap_pyfunction!(_cli_state_json, m)?)?;
    m.add_function(wrap_pyfunction!(_hex, m)?)?;
    m.add_function(wrap_pyfunction!(_panic_under_clock_override, m)?)?;
    m.add_function(wrap_pyfunction!(_clock_now, m)?)?;
    m.add("REASONS", reasons())?;
    m.add("CALL_CONTEXT_LEN", reqstate::CALL_CONTEXT_LEN)?;
    m.add("MAX_STATE_DEPTH", reqstate::MAX_STATE_DEPTH)?;
    m.add("VERSION", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
