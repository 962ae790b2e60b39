//! Keyring hot reload: SIGHUP and changes in the keyring's directory, debounced, validated whole, then swapped in atomically.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use notify::{RecursiveMode, Watcher};
use tokio::sync::{mpsc, watch};
use zeroize::Zeroizing;

use crate::keyring_source::{KeyringPermissions, load_keyring_file};
use crate::metrics::Metrics;
use crate::service::{KeyringInService, SharedKeyring};

/// What asked for a reload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Trigger {
    /// SIGHUP: always reload, even if the file is byte-for-byte the same
    /// (a `secret_file` or `secret_env` it names may have changed).
    Signal,
    /// Something changed in the keyring's directory.
    DirectoryChange,
}

/// Reloads one keyring file into the shared keyring.
pub struct KeyringReloader {
    path: PathBuf,
    permissions: KeyringPermissions,
    shared: SharedKeyring,
    metrics: Arc<Metrics>,
    /// The bytes of the keyring in service, to ignore directory events that
    /// did not change the file (editor swap files, touches, other files).
    last_good: Zeroizing<Vec<u8>>,
}

impl std::fmt::Debug for KeyringReloader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyringReloader")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl KeyringReloader {
    /// A reloader for the file the sidecar started with. `initial_contents`
    /// are that file's bytes as first loaded.
    pub fn new(
        path: PathBuf,
        permissions: KeyringPermissions,
        shared: SharedKeyring,
        metrics: Arc<Metrics>,
        initial_contents: Zeroizing<Vec<u8>>,
    ) -> Self {
        KeyringReloader {
            path,
            permissions,
            shared,
            metrics,
            last_good: initial_contents,
        }
    }

    /// Reads and validates the file and, if it is good and (unless `force`)
    /// different, swaps it in. On any failure the keyring in service stays.
    fn reload(&mut self, force: bool) {
        let loaded = match load_keyring_file(&self.path, self.permissions) {
            Ok(loaded) => loaded,
            Err(e) => {
                self.metrics.reload_failed();
                let generation = self.shared.load().generation;
                tracing::error!(
                    error = %e,
                    generation,
                    "keyring reload refused; still serving the previous keyring"
                );
                return;
            }
        };
        if !force && loaded.contents == self.last_good {
            return;
        }
        let current = self.shared.load();
        let generation = current.generation + 1;
        let key_ids: Vec<u32> = loaded.keyring.keys().iter().map(|k| k.id().get()).collect();
        let primary = loaded.keyring.primary().id().get();
        self.metrics.keyring_in_service(&loaded.keyring, generation);
        self.shared.store(Arc::new(KeyringInService {
            codec: current.codec.with_keyring(loaded.keyring),
            generation,
        }));
        self.last_good = loaded.contents;
        self.metrics.reload_succeeded();
        tracing::info!(generation, primary, ?key_ids, "keyring reloaded");
    }
}

/// The directory to watch for a keyring path: its parent, or `.` for a bare
/// file name.
fn watched_directory(path: &Path) -> PathBuf {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Starts watching the keyring's directory and `hangup` (the SIGHUP stream,
/// installed by the caller before anything was bound so that an early SIGHUP
/// cannot kill the process), and reloads until `shutdown` changes. The directory, not the file, is watched: Kubernetes
/// Secret volumes swap a `..data` symlink and editors rename a new file over
/// the old one, and neither touches the watched inode of the file itself.
pub fn spawn(
    mut reloader: KeyringReloader,
    debounce: Duration,
    mut hangup: tokio::signal::unix::Signal,
    mut shutdown: watch::Receiver<bool>,
) -> Result<tokio::task::JoinHandle<()>, std::io::Error> {
    let (tx, mut rx) = mpsc::unbounded_channel::<Trigger>();

    let dir = watched_directory(&reloader.path);
    let watch_tx = tx.clone();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        match event {
            Ok(event) if event.kind.is_access() => {}
            Ok(_) => {
                // The receiver is gone only when shutting down.
                let _ = watch_tx.send(Trigger::DirectoryChange);
            }
            Err(e) => tracing::warn!(error = %e, "keyring directory watch error"),
        }
    })
    .map_err(std::io::Error::other)?;
    watcher
        .watch(&dir, RecursiveMode::NonRecursive)
        .map_err(|e| std::io::Error::other(format!("cannot watch {}: {e}", dir.display())))?;

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
            let mut force = trigger == Trigger::Signal;
            if !force {
                // Wait for the directory to be quiet: a save or a symlink
                // swap is several events, and a half-written file must not
                // be read (it would only fail validation, but noisily).
                loop {
                    match tokio::time::timeout(debounce, rx.recv()).await {
                        Ok(Some(Trigger::Signal)) => {
                            force = true;
                            break;
                        }
                        Ok(Some(Trigger::DirectoryChange)) => continue,
                        Ok(None) => return,
                        Err(_quiet) => break,
                    }
                }
            }
            tracing::debug!(force, "reloading keyring");
            // File reads and key derivation are short and bounded; run them
            // off the async workers anyway so a slow disk stalls no call.
            reloader = match tokio::task::spawn_blocking(move || {
                reloader.reload(force);
                reloader
            })
            .await
            {
                Ok(reloader) => reloader,
                Err(e) => {
                    tracing::error!(error = %e, "keyring reload task failed; reloading stops");
                    return;
                }
            };
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_file_name_watches_the_current_directory() {
        assert_eq!(watched_directory(Path::new("k.toml")), PathBuf::from("."));
        assert_eq!(
            watched_directory(Path::new("/etc/reqstate/k.toml")),
            PathBuf::from("/etc/reqstate")
        );
    }
}
