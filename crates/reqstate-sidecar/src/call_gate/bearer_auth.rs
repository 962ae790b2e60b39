//! Bearer authentication: every call but health needs `authorization:
//! Bearer <token>` with one of the accepted tokens (compared in constant
//! time by [`crate::bearer::BearerTokens::accepts`]); missing or wrong is
//! `UNAUTHENTICATED`. The tokens are read at each call from the shared
//! set, which a reload swaps whole.

use std::task::{Context, Poll};

use http::{Request, Response};
use tonic::body::Body;
use tower::{Layer, Service};

use super::{CallError, Checked, is_health, pass, refuse};
use crate::bearer::SharedBearerTokens;
use crate::wire;

/// A [`Layer`] that puts [`BearerAuth`] in front of a service.
#[derive(Debug, Clone)]
pub struct BearerAuthLayer {
    tokens: Option<SharedBearerTokens>,
}

impl BearerAuthLayer {
    /// Accepts `tokens` (swapped whole when their file reloads); `None`: no
    /// bearer authentication, every call passes.
    pub fn new(tokens: Option<SharedBearerTokens>) -> Self {
        BearerAuthLayer { tokens }
    }
}

impl<S> Layer<S> for BearerAuthLayer {
    type Service = BearerAuth<S>;

    fn layer(&self, inner: S) -> BearerAuth<S> {
        BearerAuth {
            inner,
            tokens: self.tokens.clone(),
        }
    }
}

/// Refuses a call without an accepted bearer token (`UNAUTHENTICATED`,
/// counted as `unauthenticated`); health calls pass without one.
#[derive(Debug, Clone)]
pub struct BearerAuth<S> {
    inner: S,
    tokens: Option<SharedBearerTokens>,
}

fn unauthenticated(message: &str) -> CallError {
    CallError::refused(
        wire::error_status(tonic::Code::Unauthenticated, "unauthenticated", message),
        "unauthenticated",
    )
}

/// Whether `request` may pass: no tokens configured, a health call, or one
/// of `tokens` presented exactly.
fn check<B>(tokens: Option<&SharedBearerTokens>, request: &Request<B>) -> Result<(), CallError> {
    let Some(accepted) = tokens else {
        return Ok(());
    };
    if is_health(request.uri().path()) {
        return Ok(());
    }
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

impl<S> Service<Request<Body>> for BearerAuth<S>
where
    S: Service<Request<Body>, Response = Response<Body>>,
    S::Error: Into<CallError>,
{
    type Response = Response<Body>;
    type Error = CallError;
    type Future = Checked<S::Future, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), CallError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        match check(self.tokens.as_ref(), &request) {
            Ok(()) => pass(self.inner.call(request)),
            Err(refusal) => refuse(refusal),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tower::ServiceExt as _;

    type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

    fn tokens(token: &[u8]) -> Result<SharedBearerTokens, String> {
        Ok(Arc::new(arc_swap::ArcSwap::from_pointee(
            crate::bearer::BearerTokens::parse(token)?,
        )))
    }

    fn request_to(path: &str, auth: Option<&str>) -> Result<Request<()>, http::Error> {
        let mut builder = Request::builder().uri(path);
        if let Some(value) = auth {
            builder = builder.header("authorization", value);
        }
        builder.body(())
    }

    const MINT: &str = "/reqstate.v1.RequestState/Mint";

    #[test]
    fn bearer_token_must_match_exactly() -> TestResult {
        let accepted = tokens(b"s3cret")?;
        assert!(check(Some(&accepted), &request_to(MINT, Some("Bearer s3cret"))?).is_ok());
        for wrong in [
            None,
            Some("Bearer s3cre"),
            Some("Bearer s3cret2"),
            Some("s3cret"),
            Some("bearer s3cret"),
            Some("Bearer  s3cret"),
        ] {
            let refusal = check(Some(&accepted), &request_to(MINT, wrong)?)
                .err()
                .ok_or("a wrong token was accepted")?;
            assert_eq!(refusal.status().code(), tonic::Code::Unauthenticated);
            assert_eq!(refusal.result(), "unauthenticated");
        }
        Ok(())
    }

    #[test]
    fn health_and_an_unauthenticated_sidecar_need_no_token() -> TestResult {
        let accepted = tokens(b"s3cret")?;
        for path in [
            "/grpc.health.v1.Health/Check",
            "/grpc.health.v1.Health/Watch",
        ] {
            assert!(
                check(Some(&accepted), &request_to(path, None)?).is_ok(),
                "{path}"
            );
        }
        // Reflection is not health: it needs the token.
        assert!(
            check(
                Some(&accepted),
                &request_to(
                    "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
                    None
                )?
            )
            .is_err()
        );
        assert!(check(None, &request_to(MINT, None)?).is_ok());
        Ok(())
    }

    #[tokio::test]
    async fn a_refused_call_never_reaches_the_service_and_a_reload_applies_at_once() -> TestResult {
        let accepted = tokens(b"old")?;
        let reached = Arc::new(AtomicUsize::new(0));
        let counter = reached.clone();
        let service = BearerAuthLayer::new(Some(accepted.clone())).layer(tower::service_fn(
            move |_request: Request<Body>| {
                counter.fetch_add(1, Ordering::SeqCst);
                async { Ok::<_, std::convert::Infallible>(Response::new(Body::empty())) }
            },
        ));
        let call = |auth: &'static str| {
            let service = service.clone();
            async move {
                let request = Request::builder()
                    .uri(MINT)
                    .header("authorization", auth)
                    .body(Body::empty())?;
                Ok::<_, Box<dyn std::error::Error + Send + Sync>>(service.oneshot(request).await)
            }
        };
        assert!(call("Bearer new").await?.is_err());
        assert_eq!(reached.load(Ordering::SeqCst), 0);
        assert!(call("Bearer old").await?.is_ok());
        assert_eq!(reached.load(Ordering::SeqCst), 1);
        // The file reloads: the new token is accepted, the old one is not.
        accepted.store(Arc::new(crate::bearer::BearerTokens::parse(b"new")?));
        assert!(call("Bearer new").await?.is_ok());
        assert!(call("Bearer old").await?.is_err());
        assert_eq!(reached.load(Ordering::SeqCst), 2);
        Ok(())
    }
}
