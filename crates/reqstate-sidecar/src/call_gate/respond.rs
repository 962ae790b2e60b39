//! Error mapping: the outermost layer of the gate. The layers below end a
//! call by failing it with a [`CallError`] (why, as a gRPC status, and the
//! metric result); this layer alone turns that into the gRPC response the
//! caller gets, counts it in `reqstate_calls_total` under the call's rpc
//! label, and logs it. Its own error type is [`Infallible`]: nothing below
//! it can make tonic's server fail a call in its own words.

use std::convert::Infallible;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response};
use tonic::Status;
use tonic::body::Body;
use tower::{Layer, Service};

use super::rpc_label;
use crate::metrics::Metrics;

/// Why the gate ended a call without the service's answer: the status the
/// caller gets and the `result` label it is counted under.
#[derive(Debug)]
pub struct CallError {
    status: Status,
    result: &'static str,
    kind: Kind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Refused,
    DeadlinePassed,
}

impl CallError {
    /// A call refused before it reached the service, counted under
    /// `result` (a fixed label: `unauthenticated`, `overloaded`, …).
    pub fn refused(status: Status, result: &'static str) -> Self {
        CallError {
            status,
            result,
            kind: Kind::Refused,
        }
    }

    /// A call stopped at its deadline before its response began (the
    /// status is [`super::deadline::CallDeadline::status`]'s), counted as
    /// `deadline_exceeded`.
    pub fn deadline_passed(status: Status) -> Self {
        CallError {
            status,
            result: "deadline_exceeded",
            kind: Kind::DeadlinePassed,
        }
    }

    /// The status the caller gets.
    pub fn status(&self) -> &Status {
        &self.status
    }

    /// The `result` label the call is counted under.
    pub fn result(&self) -> &'static str {
        self.result
    }
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.status.message(), self.result)
    }
}

impl std::error::Error for CallError {}

/// The routes never fail (tonic answers every error in-band), so their
/// error converts into this one without a case.
impl From<Infallible> for CallError {
    fn from(never: Infallible) -> Self {
        match never {}
    }
}

/// A [`Layer`] that answers every [`CallError`] from below as a gRPC
/// status (trailers-only response), counted and logged.
#[derive(Debug, Clone)]
pub struct RespondLayer {
    metrics: Arc<Metrics>,
}

impl RespondLayer {
    /// Counts the calls it answers into `metrics`.
    pub fn new(metrics: Arc<Metrics>) -> Self {
        RespondLayer { metrics }
    }
}

impl<S> Layer<S> for RespondLayer {
    type Service = Respond<S>;

    fn layer(&self, inner: S) -> Respond<S> {
        Respond {
            inner,
            metrics: self.metrics.clone(),
            not_ready: None,
        }
    }
}

/// See [`RespondLayer`].
#[derive(Debug)]
pub struct Respond<S> {
    inner: S,
    metrics: Arc<Metrics>,
    /// Why the service below could not get ready, answered to the call
    /// that `poll_ready` was for (none of the gate's layers ever fails
    /// there: they pass on the routes', which cannot fail).
    not_ready: Option<CallError>,
}

impl<S: Clone> Clone for Respond<S> {
    fn clone(&self) -> Self {
        Respond {
            inner: self.inner.clone(),
            metrics: self.metrics.clone(),
            not_ready: None,
        }
    }
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = Result<T, Infallible>> + Send>>;

impl<S> Service<Request<Body>> for Respond<S>
where
    S: Service<Request<Body>, Response = Response<Body>>,
    S::Error: Into<CallError>,
    S::Future: Send + 'static,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Response<Body>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        // A service below that cannot get ready fails the call this
        // readiness was for, in words, instead of the connection.
        match self.inner.poll_ready(cx) {
            Poll::Ready(Err(error)) => {
                self.not_ready = Some(error.into());
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Ok(())) => Poll::Ready(Ok(())),
            Poll::Pending => Poll::Pending,
        }
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let rpc = rpc_label(request.uri().path());
        if let Some(error) = self.not_ready.take() {
            let response = respond(error, rpc, &self.metrics);
            return Box::pin(std::future::ready(Ok(response)));
        }
        // Called now, not from the future: the deadline below must be taken
        // before tonic starts its own timer (see the module `call_gate`).
        let answer = self.inner.call(request);
        let metrics = self.metrics.clone();
        Box::pin(async move {
            match answer.await {
                Ok(response) => Ok(response),
                Err(error) => Ok(respond(error.into(), rpc, &metrics)),
            }
        })
    }
}

/// The response for `error`, counted and logged under `rpc`.
fn respond(error: CallError, rpc: &'static str, metrics: &Metrics) -> Response<Body> {
    let CallError {
        status,
        result,
        kind,
    } = error;
    metrics.observe_refusal(rpc, result);
    match kind {
        Kind::Refused => tracing::info!(rpc, result, "call refused"),
        Kind::DeadlinePassed => tracing::info!(rpc, result, "call stopped at its deadline"),
    }
    status.into_http()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower::ServiceExt as _;

    type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

    #[tokio::test]
    async fn a_call_error_becomes_its_status_counted_under_the_rpc() -> TestResult {
        let metrics = Arc::new(Metrics::new()?);
        let failing = tower::service_fn(|_request: Request<Body>| async {
            Err::<Response<Body>, _>(CallError::refused(
                crate::wire::error_status(tonic::Code::Unauthenticated, "unauthenticated", "no"),
                "unauthenticated",
            ))
        });
        let respond = RespondLayer::new(metrics.clone()).layer(failing);
        let request = Request::builder()
            .uri("/reqstate.v1.RequestState/Verify")
            .body(Body::empty())?;
        let response = respond.oneshot(request).await?;
        // A trailers-only gRPC response: HTTP 200, the status in the headers,
        // the reason with it.
        assert_eq!(response.status(), http::StatusCode::OK);
        let status = Status::from_header_map(response.headers()).ok_or("no grpc-status")?;
        assert_eq!(status.code(), tonic::Code::Unauthenticated);
        assert_eq!(status.message(), "no");
        assert_eq!(
            response
                .headers()
                .get(crate::wire::REASON_METADATA_KEY)
                .map(|v| v.as_bytes()),
            Some(&b"unauthenticated"[..])
        );
        let page = String::from_utf8(metrics.render())?;
        assert!(
            page.contains("reqstate_calls_total{result=\"unauthenticated\",rpc=\"Verify\"} 1"),
            "{page}"
        );
        Ok(())
    }

    #[tokio::test]
    async fn an_answer_passes_unchanged_and_uncounted() -> TestResult {
        let metrics = Arc::new(Metrics::new()?);
        let answering = tower::service_fn(|_request: Request<Body>| async {
            let mut response = Response::new(Body::empty());
            response
                .headers_mut()
                .insert("x-answered", http::HeaderValue::from_static("yes"));
            Ok::<_, Infallible>(response)
        });
        let respond = RespondLayer::new(metrics.clone()).layer(answering);
        let request = Request::builder()
            .uri("/reqstate.v1.RequestState/Mint")
            .body(Body::empty())?;
        let response = respond.oneshot(request).await?;
        assert_eq!(
            response.headers().get("x-answered").map(|v| v.as_bytes()),
            Some(&b"yes"[..])
        );
        assert!(Status::from_header_map(response.headers()).is_none());
        let page = String::from_utf8(metrics.render())?;
        assert!(!page.contains("reqstate_calls_total{"), "{page}");
        Ok(())
    }
}
