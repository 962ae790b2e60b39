//! Single-use tokens through the real sidecar (docs/SINGLE_USE.md): the
//! memory store, and a real `redis-server` shared by two sidecars: replays
//! refused across the fleet, races with exactly one winner, Redis killed and
//! restarted under load (fail closed, recover without a sidecar restart,
//! append-only persistence keeps spent tokens spent), and a three-master
//! Redis Cluster.

use crate::redis_server;
use crate::sidecar_process;

use std::collections::HashSet;
use std::time::Duration;

use redis_server::{RedisCluster, RedisServer};
use reqstate_proto::v1 as pb;
use reqstate_proto::v1::request_state_client::RequestStateClient;
use sidecar_process::{Sidecar, SidecarOptions, TestResult, eventually, keyring_toml};
use tonic::transport::Channel;

const TOOL: &str = "pay-invoice";
const PREFIX: &str = "test-fleet:";

fn mint(single_use: bool, state: &str) -> pb::MintRequest {
    pb::MintRequest {
        tool: TOOL.into(),
        step: "confirm".into(),
        state_value: Some(pb::mint_request::StateValue::StateJson(state.into())),
        ttl_seconds: 300,
        context: b"user-42".to_vec(),
        single_use,
    }
}

fn verify(token: &str, consume: bool) -> pb::VerifyRequest {
    pb::VerifyRequest {
        token: token.into(),
        tool: TOOL.into(),
        expected_step: Some("confirm".into()),
        context: b"user-42".to_vec(),
        consume,
    }
}

fn reason(response: &pb::VerifyResponse) -> pb::Reason {
    pb::Reason::try_from(response.reason).unwrap_or(pb::Reason::Unspecified)
}

/// Two sidecars with the same keys, on one replay store given by `store`
/// (and any further flags).
async fn fleet(store_args: &[String]) -> TestResult<(Sidecar, Sidecar)> {
    let start = || {
        let mut options = SidecarOptions::new(keyring_toml(&[(1, "primary")]));
        for arg in store_args {
            options = options.arg(arg.clone());
        }
        Sidecar::start(options)
    };
    Ok((start().await?, start().await?))
}

fn redis_args(url: &str) -> Vec<String> {
    vec![
        "--replay-store".into(),
        url.into(),
        "--replay-key-prefix".into(),
        PREFIX.into(),
    ]
}

async fn mint_tokens(
    client: &mut RequestStateClient<Channel>,
    n: usize,
) -> TestResult<Vec<String>> {
    let mut tokens = Vec::with_capacity(n);
    for chunk in (0..n).collect::<Vec<_>>().chunks(1000) {
        let items = chunk
            .iter()
            .map(|i| mint(true, &format!("{{\"invoice\":{i}}}")))
            .collect();
        let response = client
            .mint_batch(pb::MintBatchRequest { items })
            .await?
            .into_inner();
        for result in response.results {
            match result.outcome {
                Some(pb::mint_result::Outcome::Minted(m)) => tokens.push(m.token),
                other => return Err(format!("mint failed: {other:?}").into()),
            }
        }
    }
    Ok(tokens)
}

/// Consumes every token in batches of 1000; the answers, in order.
async fn consume_all(
    mut client: RequestStateClient<Channel>,
    tokens: Vec<String>,
) -> TestResult<Vec<pb::VerifyResponse>> {
    let mut answers = Vec::with_capacity(tokens.len());
    for chunk in tokens.chunks(1000) {
        let items = chunk.iter().map(|t| verify(t, true)).collect();
        let response = client
            .verify_batch(pb::VerifyBatchRequest { items })
            .await?
            .into_inner();
        answers.extend(response.results);
    }
    Ok(answers)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_memory_store_accepts_a_single_use_token_once() -> TestResult {
    let sidecar = Sidecar::start(SidecarOptions::new(keyring_toml(&[(1, "primary")]))).await?;
    let mut client = sidecar.unix_client().await?;
    let single = client
        .mint(mint(true, r#"{"amount":5}"#))
        .await?
        .into_inner();
    let plain = client
        .mint(mint(false, r#"{"amount":5}"#))
        .await?
        .into_inner();
    assert_eq!(single.token.len(), plain.token.len() + 24);

    let not_consumed = client
        .verify(verify(&single.token, false))
        .await?
        .into_inner();
    assert_eq!(
        (not_consumed.valid, reason(&not_consumed)),
        (false, pb::Reason::SingleUse)
    );
    let first = client
        .verify(verify(&single.token, true))
        .await?
        .into_inner();
    assert!(first.valid, "{}", first.detail);
    assert_eq!(
        first.state_value,
        Some(pb::verify_response::StateValue::StateJson(
            r#"{"amount":5}"#.into()
        ))
    );
    let second = client
        .verify(verify(&single.token, true))
        .await?
        .into_inner();
    assert_eq!(
        (second.valid, reason(&second)),
        (false, pb::Reason::Replayed)
    );
    let plain_consumed = client
        .verify(verify(&plain.token, true))
        .await?
        .into_inner();
    assert_eq!(reason(&plain_consumed), pb::Reason::WrongKind);
    // A bad token never reaches the store: a tampered copy is refused as
    // altered, and the original (not yet spent) is still good.
    let fresh = client.mint(mint(true, "1")).await?.into_inner();
    let mut tampered = fresh.token.clone().into_bytes();
    let at = tampered.len() - 3;
    tampered[at] = if tampered[at] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(tampered)?;
    let refused = client.verify(verify(&tampered, true)).await?.into_inner();
    assert_eq!(reason(&refused), pb::Reason::AuthenticationFailed);
    assert!(
        client
            .verify(verify(&fresh.token, true))
            .await?
            .into_inner()
            .valid
    );

    // A batch presenting one token three times accepts it once.
    let token = client.mint(mint(true, "2")).await?.into_inner().token;
    let answers = consume_all(client.clone(), vec![token.clone(); 3]).await?;
    assert_eq!(answers.iter().filter(|a| a.valid).count(), 1);
    assert!(
        answers
            .iter()
            .filter(|a| !a.valid)
            .all(|a| reason(a) == pb::Reason::Replayed)
    );
    let consumed = sidecar
        .metric("reqstate_replay_records_total{result=\"consumed\"}")
        .await?;
    let replayed = sidecar
        .metric("reqstate_replay_records_total{result=\"replayed\"}")
        .await?;
    assert_eq!((consumed, replayed), (3.0, 3.0));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_memory_store_refuses_rather_than_forgets() -> TestResult {
    let sidecar = Sidecar::start(
        SidecarOptions::new(keyring_toml(&[(1, "primary")]))
            .arg("--replay-capacity")
            .arg("64"),
    )
    .await?;
    let mut client = sidecar.unix_client().await?;
    let tokens = mint_tokens(&mut client, 2000).await?;
    let answers = consume_all(client.clone(), tokens.clone()).await?;
    let accepted: Vec<usize> = (0..answers.len()).filter(|i| answers[*i].valid).collect();
    let full = answers
        .iter()
        .filter(|a| reason(a) == pb::Reason::ReplayStoreFull)
        .count();
    assert!(
        !accepted.is_empty() && accepted.len() <= 64,
        "{}",
        accepted.len()
    );
    assert_eq!(accepted.len() + full, 2000);
    // Every accepted token is still recorded: its replay is refused.
    let replays: Vec<String> = accepted.iter().map(|i| tokens[*i].clone()).collect();
    let again = consume_all(client, replays).await?;
    assert!(again.iter().all(|a| reason(a) == pb::Reason::Replayed));
    assert!(
        sidecar
            .metric("reqstate_replay_records_total{result=\"replay_store_full\"}")
            .await?
            >= full as f64
    );
    Ok(())
}

/// The Redis connection is opened when the sidecar starts, not by the first
/// consume (which would pay TCP, TLS and AUTH inside its store deadline):
/// before any call, Redis already has a client of the sidecar that read its
/// clock (`TIME`), and the first consume is answered on that connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sidecar_on_redis_connects_at_start_before_any_consume() -> TestResult {
    let dir = tempfile::tempdir()?;
    let redis = RedisServer::start(&dir.path().join("redis"), false)?;
    let sidecar = Sidecar::start(
        SidecarOptions::new(keyring_toml(&[(1, "primary")]))
            .arg("--replay-store")
            .arg(redis.unix_url()),
    )
    .await?;
    let sidecar_clients = || -> TestResult<Vec<String>> {
        Ok(redis
            .cli(&["CLIENT", "LIST"])?
            .lines()
            .filter(|line| line.contains(" cmd=time "))
            .map(str::to_owned)
            .collect())
    };
    let connected = eventually(
        Duration::from_secs(10),
        "the sidecar's connection to Redis",
        || async { Ok(Some(sidecar_clients()?).filter(|c| !c.is_empty())) },
    )
    .await?;
    assert_eq!(connected.len(), 1, "{connected:?}");
    let id = |line: &str| line.split(' ').next().map(str::to_owned);
    let before = id(&connected[0]);

    let mut client = sidecar.unix_client().await?;
    let token = client.mint(mint(true, "1")).await?.into_inner().token;
    let first = client.verify(verify(&token, true)).await?.into_inner();
    assert!(first.valid, "{}", first.detail);
    // The consume went over the connection opened at start: no other
    // client than it (and redis-cli's own, asking).
    let after: Vec<Option<String>> = redis
        .cli(&["CLIENT", "LIST"])?
        .lines()
        .filter(|line| !line.contains(" cmd=client|list "))
        .map(id)
        .collect();
    assert_eq!(
        after,
        vec![before],
        "a new connection for the first consume"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sidecars_on_one_redis_accept_each_token_once() -> TestResult {
    let dir = tempfile::tempdir()?;
    let redis = RedisServer::start(&dir.path().join("redis"), false)?;
    // One sidecar on the TCP URL, the other on the Unix socket.
    let (a, _) = fleet(&redis_args(&redis.tcp_url())).await?;
    let b = Sidecar::start(
        SidecarOptions::new(keyring_toml(&[(1, "primary")]))
            .arg("--replay-store")
            .arg(redis.unix_url())
            .arg("--replay-key-prefix")
            .arg(PREFIX),
    )
    .await?;
    let mut on_a = a.unix_client().await?;
    let mut on_b = b.unix_client().await?;

    let token = on_a.mint(mint(true, "7")).await?.into_inner().token;
    assert!(on_a.verify(verify(&token, true)).await?.into_inner().valid);
    let replay = on_b.verify(verify(&token, true)).await?.into_inner();
    assert_eq!(reason(&replay), pb::Reason::Replayed);
    // The record is named by key id and token id, never the token.
    let keys = redis.cli(&["--scan", "--pattern", &format!("{PREFIX}*")])?;
    let names: Vec<&str> = keys.lines().collect();
    assert_eq!(names.len(), 1, "{names:?}");
    assert!(
        names[0].starts_with(&format!("{PREFIX}spent:v1:1:")),
        "{}",
        names[0]
    );
    assert!(!names[0].contains(&token));
    // Kept for the token's 300 s, the largest leeway any verifier may have
    // (600 s) and twice the clock bound (2 s): docs/SINGLE_USE.md.
    let ttl_ms: i64 = redis.cli(&["PTTL", names[0]])?.trim().parse()?;
    assert!((894_000..=905_000).contains(&ttl_ms), "{ttl_ms}");

    // 64 concurrent consumes of one token across both sidecars: one winner.
    for _ in 0..5 {
        let token = on_a.mint(mint(true, "8")).await?.into_inner().token;
        let mut calls = tokio::task::JoinSet::new();
        for i in 0..64 {
            let mut client = if i % 2 == 0 {
                on_a.clone()
            } else {
                on_b.clone()
            };
            let request = verify(&token, true);
            calls.spawn(async move { client.verify(request).await.map(|r| r.into_inner()) });
        }
        let mut wins = 0;
        while let Some(answer) = calls.join_next().await {
            let answer = answer??;
            if answer.valid {
                wins += 1;
            } else {
                assert_eq!(reason(&answer), pb::Reason::Replayed);
            }
        }
        assert_eq!(wins, 1);
    }

    // 10 000 tokens, each presented at once to both sidecars (pipelined
    // batches): exactly 10 000 successes, each token accepted exactly once.
    for _ in 0..2 {
        let tokens = mint_tokens(&mut on_a, 10_000).await?;
        let (from_a, from_b) = tokio::join!(
            consume_all(on_a.clone(), tokens.clone()),
            consume_all(on_b.clone(), tokens.clone())
        );
        let (from_a, from_b) = (from_a?, from_b?);
        let mut winners = 0;
        for (x, y) in from_a.iter().zip(&from_b) {
            assert!(x.valid ^ y.valid, "{} / {}", x.detail, y.detail);
            let loser = if x.valid { y } else { x };
            assert_eq!(reason(loser), pb::Reason::Replayed);
            winners += 1;
        }
        assert_eq!(winners, 10_000);
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_killed_under_load_fails_closed_and_recovers_with_spent_tokens_kept() -> TestResult {
    let dir = tempfile::tempdir()?;
    let mut redis = RedisServer::start(&dir.path().join("redis"), true)?;
    let (a, b) = fleet(&redis_args(&redis.tcp_url())).await?;
    let mut on_a = a.unix_client().await?;
    let on_b = b.unix_client().await?;

    // Spent before the crash.
    let spent = on_a.mint(mint(true, "1")).await?.into_inner().token;
    assert!(on_a.verify(verify(&spent, true)).await?.into_inner().valid);

    // Load on both sidecars while Redis is killed.
    let tokens = mint_tokens(&mut on_a, 4000).await?;
    let load = tokio::spawn({
        let (on_a, on_b, tokens) = (on_a.clone(), on_b.clone(), tokens.clone());
        async move {
            let mut answers = Vec::new();
            for chunk in tokens.chunks(100) {
                let (x, y) = tokio::join!(
                    consume_all(on_a.clone(), chunk.to_vec()),
                    consume_all(on_b.clone(), chunk.to_vec())
                );
                answers.push((x?, y?));
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            TestResult::Ok(answers)
        }
    });
    tokio::time::sleep(Duration::from_millis(60)).await;
    redis.kill();
    let answers = load.await??;
    let mut unavailable = 0;
    for (x, y) in answers {
        for (x, y) in x.iter().zip(&y) {
            assert!(!(x.valid && y.valid), "a token accepted twice");
            for answer in [x, y] {
                if !answer.valid {
                    let r = reason(answer);
                    assert!(
                        matches!(r, pb::Reason::Replayed | pb::Reason::ReplayStoreUnavailable),
                        "{r:?}: {}",
                        answer.detail
                    );
                    unavailable += usize::from(r == pb::Reason::ReplayStoreUnavailable);
                }
            }
        }
    }
    assert!(
        unavailable > 0,
        "Redis was killed mid-load but no consume failed closed"
    );

    // Down: consumes fail closed, everything else is served.
    let down = on_a
        .clone()
        .verify(verify(&tokens[0], true))
        .await?
        .into_inner();
    assert!(
        matches!(
            reason(&down),
            pb::Reason::ReplayStoreUnavailable | pb::Reason::Replayed
        ),
        "{:?}",
        reason(&down)
    );
    let plain = on_a.mint(mint(false, "3")).await?.into_inner().token;
    assert!(on_a.verify(verify(&plain, false)).await?.into_inner().valid);

    // Back up, from its append-only file: both sidecars recover by
    // themselves, and the token spent before the crash stays spent.
    redis.restart()?;
    let fresh = on_a.mint(mint(true, "4")).await?.into_inner().token;
    eventually(Duration::from_secs(15), "consumes to work again", || {
        let (mut on_b, fresh) = (on_b.clone(), fresh.clone());
        async move {
            let answer = on_b.verify(verify(&fresh, true)).await?.into_inner();
            Ok((answer.valid || reason(&answer) == pb::Reason::Replayed).then_some(()))
        }
    })
    .await?;
    let again = on_b
        .clone()
        .verify(verify(&spent, true))
        .await?
        .into_inner();
    assert_eq!(reason(&again), pb::Reason::Replayed);
    assert!(a.log().contains("replay store"), "the failure is logged");
    assert!(!a.log().contains("panicked") && !b.log().contains("panicked"));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_cluster_gives_one_winner_per_token() -> TestResult {
    let dir = tempfile::tempdir()?;
    let cluster = RedisCluster::start(dir.path())?;
    let args = vec![
        "--replay-store".to_string(),
        cluster.urls(),
        "--replay-cluster".to_string(),
        "--replay-key-prefix".to_string(),
        PREFIX.to_string(),
        // One winner per token is what is tested here, not the deadline: a
        // batch is 1000 concurrent SETs over three masters, which on two
        // busy cores can take longer than the default 250 ms (and would
        // then be refused on both sidecars, failing closed).
        "--replay-timeout-ms".to_string(),
        "10000".to_string(),
    ];
    let (a, b) = fleet(&args).await?;
    let mut on_a = a.unix_client().await?;
    let on_b = b.unix_client().await?;
    let tokens = mint_tokens(&mut on_a, 3000).await?;
    let (from_a, from_b) = tokio::join!(
        consume_all(on_a.clone(), tokens.clone()),
        consume_all(on_b.clone(), tokens.clone())
    );
    let (from_a, from_b) = (from_a?, from_b?);
    for (x, y) in from_a.iter().zip(&from_b) {
        assert!(x.valid ^ y.valid, "{} / {}", x.detail, y.detail);
    }
    // The records are spread over the three masters.
    let per_node: Vec<usize> = cluster
        .nodes
        .iter()
        .map(|n| n.count_keys(PREFIX))
        .collect::<TestResult<_>>()?;
    assert_eq!(per_node.iter().sum::<usize>(), 3000, "{per_node:?}");
    assert!(per_node.iter().all(|n| *n > 0), "{per_node:?}");
    let distinct: HashSet<_> = tokens.iter().collect();
    assert_eq!(distinct.len(), 3000);
    Ok(())
}

/// `rediss://` with a Redis ACL user that may only `SET` under the
/// deployment's prefix: consumes work; a wrong password, or a prefix the
/// user may not write, fail closed with the store unavailable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_over_tls_with_a_restricted_acl_user() -> TestResult {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
    let dir = tempfile::tempdir()?;
    let ca_key = KeyPair::generate()?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_pem = ca_params.self_signed(&ca_key)?.pem();
    let server_key = KeyPair::generate()?;
    let server_cert = CertificateParams::new(vec!["127.0.0.1".into(), "localhost".into()])?
        .signed_by(&server_key, &Issuer::from_params(&ca_params, &ca_key))?;
    let (ca, cert, key) = (
        dir.path().join("ca.pem"),
        dir.path().join("redis.pem"),
        dir.path().join("redis.key"),
    );
    std::fs::write(&ca, ca_pem)?;
    std::fs::write(&cert, server_cert.pem())?;
    std::fs::write(&key, server_key.serialize_pem())?;
    let redis = RedisServer::start_tls(&dir.path().join("redis"), &cert, &key, &ca)?;
    redis.cli(&[
        "ACL",
        "SETUSER",
        "reqstate",
        "on",
        ">s3cret-pass",
        &format!("~{PREFIX}*"),
        "+set",
        "+time",
    ])?;
    let start = |url: String, prefix: &str| {
        Sidecar::start(
            SidecarOptions::new(keyring_toml(&[(1, "primary")]))
                .arg("--replay-store")
                .arg(url)
                .arg("--replay-key-prefix")
                .arg(prefix)
                // TLS and the ACL are tested here, not the deadline: the
                // first consume also connects (TCP, TLS, AUTH), which on
                // two busy cores can take longer than the default 250 ms.
                .arg("--replay-timeout-ms")
                .arg("10000")
                // The sidecar trusts the test CA like a system root.
                .env("SSL_CERT_FILE", ca.display().to_string()),
        )
    };
    let url = |password: &str| format!("rediss://reqstate:{password}@127.0.0.1:{}", redis.port);
    let good = start(url("s3cret-pass"), PREFIX).await?;
    let mut client = good.unix_client().await?;
    let token = client.mint(mint(true, "1")).await?.into_inner().token;
    let first = client.verify(verify(&token, true)).await?.into_inner();
    assert!(first.valid, "{}", first.detail);
    let again = client.verify(verify(&token, true)).await?.into_inner();
    assert_eq!(reason(&again), pb::Reason::Replayed);
    assert_eq!(redis.count_keys(PREFIX)?, 1);
    // The password never reaches the logs.
    assert!(!good.log().contains("s3cret-pass"), "{}", good.log());

    for (password, prefix) in [("wrong", PREFIX), ("s3cret-pass", "another-deployment:")] {
        let bad = start(url(password), prefix).await?;
        let mut client = bad.unix_client().await?;
        let token = client.mint(mint(true, "2")).await?.into_inner().token;
        let refused = client.verify(verify(&token, true)).await?.into_inner();
        assert_eq!(
            reason(&refused),
            pb::Reason::ReplayStoreUnavailable,
            "{password} {prefix}: {}",
            refused.detail
        );
        assert!(!bad.log().contains("s3cret-pass"));
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Security review round 3, finding 1: a spent record outlives the token on
// every replica, whatever its clock (within --replay-max-skew-ms of Redis's)
// and its leeway; beyond the bound, consumes are refused. Finding 5: a
// consume whose store call timed out after Redis recorded it is accepted
// once when retried through the same sidecar.

/// The libfaketime library (Debian's `libfaketime`, installed by the test
/// command): a process started with it reads its wall clock shifted.
const LIBFAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

/// Options for a sidecar whose wall clock is `offset` seconds off (for
/// example "-1.5": behind); its monotonic clock is left alone.
fn skewed(options: SidecarOptions, offset: &str) -> TestResult<SidecarOptions> {
    if !std::path::Path::new(LIBFAKETIME).exists() {
        return Err(format!(
            "{LIBFAKETIME} is missing: `apt-get install libfaketime` (scripts/test.sh installs it)"
        )
        .into());
    }
    Ok(options
        .env("LD_PRELOAD", LIBFAKETIME)
        .env("FAKETIME", offset)
        .env("FAKETIME_DONT_FAKE_MONOTONIC", "1"))
}

/// A sidecar on `redis` with this leeway and any further options.
fn on_redis(redis: &RedisServer, leeway: u32) -> SidecarOptions {
    let mut options = SidecarOptions::new(keyring_toml(&[(1, "primary")]));
    for arg in redis_args(&redis.tcp_url()) {
        options = options.arg(arg);
    }
    options.arg("--clock-leeway").arg(leeway.to_string())
}

/// A single-use token of one second.
async fn short_token(client: &mut RequestStateClient<Channel>) -> TestResult<String> {
    let mut request = mint(true, "{\"amount\":5}");
    request.ttl_seconds = 1;
    Ok(client.mint(request).await?.into_inner().token)
}

/// Consumes `token` every 150 ms until `client`'s sidecar refuses it as
/// expired: every answer before that must be a replay (never a second
/// redemption). Returns how many replays were seen.
async fn replays_until_expired(
    client: &mut RequestStateClient<Channel>,
    token: &str,
) -> TestResult<usize> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let mut replays = 0;
    loop {
        let answer = client.verify(verify(token, true)).await?.into_inner();
        assert!(
            !answer.valid,
            "a single-use token was redeemed a second time (after {replays} replays)"
        );
        match reason(&answer) {
            pb::Reason::Replayed => replays += 1,
            pb::Reason::Expired => return Ok(replays),
            other => return Err(format!("unexpected answer {other:?}: {}", answer.detail).into()),
        }
        if tokio::time::Instant::now() > deadline {
            return Err("the token never expired".into());
        }
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
}

/// The review's reproduction, inside the bound: a sidecar whose clock runs
/// 1.5 s behind Redis's. With an absolute expiry from its own clock (`PXAT
/// expires_at + leeway`), Redis dropped the record half a second before
/// this sidecar stopped accepting the token, which was then redeemed again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sidecar_behind_redis_redeems_a_token_once_for_its_whole_window() -> TestResult {
    let dir = tempfile::tempdir()?;
    let redis = RedisServer::start(&dir.path().join("redis"), false)?;
    let behind = Sidecar::start(skewed(on_redis(&redis, 3), "-1.5")?).await?;
    let mut client = behind.unix_client().await?;
    let token = short_token(&mut client).await?;
    let first = client.verify(verify(&token, true)).await?.into_inner();
    assert!(first.valid, "{first:?}");
    let replays = replays_until_expired(&mut client, &token).await?;
    assert!(replays >= 10, "{replays} replays");
    // The sidecar saw its skew, within the bound.
    let skew = behind
        .metric("reqstate_replay_store_clock_skew_seconds")
        .await?;
    assert!((-1.9..=-1.1).contains(&skew), "skew {skew}");
    Ok(())
}

/// Two replicas with different leeways on one Redis: a token consumed on the
/// one with 1 s stays spent for the one with 5 s until it expires there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_with_different_leeways_share_one_record() -> TestResult {
    let dir = tempfile::tempdir()?;
    let redis = RedisServer::start(&dir.path().join("redis"), false)?;
    let tight = Sidecar::start(on_redis(&redis, 1)).await?;
    let loose = Sidecar::start(on_redis(&redis, 5)).await?;
    let mut on_tight = tight.unix_client().await?;
    let mut on_loose = loose.unix_client().await?;
    let token = short_token(&mut on_tight).await?;
    assert!(
        on_tight
            .verify(verify(&token, true))
            .await?
            .into_inner()
            .valid
    );
    let replays = replays_until_expired(&mut on_loose, &token).await?;
    assert!(replays >= 20, "{replays} replays");
    Ok(())
}

/// Beyond the bound the guarantee cannot hold: consumes are refused, with
/// the reason in the answer, the log and the metrics, and nothing is
/// recorded; everything else is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clock_beyond_the_bound_refuses_consumes_and_says_why() -> TestResult {
    let dir = tempfile::tempdir()?;
    let redis = RedisServer::start(&dir.path().join("redis"), false)?;
    for (offset, direction) in [("-4", "behind"), ("+4", "ahead of")] {
        let sidecar = Sidecar::start(skewed(on_redis(&redis, 60), offset)?).await?;
        let mut client = sidecar.unix_client().await?;
        let token = client.mint(mint(true, "1")).await?.into_inner().token;
        let answer = client.verify(verify(&token, true)).await?.into_inner();
        assert!(!answer.valid);
        assert_eq!(reason(&answer), pb::Reason::ReplayStoreUnavailable);
        assert!(
            answer
                .detail
                .contains(&format!("{direction} the replay store's"))
                && answer.detail.contains("2000 ms allowed"),
            "{}",
            answer.detail
        );
        assert_eq!(redis.count_keys(PREFIX)?, 0, "a record was written");
        let skew = sidecar
            .metric("reqstate_replay_store_clock_skew_seconds")
            .await?;
        assert!((3.5..=4.5).contains(&skew.abs()), "skew {skew}");
        assert!(
            sidecar
                .log()
                .contains("consumes are refused until the clocks agree")
        );
        // Ordinary tokens are still minted and verified.
        let plain = client.mint(mint(false, "2")).await?.into_inner().token;
        assert!(
            client
                .verify(verify(&plain, false))
                .await?
                .into_inner()
                .valid
        );
    }
    Ok(())
}

/// A consume whose SET Redis holds past the deadline (`CLIENT PAUSE …
/// WRITE`) is refused, but Redis records it when the pause ends. The
/// caller's retry through the same sidecar is accepted, once; another
/// sidecar sees a replay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consume_of_unknown_outcome_is_accepted_once_when_retried() -> TestResult {
    let dir = tempfile::tempdir()?;
    let redis = RedisServer::start(&dir.path().join("redis"), false)?;
    let a = Sidecar::start(on_redis(&redis, 60)).await?;
    let b = Sidecar::start(on_redis(&redis, 60)).await?;
    let mut on_a = a.unix_client().await?;
    let mut on_b = b.unix_client().await?;
    let token = on_a.mint(mint(true, "3")).await?.into_inner().token;
    redis.cli(&["CLIENT", "PAUSE", "1500", "WRITE"])?;
    let first = on_a.verify(verify(&token, true)).await?.into_inner();
    assert_eq!(
        reason(&first),
        pb::Reason::ReplayStoreUnavailable,
        "{first:?}"
    );
    // Security review round 4: one message, what happened and what to do,
    // never "not recorded" beside "may have been recorded".
    for said in [
        "the replay store's answer was lost, so the token may or may not be spent",
        "Retry the same consume through this same sidecar",
    ] {
        assert!(
            first.detail.contains(said),
            "no {said:?} in {}",
            first.detail
        );
    }
    assert!(!first.detail.contains("not recorded"), "{}", first.detail);
    // The pause ends and the held SET runs: the token is recorded.
    eventually(Duration::from_secs(10), "the held SET recorded", || async {
        Ok((redis.count_keys(PREFIX)? == 1).then_some(()))
    })
    .await?;
    let elsewhere = on_b.verify(verify(&token, true)).await?.into_inner();
    assert_eq!(reason(&elsewhere), pb::Reason::Replayed);
    let retry = on_a.verify(verify(&token, true)).await?.into_inner();
    assert!(retry.valid, "the retry was refused: {retry:?}");
    let again = on_a.verify(verify(&token, true)).await?.into_inner();
    assert_eq!(reason(&again), pb::Reason::Replayed, "accepted twice");
    Ok(())
}

/// A consume Redis refused: not valid, `reason`, a detail naming `cause` and
/// saying nothing was recorded, never the outcome-unknown or no-answer text.
fn refused_by_redis(answer: &pb::VerifyResponse, want: pb::Reason, cause: &str) {
    assert!(!answer.valid);
    assert_eq!(reason(answer), want, "{}", answer.detail);
    let detail = &answer.detail;
    assert!(
        detail.contains(cause)
            && detail.contains("nothing was recorded")
            && !detail.contains("did not answer")
            && !detail.contains("may or may not be spent"),
        "{detail}"
    );
}

/// Issue 50 item 3: a consume that Redis answered with a refusal recorded
/// nothing, so it is not an outcome-unknown: the detail names the cause
/// (out of memory under `noeviction`; a replica's `READONLY`) and says
/// nothing was recorded, and once Redis takes records again the same token
/// is accepted, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_from_redis_names_its_cause_and_spends_nothing() -> TestResult {
    let dir = tempfile::tempdir()?;
    let redis = RedisServer::start(&dir.path().join("redis"), false)?;
    let sidecar = Sidecar::start(
        SidecarOptions::new(keyring_toml(&[(1, "primary")]))
            .arg("--replay-store")
            .arg(redis.unix_url()),
    )
    .await?;
    let mut client = sidecar.unix_client().await?;
    let token = client.mint(mint(true, "1")).await?.into_inner().token;

    // Out of memory under noeviction.
    redis.cli(&["CONFIG", "SET", "maxmemory-policy", "noeviction"])?;
    redis.cli(&["CONFIG", "SET", "maxmemory", "1"])?;
    let full = client.verify(verify(&token, true)).await?.into_inner();
    refused_by_redis(
        &full,
        pb::Reason::ReplayStoreFull,
        "Redis is out of memory and refused the record",
    );
    redis.cli(&["CONFIG", "SET", "maxmemory", "0"])?;

    // A replica (its primary unreachable): READONLY.
    redis.cli(&["CONFIG", "SET", "replica-read-only", "yes"])?;
    redis.cli(&["REPLICAOF", "127.0.0.1", "1"])?;
    let read_only = client.verify(verify(&token, true)).await?.into_inner();
    refused_by_redis(
        &read_only,
        pb::Reason::ReplayStoreUnavailable,
        "READONLY: this Redis is a replica",
    );
    redis.cli(&["REPLICAOF", "NO", "ONE"])?;

    // Nothing was spent: the token is accepted now, once.
    let accepted = client.verify(verify(&token, true)).await?.into_inner();
    assert!(accepted.valid, "{}", accepted.detail);
    let replayed = client.verify(verify(&token, true)).await?.into_inner();
    assert_eq!(reason(&replayed), pb::Reason::Replayed);
    Ok(())
}
