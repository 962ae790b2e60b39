//! The command line's client side (`--connect`) against the real binary:
//! the same JSON as the local commands, consume, seal/unseal, `keys list
//! --connect`, the bearer token, TLS, an unreachable sidecar, the dev
//! banner's lines run as printed; and the messages a person acts on (a
//! closed output pipe, pasted hints, flag values).

use crate::sidecar_process;

use std::io::BufRead as _;
use std::process::{Command, Output, Stdio};

use sidecar_process::{
    BIN, KillOnDrop, Sidecar, SidecarOptions, TestResult, free_port, keyring_toml, run_cli,
    stdout_json, write_private,
};

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `reqstate ARGS` with `input` on standard input.
fn run_with_stdin(args: &[&str], input: &str) -> TestResult<Output> {
    use std::io::Write as _;
    let mut child = Command::new(BIN)
        .args(args)
        .env("REQSTATE_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    child
        .stdin
        .take()
        .ok_or("no stdin")?
        .write_all(input.as_bytes())?;
    Ok(child.wait_with_output()?)
}

async fn sidecar() -> TestResult<Sidecar> {
    Sidecar::start(SidecarOptions::new(keyring_toml(&[(1, "primary")]))).await
}

#[tokio::test]
async fn remote_and_local_print_the_same_json_both_ways() -> TestResult {
    let sidecar = sidecar().await?;
    let connect = format!("tcp:{}", sidecar.tcp);
    let unix = format!("unix:{}", sidecar.unix.display());
    let keyring = sidecar.keyring.display().to_string();
    let state = r#"{"z":1.0,"a":[1,"é",null]}"#;

    // Minted by the sidecar, verified by both.
    let minted = run_cli(&[
        "mint",
        "--connect",
        &connect,
        "--tool",
        "t",
        "--step",
        "s",
        "--context",
        "c",
        "--state-json",
        state,
    ])?;
    assert_eq!(minted.status.code(), Some(0), "{}", stderr(&minted));
    let minted = stdout_json(&minted)?;
    let fields: Vec<&String> = minted.as_object().ok_or("not an object")?.keys().collect();
    assert_eq!(fields, ["expires_at", "issued_at", "key_id", "token"]);
    let token = minted["token"].as_str().ok_or("no token")?;
    let local = run_cli(&[
        "verify",
        "--keyring",
        &keyring,
        "--tool",
        "t",
        "--context",
        "c",
        token,
    ])?;
    let remote = run_cli(&[
        "verify",
        "--connect",
        &unix,
        "--tool",
        "t",
        "--context",
        "c",
        token,
    ])?;
    assert_eq!(local.status.code(), Some(0), "{}", stderr(&local));
    assert_eq!(stdout_json(&local)?, stdout_json(&remote)?);
    assert_eq!(
        stdout_json(&local)?["state"],
        serde_json::json!({"a":[1,"é",null],"z":1.0})
    );

    // Minted locally, verified by both; and the refusals agree too.
    let minted = run_cli(&[
        "mint",
        "--keyring",
        &keyring,
        "--tool",
        "t",
        "--step",
        "s",
        "--state-cbor-hex",
        "43010203",
    ])?;
    let token = stdout_json(&minted)?["token"]
        .as_str()
        .ok_or("no token")?
        .to_owned();
    for args in [
        vec!["--tool", "t"],
        vec!["--tool", "t", "--expected-step", "other"],
        vec!["--tool", "other"],
    ] {
        let mut local = vec!["verify", "--keyring", &keyring];
        local.extend(&args);
        local.push(&token);
        let mut remote = vec!["verify", "--connect", &connect];
        remote.extend(&args);
        remote.push(&token);
        let (local, remote) = (run_cli(&local)?, run_cli(&remote)?);
        assert_eq!(local.status.code(), remote.status.code(), "{args:?}");
        let (local, remote) = (stdout_json(&local)?, stdout_json(&remote)?);
        assert_eq!(local["valid"], remote["valid"], "{args:?}");
        assert_eq!(local["reason"], remote["reason"], "{args:?}");
        if local["valid"] == true {
            assert_eq!(local, remote);
            assert_eq!(remote["state_cbor_hex"], "43010203");
        }
    }
    // A mint the core refuses: exit 1 with {reason, message} both ways.
    for place in [
        ["--keyring", keyring.as_str()],
        ["--connect", connect.as_str()],
    ] {
        let out = run_cli(&["mint", place[0], place[1], "--tool", "", "--step", "s"])?;
        assert_eq!(out.status.code(), Some(1), "{place:?} {}", stderr(&out));
        assert_eq!(stdout_json(&out)?["reason"], "invalid_argument");
    }

    // `keys list --connect` is the local `keys list` of the same file.
    for json in [false, true] {
        let mut local = vec!["keys", "list", "--keyring", &keyring];
        let mut remote = vec!["keys", "list", "--connect", &connect];
        if json {
            local.push("--json");
            remote.push("--json");
        }
        let (local, remote) = (run_cli(&local)?, run_cli(&remote)?);
        assert_eq!(remote.status.code(), Some(0), "{}", stderr(&remote));
        assert_eq!(
            String::from_utf8_lossy(&local.stdout),
            String::from_utf8_lossy(&remote.stdout)
        );
    }
    Ok(())
}

#[tokio::test]
async fn consume_spends_once_and_seal_unseal_round_trip() -> TestResult {
    let sidecar = sidecar().await?;
    let connect = format!("tcp:{}", sidecar.tcp);
    let keyring = sidecar.keyring.display().to_string();
    let minted = run_cli(&[
        "mint",
        "--connect",
        &connect,
        "--tool",
        "t",
        "--step",
        "s",
        "--single-use",
    ])?;
    let token = stdout_json(&minted)?["token"]
        .as_str()
        .ok_or("no token")?
        .to_owned();
    // Plain verify refuses a single-use token; consume spends it once.
    let plain = run_cli(&["verify", "--connect", &connect, "--tool", "t", &token])?;
    assert_eq!(stdout_json(&plain)?["reason"], "single_use");
    let first = run_cli(&["consume", "--connect", &connect, "--tool", "t", &token])?;
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    assert_eq!(stdout_json(&first)?["state"], serde_json::Value::Null);
    let second = run_cli(&["consume", "--connect", &connect, "--tool", "t", &token])?;
    assert_eq!(second.status.code(), Some(1));
    assert_eq!(stdout_json(&second)?["reason"], "replayed");
    // A local consume without a shared store would spend nothing: refused.
    let local = run_cli(&["consume", "--keyring", &keyring, "--tool", "t", &token])?;
    assert_eq!(local.status.code(), Some(64));
    assert!(
        stderr(&local).contains("--replay-store"),
        "{}",
        stderr(&local)
    );

    // Seal remotely, unseal remotely and locally; the aad binds.
    let sealed = run_cli(&[
        "seal",
        "--connect",
        &connect,
        "--payload-hex",
        "00ff10",
        "--aad",
        "ctx",
    ])?;
    assert_eq!(sealed.status.code(), Some(0), "{}", stderr(&sealed));
    let sealed = stdout_json(&sealed)?;
    let token = sealed["token"].as_str().ok_or("no token")?;
    for place in [
        ["--connect", connect.as_str()],
        ["--keyring", keyring.as_str()],
    ] {
        let out = run_cli(&["unseal", place[0], place[1], "--aad", "ctx", token])?;
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(
            stdout_json(&out)?,
            serde_json::json!({"valid": true, "payload_hex": "00ff10", "key_id": 1})
        );
        let out = run_cli(&["unseal", place[0], place[1], "--aad", "other", token])?;
        assert_eq!(out.status.code(), Some(1));
        assert_eq!(stdout_json(&out)?["reason"], "authentication_failed");
    }
    // The mint JSON piped into `-`.
    let out = run_with_stdin(
        &["unseal", "--connect", &connect, "--aad", "ctx", "-"],
        &format!("{sealed}\n"),
    )?;
    assert_eq!(stdout_json(&out)?["payload_hex"], "00ff10");
    Ok(())
}

#[tokio::test]
async fn bearer_token_tls_and_unreachable_sidecars() -> TestResult {
    let sidecar = Sidecar::start(
        SidecarOptions::new(keyring_toml(&[(1, "primary")])).auth_token("s3cret-token"),
    )
    .await?;
    let connect = format!("tcp:{}", sidecar.tcp);
    let token_file = sidecar.dir.path().join("auth-token");
    let token_file = token_file.display().to_string();
    let without = run_cli(&["mint", "--connect", &connect, "--tool", "t", "--step", "s"])?;
    assert_eq!(without.status.code(), Some(69));
    assert!(without.stdout.is_empty());
    assert!(
        stderr(&without).contains("UNAUTHENTICATED"),
        "{}",
        stderr(&without)
    );
    assert!(
        stderr(&without).contains("--auth-token-file"),
        "{}",
        stderr(&without)
    );
    let with = run_cli(&[
        "mint",
        "--connect",
        &connect,
        "--auth-token-file",
        &token_file,
        "--tool",
        "t",
        "--step",
        "s",
    ])?;
    assert_eq!(with.status.code(), Some(0), "{}", stderr(&with));
    let listed = run_cli(&[
        "keys",
        "list",
        "--connect",
        &connect,
        "--auth-token-file",
        &token_file,
    ])?;
    assert_eq!(listed.status.code(), Some(0), "{}", stderr(&listed));
    // Without the token, keys list and keys status say what to pass, as mint
    // does (issue 40 item 12); they exit 1, as docs/CLI.md says.
    for command in ["list", "status"] {
        let out = run_cli(&["keys", command, "--connect", &connect])?;
        assert_eq!(
            out.status.code(),
            Some(1),
            "keys {command}: {}",
            stderr(&out)
        );
        assert!(
            stderr(&out).contains("UNAUTHENTICATED")
                && stderr(&out)
                    .contains("(the sidecar needs its bearer token: --auth-token-file FILE)"),
            "keys {command}: {}",
            stderr(&out)
        );
    }

    // A 6 MB token (over the sidecar's 4 MiB message limit): refused as the
    // sidecar would refuse it, not with gRPC's OUT_OF_RANGE text (issue 40
    // item 12).
    let big = run_with_stdin(
        &[
            "verify",
            "--connect",
            &connect,
            "--auth-token-file",
            &token_file,
            "--tool",
            "t",
            "-",
        ],
        &"A".repeat(6_000_000),
    )?;
    assert_eq!(big.status.code(), Some(1), "{}", stderr(&big));
    let said = String::from_utf8_lossy(&big.stdout);
    assert!(
        said.contains("\"reason\":\"too_large\"")
            && said.contains(
                "the token is 6000000 characters, more than any policy accepts (1048576)"
            ),
        "{said} {}",
        stderr(&big)
    );

    // Nothing listens: exit 69 with the address and the cause.
    let port = free_port()?;
    let gone = format!("tcp:127.0.0.1:{port}");
    let out = run_cli(&["verify", "--connect", &gone, "--tool", "t", "abc"])?;
    assert_eq!(out.status.code(), Some(69));
    assert!(out.stdout.is_empty());
    assert!(
        stderr(&out).contains(&gone) && stderr(&out).contains("cannot connect"),
        "{}",
        stderr(&out)
    );
    // A local flag with --connect, and a bare address: exit 64, clearly.
    let keyring = sidecar.keyring.display().to_string();
    let out = run_cli(&[
        "mint",
        "--connect",
        &connect,
        "--keyring",
        &keyring,
        "--tool",
        "t",
        "--step",
        "s",
    ])?;
    assert_eq!(out.status.code(), Some(64));
    assert!(
        stderr(&out).contains("--keyring") && stderr(&out).contains("no meaning with --connect"),
        "{}",
        stderr(&out)
    );
    let out = run_cli(&[
        "mint",
        "--connect",
        &connect,
        "--now",
        "5",
        "--tool",
        "t",
        "--step",
        "s",
    ])?;
    assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
    let bare = sidecar.tcp.to_string();
    let out = run_cli(&["mint", "--connect", &bare, "--tool", "t", "--step", "s"])?;
    assert_eq!(out.status.code(), Some(64));
    assert!(
        stderr(&out).contains(&format!("--connect tcp:{bare}")),
        "{}",
        stderr(&out)
    );
    drop(sidecar);

    // TLS: the sidecar's certificate checked against --tls-ca.
    let pki = crate::tls::pki()?;
    let dir = tempfile::tempdir()?;
    let file = |name: &str, text: &str| -> TestResult<String> {
        let path = dir.path().join(name);
        write_private(&path, text)?;
        Ok(path.display().to_string())
    };
    let (cert, key, ca) = (
        file("cert", &pki.server.0)?,
        file("key", &pki.server.1)?,
        file("ca", &pki.ca)?,
    );
    let sidecar = Sidecar::start(
        SidecarOptions::new(keyring_toml(&[(1, "primary")]))
            .arg("--tls-cert")
            .arg(cert)
            .arg("--tls-key")
            .arg(key),
    )
    .await?;
    let connect = format!("tcp:localhost:{}", sidecar.tcp.port());
    let out = run_cli(&[
        "mint",
        "--connect",
        &connect,
        "--tls-ca",
        &ca,
        "--tool",
        "t",
        "--step",
        "s",
    ])?;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let plain = run_cli(&[
        "mint",
        "--connect",
        &connect,
        "--timeout-ms",
        "2000",
        "--tool",
        "t",
        "--step",
        "s",
    ])?;
    assert_eq!(plain.status.code(), Some(69), "{}", stderr(&plain));
    // `keys status --connect` takes the same TLS and timeout flags: the
    // confirmation step of a rotation works on a TLS-only replica.
    let status = run_cli(&[
        "keys",
        "status",
        "--connect",
        &connect,
        "--tls-ca",
        &ca,
        "--timeout-ms",
        "5000",
        "--json",
    ])?;
    assert_eq!(status.status.code(), Some(0), "{}", stderr(&status));
    let timeline: serde_json::Value = serde_json::from_slice(&status.stdout)?;
    assert_eq!(timeline["minting_key_id"], 1, "{timeline}");
    let plain = run_cli(&["keys", "status", "--connect", &connect, "--json"])?;
    assert_eq!(plain.status.code(), Some(1), "{}", stderr(&plain));
    assert!(plain.stdout.is_empty());
    // A flag of the other source is refused, not ignored.
    let keyring = sidecar.keyring.display().to_string();
    for flags in [["--tls-ca", ca.as_str()], ["--timeout-ms", "100"]] {
        let mut args = vec!["keys", "status", "--keyring", &keyring];
        args.extend(flags);
        let out = run_cli(&args)?;
        assert_eq!(out.status.code(), Some(64), "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("apply only with --connect"),
            "{}",
            stderr(&out)
        );
    }
    Ok(())
}

/// `serve --dev`'s banner: its two lines, run by a shell exactly as printed.
#[test]
fn the_dev_banner_lines_mint_and_verify_as_printed() -> TestResult {
    let port = free_port()?;
    let listen = format!("tcp:127.0.0.1:{port}");
    let child = Command::new(BIN)
        .args(["serve", "--dev", "--listen", &listen])
        .env("REQSTATE_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let mut guard = KillOnDrop(child);
    let stdout = guard.0.stdout.take().ok_or("no stdout")?;
    let mut lines = Vec::new();
    for line in std::io::BufReader::new(stdout).lines() {
        let line = line?;
        let done = line.contains(" verify --connect ");
        lines.push(line);
        if done {
            break;
        }
    }
    let commands: Vec<&str> = lines
        .iter()
        .map(|l| l.trim())
        .filter(|l| l.contains(" mint --connect "))
        .collect();
    assert_eq!(commands.len(), 2, "{lines:#?}");
    assert!(
        !commands[0].contains('|') && commands[1].contains(" | "),
        "{commands:?}"
    );
    let run = |line: &str| -> TestResult<Output> {
        Ok(Command::new("sh")
            .arg("-c")
            .arg(line)
            .env("REQSTATE_LOG", "warn")
            .output()?)
    };
    let minted = run(commands[0])?;
    assert_eq!(minted.status.code(), Some(0), "{}", stderr(&minted));
    assert!(stdout_json(&minted)?["token"].is_string());
    let verified = run(commands[1])?;
    assert_eq!(verified.status.code(), Some(0), "{}", stderr(&verified));
    let verified = stdout_json(&verified)?;
    assert_eq!(verified["valid"], true);
    assert_eq!(verified["state"], serde_json::json!({"n": 1}));
    assert_eq!(verified["step"], "confirm");
    Ok(())
}

/// A command whose standard output is a pipe nobody reads exits 141 (as a
/// shell reports a tool that SIGPIPE ended), quietly: no panic, no backtrace.
#[test]
fn a_closed_output_pipe_ends_every_printing_command_quietly() -> TestResult {
    let dir = tempfile::tempdir()?;
    let keyring = dir.path().join("keyring.toml");
    write_private(&keyring, &keyring_toml(&[(1, "primary")]))?;
    let keyring = keyring.display().to_string();
    let minted = run_cli(&["mint", "--keyring", &keyring, "--tool", "t", "--step", "s"])?;
    let token = stdout_json(&minted)?["token"]
        .as_str()
        .ok_or("no token")?
        .to_owned();
    let cases: Vec<Vec<&str>> = vec![
        vec!["mint", "--keyring", &keyring, "--tool", "t", "--step", "s"],
        vec!["verify", "--keyring", &keyring, "--tool", "t", &token],
        vec!["keys", "list", "--keyring", &keyring],
        vec!["inspect", &token],
        vec!["--help"],
        vec!["mint", "--help"],
    ];
    for args in cases {
        let (reader, writer) = std::io::pipe()?;
        drop(reader);
        let out = Command::new(BIN)
            .args(&args)
            .env("REQSTATE_LOG", "warn")
            .env("RUST_BACKTRACE", "1")
            .stdin(Stdio::null())
            .stdout(writer)
            .stderr(Stdio::piped())
            .output()?;
        assert_eq!(out.status.code(), Some(141), "{args:?}: {}", stderr(&out));
        assert!(out.stderr.is_empty(), "{args:?}: {}", stderr(&out));
    }
    Ok(())
}

#[test]
fn hints_and_flag_messages_a_person_can_act_on() -> TestResult {
    let dir = tempfile::tempdir()?;
    let keyring = dir.path().join("my keys.toml");
    let keyring_text = keyring.display().to_string();
    // `keys new`'s hint, run by a shell as printed, promotes the key.
    for _ in 0..2 {
        let out = run_cli(&["keys", "new", "--keyring", &keyring_text])?;
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    }
    let out = run_cli(&["keys", "new", "--keyring", &keyring_text])?;
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    let hint = said
        .split('`')
        .find(|part| part.starts_with("reqstate keys promote"))
        .ok_or_else(|| format!("no promote hint in {said}"))?
        .replacen("reqstate", BIN, 1);
    // The key is brand new: the hint's command refuses with its own advice
    // (the propagation delay), not with a missing --keyring.
    let ran = Command::new("sh")
        .arg("-c")
        .arg(&hint)
        .env("REQSTATE_LOG", "warn")
        .output()?;
    assert!(
        !stderr(&ran).contains("required"),
        "{hint}: {}",
        stderr(&ran)
    );
    assert!(
        stderr(&ran).contains("--propagation") || ran.status.success(),
        "{hint}: {}",
        stderr(&ran)
    );
    let forced = Command::new("sh")
        .arg("-c")
        .arg(format!("{hint} --force"))
        .env("REQSTATE_LOG", "warn")
        .output()?;
    assert_eq!(forced.status.code(), Some(0), "{hint}: {}", stderr(&forced));

    // `--ttl -1`: the flag and what it takes, not clap's "unexpected argument".
    let out = run_cli(&[
        "mint",
        "--keyring",
        &keyring_text,
        "--tool",
        "t",
        "--step",
        "s",
        "--ttl",
        "-1",
    ])?;
    assert_eq!(out.status.code(), Some(64));
    assert!(
        stderr(&out).contains("--ttl") && stderr(&out).contains("whole number of seconds"),
        "{}",
        stderr(&out)
    );
    // A bare HOST:PORT: the form that works.
    let out = run_cli(&["serve", "--dev", "--listen", "127.0.0.1:50051"])?;
    assert_eq!(out.status.code(), Some(64));
    assert!(
        stderr(&out).contains("--listen tcp:127.0.0.1:50051"),
        "{}",
        stderr(&out)
    );
    // A missing keyring is reported before the missing --listen.
    let out = run_cli(&["serve", "--keyring", "missing.toml"])?;
    assert_eq!(out.status.code(), Some(64));
    assert!(stderr(&out).contains("missing.toml"), "{}", stderr(&out));
    // No Rust debug text in a log line or message.
    assert!(!stderr(&out).contains("Some("), "{}", stderr(&out));
    Ok(())
}

/// `serve --max-ttl 60` alone serves (the default TTL is clamped to it);
/// `--default-ttl` above `--max-ttl`, both given, is still refused.
#[tokio::test]
async fn max_ttl_alone_clamps_the_default_ttl() -> TestResult {
    let sidecar = Sidecar::start(
        SidecarOptions::new(keyring_toml(&[(1, "primary")]))
            .arg("--max-ttl")
            .arg("60"),
    )
    .await?;
    let connect = format!("unix:{}", sidecar.unix.display());
    let log = sidecar.log();
    assert!(log.contains("serving gRPC listen=127.0.0.1:"), "{log}");
    assert!(!log.contains("Some("), "{log}");
    let minted = run_cli(&[
        "mint",
        "--connect",
        &connect,
        "--tool",
        "t",
        "--step",
        "s",
        "--ttl",
        "60",
    ])?;
    let minted = stdout_json(&minted)?;
    assert_eq!(
        minted["expires_at"].as_u64().unwrap_or(0) - minted["issued_at"].as_u64().unwrap_or(0),
        60
    );
    drop(sidecar);
    let out = run_cli(&["serve", "--dev", "--max-ttl", "60", "--default-ttl", "600"])?;
    assert_eq!(out.status.code(), Some(64));
    assert!(
        stderr(&out).contains("--default-ttl 600"),
        "{}",
        stderr(&out)
    );
    Ok(())
}

/// A local address that is not loopback (the host's own, from `hostname
/// -I` or `ip -4 addr`), to listen on; `None` on a machine with none.
fn non_loopback_local_ip() -> Option<std::net::IpAddr> {
    let from = |program: &str, args: &[&str]| -> Vec<std::net::IpAddr> {
        let Ok(out) = Command::new(program).args(args).output() else {
            return Vec::new();
        };
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .filter_map(|word| word.split('/').next()?.parse().ok())
            .collect()
    };
    from("hostname", &["-I"])
        .into_iter()
        .chain(from("ip", &["-4", "-o", "addr"]))
        .find(|ip: &std::net::IpAddr| {
            ip.is_ipv4() && !ip.is_loopback() && std::net::TcpListener::bind((*ip, 0)).is_ok()
        })
}

/// Security review round 4, finding 2: with a bearer token, a plaintext
/// `tcp:` target that is not loopback is refused (exit 64, with what to do)
/// before anything connects, for every command that sends the token; with
/// `--insecure-send-token` it is contacted; loopback is unchanged.
#[test]
fn a_bearer_token_never_goes_in_plaintext_to_another_host() -> TestResult {
    let dir = tempfile::tempdir()?;
    let token_file = dir.path().join("token");
    write_private(&token_file, "s3cret-token\n")?;
    let token_file = token_file.display().to_string();
    // A listener on the host's own non-loopback address shows that nothing
    // connects. Without one, TEST-NET-1 (never routed): the refusal must
    // come at once, long before the connect timeout.
    let listener = match non_loopback_local_ip() {
        Some(ip) => Some(std::net::TcpListener::bind((ip, 0))?),
        None => None,
    };
    let connect = match &listener {
        Some(listener) => {
            listener.set_nonblocking(true)?;
            format!("tcp:{}", listener.local_addr()?)
        }
        None => "tcp:192.0.2.1:50051".to_owned(),
    };
    let token_flags = [
        "--auth-token-file",
        token_file.as_str(),
        "--timeout-ms",
        "3000",
    ];
    let commands: [&[&str]; 7] = [
        &["mint", "--tool", "t", "--step", "s"],
        &["verify", "--tool", "t", "abc"],
        &["consume", "--tool", "t", "abc"],
        &["seal", "--payload-hex", "00"],
        &["unseal", "abc"],
        &["keys", "list"],
        &["keys", "status"],
    ];
    for command in commands {
        let mut args = command.to_vec();
        args.extend(["--connect", connect.as_str()]);
        args.extend(token_flags);
        let started = std::time::Instant::now();
        let out = run_cli(&args)?;
        let message = stderr(&out);
        assert_eq!(out.status.code(), Some(64), "{args:?}: {message}");
        assert!(out.stdout.is_empty(), "{args:?}");
        assert!(
            started.elapsed() < std::time::Duration::from_millis(2500),
            "{args:?}: refused only after {:?}",
            started.elapsed()
        );
        for hint in [
            "not a loopback address",
            "--tls-ca",
            "unix:PATH",
            "--insecure-send-token",
        ] {
            assert!(message.contains(hint), "{args:?}: no {hint:?} in {message}");
        }
    }
    // The variable form of the address is refused the same way.
    let out = Command::new(BIN)
        .args(["keys", "list"])
        .args(token_flags)
        .env("REQSTATE_CONNECT", &connect)
        .env("REQSTATE_LOG", "warn")
        .output()?;
    assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
    if let Some(listener) = &listener {
        match listener.accept() {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            other => return Err(format!("something connected: {other:?}").into()),
        }
        // Told plainly, the client connects (and, with no sidecar behind
        // the port, gives up at its timeout: exit 69).
        let out = run_cli(&[
            "mint",
            "--tool",
            "t",
            "--step",
            "s",
            "--connect",
            &connect,
            "--auth-token-file",
            &token_file,
            "--insecure-send-token",
            "--timeout-ms",
            "500",
        ])?;
        assert_eq!(out.status.code(), Some(69), "{}", stderr(&out));
        assert!(
            listener.accept().is_ok(),
            "--insecure-send-token did not connect"
        );
    }
    // Loopback by address or by a name resolving to loopback only: the
    // token check passes (nothing listens: exit 69, not 64).
    let port = free_port()?;
    for host in ["127.0.0.1", "[::1]", "localhost"] {
        let target = format!("tcp:{host}:{port}");
        let out = run_cli(&[
            "mint",
            "--tool",
            "t",
            "--step",
            "s",
            "--connect",
            &target,
            "--auth-token-file",
            &token_file,
            "--timeout-ms",
            "2000",
        ])?;
        assert_eq!(out.status.code(), Some(69), "{target}: {}", stderr(&out));
    }
    Ok(())
}

/// Security review round 4: the client's `--auth-token-file` gets the
/// server's guards: a FIFO is refused rather than waited on past
/// `--timeout-ms`, `/dev/zero` rather than read until memory runs out.
#[test]
fn a_token_file_that_is_not_a_regular_file_is_refused_promptly() -> TestResult {
    let dir = tempfile::tempdir()?;
    let fifo = dir.path().join("token-fifo");
    let made = Command::new("mkfifo").arg(&fifo).status()?;
    assert!(made.success(), "mkfifo");
    let port = free_port()?;
    let connect = format!("tcp:127.0.0.1:{port}");
    let fifo = fifo.display().to_string();
    for file in [fifo.as_str(), "/dev/zero"] {
        let started = std::time::Instant::now();
        let mut child = KillOnDrop(
            Command::new(BIN)
                .args([
                    "keys",
                    "list",
                    "--connect",
                    &connect,
                    "--auth-token-file",
                    file,
                ])
                .args(["--timeout-ms", "1000"])
                .env("REQSTATE_LOG", "warn")
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()?,
        );
        let deadline = started + std::time::Duration::from_secs(10);
        let status = loop {
            if let Some(status) = child.0.try_wait()? {
                break status;
            }
            if std::time::Instant::now() > deadline {
                return Err(format!("{file}: still running after 10 s").into());
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        let mut message = String::new();
        std::io::Read::read_to_string(
            &mut child.0.stderr.take().ok_or("no stderr")?,
            &mut message,
        )?;
        assert_eq!(status.code(), Some(64), "{file}: {message}");
        assert!(
            message.contains("not a regular file") && message.contains(file),
            "{file}: {message}"
        );
        assert!(
            started.elapsed() < std::time::Duration::from_secs(2),
            "{file}: took {:?}",
            started.elapsed()
        );
    }
    Ok(())
}
