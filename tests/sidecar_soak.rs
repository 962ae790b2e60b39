//! Soak: many clients mint and verify over both transports while the keyring
//! is rotated, broken and swapped under them; no valid token is ever
//! rejected, no call fails, memory stays flat.
//!
//! `REQSTATE_SOAK_SECONDS` (default 10) sets the length; loopback only, and
//! every loop is bounded by that deadline.

#[path = "support/sidecar_process.rs"]
mod sidecar_process;

use std::collections::VecDeque;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqstate_proto::v1 as pb;
use reqstate_proto::v1::request_state_client::RequestStateClient;
use sidecar_process::{Sidecar, SidecarOptions, TestResult, eventually, secret, write_private};
use tonic::transport::Channel;

const TOOL: &str = "soak";

/// A keyring body with the given `(id, status)` keys.
fn keyring(keys: &[(u32, &str)]) -> String {
    let mut out = String::from("version = 1\n");
    for (id, status) in keys {
        out.push_str(&format!(
            "\n[[key]]\nid = {id}\nstatus = \"{status}\"\nsecret = \"{}\"\n",
            secret(u8::try_from(*id).unwrap_or(255))
        ));
    }
    out
}

/// Publishes a keyring the way kubelet updates a Secret volume: a new
/// directory, then an atomic swap of the `..data` symlink.
fn publish(volume: &Path, generation: u32, body: &str) -> TestResult {
    let dir = volume.join(format!("..gen_{generation}"));
    std::fs::create_dir_all(&dir)?;
    write_private(&dir.join("keyring.toml"), body)?;
    let tmp = volume.join("..data_tmp");
    let _ = std::fs::remove_file(&tmp);
    symlink(format!("..gen_{generation}"), &tmp)?;
    std::fs::rename(&tmp, volume.join("..data"))?;
    Ok(())
}

fn rss_kib(pid: i32) -> TestResult<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let line = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .ok_or("no VmRSS line")?;
    Ok(line
        .split_whitespace()
        .nth(1)
        .ok_or("VmRSS has no value")?
        .parse()?)
}

#[derive(Default)]
struct Report {
    round_trips: AtomicU64,
    cross_checks: AtomicU64,
    failures: Mutex<Vec<String>>,
    /// Recently minted tokens, verified again by other clients later.
    pool: Mutex<VecDeque<String>>,
}

impl Report {
    fn fail(&self, what: String) {
        if let Ok(mut f) = self.failures.lock() {
            f.push(what);
        }
    }
}

async fn verify(client: &mut RequestStateClient<Channel>, token: String) -> Result<(), String> {
    let response = client
        .verify(pb::VerifyRequest {
            token,
            tool: TOOL.into(),
            expected_step: Some("s".into()),
            context: b"soak-context".to_vec(),
            consume: false,
        })
        .await
        .map_err(|e| format!("verify call failed: {e}"))?
        .into_inner();
    if response.valid {
        Ok(())
    } else {
        Err(format!(
            "valid token rejected: {:?} {}",
            response.reason(),
            response.detail
        ))
    }
}

async fn client_loop(
    mut client: RequestStateClient<Channel>,
    deadline: Instant,
    stop: Arc<AtomicBool>,
    report: Arc<Report>,
) {
    let mut i = 0u64;
    while Instant::now() < deadline && !stop.load(Ordering::SeqCst) {
        i += 1;
        let minted = match client
            .mint(pb::MintRequest {
                tool: TOOL.into(),
                step: "s".into(),
                state_value: Some(pb::mint_request::StateValue::StateJson(format!(
                    "{{\"i\":{i}}}"
                ))),
                ttl_seconds: 120,
                context: b"soak-context".to_vec(),
                single_use: false,
            })
            .await
        {
            Ok(m) => m.into_inner(),
            Err(e) => {
                report.fail(format!("mint call failed: {e}"));
                continue;
            }
        };
        if let Err(e) = verify(&mut client, minted.token.clone()).await {
            report.fail(e);
        }
        // A token another client minted earlier, possibly before a reload.
        let older = report.pool.lock().ok().and_then(|mut p| {
            p.push_back(minted.token);
            if p.len() > 256 { p.pop_front() } else { None }
        });
        if let Some(token) = older {
            match verify(&mut client, token).await {
                Ok(()) => {
                    report.cross_checks.fetch_add(1, Ordering::SeqCst);
                }
                Err(e) => report.fail(e),
            }
        }
        report.round_trips.fetch_add(1, Ordering::SeqCst);
    }
}

async fn generation(client: &mut RequestStateClient<Channel>) -> TestResult<u64> {
    Ok(client
        .list_keys(pb::ListKeysRequest {})
        .await?
        .into_inner()
        .keyring_generation)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn soak_with_rotation_reload_and_faulty_files_rejects_no_valid_token() -> TestResult {
    let seconds: u64 = std::env::var("REQSTATE_SOAK_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10);
    let sidecar = Sidecar::start(SidecarOptions {
        prepare: Some(Box::new(|dir: &Path| -> TestResult<PathBuf> {
            let volume = dir.join("secret");
            std::fs::create_dir_all(&volume)?;
            publish(&volume, 0, &keyring(&[(1, "primary")]))?;
            symlink("..data/keyring.toml", volume.join("keyring.toml"))?;
            Ok(volume.join("keyring.toml"))
        })),
        ..SidecarOptions::new(String::new())
    })
    .await?;
    let volume = sidecar.dir.path().join("secret");
    let pid = sidecar.pid()?.as_raw();
    let mut admin = sidecar.unix_client().await?;

    let report = Arc::new(Report::default());
    let stop = Arc::new(AtomicBool::new(false));
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let mut tasks = Vec::new();
    for i in 0..8 {
        let client = if i % 2 == 0 {
            sidecar.unix_client().await?
        } else {
            sidecar.tcp_client().await?
        };
        tasks.push(tokio::spawn(client_loop(
            client,
            deadline,
            stop.clone(),
            report.clone(),
        )));
    }

    tokio::time::sleep(Duration::from_secs(1)).await;
    let rss_start = rss_kib(pid)?;

    // Rotate until the deadline: add the next key (active), promote it, and in
    // between publish a malformed file that must be refused. Keys are never
    // retired under load, so every token minted stays valid.
    let mut published = 0u32;
    let mut malformed = 0u64;
    let mut keys: Vec<(u32, &str)> = vec![(1, "primary")];
    let mut expected_generation = generation(&mut admin).await?;
    while Instant::now() + Duration::from_millis(800) < deadline {
        let next = keys.len() as u32 + 1;
        for stage in 0..3 {
            published += 1;
            match stage {
                0 => keys.push((next, "active")),
                1 => {
                    malformed += 1;
                    publish(&volume, published, "[[key]]\nid = \"not a number\"\n")?;
                    // Give the watcher time to see and refuse it.
                    tokio::time::sleep(Duration::from_millis(150)).await;
                    continue;
                }
                _ => {
                    for k in &mut keys {
                        k.1 = if k.0 == next { "primary" } else { "active" };
                    }
                }
            }
            publish(&volume, published, &keyring(&keys))?;
            expected_generation += 1;
            let target = expected_generation;
            eventually(Duration::from_secs(10), "the reload", || {
                let mut probe = admin.clone();
                async move { Ok((generation(&mut probe).await? >= target).then_some(())) }
            })
            .await?;
        }
    }
    stop.store(true, Ordering::SeqCst);
    for task in tasks {
        task.await?;
    }
    let rss_end = rss_kib(pid)?;

    let failures = report
        .failures
        .lock()
        .map(|f| f.clone())
        .unwrap_or_default();
    let round_trips = report.round_trips.load(Ordering::SeqCst);
    let reload_failures = sidecar
        .metric("reqstate_keyring_reload_failures_total")
        .await?;
    println!(
        "soak {seconds} s: {round_trips} round trips, {} cross-client re-verifications, {} keys rotated in, \
         {malformed} malformed files refused ({reload_failures} reload failures counted), \
         RSS {rss_start} KiB -> {rss_end} KiB, {} failures",
        report.cross_checks.load(Ordering::SeqCst),
        keys.len() - 1,
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} failures, first: {:?}",
        failures.len(),
        failures.first()
    );
    assert!(round_trips > 100, "the load barely ran: {round_trips}");
    assert!(keys.len() >= 3, "too few rotations: {}", keys.len());
    assert!(
        reload_failures >= malformed as f64,
        "malformed files were not all refused and counted"
    );
    assert!(
        rss_end < rss_start + 64 * 1024,
        "memory grew from {rss_start} KiB to {rss_end} KiB"
    );

    // By design: retiring a key refuses its tokens at once.
    let token = admin
        .mint(pb::MintRequest {
            tool: TOOL.into(),
            step: "s".into(),
            state_value: Some(pb::mint_request::StateValue::StateJson("1".into())),
            ttl_seconds: 60,
            context: Vec::new(),
            single_use: false,
        })
        .await?
        .into_inner();
    for k in &mut keys {
        if k.0 == token.key_id {
            k.1 = "retired";
        } else if k.0 == 1 {
            k.1 = "primary";
        }
    }
    published += 1;
    publish(&volume, published, &keyring(&keys))?;
    let target = expected_generation + 1;
    eventually(Duration::from_secs(10), "the retirement", || {
        let mut probe = admin.clone();
        async move { Ok((generation(&mut probe).await? >= target).then_some(())) }
    })
    .await?;
    let refused = admin
        .verify(pb::VerifyRequest {
            token: token.token,
            tool: TOOL.into(),
            expected_step: None,
            context: Vec::new(),
            consume: false,
        })
        .await?
        .into_inner();
    assert_eq!(
        (refused.valid, refused.reason()),
        (false, pb::Reason::RetiredKey)
    );
    Ok(())
}
