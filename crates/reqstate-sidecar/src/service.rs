//! The `reqstate.v1.RequestState` gRPC service: requests in, core codec calls, responses and in-band reasons out.

use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use reqstate::{Codec, Error, KeyStatus};
use reqstate_proto::v1 as pb;
use reqstate_proto::v1::request_state_server::RequestState;
use tonic::metadata::{MetadataMap, MetadataValue};
use tonic::{Request, Response, Status};

use crate::config::Limits;
use crate::metrics::Metrics;

/// The codec in service and which keyring generation it holds. Swapped whole
/// on reload, so a call sees either the old ring or the new one, never a mix.
#[derive(Debug)]
pub struct KeyringInService {
    /// The codec around the current keyring.
    pub codec: Codec,
    /// 1 for the keyring loaded at start, one more per successful reload.
    pub generation: u64,
}

/// The shared, atomically swappable keyring state.
pub type SharedKeyring = Arc<ArcSwap<KeyringInService>>;

/// The gRPC service.
#[derive(Debug, Clone)]
pub struct RequestStateService {
    keyring: SharedKeyring,
    limits: Limits,
    metrics: Arc<Metrics>,
}

/// Name of the trailer that carries the `Reason` of a failed Mint or Seal.
pub const REASON_METADATA_KEY: &str = "reqstate-reason";

impl RequestStateService {
    /// A service over the shared keyring.
    pub fn new(keyring: SharedKeyring, limits: Limits, metrics: Arc<Metrics>) -> Self {
        RequestStateService {
            keyring,
            limits,
            metrics,
        }
    }

    fn finish<T>(
        &self,
        rpc: &'static str,
        started: Instant,
        result: &'static str,
        response: Result<T, Status>,
    ) -> Result<Response<T>, Status> {
        self.metrics.observe_call(rpc, result, started.elapsed());
        tracing::debug!(rpc, result, "call");
        response.map(Response::new)
    }

    fn check_batch_len(&self, len: usize) -> Result<(), Status> {
        if len > self.limits.max_batch_items {
            return Err(Status::invalid_argument(format!(
                "batch has {len} items; the limit is {} (--max-batch-items)",
                self.limits.max_batch_items
            )));
        }
        Ok(())
    }
}

/// The wire `Reason` of a core error.
pub fn reason_of(error: &Error) -> pb::Reason {
    use pb::Reason;
    match error {
        Error::TooLarge { .. } => Reason::TooLarge,
        Error::Malformed(_) => Reason::Malformed,
        Error::UnsupportedVersion(_) => Reason::UnsupportedVersion,
        Error::UnsupportedAlgorithm(_) => Reason::UnsupportedAlgorithm,
        Error::WrongKind { .. } => Reason::WrongKind,
        Error::UnknownKey(_) => Reason::UnknownKey,
        Error::RetiredKey(_) => Reason::RetiredKey,
        Error::AlgorithmMismatch { .. } => Reason::AlgorithmMismatch,
        Error::AuthenticationFailed => Reason::AuthenticationFailed,
        Error::Expired { .. } => Reason::Expired,
        Error::NotYetValid { .. } => Reason::NotYetValid,
        Error::WrongStep { .. } => Reason::WrongStep,
        Error::LifetimeTooLong { .. } => Reason::LifetimeTooLong,
        Error::StateEncoding(_) => Reason::StateEncoding,
        Error::StateDecoding(_) => Reason::StateDecoding,
        Error::InvalidArgument(_) => Reason::InvalidArgument,
        Error::RandomnessUnavailable => Reason::RandomnessUnavailable,
        Error::InvalidKeyring(_) => Reason::InvalidKeyring,
        // The core's error is non_exhaustive: a variant added there without a
        // wire value yet is reported as a malformed-token failure would be,
        // never as success.
        _ => Reason::Unspecified,
    }
}

/// The RPC error for a failed Mint or Seal: the caller asked for something
/// out of range, unless randomness failed.
fn mint_error_status(error: &Error) -> Status {
    let code = match error {
        Error::RandomnessUnavailable => tonic::Code::Unavailable,
        _ => tonic::Code::InvalidArgument,
    };
    let mut metadata = MetadataMap::new();
    metadata.insert(
        REASON_METADATA_KEY,
        MetadataValue::from_static(error.reason()),
    );
    Status::with_metadata(code, error.to_string(), metadata)
}

/// The state a Mint request carries, as the CBOR value to store.
fn state_to_cbor(state: Option<pb::mint_request::StateValue>) -> Result<ciborium::Value, Error> {
    match state {
        None => Ok(ciborium::Value::Bytes(Vec::new())),
        Some(pb::mint_request::StateValue::State(bytes)) => Ok(ciborium::Value::Bytes(bytes)),
        Some(pb::mint_request::StateValue::StateJson(json)) => serde_json::from_str(&json)
            .map_err(|_| Error::InvalidArgument("state_json is not valid JSON")),
    }
}

/// A verified CBOR state in the form it was minted from: bytes stay bytes,
/// anything else was JSON and goes back as JSON text.
fn state_from_cbor(value: ciborium::Value) -> Result<pb::verify_response::StateValue, Error> {
    match value {
        ciborium::Value::Bytes(bytes) => Ok(pb::verify_response::StateValue::State(bytes)),
        other => serde_json::to_string(&other)
            .map(pb::verify_response::StateValue::StateJson)
            .map_err(|_| Error::StateDecoding("the state has no JSON form".into())),
    }
}

/// Batch items handled between two yields to the runtime.
const BATCH_CHUNK: usize = 64;

/// Yields before every [`BATCH_CHUNK`]th item but the first, so that a large
/// batch shares the workers with other calls and the per-call deadline can
/// stop it between chunks (a future that never yields cannot be timed out).
async fn yield_between_chunks(index: usize) {
    if index > 0 && index.is_multiple_of(BATCH_CHUNK) {
        tokio::task::yield_now().await;
    }
}

fn mint_one(
    codec: &Codec,
    request: pb::MintRequest,
    default_ttl: Duration,
) -> Result<pb::MintResponse, Error> {
    let state = state_to_cbor(request.state_value)?;
    let ttl = match request.ttl_seconds {
        0 => default_ttl,
        secs => Duration::from_secs(secs),
    };
    let minted =
        codec.mint_detailed(&request.tool, &request.step, &state, ttl, &request.context)?;
    Ok(pb::MintResponse {
        token: minted.token,
        key_id: minted.key_id.get(),
        expires_at: minted.expires_at,
        issued_at: minted.issued_at,
    })
}

fn verify_one(codec: &Codec, request: &pb::VerifyRequest) -> Result<pb::VerifyResponse, Error> {
    let verified = match &request.expected_step {
        Some(step) => codec.verify_step::<ciborium::Value>(
            &request.token,
            &request.tool,
            step,
            &request.context,
        )?,
        None => codec.verify::<ciborium::Value>(&request.token, &request.tool, &request.context)?,
    };
    Ok(pb::VerifyResponse {
        valid: true,
        reason: pb::Reason::Unspecified.into(),
        step: verified.step,
        state_value: Some(state_from_cbor(verified.state)?),
        key_id: verified.key_id.get(),
        issued_at: verified.issued_at,
        expires_at: verified.expires_at,
        detail: String::new(),
    })
}

fn invalid_verify_response(error: &Error) -> pb::VerifyResponse {
    pb::VerifyResponse {
        valid: false,
        reason: reason_of(error).into(),
        detail: error.to_string(),
        ..Default::default()
    }
}

fn key_info(key: &reqstate::Key) -> pb::KeyInfo {
    pb::KeyInfo {
        id: key.id().get(),
        algorithm: match key.algorithm() {
            reqstate::Algorithm::HmacSha256 => pb::Algorithm::HmacSha256,
            reqstate::Algorithm::XChaCha20Poly1305 => pb::Algorithm::Xchacha20Poly1305,
            _ => pb::Algorithm::Unspecified,
        }
        .into(),
        status: match key.status() {
            KeyStatus::Primary => pb::KeyStatus::Primary,
            KeyStatus::Active => pb::KeyStatus::Active,
            KeyStatus::Retired => pb::KeyStatus::Retired,
        }
        .into(),
        created_at: key.created_at(),
    }
}

#[tonic::async_trait]
impl RequestState for RequestStateService {
    async fn mint(
        &self,
        request: Request<pb::MintRequest>,
    ) -> Result<Response<pb::MintResponse>, Status> {
        let started = Instant::now();
        let keyring = self.keyring.load();
        match mint_one(
            &keyring.codec,
            request.into_inner(),
            self.limits.default_ttl,
        ) {
            Ok(minted) => self.finish("Mint", started, "ok", Ok(minted)),
            Err(e) => self.finish("Mint", started, e.reason(), Err(mint_error_status(&e))),
        }
    }

    async fn verify(
        &self,
        request: Request<pb::VerifyRequest>,
    ) -> Result<Response<pb::VerifyResponse>, Status> {
        let started = Instant::now();
        let keyring = self.keyring.load();
        match verify_one(&keyring.codec, request.get_ref()) {
            Ok(verified) => self.finish("Verify", started, "ok", Ok(verified)),
            Err(e @ Error::InvalidArgument(_)) => self.finish(
                "Verify",
                started,
                e.reason(),
                Err(Status::invalid_argument(e.to_string())),
            ),
            Err(e) => self.finish(
                "Verify",
                started,
                e.reason(),
                Ok(invalid_verify_response(&e)),
            ),
        }
    }

    async fn mint_batch(
        &self,
        request: Request<pb::MintBatchRequest>,
    ) -> Result<Response<pb::MintBatchResponse>, Status> {
        let started = Instant::now();
        let items = request.into_inner().items;
        if let Err(status) = self.check_batch_len(items.len()) {
            return self.finish("MintBatch", started, "invalid_argument", Err(status));
        }
        // One keyring for the whole batch: every item is minted under the
        // same primary. An owned Arc, not a guard: it is held across yields.
        let keyring = self.keyring.load_full();
        let mut results = Vec::with_capacity(items.len());
        for (i, item) in items.into_iter().enumerate() {
            yield_between_chunks(i).await;
            let outcome = match mint_one(&keyring.codec, item, self.limits.default_ttl) {
                Ok(minted) => {
                    self.metrics.observe_batch_item("MintBatch", "ok");
                    pb::mint_result::Outcome::Minted(minted)
                }
                Err(e) => {
                    self.metrics.observe_batch_item("MintBatch", e.reason());
                    pb::mint_result::Outcome::Error(pb::ItemError {
                        reason: reason_of(&e).into(),
                        detail: e.to_string(),
                    })
                }
            };
            results.push(pb::MintResult {
                outcome: Some(outcome),
            });
        }
        self.finish(
            "MintBatch",
            started,
            "ok",
            Ok(pb::MintBatchResponse { results }),
        )
    }

    async fn verify_batch(
        &self,
        request: Request<pb::VerifyBatchRequest>,
    ) -> Result<Response<pb::VerifyBatchResponse>, Status> {
        let started = Instant::now();
        let items = request.into_inner().items;
        if let Err(status) = self.check_batch_len(items.len()) {
            return self.finish("VerifyBatch", started, "invalid_argument", Err(status));
        }
        let keyring = self.keyring.load_full();
        let mut results = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            yield_between_chunks(i).await;
            results.push(match verify_one(&keyring.codec, item) {
                Ok(verified) => {
                    self.metrics.observe_batch_item("VerifyBatch", "ok");
                    verified
                }
                Err(e) => {
                    self.metrics.observe_batch_item("VerifyBatch", e.reason());
                    invalid_verify_response(&e)
                }
            });
        }
        self.finish(
            "VerifyBatch",
            started,
            "ok",
            Ok(pb::VerifyBatchResponse { results }),
        )
    }

    async fn seal(
        &self,
        request: Request<pb::SealRequest>,
    ) -> Result<Response<pb::SealResponse>, Status> {
        let started = Instant::now();
        let keyring = self.keyring.load();
        let request = request.get_ref();
        match keyring.codec.seal(&request.payload, &request.aad) {
            Ok(token) => self.finish(
                "Seal",
                started,
                "ok",
                Ok(pb::SealResponse {
                    token,
                    key_id: keyring.codec.keyring().primary().id().get(),
                }),
            ),
            Err(e) => self.finish("Seal", started, e.reason(), Err(mint_error_status(&e))),
        }
    }

    async fn unseal(
        &self,
        request: Request<pb::UnsealRequest>,
    ) -> Result<Response<pb::UnsealResponse>, Status> {
        let started = Instant::now();
        let keyring = self.keyring.load();
        let request = request.get_ref();
        let codec = &keyring.codec;
        match codec.unseal_detailed(&request.token, &request.aad) {
            Ok(reqstate::Unsealed { payload, key_id }) => {
                let key_id = key_id.get();
                self.finish(
                    "Unseal",
                    started,
                    "ok",
                    Ok(pb::UnsealResponse {
                        valid: true,
                        reason: pb::Reason::Unspecified.into(),
                        payload,
                        key_id,
                        detail: String::new(),
                    }),
                )
            }
            Err(e @ Error::InvalidArgument(_)) => self.finish(
                "Unseal",
                started,
                e.reason(),
                Err(Status::invalid_argument(e.to_string())),
            ),
            Err(e) => self.finish(
                "Unseal",
                started,
                e.reason(),
                Ok(pb::UnsealResponse {
                    valid: false,
                    reason: reason_of(&e).into(),
                    detail: e.to_string(),
                    ..Default::default()
                }),
            ),
        }
    }

    async fn list_keys(
        &self,
        _request: Request<pb::ListKeysRequest>,
    ) -> Result<Response<pb::ListKeysResponse>, Status> {
        let started = Instant::now();
        let keyring = self.keyring.load();
        let keys = keyring
            .codec
            .keyring()
            .keys()
            .into_iter()
            .map(key_info)
            .collect();
        self.finish(
            "ListKeys",
            started,
            "ok",
            Ok(pb::ListKeysResponse {
                keys,
                keyring_generation: keyring.generation,
            }),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_core_reason_has_its_own_wire_value() {
        let errors = [
            Error::TooLarge { len: 1, max: 0 },
            Error::Malformed("x"),
            Error::UnsupportedVersion(9),
            Error::UnsupportedAlgorithm(3),
            Error::WrongKind {
                expected: reqstate::TokenKind::State,
                found: reqstate::TokenKind::Sealed,
            },
            Error::UnknownKey(reqstate::KeyId::new(1)),
            Error::RetiredKey(reqstate::KeyId::new(1)),
            Error::AlgorithmMismatch {
                key_id: reqstate::KeyId::new(1),
                key: reqstate::Algorithm::HmacSha256,
                token: reqstate::Algorithm::XChaCha20Poly1305,
            },
            Error::AuthenticationFailed,
            Error::Expired {
                expires_at: 1,
                now: 2,
            },
            Error::NotYetValid {
                issued_at: 2,
                now: 1,
            },
            Error::WrongStep {
                expected: "a".into(),
                found: "b".into(),
            },
            Error::LifetimeTooLong {
                lifetime: 2,
                max: 1,
            },
            Error::StateEncoding("x".into()),
            Error::StateDecoding("x".into()),
            Error::InvalidArgument("x"),
            Error::RandomnessUnavailable,
            Error::InvalidKeyring(reqstate::KeyringError {
                line: None,
                key_id: None,
                message: "x".into(),
            }),
        ];
        let mut seen = std::collections::HashSet::new();
        for error in &errors {
            let reason = reason_of(error);
            assert_ne!(reason, pb::Reason::Unspecified, "{error:?}");
            // The wire name is the core's reason in upper case.
            assert_eq!(
                reason.as_str_name(),
                format!("REASON_{}", error.reason().to_uppercase())
            );
            assert!(seen.insert(reason), "{error:?} shares a wire value");
        }
    }

    #[test]
    fn json_state_round_trips_as_json_and_bytes_as_bytes() -> Result<(), Error> {
        let json = state_to_cbor(Some(pb::mint_request::StateValue::StateJson(
            r#"{"amount": 5, "items": ["a", null, true, 1.5]}"#.into(),
        )))?;
        assert_eq!(
            state_from_cbor(json)?,
            pb::verify_response::StateValue::StateJson(
                r#"{"amount":5,"items":["a",null,true,1.5]}"#.into()
            )
        );
        let bytes = state_to_cbor(Some(pb::mint_request::StateValue::State(vec![0, 1, 2])))?;
        assert_eq!(
            state_from_cbor(bytes)?,
            pb::verify_response::StateValue::State(vec![0, 1, 2])
        );
        assert_eq!(
            state_to_cbor(Some(pb::mint_request::StateValue::StateJson(
                "{nope".into()
            ))),
            Err(Error::InvalidArgument("state_json is not valid JSON"))
        );
        Ok(())
    }
}
