//! The `reqstate.v1.RequestState` gRPC service: each RPC loads the keyring
//! in service, makes its core calls through [`crate::wire`], and answers
//! with its outcome ([`crate::call_metrics::answer`]). Per-call concerns are
//! tower layers: authentication, load shedding and deadlines in
//! [`crate::call_gate`], call counts and latency in [`crate::call_metrics`].

use std::sync::Arc;

use reqstate::Aad;
use reqstate_proto::v1 as pb;
use reqstate_proto::v1::request_state_server::RequestState;
use tonic::{Request, Response, Status};

use crate::call_metrics::answer;
use crate::config::Limits;
use crate::live_keyring::{KeyringInService, SharedKeyring};
use crate::metrics::Metrics;
use crate::wire::{
    self, Checked, VerifyFailure, check_one, finish_consume, key_info, mint_error_status,
    mint_failure_status, mint_one, refused_verify_response, wire_reason, wire_transition,
};
use reqstate_spent_store::{Spend, SpentStore};

/// Counts an answered Verify (or batch item) under its key: accepted, or
/// refused (a caller error or a store that did not record is neither).
fn count_verify(
    keyring: &KeyringInService,
    token: &str,
    result: &Result<pb::VerifyResponse, VerifyFailure>,
) {
    match result {
        Ok(verified) => keyring
            .evidence
            .verified(verified.key_id, keyring.codec.now()),
        Err(VerifyFailure::Refused(refusal)) => keyring.evidence.refused(token, refusal),
        Err(VerifyFailure::Caller(_) | VerifyFailure::NotRecorded(..)) => {}
    }
}

/// The gRPC service.
#[derive(Debug, Clone)]
pub struct RequestStateService {
    keyring: SharedKeyring,
    replay: Arc<SpentStore>,
    limits: Limits,
    metrics: Arc<Metrics>,
}

impl RequestStateService {
    /// A service over the shared keyring, recording consumed single-use
    /// tokens in `replay`.
    pub fn new(
        keyring: SharedKeyring,
        replay: Arc<SpentStore>,
        limits: Limits,
        metrics: Arc<Metrics>,
    ) -> Self {
        RequestStateService {
            keyring,
            replay,
            limits,
            metrics,
        }
    }

    fn check_batch_len(&self, len: usize) -> Result<(), Status> {
        if len > self.limits.max_batch_items {
            return Err(wire::invalid_argument(format!(
                "batch has {len} items; the limit is {} (--max-batch-items)",
                self.limits.max_batch_items
            )));
        }
        Ok(())
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

#[tonic::async_trait]
impl RequestState for RequestStateService {
    async fn mint(
        &self,
        request: Request<pb::MintRequest>,
    ) -> Result<Response<pb::MintResponse>, Status> {
        let keyring = self.keyring.load();
        match mint_one(
            &keyring.codec,
            request.into_inner(),
            self.limits.default_ttl,
        ) {
            Ok(minted) => {
                keyring.evidence.minted(minted.key_id);
                Ok(answer(minted, "ok"))
            }
            Err(e) => Err(mint_failure_status(&e)),
        }
    }

    async fn verify(
        &self,
        request: Request<pb::VerifyRequest>,
    ) -> Result<Response<pb::VerifyResponse>, Status> {
        let keyring = self.keyring.load_full();
        let checked = check_one(&keyring.codec, request.get_ref());
        let verified = match checked {
            Checked::Done(result) => result,
            Checked::Consume(redemption) => {
                let recorded = self
                    .replay
                    .record(Spend::of(&redemption), redemption.now())
                    .await;
                finish_consume(redemption, recorded)
            }
        };
        count_verify(&keyring, &request.get_ref().token, &verified);
        match verified {
            Ok(verified) => Ok(answer(verified, "ok")),
            Err(VerifyFailure::Caller(e)) => Err(wire::invalid_argument(e.to_string())),
            Err(VerifyFailure::Refused(e)) => Ok(answer(refused_verify_response(&e), e.reason())),
            Err(failure @ VerifyFailure::NotRecorded(..)) => {
                Ok(answer(failure.in_band(), failure.reason()))
            }
        }
    }

    async fn mint_batch(
        &self,
        request: Request<pb::MintBatchRequest>,
    ) -> Result<Response<pb::MintBatchResponse>, Status> {
        let items = request.into_inner().items;
        self.check_batch_len(items.len())?;
        // One keyring for the whole batch: every item is minted under the
        // same primary. An owned Arc, not a guard: it is held across yields.
        let keyring = self.keyring.load_full();
        let mut results = Vec::with_capacity(items.len());
        for (i, item) in items.into_iter().enumerate() {
            yield_between_chunks(i).await;
            let outcome = match mint_one(&keyring.codec, item, self.limits.default_ttl) {
                Ok(minted) => {
                    keyring.evidence.minted(minted.key_id);
                    self.metrics.observe_batch_item("MintBatch", "ok");
                    pb::mint_result::Outcome::Minted(minted)
                }
                Err(e) => {
                    self.metrics.observe_batch_item("MintBatch", e.reason());
                    pb::mint_result::Outcome::Error(pb::ItemError {
                        reason: wire_reason(e.reason()).into(),
                        detail: e.to_string(),
                    })
                }
            };
            results.push(pb::MintResult {
                outcome: Some(outcome),
            });
        }
        Ok(answer(pb::MintBatchResponse { results }, "ok"))
    }

    async fn verify_batch(
        &self,
        request: Request<pb::VerifyBatchRequest>,
    ) -> Result<Response<pb::VerifyBatchResponse>, Status> {
        let items = request.into_inner().items;
        self.check_batch_len(items.len())?;
        let keyring = self.keyring.load_full();
        let mut checked = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            yield_between_chunks(i).await;
            checked.push(check_one(&keyring.codec, item));
        }
        // Every single-use token that passed its checks is recorded in one
        // round trip (a pipeline on Redis); the others never reach the store.
        let to_record: Vec<_> = checked
            .iter()
            .filter_map(|c| match c {
                Checked::Consume(r) => Some(Spend::of(r)),
                Checked::Done(_) => None,
            })
            .collect();
        let now = checked.iter().find_map(|c| match c {
            Checked::Consume(r) => Some(r.now()),
            Checked::Done(_) => None,
        });
        let mut recorded = match now {
            Some(now) => self.replay.record_many(&to_record, now).await,
            None => Vec::new(),
        }
        .into_iter();
        let mut results = Vec::with_capacity(checked.len());
        for (item, request) in checked.into_iter().zip(&items) {
            let result = match item {
                Checked::Done(result) => result,
                Checked::Consume(redemption) => {
                    let answer = recorded
                        .next()
                        .unwrap_or(Err(reqstate::StoreError::Unavailable.into()));
                    finish_consume(redemption, answer)
                }
            };
            count_verify(&keyring, &request.token, &result);
            results.push(match result {
                Ok(verified) => {
                    self.metrics.observe_batch_item("VerifyBatch", "ok");
                    verified
                }
                Err(e) => {
                    self.metrics.observe_batch_item("VerifyBatch", e.reason());
                    e.in_band()
                }
            });
        }
        Ok(answer(pb::VerifyBatchResponse { results }, "ok"))
    }

    async fn seal(
        &self,
        request: Request<pb::SealRequest>,
    ) -> Result<Response<pb::SealResponse>, Status> {
        let keyring = self.keyring.load();
        let request = request.get_ref();
        let sealed = Aad::new(&request.aad)
            .map_err(reqstate::MintError::from)
            .and_then(|aad| keyring.codec.seal(&request.payload, aad));
        match sealed {
            Ok(sealed) => {
                keyring.evidence.minted(sealed.key_id.get());
                Ok(answer(
                    pb::SealResponse {
                        token: sealed.token,
                        key_id: sealed.key_id.get(),
                    },
                    "ok",
                ))
            }
            Err(e) => Err(mint_error_status(&e)),
        }
    }

    async fn unseal(
        &self,
        request: Request<pb::UnsealRequest>,
    ) -> Result<Response<pb::UnsealResponse>, Status> {
        let keyring = self.keyring.load();
        let request = request.get_ref();
        let codec = &keyring.codec;
        let unsealed = Aad::new(&request.aad)
            .map_err(VerifyFailure::from)
            .and_then(|aad| Ok(codec.unseal(&request.token, aad)?));
        match unsealed {
            Ok(reqstate::Unsealed {
                payload, key_id, ..
            }) => {
                let key_id = key_id.get();
                keyring.evidence.verified(key_id, codec.now());
                Ok(answer(
                    pb::UnsealResponse {
                        valid: true,
                        reason: pb::Reason::Unspecified.into(),
                        payload,
                        key_id,
                        detail: String::new(),
                    },
                    "ok",
                ))
            }
            Err(VerifyFailure::Caller(e)) => Err(wire::invalid_argument(e.to_string())),
            // (No store is involved in unsealing: NotRecorded cannot occur.)
            Err(failure @ (VerifyFailure::Refused(_) | VerifyFailure::NotRecorded(..))) => {
                if let VerifyFailure::Refused(refusal) = &failure {
                    keyring.evidence.refused(&request.token, refusal);
                }
                Ok(answer(
                    pb::UnsealResponse {
                        valid: false,
                        reason: wire_reason(failure.reason()).into(),
                        detail: failure.detail(),
                        ..Default::default()
                    },
                    failure.reason(),
                ))
            }
        }
    }

    async fn list_keys(
        &self,
        _request: Request<pb::ListKeysRequest>,
    ) -> Result<Response<pb::ListKeysResponse>, Status> {
        let current = self.keyring.load();
        let keyring = current.codec.keyring();
        let policy = current.codec.policy();
        let now = current.codec.now();
        let keys = keyring
            .keys()
            .into_iter()
            .map(|key| key_info(keyring, key, now, current.evidence.counters(key.id().get())))
            .collect();
        Ok(answer(
            pb::ListKeysResponse {
                keys,
                keyring_generation: current.generation,
                now,
                minting_key_id: keyring.minting_key(now).id().get(),
                next_transition: keyring.next_transition(now).map(wire_transition),
                keyring_sha256: current.evidence.sha256().to_owned(),
                max_ttl_seconds: policy.max_lifetime(),
                clock_leeway_seconds: policy.clock_leeway(),
            },
            "ok",
        ))
    }
}
