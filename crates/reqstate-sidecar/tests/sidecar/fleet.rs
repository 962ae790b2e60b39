//! The fleet test (issue 25): three real sidecars, each on its own copy of
//! the keyring (as each pod has its own volume), and a client that mints on
//! replica i and verifies on replica i+1 (and again, a second later, on
//! replica i+2) without pause. "Distributing" a file is copying it to each
//! replica's path at a different moment within the propagation delay, one
//! replica late by most of it.
//!
//! Through a scheduled rotation (`keys new`, `keys promote --at`, `keys
//! retire --at`: one file, one distribution) and two `keys rotate` cycles
//! (the second dropping the first key): no token is refused. Then the
//! control: the manual flow in one rollout (`keys new` + `keys promote
//! --force`, distributed the same way) refuses tokens as `unknown_key`, so
//! the test can fail.

use crate::sidecar_process;

use std::collections::{BTreeMap, VecDeque};
use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use reqstate_proto::v1 as pb;
use reqstate_proto::v1::request_state_client::RequestStateClient;
use sidecar_process::{Sidecar, SidecarOptions, TestResult, eventually, keys_cli};
use tonic::transport::Channel;

/// The fleet's policy: tokens live 2 s, clocks may disagree by 1 s.
const MAX_TTL: &str = "2";
const LEEWAY: &str = "1";
/// What `--propagation` covers: the slowest replica's copy (3.5 s) plus
/// margin for its reload.
const PROPAGATION_SECONDS: u64 = 5;
/// When each replica receives a new file, after it is written: the last one
/// late by most of the propagation delay.
const ARRIVALS_MS: [u64; 3] = [200, 1_500, 3_500];

/// What the client saw.
#[derive(Default)]
struct Tally {
    round_trips: u64,
    minted_by: BTreeMap<u32, u64>,
    refused: BTreeMap<String, u64>,
    errors: Vec<String>,
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Sleeps until just after the next whole second, so that `now +
/// propagation` in whole seconds leaves the slowest replica its full delay.
async fn at_a_second_boundary() {
    let into = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_millis());
    tokio::time::sleep(Duration::from_millis(u64::from(1_050 - into.min(1_000)))).await;
}

/// Sleeps until the wall clock has passed `unix` (plus a margin).
async fn until(unix: u64, margin: Duration) {
    let target = UNIX_EPOCH + Duration::from_secs(unix) + margin;
    if let Ok(wait) = target.duration_since(SystemTime::now()) {
        tokio::time::sleep(wait).await;
    }
}

/// Replaces `path` atomically (temporary file, 0600, rename), as a volume
/// update does.
fn install(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let temporary = path.with_extension("incoming");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&temporary)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    std::fs::rename(&temporary, path)
}

/// Copies the master file to every replica at its arrival time; returns
/// when the last copy is in place.
async fn distribute(master: &Path, replicas: &[PathBuf]) -> TestResult {
    let bytes = std::fs::read(master)?;
    let start = Instant::now();
    for (path, arrival) in replicas.iter().zip(ARRIVALS_MS) {
        let due = start + Duration::from_millis(arrival);
        tokio::time::sleep_until(due.into()).await;
        install(path, &bytes)?;
    }
    Ok(())
}

async fn generation(client: &RequestStateClient<Channel>) -> TestResult<u64> {
    Ok(client
        .clone()
        .list_keys(pb::ListKeysRequest {})
        .await?
        .into_inner()
        .keyring_generation)
}

/// Every replica has loaded `expected` keyrings.
async fn loaded(clients: &[RequestStateClient<Channel>], expected: u64) -> TestResult {
    for (i, client) in clients.iter().enumerate() {
        eventually(
            Duration::from_secs(10),
            &format!("replica {i} loading keyring generation {expected}"),
            || async move { Ok((generation(client).await? >= expected).then_some(())) },
        )
        .await?;
    }
    Ok(())
}

fn refusal(tally: &Mutex<Tally>, what: String) {
    if let Ok(mut t) = tally.lock() {
        *t.refused.entry(what).or_default() += 1;
    }
}

async fn verify_on(client: &mut RequestStateClient<Channel>, token: String, tally: &Mutex<Tally>) {
    match client
        .verify(pb::VerifyRequest {
            token,
            tool: "fleet".into(),
            expected_step: Some("s".into()),
            context: Vec::new(),
            consume: false,
        })
        .await
    {
        Ok(v) if v.get_ref().valid => {}
        Ok(v) => refusal(tally, v.get_ref().reason().as_str_name().to_string()),
        Err(e) => {
            if let Ok(mut t) = tally.lock() {
                t.errors.push(format!("verify: {e}"));
            }
        }
    }
}

/// Mints on replica i, verifies at once on replica i+1, and each token
/// again 1.2 s later (still within its lifetime) on replica i+2.
async fn round_robin(
    mut clients: Vec<RequestStateClient<Channel>>,
    stop: Arc<AtomicBool>,
    tally: Arc<Mutex<Tally>>,
) {
    let n = clients.len();
    let mut older: VecDeque<(Instant, usize, String)> = VecDeque::new();
    let mut i = 0usize;
    while !stop.load(Ordering::SeqCst) {
        let minted = clients[i % n]
            .mint(pb::MintRequest {
                tool: "fleet".into(),
                step: "s".into(),
                state_value: None,
                ttl_seconds: 2,
                context: Vec::new(),
                single_use: false,
            })
            .await;
        match minted {
            Ok(m) => {
                let m = m.into_inner();
                if let Ok(mut t) = tally.lock() {
                    *t.minted_by.entry(m.key_id).or_default() += 1;
                }
                verify_on(&mut clients[(i + 1) % n], m.token.clone(), &tally).await;
                older.push_back((Instant::now(), (i + 2) % n, m.token));
            }
            Err(e) => {
                if let Ok(mut t) = tally.lock() {
                    t.errors.push(format!("mint: {e}"));
                }
            }
        }
        while older
            .front()
            .is_some_and(|(at, _, _)| at.elapsed() >= Duration::from_millis(1_200))
        {
            if let Some((_, replica, token)) = older.pop_front() {
                verify_on(&mut clients[replica], token, &tally).await;
            }
        }
        if let Ok(mut t) = tally.lock() {
            t.round_trips += 1;
        }
        i += 1;
        // A steady stream, not a flood: the machine is shared.
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The instant key `id` starts minting, from `keys status --json`.
fn mint_from(master: &Path, id: u64) -> TestResult<u64> {
    let status: serde_json::Value =
        serde_json::from_str(&keys_cli(&["status", "--json"], master)?)?;
    status["keys"]
        .as_array()
        .and_then(|ks| ks.iter().find(|k| k["id"] == id))
        .and_then(|k| k["mint_from"].as_u64())
        .ok_or_else(|| format!("key {id} has no mint_from: {status}").into())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_rotates_by_one_rollout_without_refusing_a_token() -> TestResult {
    let dir = tempfile::tempdir()?;
    let master = dir.path().join("keyring.toml");
    keys_cli(&["new"], &master)?;
    let initial = std::fs::read_to_string(&master)?;
    let mut replicas = Vec::new();
    for _ in 0..3 {
        replicas.push(
            Sidecar::start(
                SidecarOptions::new(initial.clone())
                    .arg("--max-ttl")
                    .arg(MAX_TTL)
                    .arg("--default-ttl")
                    .arg(MAX_TTL)
                    .arg("--clock-leeway")
                    .arg(LEEWAY),
            )
            .await?,
        );
    }
    let paths: Vec<PathBuf> = replicas.iter().map(|r| r.keyring.clone()).collect();
    let mut clients = Vec::new();
    for r in &replicas {
        clients.push(r.unix_client().await?);
    }
    let policy = ["--max-ttl", MAX_TTL, "--leeway", LEEWAY];
    let propagation = format!("{PROPAGATION_SECONDS}s");
    let live = 2 + 1;

    let stop = Arc::new(AtomicBool::new(false));
    let tally = Arc::new(Mutex::new(Tally::default()));
    let load = tokio::spawn(round_robin(clients.clone(), stop.clone(), tally.clone()));
    let mut generation = 1;

    // 1. A scheduled rotation by hand: key 2 minting from now + propagation,
    //    key 1 retiring when its last tokens have expired. One file.
    at_a_second_boundary().await;
    keys_cli(&["new"], &master)?;
    let switch = unix_now() + PROPAGATION_SECONDS;
    let mut promote = vec!["promote", "2", "--propagation", &propagation];
    let switch_text = switch.to_string();
    promote.extend_from_slice(&["--at", &switch_text]);
    promote.extend_from_slice(&policy);
    keys_cli(&promote, &master)?;
    let retire_text = (switch + live).to_string();
    let mut retire = vec!["retire", "1", "--at", &retire_text];
    retire.extend_from_slice(&policy);
    keys_cli(&retire, &master)?;
    distribute(&master, &paths).await?;
    generation += 1;
    loaded(&clients, generation).await?;
    until(switch + live, Duration::from_millis(1_200)).await;

    // 2. and 3. Two `keys rotate` cycles; with --grace 1s the first drops
    //    key 1, the second key 2.
    for (cycle, (new_id, dropped)) in [(3u64, 1u64), (4, 2)].into_iter().enumerate() {
        at_a_second_boundary().await;
        let mut rotate = vec!["rotate", "--propagation", &propagation, "--grace", "1s"];
        rotate.extend_from_slice(&policy);
        let said = keys_cli(&rotate, &master)?;
        assert!(
            said.contains(&format!("dropped key {dropped}"))
                && said.contains(&format!("scheduled key {new_id}")),
            "cycle {cycle}: {said}"
        );
        // Idempotent: a second run before the switch changes nothing.
        let before = std::fs::read(&master)?;
        let again = keys_cli(&rotate, &master)?;
        assert!(again.contains("no change"), "{again}");
        assert_eq!(std::fs::read(&master)?, before);
        let switch = mint_from(&master, new_id)?;
        distribute(&master, &paths).await?;
        generation += 1;
        loaded(&clients, generation).await?;
        until(switch + live, Duration::from_millis(1_200)).await;
    }
    let scheduled = {
        let t = tally.lock().map_err(|_| "poisoned")?;
        (
            t.round_trips,
            t.minted_by.clone(),
            t.refused.clone(),
            t.errors.clone(),
        )
    };
    let (round_trips, minted_by, refused, errors) = scheduled;
    assert!(errors.is_empty(), "calls failed: {errors:?}");
    assert!(
        refused.is_empty(),
        "the scheduled rotations refused tokens: {refused:?}"
    );
    for id in 1..=4 {
        assert!(
            minted_by.get(&id).copied().unwrap_or(0) > 10,
            "key {id} hardly minted: {minted_by:?}"
        );
    }
    assert!(round_trips > 200, "only {round_trips} round trips");

    // Control: the manual flow in one rollout, distributed the same way.
    keys_cli(&["new"], &master)?;
    let mut promote = vec!["promote", "5", "--force"];
    promote.extend_from_slice(&policy);
    keys_cli(&promote, &master)?;
    distribute(&master, &paths).await?;
    generation += 1;
    loaded(&clients, generation).await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::SeqCst);
    load.await?;
    let t = tally.lock().map_err(|_| "poisoned")?;
    let unknown = t.refused.get("REASON_UNKNOWN_KEY").copied().unwrap_or(0);
    assert!(
        unknown > 0,
        "the one-rollout manual flow refused no token as unknown_key: {:?}",
        t.refused
    );
    eprintln!(
        "fleet: {} round trips; scheduled rotations: 0 refused; manual flow in one rollout: {:?}",
        t.round_trips, t.refused
    );
    drop(replicas);
    Ok(())
}
