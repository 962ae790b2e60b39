//! Concurrency limits and load shedding: at most `--max-concurrent-calls`
//! service calls, and apart from them at most `--max-health-calls` health
//! calls of which at most half are `Watch` streams, in progress at once. A
//! call beyond a limit is shed at once with `RESOURCE_EXHAUSTED` (no queue:
//! a queued call would only time out later, holding its connection), and an
//! admitted call holds its permits until its response body has ended or is
//! dropped (the caller went away), so streams count for as long as they
//! are open.
//!
//! Limiting and shedding are one layer here, not tower's `ConcurrencyLimit`
//! under `LoadShed`: those decide in `poll_ready`, before the request and
//! so its path (service or health, `Check` or `Watch`) is known, and give
//! the permit back when the response future resolves, before a stream's
//! body has been sent.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response};
use hyper::body::{Body as HttpBody, Bytes, Frame, SizeHint};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tonic::Status;
use tonic::body::Body;
use tower::{Layer, Service};

use super::{CallError, HEALTH_WATCH_PATH, MIN_HEALTH_CALLS, is_health, max_health_watches};
use crate::wire;

/// The permits shared by every connection of every listener.
#[derive(Debug)]
struct Permits {
    calls: Arc<Semaphore>,
    max_concurrent_calls: usize,
    health: Arc<Semaphore>,
    max_health_calls: usize,
    watches: Arc<Semaphore>,
}

/// The permits a call holds until its response body ends or is dropped.
#[derive(Debug)]
struct Held {
    _call: OwnedSemaphorePermit,
    _watch: Option<OwnedSemaphorePermit>,
}

fn overloaded(message: String) -> CallError {
    CallError::refused(
        wire::error_status(tonic::Code::ResourceExhausted, "overloaded", message),
        "overloaded",
    )
}

impl Permits {
    /// The permits for a call to `path`, or its refusal.
    fn admit(&self, path: &str) -> Result<Held, CallError> {
        if !is_health(path) {
            let call = self.calls.clone().try_acquire_owned().map_err(|_| {
                overloaded(format!(
                    "the sidecar is at its limit of {} calls in progress; retry with backoff",
                    self.max_concurrent_calls
                ))
            })?;
            return Ok(Held {
                _call: call,
                _watch: None,
            });
        }
        // A health call: one of `max_health_calls`, and for `Watch` one of
        // `max_health_watches` as well.
        let watch = if path == HEALTH_WATCH_PATH {
            Some(self.watches.clone().try_acquire_owned().map_err(|_| {
                overloaded(format!(
                    "the sidecar is at its limit of {} health Watch streams; \
                     use Check, or retry with backoff",
                    max_health_watches(self.max_health_calls)
                ))
            })?)
        } else {
            None
        };
        let call = self.health.clone().try_acquire_owned().map_err(|_| {
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
}

/// A [`Layer`] that puts [`Limit`] in front of a service; every clone, and
/// every service it makes, shares the same permits.
#[derive(Debug, Clone)]
pub struct LimitLayer {
    permits: Arc<Permits>,
}

impl LimitLayer {
    /// At most `max_concurrent_calls` service calls and, apart from them,
    /// `max_health_calls` health calls (raised to [`MIN_HEALTH_CALLS`]) of
    /// which [`max_health_watches`] may be `Watch` streams.
    pub fn new(max_concurrent_calls: usize, max_health_calls: usize) -> Self {
        let max_health_calls = max_health_calls.max(MIN_HEALTH_CALLS);
        LimitLayer {
            permits: Arc::new(Permits {
                calls: Arc::new(Semaphore::new(max_concurrent_calls)),
                max_concurrent_calls,
                health: Arc::new(Semaphore::new(max_health_calls)),
                max_health_calls,
                watches: Arc::new(Semaphore::new(max_health_watches(max_health_calls))),
            }),
        }
    }
}

impl<S> Layer<S> for LimitLayer {
    type Service = Limit<S>;

    fn layer(&self, inner: S) -> Limit<S> {
        Limit {
            inner,
            permits: self.permits.clone(),
        }
    }
}

/// Sheds calls beyond the limits (`RESOURCE_EXHAUSTED`, counted as
/// `overloaded`) and holds an admitted call's permits until its response
/// body is done.
#[derive(Debug, Clone)]
pub struct Limit<S> {
    inner: S,
    permits: Arc<Permits>,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = Result<T, CallError>> + Send>>;

impl<S> Service<Request<Body>> for Limit<S>
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
        let held = match self.permits.admit(request.uri().path()) {
            Ok(held) => held,
            Err(refusal) => return Box::pin(std::future::ready(Err(refusal))),
        };
        let response = self.inner.call(request);
        Box::pin(async move {
            // An error (the deadline) drops the permits with this future.
            let response = response.await.map_err(Into::into)?;
            Ok(response.map(|body| Body::new(HeldBody::new(body, held))))
        })
    }
}

/// A response body that holds its call's permits until it ends, fails, or
/// is dropped.
struct HeldBody {
    inner: Body,
    held: Option<Held>,
}

impl HeldBody {
    fn new(inner: Body, held: Held) -> Self {
        HeldBody {
            inner,
            held: Some(held),
        }
    }
}

impl HttpBody for HeldBody {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let this = self.get_mut();
        let frame = Pin::new(&mut this.inner).poll_frame(cx);
        let done = match &frame {
            Poll::Ready(Some(Ok(frame))) => frame.is_trailers(),
            Poll::Ready(Some(Err(_)) | None) => true,
            Poll::Pending => false,
        };
        if done {
            this.held = None;
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt as _;
    use tower::ServiceExt as _;

    use crate::call_gate::DEFAULT_MAX_HEALTH_CALLS;

    type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

    fn refused_with(result: &Result<Response<Body>, CallError>) -> Option<tonic::Code> {
        result.as_ref().err().map(|e| e.status().code())
    }

    #[tokio::test]
    async fn calls_beyond_the_limit_are_shed_at_once_and_health_has_its_own_limit() -> TestResult {
        let release = Arc::new(tokio::sync::Notify::new());
        // Any service still working when the next call arrives holds a
        // permit; the real routes are not needed.
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
        let limit = LimitLayer::new(1, DEFAULT_MAX_HEALTH_CALLS).layer(slow);
        let call = |path: &'static str| {
            let limit = limit.clone();
            async move {
                let request = Request::builder().uri(path).body(Body::empty())?;
                Ok::<_, Box<dyn std::error::Error + Send + Sync>>(limit.oneshot(request).await)
            }
        };

        let first = tokio::spawn(call("/reqstate.v1.RequestState/Mint"));
        tokio::task::yield_now().await;
        let shed = call("/reqstate.v1.RequestState/Mint").await?;
        assert_eq!(refused_with(&shed), Some(tonic::Code::ResourceExhausted));
        assert_eq!(shed.err().map(|e| e.result()), Some("overloaded"));

        // Health does not take the service's permit, but has its own limit.
        let mut health = Vec::new();
        for _ in 0..DEFAULT_MAX_HEALTH_CALLS {
            health.push(tokio::spawn(call("/grpc.health.v1.Health/Check")));
        }
        tokio::task::yield_now().await;
        let shed = call("/grpc.health.v1.Health/Check").await?;
        assert_eq!(refused_with(&shed), Some(tonic::Code::ResourceExhausted));

        release.notify_waiters();
        let first = first.await??.map_err(|e| e.to_string())?;
        for call in health {
            assert!(call.await??.is_ok());
        }
        // The permit is held until the response body is gone...
        let still_held = call("/reqstate.v1.RequestState/Mint").await?;
        assert_eq!(
            refused_with(&still_held),
            Some(tonic::Code::ResourceExhausted)
        );
        drop(first);
        // ...and then the next call goes through.
        release.notify_one();
        let after = call("/reqstate.v1.RequestState/Mint").await?;
        assert!(after.is_ok());
        Ok(())
    }

    #[tokio::test]
    async fn watches_are_capped_at_half_and_a_body_read_to_its_end_gives_the_permit_back()
    -> TestResult {
        let answer = tower::service_fn(|_request: Request<Body>| async {
            Ok::<_, std::convert::Infallible>(Response::new(Body::new(http_body_util::Full::new(
                Bytes::from_static(b"status"),
            ))))
        });
        let limit = LimitLayer::new(1, DEFAULT_MAX_HEALTH_CALLS).layer(answer);
        let call = |path: &'static str| {
            let limit = limit.clone();
            async move {
                let request = Request::builder().uri(path).body(Body::empty())?;
                Ok::<_, Box<dyn std::error::Error + Send + Sync>>(limit.oneshot(request).await)
            }
        };
        let mut open = Vec::new();
        for _ in 0..max_health_watches(DEFAULT_MAX_HEALTH_CALLS) {
            open.push(call(HEALTH_WATCH_PATH).await?.map_err(|e| e.to_string())?);
        }
        let refused = call(HEALTH_WATCH_PATH).await?;
        assert_eq!(refused_with(&refused), Some(tonic::Code::ResourceExhausted));
        // Check still has the other half.
        assert!(call("/grpc.health.v1.Health/Check").await?.is_ok());
        // A body read to its end gives its permits back, even before it is
        // dropped.
        let mut body = open.remove(0).into_body();
        while body.frame().await.is_some() {}
        assert!(call(HEALTH_WATCH_PATH).await?.is_ok());
        drop(body);
        Ok(())
    }

    #[test]
    fn the_health_limit_is_never_below_its_minimum() {
        let layer = LimitLayer::new(0, 0);
        assert_eq!(layer.permits.max_health_calls, MIN_HEALTH_CALLS);
        assert_eq!(
            layer.permits.watches.available_permits(),
            max_health_watches(MIN_HEALTH_CALLS)
        );
        assert_eq!(layer.permits.calls.available_permits(), 0);
    }
}
