//! Soak: many clients mint and verify over both transports while the keyring
//! is rotated, broken and swapped under them; no valid token is ever
//! rejected, no call fails, memory stays flat.
//!
//! `REQSTATE_SOAK_SECONDS` (default 10) sets the length; loopback only, and
//! every loop is bounded by that deadline. `REQSTATE_SOAK_SAMPLE_SECONDS`
//! (default: no series) prints the sidecar's resident memory and open file
//! descriptors at that interval, for `scripts/long-run.sh`.
//!
//! The keyring keeps a window of about [`KEY_WINDOW`] keys: the oldest leaves
//! the file when a new one is added, so an hour of rotation does not grow the
//! keyring (which would look like a leak). A key leaves only once no token it
//! may have signed can still be verified: every client's current round trip
//! began, and every token in the shared pool was minted, after the key
//! stopped being primary (rotation epochs, [`Report::epoch`]).

use crate::sidecar_process;

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

/// How many keys the rotating keyring holds at most.
const KEY_WINDOW: usize = 6;

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

/// Open file descriptors of a process.
fn open_fds(pid: i32) -> TestResult<usize> {
    Ok(std::fs::read_dir(format!("/proc/{pid}/fd"))?.count())
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

struct Report {
    /// The rotation epoch: how many promotions the sidecar has confirmed.
    epoch: AtomicU64,
    /// Per client, the epoch its current round trip began in (`u64::MAX`
    /// when it is not in one).
    client_epochs: Vec<AtomicU64>,
    round_trips: AtomicU64,
    cross_checks: AtomicU64,
    failures: Mutex<Vec<String>>,
    /// Recently minted tokens with the epoch their round trip began in,
    /// verified again by other clients later.
    pool: Mutex<VecDeque<(String, u64)>>,
}

impl Report {
    fn new(clients: usize) -> Self {
        Report {
            epoch: AtomicU64::new(0),
            client_epochs: (0..clients).map(|_| AtomicU64::new(u64::MAX)).collect(),
            round_trips: AtomicU64::new(0),
            cross_checks: AtomicU64::new(0),
            failures: Mutex::new(Vec::new()),
            pool: Mutex::new(VecDeque::new()),
        }
    }

    /// The oldest epoch a token still to be verified may come from: the
    /// pool's and the clients', read under the pool's lock.
    fn oldest_epoch_in_use(&self) -> u64 {
        let Ok(pool) = self.pool.lock() else {
            return 0;
        };
        let pooled = pool.iter().map(|(_, e)| *e).min().unwrap_or(u64::MAX);
        let clients = self
            .client_epochs
            .iter()
            .map(|e| e.load(Ordering::SeqCst))
            .min()
            .unwrap_or(u64::MAX);
        clients.min(pooled)
    }

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
    index: usize,
    mut client: RequestStateClient<Channel>,
    deadline: Instant,
    stop: Arc<AtomicBool>,
    report: Arc<Report>,
) {
    let mut i = 0u64;
    while Instant::now() < deadline && !stop.load(Ordering::SeqCst) {
        i += 1;
        let epoch = report.epoch.load(Ordering::SeqCst);
        report.client_epochs[index].store(epoch, Ordering::SeqCst);
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
        // Under the pool's lock, so the rotator never sees the popped token
        // in neither place.
        let older = report.pool.lock().ok().and_then(|mut p| {
            p.push_back((minted.token, epoch));
            let popped = if p.len() > 256 { p.pop_front() } else { None };
            if let Some((_, minted_in)) = &popped {
                report.client_epochs[index].fetch_min(*minted_in, Ordering::SeqCst);
            }
            popped
        });
        if let Some((token, _)) = older {
            match verify(&mut client, token).await {
                Ok(()) => {
                    report.cross_checks.fetch_add(1, Ordering::SeqCst);
                }
                Err(e) => report.fail(e),
            }
        }
        report.round_trips.fetch_add(1, Ordering::SeqCst);
    }
    report.client_epochs[index].store(u64::MAX, Ordering::SeqCst);
}

/// With `REQSTATE_SOAK_SAMPLE_SECONDS` set, prints one line per interval
/// until the deadline: elapsed time, the sidecar's RSS and open descriptors,
/// and the round trips so far.
fn sample_every(
    pid: i32,
    deadline: Instant,
    report: Arc<Report>,
) -> Option<tokio::task::JoinHandle<()>> {
    let every: u64 = std::env::var("REQSTATE_SOAK_SAMPLE_SECONDS")
        .ok()?
        .parse()
        .ok()
        .filter(|s| *s > 0)?;
    let started = Instant::now();
    Some(tokio::spawn(async move {
        println!("sample: elapsed_s rss_kib open_fds round_trips");
        loop {
            let rss = rss_kib(pid).map_or_else(|e| format!("error: {e}"), |v| v.to_string());
            let fds = open_fds(pid).map_or_else(|e| format!("error: {e}"), |v| v.to_string());
            println!(
                "sample: {} {rss} {fds} {}",
                started.elapsed().as_secs(),
                report.round_trips.load(Ordering::SeqCst)
            );
            if Instant::now() + Duration::from_secs(every) > deadline {
                break;
            }
            tokio::time::sleep(Duration::from_secs(every)).await;
        }
    }))
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

    const CLIENTS: usize = 8;
    let report = Arc::new(Report::new(CLIENTS));
    let stop = Arc::new(AtomicBool::new(false));
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let mut tasks = Vec::new();
    for i in 0..CLIENTS {
        let client = if i % 2 == 0 {
            sidecar.unix_client().await?
        } else {
            sidecar.tcp_client().await?
        };
        tasks.push(tokio::spawn(client_loop(
            i,
            client,
            deadline,
            stop.clone(),
            report.clone(),
        )));
    }

    tokio::time::sleep(Duration::from_secs(1)).await;
    let rss_start = rss_kib(pid)?;
    let fds_start = open_fds(pid)?;
    let sampler = sample_every(pid, deadline, report.clone());

    // Rotate until the deadline: add the next key (active), promote it, and in
    // between publish a malformed file that must be refused. Keys are never
    // retired under load, so every token minted stays valid.
    let mut published = 0u32;
    let mut malformed = 0u64;
    let mut rotated_in = 0u64;
    let mut next_id = 1u32;
    let mut keys: Vec<(u32, &str)> = vec![(1, "primary")];
    // Key id -> the epoch in which it stopped being primary.
    let mut demoted_at = std::collections::HashMap::new();
    let mut expected_generation = generation(&mut admin).await?;
    // Generous: under a loaded machine a reload can take seconds.
    let patience = Duration::from_secs(60);
    while Instant::now() + Duration::from_millis(800) < deadline {
        next_id += 1;
        let next = next_id;
        rotated_in += 1;
        for stage in 0..3 {
            published += 1;
            match stage {
                0 => {
                    keys.push((next, "active"));
                    // Drop the oldest keys no token in use can come from.
                    while keys.len() > KEY_WINDOW {
                        match demoted_at.get(&keys[0].0) {
                            Some(&epoch) if report.oldest_epoch_in_use() >= epoch => {
                                keys.remove(0);
                            }
                            _ => break,
                        }
                    }
                }
                1 => {
                    malformed += 1;
                    publish(&volume, published, "[[key]]\nid = \"not a number\"\n")?;
                    // Wait until the watcher has seen and refused it, so every
                    // malformed file is read (not coalesced with the next).
                    let refused = malformed as f64;
                    eventually(patience, "the refusal of a malformed keyring", || {
                        let sidecar = &sidecar;
                        async move {
                            Ok((sidecar
                                .metric("reqstate_keyring_reload_failures_total")
                                .await?
                                >= refused)
                                .then_some(()))
                        }
                    })
                    .await?;
                    continue;
                }
                _ => {
                    if let Some(old) = keys.iter().find(|k| k.1 == "primary") {
                        demoted_at.insert(old.0, u64::MAX);
                    }
                    for k in &mut keys {
                        k.1 = if k.0 == next { "primary" } else { "active" };
                    }
                }
            }
            publish(&volume, published, &keyring(&keys))?;
            expected_generation += 1;
            let target = expected_generation;
            eventually(patience, "the reload", || {
                let mut probe = admin.clone();
                async move { Ok((generation(&mut probe).await? >= target).then_some(())) }
            })
            .await?;
            if stage == 2 {
                // The promotion is in service: from now on no mint uses the
                // old primary.
                let epoch = report.epoch.fetch_add(1, Ordering::SeqCst) + 1;
                for at in demoted_at.values_mut() {
                    if *at == u64::MAX {
                        *at = epoch;
                    }
                }
            }
        }
    }
    stop.store(true, Ordering::SeqCst);
    for task in tasks {
        task.await?;
    }
    if let Some(sampler) = sampler {
        sampler.await?;
    }
    let rss_end = rss_kib(pid)?;
    let fds_end = open_fds(pid)?;

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
        "soak {seconds} s: {round_trips} round trips, {} cross-client re-verifications, {} keys rotated in ({} in the keyring at the end), \
         {malformed} malformed files refused ({reload_failures} reload failures counted), \
         RSS {rss_start} KiB -> {rss_end} KiB, open fds {fds_start} -> {fds_end}, {} failures",
        report.cross_checks.load(Ordering::SeqCst),
        rotated_in,
        keys.len(),
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} failures, first: {:?}",
        failures.len(),
        failures.first()
    );
    assert!(round_trips > 100, "the load barely ran: {round_trips}");
    assert!(rotated_in >= 2, "too few rotations: {rotated_in}");
    assert!(
        fds_end <= fds_start + 8,
        "open file descriptors grew from {fds_start} to {fds_end}"
    );
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
    let successor = keys
        .iter()
        .map(|k| k.0)
        .find(|id| *id != token.key_id)
        .ok_or("the window holds one key only")?;
    for k in &mut keys {
        if k.0 == token.key_id {
            k.1 = "retired";
        } else if k.0 == successor {
            k.1 = "primary";
        } else {
            k.1 = "active";
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
