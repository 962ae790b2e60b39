//! The probes an orchestrator uses, against the real binary: `reqstate
//! health` (an exec probe: exit 0 only on SERVING) and `GET /live` and
//! `GET /ready` on the metrics listener, before and during a drain.

use crate::sidecar_process;

use std::net::SocketAddr;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use sidecar_process::{Sidecar, SidecarOptions, TestResult, keyring_toml};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

async fn start(extra: &[&str]) -> TestResult<Sidecar> {
    let mut options = SidecarOptions::new(keyring_toml(&[(1, "primary")]));
    for arg in extra {
        options = options.arg(*arg);
    }
    Sidecar::start(options).await
}

/// `reqstate health ARGS`, with `REQSTATE_LISTEN` set to `env_listen` (or
/// unset).
fn health(args: &[&str], env_listen: Option<&str>) -> TestResult<Output> {
    let mut command = Command::new(sidecar_process::BIN);
    command
        .arg("health")
        .args(args)
        .env_remove("REQSTATE_LISTEN")
        .stdin(Stdio::null());
    if let Some(listen) = env_listen {
        command.env("REQSTATE_LISTEN", listen);
    }
    Ok(command.output()?)
}

fn assert_serving(out: &Output, what: &str) {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "SERVING\n", "{what}");
}

/// `GET path` on the metrics listener: (status code, body).
async fn get(addr: SocketAddr, path: &str) -> TestResult<(u16, String)> {
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    stream
        .write_all(
            format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .await?;
    let mut text = String::new();
    stream.read_to_string(&mut text).await?;
    let code = text
        .split_whitespace()
        .nth(1)
        .ok_or("no status line")?
        .parse()?;
    let body = text.split("\r\n\r\n").nth(1).unwrap_or_default().to_owned();
    Ok((code, body))
}

#[tokio::test]
async fn health_probe_exits_zero_only_when_serving() -> TestResult {
    let sidecar = start(&[]).await?;
    let unix = format!("unix:{}", sidecar.unix.display());
    let tcp = format!("tcp:{}", sidecar.tcp);

    assert_serving(&health(&["--listen", &unix], None)?, "unix");
    assert_serving(&health(&["--listen", &tcp], None)?, "tcp");
    assert_serving(
        &health(
            &["--listen", &unix, "--service", "reqstate.v1.RequestState"],
            None,
        )?,
        "the service by name",
    );
    // The address from the sidecar's own variable, first entry.
    assert_serving(
        &health(&[], Some(&format!("{unix},{tcp}")))?,
        "REQSTATE_LISTEN",
    );

    let unknown = health(&["--listen", &unix, "--service", "no.such.Service"], None)?;
    assert_eq!(unknown.status.code(), Some(1), "{unknown:?}");
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("NOT_FOUND"));

    // --connect, the name every other client command uses (issue 40 item 10).
    assert_serving(&health(&["--connect", &unix], None)?, "--connect unix");
    assert_serving(&health(&["--connect", &tcp], None)?, "--connect tcp");

    // Nobody there: the next step, not only the OS's words (issue 40 item 9).
    let gone = sidecar.dir.path().join("nothing.sock");
    let absent = health(&["--listen", &format!("unix:{}", gone.display())], None)?;
    assert_eq!(absent.status.code(), Some(1), "{absent:?}");
    let said = String::from_utf8_lossy(&absent.stderr);
    assert!(
        said.contains(
            "cannot connect: there is no socket at that path: no sidecar is listening at unix:"
        ) && said.contains("`reqstate serve --dev --listen unix:")
            && !said.contains("os error"),
        "{said}"
    );
    let closed = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
    let refused = health(&["--connect", &format!("tcp:{closed}")], None)?;
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        said.contains(&format!(
            "cannot connect: connection refused: no sidecar is listening at tcp:{closed}"
        )) && !said.contains("os error"),
        "{said}"
    );

    for bad in ["127.0.0.1:50051", "unix:", "tcp:localhost"] {
        let out = health(&["--listen", bad], None)?;
        assert_eq!(out.status.code(), Some(64), "{bad}: {out:?}");
    }
    Ok(())
}

#[tokio::test]
async fn health_probe_times_out_on_a_listener_that_never_answers() -> TestResult {
    // Accepts connections (the kernel's backlog) but never speaks HTTP/2.
    let silent = std::net::TcpListener::bind("127.0.0.1:0")?;
    let addr = silent.local_addr()?;
    let started = Instant::now();
    let out = health(
        &["--listen", &format!("tcp:{addr}"), "--timeout-ms", "300"],
        None,
    )?;
    let took = started.elapsed();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no answer within 300 ms"),
        "{out:?}"
    );
    // Generous: the point is that it ends, not how fast.
    assert!(took < Duration::from_secs(10), "took {took:?}");
    drop(silent);
    Ok(())
}

#[tokio::test]
async fn live_stays_up_through_a_drain_while_ready_turns_503() -> TestResult {
    let mut sidecar = start(&["--drain-timeout-ms", "5000", "--call-timeout-ms", "3000"]).await?;
    assert_eq!(get(sidecar.metrics, "/live").await?, (200, "live\n".into()));
    assert_eq!(
        get(sidecar.metrics, "/ready").await?,
        (200, "ready\n".into())
    );
    let (missing, body) = get(sidecar.metrics, "/nope").await?;
    assert_eq!(missing, 404);
    assert!(body.contains("/live"), "{body}");

    // A Watch stream keeps the drain going until the call deadline.
    let mut watch = tonic_health::pb::health_client::HealthClient::new(
        sidecar_process::unix_channel(&sidecar.unix).await?,
    )
    .watch(tonic_health::pb::HealthCheckRequest {
        service: String::new(),
    })
    .await?
    .into_inner();
    watch.message().await?.ok_or("no first health status")?;
    sidecar.signal(nix::sys::signal::Signal::SIGTERM)?;
    watch.message().await?.ok_or("no NOT_SERVING update")?;

    assert_eq!(
        get(sidecar.metrics, "/ready").await?,
        (503, "draining\n".into())
    );
    assert_eq!(get(sidecar.metrics, "/live").await?, (200, "live\n".into()));
    // New connections are no longer accepted: the exec probe fails.
    let probe = health(
        &["--listen", &format!("unix:{}", sidecar.unix.display())],
        None,
    )?;
    assert_eq!(probe.status.code(), Some(1), "{probe:?}");

    drop(watch);
    let status = sidecar.wait_exit(Duration::from_secs(15)).await?;
    assert_eq!(status.code(), Some(0), "{}", sidecar.log());
    // After the drain the admin listener is gone too.
    assert!(get(sidecar.metrics, "/live").await.is_err());
    Ok(())
}

/// systemd's readiness protocol (`Type=notify`, deploy/systemd): the real
/// binary, with `NOTIFY_SOCKET` naming a datagram socket this test reads,
/// as systemd would.
mod service_manager {
    use std::os::unix::net::UnixDatagram;
    use std::process::{Child, Command, Stdio};
    use std::time::Duration;

    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;

    use super::{assert_serving, health};
    use crate::sidecar_process::{self, KillOnDrop, TestResult, keyring_toml, write_private};

    /// The next notification, as its `KEY=value` lines.
    fn next(socket: &UnixDatagram) -> TestResult<Vec<String>> {
        let mut buf = [0u8; 4096];
        let n = socket.recv(&mut buf)?;
        let text = std::str::from_utf8(&buf[..n])?;
        assert!(
            text.ends_with('\n'),
            "a notification ends with a newline: {text:?}"
        );
        Ok(text.lines().map(str::to_owned).collect())
    }

    fn status(lines: &[String]) -> &str {
        lines
            .iter()
            .find_map(|l| l.strip_prefix("STATUS="))
            .unwrap_or("")
    }

    fn serve(dir: &std::path::Path, notify_socket: &str) -> TestResult<(KillOnDrop, String)> {
        let keyring = dir.join("keyring.toml");
        write_private(&keyring, &keyring_toml(&[(1, "primary")]))?;
        let listen = format!("unix:{}", dir.join("reqstate.sock").display());
        let child: Child = Command::new(sidecar_process::BIN)
            .args(["serve", "--keyring"])
            .arg(&keyring)
            .args(["--listen", &listen])
            .env("NOTIFY_SOCKET", notify_socket)
            .env("REQSTATE_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        Ok((KillOnDrop(child), listen))
    }

    #[test]
    fn ready_after_the_listeners_then_reloading_and_ready_on_sighup_then_stopping() -> TestResult {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("notify.sock");
        let socket = UnixDatagram::bind(&path)?;
        socket.set_read_timeout(Some(Duration::from_secs(30)))?;
        let (mut child, listen) = serve(dir.path(), path.to_str().ok_or("path")?)?;
        let pid = Pid::from_raw(child.0.id() as i32);

        // READY=1 comes once the socket serves: probe it the moment it arrives.
        let ready = next(&socket)?;
        assert!(ready.contains(&"READY=1".to_owned()), "{ready:?}");
        assert_serving(&health(&["--listen", &listen], None)?, "at READY=1");
        assert_eq!(
            status(&ready),
            format!("serving on {listen}; keyring generation 1, primary key 1")
        );

        // SIGHUP (`systemctl reload`, ExecReload): RELOADING=1 with the
        // monotonic clock, then READY=1 with the new generation.
        kill(pid, Signal::SIGHUP)?;
        let reloading = next(&socket)?;
        assert_eq!(reloading.first().map(String::as_str), Some("RELOADING=1"));
        let usec = reloading
            .iter()
            .find_map(|l| l.strip_prefix("MONOTONIC_USEC="))
            .ok_or("no MONOTONIC_USEC")?;
        assert!(usec.parse::<u64>()? > 0, "{reloading:?}");
        let reloaded = next(&socket)?;
        assert!(reloaded.contains(&"READY=1".to_owned()), "{reloaded:?}");
        assert_eq!(
            status(&reloaded),
            "serving; keyring generation 2, primary key 1"
        );

        // SIGTERM: STOPPING=1 as the drain starts, then a clean exit.
        kill(pid, Signal::SIGTERM)?;
        let stopping = next(&socket)?;
        assert!(stopping.contains(&"STOPPING=1".to_owned()), "{stopping:?}");
        let code = child.0.wait()?.code();
        assert_eq!(code, Some(0));
        Ok(())
    }

    #[test]
    fn an_abstract_notify_socket_is_used_too() -> TestResult {
        use std::os::linux::net::SocketAddrExt as _;
        let name = format!("reqstate-test-notify-{}", std::process::id());
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())?;
        let socket = UnixDatagram::bind_addr(&addr)?;
        socket.set_read_timeout(Some(Duration::from_secs(30)))?;
        let dir = tempfile::tempdir()?;
        let (_child, listen) = serve(dir.path(), &format!("@{name}"))?;
        let ready = next(&socket)?;
        assert!(ready.contains(&"READY=1".to_owned()), "{ready:?}");
        assert_serving(&health(&["--listen", &listen], None)?, "at READY=1");
        Ok(())
    }
}
