//! `reqstate health`: an exec probe. Asks a running sidecar's
//! `grpc.health.v1.Health/Check` and exits 0 when it answers `SERVING`, 1
//! for anything else (`NOT_SERVING` while draining, an unknown service, no
//! answer within the timeout, a refused connection). Health calls need no
//! bearer token and pass the peer-uid allow-list, so the probe needs no
//! secret (over TCP with `--client-ca` it does need a client certificate).

use std::time::Duration;

use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

use crate::cli::{EXIT_BAD_CONFIG, HealthArgs};
use crate::config::{DEV_LISTEN, ListenAddr};
use crate::connect::{channel, status_text};

/// The exit code for "not serving": anything but a `SERVING` answer.
pub const EXIT_NOT_SERVING: u8 = 1;

/// Where to probe, from `--listen`, else the first address of
/// `REQSTATE_LISTEN`, else the `serve --dev` address.
fn target(args: &HealthArgs) -> String {
    if let Some(listen) = &args.listen {
        return listen.clone();
    }
    std::env::var("REQSTATE_LISTEN")
        .ok()
        .and_then(|list| {
            list.split(',')
                .map(str::trim)
                .find(|s| !s.is_empty())
                .map(str::to_owned)
        })
        .unwrap_or_else(|| format!("tcp:{DEV_LISTEN}"))
}

async fn check(
    target: &ListenAddr,
    text: &str,
    args: &HealthArgs,
) -> Result<ServingStatus, String> {
    let channel = channel(target, text, &args.tls).await?;
    let answer = HealthClient::new(channel)
        .check(HealthCheckRequest {
            service: args.service.clone(),
        })
        .await
        .map_err(|status| format!("Check failed: {}", status_text(&status)))?;
    Ok(answer.into_inner().status())
}

/// Runs `reqstate health` and returns the exit code: 0 when the sidecar
/// answers `SERVING`, [`EXIT_NOT_SERVING`] otherwise, [`EXIT_BAD_CONFIG`] for
/// a bad flag value.
pub fn run(args: &HealthArgs) -> u8 {
    let text = target(args);
    // The same parsing as `serve --listen`.
    let target = match ListenAddr::parse(&text) {
        Ok(target) => target,
        Err(e) => {
            eprintln!("reqstate health: {e}");
            return EXIT_BAD_CONFIG;
        }
    };
    if args.timeout_ms == 0 {
        eprintln!("reqstate health: --timeout-ms must be at least 1");
        return EXIT_BAD_CONFIG;
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("reqstate health: cannot start: {e}");
            return EXIT_NOT_SERVING;
        }
    };
    let timeout = Duration::from_millis(args.timeout_ms);
    let outcome = runtime.block_on(async {
        tokio::time::timeout(timeout, check(&target, &text, args))
            .await
            .unwrap_or_else(|_| Err(format!("no answer within {} ms", args.timeout_ms)))
    });
    match outcome {
        Ok(ServingStatus::Serving) => {
            println!("SERVING");
            0
        }
        Ok(status) => {
            eprintln!("reqstate health: {text}: {}", status.as_str_name());
            EXIT_NOT_SERVING
        }
        Err(e) => {
            eprintln!("reqstate health: {text}: {e}");
            EXIT_NOT_SERVING
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the test server saw of the probe's request.
    #[derive(Debug, PartialEq)]
    struct Seen {
        authority: Option<String>,
        malformed_authority: bool,
        path: String,
    }

    /// A bare HTTP/2 server on a Unix socket that answers one
    /// `grpc.health.v1.Health/Check` with `SERVING` and reports the request.
    async fn serve_one_check(
        listener: tokio::net::UnixListener,
    ) -> Result<Seen, Box<dyn std::error::Error + Send + Sync>> {
        let (stream, _) = listener.accept().await?;
        let mut connection = h2::server::handshake(stream).await?;
        let (request, mut respond) = connection.accept().await.ok_or("no request")??;
        let seen = Seen {
            authority: request.uri().authority().map(|a| a.as_str().to_owned()),
            malformed_authority: request
                .extensions()
                .get::<h2::ext::MalformedAuthority>()
                .is_some(),
            path: request.uri().path().to_owned(),
        };
        let response = http::Response::builder()
            .header("content-type", "application/grpc")
            .body(())?;
        let mut body = respond.send_response(response, false)?;
        // One uncompressed message: HealthCheckResponse { status: SERVING }.
        body.send_data(
            prost::bytes::Bytes::from_static(&[0, 0, 0, 0, 2, 0x08, 0x01]),
            false,
        )?;
        let mut trailers = http::HeaderMap::new();
        trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
        body.send_trailers(trailers)?;
        // Drive the connection until the client closes it.
        while connection.accept().await.is_some() {}
        Ok(seen)
    }

    #[test]
    fn the_unix_socket_probe_sends_a_well_formed_authority() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let socket = dir.path().join("sidecar.sock");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        runtime.block_on(async {
            let listener = tokio::net::UnixListener::bind(&socket).expect("bind");
            let server = tokio::spawn(serve_one_check(listener));
            let args = HealthArgs {
                listen: None,
                service: String::new(),
                timeout_ms: 5000,
                tls: crate::cli::TlsArgs::default(),
            };
            let status = tokio::time::timeout(
                Duration::from_secs(10),
                check(&ListenAddr::Unix(socket.clone()), "unix:test", &args),
            )
            .await
            .expect("an answer within 10 s");
            assert_eq!(status, Ok(ServingStatus::Serving));
            let seen = server.await.expect("the server task").expect("the server");
            assert_eq!(
                seen,
                Seen {
                    authority: Some("localhost".to_owned()),
                    malformed_authority: false,
                    path: "/grpc.health.v1.Health/Check".to_owned(),
                }
            );
        });
    }

    #[test]
    fn the_tls_server_name_defaults_to_the_host_as_written() {
        use crate::connect::tcp_host;
        assert_eq!(tcp_host("tcp:localhost:50051"), "localhost");
        assert_eq!(tcp_host("tcp:[::1]:50051"), "[::1]");
        assert_eq!(tcp_host("tcp:127.0.0.1:50051"), "127.0.0.1");
    }
}
