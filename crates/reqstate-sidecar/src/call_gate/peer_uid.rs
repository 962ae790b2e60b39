//! Peer credentials: on a Unix socket, the kernel reports the connecting
//! process's uid; with `--allow-uid`, only those uids may call
//! (`PERMISSION_DENIED` otherwise). The allow-list does not apply to TCP,
//! which has TLS and the bearer token, nor to health calls.

use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response};
use tonic::body::Body;
use tonic::transport::server::UdsConnectInfo;
use tower::{Layer, Service};

use super::{CallError, Checked, is_health, pass, refuse};
use crate::wire;

/// A [`Layer`] that puts [`PeerUid`] in front of a service.
#[derive(Debug, Clone)]
pub struct PeerUidLayer {
    allowed: Arc<[u32]>,
}

impl PeerUidLayer {
    /// Admits Unix-socket callers whose uid is in `allowed`; empty: any uid.
    pub fn new(allowed: Vec<u32>) -> Self {
        PeerUidLayer {
            allowed: allowed.into(),
        }
    }
}

impl<S> Layer<S> for PeerUidLayer {
    type Service = PeerUid<S>;

    fn layer(&self, inner: S) -> PeerUid<S> {
        PeerUid {
            inner,
            allowed: self.allowed.clone(),
        }
    }
}

/// Refuses a Unix-socket caller whose uid is not allowed, or whose
/// credentials could not be read (`PERMISSION_DENIED`, counted as
/// `permission_denied`).
#[derive(Debug, Clone)]
pub struct PeerUid<S> {
    inner: S,
    allowed: Arc<[u32]>,
}

fn permission_denied(message: impl Into<String>) -> CallError {
    CallError::refused(
        wire::error_status(tonic::Code::PermissionDenied, "permission_denied", message),
        "permission_denied",
    )
}

/// Whether `request` may pass `allowed` (empty: any uid).
fn check<B>(allowed: &[u32], request: &Request<B>) -> Result<(), CallError> {
    if allowed.is_empty() || is_health(request.uri().path()) {
        return Ok(());
    }
    // Only Unix-socket connections carry peer credentials.
    let Some(info) = request.extensions().get::<UdsConnectInfo>() else {
        return Ok(());
    };
    match info.peer_cred.map(|cred| cred.uid()) {
        Some(uid) if allowed.contains(&uid) => Ok(()),
        Some(uid) => Err(permission_denied(format!(
            "uid {uid} is not in the sidecar's --allow-uid list"
        ))),
        None => Err(permission_denied(
            "the peer's credentials could not be read",
        )),
    }
}

impl<S> Service<Request<Body>> for PeerUid<S>
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
        match check(&self.allowed, &request) {
            Ok(()) => pass(self.inner.call(request)),
            Err(refusal) => refuse(refusal),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower::ServiceExt as _;

    type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

    const MINT: &str = "/reqstate.v1.RequestState/Mint";

    /// This process's real credentials, as the kernel reports them on a
    /// Unix socket.
    fn own_credentials() -> std::io::Result<UdsConnectInfo> {
        let (client, _server) = std::os::unix::net::UnixStream::pair()?;
        client.set_nonblocking(true)?;
        let client = tokio::net::UnixStream::from_std(client)?;
        Ok(UdsConnectInfo {
            peer_addr: None,
            peer_cred: Some(client.peer_cred()?),
        })
    }

    fn request(path: &str, unix: Option<UdsConnectInfo>) -> Result<Request<()>, http::Error> {
        let mut request = Request::builder().uri(path).body(())?;
        if let Some(info) = unix {
            request.extensions_mut().insert(info);
        }
        Ok(request)
    }

    #[tokio::test]
    async fn only_listed_uids_may_call_over_a_unix_socket() -> TestResult {
        let own = own_credentials()?;
        let uid = own.peer_cred.map(|c| c.uid()).ok_or("no uid")?;
        let other = uid.wrapping_add(1);
        assert!(check(&[other, uid], &request(MINT, Some(own.clone()))?).is_ok());
        let refusal = check(&[other], &request(MINT, Some(own.clone()))?)
            .err()
            .ok_or("an unlisted uid was admitted")?;
        assert_eq!(refusal.status().code(), tonic::Code::PermissionDenied);
        assert_eq!(refusal.result(), "permission_denied");
        assert!(
            refusal.status().message().contains(&format!("uid {uid} ")),
            "{}",
            refusal.status().message()
        );
        // Credentials the kernel did not give are never taken as allowed.
        let unknown = UdsConnectInfo {
            peer_addr: None,
            peer_cred: None,
        };
        let refusal = check(&[uid], &request(MINT, Some(unknown))?)
            .err()
            .ok_or("a caller without credentials was admitted")?;
        assert_eq!(refusal.status().code(), tonic::Code::PermissionDenied);
        Ok(())
    }

    #[tokio::test]
    async fn tcp_health_and_an_empty_list_are_not_checked() -> TestResult {
        let own = own_credentials()?;
        let nobody = [u32::MAX];
        // TCP: no peer credentials, the list does not apply.
        assert!(check(&nobody, &request(MINT, None)?).is_ok());
        assert!(
            check(
                &nobody,
                &request("/grpc.health.v1.Health/Check", Some(own.clone()))?
            )
            .is_ok()
        );
        assert!(check(&[], &request(MINT, Some(own))?).is_ok());
        Ok(())
    }

    #[tokio::test]
    async fn the_layer_refuses_before_the_service() -> TestResult {
        let service = PeerUidLayer::new(vec![u32::MAX]).layer(tower::service_fn(
            |_request: Request<Body>| async {
                Err::<Response<Body>, _>(CallError::refused(
                    tonic::Status::internal("the service was reached"),
                    "error",
                ))
            },
        ));
        let mut request = Request::builder().uri(MINT).body(Body::empty())?;
        request.extensions_mut().insert(own_credentials()?);
        let refusal = service
            .oneshot(request)
            .await
            .err()
            .ok_or("an unlisted uid was admitted")?;
        assert_eq!(refusal.result(), "permission_denied");
        Ok(())
    }
}
