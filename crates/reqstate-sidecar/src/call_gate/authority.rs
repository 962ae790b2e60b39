//! The `:authority` check: refuses a request whose `:authority` is not a
//! valid URI authority unless it came over a Unix socket.
//!
//! gRPC's C core (Python, Ruby, PHP, C++), grpc-java and grpc-swift send a
//! Unix socket's path, percent-encoded (`tmp%2Freqstate.sock`), as the
//! authority. The vendored h2 (vendor/h2/PATCH.md) passes such requests on
//! with the raw value in [`h2::ext::MalformedAuthority`] instead of resetting
//! the stream. On a Unix socket the authority names nothing (the socket is
//! the address) and is accepted; on TCP it stays an error, as upstream h2
//! has it, answered `INVALID_ARGUMENT`.

use std::task::{Context, Poll};

use http::{Request, Response};
use tonic::body::Body;
use tonic::transport::server::UdsConnectInfo;
use tower::{Layer, Service};

use super::{CallError, Checked, pass, refuse};
use crate::wire;

/// A [`Layer`] that puts [`Authority`] in front of a service.
#[derive(Debug, Clone, Copy, Default)]
pub struct AuthorityLayer;

impl<S> Layer<S> for AuthorityLayer {
    type Service = Authority<S>;

    fn layer(&self, inner: S) -> Authority<S> {
        Authority { inner }
    }
}

/// Refuses a malformed `:authority` that did not come over a Unix socket
/// (`INVALID_ARGUMENT`, counted as `invalid_argument`).
#[derive(Debug, Clone)]
pub struct Authority<S> {
    inner: S,
}

/// The check itself: `malformed` is the raw authority h2 could not parse
/// (none: it parsed), `over_unix` whether the connection is a Unix socket.
fn check(malformed: Option<&[u8]>, over_unix: bool) -> Result<(), CallError> {
    match malformed {
        Some(raw) if !over_unix => Err(CallError::refused(
            wire::invalid_argument(format!(
                "malformed :authority {:?}: not a valid URI authority (accepted on Unix sockets only)",
                String::from_utf8_lossy(raw)
            )),
            "invalid_argument",
        )),
        _ => Ok(()),
    }
}

impl<S> Service<Request<Body>> for Authority<S>
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
        let extensions = request.extensions();
        let malformed = extensions
            .get::<h2::ext::MalformedAuthority>()
            .map(h2::ext::MalformedAuthority::as_bytes);
        match check(malformed, extensions.get::<UdsConnectInfo>().is_some()) {
            Ok(()) => pass(self.inner.call(request)),
            Err(refusal) => refuse(refusal),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower::ServiceExt as _;

    #[test]
    fn a_malformed_authority_is_refused_on_tcp_only() {
        let raw = b"tmp%2Freqstate.sock";
        let refused = check(Some(raw), false).err();
        let refused = refused.as_ref().map(|e| (e.status().code(), e.result()));
        assert_eq!(
            refused,
            Some((tonic::Code::InvalidArgument, "invalid_argument"))
        );
        assert!(check(Some(raw), true).is_ok(), "refused on a Unix socket");
        assert!(check(None, false).is_ok());
        assert!(check(None, true).is_ok());
    }

    #[test]
    fn the_refusal_quotes_the_authority_safely() {
        let message = check(Some(b"a\nb\xff"), false)
            .err()
            .map(|e| e.status().message().to_owned())
            .unwrap_or_default();
        // Debug-quoted: a newline or invalid UTF-8 cannot forge a log line.
        assert!(message.contains("\"a\\nb\u{fffd}\""), "{message}");
    }

    #[tokio::test]
    async fn a_request_h2_parsed_passes_to_the_service()
    -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        let service = AuthorityLayer.layer(tower::service_fn(|_request: Request<Body>| async {
            Ok::<_, std::convert::Infallible>(Response::new(Body::empty()))
        }));
        let request = Request::builder()
            .uri("http://localhost/reqstate.v1.RequestState/Mint")
            .body(Body::empty())?;
        let response = service.oneshot(request).await?;
        assert!(tonic::Status::from_header_map(response.headers()).is_none());
        Ok(())
    }
}
