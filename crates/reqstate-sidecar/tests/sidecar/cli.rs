//! The `reqstate` command line against the real binary: key tooling, local mint/verify/inspect, `serve --dev`, permission refusal and exit code 64 on bad configuration.

use crate::sidecar_process;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use sidecar_process::{
    BIN, KillOnDrop, TestResult, free_port, keyring_toml, run_cli, stdout_json, write_private,
};

fn keyring_arg(path: &Path) -> String {
    path.display().to_string()
}

fn list_keys(keyring: &str) -> TestResult<Vec<(u64, String)>> {
    let out = run_cli(&["keys", "list", "--json", "--keyring", keyring])?;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows = stdout_json(&out)?;
    Ok(rows
        .as_array()
        .ok_or("not an array")?
        .iter()
        .map(|k| {
            (
                k["id"].as_u64().unwrap_or(0),
                k["status"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect())
}

#[test]
fn keys_new_promote_retire_list_rotate_a_keyring_file_in_place() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("keyring.toml");
    let keyring = keyring_arg(&path);

    // A missing file is created, its first key primary, mode 0600.
    let out = run_cli(&["keys", "new", "--keyring", &keyring])?;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::metadata(&path)?.permissions().mode() & 0o777,
        0o600
    );
    assert_eq!(list_keys(&keyring)?, vec![(1, "primary".into())]);

    // An operator's comment survives every edit.
    let mut text = std::fs::read_to_string(&path)?;
    text.push_str("# rotated quarterly; ask #security\n");
    write_private(&path, &text)?;

    let out = run_cli(&[
        "keys",
        "new",
        "--algorithm",
        "hmac-sha256",
        "--keyring",
        &keyring,
    ])?;
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("active"));
    assert_eq!(
        list_keys(&keyring)?,
        vec![(1, "primary".into()), (2, "active".into())]
    );

    // Promoted at once: as if every replica were confirmed to have key 2
    // (`keys promote` refuses a key created less than --propagation ago).
    let out = run_cli(&["keys", "promote", "2", "--force", "--keyring", &keyring])?;
    assert!(out.status.success());
    assert_eq!(
        list_keys(&keyring)?,
        vec![(1, "active".into()), (2, "primary".into())]
    );

    // The primary cannot be retired; the file is left alone.
    let before = std::fs::read(&path)?;
    let out = run_cli(&["keys", "retire", "2", "--keyring", &keyring])?;
    assert_eq!(out.status.code(), Some(64));
    assert_eq!(std::fs::read(&path)?, before);

    // Cut off at once (its tokens are still live: refused without --force).
    let out = run_cli(&["keys", "retire", "1", "--keyring", &keyring])?;
    assert_eq!(out.status.code(), Some(64));
    let out = run_cli(&["keys", "retire", "1", "--force", "--keyring", &keyring])?;
    assert!(out.status.success());
    assert_eq!(
        list_keys(&keyring)?,
        vec![(1, "retired".into()), (2, "primary".into())]
    );
    let text = std::fs::read_to_string(&path)?;
    assert!(text.contains("# rotated quarterly"), "{text}");
    assert!(text.contains("algorithm = \"hmac-sha256\""), "{text}");
    assert_eq!(
        std::fs::metadata(&path)?.permissions().mode() & 0o777,
        0o600
    );

    // A retired key is never promoted back.
    let out = run_cli(&["keys", "promote", "1", "--keyring", &keyring])?;
    assert_eq!(out.status.code(), Some(64));

    // The table form never shows secrets.
    let out = run_cli(&["keys", "list", "--keyring", &keyring])?;
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("retired") && table.contains("hmac-sha256"),
        "{table}"
    );
    assert!(!text.lines().filter(|l| l.starts_with("secret")).any(|l| {
        let value = l.split('"').nth(1).unwrap_or("");
        table.contains(value)
    }));
    Ok(())
}

/// docs/CLI.md: flags are GNU long options, so a value may start with `-`
/// (`--tool -x`, `--state-json -1`), as with `--tool=-x`.
#[test]
fn flag_values_may_start_with_a_hyphen() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("keyring.toml");
    write_private(&path, &keyring_toml(&[(7, "primary")]))?;
    let keyring = keyring_arg(&path);
    let separate = run_cli(&[
        "mint",
        "--keyring",
        &keyring,
        "--tool",
        "-x",
        "--step",
        "-s",
        "--state-json",
        "-1",
        "--context",
        "-c",
        "--now",
        "100",
    ])?;
    let joined = run_cli(&[
        "mint",
        "--keyring",
        &keyring,
        "--tool=-x",
        "--step=-s",
        "--state-json=-1",
        "--context=-c",
        "--now=100",
    ])?;
    assert!(
        separate.status.success(),
        "{}",
        String::from_utf8_lossy(&separate.stderr)
    );
    // The keyring is XChaCha20-Poly1305: tokens differ, everything else agrees.
    let minted = stdout_json(&separate)?;
    let mut joined = stdout_json(&joined)?;
    joined["token"] = minted["token"].clone();
    assert_eq!(minted, joined);
    let token = minted["token"].as_str().ok_or("no token")?;
    let verified = run_cli(&[
        "verify",
        "--keyring",
        &keyring,
        "--tool",
        "-x",
        "--expected-step",
        "-s",
        "--context",
        "-c",
        "--now",
        "100",
        "--token",
        token,
    ])?;
    let verified = stdout_json(&verified)?;
    assert_eq!(verified["valid"], true, "{verified}");
    assert_eq!(verified["state"], -1, "{verified}");
    Ok(())
}

#[test]
fn local_mint_verify_and_inspect_agree() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("keyring.toml");
    write_private(&path, &keyring_toml(&[(1, "active"), (7, "primary")]))?;
    let keyring = keyring_arg(&path);

    let out = run_cli(&[
        "mint",
        "--keyring",
        &keyring,
        "--tool",
        "counter",
        "--step",
        "confirm",
        "--state-json",
        r#"{"n":1}"#,
        "--context",
        "user-42",
    ])?;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let minted = stdout_json(&out)?;
    let token = minted["token"].as_str().ok_or("no token")?.to_string();
    assert_eq!(minted["key_id"], 7);

    // `--step` is verify's deprecated alias of `--expected-step` (docs/CLI.md).
    let out = run_cli(&[
        "verify",
        "--keyring",
        &keyring,
        "--tool",
        "counter",
        "--step",
        "confirm",
        "--context",
        "user-42",
        &token,
    ])?;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let verified = stdout_json(&out)?;
    assert_eq!(verified["valid"], true);
    assert_eq!(verified["state"], serde_json::json!({"n": 1}));
    assert_eq!(verified["state_cbor_hex"], "a1616e01");
    assert_eq!(verified["key_id"], 7);

    let out = run_cli(&[
        "verify",
        "--keyring",
        &keyring,
        "--tool",
        "counter",
        "--step",
        "pay",
        "--context",
        "user-42",
        &token,
    ])?;
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stdout_json(&out)?["reason"], "wrong_step");

    let out = run_cli(&[
        "verify",
        "--keyring",
        &keyring,
        "--tool",
        "counter",
        "--context",
        "user-43",
        &token,
    ])?;
    assert_eq!(out.status.code(), Some(1));
    let refused = stdout_json(&out)?;
    assert_eq!(refused["valid"], false);
    assert_eq!(refused["reason"], "authentication_failed");

    let out = run_cli(&["inspect", &token])?;
    assert!(out.status.success());
    let header = stdout_json(&out)?;
    assert_eq!(header["version"], 1);
    assert_eq!(header["kind"], "state");
    assert_eq!(header["key_id"], 7);
    assert_eq!(header["algorithm"], "xchacha20-poly1305");
    assert_eq!(header["length"], token.len());
    assert_eq!(header["verified"], false);
    // Inspect never decrypts: the state is nowhere in its output.
    assert!(!String::from_utf8_lossy(&out.stdout).contains("\"n\""));

    // `-` reads the token from standard input, for inspect as for verify.
    let mut child = Command::new(BIN)
        .args(["inspect", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    {
        use std::io::Write as _;
        let mut stdin = child.stdin.take().ok_or("no stdin")?;
        writeln!(stdin, "{token}")?;
    }
    let out = child.wait_with_output()?;
    assert!(out.status.success());
    assert_eq!(stdout_json(&out)?["key_id"], 7);

    let out = run_cli(&["inspect", "not a token"])?;
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stdout_json(&out)?["error"], "malformed");
    Ok(())
}

/// Runs `serve` with `args`, expecting it to exit quickly; returns (code, stderr).
fn serve_exit(args: &[&str]) -> TestResult<(Option<i32>, String)> {
    let mut argv = vec!["serve"];
    argv.extend_from_slice(args);
    let out = run_cli(&argv)?;
    Ok((
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

#[test]
fn group_readable_keyring_is_refused_before_binding() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("keyring.toml");
    write_private(&path, &keyring_toml(&[(1, "primary")]))?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644))?;
    let socket = dir.path().join("r.sock");
    let listen = format!("unix:{}", socket.display());
    let keyring = keyring_arg(&path);

    let (code, stderr) = serve_exit(&["--keyring", &keyring, "--listen", &listen])?;
    assert_eq!(code, Some(64), "{stderr}");
    assert!(stderr.contains("chmod 600"), "{stderr}");
    assert!(!socket.exists(), "a socket was bound despite the refusal");

    // The local commands refuse it too, unless told otherwise.
    let out = run_cli(&["keys", "list", "--keyring", &keyring])?;
    assert_eq!(out.status.code(), Some(64));
    let out = run_cli(&[
        "keys",
        "list",
        "--allow-insecure-keyring-permissions",
        "--keyring",
        &keyring,
    ])?;
    assert!(out.status.success());
    Ok(())
}

#[test]
fn bad_configuration_exits_64_before_binding_anything() -> TestResult {
    let dir = tempfile::tempdir()?;
    let good = dir.path().join("keyring.toml");
    write_private(&good, &keyring_toml(&[(1, "primary")]))?;
    let invalid = dir.path().join("invalid.toml");
    write_private(
        &invalid,
        "[[key]]\nid = 1\nstatus = \"active\"\nsecret = \"AAAA\"\n",
    )?;
    let socket = dir.path().join("r.sock");
    let listen = format!("unix:{}", socket.display());
    let good = keyring_arg(&good);
    let invalid = keyring_arg(&invalid);
    let missing = dir.path().join("missing").display().to_string();

    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--no-such-flag"], "unexpected argument"),
        (vec!["--listen", &listen], "--keyring"),
        (vec!["--keyring", &good], "--listen"),
        (
            vec!["--keyring", &good, "--listen", "udp:1.2.3.4:5"],
            "expected unix:PATH",
        ),
        (
            vec![
                "--keyring",
                &good,
                "--listen",
                &listen,
                "--listen",
                "tcp:0.0.0.0:0",
            ],
            "signing oracle",
        ),
        (vec!["--keyring", &invalid, "--listen", &listen], "line 1"),
        (vec!["--keyring", &missing, "--listen", &listen], "missing"),
        (
            vec![
                "--keyring",
                &good,
                "--listen",
                &listen,
                "--auth-token-file",
                &missing,
            ],
            "--auth-token-file",
        ),
        (
            vec![
                "--keyring",
                &good,
                "--listen",
                &listen,
                "--tls-cert",
                &good,
                "--tls-key",
                &good,
            ],
            "TLS",
        ),
        (
            vec!["--keyring", &good, "--listen", &listen, "--max-ttl", "0"],
            "max lifetime",
        ),
    ];
    for (args, expected) in cases {
        let (code, stderr) = serve_exit(&args)?;
        assert_eq!(code, Some(64), "{args:?}: {stderr}");
        assert!(
            stderr.contains(expected),
            "{args:?}: expected {expected:?} in {stderr}"
        );
        assert!(!socket.exists(), "{args:?} bound a socket");
    }
    Ok(())
}

#[tokio::test]
async fn serve_dev_prints_a_grpcurl_example_and_serves() -> TestResult {
    let port = free_port()?;
    let listen = format!("tcp:127.0.0.1:{port}");
    let mut child = Command::new(BIN)
        .args(["serve", "--dev", "--listen", &listen])
        .env("REQSTATE_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let addr = format!("127.0.0.1:{port}").parse()?;
    let channel = sidecar_process::eventually(Duration::from_secs(30), "dev sidecar", || async {
        Ok(sidecar_process::tcp_channel(addr).await.ok())
    })
    .await;
    let mut guard = KillOnDrop(match child.try_wait()? {
        None => child,
        Some(status) => return Err(format!("dev sidecar exited: {status}").into()),
    });
    let channel = channel?;
    let mut client = reqstate_proto::v1::request_state_client::RequestStateClient::new(channel);
    let minted = client
        .mint(reqstate_proto::v1::MintRequest {
            tool: "demo".into(),
            step: "confirm".into(),
            state_value: None,
            ttl_seconds: 0,
            context: Vec::new(),
            single_use: false,
        })
        .await?
        .into_inner();
    assert_eq!(minted.expires_at - minted.issued_at, 600, "default TTL");

    // SIGHUP has nothing to reload in --dev, and must not kill the process
    // (its default action) either: the same key still verifies afterwards.
    let pid = nix::unistd::Pid::from_raw(i32::try_from(guard.0.id())?);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGHUP)?;
    tokio::time::sleep(Duration::from_millis(50)).await;
    let verified = client
        .verify(reqstate_proto::v1::VerifyRequest {
            token: minted.token,
            tool: "demo".into(),
            expected_step: Some("confirm".into()),
            context: Vec::new(),
            consume: false,
        })
        .await?
        .into_inner();
    assert!(verified.valid, "{verified:?}");
    drop(client);

    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(guard.0.id())?),
        nix::sys::signal::Signal::SIGINT,
    )?;
    // Wait without blocking the runtime: the client's connection task must
    // run to answer the server's GOAWAY, or draining waits for its deadline.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let status = loop {
        if let Some(status) = guard.0.try_wait()? {
            break status;
        }
        if std::time::Instant::now() > deadline {
            return Err("the dev sidecar did not exit within 5 s of SIGINT".into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let mut stdout = String::new();
    let mut stderr = String::new();
    use std::io::Read as _;
    guard
        .0
        .stdout
        .take()
        .ok_or("no stdout")?
        .read_to_string(&mut stdout)?;
    guard
        .0
        .stderr
        .take()
        .ok_or("no stderr")?
        .read_to_string(&mut stderr)?;
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(stdout.contains("grpcurl -plaintext"), "{stdout}");
    assert!(
        stdout.contains(&format!("127.0.0.1:{port} reqstate.v1.RequestState/Mint")),
        "{stdout}"
    );
    assert!(stderr.contains("WARNING"), "{stderr}");
    assert!(stderr.contains("ephemeral"), "{stderr}");
    Ok(())
}

#[tokio::test]
async fn serve_reads_every_setting_from_reqstate_environment_variables() -> TestResult {
    let dir = tempfile::tempdir()?;
    let keyring = dir.path().join("keyring.toml");
    write_private(&keyring, &keyring_toml(&[(1, "primary")]))?;
    std::fs::set_permissions(&keyring, std::fs::Permissions::from_mode(0o640))?;
    let token = dir.path().join("token");
    write_private(&token, "env-token")?;
    let socket = dir.path().join("env.sock");
    let port = free_port()?;
    let serve = |allow_insecure: &str| -> TestResult<std::process::Child> {
        Ok(Command::new(BIN)
            .arg("serve")
            .env("REQSTATE_KEYRING", &keyring)
            .env(
                "REQSTATE_LISTEN",
                format!("unix:{},tcp:127.0.0.1:{port}", socket.display()),
            )
            .env("REQSTATE_AUTH_TOKEN_FILE", &token)
            .env(
                "REQSTATE_ALLOW_INSECURE_KEYRING_PERMISSIONS",
                allow_insecure,
            )
            .env("REQSTATE_DEFAULT_TTL", "42")
            .env("REQSTATE_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()?)
    };

    // REQSTATE_KEYRING was read: its mode is refused.
    let refused = serve("false")?.wait_with_output()?;
    assert_eq!(refused.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("chmod 600"));

    let _child = KillOnDrop(serve("true")?);
    let channel = sidecar_process::eventually(Duration::from_secs(30), "env sidecar", || async {
        Ok(sidecar_process::unix_channel(&socket).await.ok())
    })
    .await?;
    let mut client = reqstate_proto::v1::request_state_client::RequestStateClient::new(channel);
    let mint = reqstate_proto::v1::MintRequest {
        tool: "t".into(),
        step: "s".into(),
        state_value: None,
        ttl_seconds: 0,
        context: Vec::new(),
        single_use: false,
    };
    // REQSTATE_AUTH_TOKEN_FILE was read.
    let status = client
        .mint(mint.clone())
        .await
        .err()
        .ok_or("served without the token")?;
    assert_eq!(status.code(), tonic::Code::Unauthenticated);
    // REQSTATE_DEFAULT_TTL was read, and both REQSTATE_LISTEN entries serve.
    let tcp = sidecar_process::tcp_channel(format!("127.0.0.1:{port}").parse()?).await?;
    let minted = reqstate_proto::v1::request_state_client::RequestStateClient::new(tcp)
        .mint(sidecar_process::with_bearer(mint, "env-token")?)
        .await?
        .into_inner();
    assert_eq!(minted.expires_at - minted.issued_at, 42);
    Ok(())
}

/// Security review round 4, finding 5: `--allow-uid` reads a Unix socket's
/// peer credentials, so beside a TCP listener with no caller
/// authentication of its own it is refused before anything binds (exit 64,
/// `--insecure` or not); with a bearer token the start log says which
/// authentication applies to which listener.
#[tokio::test]
async fn allow_uid_with_an_unauthenticated_tcp_listener_is_refused() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("keyring.toml");
    write_private(&path, &keyring_toml(&[(1, "primary")]))?;
    let keyring = keyring_arg(&path);
    let socket = dir.path().join("r.sock");
    let unix = format!("unix:{}", socket.display());
    let port = free_port()?;
    let tcp = format!("tcp:127.0.0.1:{port}");
    let me = nix::unistd::getuid().as_raw().to_string();
    let shapes: [&[&str]; 4] = [
        &["--listen", &unix, "--listen", &tcp, "--allow-uid", &me],
        &["--listen", &tcp, "--allow-uid", &me],
        &[
            "--listen",
            &unix,
            "--listen",
            &tcp,
            "--allow-uid",
            &me,
            "--insecure",
        ],
        &["--listen", &tcp],
    ];
    for (index, shape) in shapes.iter().enumerate() {
        let mut args = vec!["--keyring", keyring.as_str()];
        args.extend_from_slice(shape);
        if index == 3 {
            // The variable form of the allow-list.
            let out = Command::new(BIN)
                .arg("serve")
                .args(&args)
                .env("REQSTATE_ALLOW_UIDS", &me)
                .env("REQSTATE_LOG", "warn")
                .stdin(Stdio::null())
                .output()?;
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(64), "{args:?}: {stderr}");
            continue;
        }
        // Bounded: a sidecar that accepts the flags would serve forever.
        let mut child = KillOnDrop(
            Command::new(BIN)
                .arg("serve")
                .args(&args)
                .env("REQSTATE_LOG", "warn")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()?,
        );
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let code = loop {
            if let Some(status) = child.0.try_wait()? {
                break status.code();
            }
            if std::time::Instant::now() > deadline {
                return Err(format!("{args:?}: accepted, still serving after 10 s").into());
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut stderr = String::new();
        std::io::Read::read_to_string(&mut child.0.stderr.take().ok_or("no stderr")?, &mut stderr)?;
        assert_eq!(code, Some(64), "{args:?}: {stderr}");
        for hint in [
            "--allow-uid applies only to Unix sockets",
            &tcp,
            "--auth-token-file",
            "--client-ca",
        ] {
            assert!(stderr.contains(hint), "{args:?}: no {hint:?} in {stderr}");
        }
        assert!(
            !socket.exists(),
            "{args:?}: a socket was bound despite the refusal"
        );
        assert!(
            std::net::TcpListener::bind(("127.0.0.1", port)).is_ok(),
            "{args:?}: the port stayed bound"
        );
    }

    // With TCP callers authenticated by a bearer token: served, and the log
    // says which authentication each listener applies.
    let sidecar = sidecar_process::Sidecar::start(
        sidecar_process::SidecarOptions::new(keyring_toml(&[(1, "primary")]))
            .auth_token("s3cret-token")
            .arg("--allow-uid")
            .arg(me.as_str()),
    )
    .await?;
    let log = sidecar.log();
    let serving: Vec<&str> = log.lines().filter(|l| l.contains("serving gRPC")).collect();
    assert_eq!(serving.len(), 2, "{log}");
    let unix_line = serving
        .iter()
        .find(|l| l.contains("unix:"))
        .ok_or("no Unix listener line")?;
    assert!(
        unix_line.contains("peer uid in --allow-uid and bearer token (--auth-token-file)"),
        "{unix_line}"
    );
    let tcp_line = serving
        .iter()
        .find(|l| !l.contains("unix:"))
        .ok_or("no TCP listener line")?;
    assert!(
        tcp_line.contains("bearer token (--auth-token-file)") && !tcp_line.contains("uid"),
        "{tcp_line}"
    );
    Ok(())
}

/// Issue 40 item 9: a missing keyring and a port already in use say what to
/// do next, not only the OS's words (`No such file or directory (os error
/// 2)`, `Address already in use (os error 98)`).
#[test]
fn os_errors_come_with_the_next_step() -> TestResult {
    let dir = tempfile::tempdir()?;
    let missing = dir.path().join("missing.toml");
    let out = Command::new(sidecar_process::BIN)
        .args(["mint", "--keyring"])
        .arg(&missing)
        .args(["--tool", "t", "--step", "s"])
        .stdin(Stdio::null())
        .output()?;
    assert_eq!(out.status.code(), Some(64), "{out:?}");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains(&format!(
            "keyring {}: there is no such file (make one with `reqstate keys new --keyring {}`",
            missing.display(),
            missing.display()
        )) && !said.contains("os error"),
        "{said}"
    );

    let taken = std::net::TcpListener::bind("127.0.0.1:0")?;
    let port = taken.local_addr()?.port();
    let out = Command::new(sidecar_process::BIN)
        .args(["serve", "--dev", "--log", "error", "--listen"])
        .arg(format!("tcp:127.0.0.1:{port}"))
        .stdin(Stdio::null())
        .output()?;
    assert!(!out.status.success(), "{out:?}");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains(&format!(
            "cannot listen on tcp:127.0.0.1:{port}: the address is already in use"
        )) && said.contains(&format!("ss -ltnp 'sport = :{port}'"))
            && !said.contains("os error"),
        "{said}"
    );
    drop(taken);
    Ok(())
}
