//! `reqstate keys rotate|promote|retire|status` on files, with the clock
//! given by `--now`: rotate is idempotent, the switch happens at `mint_from`
//! exactly (−1 s, at, +1 s, through `keys status` and `mint`/`verify`), and
//! every unsafe promote or retire is refused with its reason, the file left
//! byte for byte as it was.

use crate::sidecar_process;

use std::path::Path;

use sidecar_process::{TestResult, run_cli};

/// Runs `reqstate ARGS --keyring PATH`: (exit code, stdout, stderr).
fn keys(path: &Path, args: &[&str]) -> TestResult<(i32, String, String)> {
    let keyring = path.display().to_string();
    let mut argv = vec!["keys"];
    argv.extend_from_slice(args);
    argv.extend_from_slice(&["--keyring", &keyring]);
    let out = run_cli(&argv)?;
    Ok((
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

fn ok(path: &Path, args: &[&str]) -> TestResult<String> {
    let (code, out, err) = keys(path, args)?;
    if code != 0 {
        return Err(format!("keys {args:?}: exit {code}: {err}").into());
    }
    Ok(out)
}

/// A refusal: exit 64, the file unchanged; returns stderr.
fn refused(path: &Path, args: &[&str]) -> TestResult<String> {
    let before = std::fs::read(path)?;
    let (code, out, err) = keys(path, args)?;
    assert_eq!(code, 64, "keys {args:?} should be refused: {out}{err}");
    assert_eq!(
        std::fs::read(path)?,
        before,
        "keys {args:?} changed the file"
    );
    Ok(err)
}

fn status_json(path: &Path, now: u64) -> TestResult<serde_json::Value> {
    let now = now.to_string();
    Ok(serde_json::from_str(&ok(
        path,
        &["status", "--json", "--now", &now],
    )?)?)
}

fn created(path: &Path, id: u64) -> TestResult<u64> {
    let listed: serde_json::Value = serde_json::from_str(&ok(path, &["list", "--json"])?)?;
    listed
        .as_array()
        .and_then(|keys| keys.iter().find(|k| k["id"] == id))
        .and_then(|k| k["created_at"].as_u64())
        .ok_or_else(|| format!("key {id} has no created_at: {listed}").into())
}

/// `reqstate mint|verify` at `--now` with the rotation's policy.
fn codec(path: &Path, args: &[&str], now: u64) -> TestResult<serde_json::Value> {
    let keyring = path.display().to_string();
    let now = now.to_string();
    let mut argv = args.to_vec();
    argv.extend_from_slice(&[
        "--keyring",
        &keyring,
        "--tool",
        "t",
        "--now",
        &now,
        "--max-lifetime",
        "20",
        "--clock-leeway",
        "5",
    ]);
    let out = run_cli(&argv)?;
    Ok(serde_json::from_slice(&out.stdout)?)
}

#[test]
fn rotate_is_idempotent_and_the_switch_is_at_mint_from_to_the_second() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("keyring.toml");
    ok(&path, &["new"])?;
    let t0 = created(&path, 1)?;
    let policy = ["--max-ttl", "20", "--leeway", "5"];
    let now = t0.to_string();
    let mut rotate = vec!["rotate", "--propagation", "60s", "--now", &now];
    rotate.extend_from_slice(&policy);
    let said = ok(&path, &rotate)?;
    assert!(said.contains("scheduled key 2"), "{said}");
    assert!(said.contains("in 1m"), "the timeline says when: {said}");
    let once = std::fs::read(&path)?;

    // Again, up to the second before the switch: nothing changes.
    for later in [t0, t0 + 59] {
        let now = later.to_string();
        let mut again = vec!["rotate", "--propagation", "60s", "--now", &now];
        again.extend_from_slice(&policy);
        let said = ok(&path, &again)?;
        assert!(
            said.contains("in progress") && said.contains("no change"),
            "{said}"
        );
        assert_eq!(std::fs::read(&path)?, once, "rotate is not idempotent");
    }

    // A policy other than the one the schedule was made for: refused.
    let now = (t0 + 10).to_string();
    let err = refused(
        &path,
        &["rotate", "--now", &now, "--max-ttl", "100", "--leeway", "5"],
    )?;
    assert!(err.contains("must be what the fleet serves"), "{err}");

    // The minting key at mint_from - 1 s, at, + 1 s: the file's timeline ...
    let mint_from = t0 + 60;
    let retire_at = mint_from + 20 + 5;
    for (now, minting) in [(mint_from - 1, 1), (mint_from, 2), (mint_from + 1, 2)] {
        let status = status_json(&path, now)?;
        assert_eq!(status["minting_key_id"], minting, "at {now}: {status}");
        let minted = codec(&path, &["mint", "--step", "s", "--ttl", "20"], now)?;
        assert_eq!(minted["key_id"], minting, "mint at {now}: {minted}");
    }
    let status = status_json(&path, mint_from - 1)?;
    assert_eq!(status["next_transition"]["at"], mint_from, "{status}");
    assert_eq!(
        status["next_transition"]["kind"], "starts_minting",
        "{status}"
    );
    // ... and key 1's last token: accepted to the end of its lifetime plus
    // leeway (just before retire_at), refused from retire_at.
    let last = codec(
        &path,
        &["mint", "--step", "s", "--ttl", "20"],
        mint_from - 1,
    )?;
    let token = last["token"].as_str().ok_or("no token")?.to_string();
    for (now, valid) in [
        (retire_at - 2, true),
        (retire_at, false),
        (retire_at + 1, false),
    ] {
        let verified = codec(&path, &["verify", &token], now)?;
        assert_eq!(verified["valid"], valid, "verify at {now}: {verified}");
        if !valid {
            assert_eq!(verified["reason"], "retired_key", "{verified}");
        }
    }

    // With --every, a rotation that is not due changes nothing.
    let now = (mint_from + 100).to_string();
    let mut not_due = vec!["rotate", "--every", "30d", "--grace", "1d", "--now", &now];
    not_due.extend_from_slice(&policy);
    let before = std::fs::read(&path)?;
    let said = ok(&path, &not_due)?;
    assert!(said.contains("not due"), "{said}");
    assert_eq!(std::fs::read(&path)?, before);

    // Once key 1 has been retired longer than --grace, the next rotation
    // drops it (settling key 2 as the primary) and schedules key 3.
    let now = (retire_at + 11).to_string();
    let mut next = vec![
        "rotate",
        "--grace",
        "10s",
        "--propagation",
        "60s",
        "--now",
        &now,
    ];
    next.extend_from_slice(&policy);
    let said = ok(&path, &next)?;
    assert!(
        said.contains("dropped key 1") && said.contains("scheduled key 3"),
        "{said}"
    );
    let status = status_json(&path, retire_at + 11)?;
    let ids: Vec<(u64, String, String)> = status["keys"]
        .as_array()
        .ok_or("keys")?
        .iter()
        .map(|k| {
            (
                k["id"].as_u64().unwrap_or(0),
                k["status"].as_str().unwrap_or("").to_string(),
                k["file_status"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    assert_eq!(
        ids,
        vec![
            (2, "primary".into(), "primary".into()),
            (3, "active".into(), "active".into())
        ]
    );
    Ok(())
}

#[test]
fn unsafe_promote_and_retire_are_refused_with_their_reason() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("keyring.toml");
    ok(&path, &["new"])?;
    ok(&path, &["new"])?;
    let t0 = created(&path, 2)?;
    let at = |t: u64| t.to_string();

    // Promote before the propagation delay has passed since key 2 was made.
    let err = refused(&path, &["promote", "2", "--now", &at(t0 + 10)])?;
    assert!(
        err.contains("unknown_key") && err.contains("--at ") && err.contains("--force"),
        "{err}"
    );
    let err = refused(
        &path,
        &[
            "promote",
            "2",
            "--propagation",
            "1h",
            "--at",
            &at(t0 + 600),
            "--now",
            &at(t0),
        ],
    )?;
    assert!(err.contains("unknown_key"), "{err}");
    // A promotion in the past, a malformed duration or instant: usage errors.
    let err = refused(
        &path,
        &["promote", "2", "--at", &at(t0 - 1), "--now", &at(t0)],
    )?;
    assert!(err.contains("in the past"), "{err}");
    let err = refused(&path, &["promote", "2", "--propagation", "5min"])?;
    assert!(err.contains("--propagation"), "{err}");
    let err = refused(&path, &["promote", "2", "--at", "tomorrow"])?;
    assert!(err.contains("--at"), "{err}");

    // Scheduled after the delay: accepted.
    let switch = t0 + 300;
    ok(
        &path,
        &["promote", "2", "--at", &at(switch), "--now", &at(t0 + 10)],
    )?;

    // Retiring key 1 before its last tokens have expired is refused, saying
    // which tokens and until when.
    let safe = switch + 86_400 + 60;
    let err = refused(
        &path,
        &["retire", "1", "--at", &at(switch), "--now", &at(t0 + 10)],
    )?;
    assert!(
        err.contains("retired_key")
            && err.contains(&format!("until {}", reqstate::rfc3339_utc(safe)))
            && err.contains("--force"),
        "{err}"
    );
    let err = refused(
        &path,
        &["retire", "1", "--at", &at(safe - 1), "--now", &at(t0 + 10)],
    )?;
    assert!(err.contains(&reqstate::rfc3339_utc(safe)), "{err}");
    // The last key to mint cannot be retired: nothing would mint after it.
    let err = refused(&path, &["retire", "2", "--now", &at(t0 + 10)])?;
    assert!(err.contains("no key to mint"), "{err}");
    // The key minting now is not cut off, even with --force.
    let err = refused(&path, &["retire", "1", "--force", "--now", &at(t0 + 10)])?;
    assert!(err.contains("mints now"), "{err}");
    ok(
        &path,
        &["retire", "1", "--at", &at(safe), "--now", &at(t0 + 10)],
    )?;

    // A key outside the mint order: the file cannot tell when it last minted.
    ok(&path, &["new"])?;
    let err = refused(&path, &["retire", "3", "--now", &at(t0 + 10)])?;
    assert!(err.contains("cannot tell when"), "{err}");
    ok(&path, &["retire", "3", "--force", "--now", &at(t0 + 10)])?;

    // A key that never minted, cut off: key 1 mints on, without retire_at.
    ok(&path, &["retire", "2", "--force", "--now", &at(t0 + 10)])?;
    let status = status_json(&path, switch + 1)?;
    assert_eq!(status["minting_key_id"], 1, "{status}");
    let file_statuses: Vec<(u64, Option<u64>, String)> = status["keys"]
        .as_array()
        .ok_or("keys")?
        .iter()
        .map(|k| {
            (
                k["id"].as_u64().unwrap_or(0),
                k["retire_at"].as_u64(),
                k["file_status"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    assert_eq!(
        file_statuses,
        vec![
            (1, None, "primary".into()),
            (2, None, "retired".into()),
            (3, None, "retired".into())
        ]
    );
    Ok(())
}

#[tokio::test]
async fn status_connect_prints_a_running_sidecars_timeline() -> TestResult {
    use sidecar_process::{Sidecar, SidecarOptions};
    // A keyring in the middle of a rotation: key 2 mints from an hour on.
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("keyring.toml");
    ok(&path, &["new"])?;
    ok(&path, &["rotate", "--propagation", "1h"])?;
    let mint_from = status_json(&path, created(&path, 1)?)?["keys"][1]["mint_from"]
        .as_u64()
        .ok_or("no mint_from")?;
    let sidecar = Sidecar::start(
        SidecarOptions::new(std::fs::read_to_string(&path)?).auth_token("fleet-token"),
    )
    .await?;
    let address = format!("unix:{}", sidecar.unix.display());
    let token_file = sidecar.dir.path().join("auth-token");
    let token_file = token_file.display().to_string();

    let out = run_cli(&[
        "keys",
        "status",
        "--connect",
        &address,
        "--auth-token-file",
        &token_file,
        "--json",
    ])?;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let status: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    assert_eq!(status["minting_key_id"], 1, "{status}");
    assert_eq!(status["next_transition"]["key_id"], 2, "{status}");
    assert_eq!(status["next_transition"]["at"], mint_from, "{status}");
    assert_eq!(status["sidecar"]["keyring_generation"], 1, "{status}");
    assert_eq!(status["keys"][1]["status"], "active", "{status}");

    // The text form says the same, with the time left.
    let out = run_cli(&[
        "keys",
        "status",
        "--connect",
        &address,
        "--auth-token-file",
        &token_file,
    ])?;
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("key 2 starts minting") && text.contains("(in 59m")
            || text.contains("(in 1h"),
        "{text}"
    );

    // Without the token the sidecar refuses the call: exit 1, the reason said.
    let out = run_cli(&["keys", "status", "--connect", &address])?;
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("UNAUTHENTICATED"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}
