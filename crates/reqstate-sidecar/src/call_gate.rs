//! Who may call, and how many at once: a malformed `:authority` (accepted on Unix sockets only), the bearer token, the Unix peer-uid allow-list, the global concurrency limit and the separate, smaller health limit, checked before any service sees a request; and the call deadline, held until a response stream ends.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use http::{HeaderMap, Request, Response};
use hyper::body::{Body as HttpBody, Bytes, Frame, SizeHint};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};
use tonic::Status;
use tonic::body::Body;
use tonic::transport::server::UdsConnectInfo;
use tower::{Layer, Service};

use crate::bearer::SharedBearerTokens;
use crate::metrics::Metrics;
use crate::wire;

/// Health checks need neither the bearer token nor an allowed uid, so that
/// orchestrator probes work without secrets; they have their own limits
/// instead (`--max-health-calls`, [`DEFAULT_MAX_HEALTH_CALLS`]).
const HEALTH_PATH_PREFIX: &str = "/grpc.health.v1.Health/";

/// The health `Watch` method: a stream, capped apart.
const HEALTH_WATCH_PATH: &str = "/grpc.health.v1.Health/Watch";

/// The default of `--max-health-calls`: most health calls (`Check` and
/// `Watch` together) in progress at once, apart from
/// `--max-concurrent-calls`. Health never takes the service's permits, and
/// cannot be used to hold more than this many.
pub const DEFAULT_MAX_HEALTH_CALLS: usize = 16;

/// The fewest health calls `--max-health-calls` accepts: one `Watch` and one
/// `Check`.
pub const MIN_HEALTH_CALLS: usize = 2;

/// Most health `Watch` streams open at once for a health limit of
/// `max_health_calls`: half of it, so `Check` always has the other half. Each
/// stream ends at the call deadline (`--call-timeout-ms`) with
/// `DEADLINE_EXCEEDED`.
pub const fn max_health_watches(max_health_calls: usize) -> usize {
    max_health_calls / 2
}

/// The metric label of every path that is not one of [`KNOWN_RPCS`].
pub const UNKNOWN_RPC: &str = "unknown";

/// Every gRPC method the sidecar serves, by full path, with its metric
/// label. Labels come only from this table (or [`UNKNOWN_RPC`]), never from
/// the caller's path, so no caller can add metric series.
pub const KNOWN_RPCS: &[(&str, &str)] = &[
    ("/reqstate.v1.RequestState/Mint", "Mint"),
    ("/reqstate.v1.RequestState/Verify", "Verify"),
    ("/reqstate.v1.RequestState/MintBatch", "MintBatch"),
    ("/reqstate.v1.RequestState/VerifyBatch", "VerifyBatch"),
    ("/reqstate.v1.RequestState/Seal", "Seal"),
    ("/reqstate.v1.RequestState/Unseal", "Unseal"),
    ("/reqstate.v1.RequestState/ListKeys", "ListKeys"),
    ("/grpc.health.v1.Health/Check", "Check"),
    (HEALTH_WATCH_PATH, "Watch"),
    (
        "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
        "ServerReflectionInfo",
    ),
    (
        "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
        "ServerReflectionInfo",
    ),
];

/// The metric label of a request path: the method name of a known rpc
/// (`/reqstate.v1.RequestState/Mint` → `Mint`), [`UNKNOWN_RPC`] for
/// anything else.
pub fn rpc_label(path: &str) -> &'static str {
    KNOWN_RPCS
        .iter()
        .find(|(known, _)| *known == path)
        .map_or(UNKNOWN_RPC, |(_, label)| label)
}

/// The admission policy shared by every connection.
#[derive(Debug)]
struct Admission {
    /// The bearer tokens accepted (swapped whole when their file reloads);
    /// `None`: no bearer authentication.
    bearer: Option<SharedBearerTokens>,
    allowed_uids: Vec<u32>,
    permits: Arc<Semaphore>,
    max_concurrent_calls: usize,
    max_health_calls: usize,
    health_permits: Arc<Semaphore>,
    watch_permits: Arc<Semaphore>,
    call_timeout: Duration,
    metrics: Arc<Metrics>,
}

/// Refuses a request whose `:authority` is not a valid URI authority unless
/// it came over a Unix socket.
///
/// gRPC's C core (Python, Ruby, PHP, C++), grpc-java and grpc-swift send a
/// Unix socket's path, percent-encoded (`tmp%2Freqstate.sock`), as the
/// authority. The vendored h2 (vendor/h2/PATCH.md) passes such requests on
/// with the raw value in [`h2::ext::MalformedAuthority`] instead of resetting
/// the stream. On a Unix socket the authority names nothing (the socket is
/// the address) and is accepted; on TCP it stays an error, as upstream h2
/// has it, answered `INVALID_ARGUMENT`.
fn check_authority<B>(request: &Request<B>) -> Result<(), Status> {
    let Some(malformed) = request.extensions().get::<h2::ext::MalformedAuthority>() else {
        return Ok(());
    };
    if request.extensions().get::<UdsConnectInfo>().is_some() {
        return Ok(());
    }
    Err(wire::invalid_argument(format!(
        "malformed :authority {:?}: not a valid URI authority (accepted on Unix sockets only)",
        String::from_utf8_lossy(malformed.as_bytes())
    )))
}

fn unauthenticated(message: &str) -> Status {
    wire::error_status(tonic::Code::Unauthenticated, "unauthenticated", message)
}

fn permission_denied(message: impl Into<String>) -> Status {
    wire::error_status(tonic::Code::PermissionDenied, "permission_denied", message)
}

fn overloaded(message: String) -> Status {
    wire::error_status(tonic::Code::ResourceExhausted, "overloaded", message)
}

/// The permits a call holds until its response body ends or is dropped.
#[derive(Debug)]
struct Held {
    _call: OwnedSemaphorePermit,
    _watch: Option<OwnedSemaphorePermit>,
}

impl Admission {
    fn check_bearer<B>(&self, request: &Request<B>) -> Result<(), Status> {
        let Some(accepted) = &self.bearer else {
            return Ok(());
        };
        let presented = request
            .headers()
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.as_bytes().strip_prefix(b"Bearer "))
            .ok_or_else(|| unauthenticated("missing `authorization: Bearer <token>` metadata"))?;
        if accepted.load().accepts(presented) {
            Ok(())
        } else {
            Err(unauthenticated("wrong bearer token"))
        }
    }

    fn check_peer_uid<B>(&self, request: &Request<B>) -> Result<(), Status> {
        if self.allowed_uids.is_empty() {
            return Ok(());
        }
        // Only Unix-socket connections carry peer credentials; the allow-list
        // does not apply to TCP, which has TLS and the bearer token.
        let Some(info) = request.extensions().get::<UdsConnectInfo>() else {
            return Ok(());
        };
        match info.peer_cred.map(|cred| cred.uid()) {
            Some(uid) if self.allowed_uids.contains(&uid) => Ok(()),
            Some(uid) => Err(permission_denied(format!(
                "uid {uid} is not in the sidecar's --allow-uid list"
            ))),
            None => Err(permission_denied(
                "the peer's credentials could not be read",
            )),
        }
    }

    /// A health call's permits: one of `max_health_calls`, and for `Watch`
    /// one of [`max_health_watches`] as well.
    fn admit_health(&self, path: &str) -> Result<Held, Status> {
        let watch = if path == HEALTH_WATCH_PATH {
            Some(
                self.watch_permits
                    .clone()
                    .try_acquire_owned()
                    .map_err(|_| {
                        overloaded(format!(
                            "the sidecar is at its limit of {} health Watch streams; \
                     use Check, or retry with backoff",
                            max_health_watches(self.max_health_calls)
                        ))
                    })?,
            )
        } else {
            None
        };
        let call = self
            .health_permits
            .clone()
            .try_acquire_owned()
            .map_err(|_| {
                overloaded(format!(
                    "the sidecar is at its limit of {} health calls in \
                     progress; retry with backoff",
                    self.max_health_calls
                ))
            })?;
        Ok(Held {
            _call: call,
            _watch: watch,
        })
    }

    /// Everything but health: bearer token, uid, then a service permit.
    fn admit_call<B>(&self, request: &Request<B>) -> Result<Held, (Status, &'static str)> {
        self.check_bearer(request)
            .map_err(|status| (status, "unauthenticated"))?;
        self.check_peer_uid(request)
            .map_err(|status| (status, "permission_denied"))?;
        let call = self.permits.clone().try_acquire_owned().map_err(|_| {
            let status = overloaded(format!(
                "the sidecar is at its limit of {} calls in progress; retry with backoff",
                self.max_concurrent_calls
            ));
            (status, "overloaded")
        })?;
        Ok(Held {
            _call: call,
            _watch: None,
        })
    }
}

/// A [`Layer`] that puts [`CallGate`] in front of the routes.
#[derive(Debug, Clone)]
pub struct CallGateLayer {
    admission: Arc<Admission>,
}

impl CallGateLayer {
    /// The gate for a bearer token (if any), a uid allow-list (empty: any
    /// uid), a global limit of calls in progress, a separate limit of health
    /// calls in progress (at least [`MIN_HEALTH_CALLS`]; half of it may be
    /// `Watch` streams), and the deadline by which every response, streams
    /// included, must have ended.
    pub fn new(
        bearer: Option<SharedBearerTokens>,
        allowed_uids: Vec<u32>,
        max_concurrent_calls: usize,
        max_health_calls: usize,
        call_timeout: Duration,
        metrics: Arc<Metrics>,
    ) -> Self {
        let max_health_calls = max_health_calls.max(MIN_HEALTH_CALLS);
        CallGateLayer {
            admission: Arc::new(Admission {
                bearer,
                allowed_uids,
                permits: Arc::new(Semaphore::new(max_concurrent_calls)),
                max_concurrent_calls,
                max_health_calls,
                health_permits: Arc::new(Semaphore::new(max_health_calls)),
                watch_permits: Arc::new(Semaphore::new(max_health_watches(max_health_calls))),
                call_timeout,
                metrics,
            }),
        }
    }
}

impl<S> Layer<S> for CallGateLayer {
    type Service = CallGate<S>;

    fn layer(&self, inner: S) -> CallGate<S> {
        CallGate {
            inner,
            admission: self.admission.clone(),
        }
    }
}

/// Refuses calls without the bearer token (UNAUTHENTICATED), from uids not
/// allowed (PERMISSION_DENIED), and beyond the concurrency limits
/// (RESOURCE_EXHAUSTED, at once, without queueing: load shedding). Health
/// calls skip the first two but have their own limits. A call holds its
/// permit until its response body has ended, and a response still streaming
/// at the call deadline is ended with DEADLINE_EXCEEDED.
#[derive(Debug, Clone)]
pub struct CallGate<S> {
    inner: S,
    admission: Arc<Admission>,
}

type BoxFuture<T, E> = Pin<Box<dyn Future<Output = Result<T, E>> + Send>>;

impl<S> Service<Request<Body>> for CallGate<S>
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
        // The clone that was polled ready serves this call; the fresh clone
        // stays for the next (tower's documented pattern).
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let admission = &self.admission;
        let deadline = Instant::now() + admission.call_timeout;
        let path = request.uri().path();
        let rpc = rpc_label(path);
        let admitted = if let Err(status) = check_authority(&request) {
            Err((status, "invalid_argument"))
        } else if path.starts_with(HEALTH_PATH_PREFIX) {
            admission
                .admit_health(path)
                .map_err(|status| (status, "overloaded"))
        } else {
            admission.admit_call(&request)
        };
        let held = match admitted {
            Ok(held) => held,
            Err((status, result)) => {
                admission.metrics.observe_refusal(rpc, result);
                tracing::info!(rpc, result, "call refused");
                return Box::pin(async move { Ok(status.into_http()) });
            }
        };
        let timeout = admission.call_timeout;
        Box::pin(async move {
            let response = inner.call(request).await?;
            Ok(response.map(|body| Body::new(GatedBody::new(body, held, deadline, timeout))))
        })
    }
}

/// A response body that holds its call's permits until it ends (or is
/// dropped: the client went away), and ends a stream still open at the
/// call deadline with `DEADLINE_EXCEEDED` trailers.
struct GatedBody {
    inner: Body,
    held: Option<Held>,
    deadline: Pin<Box<Sleep>>,
    timeout: Duration,
}

impl GatedBody {
    fn new(inner: Body, held: Held, deadline: Instant, timeout: Duration) -> Self {
        GatedBody {
            inner,
            held: Some(held),
            deadline: Box::pin(tokio::time::sleep_until(deadline)),
            timeout,
        }
    }

    fn finish(&mut self) {
        self.held = None;
        self.inner = Body::empty();
    }

    fn deadline_trailers(&self) -> Result<HeaderMap, Status> {
        let status = wire::error_status(
            tonic::Code::DeadlineExceeded,
            "deadline_exceeded",
            format!(
                "the call deadline of {} ms (--call-timeout-ms) passed; the stream is closed, \
             reopen it to continue",
                self.timeout.as_millis()
            ),
        );
        let mut trailers = HeaderMap::new();
        status.add_header(&mut trailers)?;
        Ok(trailers)
    }
}

impl HttpBody for GatedBody {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let this = self.get_mut();
        if this.held.is_none() {
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
            Poll::Pending => match this.deadline.as_mut().poll(cx) {
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
        self.held.is_none() || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        if self.held.is_none() {
            SizeHint::with_exact(0)
        } else {
            self.inner.size_hint()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower::ServiceExt as _;

    type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

    #[test]
    fn rpc_labels_come_from_a_fixed_set() {
        assert_eq!(rpc_label("/reqstate.v1.RequestState/Mint"), "Mint");
        assert_eq!(rpc_label("/grpc.health.v1.Health/Watch"), "Watch");
        for foreign in [
            "Mint",
            "/Mint",
            "/evil.Service/Mint",
            "/reqstate.v1.RequestState/Mint/",
            "/reqstate.v1.RequestState/Nope",
            "/reqstate.v1.RequestState/",
            "",
        ] {
            assert_eq!(rpc_label(foreign), UNKNOWN_RPC, "{foreign:?}");
        }
    }

    #[test]
    fn every_rpc_of_the_proto_has_its_label() {
        let proto = include_str!("../../../proto/reqstate/v1/reqstate.proto");
        let rpcs: Vec<&str> = proto
            .lines()
            .filter_map(|line| line.trim().strip_prefix("rpc "))
            .filter_map(|rest| rest.split('(').next())
            .collect();
        assert_eq!(rpcs.len(), 7, "{rpcs:?}");
        for rpc in rpcs {
            let path = format!("/reqstate.v1.RequestState/{rpc}");
            assert_eq!(rpc_label(&path), rpc, "{path}");
        }
    }

    fn admission(bearer: Option<&[u8]>) -> Result<Admission, prometheus::Error> {
        Ok(Admission {
            bearer: bearer.map(|token| {
                Arc::new(arc_swap::ArcSwap::from_pointee(
                    crate::bearer::BearerTokens::parse(token).expect("a valid token"),
                ))
            }),
            allowed_uids: Vec::new(),
            permits: Arc::new(Semaphore::new(1)),
            max_concurrent_calls: 1,
            max_health_calls: DEFAULT_MAX_HEALTH_CALLS,
            health_permits: Arc::new(Semaphore::new(DEFAULT_MAX_HEALTH_CALLS)),
            watch_permits: Arc::new(Semaphore::new(max_health_watches(DEFAULT_MAX_HEALTH_CALLS))),
            call_timeout: Duration::from_secs(5),
            metrics: Arc::new(Metrics::new()?),
        })
    }

    fn request_with(auth: Option<&str>) -> Result<Request<()>, http::Error> {
        let mut builder = Request::builder().uri("/reqstate.v1.RequestState/Mint");
        if let Some(value) = auth {
            builder = builder.header("authorization", value);
        }
        builder.body(())
    }

    fn status_of(response: &Response<Body>) -> Option<tonic::Code> {
        Status::from_header_map(response.headers()).map(|s| s.code())
    }

    #[tokio::test]
    async fn calls_beyond_the_limit_are_shed_at_once_and_health_has_its_own_limit() -> TestResult {
        let release = Arc::new(tokio::sync::Notify::new());
        let layer = CallGateLayer::new(
            None,
            Vec::new(),
            1,
            DEFAULT_MAX_HEALTH_CALLS,
            Duration::from_secs(60),
            Arc::new(Metrics::new()?),
        );
        // The real routes are not needed to hold a permit: any service that
        // is still working when the next call arrives does.
        let held = release.clone();
        let slow = tower::service_fn(move |_request: Request<Body>| {
            let held = held.clone();
            async move {
                held.notified().await;
                Ok::<_, std::convert::Infallible>(Response::new(Body::new(
                    http_body_util::Full::new(Bytes::from_static(b"done")),
                )))
            }
        });
        let gate = layer.layer(slow);
        let call = |path: &'static str| {
            let gate = gate.clone();
            async move {
                let request = Request::builder().uri(path).body(Body::empty())?;
                Ok::<_, Box<dyn std::error::Error + Send + Sync>>(gate.oneshot(request).await?)
            }
        };

        let first = tokio::spawn(call("/reqstate.v1.RequestState/Mint"));
        tokio::task::yield_now().await;
        let shed = call("/reqstate.v1.RequestState/Mint").await?;
        assert_eq!(status_of(&shed), Some(tonic::Code::ResourceExhausted));

        // Health does not take the service's permit, but has its own limit.
        let mut health = Vec::new();
        for _ in 0..DEFAULT_MAX_HEALTH_CALLS {
            health.push(tokio::spawn(call("/grpc.health.v1.Health/Check")));
        }
        tokio::task::yield_now().await;
        let shed = call("/grpc.health.v1.Health/Check").await?;
        assert_eq!(status_of(&shed), Some(tonic::Code::ResourceExhausted));

        release.notify_waiters();
        let first = first.await??;
        assert_eq!(status_of(&first), None, "the first call was refused");
        for call in health {
            assert_eq!(status_of(&call.await??), None);
        }
        // The permit is held until the response body is gone...
        let still_held = call("/reqstate.v1.RequestState/Mint").await?;
        assert_eq!(status_of(&still_held), Some(tonic::Code::ResourceExhausted));
        drop(first);
        // ...and then the next call goes through.
        release.notify_one();
        let after = call("/reqstate.v1.RequestState/Mint").await?;
        assert_eq!(status_of(&after), None);
        Ok(())
    }

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

    #[tokio::test]
    async fn streams_end_at_the_deadline_and_watches_are_capped() -> TestResult {
        use http_body_util::BodyExt as _;
        const DEADLINE: Duration = Duration::from_millis(50);
        let endless = tower::service_fn(|_request: Request<Body>| async {
            Ok::<_, std::convert::Infallible>(Response::new(Body::new(Endless)))
        });
        let gate = CallGateLayer::new(
            None,
            Vec::new(),
            1,
            DEFAULT_MAX_HEALTH_CALLS,
            DEADLINE,
            Arc::new(Metrics::new()?),
        )
        .layer(endless);
        let watch = || {
            let gate = gate.clone();
            async move {
                let request = Request::builder()
                    .uri(HEALTH_WATCH_PATH)
                    .body(Body::empty())?;
                Ok::<_, Box<dyn std::error::Error + Send + Sync>>(gate.oneshot(request).await?)
            }
        };
        let started = Instant::now();
        let mut open = Vec::new();
        for _ in 0..max_health_watches(DEFAULT_MAX_HEALTH_CALLS) {
            let response = watch().await?;
            assert_eq!(status_of(&response), None);
            open.push(response);
        }
        let refused = watch().await?;
        assert_eq!(status_of(&refused), Some(tonic::Code::ResourceExhausted));

        // The endless body is ended by the gate (10 s is only how long the
        // test waits for that), never before the deadline, with
        // DEADLINE_EXCEEDED trailers.
        let collected = tokio::time::timeout(
            Duration::from_secs(10),
            open.remove(0).into_body().collect(),
        )
        .await??;
        assert!(started.elapsed() >= DEADLINE);
        let trailers = collected.trailers().ok_or("no trailers")?;
        let status = Status::from_header_map(trailers).ok_or("no grpc-status")?;
        assert_eq!(status.code(), tonic::Code::DeadlineExceeded);
        // Its permit is back.
        assert_eq!(status_of(&watch().await?), None);
        Ok(())
    }

    #[test]
    fn bearer_token_must_match_exactly() -> Result<(), Box<dyn std::error::Error>> {
        let gate = admission(Some(b"s3cret"))?;
        assert!(
            gate.check_bearer(&request_with(Some("Bearer s3cret"))?)
                .is_ok()
        );
        for wrong in [
            None,
            Some("Bearer s3cre"),
            Some("Bearer s3cret2"),
            Some("s3cret"),
        ] {
            let status = gate
                .check_bearer(&request_with(wrong)?)
                .err()
                .ok_or("a wrong token was accepted")?;
            assert_eq!(status.code(), tonic::Code::Unauthenticated);
        }
        Ok(())
    }
}
