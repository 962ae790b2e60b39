//! Hardening of who may reach the sidecar and how much an unauthenticated
//! caller can make it hold, against the real binary: metric labels from a
//! fixed set, network listeners refused without caller authentication,
//! Unix sockets private from their first moment, health bounded.

use crate::sidecar_process;

use std::os::unix::fs::PermissionsExt as _;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use reqstate_proto::v1 as pb;
use reqstate_sidecar::call_gate::{DEFAULT_MAX_HEALTH_CALLS, max_health_watches};
use sidecar_process::{
    BIN, KillOnDrop, Sidecar, SidecarOptions, TestResult, free_port, keyring_toml, with_bearer,
    write_private,
};
use tonic::Code;
use tonic::codegen::http;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tower::ServiceExt as _;

const TOKEN: &str = "hardening-bearer-token-0123456789";

/// The `reqstate_calls_total` series on the metrics page, and the page's size.
async fn call_series(sidecar: &Sidecar) -> TestResult<(usize, usize)> {
    let text = sidecar.metrics_text().await?;
    let series = text
        .lines()
        .filter(|line| line.starts_with("reqstate_calls_total{"))
        .count();
    Ok((series, text.len()))
}

/// One gRPC call without credentials on an arbitrary `path`; returns its
/// `grpc-status`.
async fn raw_call(channel: tonic::transport::Channel, path: String) -> TestResult<Code> {
    let request = http::Request::builder()
        .method("POST")
        .uri(path)
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(tonic::body::Body::empty())?;
    let response = channel.oneshot(request).await?;
    let status = tonic::Status::from_header_map(response.headers())
        .ok_or("the refusal carried no grpc-status header")?;
    Ok(status.code())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn distinct_unauthenticated_paths_leave_the_metric_series_count_constant() -> TestResult {
    const PATHS: usize = 4000;
    let sidecar =
        Sidecar::start(SidecarOptions::new(keyring_toml(&[(1, "primary")])).auth_token(TOKEN))
            .await?;
    let channel = sidecar_process::tcp_channel(sidecar.tcp).await?;
    // One refusal of a known rpc and one of an unknown path create the
    // series a refused caller may ever create.
    for path in ["/reqstate.v1.RequestState/Mint", "/warm.Up/Path"] {
        assert_eq!(
            raw_call(channel.clone(), path.into()).await?,
            Code::Unauthenticated
        );
    }
    let (series_before, bytes_before) = call_series(&sidecar).await?;

    let mut calls = tokio::task::JoinSet::new();
    for i in 0..PATHS {
        // Distinct services, methods, and a known method under a foreign service.
        let path = match i % 3 {
            0 => format!("/attacker.Svc{i}/Method{i}"),
            1 => format!("/reqstate.v1.RequestState/Nope{i}"),
            _ => format!("/x{i}.RequestState/Mint"),
        };
        calls.spawn(raw_call(channel.clone(), path));
        if calls.len() >= 64
            && let Some(code) = calls.join_next().await
        {
            assert_eq!(code??, Code::Unauthenticated);
        }
    }
    while let Some(code) = calls.join_next().await {
        assert_eq!(code??, Code::Unauthenticated);
    }

    let (series_after, bytes_after) = call_series(&sidecar).await?;
    println!(
        "{PATHS} distinct unauthenticated paths: reqstate_calls_total series \
         {series_before} -> {series_after}, /metrics {bytes_before} -> {bytes_after} bytes"
    );
    assert_eq!(
        series_before, series_after,
        "refused callers created metric series"
    );
    let unknown = sidecar
        .metric("reqstate_calls_total{result=\"unauthenticated\",rpc=\"unknown\"}")
        .await?;
    // Two thirds of the paths, plus the warm-up, fall in the `unknown` bucket;
    // `/x{i}.RequestState/Mint` is not Mint either.
    assert!(unknown >= PATHS as f64, "unknown bucket counted {unknown}");
    let mint = sidecar
        .metric("reqstate_calls_total{result=\"unauthenticated\",rpc=\"Mint\"}")
        .await?;
    assert_eq!(mint, 1.0, "only the real Mint path is labelled Mint");
    Ok(())
}

/// Runs `reqstate serve ARGS`; returns its exit code and standard error, or
/// an error if it is still running (serving) after `patience`.
fn serve_expecting_refusal(args: &[&str]) -> TestResult<(Option<i32>, String)> {
    let dir = tempfile::tempdir()?;
    let stderr_path = dir.path().join("stderr");
    let mut child = Command::new(BIN)
        .arg("serve")
        .args(args)
        .env("REQSTATE_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr_path)?)
        .spawn()?;
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!(
                "`reqstate serve {}` was still running after 20 s: the configuration \
                 was accepted\n{}",
                args.join(" "),
                std::fs::read_to_string(&stderr_path).unwrap_or_default()
            )
            .into());
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Ok((status.code(), std::fs::read_to_string(&stderr_path)?))
}

/// A self-signed server certificate and key for localhost, PEM.
fn server_certificate() -> TestResult<(String, String)> {
    let key = rcgen::KeyPair::generate()?;
    let cert = rcgen::CertificateParams::new(vec!["localhost".into()])?.self_signed(&key)?;
    Ok((cert.pem(), key.serialize_pem()))
}

#[test]
fn network_listener_or_metrics_without_caller_authentication_is_refused_before_binding()
-> TestResult {
    let dir = tempfile::tempdir()?;
    let keyring = dir.path().join("keyring.toml");
    write_private(&keyring, &keyring_toml(&[(1, "primary")]))?;
    let (cert, key) = server_certificate()?;
    let cert_path = dir.path().join("server.pem");
    let key_path = dir.path().join("server.key");
    write_private(&cert_path, &cert)?;
    write_private(&key_path, &key)?;
    let socket = dir.path().join("r.sock");
    let keyring = keyring.display().to_string();
    let cert_path = cert_path.display().to_string();
    let key_path = key_path.display().to_string();
    let unix = format!("unix:{}", socket.display());
    let network = format!("tcp:0.0.0.0:{}", free_port()?);
    let metrics = format!("0.0.0.0:{}", free_port()?);

    let cases: [(Vec<&str>, &str); 2] = [
        // A server certificate alone encrypts, but lets anyone call.
        (
            vec![
                "--keyring",
                &keyring,
                "--listen",
                &unix,
                "--listen",
                &network,
                "--tls-cert",
                &cert_path,
                "--tls-key",
                &key_path,
            ],
            "--client-ca or --auth-token-file",
        ),
        // The metrics page lists key ids, statuses and algorithms.
        (
            vec![
                "--keyring",
                &keyring,
                "--listen",
                &unix,
                "--metrics",
                &metrics,
            ],
            "--metrics 0.0.0.0",
        ),
    ];
    for (args, expected) in cases {
        let (code, stderr) = serve_expecting_refusal(&args)?;
        assert_eq!(code, Some(64), "{args:?}: {stderr}");
        assert!(
            stderr.contains(expected) && stderr.contains("--insecure"),
            "{args:?}: expected {expected:?} and --insecure in {stderr}"
        );
        assert!(!socket.exists(), "{args:?} bound a socket before refusing");
    }
    Ok(())
}

#[tokio::test]
async fn unix_socket_under_umask_000_in_a_shared_directory_is_owner_only() -> TestResult {
    let dir = tempfile::tempdir()?;
    // A directory everyone may enter and write, as /tmp or a shared volume.
    let shared = dir.path().join("shared");
    std::fs::create_dir(&shared)?;
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777))?;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))?;
    let keyring = dir.path().join("keyring.toml");
    write_private(&keyring, &keyring_toml(&[(1, "primary")]))?;
    let socket = shared.join("reqstate.sock");

    // The most permissive umask: without care the socket is born 0777.
    let child = Command::new("/bin/sh")
        .arg("-c")
        .arg("umask 000 && exec \"$0\" \"$@\"")
        .arg(BIN)
        .arg("serve")
        .arg("--keyring")
        .arg(&keyring)
        .arg("--listen")
        .arg(format!("unix:{}", socket.display()))
        .env("REQSTATE_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let _guard = KillOnDrop(child);
    let channel = sidecar_process::eventually(Duration::from_secs(30), "umask sidecar", || async {
        Ok(sidecar_process::unix_channel(&socket).await.ok())
    })
    .await?;
    let mode = std::fs::metadata(&socket)?.permissions().mode() & 0o7777;
    assert_eq!(mode, 0o600, "socket mode {mode:o} under umask 000");
    // Nothing else was left in the shared directory: no staging socket or
    // directory for another user to find.
    let entries: Vec<_> = std::fs::read_dir(&shared)?
        .map(|e| e.map(|e| e.file_name()))
        .collect::<Result<_, _>>()?;
    assert_eq!(entries, vec![std::ffi::OsString::from("reqstate.sock")]);
    let keys = pb::request_state_client::RequestStateClient::new(channel)
        .list_keys(pb::ListKeysRequest {})
        .await?
        .into_inner();
    assert_eq!(keys.keys.len(), 1);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_stays_open_but_bounded_and_watch_streams_end_at_the_call_deadline() -> TestResult {
    const ATTEMPTS: usize = 50;
    let sidecar = Sidecar::start(
        SidecarOptions::new(keyring_toml(&[(1, "primary")]))
            .auth_token(TOKEN)
            .arg("--max-concurrent-calls")
            .arg("1")
            .arg("--call-timeout-ms")
            .arg("1500"),
    )
    .await?;
    let channel = sidecar_process::tcp_channel(sidecar.tcp).await?;
    let watch = || {
        let mut health = HealthClient::new(channel.clone());
        async move {
            health
                .watch(HealthCheckRequest {
                    service: String::new(),
                })
                .await
        }
    };

    // Unauthenticated Watch streams: at most half the default health limit are held.
    let mut held = Vec::new();
    let mut shed = 0;
    for _ in 0..ATTEMPTS {
        match watch().await {
            Ok(response) => {
                let mut stream = response.into_inner();
                let first = stream.message().await?.ok_or("no first health status")?;
                assert_eq!(first.status, ServingStatus::Serving as i32);
                held.push(stream);
            }
            Err(status) => {
                assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
                shed += 1;
            }
        }
    }
    println!(
        "{ATTEMPTS} unauthenticated Watch streams with --max-concurrent-calls 1: {} held, {shed} shed",
        held.len()
    );
    assert_eq!(
        held.len(),
        max_health_watches(DEFAULT_MAX_HEALTH_CALLS),
        "Watch streams held"
    );

    // Health does not take the service's permits, and the Watch cap leaves
    // room for probes: Check and an authenticated Mint both still answer.
    let checked = HealthClient::new(channel.clone())
        .check(HealthCheckRequest {
            service: "reqstate.v1.RequestState".into(),
        })
        .await?
        .into_inner();
    assert_eq!(checked.status, ServingStatus::Serving as i32);
    sidecar
        .tcp_client()
        .await?
        .mint(with_bearer(
            pb::MintRequest {
                tool: "t".into(),
                step: "s".into(),
                state_value: None,
                ttl_seconds: 60,
                context: Vec::new(),
                single_use: false,
            },
            TOKEN,
        )?)
        .await?;

    // Every held stream is ended by the sidecar at the call deadline (1.5 s);
    // 20 s is only how long the test is willing to wait for that.
    for mut stream in held {
        let ended = tokio::time::timeout(Duration::from_secs(20), stream.message())
            .await
            .map_err(|_| "a Watch stream outlived the call deadline by 20 s")?;
        let status = ended.err().ok_or("the stream ended without a status")?;
        assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    }
    // Their permits are back.
    let again = watch().await?.into_inner().message().await?;
    assert_eq!(again.map(|m| m.status), Some(ServingStatus::Serving as i32));
    Ok(())
}
