//! The operations the gate counts: each is a setup (not counted: it is the
//! same for every run) and a step, run `n` times. The counts per operation
//! are differences between two runs, so the setup, the process start and
//! valgrind's own start cancel out.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use prost::Message as _;
use reqstate::{
    Algorithm, Arguments, Binding, BufferedRandom, Call, Codec, KeyId, KeySpec, KeyStatus, Keyring,
    Policy, Secret, SystemClock, call_context,
};
use reqstate_proto::v1::request_state_server::RequestStateServer;
use reqstate_proto::v1::{MintRequest, VerifyRequest, mint_request::StateValue};
use reqstate_sidecar::call_gate::CallGateLayer;
use reqstate_sidecar::config::Limits;
use reqstate_sidecar::metrics::Metrics;
use reqstate_sidecar::service::RequestStateService;
use reqstate_spent_store::SpentStore;
use reqstate_spent_store::StoreConfig;
use ring::{aead, hmac};
use tower::{Layer as _, Service, ServiceExt as _};

use crate::reference::{Counter, Reference, authenticated_bytes, reference};

/// One operation of the gate.
pub(crate) struct Operation {
    /// Its name in the table and in budgets.toml.
    pub(crate) name: &'static str,
    /// What it measures, for the table's legend.
    pub(crate) about: &'static str,
    /// The floor its ratio is taken against, if any.
    pub(crate) floor: Option<&'static str>,
    run: fn(u64) -> Result<(), String>,
}

impl Operation {
    /// Sets the operation up, then runs its step `n` times.
    pub(crate) fn run(&self, n: u64) -> Result<(), String> {
        (self.run)(n)
    }
}

/// Every operation, floors first.
pub(crate) const OPERATIONS: &[Operation] = &[
    Operation {
        name: "floor/hmac-sha256",
        about: "bare HMAC-SHA256 as the crate computes it (RustCrypto hmac/sha2, keyed state set up once, cloned per call) over the bytes an HMAC token authenticates",
        floor: None,
        run: floor_hmac,
    },
    Operation {
        name: "floor/hmac-sha256-ring",
        about: "the same HMAC with ring (key set up once), for comparison",
        floor: None,
        run: floor_hmac_ring,
    },
    Operation {
        name: "floor/xchacha20-poly1305",
        about: "the bare XChaCha20-Poly1305 construction: HChaCha20 subkey, ring key setup, seal",
        floor: None,
        run: floor_xchacha,
    },
    Operation {
        name: "floor/nonce-hedge",
        about: "the nonce hedge alone (FORMAT.md 4.2): HMAC-SHA256 (RustCrypto, keyed state cloned) over r, A and body",
        floor: None,
        run: floor_hedge,
    },
    Operation {
        name: "reqstate/hmac-sha256/mint",
        about: "Codec::mint of the reference claims, binding built per call",
        floor: Some("floor/hmac-sha256"),
        run: mint_hmac,
    },
    Operation {
        name: "reqstate/hmac-sha256/verify",
        about: "Codec::verify of that token, the state decoded",
        floor: Some("floor/hmac-sha256"),
        run: verify_hmac,
    },
    Operation {
        name: "reqstate/xchacha20-poly1305/mint",
        about: "Codec::mint, with the nonce hedge and a buffered random draw",
        floor: Some("floor/xchacha20-poly1305"),
        run: mint_xchacha,
    },
    Operation {
        name: "reqstate/xchacha20-poly1305/verify",
        about: "Codec::verify of that token, the state decoded",
        floor: Some("floor/xchacha20-poly1305"),
        run: verify_xchacha,
    },
    Operation {
        name: "reqstate/call-context",
        about: "call_context of a tools/call's JSON arguments (RFC 8785, two SHA-256)",
        floor: None,
        run: context,
    },
    Operation {
        name: "sidecar/health-check",
        about: "grpc.health.v1.Health/Check through the call gate and routes, in process",
        floor: None,
        run: sidecar_health,
    },
    Operation {
        name: "sidecar/verify",
        about: "reqstate.v1 Verify (XChaCha20-Poly1305) through the call gate and routes, in process",
        floor: Some("sidecar/health-check"),
        run: sidecar_verify,
    },
    Operation {
        name: "sidecar/mint",
        about: "reqstate.v1 Mint (XChaCha20-Poly1305, state bytes) through the call gate and routes",
        floor: Some("sidecar/health-check"),
        run: sidecar_mint,
    },
];

/// A fixed secret: the counts must not depend on a random key.
const SECRET: [u8; 32] = [7; 32];

fn codec(algorithm: Algorithm) -> Codec {
    let keyring = Keyring::new([KeySpec::new(
        KeyId::new(1),
        algorithm,
        KeyStatus::Primary,
        Secret::new(SECRET.to_vec()),
    )])
    .expect("keyring");
    Codec::with_parts(keyring, Policy::new(), SystemClock, BufferedRandom)
}

fn mint(codec: &Codec, r: &Reference) -> Result<String, String> {
    let binding = Binding::with_context_bytes(&r.tool, &r.context).map_err(|e| e.to_string())?;
    codec
        .mint(binding, &r.step, &r.state, r.ttl)
        .map(|m| m.token)
        .map_err(|e| format!("mint: {e}"))
}

/// (associated data, body) of a fresh token: the bytes a floor covers.
fn floor_bytes(r: &Reference, algorithm: Algorithm) -> Result<(Vec<u8>, Vec<u8>), String> {
    Ok(authenticated_bytes(
        r,
        algorithm,
        &mint(&codec(algorithm), r)?,
    ))
}

fn hmac_message(r: &Reference) -> Result<Vec<u8>, String> {
    let (mut message, body) = floor_bytes(r, Algorithm::HmacSha256)?;
    message.extend_from_slice(&body);
    Ok(message)
}

fn floor_hmac_ring(n: u64) -> Result<(), String> {
    let message = hmac_message(&reference())?;
    let key = hmac::Key::new(hmac::HMAC_SHA256, &SECRET);
    for _ in 0..n {
        black_box(hmac::sign(&key, black_box(&message)));
    }
    Ok(())
}

fn floor_hmac(n: u64) -> Result<(), String> {
    rustcrypto_hmac_loop(&hmac_message(&reference())?, n)
}

/// `n` HMAC-SHA256 of `message` under a keyed state set up once, as the
/// crate computes its token tags and its nonce hedge.
fn rustcrypto_hmac_loop(message: &[u8], n: u64) -> Result<(), String> {
    use ::hmac::{KeyInit as _, Mac as _};
    let key = ::hmac::Hmac::<sha2::Sha256>::new_from_slice(&SECRET).map_err(|e| e.to_string())?;
    for _ in 0..n {
        let mut mac = key.clone();
        mac.update(black_box(message));
        black_box(mac.finalize().into_bytes());
    }
    Ok(())
}

fn floor_xchacha(n: u64) -> Result<(), String> {
    let (ad, body) = floor_bytes(&reference(), Algorithm::XChaCha20Poly1305)?;
    let k = chacha20::Key::from(SECRET);
    for _ in 0..n {
        let sub: [u8; 32] =
            chacha20::hchacha::<chacha20::R20>(&k, &black_box([9u8; 16]).into()).into();
        let key = aead::LessSafeKey::new(
            aead::UnboundKey::new(&aead::CHACHA20_POLY1305, &sub).map_err(|e| e.to_string())?,
        );
        let mut buf = body.clone();
        let tag = key
            .seal_in_place_separate_tag(
                aead::Nonce::assume_unique_for_key([0; 12]),
                aead::Aad::from(black_box(&ad)),
                &mut buf,
            )
            .map_err(|e| e.to_string())?;
        let _ = black_box((buf, tag));
    }
    Ok(())
}

fn floor_hedge(n: u64) -> Result<(), String> {
    let (ad, body) = floor_bytes(&reference(), Algorithm::XChaCha20Poly1305)?;
    let mut message = vec![3u8; 24];
    message.extend_from_slice(&ad);
    message.extend_from_slice(&body);
    rustcrypto_hmac_loop(&message, n)
}

fn mint_loop(algorithm: Algorithm, n: u64) -> Result<(), String> {
    let r = reference();
    let codec = codec(algorithm);
    for _ in 0..n {
        black_box(mint(&codec, black_box(&r))?);
    }
    Ok(())
}

fn verify_loop(algorithm: Algorithm, n: u64) -> Result<(), String> {
    let r = reference();
    let codec = codec(algorithm);
    let token = mint(&codec, &r)?;
    for _ in 0..n {
        let binding =
            Binding::with_context_bytes(&r.tool, &r.context).map_err(|e| e.to_string())?;
        let verified = codec
            .verify::<Counter>(black_box(&token), binding.step(&r.step))
            .map_err(|e| format!("verify: {e}"))?;
        black_box(verified);
    }
    Ok(())
}

fn mint_hmac(n: u64) -> Result<(), String> {
    mint_loop(Algorithm::HmacSha256, n)
}

fn verify_hmac(n: u64) -> Result<(), String> {
    verify_loop(Algorithm::HmacSha256, n)
}

fn mint_xchacha(n: u64) -> Result<(), String> {
    mint_loop(Algorithm::XChaCha20Poly1305, n)
}

fn verify_xchacha(n: u64) -> Result<(), String> {
    verify_loop(Algorithm::XChaCha20Poly1305, n)
}

fn context(n: u64) -> Result<(), String> {
    let arguments = r#"{"name": "increase-counter", "arguments": {"amount": 5, "note": "weekly top-up", "tags": ["a", "b"]}}"#;
    for _ in 0..n {
        let context = call_context(&Call {
            principal: "user-42",
            audience: "counter-server",
            method: "tools/call",
            arguments: Arguments::Json(black_box(arguments)),
        })
        .map_err(|e| e.to_string())?;
        black_box(context);
    }
    Ok(())
}

/// The sidecar's stack as `serve` assembles it for one listener (the call
/// gate in front of the health service and the reqstate service; no bearer
/// token, no uid list), called in process with a framed gRPC request.
struct Sidecar {
    runtime: tokio::runtime::Runtime,
    stack: tonic::service::Routes,
    gate: CallGateLayer,
}

impl Sidecar {
    fn new() -> Result<Self, String> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        let metrics = Arc::new(Metrics::new().map_err(|e| e.to_string())?);
        let limits = Limits {
            default_ttl: Duration::from_secs(600),
            max_request_bytes: 64 * 1024,
            max_batch_items: 1000,
            call_timeout: Duration::from_secs(5),
            max_concurrent_calls: 1024,
            max_health_calls: 64,
        };
        let replay = SpentStore::new(&StoreConfig::Memory { capacity: 1024 }, metrics.clone())
            .map_err(|e| e.to_string())?;
        let shared = reqstate_sidecar::live_keyring::shared(codec(Algorithm::XChaCha20Poly1305));
        let service = RequestStateServer::new(RequestStateService::new(
            shared,
            Arc::new(replay),
            limits.clone(),
            metrics.clone(),
        ))
        .max_decoding_message_size(limits.max_request_bytes);
        let (health, health_service) = tonic_health::server::health_reporter();
        runtime.block_on(health.set_serving::<RequestStateServer<RequestStateService>>());
        let stack = tonic::service::Routes::new(health_service).add_service(service);
        let gate = CallGateLayer::new(
            None,
            Vec::new(),
            limits.max_concurrent_calls,
            limits.max_health_calls,
            limits.call_timeout,
            metrics,
        );
        Ok(Sidecar {
            runtime,
            stack,
            gate,
        })
    }

    /// Calls `path` `n` times with `message`; checks every answer is OK and
    /// gives the last answer's message bytes.
    fn call(&self, path: &str, message: &[u8], n: u64) -> Result<Bytes, String> {
        let mut framed = Vec::with_capacity(5 + message.len());
        framed.push(0);
        framed.extend_from_slice(&(message.len() as u32).to_be_bytes());
        framed.extend_from_slice(message);
        let framed = Bytes::from(framed);
        let mut service = self.gate.layer(self.stack.clone());
        self.runtime.block_on(async {
            let mut last = Bytes::new();
            for _ in 0..n {
                let request = http::Request::builder()
                    .method(http::Method::POST)
                    .uri(format!("http://localhost{path}"))
                    .header("content-type", "application/grpc")
                    .header("te", "trailers")
                    .body(tonic::body::Body::new(Full::new(framed.clone())))
                    .map_err(|e| e.to_string())?;
                let ready = service.ready().await.map_err(|e| format!("{e:?}"))?;
                let response = ready.call(request).await.map_err(|e| format!("{e:?}"))?;
                let collected = response
                    .into_body()
                    .collect()
                    .await
                    .map_err(|e| e.to_string())?;
                let status = collected
                    .trailers()
                    .and_then(|t| t.get("grpc-status"))
                    .map(|v| v.as_bytes().to_vec());
                if status.as_deref() != Some(b"0") {
                    return Err(format!(
                        "{path}: grpc-status {:?}",
                        status.map(|s| String::from_utf8_lossy(&s).into_owned())
                    ));
                }
                last = collected.to_bytes();
            }
            if last.len() < 5 {
                return Err(format!("{path}: no response message"));
            }
            Ok(last.slice(5..))
        })
    }
}

fn sidecar_health(n: u64) -> Result<(), String> {
    let sidecar = Sidecar::new()?;
    let request = tonic_health::pb::HealthCheckRequest {
        service: String::new(),
    };
    let answer = sidecar.call("/grpc.health.v1.Health/Check", &request.encode_to_vec(), n)?;
    let answer =
        tonic_health::pb::HealthCheckResponse::decode(answer).map_err(|e| e.to_string())?;
    if answer.status != 1 {
        return Err(format!("health status {}, not SERVING", answer.status));
    }
    Ok(())
}

fn mint_request(r: &Reference) -> Result<MintRequest, String> {
    let mut state = Vec::new();
    ciborium::into_writer(&r.state, &mut state).map_err(|e| e.to_string())?;
    Ok(MintRequest {
        tool: r.tool.clone(),
        step: r.step.clone(),
        state_value: Some(StateValue::State(state)),
        ttl_seconds: r.ttl.as_secs(),
        context: r.context.clone(),
        single_use: false,
    })
}

fn sidecar_mint(n: u64) -> Result<(), String> {
    let sidecar = Sidecar::new()?;
    let request = mint_request(&reference())?;
    let answer = sidecar.call(
        "/reqstate.v1.RequestState/Mint",
        &request.encode_to_vec(),
        n,
    )?;
    let answer = reqstate_proto::v1::MintResponse::decode(answer).map_err(|e| e.to_string())?;
    if answer.token.is_empty() {
        return Err("Mint gave no token".into());
    }
    Ok(())
}

fn sidecar_verify(n: u64) -> Result<(), String> {
    let sidecar = Sidecar::new()?;
    let r = reference();
    let minted = sidecar.call(
        "/reqstate.v1.RequestState/Mint",
        &mint_request(&r)?.encode_to_vec(),
        1,
    )?;
    let token = reqstate_proto::v1::MintResponse::decode(minted)
        .map_err(|e| e.to_string())?
        .token;
    let request = VerifyRequest {
        token,
        tool: r.tool.clone(),
        expected_step: Some(r.step.clone()),
        context: r.context.clone(),
        consume: false,
    };
    let answer = sidecar.call(
        "/reqstate.v1.RequestState/Verify",
        &request.encode_to_vec(),
        n,
    )?;
    let answer = reqstate_proto::v1::VerifyResponse::decode(answer).map_err(|e| e.to_string())?;
    if !answer.valid {
        return Err(format!("Verify refused the token: {}", answer.detail));
    }
    Ok(())
}
