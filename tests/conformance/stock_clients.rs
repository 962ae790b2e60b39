//! tonic as a user would take it, against the real binary: its own `unix:`
//! endpoint (no custom connector), every kind of call, and the rich error
//! model read with tonic-types. The grpcio (C core) and @grpc/grpc-js cases
//! are tests/stock_clients/ (scripts/test.sh runs them).
//!
//! Also here: the check that the vendored h2 patch (vendor/h2/PATCH.md) is
//! still in use and still needed.

use crate::sidecar_process;

use std::path::Path;

use reqstate_proto::v1 as pb;
use reqstate_proto::v1::request_state_client::RequestStateClient;
use sidecar_process::{Sidecar, SidecarOptions, TestResult, keyring_toml};
use tonic::transport::{Channel, Endpoint};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_reflection::pb::v1::ServerReflectionRequest;
use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;
use tonic_types::StatusExt as _;

async fn start() -> TestResult<Sidecar> {
    Sidecar::start(SidecarOptions::new(keyring_toml(&[(1, "primary")]))).await
}

/// tonic's own Unix-socket endpoint: `unix://PATH`, nothing else.
async fn tonic_unix_channel(path: &Path) -> TestResult<Channel> {
    Ok(Endpoint::try_from(format!("unix://{}", path.display()))?
        .connect()
        .await?)
}

fn mint_request(step: &str, json: &str) -> pb::MintRequest {
    pb::MintRequest {
        tool: "increase-counter".into(),
        step: step.into(),
        state_value: Some(pb::mint_request::StateValue::StateJson(json.into())),
        ttl_seconds: 60,
        context: b"ctx".to_vec(),
        single_use: false,
    }
}

fn verify_request(token: String, step: &str) -> pb::VerifyRequest {
    pb::VerifyRequest {
        token,
        tool: "increase-counter".into(),
        expected_step: Some(step.into()),
        context: b"ctx".to_vec(),
        consume: false,
    }
}

#[tokio::test]
async fn tonic_unix_endpoint_unary_batch_health_and_reflection() -> TestResult {
    let sidecar = start().await?;
    let channel = tonic_unix_channel(&sidecar.unix).await?;

    let mut client = RequestStateClient::new(channel.clone());
    let minted = client
        .mint(mint_request("confirm", r#"{"n":3}"#))
        .await?
        .into_inner();
    let verified = client
        .verify(verify_request(minted.token, "confirm"))
        .await?
        .into_inner();
    assert!(verified.valid, "{}", verified.detail);
    assert_eq!(
        verified.state_value,
        Some(pb::verify_response::StateValue::StateJson(
            r#"{"n":3}"#.into()
        ))
    );

    let batch = client
        .mint_batch(pb::MintBatchRequest {
            items: (0..5)
                .map(|i| mint_request(&format!("s{i}"), &i.to_string()))
                .collect(),
        })
        .await?
        .into_inner();
    let items = batch
        .results
        .into_iter()
        .enumerate()
        .map(|(i, result)| match result.outcome {
            Some(pb::mint_result::Outcome::Minted(m)) => {
                Ok(verify_request(m.token, &format!("s{i}")))
            }
            other => Err(format!("item {i} did not mint: {other:?}")),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let checked = client
        .verify_batch(pb::VerifyBatchRequest { items })
        .await?
        .into_inner();
    assert_eq!(checked.results.len(), 5);
    assert!(checked.results.iter().all(|r| r.valid));

    let health = HealthClient::new(channel.clone())
        .check(HealthCheckRequest {
            service: "reqstate.v1.RequestState".into(),
        })
        .await?
        .into_inner();
    assert_eq!(health.status(), ServingStatus::Serving);

    let mut reflection = ServerReflectionClient::new(channel);
    let mut answers = reflection
        .server_reflection_info(tokio_stream::iter([ServerReflectionRequest {
            host: String::new(),
            message_request: Some(MessageRequest::ListServices(String::new())),
        }]))
        .await?
        .into_inner();
    let answer = answers.message().await?.ok_or("no reflection answer")?;
    let Some(MessageResponse::ListServicesResponse(list)) = answer.message_response else {
        return Err("not a service list".into());
    };
    assert!(
        list.service
            .iter()
            .any(|s| s.name == "reqstate.v1.RequestState")
    );
    Ok(())
}

#[tokio::test]
async fn errors_carry_error_info_and_the_reason_trailer() -> TestResult {
    let sidecar = start().await?;
    let mut client = RequestStateClient::new(tonic_unix_channel(&sidecar.unix).await?);

    // A caller error (empty tool), a mint refusal (lifetime over the maximum)
    // and a gate refusal (batch over the item limit).
    let empty_tool = client
        .mint(pb::MintRequest {
            tool: String::new(),
            ..mint_request("s", "1")
        })
        .await
        .err()
        .ok_or("an empty tool was accepted")?;
    let too_long = client
        .mint(pb::MintRequest {
            ttl_seconds: 365 * 86_400,
            ..mint_request("s", "1")
        })
        .await
        .err()
        .ok_or("a year-long lifetime was accepted")?;
    let too_many = client
        .verify_batch(pb::VerifyBatchRequest {
            items: vec![verify_request("x".into(), "s"); 1001],
        })
        .await
        .err()
        .ok_or("1001 batch items were accepted")?;
    for (status, reason) in [
        (&empty_tool, "invalid_argument"),
        (&too_long, "lifetime_too_long"),
        (&too_many, "invalid_argument"),
    ] {
        assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
        let info = status
            .get_details_error_info()
            .ok_or_else(|| format!("no ErrorInfo in {status:?}"))?;
        assert_eq!(info.reason, reason.to_ascii_uppercase());
        assert_eq!(info.domain, "reqstate");
        assert_eq!(
            status
                .metadata()
                .get("reqstate-reason")
                .map(|v| v.to_str())
                .transpose()?,
            Some(reason)
        );
    }
    Ok(())
}

#[tokio::test]
async fn gate_refusals_carry_error_info() -> TestResult {
    let sidecar = Sidecar::start(
        SidecarOptions::new(keyring_toml(&[(1, "primary")])).auth_token("a-bearer-token"),
    )
    .await?;
    let refused = RequestStateClient::new(tonic_unix_channel(&sidecar.unix).await?)
        .mint(mint_request("s", "1"))
        .await
        .err()
        .ok_or("a call without the bearer token was accepted")?;
    assert_eq!(refused.code(), tonic::Code::Unauthenticated);
    let info = refused
        .get_details_error_info()
        .ok_or("no ErrorInfo on UNAUTHENTICATED")?;
    assert_eq!(
        (info.reason.as_str(), info.domain.as_str()),
        ("UNAUTHENTICATED", "reqstate")
    );
    Ok(())
}

/// The vendored h2 is the one built (Cargo.lock has no registry source for
/// it), and still needed: the `http` crate under upstream h2 still refuses the
/// authority gRPC's C core sends for a Unix socket. When this test fails on
/// the second assertion, upstream accepts such authorities: remove vendor/h2
/// and the `[patch.crates-io]` entry (vendor/h2/PATCH.md).
#[test]
fn vendored_h2_patch_is_in_use_and_still_needed() -> TestResult {
    let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    let lock = std::fs::read_to_string(root.join("Cargo.lock"))?;
    let entry = lock
        .split("[[package]]")
        .find(|p| p.contains("\nname = \"h2\"\n"))
        .ok_or("no h2 in Cargo.lock")?;
    assert!(
        !entry.contains("source = "),
        "h2 comes from a registry, not vendor/h2: the patch is not applied\n{entry}"
    );
    let vendored = std::fs::read_to_string(root.join("vendor/h2/Cargo.toml"))?;
    let version_line = vendored
        .lines()
        .find(|l| l.starts_with("version = "))
        .ok_or("vendor/h2/Cargo.toml has no version")?;
    assert!(
        entry.contains(version_line),
        "Cargo.lock's h2 is not vendor/h2's {version_line}"
    );

    let c_core_authority = "run%2Freqstate%2Freqstate.sock";
    assert!(
        http::uri::Authority::try_from(c_core_authority).is_err(),
        "http now accepts {c_core_authority:?} as an authority: upstream h2 may no longer \
         reset such streams; check, then drop vendor/h2 (vendor/h2/PATCH.md)"
    );
    Ok(())
}
