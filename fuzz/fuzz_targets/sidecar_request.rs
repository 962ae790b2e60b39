//! Fuzz target `sidecar_request`: arbitrary bytes decoded with
//! `prost::Message::decode` as each request of `reqstate.v1.RequestState`
//! (MintRequest, VerifyRequest, MintBatchRequest, VerifyBatchRequest,
//! SealRequest, UnsealRequest); each message that decodes goes to the
//! in-process `RequestStateService` handler, on a current-thread tokio
//! runtime built once. The keyring is that of tests/vectors/v1.json and the
//! clock is fixed at its `now`, so the vectors' tokens (the seeds) verify.
//!
//! Asserts: nothing panics; every handler returns a response or a
//! `tonic::Status` (never hangs); a verify/unseal response is `valid` exactly
//! when it carries no reason and no detail; a batch answers item for item;
//! a minted token verifies (same step, key and state, JSON up to float
//! precision) and a sealed payload unseals to the same bytes.
#![no_main]

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use prost::Message;
use reqstate::Policy;
use reqstate_fuzz::{codec, json_close, vector_keyring};
use reqstate_proto::v1 as pb;
use reqstate_proto::v1::request_state_server::RequestState;
use reqstate_sidecar::config::Limits;
use reqstate_sidecar::metrics::Metrics;
use reqstate_sidecar::live_keyring;
use reqstate_spent_store::{SpentStore, StoreConfig};
use reqstate_sidecar::service::RequestStateService;
use tonic::Request;

/// The service under test and the runtime its handlers run on.
struct Fixture {
    service: RequestStateService,
    runtime: tokio::runtime::Runtime,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let shared = live_keyring::shared(codec(vector_keyring(), Policy::new()));
        // The sidecar's defaults (crates/reqstate-sidecar/src/config.rs).
        let limits = Limits {
            default_ttl: Duration::from_secs(600),
            max_request_bytes: 4 * 1024 * 1024,
            max_batch_items: 1000,
            call_timeout: Duration::from_millis(5000),
            max_concurrent_calls: 1024,
            max_health_calls: reqstate_sidecar::call_gate::DEFAULT_MAX_HEALTH_CALLS,
        };
        let metrics = Arc::new(Metrics::new().expect("metrics register"));
        Fixture {
            // Single-use tokens are consumed into the in-process store.
            service: RequestStateService::new(
                shared,
                Arc::new(
                    SpentStore::new(
                        &StoreConfig::Memory { capacity: 1 << 16 },
                        metrics.clone(),
                    )
                    .expect("memory replay store"),
                ),
                limits,
                metrics,
            ),
            runtime: tokio::runtime::Builder::new_current_thread()
                .build()
                .expect("a current-thread runtime"),
        }
    })
}

fn check_verify_response(r: &pb::VerifyResponse) {
    if r.valid {
        assert_eq!(r.reason, pb::Reason::Unspecified as i32);
        assert!(r.detail.is_empty());
        assert!(!r.step.is_empty());
        assert!(r.state_value.is_some());
    } else {
        assert_ne!(r.reason, pb::Reason::Unspecified as i32, "invalid without a reason: {r:?}");
        assert!(!r.detail.is_empty());
        assert!(r.state_value.is_none());
    }
}

/// A token the service minted for `request` verifies with the same step,
/// key and state.
fn check_minted(f: &Fixture, request: &pb::MintRequest, minted: &pb::MintResponse) {
    assert_eq!(minted.key_id, 2, "minted under a key that is not the primary");
    assert!(minted.expires_at > minted.issued_at);
    let verify = pb::VerifyRequest {
        token: minted.token.clone(),
        tool: request.tool.clone(),
        expected_step: Some(request.step.clone()),
        context: request.context.clone(),
        // A single-use token is verified by consuming it.
        consume: request.single_use,
    };
    let response = f
        .runtime
        .block_on(f.service.verify(Request::new(verify.clone())))
        .unwrap_or_else(|s| panic!("verifying a minted token: {s:?}"))
        .into_inner();
    assert!(response.valid, "a minted token does not verify: {response:?}");
    if request.single_use {
        let again = f
            .runtime
            .block_on(f.service.verify(Request::new(verify)))
            .unwrap_or_else(|s| panic!("consuming a minted token twice: {s:?}"))
            .into_inner();
        assert_eq!(again.reason, pb::Reason::Replayed as i32, "consumed twice: {again:?}");
    }
    assert_eq!(response.step, request.step);
    assert_eq!((response.issued_at, response.expires_at), (minted.issued_at, minted.expires_at));
    use pb::mint_request::StateValue as In;
    use pb::verify_response::StateValue as Out;
    match (&request.state_value, &response.state_value) {
        (None, Some(Out::State(b))) => assert!(b.is_empty()),
        (Some(In::State(a)), Some(Out::State(b))) => assert_eq!(a, b),
        (Some(In::StateJson(a)), Some(Out::StateJson(b))) => {
            let a: serde_json::Value = serde_json::from_str(a).expect("minted, so it parsed");
            let b: serde_json::Value = serde_json::from_str(b).expect("the sidecar returns JSON");
            assert!(json_close(&a, &b), "JSON state changed: {a} -> {b}");
        }
        (i, o) => panic!("state changed form: {i:?} -> {o:?}"),
    }
}

fuzz_target!(|data: &[u8]| {
    let f = fixture();
    let run = &f.runtime;
    let service = &f.service;

    if let Ok(request) = pb::MintRequest::decode(data) {
        if let Ok(minted) = run.block_on(service.mint(Request::new(request.clone()))) {
            check_minted(f, &request, minted.get_ref());
        }
    }
    if let Ok(request) = pb::VerifyRequest::decode(data) {
        if let Ok(response) = run.block_on(service.verify(Request::new(request))) {
            check_verify_response(response.get_ref());
        }
    }
    if let Ok(request) = pb::MintBatchRequest::decode(data) {
        let items = request.items.clone();
        if let Ok(response) = run.block_on(service.mint_batch(Request::new(request))) {
            let results = &response.get_ref().results;
            assert_eq!(results.len(), items.len());
            for (item, result) in items.iter().zip(results).take(8) {
                match &result.outcome {
                    Some(pb::mint_result::Outcome::Minted(m)) => check_minted(f, item, m),
                    Some(pb::mint_result::Outcome::Error(e)) => {
                        assert_ne!(e.reason, pb::Reason::Unspecified as i32);
                    }
                    None => panic!("a batch item without an outcome"),
                }
            }
        }
    }
    if let Ok(request) = pb::VerifyBatchRequest::decode(data) {
        let n = request.items.len();
        if let Ok(response) = run.block_on(service.verify_batch(Request::new(request))) {
            assert_eq!(response.get_ref().results.len(), n);
            response.get_ref().results.iter().for_each(check_verify_response);
        }
    }
    if let Ok(request) = pb::SealRequest::decode(data) {
        if let Ok(sealed) = run.block_on(service.seal(Request::new(request.clone()))) {
            let unseal = pb::UnsealRequest {
                token: sealed.get_ref().token.clone(),
                aad: request.aad.clone(),
            };
            let opened = run
                .block_on(service.unseal(Request::new(unseal)))
                .unwrap_or_else(|s| panic!("unsealing a sealed payload: {s:?}"))
                .into_inner();
            assert!(opened.valid, "a sealed payload does not unseal: {opened:?}");
            assert_eq!(opened.payload, request.payload);
            assert_eq!(opened.key_id, sealed.get_ref().key_id);
        }
    }
    if let Ok(request) = pb::UnsealRequest::decode(data) {
        if let Ok(response) = run.block_on(service.unseal(Request::new(request))) {
            let r = response.get_ref();
            assert_eq!(r.valid, r.reason == pb::Reason::Unspecified as i32);
            assert_eq!(r.valid, r.detail.is_empty());
        }
    }
});
