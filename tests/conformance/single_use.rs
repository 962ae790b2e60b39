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
