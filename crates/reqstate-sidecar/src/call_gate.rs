//! Who may call, and how many at once: the bearer token, the Unix peer-uid allow-list and the global concurrency limit, checked before any service sees a request.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response};
use ring::digest;
use subtle::ConstantTimeEq;
use tokio::sync::Semaphore;
use tonic::Status;
use tonic::body::Body;
use tonic::transport::server::UdsConnectInfo;
use tower::{Layer, Service};

use crate::config::BearerToken;
use crate::metrics::Metrics;

/// Health checks pass the gate untouched so that orchestrator probes work
/// without the token.
const HEALTH_PATH_PREFIX: &str = "/grpc.health.v1.Health/";

/// The admission policy shared by every connection.
#[derive(Debug)]
struct Admission {
    /// SHA-256 of the expected bearer token: comparing digests in constant
    /// time hides the token's length as well as its bytes.
    bearer_digest: Option<[u8; 32]>,
    allowed_uids: Vec<u32>,
    permits: Arc<Semaphore>,
    max_concurrent_calls: usize,
    metrics: Arc<Metrics>,
}

fn sha256(bytes: &[u8]) -> [u8; 32] {
    let mut out = [0u8; 32];
    out.copy_from_slice(digest::digest(&digest::SHA256, bytes).as_ref());
    out
}

impl Admission {
    fn check_bearer<B>(&self, request: &Request<B>) -> Result<(), Status> {
        let Some(expected) = &self.bearer_digest else {
            return Ok(());
        };
        let presented = request
            .headers()
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.as_bytes().strip_prefix(b"Bearer "))
            .ok_or_else(|| {
                Status::unauthenticated("missing `authorization: Bearer <token>` metadata")
            })?;
        if bool::from(sha256(presented).ct_eq(expected)) {
            Ok(())
        } else {
            Err(Status::unauthenticated("wrong bearer token"))
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
            Some(uid) => Err(Status::permission_denied(format!(
                "uid {uid} is not in the sidecar's --allow-uid list"
            ))),
            None => Err(Status::permission_denied(
                "the peer's credentials could not be read",
            )),
        }
    }
}

/// The rpc name of a gRPC path (`/reqstate.v1.RequestState/Mint` → `Mint`),
/// for metric labels.
fn rpc_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// A [`Layer`] that puts [`CallGate`] in front of the routes.
#[derive(Debug, Clone)]
pub struct CallGateLayer {
    admission: Arc<Admission>,
}

impl CallGateLayer {
    /// The gate for a bearer token (if any), a uid allow-list (empty: any
    /// uid) and a global limit of calls in progress.
    pub fn new(
        bearer: Option<&BearerToken>,
        allowed_uids: Vec<u32>,
        max_concurrent_calls: usize,
        metrics: Arc<Metrics>,
    ) -> Self {
        CallGateLayer {
            admission: Arc::new(Admission {
                bearer_digest: bearer.map(|t| sha256(t.expose())),
                allowed_uids,
                permits: Arc::new(Semaphore::new(max_concurrent_calls)),
                max_concurrent_calls,
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
/// allowed (PERMISSION_DENIED), and beyond the concurrency limit
/// (RESOURCE_EXHAUSTED, at once, without queueing: load shedding).
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
        if request.uri().path().starts_with(HEALTH_PATH_PREFIX) {
            return Box::pin(inner.call(request));
        }
        let admission = &self.admission;
        let rpc = rpc_name(request.uri().path()).to_owned();
        let refusal = admission
            .check_bearer(&request)
            .and_then(|()| admission.check_peer_uid(&request));
        if let Err(status) = refusal {
            let result = match status.code() {
                tonic::Code::Unauthenticated => "unauthenticated",
                _ => "permission_denied",
            };
            admission.metrics.observe_refusal(&rpc, result);
            tracing::info!(rpc, result, "call refused");
            return Box::pin(async move { Ok(status.into_http()) });
        }
        let Ok(permit) = admission.permits.clone().try_acquire_owned() else {
            admission.metrics.observe_refusal(&rpc, "overloaded");
            let status = Status::resource_exhausted(format!(
                "the sidecar is at its limit of {} calls in progress; retry with backoff",
                admission.max_concurrent_calls
            ));
            return Box::pin(async move { Ok(status.into_http()) });
        };
        Box::pin(async move {
            let response = inner.call(request).await;
            drop(permit);
            response
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rpc_name_is_the_last_path_segment() {
        assert_eq!(rpc_name("/reqstate.v1.RequestState/Mint"), "Mint");
        assert_eq!(rpc_name("Mint"), "Mint");
    }

    fn admission(bearer: Option<&[u8]>) -> Result<Admission, prometheus::Error> {
        Ok(Admission {
            bearer_digest: bearer.map(sha256),
            allowed_uids: Vec::new(),
            permits: Arc::new(Semaphore::new(1)),
            max_concurrent_calls: 1,
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

    #[tokio::test]
    async fn calls_beyond_the_limit_are_shed_at_once_and_health_is_never_shed()
    -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        use tower::ServiceExt as _;
        let release = Arc::new(tokio::sync::Notify::new());
        let held = release.clone();
        // The real routes are not needed to hold a permit: any service that
        // is still working when the next call arrives does.
        let slow = tower::service_fn(move |_request: Request<Body>| {
            let held = held.clone();
            async move {
                held.notified().await;
                Ok::<_, std::convert::Infallible>(Response::new(Body::empty()))
            }
        });
        let layer = CallGateLayer::new(None, Vec::new(), 1, Arc::new(Metrics::new()?));
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
        let status = Status::from_header_map(shed.headers()).ok_or("no grpc-status")?;
        assert_eq!(status.code(), tonic::Code::ResourceExhausted);

        // Health bypasses the limit: it gets to the (slow) service.
        let health = tokio::spawn(call("/grpc.health.v1.Health/Check"));
        tokio::task::yield_now().await;
        release.notify_waiters();
        let first = first.await??;
        assert!(
            Status::from_header_map(first.headers()).is_none(),
            "the first call was refused"
        );
        let health = health.await??;
        assert!(Status::from_header_map(health.headers()).is_none());

        // The permit is back: the next call goes through.
        release.notify_one();
        let after = call("/reqstate.v1.RequestState/Mint").await?;
        assert!(Status::from_header_map(after.headers()).is_none());
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
