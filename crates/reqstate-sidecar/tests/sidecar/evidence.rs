//! Which key is in use, against the real binary: the schedule checked
//! against the policy served (at start and on reload), per-key counters on
//! the metrics listener and in ListKeys, and a scheduled takeover seen
//! without a reload.

use crate::sidecar_process;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use reqstate_proto::v1 as pb;
use reqstate_proto::v1::request_state_client::RequestStateClient;
use sidecar_process::{
    Sidecar, SidecarOptions, TestResult, eventually, keyring_toml, run_cli, write_private,
};
use tonic::transport::Channel;

fn now() -> TestResult<u64> {
    Ok(SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs())
}

/// Keys 1 (primary) and 2 (active), with extra lines after `id = 2`'s and
/// `id = 1`'s `status` line.
fn scheduled(key1_extra: &str, key2_extra: &str) -> String {
    keyring_toml(&[(1, "primary"), (2, "active")])
        .replace(
            "status = \"primary\"\n",
            &format!("status = \"primary\"\n{key1_extra}"),
        )
        .replace(
            "status = \"active\"\n",
            &format!("status = \"active\"\n{key2_extra}"),
        )
}

async fn mint(client: &mut RequestStateClient<Channel>) -> TestResult<pb::MintResponse> {
    Ok(client
        .mint(pb::MintRequest {
            tool: "evidence".into(),
            step: "s".into(),
            ttl_seconds: 60,
            ..Default::default()
        })
        .await?
        .into_inner())
}

async fn verify(
    client: &mut RequestStateClient<Channel>,
    token: &str,
) -> TestResult<pb::VerifyResponse> {
    Ok(client
        .verify(pb::VerifyRequest {
            tool: "evidence".into(),
            token: token.into(),
            ..Default::default()
        })
        .await?
        .into_inner())
}

/// A schedule that retires key 1 while its tokens are live under the
/// policy served is refused at start (exit 64, naming the file and the
/// instants); with a longer wait, or a shorter --max-ttl, it serves.
#[tokio::test]
async fn a_schedule_that_refuses_live_tokens_is_refused_at_start() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("keyring.toml");
    let takeover = now()? + 3600;
    // Retires 100 s after key 2 takes over: less than the default max
    // lifetime (3600 s) plus leeway.
    write_private(
        &path,
        &scheduled(
            &format!("retire_at = {}\n", reqstate::rfc3339_utc(takeover + 100)),
            &format!("mint_from = {}\n", reqstate::rfc3339_utc(takeover)),
        ),
    )?;
    let socket = dir.path().join("s.sock");
    let serve = |extra: &[&str]| -> TestResult<std::process::Output> {
        let mut args = vec![
            "serve".to_owned(),
            "--keyring".to_owned(),
            path.display().to_string(),
            "--listen".to_owned(),
            format!("unix:{}", socket.display()),
        ];
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        run_cli(&args)
    };
    let out = serve(&[])?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(64), "{stderr}");
    assert!(stderr.contains(&path.display().to_string()), "{stderr}");
    assert!(stderr.contains("refuses live tokens"), "{stderr}");
    assert!(
        stderr.contains(&reqstate::rfc3339_utc(takeover + 100)),
        "{stderr}"
    );

    // Under --max-ttl 60 --clock-leeway 30 the same schedule leaves every
    // token its lifetime: it starts (and is stopped by the test).
    let mut sidecar = Sidecar::start(
        SidecarOptions::new(std::fs::read_to_string(&path)?)
            .arg("--max-ttl")
            .arg("60")
            .arg("--default-ttl")
            .arg("60")
            .arg("--clock-leeway")
            .arg("30"),
    )
    .await?;
    let listed = sidecar.list_keys().await?;
    assert_eq!(
        (listed.max_ttl_seconds, listed.clock_leeway_seconds),
        (60, 30)
    );
    sidecar.signal(nix::sys::signal::Signal::SIGTERM)?;
    sidecar.wait_exit(Duration::from_secs(10)).await?;
    Ok(())
}

/// A reload whose schedule refuses live tokens is refused like any invalid
/// keyring: counted, logged with the file, and the keyring in service stays.
#[tokio::test]
async fn a_reload_whose_schedule_refuses_live_tokens_is_refused() -> TestResult {
    let sidecar = Sidecar::start(SidecarOptions::new(keyring_toml(&[(1, "primary")]))).await?;
    let takeover = now()? + 3600;
    write_private(
        &sidecar.keyring,
        &scheduled(
            &format!("retire_at = {}\n", reqstate::rfc3339_utc(takeover + 10)),
            &format!("mint_from = {}\n", reqstate::rfc3339_utc(takeover)),
        ),
    )?;
    sidecar
        .metric_reaches(
            "reqstate_keyring_reload_failures_total",
            1.0,
            Duration::from_secs(10),
        )
        .await?;
    let listed = sidecar.list_keys().await?;
    assert_eq!(listed.keyring_generation, 1);
    assert_eq!(listed.keys.len(), 1);
    let log = sidecar.log();
    assert!(log.contains("refuses live tokens"), "{log}");
    assert!(
        log.contains(&sidecar.keyring.display().to_string()),
        "{log}"
    );
    assert_eq!(sidecar.metric("reqstate_keyring_reloads_total").await?, 0.0);
    Ok(())
}

/// The value of the series `name{labels}` in a scrape (`None` if absent).
fn series(text: &str, name_and_labels: &str) -> Option<f64> {
    text.lines().find_map(|line| {
        line.strip_prefix(name_and_labels)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}

/// Mint and verify under two keys (key 2 takes over by its `mint_from`, 4 s
/// after start, with no reload), then refusals (a retired key after a
/// reload, an unknown key, a forged tag), and check every number in the
/// scrape and in ListKeys.
#[tokio::test]
async fn per_key_evidence_in_metrics_and_list_keys() -> TestResult {
    let takeover = now()? + 4;
    let keyring = scheduled(
        "",
        &format!("mint_from = {}\n", reqstate::rfc3339_utc(takeover)),
    );
    let sidecar = Sidecar::start(SidecarOptions::new(keyring.clone())).await?;
    let mut client = sidecar.unix_client().await?;

    // Before the takeover: key 1 mints, key 2 verifies only.
    let before = client.list_keys(pb::ListKeysRequest {}).await?.into_inner();
    assert!(before.now < takeover, "the sidecar took too long to start");
    assert_eq!(before.minting_key_id, 1);
    let next = before.next_transition.ok_or("a transition is scheduled")?;
    assert_eq!(
        (next.at, next.key_id, next.kind()),
        (takeover, 2, pb::TransitionKind::StartsMinting)
    );
    let key2 = before.keys.iter().find(|k| k.id == 2).ok_or("key 2")?;
    assert_eq!(key2.status(), pb::KeyStatus::Active);
    assert_eq!(key2.file_status(), pb::KeyStatus::Active);
    assert_eq!(key2.mint_from, Some(takeover));
    let expected_sha256 = {
        let digest = ring_sha256(keyring.as_bytes());
        assert_eq!(before.keyring_sha256, digest);
        digest
    };
    let scrape = sidecar.metrics_text().await?;
    assert_eq!(
        series(&scrape, "reqstate_keyring_minting_key_id"),
        Some(1.0)
    );
    assert_eq!(series(&scrape, "reqstate_keyring_newest_key_id"), Some(2.0));
    assert_eq!(
        series(
            &scrape,
            &format!("reqstate_keyring_info{{sha256=\"{expected_sha256}\"}}")
        ),
        Some(1.0)
    );
    assert_eq!(
        series(
            &scrape,
            "reqstate_key_status{key_id=\"2\",status=\"active\"}"
        ),
        Some(1.0)
    );

    let mut under_1 = Vec::new();
    for _ in 0..3 {
        let minted = mint(&mut client).await?;
        assert_eq!(minted.key_id, 1);
        under_1.push(minted.token);
    }
    for token in &under_1[..2] {
        assert!(verify(&mut client, token).await?.valid);
    }

    // The takeover, with no reload: key 2 mints.
    let after = eventually(Duration::from_secs(10), "key 2 minting", || {
        let mut client = client.clone();
        async move {
            let listed = client.list_keys(pb::ListKeysRequest {}).await?.into_inner();
            Ok((listed.minting_key_id == 2).then_some(listed))
        }
    })
    .await?;
    assert_eq!(after.keyring_generation, 1, "no reload happened");
    assert!(after.now >= takeover);
    assert_eq!(after.next_transition, None);
    let statuses: Vec<(u32, pb::KeyStatus, pb::KeyStatus)> = after
        .keys
        .iter()
        .map(|k| (k.id, k.status(), k.file_status()))
        .collect();
    assert_eq!(
        statuses,
        vec![
            (1, pb::KeyStatus::Active, pb::KeyStatus::Primary),
            (2, pb::KeyStatus::Primary, pb::KeyStatus::Active),
        ]
    );
    let minted_2 = mint(&mut client).await?;
    assert_eq!(minted_2.key_id, 2);
    let verified_2 = verify(&mut client, &minted_2.token).await?;
    assert!(verified_2.valid);
    // Key 1's tokens still verify: it was not retired.
    assert!(verify(&mut client, &under_1[2]).await?.valid);
    let sealed = client
        .seal(pb::SealRequest {
            payload: b"p".to_vec(),
            aad: b"a".to_vec(),
        })
        .await?
        .into_inner();
    assert_eq!(sealed.key_id, 2);
    let unsealed = client
        .unseal(pb::UnsealRequest {
            token: sealed.token,
            aad: b"a".to_vec(),
        })
        .await?
        .into_inner();
    assert!(unsealed.valid);

    // Refusals: a forged tag under key 2, a token of a key this keyring
    // does not have (minted by another sidecar: key 7), and one that does
    // not even decode.
    // One character changed well inside the token (not its header, nor the
    // partial last character): the tag no longer matches.
    let mut forged = minted_2.token.clone().into_bytes();
    let at = forged.len() - 6;
    forged[at] = if forged[at] == b'A' { b'B' } else { b'A' };
    let forged = String::from_utf8(forged)?;
    assert!(!verify(&mut client, &forged).await?.valid);
    let other = Sidecar::start(SidecarOptions::new(keyring_toml(&[(7, "primary")]))).await?;
    let foreign = mint(&mut other.unix_client().await?).await?;
    assert_eq!(foreign.key_id, 7);
    assert_eq!(
        verify(&mut client, &foreign.token).await?.reason(),
        pb::Reason::UnknownKey
    );
    assert!(!verify(&mut client, "!").await?.valid);

    let listed = client.list_keys(pb::ListKeysRequest {}).await?.into_inner();
    let counts: Vec<(u32, u64, u64)> = listed
        .keys
        .iter()
        .map(|k| (k.id, k.minted, k.verified))
        .collect();
    // Key 1: 3 minted, 3 verified. Key 2: a Mint and a Seal; a Verify and an Unseal.
    assert_eq!(counts, vec![(1, 3, 3), (2, 2, 2)]);
    for key in &listed.keys {
        let at = key.last_verified_at.ok_or("verified")?;
        assert!(at >= before.now && at <= listed.now, "{at}");
    }
    let scrape = sidecar.metrics_text().await?;
    for (series_name, value) in [
        ("reqstate_key_minted_total{key_id=\"1\"}", 3.0),
        ("reqstate_key_minted_total{key_id=\"2\"}", 2.0),
        ("reqstate_key_verified_total{key_id=\"1\"}", 3.0),
        ("reqstate_key_verified_total{key_id=\"2\"}", 2.0),
        (
            "reqstate_key_refusals_total{key_id=\"2\",reason=\"authentication_failed\"}",
            1.0,
        ),
        (
            "reqstate_key_refusals_total{key_id=\"other\",reason=\"unknown_key\"}",
            1.0,
        ),
        (
            "reqstate_key_refusals_total{key_id=\"other\",reason=\"malformed\"}",
            1.0,
        ),
        (
            "reqstate_key_refusals_total{key_id=\"1\",reason=\"retired_key\"}",
            0.0,
        ),
        ("reqstate_key_status{key_id=\"1\",status=\"active\"}", 1.0),
        ("reqstate_key_status{key_id=\"1\",status=\"primary\"}", 0.0),
        ("reqstate_key_status{key_id=\"2\",status=\"primary\"}", 1.0),
        ("reqstate_keyring_minting_key_id", 2.0),
    ] {
        assert_eq!(
            series(&scrape, series_name),
            Some(value),
            "{series_name}\n{scrape}"
        );
    }
    assert_eq!(
        series(
            &scrape,
            "reqstate_key_last_verified_timestamp_seconds{key_id=\"2\"}"
        ),
        listed
            .keys
            .iter()
            .find(|k| k.id == 2)
            .and_then(|k| k.last_verified_at)
            .map(|at| at as f64)
    );
    // No series for an id that is not in the keyring: the refusal under
    // key 7 went to "other".
    assert!(!scrape.contains("key_id=\"7\""), "{scrape}");

    // Retire key 1 by a reload (key 2 stays primary by its schedule): its
    // tokens are refused as retired_key, counted under key 1, and the
    // counts of the keys that stayed are kept.
    let retired = keyring.replace("status = \"primary\"", "status = \"retired\"");
    let retired = retired.replacen(
        "status = \"active\"\nmint_from",
        "status = \"primary\"\n# was scheduled from",
        1,
    );
    write_private(&sidecar.keyring, &retired)?;
    eventually(Duration::from_secs(10), "the reload", || {
        let mut client = client.clone();
        async move {
            let listed = client.list_keys(pb::ListKeysRequest {}).await?.into_inner();
            Ok((listed.keyring_generation == 2).then_some(()))
        }
    })
    .await?;
    assert_eq!(
        verify(&mut client, &under_1[0]).await?.reason(),
        pb::Reason::RetiredKey
    );
    let scrape = sidecar.metrics_text().await?;
    assert_eq!(
        series(
            &scrape,
            "reqstate_key_refusals_total{key_id=\"1\",reason=\"retired_key\"}"
        ),
        Some(1.0),
        "{scrape}"
    );
    assert_eq!(
        series(&scrape, "reqstate_key_verified_total{key_id=\"1\"}"),
        Some(3.0)
    );
    assert_eq!(
        series(
            &scrape,
            "reqstate_key_status{key_id=\"1\",status=\"retired\"}"
        ),
        Some(1.0)
    );
    assert_eq!(
        series(
            &scrape,
            &format!(
                "reqstate_keyring_info{{sha256=\"{}\"}}",
                ring_sha256(retired.as_bytes())
            )
        ),
        Some(1.0)
    );
    Ok(())
}

fn ring_sha256(bytes: &[u8]) -> String {
    sha256sum(bytes).unwrap_or_else(|e| format!("sha256sum failed: {e}"))
}

/// SHA-256 by `sha256sum`, an implementation independent of the sidecar's.
fn sha256sum(bytes: &[u8]) -> TestResult<String> {
    use std::io::Write as _;
    let mut child = std::process::Command::new("sha256sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()?;
    child
        .stdin
        .take()
        .ok_or("sha256sum's stdin")?
        .write_all(bytes)?;
    let out = child.wait_with_output()?;
    let text = String::from_utf8(out.stdout)?;
    let hex = text.split_whitespace().next().ok_or("sha256sum's output")?;
    Ok(hex.to_owned())
}
