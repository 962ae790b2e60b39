//! Keyring hot reload: SIGHUP and changes in the keyring's directory, debounced (never for ever), read with a time limit, validated whole (the schedule against the policy served too), then swapped in atomically. The bearer token file ([`crate::bearer`]) reloads on the same triggers.
//!
//! A refused file is reported once per version: the same refused bytes (and
//! the same error) read again after a directory event that did not change
//! them are not logged or counted again ([`RefusalMemory`]); a SIGHUP always
//! reloads and reports.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use notify::{RecursiveMode, Watcher};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;
use zeroize::Zeroizing;

use crate::bearer::TokenReloader;
use crate::key_evidence::{EvidenceBook, sha256_hex};
use crate::keyring_source::{
    KeyringLoadError, KeyringPermissions, LoadedKeyringFile, MAX_KEYRING_FILE_LEN,
    load_keyring_file, read_protected_file, watched_directory,
};
use crate::live_keyring::{KeyringInService, SharedKeyring};
use crate::metrics::Metrics;
use crate::service_manager;

/// Longest a reload may take (reading the keyring and its secret files,
/// deriving the keys) before it is abandoned: logged at `ERROR`, counted in
/// `reqstate_keyring_reload_timeouts_total` and
/// `reqstate_keyring_reload_failures_total`, and the previous keyring stays
/// in service. Later reloads still run.
pub const RELOAD_TIMEOUT: Duration = Duration::from_secs(10);

/// A burst of directory events postpones a reload by at most this many
/// debounce periods after its first event: continuous events (a log file
/// written next to the keyring, a busy volume) cannot postpone it for ever.
pub const MAX_DEBOUNCE_PERIODS: u32 = 10;

/// Abandoned reads still stuck (a hung file system) beyond which no new
/// reload is started, so that hung reads cannot pile up threads.
const MAX_STUCK_READS: usize = 4;

/// What asked for a reload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Trigger {
    /// SIGHUP: always reload, even if the file is byte-for-byte the same
    /// (a `secret_file` or `secret_env` it names may have changed).
    Signal,
    /// Something changed in a watched directory: the keyring's, the token
    /// file's, or both (one directory may hold both files).
    DirectoryChange(Changed),
}

/// Whose directory an event came from: only that file is read again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Changed {
    keyring: bool,
    token: bool,
}

impl Changed {
    /// Both (an event that names no path, as on a watch overflow).
    const BOTH: Changed = Changed {
        keyring: true,
        token: true,
    };

    fn add(&mut self, other: Changed) {
        self.keyring |= other.keyring;
        self.token |= other.token;
    }
}

/// Reads and validates a keyring file: [`load_keyring_file`], or a stand-in in tests.
type Loader = Arc<
    dyn Fn(&Path, KeyringPermissions) -> Result<LoadedKeyringFile, KeyringLoadError> + Send + Sync,
>;

/// The last refusal of a reloaded file, to report each refused version of
/// the file once: the SHA-256 of the error's text and of the file's version
/// ([`file_version`]: its bytes and its identity, when it can be read at
/// all). A directory event that changes neither (a log file written next to
/// the keyring, the sidecar's own `ERROR` line among them; a backup file;
/// the sidecar's own reads) refuses nothing new, while every write of the
/// file, even of the same bytes, is a new version.
#[derive(Debug, Default)]
pub struct RefusalMemory {
    last: Option<String>,
}

/// A version of the file at `path`: the SHA-256 of its identity (device,
/// inode, size, modification and change times, after symlinks: a write, a
/// rename over it or a `..data` swap changes it; a read does not) and of its
/// bytes. `None` when it cannot be read.
pub fn file_version(path: &Path, permissions: KeyringPermissions, max_len: u64) -> Option<String> {
    use std::os::unix::fs::MetadataExt as _;
    let meta = std::fs::metadata(path).ok()?;
    let bytes = read_protected_file(path, permissions, max_len).ok()?;
    let mut seen = Zeroizing::new(Vec::with_capacity(bytes.len() + 48));
    for field in [
        meta.dev(),
        meta.ino(),
        meta.size(),
        meta.mtime() as u64,
        meta.mtime_nsec() as u64,
        meta.ctime() as u64,
        meta.ctime_nsec() as u64,
    ] {
        seen.extend_from_slice(&field.to_be_bytes());
    }
    seen.extend_from_slice(&bytes);
    Some(sha256_hex(&seen))
}

impl RefusalMemory {
    /// Whether the refusal of a file's `version` (`None`: unreadable) with
    /// `error` is new, remembering it. With `force` (SIGHUP) it is always
    /// reported.
    pub fn is_new(&mut self, force: bool, error: &str, version: Option<&str>) -> bool {
        let mut seen = Vec::with_capacity(error.len() + 65);
        seen.extend_from_slice(error.as_bytes());
        seen.push(0);
        if let Some(version) = version {
            seen.extend_from_slice(version.as_bytes());
        }
        let fingerprint = sha256_hex(&seen);
        let new = force || self.last.as_deref() != Some(fingerprint.as_str());
        self.last = Some(fingerprint);
        new
    }

    /// Forgets the last refusal: the file in service is good again.
    pub fn clear(&mut self) {
        self.last = None;
    }
}

/// Reloads one keyring file into the shared keyring.
pub struct KeyringReloader {
    path: PathBuf,
    permissions: KeyringPermissions,
    shared: SharedKeyring,
    metrics: Arc<Metrics>,
    /// The counters per key, kept across reloads.
    book: Arc<EvidenceBook>,
    /// The bytes of the keyring in service, to ignore directory events that
    /// did not change the file (editor swap files, touches, other files).
    last_good: Zeroizing<Vec<u8>>,
    /// The last refused version of the file, reported once.
    refused: RefusalMemory,
    loader: Loader,
    timeout: Duration,
    /// Reads running now: at most one in progress, plus any abandoned ones
    /// that are still stuck.
    reads: OffThreadReads,
}

impl std::fmt::Debug for KeyringReloader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyringReloader")
            .field("path", &self.path)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// Decrements the running-reads count when a read thread ends, however it ends.
struct ReadRunning(Arc<AtomicUsize>);

impl Drop for ReadRunning {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Reads of a file that grants power over the sidecar (the keyring, the
/// bearer tokens), each on a thread of its own under a time limit, so that a
/// hung file system (or a file stuck mid-write on a network volume) can
/// neither hang a reload nor pile up threads: a read past its limit is
/// abandoned (never applied, even if it ends later), and no new read starts
/// while four (`MAX_STUCK_READS`) abandoned ones are still stuck.
#[derive(Debug, Default, Clone)]
pub struct OffThreadReads {
    running: Arc<AtomicUsize>,
}

/// Why an off-thread read gave nothing.
#[derive(Debug)]
pub enum ReadAbandoned {
    /// Too many earlier reads are still stuck: this one did not start.
    Stuck(usize),
    /// No thread could be started.
    NoThread(std::io::Error),
    /// The thread ended without an answer (it panicked).
    NoAnswer,
    /// It took longer than its limit and was abandoned.
    TimedOut(Duration),
}

impl std::fmt::Display for ReadAbandoned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadAbandoned::Stuck(n) => {
                write!(f, "{n} earlier reads are still stuck; not starting another")
            }
            ReadAbandoned::NoThread(e) => write!(f, "cannot start a reload thread: {e}"),
            ReadAbandoned::NoAnswer => f.write_str("the reload thread ended without an answer"),
            ReadAbandoned::TimedOut(limit) => write!(
                f,
                "reading took longer than {} ms; abandoned (it will not be applied if it \
                 ends later); the next change or SIGHUP tries again",
                limit.as_millis()
            ),
        }
    }
}

impl OffThreadReads {
    /// Runs `read` on a thread named `name` and waits for it at most `limit`.
    pub async fn read<T: Send + 'static>(
        &self,
        name: &str,
        limit: Duration,
        read: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, ReadAbandoned> {
        let stuck = self.running.load(Ordering::SeqCst);
        if stuck >= MAX_STUCK_READS {
            return Err(ReadAbandoned::Stuck(stuck));
        }
        let (tx, mut rx) = oneshot::channel();
        self.running.fetch_add(1, Ordering::SeqCst);
        let running = ReadRunning(self.running.clone());
        std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                let _running = running;
                // The receiver is gone only if this read was given up on.
                let _ = tx.send(read());
            })
            // The closure (and its `ReadRunning`) was dropped with the error.
            .map_err(ReadAbandoned::NoThread)?;
        let answer = match tokio::time::timeout(limit, &mut rx).await {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(_)) => Err(ReadAbandoned::NoAnswer),
            Err(_elapsed) => Err(ReadAbandoned::TimedOut(limit)),
        };
        // Given up on or not, nothing more is taken from this read.
        drop(rx);
        answer
    }

    /// Reads running now, abandoned ones still stuck included.
    pub fn running(&self) -> usize {
        self.running.load(Ordering::SeqCst)
    }
}

impl KeyringReloader {
    /// A reloader for the file the sidecar started with. `initial_contents`
    /// are that file's bytes as first loaded; `book` keeps the per-key
    /// counters across reloads. Each reload may take up to
    /// [`RELOAD_TIMEOUT`].
    pub fn new(
        path: PathBuf,
        permissions: KeyringPermissions,
        shared: SharedKeyring,
        metrics: Arc<Metrics>,
        book: Arc<EvidenceBook>,
        initial_contents: Zeroizing<Vec<u8>>,
    ) -> Self {
        KeyringReloader {
            path,
            permissions,
            shared,
            metrics,
            book,
            last_good: initial_contents,
            refused: RefusalMemory::default(),
            loader: Arc::new(load_keyring_file),
            timeout: RELOAD_TIMEOUT,
            reads: OffThreadReads::default(),
        }
    }

    /// The same reloader with another time limit per reload.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    #[cfg(test)]
    fn with_loader(mut self, loader: Loader) -> Self {
        self.loader = loader;
        self
    }

    /// Reports a refused reload (an `ERROR` line and one count), unless it
    /// is the same refusal of the same bytes as the last one and not forced.
    fn refused(&mut self, force: bool, error: &dyn std::fmt::Display, version: Option<&str>) {
        let text = error.to_string();
        let generation = self.shared.load().generation;
        if !self.refused.is_new(force, &text, version) {
            tracing::debug!(
                generation,
                "keyring unchanged since its last refusal; not reported again"
            );
            return;
        }
        self.metrics.reload_failed();
        tracing::error!(
            error = %text,
            generation,
            "keyring reload refused; still serving the previous keyring"
        );
    }

    /// A reload abandoned for its time limit or stuck reads: always reported.
    fn abandoned(&mut self, abandoned: &ReadAbandoned) {
        if matches!(abandoned, ReadAbandoned::TimedOut(_)) {
            self.metrics.reload_timed_out();
        }
        self.metrics.reload_failed();
        tracing::error!(
            error = %format_args!("{}: {abandoned}", self.path.display()),
            generation = self.shared.load().generation,
            "keyring reload refused; still serving the previous keyring"
        );
    }

    /// Reads and validates the file on a thread of its own, for at most the
    /// time limit, checks its schedule against the policy served, and, if it
    /// is good and (unless `force`) different, swaps it in. On any failure,
    /// the time limit included, the keyring in service stays; a read that
    /// was given up on is never applied, even if it ends later. A refusal
    /// is reported once per version of the file ([`RefusalMemory`]) unless
    /// `force`.
    pub async fn reload(&mut self, force: bool) {
        let (loader, path, permissions) =
            (self.loader.clone(), self.path.clone(), self.permissions);
        let read = self
            .reads
            .read("keyring-reload", self.timeout, move || {
                // Before the load: a write after this reading is a new
                // version, read again on its own event.
                let version = file_version(&path, permissions, MAX_KEYRING_FILE_LEN);
                (loader(&path, permissions), version)
            })
            .await;
        let (loaded, version) = match read {
            Ok((Ok(loaded), version)) => (loaded, version),
            Ok((Err(e), version)) => return self.refused(force, &e, version.as_deref()),
            Err(abandoned) => return self.abandoned(&abandoned),
        };
        let current = self.shared.load_full();
        if let Err(error) = loaded.keyring.check_schedule(current.codec.policy()) {
            let error = KeyringLoadError::Invalid {
                path: self.path.clone(),
                error,
            };
            return self.refused(force, &error, version.as_deref());
        }
        if !force && loaded.contents == self.last_good {
            // Back to the file in service: a later refusal is news again.
            self.refused.clear();
            return;
        }
        let generation = current.generation + 1;
        let key_ids: Vec<u32> = loaded.keyring.keys().iter().map(|k| k.id().get()).collect();
        let primary = loaded
            .keyring
            .minting_key(reqstate::Clock::now(&reqstate::SystemClock))
            .id()
            .get();
        let evidence = self.book.for_keyring(&loaded.keyring, &loaded.contents);
        let sha256 = evidence.sha256().to_owned();
        self.metrics.keyring_in_service(&loaded.keyring, generation);
        self.shared.store(Arc::new(KeyringInService {
            codec: current.codec.with_keyring(loaded.keyring),
            generation,
            evidence,
        }));
        self.last_good = loaded.contents;
        self.refused.clear();
        self.metrics.reload_succeeded();
        let key_ids = key_ids
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(",");
        tracing::info!(generation, primary, key_ids, sha256, "keyring reloaded");
    }
}

/// Waits for the directory to be quiet for `debounce` after a change, but
/// no longer than [`MAX_DEBOUNCE_PERIODS`] debounce periods after the first
/// event, adding the directories that changed meanwhile to `changed`.
/// Returns whether a SIGHUP came meanwhile (reload at once, forced), or
/// `None` when the sender is gone.
async fn debounce_events(
    rx: &mut mpsc::UnboundedReceiver<Trigger>,
    debounce: Duration,
    changed: &mut Changed,
) -> Option<bool> {
    // A save or a symlink swap is several events, and a half-written file
    // must not be read (it would only fail validation, but noisily).
    let deadline = Instant::now() + debounce.saturating_mul(MAX_DEBOUNCE_PERIODS);
    loop {
        let wait = debounce.min(deadline.saturating_duration_since(Instant::now()));
        if wait.is_zero() {
            return Some(false);
        }
        match tokio::time::timeout(wait, rx.recv()).await {
            Ok(Some(Trigger::Signal)) => return Some(true),
            Ok(Some(Trigger::DirectoryChange(more))) => changed.add(more),
            Ok(None) => return None,
            Err(_quiet) => return Some(false),
        }
    }
}

/// What reloads on SIGHUP and on changes in its directory.
#[derive(Debug, Default)]
pub struct Reloaders {
    /// The keyring file (absent with `--dev`).
    pub keyring: Option<KeyringReloader>,
    /// The bearer token file (absent without `--auth-token-file`).
    pub token: Option<TokenReloader>,
}

impl Reloaders {
    /// The directories to watch: the keyring's and the token file's.
    fn watched_directories(&self) -> (Option<PathBuf>, Option<PathBuf>) {
        (
            self.keyring.as_ref().map(|k| watched_directory(&k.path)),
            self.token.as_ref().map(|t| watched_directory(t.path())),
        )
    }

    /// Whether there is anything to reload.
    pub fn is_empty(&self) -> bool {
        self.keyring.is_none() && self.token.is_none()
    }

    /// Reloads the files whose directories changed, or both if `force`.
    async fn reload(&mut self, force: bool, changed: Changed) {
        if let Some(token) = self.token.as_mut().filter(|_| force || changed.token) {
            token.reload(force).await;
        }
        if let Some(keyring) = self.keyring.as_mut().filter(|_| force || changed.keyring) {
            keyring.reload(force).await;
        }
    }

    /// The `STATUS=` after a SIGHUP reload.
    fn status(&self) -> String {
        match &self.keyring {
            Some(keyring) => {
                let current = keyring.shared.load();
                format!(
                    "serving; keyring generation {}, primary key {}",
                    current.generation,
                    current
                        .codec
                        .keyring()
                        .minting_key(reqstate::Clock::now(&reqstate::SystemClock))
                        .id()
                        .get()
                )
            }
            None => "serving".to_owned(),
        }
    }
}

/// Starts watching the directories of the reloaders' files and `hangup`
/// (the SIGHUP stream, installed by the caller before anything was bound so
/// that an early SIGHUP cannot kill the process), and reloads until
/// `shutdown` changes. Directories, not files, are watched: Kubernetes
/// Secret volumes swap a `..data` symlink and editors rename a new file over
/// the old one, and neither touches the watched inode of the file itself.
pub fn spawn(
    mut reloaders: Reloaders,
    debounce: Duration,
    mut hangup: tokio::signal::unix::Signal,
    mut shutdown: watch::Receiver<bool>,
) -> Result<tokio::task::JoinHandle<()>, std::io::Error> {
    let (tx, mut rx) = mpsc::unbounded_channel::<Trigger>();

    let (keyring_dir, token_dir) = reloaders.watched_directories();
    let mut dirs: Vec<PathBuf> = Vec::new();
    for dir in [&keyring_dir, &token_dir].into_iter().flatten() {
        if !dirs.contains(dir) {
            dirs.push(dir.clone());
        }
    }
    // An event names paths in the watched directories: it is the keyring's
    // or the token file's (or both, when they share a directory). A
    // directory is matched as given and made absolute (the watcher may
    // report either); an event matched to neither reloads both, so a
    // change is never missed, at worst read twice.
    let forms = |dir: &Option<PathBuf>| -> Vec<PathBuf> {
        dir.iter()
            .flat_map(|d| {
                [
                    d.clone(),
                    std::path::absolute(d).unwrap_or_else(|_| d.clone()),
                ]
            })
            .collect()
    };
    let (keyring_forms, token_forms) = (forms(&keyring_dir), forms(&token_dir));
    let in_dir = |forms: &[PathBuf], event: &notify::Event| {
        event
            .paths
            .iter()
            .any(|p| forms.iter().any(|dir| p.parent() == Some(dir.as_path())))
    };
    let watch_tx = tx.clone();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        match event {
            Ok(event) if event.kind.is_access() => {}
            Ok(event) => {
                tracing::trace!(kind = ?event.kind, paths = ?event.paths, "directory event");
                let changed = Changed {
                    keyring: in_dir(&keyring_forms, &event),
                    token: in_dir(&token_forms, &event),
                };
                let changed = if changed == Changed::default() {
                    Changed::BOTH
                } else {
                    changed
                };
                // The receiver is gone only when shutting down.
                let _ = watch_tx.send(Trigger::DirectoryChange(changed));
            }
            Err(e) => tracing::warn!(error = %e, "reload directory watch error"),
        }
    })
    .map_err(std::io::Error::other)?;
    for dir in &dirs {
        watcher
            .watch(dir, RecursiveMode::NonRecursive)
            .map_err(|e| std::io::Error::other(format!("cannot watch {}: {e}", dir.display())))?;
    }

    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = hangup.recv() => {
                    if tx.send(Trigger::Signal).is_err() {
                        return;
                    }
                }
                _ = shutdown.changed() => return,
            }
        }
    });

    Ok(tokio::spawn(async move {
        // Owned by the task so that watching stops when reloading does.
        let _watcher = watcher;
        while let Some(trigger) = rx.recv().await {
            let mut changed = Changed::default();
            let mut force = match trigger {
                Trigger::Signal => true,
                Trigger::DirectoryChange(first) => {
                    changed = first;
                    false
                }
            };
            if !force {
                match debounce_events(&mut rx, debounce, &mut changed).await {
                    Some(signal) => force = signal,
                    None => return,
                }
            }
            // Whatever queued up so far is covered by the reads about to start.
            while let Ok(queued) = rx.try_recv() {
                match queued {
                    Trigger::Signal => force = true,
                    Trigger::DirectoryChange(more) => changed.add(more),
                }
            }
            tracing::debug!(force, "reloading");
            if force {
                // A SIGHUP (`systemctl reload`): the service manager waits
                // for READY=1 again, sent whatever the outcome.
                service_manager::reloading();
                reloaders.reload(force, changed).await;
                service_manager::ready(&reloaders.status());
            } else {
                reloaders.reload(force, changed).await;
            }
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    use arc_swap::ArcSwap;
    use reqstate::{Codec, Keyring};

    const ONE_KEY: &str = "[[key]]\nid = 1\nstatus = \"primary\"\nsecret = \"AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\"\n";
    const TWO_KEYS: &str = "[[key]]\nid = 1\nstatus = \"active\"\nsecret = \"AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\"\n[[key]]\nid = 2\nstatus = \"primary\"\nsecret = \"ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8=\"\n";

    fn loaded(text: &str) -> Result<LoadedKeyringFile, KeyringLoadError> {
        Keyring::from_toml(text)
            .map(|keyring| LoadedKeyringFile {
                keyring,
                contents: Zeroizing::new(text.as_bytes().to_vec()),
            })
            .map_err(|error| KeyringLoadError::Invalid {
                path: PathBuf::from("test"),
                error,
            })
    }

    fn metric(metrics: &Metrics, series: &str) -> Option<f64> {
        let text = String::from_utf8(metrics.render()).ok()?;
        text.lines().find_map(|l| {
            l.strip_prefix(series)?
                .strip_prefix(' ')?
                .trim()
                .parse()
                .ok()
        })
    }

    #[test]
    fn bare_file_name_watches_the_current_directory() {
        assert_eq!(watched_directory(Path::new("k.toml")), PathBuf::from("."));
        assert_eq!(
            watched_directory(Path::new("/etc/reqstate/k.toml")),
            PathBuf::from("/etc/reqstate")
        );
    }

    /// A read that never returns (a hung file system) is abandoned after the
    /// time limit with an error and a metric; the next reload runs and
    /// applies; and the abandoned read, when it finally ends, changes nothing.
    #[tokio::test]
    async fn a_hung_reload_is_abandoned_and_later_reloads_still_apply()
    -> Result<(), Box<dyn std::error::Error>> {
        let metrics = Arc::new(Metrics::new()?);
        let book = EvidenceBook::new();
        let first = Keyring::from_toml(ONE_KEY)?;
        let shared: SharedKeyring = Arc::new(ArcSwap::from_pointee(KeyringInService {
            evidence: book.for_keyring(&first, ONE_KEY.as_bytes()),
            codec: Codec::new(first),
            generation: 1,
        }));
        let (release, released) = std::sync::mpsc::channel::<()>();
        let released = Mutex::new(released);
        let calls = AtomicUsize::new(0);
        let loader: Loader = Arc::new(move |_: &Path, _: KeyringPermissions| {
            if calls.fetch_add(1, Ordering::SeqCst) == 0 {
                // The first read hangs until the test lets it go, then
                // returns a keyring that must never be applied.
                if let Ok(rx) = released.lock() {
                    let _ = rx.recv();
                }
                return loaded(
                    "[[key]]\nid = 9\nstatus = \"primary\"\nsecret = \"AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\"\n",
                );
            }
            loaded(TWO_KEYS)
        });
        let mut reloader = KeyringReloader::new(
            PathBuf::from("keyring.toml"),
            KeyringPermissions::OwnerOnly,
            shared.clone(),
            metrics.clone(),
            book,
            Zeroizing::new(ONE_KEY.as_bytes().to_vec()),
        )
        .with_timeout(Duration::from_millis(200))
        .with_loader(loader);

        reloader.reload(true).await;
        assert_eq!(shared.load().generation, 1);
        assert_eq!(
            metric(&metrics, "reqstate_keyring_reload_timeouts_total"),
            Some(1.0)
        );
        assert_eq!(
            metric(&metrics, "reqstate_keyring_reload_failures_total"),
            Some(1.0)
        );

        reloader.reload(false).await;
        assert_eq!(shared.load().generation, 2);
        assert_eq!(shared.load().codec.keyring().primary().id().get(), 2);

        // Let the abandoned read end; wait (bounded) until its thread is gone.
        release.send(())?;
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while reloader.reads.running() > 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "the released read never ended"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(shared.load().generation, 2);
        assert_eq!(shared.load().codec.keyring().primary().id().get(), 2);
        Ok(())
    }

    /// The same refusal of the same version is reported once; another
    /// error, another version, a forced reload or a good file in between
    /// make it news again.
    #[test]
    fn a_refusal_is_news_once_per_version_and_error() {
        let mut memory = RefusalMemory::default();
        assert!(memory.is_new(false, "line 3: bad", Some("v1")));
        assert!(!memory.is_new(false, "line 3: bad", Some("v1")));
        assert!(memory.is_new(true, "line 3: bad", Some("v1")), "SIGHUP");
        assert!(memory.is_new(false, "line 3: bad", Some("v2")));
        assert!(memory.is_new(false, "line 4: bad", Some("v2")));
        assert!(memory.is_new(false, "line 4: bad", None));
        assert!(!memory.is_new(false, "line 4: bad", None));
        memory.clear();
        assert!(memory.is_new(false, "line 4: bad", None));
    }

    /// A read leaves a file's version as it was; a rewrite of the same
    /// bytes is a new version.
    #[test]
    fn a_files_version_changes_with_a_write_not_a_read() -> Result<(), Box<dyn std::error::Error>> {
        use std::os::unix::fs::PermissionsExt as _;
        let scratch = tempfile::tempdir()?;
        let dir = scratch.path();
        let path = dir.join("k.toml");
        let write = |text: &str| -> std::io::Result<()> {
            let tmp = dir.join("k.tmp");
            std::fs::write(&tmp, text)?;
            std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600))?;
            std::fs::rename(&tmp, &path)
        };
        write("one")?;
        let first = file_version(&path, KeyringPermissions::OwnerOnly, 100).ok_or("readable")?;
        let _ = std::fs::read(&path)?;
        assert_eq!(
            file_version(&path, KeyringPermissions::OwnerOnly, 100).as_deref(),
            Some(first.as_str())
        );
        write("one")?;
        assert_ne!(
            file_version(&path, KeyringPermissions::OwnerOnly, 100).as_deref(),
            Some(first.as_str())
        );
        assert_eq!(
            file_version(&dir.join("missing"), KeyringPermissions::OwnerOnly, 100),
            None
        );
        Ok(())
    }

    /// Events every few milliseconds, for longer than the longest
    /// postponement: the debounce still ends.
    #[tokio::test]
    async fn continuous_events_postpone_a_reload_only_so_long() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let noise = tokio::spawn(async move {
            for _ in 0..1000 {
                if tx.send(Trigger::DirectoryChange(Changed::BOTH)).is_err() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        });
        let outcome = tokio::time::timeout(
            Duration::from_secs(10),
            debounce_events(&mut rx, Duration::from_millis(20), &mut Changed::default()),
        )
        .await;
        assert_eq!(outcome, Ok(Some(false)), "the debounce never ended");
        noise.abort();
    }
}
