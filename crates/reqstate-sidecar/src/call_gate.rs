//! The call gate: what stands between a listener and the routes, as one
//! tower layer per concern, assembled in one place ([`CallGateLayer`]).
//!
//! Outermost first (a request passes down this list, its response up it):
//!
//! | layer | concern | refuses with |
//! |---|---|---|
//! | [`respond`] | error mapping: a [`CallError`] from any layer below becomes a gRPC status response, counted in `reqstate_calls_total` and logged | (none; it answers) |
//! | [`authority`] | a malformed `:authority` (accepted on Unix sockets only) | `INVALID_ARGUMENT` |
//! | [`bearer_auth`] | the bearer token (health exempt) | `UNAUTHENTICATED` |
//! | [`peer_uid`] | the Unix peer-uid allow-list (health exempt) | `PERMISSION_DENIED` |
//! | [`limit`] | concurrency limits, held until the response body ends, and load shedding beyond them | `RESOURCE_EXHAUSTED` |
//! | [`deadline`] | the call deadline, one rule for every call shape | `DEADLINE_EXCEEDED` |
//! | [`CallMetricsLayer`] | per-call counts and latency of the service's rpcs | (none) |
//!
//! Why this order:
//!
//! - **Error mapping is outermost** so that every refusal and every deadline
//!   reaches the caller through one place, as one kind of value, and is
//!   counted exactly once; the layers below only say *why* (`Err(CallError)`).
//! - **`:authority` comes first among the checks**: it is about how the
//!   request reached us (its HTTP/2 framing on this kind of listener), which
//!   is decided before anything the request claims is looked at.
//! - **Who before how many**: the bearer token, then the uid, then the
//!   limits. A caller without the token or an allowed uid is refused before it
//!   is counted against any limit, so it learns nothing about the load and
//!   cannot be told `RESOURCE_EXHAUSTED` instead of `UNAUTHENTICATED`. Bearer
//!   before uid keeps the answer a caller with neither gets the same as
//!   before (`UNAUTHENTICATED`).
//! - **Limits before the deadline**: a shed call costs no timer, and a
//!   permit is held for the whole of the call, including the moment the
//!   deadline ends it (the deadline's body ends inside the limit's body,
//!   which then gives the permit back).
//! - **The deadline above the call metrics, and every layer above the
//!   deadline calls its inner service synchronously in `call`**: tonic's
//!   server reads a caller's `grpc-timeout` itself, outside these layers,
//!   and would answer `CANCELLED` when its own timer fires. Its timer is
//!   started right after these layers' `call` returns, so the deadline this
//!   gate takes before that, for the same or a shorter duration, is never
//!   later; and when both fire on the same timer tick, tonic polls the call
//!   before its own timer, so the gate's `DEADLINE_EXCEEDED` is what goes
//!   out. A layer that called its inner service from its future would
//!   break this (the test `a_callers_grpc_timeout_ends_the_call_deadline_exceeded_too`
//!   in `serve.rs` then sees `CANCELLED`). (The metrics
//!   layer calls its service lazily, from its future; below the deadline that
//!   does not matter.) The servers are built without `Server::timeout`, so
//!   tonic has no timer of its own otherwise. A call the deadline stops
//!   before its response is counted by [`respond`] (`deadline_exceeded`),
//!   since the metrics layer's future is dropped with the call.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::{Either, MapErr, Ready, TryFutureExt as _};
use http::Response;
use tonic::body::Body;
use tower::{Layer, ServiceBuilder};

use crate::bearer::SharedBearerTokens;
use crate::call_metrics::{CallMetrics, CallMetricsLayer};
use crate::metrics::Metrics;

pub mod authority;
pub mod bearer_auth;
pub mod deadline;
pub mod limit;
pub mod peer_uid;
pub mod respond;

pub use respond::CallError;

/// Health checks need neither the bearer token nor an allowed uid, so that
/// orchestrator probes work without secrets; they have their own limits
/// instead (`--max-health-calls`, [`DEFAULT_MAX_HEALTH_CALLS`]).
const HEALTH_PATH_PREFIX: &str = "/grpc.health.v1.Health/";

/// The health `Watch` method: a stream, capped apart.
const HEALTH_WATCH_PATH: &str = "/grpc.health.v1.Health/Watch";

/// Whether `path` is a health call (any method of `grpc.health.v1.Health`):
/// exempt from the bearer token and the uid allow-list, limited apart.
fn is_health(path: &str) -> bool {
    path.starts_with(HEALTH_PATH_PREFIX)
}

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

/// The future of a check layer ([`authority`], [`bearer_auth`],
/// [`peer_uid`]): refused at once, or the inner service's future with its
/// error as a [`CallError`]. No allocation: checks are on every call.
pub type Checked<F, E> =
    Either<Ready<Result<Response<Body>, CallError>>, MapErr<F, fn(E) -> CallError>>;

/// A check layer's refusal.
fn refuse<F, E>(error: CallError) -> Checked<F, E> {
    Either::Left(futures_util::future::ready(Err(error)))
}

/// A check layer passing the call on to `future`, its inner service's.
fn pass<F, E>(future: F) -> Checked<F, E>
where
    F: std::future::Future<Output = Result<Response<Body>, E>>,
    E: Into<CallError>,
{
    Either::Right(future.map_err(<E as Into<CallError>>::into as fn(E) -> CallError))
}

/// The whole gate in front of `S`, outermost first: the order of the table
/// in this module's documentation.
pub type CallGate<S> = respond::Respond<
    authority::Authority<
        bearer_auth::BearerAuth<
            peer_uid::PeerUid<limit::Limit<deadline::Deadline<CallMetrics<S>>>>,
        >,
    >,
>;

/// A [`Layer`] that puts the whole [`CallGate`] in front of the routes:
/// every listener's server gets a clone (the limits are shared by all).
#[derive(Debug, Clone)]
pub struct CallGateLayer {
    respond: respond::RespondLayer,
    bearer: bearer_auth::BearerAuthLayer,
    peer_uid: peer_uid::PeerUidLayer,
    limit: limit::LimitLayer,
    deadline: deadline::DeadlineLayer,
    metrics: CallMetricsLayer,
}

impl CallGateLayer {
    /// The gate for a bearer token (if any), a uid allow-list (empty: any
    /// uid), a global limit of calls in progress, a separate limit of health
    /// calls in progress (at least [`MIN_HEALTH_CALLS`]; half of it may be
    /// `Watch` streams), and the deadline by which every call, streams
    /// included, must have ended (a shorter `grpc-timeout` from the caller
    /// wins).
    pub fn new(
        bearer: Option<SharedBearerTokens>,
        allowed_uids: Vec<u32>,
        max_concurrent_calls: usize,
        max_health_calls: usize,
        call_timeout: Duration,
        metrics: Arc<Metrics>,
    ) -> Self {
        CallGateLayer {
            respond: respond::RespondLayer::new(metrics.clone()),
            bearer: bearer_auth::BearerAuthLayer::new(bearer),
            peer_uid: peer_uid::PeerUidLayer::new(allowed_uids),
            limit: limit::LimitLayer::new(max_concurrent_calls, max_health_calls),
            deadline: deadline::DeadlineLayer::new(call_timeout),
            metrics: CallMetricsLayer::new(metrics),
        }
    }
}

impl<S> Layer<S> for CallGateLayer {
    type Service = CallGate<S>;

    fn layer(&self, routes: S) -> CallGate<S> {
        // The one place the order is decided: see this module's
        // documentation for why it is this one.
        ServiceBuilder::new()
            .layer(self.respond.clone())
            .layer(authority::AuthorityLayer)
            .layer(self.bearer.clone())
            .layer(self.peer_uid.clone())
            .layer(self.limit.clone())
            .layer(self.deadline)
            .layer(self.metrics.clone())
            .service(routes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use http::{Request, Response};
    use hyper::body::Bytes;
    use tonic::Status;
    use tonic::body::Body;
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

    fn status_of(response: &Response<Body>) -> Option<tonic::Code> {
        Status::from_header_map(response.headers()).map(|s| s.code())
    }

    /// The assembled gate answers in the documented order: who (token, then
    /// uid) before how many, health exempt from who but limited apart, and
    /// a refusal never reaches the routes. (The `:authority` check, first of
    /// all, is covered in its module: its marker cannot be made outside h2.)
    #[tokio::test]
    async fn the_assembled_gate_checks_who_before_how_many() -> TestResult {
        let token = Arc::new(arc_swap::ArcSwap::from_pointee(
            crate::bearer::BearerTokens::parse(b"s3cret")?,
        ));
        let (client, _server) = tokio::net::UnixStream::pair()?;
        let own = client.peer_cred()?;
        let metrics = Arc::new(Metrics::new()?);
        // No service permit at all: any service call that reaches the limit
        // is shed.
        let gate = CallGateLayer::new(
            Some(token),
            vec![own.uid()],
            0,
            DEFAULT_MAX_HEALTH_CALLS,
            Duration::from_secs(60),
            metrics.clone(),
        );
        let reached = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = reached.clone();
        let routes = gate.layer(tower::service_fn(move |_request: Request<Body>| {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            async {
                Ok::<_, std::convert::Infallible>(Response::new(Body::new(
                    http_body_util::Full::new(Bytes::from_static(b"ok")),
                )))
            }
        }));
        let call = |auth: Option<&'static str>,
                    cred: Option<tokio::net::unix::UCred>,
                    path: &'static str| {
            let routes = routes.clone();
            async move {
                let mut request = Request::builder().uri(path);
                if let Some(auth) = auth {
                    request = request.header("authorization", auth);
                }
                let mut request = request.body(Body::empty())?;
                request
                    .extensions_mut()
                    .insert(tonic::transport::server::UdsConnectInfo {
                        peer_addr: None,
                        peer_cred: cred,
                    });
                Ok::<_, Box<dyn std::error::Error + Send + Sync>>(routes.oneshot(request).await?)
            }
        };
        let mint = "/reqstate.v1.RequestState/Mint";
        // Neither token nor credentials nor a permit: the token is checked
        // first...
        let refused = call(None, None, mint).await?;
        assert_eq!(status_of(&refused), Some(tonic::Code::Unauthenticated));
        // ...then the uid...
        let refused = call(Some("Bearer s3cret"), None, mint).await?;
        assert_eq!(status_of(&refused), Some(tonic::Code::PermissionDenied));
        // ...and only a caller who passes both meets the limit.
        let refused = call(Some("Bearer s3cret"), Some(own), mint).await?;
        assert_eq!(status_of(&refused), Some(tonic::Code::ResourceExhausted));
        // Health skips who, and has its own limit, not the service's.
        let health = call(None, None, "/grpc.health.v1.Health/Check").await?;
        assert_eq!(status_of(&health), None);
        assert_eq!(reached.load(std::sync::atomic::Ordering::SeqCst), 1);
        // Each refusal was counted once, by the error-mapping layer.
        let page = String::from_utf8(metrics.render())?;
        for series in [
            "reqstate_calls_total{result=\"unauthenticated\",rpc=\"Mint\"} 1",
            "reqstate_calls_total{result=\"permission_denied\",rpc=\"Mint\"} 1",
            "reqstate_calls_total{result=\"overloaded\",rpc=\"Mint\"} 1",
        ] {
            assert!(page.contains(series), "{series} missing from\n{page}");
        }
        Ok(())
    }
}
