//! Binding the gRPC listeners: Unix sockets created with mode 0600 (stale sockets removed only when provably dead) and TCP.

use std::io;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};

use tokio::net::{TcpListener, UnixListener};

use crate::config::ListenAddr;

/// A bound listener, ready to accept.
#[derive(Debug)]
pub enum BoundListener {
    /// A Unix socket; the path is removed again at shutdown.
    Unix {
        /// The listener.
        listener: UnixListener,
        /// The socket's path.
        path: PathBuf,
    },
    /// A TCP socket.
    Tcp(TcpListener),
}

/// Why a listener could not be bound.
#[derive(Debug)]
pub struct BindError {
    addr: ListenAddr,
    error: io::Error,
}

impl std::fmt::Display for BindError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cannot listen on {}: {}", self.addr, self.error)
    }
}

impl std::error::Error for BindError {}

/// Binds one listener.
pub async fn bind(addr: &ListenAddr) -> Result<BoundListener, BindError> {
    let wrap = |error| BindError {
        addr: addr.clone(),
        error,
    };
    match addr {
        ListenAddr::Unix(path) => {
            bind_unix(path)
                .map_err(wrap)
                .map(|listener| BoundListener::Unix {
                    listener,
                    path: path.clone(),
                })
        }
        ListenAddr::Tcp(sock) => TcpListener::bind(sock)
            .await
            .map(BoundListener::Tcp)
            .map_err(wrap),
    }
}

/// Removes a socket left by a previous run, but only when it is a socket and
/// nothing answers on it: a regular file is never deleted, and a live
/// sidecar is never displaced.
fn clear_stale_socket(path: &Path) -> io::Result<()> {
    let metadata = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    if !metadata.file_type().is_socket() {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            "the path exists and is not a socket; refusing to remove it",
        ));
    }
    match std::os::unix::net::UnixStream::connect(path) {
        Ok(_) => Err(io::Error::new(
            io::ErrorKind::AddrInUse,
            "another process is serving on this socket",
        )),
        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
            tracing::info!(path = %path.display(), "removing stale socket");
            std::fs::remove_file(path)
        }
        Err(e) => Err(e),
    }
}

/// Binds a Unix socket that only its owner can connect to. The socket is
/// bound under a temporary name, restricted to 0600, then renamed into
/// place, so it is never reachable at its real path with a wider mode
/// whatever the umask.
fn bind_unix(path: &Path) -> io::Result<UnixListener> {
    clear_stale_socket(path)?;
    let file_name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no file name"))?;
    let mut temporary_name = std::ffi::OsString::from(".");
    temporary_name.push(file_name);
    temporary_name.push(format!(".{}.binding", std::process::id()));
    let temporary = path.with_file_name(temporary_name);
    match std::fs::remove_file(&temporary) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let listener = UnixListener::bind(&temporary)?;
    let placed = std::fs::set_permissions(&temporary, std::fs::Permissions::from_mode(0o600))
        .and_then(|()| std::fs::rename(&temporary, path));
    if let Err(e) = placed {
        let _ = std::fs::remove_file(&temporary);
        return Err(e);
    }
    Ok(listener)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn unix_socket_is_owner_only_and_stale_socket_is_replaced()
    -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("r.sock");
        let first = bind_unix(&path)?;
        let mode = std::fs::metadata(&path)?.permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        // A live socket is not taken over.
        assert!(bind_unix(&path).is_err());
        drop(first);
        // A dead one is.
        bind_unix(&path)?;
        Ok(())
    }

    #[tokio::test]
    async fn regular_file_at_socket_path_is_never_removed() -> Result<(), Box<dyn std::error::Error>>
    {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("r.sock");
        std::fs::write(&path, b"precious")?;
        assert!(bind_unix(&path).is_err());
        assert_eq!(std::fs::read(&path)?, b"precious");
        Ok(())
    }
}
