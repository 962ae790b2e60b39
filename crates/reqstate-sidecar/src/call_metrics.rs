//! The per-call metrics of the `reqstate.v1.RequestState` service, as a
//! tower layer: every call is counted by rpc and result and timed, in one
//! place, instead of in each handler.
//!
//! A handler says how its call ended by answering through [`answer`], which
//! records the outcome (`ok`, or the reason of an in-band refusal such as
//! `expired`) in the response's extensions. A call that failed with a gRPC
//! status is labelled by its `reqstate-reason` trailer when it has one
//! (Mint, Seal), otherwise by its status code. Labels come from fixed sets
//! only, never from what a caller sent.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use http::{Request, Response};
use tonic::Status;
use tonic::body::Body;
use tower::{Layer, Service};

use crate::call_gate::rpc_label;
use crate::metrics::Metrics;
use crate::wire::REASON_METADATA_KEY;

/// The paths this layer counts: the service's own rpcs. Health and
/// reflection are not counted here (the call gate counts their refusals).
const SERVICE_PATH_PREFIX: &str = "/reqstate.v1.RequestState/";

/// How a call ended, set by [`answer`] on a successful response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallOutcome(pub &'static str);

/// A handler's response, with the outcome the metrics record for it.
pub fn answer<T>(message: T, outcome: &'static str) -> tonic::Response<T> {
    let mut response = tonic::Response::new(message);
    response.extensions_mut().insert(CallOutcome(outcome));
    response
}

/// The result label of a failed call: its `reqstate-reason` (a core reason
/// name, checked against the fixed set) or its status code.
fn status_label(status: &Status) -> &'static str {
    let reason = status
        .metadata()
        .get(REASON_METADATA_KEY)
        .and_then(|value| value.to_str().ok());
    if let Some(reason) = reason.and_then(known_reason) {
        return reason;
    }
    match status.code() {
        tonic::Code::InvalidArgument => "invalid_argument",
        tonic::Code::Unavailable => "unavailable",
        tonic::Code::DeadlineExceeded => "deadline_exceeded",
        tonic::Code::ResourceExhausted => "overloaded",
        tonic::Code::Cancelled => "cancelled",
        _ => "error",
    }
}

/// `reason` as a `&'static str` from the core's fixed set, if it is one.
fn known_reason(reason: &str) -> Option<&'static str> {
    const MINT_REASONS: [&str; 4] = [
        "invalid_argument",
        "state_encoding",
        "randomness_unavailable",
        "invalid_keyring",
    ];
    reqstate::Refusal::REASONS
        .iter()
        .chain(MINT_REASONS.iter())
        .find(|known| **known == reason)
        .copied()
}

/// The result label of a response: its [`CallOutcome`], or the status it
/// carries (tonic puts an error's `Status` in the response extensions).
fn result_label(response: &Response<Body>) -> &'static str {
    if let Some(CallOutcome(outcome)) = response.extensions().get::<CallOutcome>() {
        return outcome;
    }
    match response.extensions().get::<Status>() {
        Some(status) => status_label(status),
        None => "error",
    }
}

/// A [`Layer`] that counts and times the service's calls.
#[derive(Debug, Clone)]
pub struct CallMetricsLayer {
    metrics: Arc<Metrics>,
}

impl CallMetricsLayer {
    /// Records into `metrics`.
    pub fn new(metrics: Arc<Metrics>) -> Self {
        CallMetricsLayer { metrics }
    }
}

impl<S> Layer<S> for CallMetricsLayer {
    type Service = CallMetrics<S>;

    fn layer(&self, inner: S) -> CallMetrics<S> {
        CallMetrics {
            inner,
            metrics: self.metrics.clone(),
        }
    }
}

/// See [`CallMetricsLayer`].
#[derive(Debug, Clone)]
pub struct CallMetrics<S> {
    inner: S,
    metrics: Arc<Metrics>,
}

type BoxFuture<T, E> = Pin<Box<dyn Future<Output = Result<T, E>> + Send>>;

impl<S> Service<Request<Body>> for CallMetrics<S>
where
    S: Service<Request<Body>, Response = Response<Body>> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Response<Body>;
    type Error = S::Error;
    type Future = BoxFuture<Response<Body>, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let path = request.uri().path();
        if !path.starts_with(SERVICE_PATH_PREFIX) {
            return Box::pin(inner.call(request));
        }
        let rpc = rpc_label(path);
        let metrics = self.metrics.clone();
        let started = Instant::now();
        Box::pin(async move {
            let response = inner.call(request).await?;
            let result = result_label(&response);
            metrics.observe_call(rpc, result, started.elapsed());
            tracing::debug!(rpc, result, "call");
            Ok(response)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_calls_are_labelled_from_fixed_sets() {
        let mut with_reason = Status::invalid_argument("x");
        with_reason
            .metadata_mut()
            .insert(REASON_METADATA_KEY, "lifetime_too_long".parse().unwrap());
        assert_eq!(status_label(&with_reason), "lifetime_too_long");
        let mut foreign = Status::invalid_argument("x");
        foreign
            .metadata_mut()
            .insert(REASON_METADATA_KEY, "made_up_by_a_caller".parse().unwrap());
        assert_eq!(status_label(&foreign), "invalid_argument");
        assert_eq!(status_label(&Status::internal("x")), "error");
    }

    #[test]
    fn an_answer_carries_its_outcome_to_the_layer() {
        let answered = answer((), "expired");
        let outcome = answered.extensions().get::<CallOutcome>().copied();
        assert_eq!(outcome, Some(CallOutcome("expired")));
        // tonic moves a response's extensions into the HTTP response.
        let mut response = Response::new(Body::empty());
        response.extensions_mut().insert(CallOutcome("expired"));
        assert_eq!(result_label(&response), "expired");
        let failed = Status::invalid_argument("x").into_http::<Body>();
        assert_eq!(result_label(&failed), "invalid_argument");
    }
}
