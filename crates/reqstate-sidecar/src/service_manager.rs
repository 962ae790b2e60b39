//! Readiness for service managers: systemd's notification protocol
//! (`sd_notify(3)`, `Type=notify`). When `$NOTIFY_SOCKET` is set, the
//! sidecar reports `READY=1` once every listener is bound and serving,
//! `RELOADING=1` while a SIGHUP reload runs (then `READY=1` again, whatever
//! the reload's outcome: the previous keyring stays in service on failure),
//! and `STOPPING=1` when it starts draining. Without `$NOTIFY_SOCKET` every
//! call does nothing.
//!
//! Written here rather than taken from a crate: the protocol is one
//! datagram of `KEY=value` lines, and the `sd-notify` crate (0.5) connects
//! `$NOTIFY_SOCKET` as a file path only, while systemd also hands out
//! abstract addresses (`@name`), as in containers and `systemd-run --user`.
//!
//! A notification that cannot be sent is logged and otherwise ignored: the
//! sidecar serves either way, and systemd reports a start that never became
//! ready by its own timeout.

use std::io;
use std::os::linux::net::SocketAddrExt as _;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::net::{SocketAddr, UnixDatagram};

const NOTIFY_SOCKET: &str = "NOTIFY_SOCKET";

/// Whether a service manager asked for notifications.
pub fn requested() -> bool {
    std::env::var_os(NOTIFY_SOCKET).is_some()
}

/// Every listener is bound and serving. `status` is a one-line summary for
/// `systemctl status`.
pub fn ready(status: &str) {
    send("ready", &format!("READY=1\nSTATUS={}\n", one_line(status)));
}

/// A SIGHUP reload is starting.
pub fn reloading() {
    // MONOTONIC_USEC tells systemd (≥ 253, `Type=notify-reload`) which
    // reload this is; older versions ignore it.
    let message = match monotonic_usec() {
        Ok(usec) => format!("RELOADING=1\nMONOTONIC_USEC={usec}\n"),
        Err(e) => {
            tracing::debug!(error = %e, "cannot read CLOCK_MONOTONIC for MONOTONIC_USEC");
            "RELOADING=1\n".to_owned()
        }
    };
    send("reloading", &message);
}

/// The sidecar is draining and will exit.
pub fn stopping() {
    send("stopping", "STOPPING=1\nSTATUS=draining\n");
}

fn send(what: &str, message: &str) {
    let Some(target) = std::env::var_os(NOTIFY_SOCKET) else {
        return;
    };
    match notify(target.as_bytes(), message.as_bytes()) {
        Ok(()) => tracing::debug!(notification = what, "notified the service manager"),
        Err(e) => tracing::warn!(
            notification = what,
            error = %e,
            "cannot notify the service manager on $NOTIFY_SOCKET"
        ),
    }
}

/// Sends one datagram to `target`: a path (`/run/systemd/notify`) or an
/// abstract name (`@name`).
fn notify(target: &[u8], message: &[u8]) -> io::Result<()> {
    let addr = match target {
        [b'@', name @ ..] => SocketAddr::from_abstract_name(name)?,
        [b'/', ..] => SocketAddr::from_pathname(std::ffi::OsStr::from_bytes(target))?,
        _ => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "NOTIFY_SOCKET is neither an absolute path nor an abstract name (@…)",
            ));
        }
    };
    let socket = UnixDatagram::unbound()?;
    socket.connect_addr(&addr)?;
    let sent = socket.send(message)?;
    if sent != message.len() {
        return Err(io::Error::new(
            io::ErrorKind::WriteZero,
            format!("sent {sent} of {} bytes", message.len()),
        ));
    }
    Ok(())
}

fn monotonic_usec() -> nix::Result<u64> {
    let now = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)?;
    let secs = u64::try_from(now.tv_sec()).unwrap_or(0);
    let nanos = u64::try_from(now.tv_nsec()).unwrap_or(0);
    Ok(secs.saturating_mul(1_000_000).saturating_add(nanos / 1_000))
}

/// The protocol is newline-separated `KEY=value` lines: a status must not
/// start another line.
fn one_line(status: &str) -> String {
    status.replace(['\n', '\r'], " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_never_spans_lines() {
        assert_eq!(one_line("a\nREADY=1\r\nb"), "a READY=1  b");
        assert_eq!(one_line("serving"), "serving");
    }

    #[test]
    fn a_relative_or_unknown_address_is_refused_not_guessed() {
        for target in [&b"notify.sock"[..], b"vsock:2:1234", b""] {
            let e = notify(target, b"READY=1\n").expect_err("refused");
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{target:?}");
        }
    }

    #[test]
    fn one_datagram_reaches_a_path_socket() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("notify");
        let receiver = UnixDatagram::bind(&path).expect("bind");
        notify(path.as_os_str().as_bytes(), b"READY=1\nSTATUS=x\n").expect("sent");
        let mut buf = [0u8; 64];
        let n = receiver.recv(&mut buf).expect("recv");
        assert_eq!(&buf[..n], b"READY=1\nSTATUS=x\n");
    }

    #[test]
    fn the_monotonic_clock_moves_forward() {
        let a = monotonic_usec().expect("clock");
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = monotonic_usec().expect("clock");
        assert!(a > 0 && b > a, "{a} then {b}");
    }
}
