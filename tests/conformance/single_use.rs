//! Single use across implementations (FORMAT.md §5.1): one real Redis holds
//! one spent-token record that the sidecar and every command line share.

use serde_json::json;

use crate::fixtures::{fixtures, strings};
use crate::implementations::{Pass, implementations, mint_token, run, verify_args};
use crate::redis_server;
use crate::shapes::stdout_object;
use crate::sidecar_process::{self, TestResult};

/// One Redis, one spent-token record for every implementation (security
/// review round 3, finding 3: the TypeScript store once wrote records under
/// another prefix, so a token consumed through one was accepted through the
/// other). A single-use token consumed through any of them, the sidecar over
/// gRPC or a command line with `--replay-store` (all on their defaults), is
/// refused as `replayed` through every one, itself included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_redis_holds_one_spent_record_for_every_implementation() -> TestResult {
    use reqstate_proto::v1 as pb;

    let fx = fixtures()?;
    let dir = tempfile::tempdir()?;
    let redis = redis_server::RedisServer::start(&dir.path().join("redis"), false)?;
    let url = redis.tcp_url();
    let keyring = std::fs::read_to_string(fx.keyring("main")?)?;
    let sidecar = sidecar_process::Sidecar::start(
        sidecar_process::SidecarOptions::new(keyring)
            .arg("--replay-store")
            .arg(url.clone()),
    )
    .await?;
    let mut grpc = sidecar.unix_client().await?;
    let imps = implementations();
    let mut consumers: Vec<&str> = vec!["sidecar"];
    consumers.extend(imps.iter().map(|imp| imp.name));
    let binding = strings(&["--tool", "pay-invoice", "--context", "user-42"]);

    for (round, first) in consumers.iter().enumerate() {
        let mut mint_args = binding.clone();
        mint_args.extend(strings(&["--step", "confirm", "--single-use"]));
        mint_args.extend(strings(&[
            "--state-json",
            &format!("{{\"round\":{round}}}"),
        ]));
        let (token, _) = mint_token(&fx, &imps[0], "main", &mint_args, "single-use mint")?;
        // (reason, detail) of one consume through `who`.
        let mut consume = |who: &str| -> TestResult<(bool, String, String)> {
            if who == "sidecar" {
                let answer = tokio::task::block_in_place(|| {
                    tokio::runtime::Handle::current().block_on(grpc.verify(pb::VerifyRequest {
                        token: token.clone(),
                        tool: "pay-invoice".into(),
                        expected_step: Some("confirm".into()),
                        context: b"user-42".to_vec(),
                        consume: true,
                    }))
                })?
                .into_inner();
                let reason = pb::Reason::try_from(answer.reason)
                    .map(|r| r.as_str_name().trim_start_matches("REASON_").to_lowercase())
                    .unwrap_or_default();
                return Ok((answer.valid, reason, answer.detail));
            }
            let imp = imps
                .iter()
                .find(|imp| imp.name == who)
                .ok_or("no such implementation")?;
            let mut args = binding.clone();
            args.extend(strings(&[
                "--expected-step",
                "confirm",
                "--consume",
                "--replay-store",
                &url,
            ]));
            let (args, stdin) = verify_args(&fx, "main", &args, &token, Pass::Flag)?;
            let out = run(imp, &args, stdin.as_deref())?;
            let object = stdout_object(&format!("{who} consume"), &out)?;
            Ok((
                object["valid"] == json!(true),
                object["reason"].as_str().unwrap_or_default().to_string(),
                format!("{object} {}", String::from_utf8_lossy(&out.stderr)),
            ))
        };
        let (valid, reason, detail) = consume(first)?;
        assert!(
            valid,
            "{first}: the first consume was refused: {reason} {detail}"
        );
        for then in &consumers {
            let (valid, reason, detail) = consume(then)?;
            assert!(
                !valid && reason == "replayed",
                "consumed through {first}, then {then} answered {reason}: {detail}"
            );
        }
    }
    // One record per token, all under the one default prefix.
    assert_eq!(redis.count_keys("reqstate:spent:v1:")?, consumers.len());
    Ok(())
}

/// A consume given `--now` ahead of the real clock writes a record that
/// outlives the token by the store's own clock (issue 50 item 1): the
/// lifetime is computed from the earlier of `--now` and the clock the
/// store's skew guard checked, in every implementation. A token of 60 s,
/// consumed under a leeway of 600 s at `--now` 650 s ahead, stays valid on
/// the real clock for about 660 s; computed from `--now`, its record lived
/// 14 s (PTTL), and a plain consume after that accepted it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consume_at_an_injected_now_keeps_the_record_for_the_whole_window() -> TestResult {
    let fx = fixtures()?;
    let dir = tempfile::tempdir()?;
    let redis = redis_server::RedisServer::start(&dir.path().join("redis"), false)?;
    let url = redis.tcp_url();
    let imps = implementations();
    let binding = strings(&["--tool", "pay-invoice", "--context", "user-42"]);
    let real_now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs();
    for imp in &imps {
        let mut mint_args = binding.clone();
        mint_args.extend(strings(&[
            "--step",
            "confirm",
            "--single-use",
            "--ttl",
            "60",
        ]));
        let (token, _) = mint_token(&fx, &imps[0], "main", &mint_args, "single-use mint")?;
        let before = redis.count_keys("reqstate:spent:v1:")?;
        let mut args = binding.clone();
        args.extend(strings(&[
            "--consume",
            "--replay-store",
            &url,
            "--clock-leeway",
            "600",
            "--now",
            &(real_now + 650).to_string(),
        ]));
        let (args, stdin) = verify_args(&fx, "main", &args, &token, Pass::Flag)?;
        let out = run(imp, &args, stdin.as_deref())?;
        let object = stdout_object(&format!("{} consume", imp.name), &out)?;
        assert_eq!(
            object["valid"],
            json!(true),
            "{}: {object} {}",
            imp.name,
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(redis.count_keys("reqstate:spent:v1:")?, before + 1);
        let keys = redis.cli(&["--scan", "--pattern", "reqstate:spent:v1:*"])?;
        let mut least_ms = i64::MAX;
        for key in keys.lines().filter(|k| !k.is_empty()) {
            least_ms = least_ms.min(redis.cli(&["PTTL", key])?.trim().parse()?);
        }
        // The token verifies on the real clock until real_now + 60 + 600
        // (the largest leeway): the record must live at least that long.
        assert!(
            least_ms >= (60 + 600 - 30) * 1000,
            "{}: a record lives {least_ms} ms, less than the token's window on the real clock",
            imp.name
        );
    }
    Ok(())
}
