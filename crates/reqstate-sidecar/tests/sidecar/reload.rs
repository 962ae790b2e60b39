//! Keyring hot reload against the real binary: a full rotation under load, a bad file on reload, SIGHUP, and a Kubernetes-style `..data` symlink swap.

use crate::sidecar_process;

use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::fs::symlink;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use reqstate_proto::v1 as pb;
use reqstate_proto::v1::request_state_client::RequestStateClient;
use sidecar_process::{
    Sidecar, SidecarOptions, TestResult, eventually, keyring_toml, keys_cli, with_bearer,
    write_private,
};
use tonic::transport::Channel;

async fn keys_listed(
    client: &mut RequestStateClient<Channel>,
) -> TestResult<(u64, Vec<(u32, pb::KeyStatus)>)> {
    let listed = client.list_keys(pb::ListKeysRequest {}).await?.into_inner();
    Ok((
        listed.keyring_generation,
        listed.keys.iter().map(|k| (k.id, k.status())).collect(),
    ))
}

async fn wait_for_generation(
    client: &RequestStateClient<Channel>,
    generation: u64,
) -> TestResult<Vec<(u32, pb::KeyStatus)>> {
    eventually(Duration::from_secs(10), "the keyring reload", || {
        let mut client = client.clone();
        async move {
            let (seen, keys) = keys_listed(&mut client).await?;
            Ok((seen >= generation).then_some(keys))
        }
    })
    .await
}

/// What the background client saw.
#[derive(Default)]
struct LoadReport {
    round_trips: AtomicU64,
    minted_by_key_2: AtomicU64,
    failures: std::sync::Mutex<Vec<String>>,
}

/// Mints and verifies in a loop: each fresh token at once, and the previous
/// token again, so tokens minted just before a reload are checked after it.
async fn keep_minting_and_verifying(
    mut client: RequestStateClient<Channel>,
    stop: Arc<AtomicBool>,
    report: Arc<LoadReport>,
) {
    let mut previous: Option<String> = None;
    let mut i = 0u64;
    while !stop.load(Ordering::SeqCst) {
        i += 1;
        let minted = match client
            .mint(pb::MintRequest {
                tool: "rotate".into(),
                step: "s".into(),
                state_value: Some(pb::mint_request::StateValue::StateJson(i.to_string())),
                ttl_seconds: 3,
                context: Vec::new(),
                single_use: false,
            })
            .await
        {
            Ok(m) => m.into_inner(),
            Err(e) => {
                report
                    .failures
                    .lock()
                    .map(|mut f| f.push(format!("mint: {e}")))
                    .ok();
                continue;
            }
        };
        if minted.key_id == 2 {
            report.minted_by_key_2.fetch_add(1, Ordering::SeqCst);
        }
        for token in [Some(minted.token.clone()), previous.take()]
            .into_iter()
            .flatten()
        {
            let verified = client
                .verify(pb::VerifyRequest {
                    token,
                    tool: "rotate".into(),
                    expected_step: Some("s".into()),
                    context: Vec::new(),
                    consume: false,
                })
                .await;
            match verified {
                Ok(v) if v.get_ref().valid => {}
                Ok(v) => {
                    let v = v.into_inner();
                    report
                        .failures
                        .lock()
                        .map(|mut f| f.push(format!("rejected: {:?} {}", v.reason(), v.detail)))
                        .ok();
                }
                Err(e) => {
                    report
                        .failures
                        .lock()
                        .map(|mut f| f.push(format!("verify: {e}")))
                        .ok();
                }
            }
        }
        previous = Some(minted.token);
        report.round_trips.fetch_add(1, Ordering::SeqCst);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotation_under_load_never_rejects_a_valid_token() -> TestResult {
    // Leeway 0 and 3 s tokens so that "wait the longest TTL" takes 4 s here
    // (a token lives at least 2 s: ample for a round trip on a loaded machine).
    let sidecar = Sidecar::start(
        SidecarOptions::new(keyring_toml(&[(1, "primary")]))
            .arg("--clock-leeway")
            .arg("0"),
    )
    .await?;
    let client = sidecar.unix_client().await?;
    let old_token = client
        .clone()
        .mint(pb::MintRequest {
            tool: "rotate".into(),
            step: "s".into(),
            state_value: None,
            ttl_seconds: 600,
            context: Vec::new(),
            single_use: false,
        })
        .await?
        .into_inner();

    let stop = Arc::new(AtomicBool::new(false));
    let report = Arc::new(LoadReport::default());
    let load = tokio::spawn(keep_minting_and_verifying(
        sidecar.tcp_client().await?,
        stop.clone(),
        report.clone(),
    ));

    // 1. Add key 2 as active; every sidecar learns it before it mints.
    keys_cli(&["new"], &sidecar.keyring)?;
    let keys = wait_for_generation(&client, 2).await?;
    assert_eq!(
        keys,
        vec![(1, pb::KeyStatus::Primary), (2, pb::KeyStatus::Active)]
    );

    // 2. Promote it: key 1 becomes active and keeps verifying.
    keys_cli(&["promote", "2", "--force"], &sidecar.keyring)?;
    let keys = wait_for_generation(&client, 3).await?;
    assert_eq!(
        keys,
        vec![(1, pb::KeyStatus::Active), (2, pb::KeyStatus::Primary)]
    );
    eventually(Duration::from_secs(10), "mints under key 2", || {
        let report = report.clone();
        async move { Ok((report.minted_by_key_2.load(Ordering::SeqCst) > 5).then_some(())) }
    })
    .await?;

    // 3. Wait the longest TTL the load uses (3 s) plus leeway (0) plus the
    //    clock's one-second granularity, then retire key 1.
    tokio::time::sleep(Duration::from_secs(4)).await;
    keys_cli(&["retire", "1", "--force"], &sidecar.keyring)?;
    let keys = wait_for_generation(&client, 4).await?;
    assert_eq!(
        keys,
        vec![(1, pb::KeyStatus::Retired), (2, pb::KeyStatus::Primary)]
    );
    let after_retire = report.round_trips.load(Ordering::SeqCst);
    eventually(
        Duration::from_secs(10),
        "round trips after retiring",
        || {
            let report = report.clone();
            async move {
                Ok((report.round_trips.load(Ordering::SeqCst) > after_retire + 20).then_some(()))
            }
        },
    )
    .await?;

    stop.store(true, Ordering::SeqCst);
    load.await?;
    let failures = report
        .failures
        .lock()
        .map(|f| f.clone())
        .unwrap_or_default();
    assert!(
        failures.is_empty(),
        "valid tokens were rejected: {failures:?}"
    );
    assert!(report.round_trips.load(Ordering::SeqCst) > 50);

    // The retirement took effect: key 1's long-lived token is now refused.
    let refused = client
        .clone()
        .verify(pb::VerifyRequest {
            token: old_token.token,
            tool: "rotate".into(),
            expected_step: None,
            context: Vec::new(),
            consume: false,
        })
        .await?
        .into_inner();
    assert_eq!(refused.reason(), pb::Reason::RetiredKey);
    Ok(())
}

#[tokio::test]
async fn malformed_keyring_on_reload_keeps_serving_the_old_keys() -> TestResult {
    let sidecar = Sidecar::start(SidecarOptions::new(keyring_toml(&[(1, "primary")]))).await?;
    let mut client = sidecar.tcp_client().await?;
    let before = client
        .mint(pb::MintRequest {
            tool: "t".into(),
            step: "s".into(),
            state_value: None,
            ttl_seconds: 60,
            context: Vec::new(),
            single_use: false,
        })
        .await?
        .into_inner();

    // Two primaries: parses as TOML, fails validation.
    write_private(
        &sidecar.keyring,
        &keyring_toml(&[(1, "primary"), (2, "primary")]),
    )?;
    eventually(
        Duration::from_secs(10),
        "a counted reload failure",
        || async {
            Ok((sidecar
                .metric("reqstate_keyring_reload_failures_total")
                .await?
                >= 1.0)
                .then_some(()))
        },
    )
    .await?;
    // Not TOML at all, delivered by SIGHUP.
    write_private(&sidecar.keyring, "[[key]\nid = ")?;
    sidecar.signal(nix::sys::signal::Signal::SIGHUP)?;
    eventually(
        Duration::from_secs(10),
        "a second reload failure",
        || async {
            Ok((sidecar
                .metric("reqstate_keyring_reload_failures_total")
                .await?
                >= 2.0)
                .then_some(()))
        },
    )
    .await?;

    let (generation, keys) = keys_listed(&mut client).await?;
    assert_eq!(generation, 1);
    assert_eq!(keys, vec![(1, pb::KeyStatus::Primary)]);
    let verified = client
        .verify(pb::VerifyRequest {
            token: before.token,
            tool: "t".into(),
            expected_step: None,
            context: Vec::new(),
            consume: false,
        })
        .await?
        .into_inner();
    assert!(verified.valid, "{verified:?}");
    let log = sidecar.log();
    assert!(log.contains("keyring reload refused"), "{log}");
    assert!(log.contains("more than one primary"), "{log}");

    // A good file afterwards is picked up.
    write_private(
        &sidecar.keyring,
        &keyring_toml(&[(1, "active"), (3, "primary")]),
    )?;
    let keys = wait_for_generation(&client, 2).await?;
    assert_eq!(
        keys,
        vec![(1, pb::KeyStatus::Active), (3, pb::KeyStatus::Primary)]
    );
    assert_eq!(sidecar.metric("reqstate_keyring_generation").await?, 2.0);
    Ok(())
}

#[tokio::test]
async fn sighup_reloads_even_an_unchanged_file() -> TestResult {
    let sidecar = Sidecar::start(SidecarOptions::new(keyring_toml(&[(1, "primary")]))).await?;
    let client = sidecar.unix_client().await?;
    sidecar.signal(nix::sys::signal::Signal::SIGHUP)?;
    wait_for_generation(&client, 2).await?;
    Ok(())
}

#[tokio::test]
async fn kubernetes_symlink_swap_is_picked_up() -> TestResult {
    // The layout kubelet makes for a Secret volume:
    //   keyring.toml -> ..data/keyring.toml, ..data -> ..2026_11_30_a
    let sidecar = Sidecar::start(SidecarOptions {
        prepare: Some(Box::new(|dir: &Path| {
            let volume = dir.join("secret");
            let first = volume.join("..2026_11_30_a");
            std::fs::create_dir_all(&first)?;
            write_private(
                &first.join("keyring.toml"),
                &keyring_toml(&[(1, "primary")]),
            )?;
            symlink("..2026_11_30_a", volume.join("..data"))?;
            symlink("..data/keyring.toml", volume.join("keyring.toml"))?;
            Ok(volume.join("keyring.toml"))
        })),
        ..SidecarOptions::new(String::new())
    })
    .await?;
    let client = sidecar.tcp_client().await?;

    // kubelet's update: a new timestamped directory, a temporary symlink to
    // it, renamed over `..data` in one step.
    let volume = sidecar.dir.path().join("secret");
    let second = volume.join("..2026_11_30_b");
    std::fs::create_dir_all(&second)?;
    write_private(
        &second.join("keyring.toml"),
        &keyring_toml(&[(1, "primary"), (2, "active")]),
    )?;
    symlink("..2026_11_30_b", volume.join("..data_tmp"))?;
    std::fs::rename(volume.join("..data_tmp"), volume.join("..data"))?;

    // Seen before kubelet deletes the old directory: the swap itself is
    // noticed, not a side effect on the old file.
    let keys = wait_for_generation(&client, 2).await?;
    assert_eq!(
        keys,
        vec![(1, pb::KeyStatus::Primary), (2, pb::KeyStatus::Active)]
    );
    std::fs::remove_dir_all(volume.join("..2026_11_30_a"))?;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (generation, keys) = keys_listed(&mut client.clone()).await?;
    assert_eq!(
        generation, 2,
        "cleaning up the old directory changed nothing"
    );
    assert_eq!(keys.len(), 2);
    Ok(())
}

/// The bearer tokens of `--auth-token-file` move from one token to the next
/// without a moment when a caller holding either is refused: the new token
/// is added as a second line, callers move to it, the old line goes. The
/// file sits in a directory of its own, watched besides the keyring's.
#[tokio::test]
async fn bearer_tokens_rotate_without_downtime() -> TestResult {
    const OLD: &str = "old-token-0123456789";
    const NEW: &str = "new-token-9876543210";
    let tokens = tempfile::tempdir()?;
    let file = tokens.path().join("token");
    write_private(&file, &format!("{OLD}\n"))?;
    let sidecar = Sidecar::start(
        SidecarOptions::new(keyring_toml(&[(1, "primary")]))
            .arg("--auth-token-file")
            .arg(file.display().to_string()),
    )
    .await?;
    let client = sidecar.unix_client().await?;
    let accepted = |token: &'static str| {
        let mut client = client.clone();
        async move {
            match client
                .list_keys(with_bearer(pb::ListKeysRequest {}, token)?)
                .await
            {
                Ok(_) => TestResult::<bool>::Ok(true),
                Err(status) if status.code() == tonic::Code::Unauthenticated => Ok(false),
                Err(status) => Err(status.into()),
            }
        }
    };
    assert!(accepted(OLD).await?);
    assert!(!accepted(NEW).await?);

    // Both, while callers move over.
    write_private(
        &file,
        &format!("# rotating: {NEW} replaces the old one\n{OLD}\n{NEW}\n"),
    )?;
    eventually(
        Duration::from_secs(10),
        "the new token accepted",
        || async { Ok(accepted(NEW).await?.then_some(())) },
    )
    .await?;
    assert!(accepted(OLD).await?, "the old token was dropped too early");

    // The new one only.
    write_private(&file, &format!("{NEW}\n"))?;
    eventually(Duration::from_secs(10), "the old token refused", || async {
        Ok((!accepted(OLD).await?).then_some(()))
    })
    .await?;
    assert!(accepted(NEW).await?);
    assert_eq!(
        sidecar.metric("reqstate_auth_token_reloads_total").await?,
        2.0
    );

    // A broken file is refused and the tokens in service stay.
    write_private(&file, "a token with spaces\n")?;
    eventually(Duration::from_secs(10), "the refused reload", || async {
        let failures = sidecar
            .metric("reqstate_auth_token_reload_failures_total")
            .await?;
        Ok((failures >= 1.0).then_some(()))
    })
    .await?;
    assert!(accepted(NEW).await?);
    assert!(!accepted(OLD).await?);
    assert_eq!(
        sidecar.metric("reqstate_auth_token_reloads_total").await?,
        2.0
    );

    // An emptied file (only a comment left) never revokes the tokens in
    // service: it is refused, with what to do instead.
    let failures_before = sidecar
        .metric("reqstate_auth_token_reload_failures_total")
        .await?;
    write_private(&file, "# emptied\n")?;
    eventually(
        Duration::from_secs(10),
        "the emptied file refused",
        || async {
            let failures = sidecar
                .metric("reqstate_auth_token_reload_failures_total")
                .await?;
            Ok((failures > failures_before).then_some(()))
        },
    )
    .await?;
    assert!(accepted(NEW).await?, "an empty file revoked the tokens");
    assert!(sidecar.log().contains("never revokes"), "{}", sidecar.log());

    // A file another user could write (security review round 3, finding 2):
    // whoever wrote a token of their own into it is not let in.
    const INJECTED: &str = "injected-by-another-user";
    write_private(&file, &format!("{NEW}\n{INJECTED}\n"))?;
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666))?;
    // SIGHUP: read it now, whatever the watcher saw.
    sidecar.signal(nix::sys::signal::Signal::SIGHUP)?;
    eventually(
        Duration::from_secs(10),
        "the writable file refused",
        || async {
            Ok(sidecar
                .log()
                .contains("lets other users write the bearer token file")
                .then_some(()))
        },
    )
    .await?;
    assert!(
        !accepted(INJECTED).await?,
        "a token from a world-writable file was accepted"
    );
    assert!(accepted(NEW).await?);
    assert_eq!(
        sidecar.metric("reqstate_auth_token_reloads_total").await?,
        2.0
    );

    // No token, old or new, reaches the log.
    let log = sidecar.log();
    assert!(log.contains("bearer token reload refused"), "{log}");
    // (The tokens themselves: the log names the flag `--auth-token-file`.)
    assert!(!log.contains(OLD) && !log.contains(NEW), "{log}");
    assert!(!log.contains(INJECTED), "{log}");
    Ok(())
}

/// A `secret_file` rotated in place (the keyring text unchanged, as when a
/// secret manager rewrites the secret) is applied by the directory watcher,
/// without SIGHUP: a reload compares the keyring and every secret it names
/// (security review round 3, finding 6). Tokens minted before refuse to
/// verify afterwards, since the key under id 1 is another one.
#[tokio::test]
async fn a_secret_file_rotated_in_place_is_applied() -> TestResult {
    let sidecar = Sidecar::start(SidecarOptions {
        prepare: Some(Box::new(|dir: &Path| {
            write_private(&dir.join("key-1"), &sidecar_process::secret(1))?;
            let keyring = dir.join("keyring.toml");
            write_private(
                &keyring,
                "[[key]]\nid = 1\nstatus = \"primary\"\nsecret_file = \"key-1\"\n",
            )?;
            Ok(keyring)
        })),
        ..SidecarOptions::new(String::new())
    })
    .await?;
    let mut client = sidecar.unix_client().await?;
    let request = pb::MintRequest {
        tool: "t".into(),
        step: "s".into(),
        ttl_seconds: 60,
        ..Default::default()
    };
    let before = client.mint(request.clone()).await?.into_inner().token;
    write_private(
        &sidecar.dir.path().join("key-1"),
        &sidecar_process::secret(2),
    )?;
    wait_for_generation(&client, 2).await?;
    let after = client.mint(request).await?.into_inner().token;
    assert_ne!(before, after, "the rotated secret was not applied");
    let old = client
        .verify(pb::VerifyRequest {
            token: before,
            tool: "t".into(),
            ..Default::default()
        })
        .await?
        .into_inner();
    assert!(!old.valid, "a token under the old secret still verifies");
    Ok(())
}
