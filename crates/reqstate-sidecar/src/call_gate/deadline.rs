//! The call deadline, one rule for every call shape: a call gets until
//! `--call-timeout-ms` after it arrived, or until the caller's
//! `grpc-timeout` if that is sooner, and a call still running then is ended
//! with `DEADLINE_EXCEEDED` (reason `deadline_exceeded`), as gRPC has a
//! server that gives up at the deadline answer:
//!
//! - before its response has begun (a unary call, a batch still working):
//!   the call's future is dropped (the handler stops at its next await; a
//!   batch yields every 64 items) and the caller gets a trailers-only
//!   `DEADLINE_EXCEEDED`;
//! - while its response is streaming (health `Watch`, reflection): what the
//!   service has ready still goes out, then the stream is ended with
//!   `DEADLINE_EXCEEDED` trailers.
//!
//! [`CallDeadline::status`] is the only place that status is made. The
//! servers are built without tonic's `Server::timeout`, whose expiry would
//! answer `CANCELLED` ("Timeout expired"); tonic still reads a caller's
//! `grpc-timeout` itself, outside the gate, and this layer takes its
//! deadline first (the module `call_gate` explains the order), so that
//! timer never fires first.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use http::{HeaderMap, Request, Response};
use hyper::body::{Body as HttpBody, Bytes, Frame, SizeHint};
use tokio::time::{Instant, Sleep};
use tonic::Status;
use tonic::body::Body;
use tower::{Layer, Service};

use super::CallError;
use crate::wire;

/// The header a gRPC caller gives its deadline in.
const GRPC_TIMEOUT: &str = "grpc-timeout";

/// The longest budget a deadline is given as an instant; anything longer
/// (a `--call-timeout-ms` of centuries) is treated as this, so that adding
/// it to the clock cannot overflow.
const FAR_FUTURE: Duration = Duration::from_secs(100 * 365 * 24 * 60 * 60);

/// Whose deadline a call has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeadlineSource {
    /// The sidecar's `--call-timeout-ms`.
    Server,
    /// The caller's `grpc-timeout`, shorter than the sidecar's.
    Caller,
}

/// Where a call was when its deadline passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Its response had not begun.
    BeforeResponse,
    /// Its response was streaming.
    Streaming,
}

/// One call's deadline: when, how long it was given, and by whom.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallDeadline {
    at: Instant,
    budget: Duration,
    source: DeadlineSource,
}

impl CallDeadline {
    /// The deadline of a call arriving now with `headers`, under a server
    /// limit of `call_timeout`: the sooner of that and the caller's
    /// `grpc-timeout` (a header tonic would not honour is ignored, as tonic
    /// ignores it).
    pub fn for_call(call_timeout: Duration, headers: &HeaderMap) -> Self {
        let now = Instant::now();
        let (budget, source) = match parse_grpc_timeout(headers) {
            Some(caller) if caller < call_timeout => (caller, DeadlineSource::Caller),
            _ => (call_timeout, DeadlineSource::Server),
        };
        CallDeadline {
            at: now
                .checked_add(budget.min(FAR_FUTURE))
                .unwrap_or(now + Duration::from_secs(24 * 60 * 60)),
            budget,
            source,
        }
    }

    /// When the call must have ended.
    pub fn at(&self) -> Instant {
        self.at
    }

    /// Whose deadline it is.
    pub fn source(&self) -> DeadlineSource {
        self.source
    }

    /// The status of a call ended at this deadline: `DEADLINE_EXCEEDED`,
    /// reason `deadline_exceeded`, whatever the call's shape; only the
    /// advice differs with where the call was.
    pub fn status(&self, phase: Phase) -> Status {
        let whose = match self.source {
            DeadlineSource::Server => format!(
                "the call deadline of {} (--call-timeout-ms)",
                budget_text(self.budget)
            ),
            DeadlineSource::Caller => format!(
                "the caller's deadline of {} (grpc-timeout)",
                budget_text(self.budget)
            ),
        };
        let what_now = match phase {
            Phase::BeforeResponse => "passed before the call completed; it was stopped",
            Phase::Streaming => "passed; the stream is closed, reopen it to continue",
        };
        wire::error_status(
            tonic::Code::DeadlineExceeded,
            "deadline_exceeded",
            format!("{whose} {what_now}"),
        )
    }
}

/// `1500 ms`, or `250µs` for a budget that is not whole milliseconds.
fn budget_text(budget: Duration) -> String {
    if budget.subsec_nanos().is_multiple_of(1_000_000) {
        format!("{} ms", budget.as_millis())
    } else {
        format!("{budget:?}")
    }
}

/// The caller's `grpc-timeout`, read exactly as tonic's server reads it
/// (`tonic::transport::service::grpc_timeout`, tonic 0.14): up to 8 digits
/// (as Rust parses a `u64`) and a unit `H`, `M`, `S`, `m`, `u` or `n`.
/// Whatever tonic would honour, this honours with the same value, so that
/// tonic's own timer never ends a call first; anything else is `None`.
fn parse_grpc_timeout(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get(GRPC_TIMEOUT)?.to_str().ok()?;
    if value.is_empty() {
        return None;
    }
    // `to_str` succeeded, so the value is ASCII and any split is on a
    // character boundary.
    let (digits, unit) = value.split_at(value.len() - 1);
    if digits.len() > 8 {
        return None;
    }
    let amount: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(amount * 60 * 60),
        "M" => Duration::from_secs(amount * 60),
        "S" => Duration::from_secs(amount),
        "m" => Duration::from_millis(amount),
        "u" => Duration::from_micros(amount),
        "n" => Duration::from_nanos(amount),
        _ => return None,
    })
}

/// A [`Layer`] that puts [`Deadline`] in front of a service.
#[derive(Debug, Clone, Copy)]
pub struct DeadlineLayer {
    call_timeout: Duration,
}

impl DeadlineLayer {
    /// Every call gets at most `call_timeout` (`--call-timeout-ms`).
    pub fn new(call_timeout: Duration) -> Self {
        DeadlineLayer { call_timeout }
    }
}

impl<S> Layer<S> for DeadlineLayer {
    type Service = Deadline<S>;

    fn layer(&self, inner: S) -> Deadline<S> {
        Deadline {
            inner,
            call_timeout: self.call_timeout,
        }
    }
}

/// Ends every call at its [`CallDeadline`] with `DEADLINE_EXCEEDED`: before
/// its response as a [`CallError`] (answered and counted by the `respond`
/// layer), during it in the body's trailers.
#[derive(Debug, Clone)]
pub struct Deadline<S> {
    inner: S,
    call_timeout: Duration,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = Result<T, CallError>> + Send>>;

impl<S> Service<Request<Body>> for Deadline<S>
where
    S: Service<Request<Body>, Response = Response<Body>>,
    S::Error: Into<CallError>,
    S::Future: Send + 'static,
{
    type Response = Response<Body>;
    type Error = CallError;
    type Future = BoxFuture<Response<Body>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), CallError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        // Taken now, in `call`: see the module documentation.
        let deadline = CallDeadline::for_call(self.call_timeout, request.headers());
        let response = self.inner.call(request);
        Box::pin(async move {
            let mut timer = Box::pin(tokio::time::sleep_until(deadline.at));
            tokio::select! {
                // A response ready at the deadline is not replaced.
                biased;
                response = response => {
                    let response = response.map_err(Into::into)?;
                    Ok(response.map(|body| Body::new(DeadlineBody::new(body, timer, deadline))))
                }
                () = &mut timer => {
                    Err(CallError::deadline_passed(deadline.status(Phase::BeforeResponse)))
                }
            }
        })
    }
}

/// A response body that is ended with `DEADLINE_EXCEEDED` trailers if it is
/// still open at the call's deadline.
struct DeadlineBody {
    inner: Body,
    timer: Pin<Box<Sleep>>,
    deadline: CallDeadline,
    done: bool,
}

impl DeadlineBody {
    fn new(inner: Body, timer: Pin<Box<Sleep>>, deadline: CallDeadline) -> Self {
        DeadlineBody {
            inner,
            timer,
            deadline,
            done: false,
        }
    }

    /// Nothing more is sent; the service's body is dropped now (a `Watch`
    /// stops watching).
    fn finish(&mut self) {
        self.done = true;
        self.inner = Body::empty();
    }

    fn deadline_trailers(&self) -> Result<HeaderMap, Status> {
        let mut trailers = HeaderMap::new();
        self.deadline
            .status(Phase::Streaming)
            .add_header(&mut trailers)?;
        Ok(trailers)
    }
}

impl HttpBody for DeadlineBody {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let this = self.get_mut();
        if this.done {
            return Poll::Ready(None);
        }
        // What the service has ready goes out first: a response completed
        // just before the deadline is not replaced.
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if frame.is_trailers() {
                    this.finish();
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(status))) => {
                this.finish();
                Poll::Ready(Some(Err(status)))
            }
            Poll::Ready(None) => {
                this.finish();
                Poll::Ready(None)
            }
            Poll::Pending => match this.timer.as_mut().poll(cx) {
                Poll::Pending => Poll::Pending,
                Poll::Ready(()) => {
                    let trailers = this.deadline_trailers();
                    this.finish();
                    Poll::Ready(Some(trailers.map(Frame::trailers)))
                }
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        if self.done {
            SizeHint::with_exact(0)
        } else {
            self.inner.size_hint()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt as _;
    use tower::ServiceExt as _;

    type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

    const DEADLINE: Duration = Duration::from_millis(50);
    /// How long a test waits for what the gate must do by `DEADLINE`.
    const PATIENCE: Duration = Duration::from_secs(10);

    /// A response body that never ends, as a health `Watch` with no change.
    struct Endless;

    impl HttpBody for Endless {
        type Data = Bytes;
        type Error = Status;

        fn poll_frame(
            self: Pin<&mut Self>,
            _cx: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
            Poll::Pending
        }
    }

    /// A unary handler that never answers, as a batch far over its time.
    fn never_answers() -> impl Service<
        Request<Body>,
        Response = Response<Body>,
        Error = std::convert::Infallible,
        Future = impl Send,
    > + Clone {
        tower::service_fn(|_request: Request<Body>| async {
            std::future::pending::<()>().await;
            Ok(Response::new(Body::empty()))
        })
    }

    fn streams_forever() -> impl Service<
        Request<Body>,
        Response = Response<Body>,
        Error = std::convert::Infallible,
        Future = impl Send,
    > + Clone {
        tower::service_fn(|_request: Request<Body>| async { Ok(Response::new(Body::new(Endless))) })
    }

    fn request(grpc_timeout: Option<&str>) -> Result<Request<Body>, http::Error> {
        let mut builder = Request::builder().uri("/reqstate.v1.RequestState/VerifyBatch");
        if let Some(value) = grpc_timeout {
            builder = builder.header(GRPC_TIMEOUT, value);
        }
        builder.body(Body::empty())
    }

    /// The rule: a unary call past its deadline is `DEADLINE_EXCEEDED`
    /// (before: tonic's `Server::timeout` answered `CANCELLED`, "Timeout
    /// expired"), with the gate's reason, and not before the deadline.
    #[tokio::test]
    async fn a_unary_call_past_its_deadline_is_deadline_exceeded() -> TestResult {
        let service = DeadlineLayer::new(DEADLINE).layer(never_answers());
        let started = Instant::now();
        let error = tokio::time::timeout(PATIENCE, service.oneshot(request(None)?))
            .await?
            .err()
            .ok_or("a call that never answers answered")?;
        assert!(started.elapsed() >= DEADLINE);
        assert_eq!(error.status().code(), tonic::Code::DeadlineExceeded);
        assert_eq!(error.result(), "deadline_exceeded");
        assert_eq!(
            error.status().message(),
            "the call deadline of 50 ms (--call-timeout-ms) passed before the call completed; \
             it was stopped"
        );
        assert_eq!(
            error
                .status()
                .metadata()
                .get(wire::REASON_METADATA_KEY)
                .map(|v| v.as_bytes()),
            Some(&b"deadline_exceeded"[..])
        );
        Ok(())
    }

    /// The same rule for a stream: still open at the deadline, it is ended
    /// with `DEADLINE_EXCEEDED` trailers.
    #[tokio::test]
    async fn streams_end_at_the_deadline_with_the_same_status() -> TestResult {
        let service = DeadlineLayer::new(DEADLINE).layer(streams_forever());
        let started = Instant::now();
        let response = service
            .oneshot(request(None)?)
            .await
            .map_err(|e| e.to_string())?;
        let collected = tokio::time::timeout(PATIENCE, response.into_body().collect()).await??;
        assert!(started.elapsed() >= DEADLINE);
        let trailers = collected.trailers().ok_or("no trailers")?;
        let status = Status::from_header_map(trailers).ok_or("no grpc-status")?;
        assert_eq!(status.code(), tonic::Code::DeadlineExceeded);
        assert_eq!(
            trailers
                .get(wire::REASON_METADATA_KEY)
                .map(|v| v.as_bytes()),
            Some(&b"deadline_exceeded"[..])
        );
        assert!(
            status.message().contains("reopen it"),
            "{}",
            status.message()
        );
        Ok(())
    }

    #[tokio::test]
    async fn a_shorter_caller_deadline_wins_with_the_same_code() -> TestResult {
        let service = DeadlineLayer::new(Duration::from_secs(3600)).layer(never_answers());
        let error = tokio::time::timeout(PATIENCE, service.oneshot(request(Some("50m"))?))
            .await?
            .err()
            .ok_or("a call that never answers answered")?;
        assert_eq!(error.status().code(), tonic::Code::DeadlineExceeded);
        assert!(
            error
                .status()
                .message()
                .starts_with("the caller's deadline of 50 ms (grpc-timeout)"),
            "{}",
            error.status().message()
        );
        // A longer one does not extend the sidecar's.
        let service = DeadlineLayer::new(DEADLINE).layer(never_answers());
        let error = tokio::time::timeout(PATIENCE, service.oneshot(request(Some("1H"))?))
            .await?
            .err()
            .ok_or("a call that never answers answered")?;
        assert!(
            error.status().message().contains("--call-timeout-ms"),
            "{}",
            error.status().message()
        );
        Ok(())
    }

    #[tokio::test]
    async fn what_is_ready_by_the_deadline_is_not_replaced() -> TestResult {
        // A zero budget: the deadline has passed at the first poll, and a
        // response that is ready then still goes out whole.
        let ready = tower::service_fn(|_request: Request<Body>| async {
            Ok::<_, std::convert::Infallible>(Response::new(Body::new(http_body_util::Full::new(
                Bytes::from_static(b"answer"),
            ))))
        });
        let service = DeadlineLayer::new(Duration::ZERO).layer(ready);
        let response = service
            .oneshot(request(None)?)
            .await
            .map_err(|e| e.to_string())?;
        let collected = response.into_body().collect().await?;
        assert!(collected.trailers().is_none());
        assert_eq!(collected.to_bytes(), Bytes::from_static(b"answer"));
        Ok(())
    }

    #[test]
    fn grpc_timeout_is_read_as_tonic_reads_it() -> Result<(), http::header::InvalidHeaderValue> {
        let parse = |value: &str| -> Result<Option<Duration>, http::header::InvalidHeaderValue> {
            let mut headers = HeaderMap::new();
            headers.insert(GRPC_TIMEOUT, value.parse()?);
            Ok(parse_grpc_timeout(&headers))
        };
        assert_eq!(parse("3H")?, Some(Duration::from_secs(3 * 3600)));
        assert_eq!(parse("2M")?, Some(Duration::from_secs(120)));
        assert_eq!(parse("7S")?, Some(Duration::from_secs(7)));
        assert_eq!(parse("250m")?, Some(Duration::from_millis(250)));
        assert_eq!(parse("99999999u")?, Some(Duration::from_micros(99_999_999)));
        assert_eq!(parse("5n")?, Some(Duration::from_nanos(5)));
        assert_eq!(parse("0m")?, Some(Duration::ZERO));
        // Rust's u64 parser takes a leading `+`, so tonic does too.
        assert_eq!(parse("+5m")?, Some(Duration::from_millis(5)));
        for ignored in ["", "m", "100", "100x", "-5m", "123456789m", "1.5S", "5 m"] {
            assert_eq!(parse(ignored)?, None, "{ignored:?}");
        }
        assert_eq!(parse_grpc_timeout(&HeaderMap::new()), None);
        Ok(())
    }

    #[test]
    fn the_deadline_is_the_sooner_and_never_overflows() {
        let mut headers = HeaderMap::new();
        let server = CallDeadline::for_call(Duration::from_millis(5000), &headers);
        assert_eq!(server.source(), DeadlineSource::Server);
        headers.insert(GRPC_TIMEOUT, http::HeaderValue::from_static("100m"));
        let caller = CallDeadline::for_call(Duration::from_millis(5000), &headers);
        assert_eq!(caller.source(), DeadlineSource::Caller);
        assert!(caller.at() < server.at());
        // The largest --call-timeout-ms: no panic, a deadline far away.
        let far = CallDeadline::for_call(Duration::from_millis(u64::MAX), &HeaderMap::new());
        assert!(far.at() > Instant::now() + Duration::from_secs(365 * 24 * 60 * 60));
        assert_eq!(budget_text(Duration::from_micros(250)), "250µs");
    }
}
