//! The sidecar under load: starts the real `reqstate` binary, drives unary
//! `Verify` and `Mint`, batched `VerifyBatch` and `MintBatch`, and
//! `grpc.health.v1.Health/Check` (the no-op baseline of the same stack) at a
//! fixed concurrency for a fixed time, over a Unix socket and over TCP; then
//! single-use consumes (unary and batched) against the memory store and a
//! real `redis-server` on a Unix socket, next to Redis's own round trip.
//!
//! ```text
//! cargo bench -p reqstate-benches --bench sidecar                       # 5 s per case
//! REQSTATE_BENCH_SECONDS=20 REQSTATE_BENCH_CONCURRENCY=64 cargo bench -p reqstate-benches --bench sidecar
//! cargo bench -p reqstate-benches --bench sidecar -- --test             # smoke run: a fraction of a second per case
//! ```
//!
//! The binary is the workspace's own, which the benchmark has Cargo build
//! in its profile (release) before it starts, or `REQSTATE_BENCH_BIN`.
//!
//! Client and server share the machine, so on 2 cores each figure is what the
//! pair reaches together; docs/BENCHMARKS.md says what limits each.

// Shared with the sidecar integration tests.
#[path = "../tests/support/redis_server.rs"]
mod redis_server;
#[path = "../tests/support/sidecar_process.rs"]
mod support;
use support as sidecar_process;

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use reqstate_proto::v1::request_state_client::RequestStateClient;
use reqstate_proto::v1::{
    MintBatchRequest, MintRequest, VerifyBatchRequest, VerifyRequest, mint_request,
};
use support::{Sidecar, SidecarOptions, TestResult, keyring_toml, tcp_channel, unix_channel};
use tonic::transport::Channel;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

const TOOL: &str = "increase-counter";
const CONTEXT: &[u8] = b"principal=user-42;audience=counter-server;method=tools/call";
const BATCH: usize = 100;
/// Channels (HTTP/2 connections) the client spreads its calls over.
const CHANNELS: usize = 4;

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn mint_request() -> MintRequest {
    MintRequest {
        tool: TOOL.into(),
        step: "confirm".into(),
        state_value: Some(mint_request::StateValue::StateJson(
            r#"{"current":10,"amount":5}"#.into(),
        )),
        ttl_seconds: 600,
        context: CONTEXT.to_vec(),
        single_use: false,
    }
}

fn verify_request(token: &str) -> VerifyRequest {
    VerifyRequest {
        token: token.into(),
        tool: TOOL.into(),
        expected_step: Some("confirm".into()),
        context: CONTEXT.to_vec(),
        consume: false,
    }
}

/// What one case measured.
struct Outcome {
    calls: u64,
    items_per_call: u64,
    elapsed: Duration,
    latencies_us: Vec<u32>,
}

impl Outcome {
    fn calls_per_second(&self) -> f64 {
        self.calls as f64 / self.elapsed.as_secs_f64()
    }

    fn percentile_us(&self, p: f64) -> u32 {
        if self.latencies_us.is_empty() {
            return 0;
        }
        let mut sorted = self.latencies_us.clone();
        sorted.sort_unstable();
        let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
        sorted[rank]
    }
}

/// Runs `concurrency` loops of `call` for `duration`; every call must succeed.
async fn drive<C, F, Fut>(
    clients: &[C],
    concurrency: usize,
    duration: Duration,
    items_per_call: u64,
    call: F,
) -> TestResult<Outcome>
where
    C: Clone + Send + 'static,
    F: Fn(C) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = TestResult> + Send,
{
    let start = Instant::now();
    let deadline = start + duration;
    let mut tasks = Vec::with_capacity(concurrency);
    for i in 0..concurrency {
        let client = clients[i % clients.len()].clone();
        let call = call.clone();
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            while Instant::now() < deadline {
                let t = Instant::now();
                call(client.clone()).await?;
                latencies.push(u32::try_from(t.elapsed().as_micros()).unwrap_or(u32::MAX));
            }
            TestResult::Ok(latencies)
        }));
    }
    let mut latencies_us = Vec::new();
    for task in tasks {
        latencies_us.extend(task.await??);
    }
    Ok(Outcome {
        calls: latencies_us.len() as u64,
        items_per_call,
        elapsed: start.elapsed(),
        latencies_us,
    })
}

async fn run_transport(
    name: &str,
    channels: Vec<Channel>,
    concurrency: usize,
    duration: Duration,
) -> TestResult<Vec<(String, Outcome)>> {
    let rpc: Vec<RequestStateClient<Channel>> = channels
        .iter()
        .cloned()
        .map(RequestStateClient::new)
        .collect();
    let health: Vec<HealthClient<Channel>> = channels.into_iter().map(HealthClient::new).collect();
    let token = rpc[0]
        .clone()
        .mint(mint_request())
        .await?
        .into_inner()
        .token;
    let mut rows = Vec::new();

    let baseline = drive(
        &health,
        concurrency,
        duration,
        1,
        |mut c: HealthClient<Channel>| async move {
            c.check(HealthCheckRequest {
                service: String::new(),
            })
            .await?;
            Ok(())
        },
    )
    .await?;
    rows.push((format!("{name} Health/Check (baseline)"), baseline));

    let t = token.clone();
    let verify = drive(
        &rpc,
        concurrency,
        duration,
        1,
        move |mut c: RequestStateClient<Channel>| {
            let request = verify_request(&t);
            async move {
                let r = c.verify(request).await?.into_inner();
                if !r.valid {
                    return Err(format!("verify failed: {:?}", r.reason).into());
                }
                Ok(())
            }
        },
    )
    .await?;
    rows.push((format!("{name} Verify"), verify));

    let mint = drive(
        &rpc,
        concurrency,
        duration,
        1,
        |mut c: RequestStateClient<Channel>| async move {
            c.mint(mint_request()).await?;
            Ok(())
        },
    )
    .await?;
    rows.push((format!("{name} Mint"), mint));

    let t = token.clone();
    let verify_batch = drive(
        &rpc,
        concurrency,
        duration,
        BATCH as u64,
        move |mut c: RequestStateClient<Channel>| {
            let request = VerifyBatchRequest {
                items: vec![verify_request(&t); BATCH],
            };
            async move {
                let r = c.verify_batch(request).await?.into_inner();
                if r.results.len() != BATCH || r.results.iter().any(|x| !x.valid) {
                    return Err("a batch item failed".into());
                }
                Ok(())
            }
        },
    )
    .await?;
    rows.push((format!("{name} VerifyBatch x{BATCH}"), verify_batch));

    let mint_batch = drive(
        &rpc,
        concurrency,
        duration,
        BATCH as u64,
        |mut c: RequestStateClient<Channel>| async move {
            let r = c
                .mint_batch(MintBatchRequest {
                    items: vec![mint_request(); BATCH],
                })
                .await?
                .into_inner();
            if r.results.len() != BATCH {
                return Err("short batch".into());
            }
            Ok(())
        },
    )
    .await?;
    rows.push((format!("{name} MintBatch x{BATCH}"), mint_batch));
    Ok(rows)
}

/// Mints `n` single-use tokens through MintBatch.
async fn single_use_pool(
    client: &RequestStateClient<Channel>,
    n: usize,
) -> TestResult<Arc<Vec<String>>> {
    let mut tokens = Vec::with_capacity(n);
    let mut client = client.clone();
    while tokens.len() < n {
        let mut request = mint_request();
        request.single_use = true;
        let response = client
            .mint_batch(MintBatchRequest {
                items: vec![request; 1000],
            })
            .await?
            .into_inner();
        for result in response.results {
            match result.outcome {
                Some(reqstate_proto::v1::mint_result::Outcome::Minted(m)) => tokens.push(m.token),
                other => return Err(format!("mint failed: {other:?}").into()),
            }
        }
    }
    tokens.truncate(n);
    Ok(Arc::new(tokens))
}

/// Unary Verify with `consume`, each call a fresh single-use token; then
/// VerifyBatch with `consume` (one pipelined store call per batch).
async fn run_consume(
    name: &str,
    rpc: &[RequestStateClient<Channel>],
    concurrency: usize,
    duration: Duration,
    pool_size: usize,
) -> TestResult<Vec<(String, Outcome)>> {
    let mut rows = Vec::new();
    let pool = single_use_pool(&rpc[0], pool_size).await?;
    let next = Arc::new(AtomicUsize::new(0));
    let unary = {
        let (pool, next) = (pool.clone(), next.clone());
        drive(rpc, concurrency, duration, 1, move |mut c: RequestStateClient<Channel>| {
            let (pool, next) = (pool.clone(), next.clone());
            async move {
                let token = pool
                    .get(next.fetch_add(1, Ordering::Relaxed))
                    .ok_or("the pool of single-use tokens ran out: raise REQSTATE_BENCH_CONSUME_TOKENS")?;
                let mut request = verify_request(token);
                request.consume = true;
                let r = c.verify(request).await?.into_inner();
                if !r.valid {
                    return Err(format!("consume failed: {:?} {}", r.reason, r.detail).into());
                }
                Ok(())
            }
        })
        .await?
    };
    rows.push((format!("unix Verify+consume ({name})"), unary));
    // Batches consume tokens about ten times faster.
    let pool = single_use_pool(&rpc[0], 10 * pool_size).await?;
    let next = Arc::new(AtomicUsize::new(0));
    let batched = drive(
        rpc,
        concurrency,
        duration,
        BATCH as u64,
        move |mut c: RequestStateClient<Channel>| {
            let (pool, next) = (pool.clone(), next.clone());
            async move {
                let at = next.fetch_add(BATCH, Ordering::Relaxed);
                let tokens = pool.get(at..at + BATCH).ok_or(
                    "the pool of single-use tokens ran out: raise REQSTATE_BENCH_CONSUME_TOKENS",
                )?;
                let items = tokens
                    .iter()
                    .map(|t| {
                        let mut request = verify_request(t);
                        request.consume = true;
                        request
                    })
                    .collect();
                let r = c
                    .verify_batch(VerifyBatchRequest { items })
                    .await?
                    .into_inner();
                if r.results.len() != BATCH || r.results.iter().any(|x| !x.valid) {
                    return Err("a consumed batch item failed".into());
                }
                Ok(())
            }
        },
    )
    .await?;
    rows.push((
        format!("unix VerifyBatch+consume x{BATCH} ({name})"),
        batched,
    ));
    Ok(rows)
}

/// Redis's own round trip on its Unix socket (`PING`, one at a time): what
/// a consume may add at most, at p50.
async fn redis_round_trip(socket: &std::path::Path, duration: Duration) -> TestResult<Outcome> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut stream = tokio::net::UnixStream::connect(socket).await?;
    let start = Instant::now();
    let mut latencies_us = Vec::new();
    let mut reply = [0u8; 7];
    while start.elapsed() < duration {
        let t = Instant::now();
        stream.write_all(b"PING\r\n").await?;
        stream.read_exact(&mut reply).await?;
        if &reply != b"+PONG\r\n" {
            return Err("unexpected PING reply".into());
        }
        latencies_us.push(u32::try_from(t.elapsed().as_micros()).unwrap_or(u32::MAX));
    }
    Ok(Outcome {
        calls: latencies_us.len() as u64,
        items_per_call: 1,
        elapsed: start.elapsed(),
        latencies_us,
    })
}

fn print_table(rows: &[(String, Outcome)], concurrency: usize, duration: Duration) {
    println!(
        "\nSidecar, {concurrency} concurrent callers over {CHANNELS} connections, {:.1} s per case:\n",
        duration.as_secs_f64()
    );
    println!("| case | calls/s | p50 µs | p99 µs | vs baseline | tokens/s |");
    println!("|---|---:|---:|---:|---:|---:|");
    let mut baseline = 0.0;
    for (name, o) in rows {
        if name.contains("baseline") {
            baseline = o.calls_per_second();
        }
        let ratio = if baseline > 0.0 {
            format!("{:.0}%", 100.0 * o.calls_per_second() / baseline)
        } else {
            String::new()
        };
        let tokens = if o.items_per_call > 1 {
            format!("{:.0}", o.calls_per_second() * o.items_per_call as f64)
        } else {
            String::new()
        };
        println!(
            "| {name} | {:.0} | {} | {} | {ratio} | {tokens} |",
            o.calls_per_second(),
            o.percentile_us(50.0),
            o.percentile_us(99.0)
        );
    }
}

async fn bench() -> TestResult {
    let quick = std::env::args().any(|a| a == "--test");
    let duration = if quick {
        Duration::from_millis(200)
    } else {
        Duration::from_secs(env_number("REQSTATE_BENCH_SECONDS", 5))
    };
    let concurrency = usize::try_from(env_number("REQSTATE_BENCH_CONCURRENCY", 32))?;
    support::use_binary(reqstate_benches::reqstate_binary()?);
    // Single use: enough fresh tokens for every call of a case.
    let pool_size = if quick {
        10_000
    } else {
        usize::try_from(env_number("REQSTATE_BENCH_CONSUME_TOKENS", 200_000))?
    };

    let sidecar = Sidecar::start(
        SidecarOptions::new(keyring_toml(&[(1, "primary")]))
            .arg("--log")
            .arg("warn")
            // The Health/Check baseline runs at the same concurrency as the
            // other cases; the default health limit (16) would shed it.
            .arg("--max-health-calls")
            .arg((2 * concurrency).max(16).to_string())
            // Room for every token the consume cases spend in one run.
            .arg("--replay-capacity")
            .arg((12 * pool_size).to_string()),
    )
    .await?;
    let mut unix = Vec::new();
    let mut tcp = Vec::new();
    for _ in 0..CHANNELS {
        unix.push(unix_channel(&sidecar.unix).await?);
        tcp.push(tcp_channel(sidecar.tcp).await?);
    }
    let rpc: Vec<RequestStateClient<Channel>> =
        unix.iter().cloned().map(RequestStateClient::new).collect();
    let mut rows = run_transport("unix", unix, concurrency, duration).await?;
    rows.extend(run_transport("tcp", tcp, concurrency, duration).await?);

    rows.extend(run_consume("memory", &rpc, concurrency, duration, pool_size).await?);
    let redis_dir = tempfile::tempdir()?;
    let redis = redis_server::RedisServer::start(redis_dir.path(), false)?;
    let on_redis = Sidecar::start(
        SidecarOptions::new(keyring_toml(&[(1, "primary")]))
            .arg("--log")
            .arg("warn")
            .arg("--replay-store")
            .arg(redis.unix_url()),
    )
    .await?;
    let mut redis_rpc = Vec::new();
    for _ in 0..CHANNELS {
        redis_rpc.push(RequestStateClient::new(unix_channel(&on_redis.unix).await?));
    }
    rows.push((
        "redis PING round trip (unix socket, one client)".to_string(),
        redis_round_trip(&redis.socket, duration).await?,
    ));
    rows.extend(run_consume("redis", &redis_rpc, concurrency, duration, pool_size).await?);
    print_table(&rows, concurrency, duration);
    Ok(())
}

fn main() -> TestResult {
    // Every bench target is started with `--bench`; criterion-style filters
    // are not used here.
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(bench())
}
