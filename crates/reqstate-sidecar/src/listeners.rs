//! Binding the gRPC listeners: Unix sockets private from their first moment and mode 0600, or 0660 for one chosen group (stale sockets removed only when provably dead), and TCP.

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
        // The next step, not only the OS's words (issue 40 item 9).
        match (self.error.kind(), &self.addr) {
            (io::ErrorKind::AddrInUse, ListenAddr::Tcp(addr)) => write!(
                f,
                "cannot listen on {}: the address is already in use (another sidecar or program \
                 holds it: see which with `ss -ltnp 'sport = :{}'`, or choose another port \
                 with --listen)",
                self.addr,
                addr.port()
            ),
            (io::ErrorKind::AddrInUse, ListenAddr::Unix(_)) => write!(
                f,
                "cannot listen on {}: a live socket is already there (another sidecar serves \
                 it: stop that one, or choose another path with --listen)",
                self.addr
            ),
            (io::ErrorKind::PermissionDenied, ListenAddr::Tcp(addr)) if addr.port() < 1024 => {
                write!(
                    f,
                    "cannot listen on {}: permission denied (a port below 1024 needs \
                     CAP_NET_BIND_SERVICE: choose a higher port with --listen)",
                    self.addr
                )
            }
            (io::ErrorKind::PermissionDenied, _) => write!(
                f,
                "cannot listen on {}: permission denied (this user may not create it there: \
                 choose a directory it owns with --listen)",
                self.addr
            ),
            _ => write!(f, "cannot listen on {}: {}", self.addr, self.error),
        }
    }
}

impl std::error::Error for BindError {}

/// Binds one listener. A Unix socket is mode 0600, or with `socket_group`
/// mode 0660 and that group.
pub async fn bind(
    addr: &ListenAddr,
    socket_group: Option<u32>,
) -> Result<BoundListener, BindError> {
    let wrap = |error| BindError {
        addr: addr.clone(),
        error,
    };
    match addr {
        ListenAddr::Unix(path) => {
            bind_unix(path, socket_group)
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

/// Binds a Unix socket that only its owner can connect to (or, with
/// `group`, its owner and that group), from the first moment it exists,
/// whatever the umask: it is bound inside a fresh directory of mode 0700
/// next to `path` (so no other user can reach it there, even while its own
/// mode is still the umask's), given its group and restricted to 0600 or
/// 0660, then renamed into place, and the directory removed. The umask is
/// never touched: it is process-wide, and the runtime is multi-threaded.
fn bind_unix(path: &Path, group: Option<u32>) -> io::Result<UnixListener> {
    bind_unix_observed(path, group, &mut |_| {})
}

/// [`bind_unix`], calling `observe` with the socket's path at the first
/// moment the socket exists (for tests).
fn bind_unix_observed(
    path: &Path,
    group: Option<u32>,
    observe: &mut dyn FnMut(&Path),
) -> io::Result<UnixListener> {
    clear_stale_socket(path)?;
    if path.file_name().is_none() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the socket path has no file name",
        ));
    }
    let staging = PrivateDir::create_next_to(path)?;
    // A short name inside the directory, so the staging path is barely
    // longer than the real one (socket paths are limited to 107 bytes).
    let staged = staging.path.join("s");
    let listener = UnixListener::bind(&staged)?;
    observe(&staged);
    let mode = match group {
        Some(gid) => {
            std::os::unix::fs::chown(&staged, None, Some(gid)).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("cannot give the socket to group {gid} (--socket-group): {e}"),
                )
            })?;
            0o660
        }
        None => 0o600,
    };
    std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(mode))?;
    std::fs::rename(&staged, path)?;
    Ok(listener)
}

/// A directory only its owner can enter, removed (with anything left in
/// it by a failed bind) when dropped.
struct PrivateDir {
    path: PathBuf,
}

impl PrivateDir {
    /// Creates `.<name>.<pid>.<n>.bind` in `path`'s directory with mode
    /// 0700. `mkdir` fails on an existing name, so a directory (or link)
    /// planted there by someone else is never used.
    fn create_next_to(path: &Path) -> io::Result<PrivateDir> {
        use std::os::unix::fs::DirBuilderExt as _;
        use std::sync::atomic::{AtomicU32, Ordering};
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let parent = match path.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent,
            _ => Path::new("."),
        };
        let mut last_error = None;
        for _ in 0..16 {
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let candidate = parent.join(format!(".reqstate.{}.{n}.bind", std::process::id()));
            match std::fs::DirBuilder::new().mode(0o700).create(&candidate) {
                Ok(()) => {
                    let dir = PrivateDir { path: candidate };
                    // The umask can only have narrowed 0700; make it exactly
                    // 0700 so that we can bind inside whatever the umask.
                    std::fs::set_permissions(&dir.path, std::fs::Permissions::from_mode(0o700))?;
                    return Ok(dir);
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last_error = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last_error.unwrap_or_else(|| io::Error::other("no free staging directory name")))
    }
}

impl Drop for PrivateDir {
    fn drop(&mut self) {
        // The socket was renamed out on success; on failure it is still here.
        let _ = std::fs::remove_file(self.path.join("s"));
        let _ = std::fs::remove_dir(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn unix_socket_is_owner_only_and_stale_socket_is_replaced()
    -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("r.sock");
        let first = bind_unix(&path, None)?;
        let mode = std::fs::metadata(&path)?.permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        // A live socket is not taken over.
        assert!(bind_unix(&path, None).is_err());
        drop(first);
        // A dead one is. Other tests in this process start child processes
        // (`can_connect_as`, the bearer file's `mkfifo`), and a child holds
        // a copy of every descriptor between its fork and its exec, where
        // close-on-exec drops them: if one forked while `first` was open,
        // the socket still answers for that moment. So the takeover is
        // retried while the refusal is "serving", for at most 10 s.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            match bind_unix(&path, None) {
                Ok(_) => return Ok(()),
                Err(e)
                    if e.kind() == io::ErrorKind::AddrInUse
                        && std::time::Instant::now() < deadline =>
                {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Whether a user other than the owner could reach `socket` at the
    /// moment it exists, whatever the socket's own mode (which the umask
    /// decides): true unless a directory between `shared` and the socket
    /// refuses group and others.
    fn reachable_by_others(shared: &Path, socket: &Path) -> io::Result<bool> {
        let mut dir = socket.parent();
        while let Some(current) = dir {
            if current == shared {
                return Ok(true);
            }
            if std::fs::metadata(current)?.permissions().mode() & 0o077 == 0 {
                return Ok(false);
            }
            dir = current.parent();
        }
        Ok(true)
    }

    #[tokio::test]
    async fn socket_is_private_from_its_first_moment_in_a_shared_directory()
    -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        // A directory anyone may enter and write, as /tmp or a shared volume.
        let shared = dir.path().join("shared");
        std::fs::create_dir(&shared)?;
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777))?;
        let path = shared.join("r.sock");
        let mut first_seen = None;
        let _listener = bind_unix_observed(&path, None, &mut |socket| {
            // What umask 000 would give the socket at bind: the widest mode.
            let widened = std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o777));
            first_seen = Some((
                socket.to_path_buf(),
                widened.and_then(|()| reachable_by_others(&shared, socket)),
            ));
        })?;
        let (socket, reachable) = first_seen.ok_or("the socket was never observed")?;
        assert!(
            !reachable?,
            "{} was reachable by other users before it was made private",
            socket.display()
        );
        let mode = std::fs::metadata(&path)?.permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        // Nothing but the socket is left in the shared directory.
        let entries: Vec<_> = std::fs::read_dir(&shared)?
            .map(|e| e.map(|e| e.file_name()))
            .collect::<Result<_, _>>()?;
        assert_eq!(entries, vec![std::ffi::OsString::from("r.sock")]);
        Ok(())
    }

    #[tokio::test]
    async fn regular_file_at_socket_path_is_never_removed() -> Result<(), Box<dyn std::error::Error>>
    {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("r.sock");
        std::fs::write(&path, b"precious")?;
        assert!(bind_unix(&path, None).is_err());
        assert_eq!(std::fs::read(&path)?, b"precious");
        Ok(())
    }

    /// Whether `uid`:`gid` can connect to `socket` (std drops a root parent's
    /// supplementary groups when it sets the uid),
    /// asked of a child process that runs as them.
    fn can_connect_as(socket: &Path, uid: u32, gid: u32) -> io::Result<bool> {
        use std::os::unix::process::CommandExt as _;
        let status = std::process::Command::new("python3")
            .args([
                "-c",
                "import socket, sys; socket.socket(socket.AF_UNIX).connect(sys.argv[1])",
            ])
            .arg(socket)
            .uid(uid)
            .gid(gid)
            .stderr(std::process::Stdio::null())
            .status()?;
        Ok(status.success())
    }

    #[tokio::test]
    async fn socket_group_gets_mode_0660_and_admits_that_group_only()
    -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("r.sock");
        // A gid nobody has: the process can give a socket to it only as root.
        const GROUP: u32 = 54_321;
        const STRANGER: u32 = 54_322;
        if !nix::unistd::geteuid().is_root() {
            let refused = bind_unix(&path, Some(GROUP))
                .err()
                .ok_or("a non-root process gave a socket to a group it is not in")?;
            assert!(refused.to_string().contains("--socket-group"), "{refused}");
            assert!(!path.exists());
            return Ok(());
        }
        let _listener = bind_unix(&path, Some(GROUP))?;
        let metadata = std::fs::metadata(&path)?;
        assert_eq!(metadata.permissions().mode() & 0o777, 0o660);
        assert_eq!(std::os::unix::fs::MetadataExt::gid(&metadata), GROUP);
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))?;
        assert!(
            can_connect_as(&path, STRANGER, GROUP)?,
            "a member of the group could not connect"
        );
        assert!(
            !can_connect_as(&path, STRANGER, STRANGER)?,
            "a user outside the group connected"
        );
        Ok(())
    }
}
