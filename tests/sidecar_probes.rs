//! The probes an orchestrator uses, against the real binary: `reqstate
//! health` (an exec probe: exit 0 only on SERVING) and `GET /live` and
//! `GET /ready` on the metrics listener, before and during a drain.

#[path = "support/sidecar_process.rs"]
mod sidecar_process;

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
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("NotFound"));

    let gone = sidecar.dir.path().join("nothing.sock");
    let absent = health(&["--listen", &format!("unix:{}", gone.display())], None)?;
    assert_eq!(absent.status.code(), Some(1), "{absent:?}");
    assert!(String::from_utf8_lossy(&absent.stderr).contains("cannot connect"));

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
