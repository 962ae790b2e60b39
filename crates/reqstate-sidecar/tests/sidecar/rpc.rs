//! The sidecar's gRPC surface against the real binary: every rpc over Unix and TCP, authentication, limits, health, reflection, metrics and draining.

use crate::sidecar_process;

use std::time::Duration;

use reqstate_proto::v1 as pb;
use reqstate_proto::v1::request_state_client::RequestStateClient;
use sidecar_process::{Sidecar, SidecarOptions, TestResult, keyring_toml, with_bearer};
use tonic::Code;
use tonic::transport::Channel;

const TOKEN: &str = "test-bearer-token-0123456789";

async fn start_with_auth(extra: &[&str]) -> TestResult<Sidecar> {
    let mut options =
        SidecarOptions::new(keyring_toml(&[(1, "primary"), (2, "active")])).auth_token(TOKEN);
    for arg in extra {
        options = options.arg(*arg);
    }
    Sidecar::start(options).await
}

fn mint_json(tool: &str, step: &str, json: &str) -> pb::MintRequest {
    pb::MintRequest {
        tool: tool.into(),
        step: step.into(),
        state_value: Some(pb::mint_request::StateValue::StateJson(json.into())),
        ttl_seconds: 300,
        context: b"user-42".to_vec(),
        single_use: false,
    }
}

fn verify_request(token: &str, tool: &str, step: Option<&str>) -> pb::VerifyRequest {
    pb::VerifyRequest {
        token: token.into(),
        tool: tool.into(),
        expected_step: step.map(Into::into),
        context: b"user-42".to_vec(),
        consume: false,
    }
}

/// Every rpc, in the way a client in another language would use it.
async fn exercise_every_rpc(client: &mut RequestStateClient<Channel>) -> TestResult {
    // Mint and verify JSON state: it comes back as JSON.
    let minted = client
        .mint(with_bearer(
            mint_json("counter", "confirm", r#"{"n": 10}"#),
            TOKEN,
        )?)
        .await?
        .into_inner();
    assert_eq!(minted.key_id, 1, "the primary mints");
    assert!(minted.expires_at >= minted.issued_at + 300);
    let verified = client
        .verify(with_bearer(
            verify_request(&minted.token, "counter", Some("confirm")),
            TOKEN,
        )?)
        .await?
        .into_inner();
    assert!(verified.valid, "{verified:?}");
    assert_eq!(verified.reason, pb::Reason::Unspecified as i32);
    assert_eq!(verified.step, "confirm");
    assert_eq!(
        verified.state_value,
        Some(pb::verify_response::StateValue::StateJson(
            r#"{"n":10}"#.into()
        ))
    );
    assert_eq!(verified.expires_at, minted.expires_at);

    // Bytes state comes back as bytes.
    let bytes_token = client
        .mint(with_bearer(
            pb::MintRequest {
                tool: "counter".into(),
                step: "s".into(),
                state_value: Some(pb::mint_request::StateValue::State(vec![0, 255, 7])),
                ttl_seconds: 0,
                context: b"user-42".to_vec(),
                single_use: false,
            },
            TOKEN,
        )?)
        .await?
        .into_inner();
    let verified = client
        .verify(with_bearer(
            verify_request(&bytes_token.token, "counter", None),
            TOKEN,
        )?)
        .await?
        .into_inner();
    assert_eq!(
        verified.state_value,
        Some(pb::verify_response::StateValue::State(vec![0, 255, 7]))
    );

    // Failures are in-band, with the core's reason.
    let other_tool = client
        .verify(with_bearer(
            verify_request(&minted.token, "delete-all", None),
            TOKEN,
        )?)
        .await?
        .into_inner();
    assert!(!other_tool.valid);
    assert_eq!(other_tool.reason, pb::Reason::AuthenticationFailed as i32);
    let wrong_step = client
        .verify(with_bearer(
            verify_request(&minted.token, "counter", Some("amount")),
            TOKEN,
        )?)
        .await?
        .into_inner();
    assert_eq!(wrong_step.reason, pb::Reason::WrongStep as i32);
    assert!(wrong_step.state_value.is_none(), "no state on failure");

    // Malformed requests are RPC errors.
    let no_tool = client
        .verify(with_bearer(verify_request(&minted.token, "", None), TOKEN)?)
        .await
        .err()
        .ok_or("a verify without tool succeeded")?;
    assert_eq!(no_tool.code(), Code::InvalidArgument);
    let bad_json = client
        .mint(with_bearer(mint_json("counter", "s", "{not json"), TOKEN)?)
        .await
        .err()
        .ok_or("a mint with bad state_json succeeded")?;
    assert_eq!(bad_json.code(), Code::InvalidArgument);
    assert_eq!(
        bad_json
            .metadata()
            .get("reqstate-reason")
            .map(|v| v.to_str().unwrap_or_default()),
        Some("invalid_argument")
    );
    // The one strict JSON reader (reqstate::json): a repeated key and an
    // integer no CBOR integer holds are refused, not minted.
    for (json, says) in [
        (r#"{"a":1,"a":2}"#, "appears twice"),
        ("18446744073709551616", "integer"),
    ] {
        let refused = client
            .mint(with_bearer(mint_json("counter", "s", json), TOKEN)?)
            .await
            .err()
            .ok_or_else(|| format!("a mint of {json} succeeded"))?;
        assert_eq!(refused.code(), Code::InvalidArgument, "{json}");
        assert!(refused.message().contains(says), "{json}: {refused:?}");
    }

    // Batches: each item on its own, in order.
    let batch = client
        .mint_batch(with_bearer(
            pb::MintBatchRequest {
                items: vec![
                    mint_json("counter", "a", "1"),
                    mint_json("", "b", "2"),
                    mint_json("counter", "c", "3"),
                ],
            },
            TOKEN,
        )?)
        .await?
        .into_inner();
    assert_eq!(batch.results.len(), 3);
    let token_of = |result: &pb::MintResult| match &result.outcome {
        Some(pb::mint_result::Outcome::Minted(m)) => Some(m.token.clone()),
        _ => None,
    };
    let first = token_of(&batch.results[0]).ok_or("item 0 failed")?;
    match &batch.results[1].outcome {
        Some(pb::mint_result::Outcome::Error(e)) => {
            assert_eq!(e.reason, pb::Reason::InvalidArgument as i32)
        }
        other => panic!("item 1 should fail: {other:?}"),
    }
    let third = token_of(&batch.results[2]).ok_or("item 2 failed")?;
    let verified = client
        .verify_batch(with_bearer(
            pb::VerifyBatchRequest {
                items: vec![
                    verify_request(&third, "counter", Some("c")),
                    verify_request("not a token!", "counter", None),
                    verify_request(&first, "", None),
                    verify_request(&first, "counter", Some("a")),
                ],
            },
            TOKEN,
        )?)
        .await?
        .into_inner();
    let reasons: Vec<(bool, i32)> = verified
        .results
        .iter()
        .map(|r| (r.valid, r.reason))
        .collect();
    assert_eq!(
        reasons,
        vec![
            (true, pb::Reason::Unspecified as i32),
            (false, pb::Reason::Malformed as i32),
            (false, pb::Reason::InvalidArgument as i32),
            (true, pb::Reason::Unspecified as i32),
        ]
    );
    assert_eq!(
        verified.results[0].state_value,
        Some(pb::verify_response::StateValue::StateJson("3".into()))
    );

    // Seal and unseal raw payloads.
    let sealed = client
        .seal(with_bearer(
            pb::SealRequest {
                payload: b"claims".to_vec(),
                aad: b"aud".to_vec(),
            },
            TOKEN,
        )?)
        .await?
        .into_inner();
    assert_eq!(sealed.key_id, 1);
    let opened = client
        .unseal(with_bearer(
            pb::UnsealRequest {
                token: sealed.token.clone(),
                aad: b"aud".to_vec(),
            },
            TOKEN,
        )?)
        .await?
        .into_inner();
    assert!(opened.valid);
    assert_eq!(opened.payload, b"claims");
    assert_eq!(opened.key_id, 1);
    let wrong_aad = client
        .unseal(with_bearer(
            pb::UnsealRequest {
                token: sealed.token.clone(),
                aad: b"other".to_vec(),
            },
            TOKEN,
        )?)
        .await?
        .into_inner();
    assert!(!wrong_aad.valid);
    assert_eq!(wrong_aad.reason, pb::Reason::AuthenticationFailed as i32);
    assert!(wrong_aad.payload.is_empty());
    let state_as_sealed = client
        .unseal(with_bearer(
            pb::UnsealRequest {
                token: minted.token.clone(),
                aad: Vec::new(),
            },
            TOKEN,
        )?)
        .await?
        .into_inner();
    assert_eq!(state_as_sealed.reason, pb::Reason::WrongKind as i32);

    // ListKeys: ids, statuses, algorithms; no material.
    let keys = client
        .list_keys(with_bearer(pb::ListKeysRequest {}, TOKEN)?)
        .await?
        .into_inner();
    let listed: Vec<(u32, i32, i32)> = keys
        .keys
        .iter()
        .map(|k| (k.id, k.status, k.algorithm))
        .collect();
    assert_eq!(
        listed,
        vec![
            (
                1,
                pb::KeyStatus::Primary as i32,
                pb::Algorithm::Xchacha20Poly1305 as i32
            ),
            (
                2,
                pb::KeyStatus::Active as i32,
                pb::Algorithm::Xchacha20Poly1305 as i32
            ),
        ]
    );
    assert_eq!(keys.keyring_generation, 1);
    Ok(())
}

#[tokio::test]
async fn every_rpc_works_over_unix_socket_and_tcp() -> TestResult {
    let sidecar = start_with_auth(&[]).await?;
    exercise_every_rpc(&mut sidecar.unix_client().await?).await?;
    exercise_every_rpc(&mut sidecar.tcp_client().await?).await?;

    // One sidecar, one keyring: a token minted over one transport verifies over the other.
    let minted = sidecar
        .unix_client()
        .await?
        .mint(with_bearer(mint_json("t", "s", "null"), TOKEN)?)
        .await?
        .into_inner();
    let verified = sidecar
        .tcp_client()
        .await?
        .verify(with_bearer(
            verify_request(&minted.token, "t", None),
            TOKEN,
        )?)
        .await?
        .into_inner();
    assert!(verified.valid);
    Ok(())
}

#[tokio::test]
async fn unix_socket_is_created_owner_only() -> TestResult {
    use std::os::unix::fs::PermissionsExt;
    let sidecar = start_with_auth(&[]).await?;
    let mode = std::fs::metadata(&sidecar.unix)?.permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    Ok(())
}

#[tokio::test]
async fn missing_or_wrong_bearer_token_is_unauthenticated_while_health_answers() -> TestResult {
    let sidecar = start_with_auth(&[]).await?;
    for mut client in [sidecar.unix_client().await?, sidecar.tcp_client().await?] {
        let missing = client
            .list_keys(pb::ListKeysRequest {})
            .await
            .err()
            .ok_or("a call without a token succeeded")?;
        assert_eq!(missing.code(), Code::Unauthenticated);
        let wrong = client
            .mint(with_bearer(
                mint_json("t", "s", "1"),
                "test-bearer-token-012345678X",
            )?)
            .await
            .err()
            .ok_or("a call with a wrong token succeeded")?;
        assert_eq!(wrong.code(), Code::Unauthenticated);
        let prefix = client
            .mint(with_bearer(
                mint_json("t", "s", "1"),
                &TOKEN[..TOKEN.len() - 1],
            )?)
            .await
            .err()
            .ok_or("a call with a token prefix succeeded")?;
        assert_eq!(prefix.code(), Code::Unauthenticated);
        client
            .mint(with_bearer(mint_json("t", "s", "1"), TOKEN)?)
            .await?;
    }
    // Reflection is no exception either.
    let reflection = reflection_services(&sidecar, None).await;
    assert!(reflection.is_err(), "reflection answered without the token");

    let mut health = tonic_health::pb::health_client::HealthClient::new(
        sidecar_process::tcp_channel(sidecar.tcp).await?,
    );
    let status = health
        .check(tonic_health::pb::HealthCheckRequest {
            service: "reqstate.v1.RequestState".into(),
        })
        .await?
        .into_inner();
    assert_eq!(
        status.status,
        tonic_health::pb::health_check_response::ServingStatus::Serving as i32
    );
    assert!(
        sidecar
            .metric("reqstate_calls_total{result=\"unauthenticated\",rpc=\"ListKeys\"}")
            .await?
            >= 2.0
    );
    // Neither the expected token nor the wrong ones reach the logs.
    let log = sidecar.log();
    assert!(!log.contains("test-bearer-token"), "{log}");
    Ok(())
}

use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;

/// One server-reflection exchange, as grpcurl makes them.
async fn reflect(
    sidecar: &Sidecar,
    token: Option<&str>,
    message: MessageRequest,
) -> TestResult<MessageResponse> {
    use tonic_reflection::pb::v1::ServerReflectionRequest;
    use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;

    let mut client = ServerReflectionClient::new(sidecar_process::tcp_channel(sidecar.tcp).await?);
    let requests = tokio_stream_once(ServerReflectionRequest {
        host: String::new(),
        message_request: Some(message),
    });
    let mut request = tonic::Request::new(requests);
    if let Some(token) = token {
        request
            .metadata_mut()
            .insert("authorization", format!("Bearer {token}").parse()?);
    }
    let mut responses = client.server_reflection_info(request).await?.into_inner();
    let response = responses.message().await?.ok_or("no reflection response")?;
    response
        .message_response
        .ok_or_else(|| "empty reflection response".into())
}

async fn reflection_services(sidecar: &Sidecar, token: Option<&str>) -> TestResult<Vec<String>> {
    match reflect(sidecar, token, MessageRequest::ListServices(String::new())).await? {
        MessageResponse::ListServicesResponse(list) => {
            Ok(list.service.into_iter().map(|s| s.name).collect())
        }
        other => Err(format!("unexpected reflection response {other:?}").into()),
    }
}

fn tokio_stream_once<T: Send + 'static>(item: T) -> impl tokio_stream::Stream<Item = T> {
    tokio_stream::iter([item])
}

#[tokio::test]
async fn health_and_reflection_answer() -> TestResult {
    let sidecar = start_with_auth(&[]).await?;
    let services = reflection_services(&sidecar, Some(TOKEN)).await?;
    assert!(
        services.iter().any(|s| s == "reqstate.v1.RequestState"),
        "{services:?}"
    );
    assert!(
        services.iter().any(|s| s == "grpc.health.v1.Health"),
        "{services:?}"
    );

    // grpcurl's next step: the file that defines the service, to build requests.
    let described = reflect(
        &sidecar,
        Some(TOKEN),
        MessageRequest::FileContainingSymbol("reqstate.v1.RequestState".into()),
    )
    .await?;
    match described {
        MessageResponse::FileDescriptorResponse(files) => {
            use prost::Message as _;
            let file = files
                .file_descriptor_proto
                .first()
                .ok_or("no file descriptor")?;
            let file = prost_types::FileDescriptorProto::decode(file.as_slice())?;
            assert_eq!(file.package(), "reqstate.v1");
            let rpcs: Vec<&str> = file
                .service
                .iter()
                .flat_map(|s| s.method.iter().map(|m| m.name()))
                .collect();
            assert_eq!(
                rpcs,
                [
                    "Mint",
                    "Verify",
                    "MintBatch",
                    "VerifyBatch",
                    "Seal",
                    "Unseal",
                    "ListKeys"
                ]
            );
        }
        other => return Err(format!("unexpected reflection response {other:?}").into()),
    }

    let mut health = tonic_health::pb::health_client::HealthClient::new(
        sidecar_process::unix_channel(&sidecar.unix).await?,
    );
    for service in ["", "reqstate.v1.RequestState"] {
        let status = health
            .check(tonic_health::pb::HealthCheckRequest {
                service: service.into(),
            })
            .await?
            .into_inner();
        assert_eq!(
            status.status,
            tonic_health::pb::health_check_response::ServingStatus::Serving as i32,
            "service {service:?}"
        );
    }
    Ok(())
}

#[tokio::test]
async fn oversized_requests_get_a_clear_error_and_the_server_keeps_serving() -> TestResult {
    let sidecar = start_with_auth(&[
        "--max-request-bytes",
        "4096",
        "--max-batch-items",
        "3",
        "--max-token-len",
        "512",
    ])
    .await?;
    let mut client = sidecar.tcp_client().await?;

    let too_big = client
        .seal(with_bearer(
            pb::SealRequest {
                payload: vec![7; 8192],
                aad: Vec::new(),
            },
            TOKEN,
        )?)
        .await
        .err()
        .ok_or("an 8 KiB request passed a 4 KiB limit")?;
    assert_eq!(too_big.code(), Code::OutOfRange, "{too_big:?}");
    assert!(
        too_big.message().contains("too large"),
        "{}",
        too_big.message()
    );

    let too_many = client
        .verify_batch(with_bearer(
            pb::VerifyBatchRequest {
                items: vec![verify_request("x", "t", None); 4],
            },
            TOKEN,
        )?)
        .await
        .err()
        .ok_or("a batch over the item limit was accepted")?;
    assert_eq!(too_many.code(), Code::InvalidArgument);
    assert!(
        too_many.message().contains("limit is 3"),
        "{}",
        too_many.message()
    );

    // A token over --max-token-len is refused before decoding, in-band.
    let long_token = client
        .verify(with_bearer(
            verify_request(&"A".repeat(600), "t", None),
            TOKEN,
        )?)
        .await?
        .into_inner();
    assert_eq!(long_token.reason, pb::Reason::TooLarge as i32);
    // And a state that would make a token over the limit is refused at mint.
    let long_state = client
        .mint(with_bearer(
            mint_json("t", "s", &format!("\"{}\"", "x".repeat(1000))),
            TOKEN,
        )?)
        .await
        .err()
        .ok_or("minted a token over the length limit")?;
    assert_eq!(long_state.code(), Code::InvalidArgument);

    // Still serving, on the same connection and on a new one.
    client
        .mint(with_bearer(mint_json("t", "s", "1"), TOKEN)?)
        .await?;
    sidecar
        .unix_client()
        .await?
        .mint(with_bearer(mint_json("t", "s", "1"), TOKEN)?)
        .await?;
    Ok(())
}

#[tokio::test]
async fn peer_uid_outside_the_allow_list_is_permission_denied() -> TestResult {
    let me = nix::unistd::getuid().as_raw();
    let other = me.wrapping_add(4242);
    let denied = start_with_auth(&["--allow-uid", &other.to_string()]).await?;
    let status = denied
        .unix_client()
        .await?
        .list_keys(with_bearer(pb::ListKeysRequest {}, TOKEN)?)
        .await
        .err()
        .ok_or("a uid outside the allow-list was served")?;
    assert_eq!(status.code(), Code::PermissionDenied);
    drop(denied);

    let allowed = start_with_auth(&["--allow-uid", &me.to_string()]).await?;
    allowed
        .unix_client()
        .await?
        .list_keys(with_bearer(pb::ListKeysRequest {}, TOKEN)?)
        .await?;
    Ok(())
}

#[tokio::test]
async fn metrics_count_calls_by_rpc_and_reason_and_show_the_keyring() -> TestResult {
    let sidecar = start_with_auth(&[]).await?;
    let mut client = sidecar.tcp_client().await?;
    let minted = client
        .mint(with_bearer(mint_json("t", "s", "1"), TOKEN)?)
        .await?
        .into_inner();
    client
        .verify(with_bearer(
            verify_request(&minted.token, "other", None),
            TOKEN,
        )?)
        .await?;
    let text = sidecar.metrics_text().await?;
    for expected in [
        "reqstate_calls_total{result=\"ok\",rpc=\"Mint\"} 1",
        "reqstate_calls_total{result=\"authentication_failed\",rpc=\"Verify\"} 1",
        "reqstate_call_duration_seconds_count{rpc=\"Mint\"} 1",
        "reqstate_keyring_generation 1",
        "reqstate_keyring_key{algorithm=\"xchacha20-poly1305\",key_id=\"1\",status=\"primary\"} 1",
        "reqstate_keyring_key{algorithm=\"xchacha20-poly1305\",key_id=\"2\",status=\"active\"} 1",
        "reqstate_keyring_reload_failures_total 0",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in\n{text}");
    }
    // Token contents never reach the logs.
    assert!(!sidecar.log().contains(&minted.token));
    Ok(())
}

#[tokio::test]
async fn sigterm_reports_not_serving_drains_and_exits_zero() -> TestResult {
    let mut sidecar = start_with_auth(&["--drain-timeout-ms", "3000"]).await?;
    let mut client = sidecar.unix_client().await?;
    client
        .mint(with_bearer(mint_json("t", "s", "1"), TOKEN)?)
        .await?;
    let mut health = tonic_health::pb::health_client::HealthClient::new(
        sidecar_process::tcp_channel(sidecar.tcp).await?,
    );
    let mut watch = health
        .watch(tonic_health::pb::HealthCheckRequest {
            service: String::new(),
        })
        .await?
        .into_inner();
    let first = watch.message().await?.ok_or("no first health status")?;
    assert_eq!(
        first.status,
        tonic_health::pb::health_check_response::ServingStatus::Serving as i32
    );

    sidecar.signal(nix::sys::signal::Signal::SIGTERM)?;
    let next = tokio::time::timeout(Duration::from_secs(5), watch.message())
        .await?
        .map_err(|e| format!("watch failed: {e}"))?
        .ok_or("watch ended without NOT_SERVING")?;
    assert_eq!(
        next.status,
        tonic_health::pb::health_check_response::ServingStatus::NotServing as i32
    );
    drop(watch);
    drop(health);
    drop(client);

    let status = sidecar.wait_exit(Duration::from_secs(10)).await?;
    assert_eq!(status.code(), Some(0), "{}", sidecar.log());
    assert!(sidecar.log().contains("SIGTERM: draining"));
    assert!(!sidecar.unix.exists(), "the socket file was left behind");
    Ok(())
}

#[tokio::test]
async fn per_call_deadline_stops_a_long_batch() -> TestResult {
    let sidecar = start_with_auth(&["--call-timeout-ms", "1", "--max-batch-items", "5000"]).await?;
    // Minted locally with the same keyring: no call races the 1 ms deadline.
    let keyring = sidecar.keyring.display().to_string();
    let out = sidecar_process::run_cli(&[
        "mint",
        "--keyring",
        &keyring,
        "--tool",
        "t",
        "--step",
        "s",
        "--context",
        "user-42",
    ])?;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let minted: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    let token = minted["token"].as_str().ok_or("no token")?;

    // 5000 full verifications take far longer than 1 ms. (Each is valid; the
    // batch would succeed without the deadline.)
    let status = sidecar
        .tcp_client()
        .await?
        .verify_batch(with_bearer(
            pb::VerifyBatchRequest {
                items: vec![verify_request(token, "t", None); 5000],
            },
            TOKEN,
        )?)
        .await
        .err()
        .ok_or("a batch far over the deadline completed")?;
    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    assert!(status.message().contains("--call-timeout-ms"), "{status:?}");
    assert_eq!(
        status
            .metadata()
            .get("reqstate-reason")
            .and_then(|v| v.to_str().ok()),
        Some("deadline_exceeded"),
        "{status:?}"
    );
    Ok(())
}
