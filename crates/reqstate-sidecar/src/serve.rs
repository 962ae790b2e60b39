//! `reqstate serve`: assembles the service, binds the listeners, runs until SIGTERM or SIGINT, then drains within a deadline.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use reqstate::Codec;
use reqstate_proto::v1::request_state_server::RequestStateServer;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_stream::wrappers::UnixListenerStream;
use tonic::service::Routes;
use tonic::transport::server::{Router, TcpIncoming};
use tonic::transport::{Certificate, Identity, Server, ServerTlsConfig};
use tonic_health::ServingStatus;
use tower::layer::util::Stack;

use crate::bearer::{AuthTokenFile, TokenReloader};
use crate::call_gate::CallGateLayer;
use crate::cli::EXIT_BAD_CONFIG;
use crate::config::{KeyringSource, ListenAddr, ListenerKind, ServeConfig, TlsConfig};
use crate::key_evidence::EvidenceBook;
use crate::keyring_source::KeyringLoadError;
use crate::listeners::{BoundListener, bind};
use crate::live_keyring;
use crate::metrics::{Metrics, serve_admin};
use crate::reload::{self, KeyringReloader, Reloaders};
use crate::service::RequestStateService;
use crate::service_manager;
use reqstate_spent_store::SpentStore;

/// Exit code for a failure after the configuration was accepted (a port in
/// use, a watch that cannot be set up).
pub const EXIT_RUNTIME_FAILURE: u8 = 1;

/// Runs the sidecar to completion on its own runtime: 0 after a drained
/// shutdown, [`EXIT_BAD_CONFIG`] or [`EXIT_RUNTIME_FAILURE`] otherwise.
pub fn run(config: ServeConfig) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("reqstate")
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            tracing::error!(error = %e, "cannot start the async runtime");
            return ExitCode::from(EXIT_RUNTIME_FAILURE);
        }
    };
    let code = runtime.block_on(serve(config));
    // Connections still open after the drain deadline are cut here.
    runtime.shutdown_timeout(Duration::from_millis(100));
    ExitCode::from(code)
}

fn tls_template(tls: &TlsConfig) -> Result<Server, String> {
    let mut config =
        ServerTlsConfig::new().identity(Identity::from_pem(&tls.cert_pem, &tls.key_pem));
    if let Some(ca) = &tls.client_ca_pem {
        config = config.client_ca_root(Certificate::from_pem(ca));
    }
    Server::builder()
        .tls_config(config)
        .map_err(|e| format!("TLS configuration: {e}"))
}

/// The gRPC server of one listener: `template` (plain, or with TLS) with
/// the call gate in front of the routes, and nothing else. In particular no
/// `Server::timeout`: the gate's deadline layer ends every call at its
/// deadline with `DEADLINE_EXCEEDED`, where tonic's timeout would answer
/// `CANCELLED` ([`crate::call_gate::deadline`]).
fn grpc_server(
    template: Server,
    gate: &CallGateLayer,
    routes: &Routes,
) -> Router<Stack<CallGateLayer, tower::layer::util::Identity>> {
    template.layer(gate.clone()).add_routes(routes.clone())
}

type HealthReporter = tonic_health::server::HealthReporter;

async fn mark_not_serving(health: &HealthReporter) {
    health
        .set_not_serving::<RequestStateServer<RequestStateService>>()
        .await;
    health
        .set_service_status("", ServingStatus::NotServing)
        .await;
}

async fn serve(config: ServeConfig) -> u8 {
    let listener_auth = config.listener_auth();
    let ServeConfig {
        keyring: keyring_source,
        initial_keyring,
        initial_contents,
        policy,
        listen,
        metrics: metrics_addr,
        bearer_token,
        tls,
        allow_uids,
        socket_group,
        limits,
        drain_timeout,
        reload_debounce,
        replay,
        dev,
    } = config;

    // Everything that can be refused as configuration is checked before the
    // first bind.
    // The keyring's schedule against the policy served (--max-ttl,
    // --clock-leeway): a retirement that would refuse live tokens is a bad
    // keyring, refused as any other (and on every reload).
    if let KeyringSource::File { path, .. } = &keyring_source
        && let Err(error) = initial_keyring.check_schedule(&policy)
    {
        let error = KeyringLoadError::Invalid {
            path: path.clone(),
            error,
        };
        tracing::error!(error = %error, "bad configuration");
        return EXIT_BAD_CONFIG;
    }
    let tls_server = match tls.as_ref().map(tls_template).transpose() {
        Ok(server) => server,
        Err(e) => {
            tracing::error!(error = %e, "bad configuration");
            return EXIT_BAD_CONFIG;
        }
    };
    let metrics = match Metrics::new() {
        Ok(m) => Arc::new(m),
        Err(e) => {
            tracing::error!(error = %e, "cannot register metrics");
            return EXIT_RUNTIME_FAILURE;
        }
    };
    let replay = match SpentStore::new(&replay, metrics.clone()) {
        Ok(replay) => {
            let replay = Arc::new(replay);
            // Connects now, and keeps the clock check against Redis current.
            replay.watch_clock();
            replay
        }
        Err(e) => {
            tracing::error!(error = %e, "bad configuration");
            return EXIT_BAD_CONFIG;
        }
    };
    tracing::info!(
        store = replay.description(),
        "single-use tokens are recorded here"
    );
    let (mut terminate, mut hangup) = match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
        signal(SignalKind::hangup()),
    ) {
        (Ok(term), Ok(int), Ok(hup)) => ((term, int), hup),
        (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => {
            tracing::error!(error = %e, "cannot install signal handlers");
            return EXIT_RUNTIME_FAILURE;
        }
    };

    let codec = Codec::new(initial_keyring).with_policy(policy);
    metrics.keyring_in_service(codec.keyring(), 1);
    // The key that mints now (KEYRING.md, "Keys on a schedule").
    let primary = codec
        .keyring()
        .minting_key(reqstate::Clock::now(&reqstate::SystemClock))
        .id()
        .get();
    let book = EvidenceBook::new();
    let evidence = book.for_keyring(codec.keyring(), &initial_contents);
    let shared = live_keyring::shared_with(codec, evidence);
    if let Err(e) = metrics.watch_keyring(shared.clone()) {
        tracing::error!(error = %e, "cannot register metrics");
        return EXIT_RUNTIME_FAILURE;
    }

    let mut bound = Vec::with_capacity(listen.len());
    for addr in &listen {
        match bind(addr, socket_group).await {
            Ok(listener) => bound.push(listener),
            Err(e) => {
                tracing::error!(error = %e, "cannot bind");
                remove_sockets(&bound);
                return EXIT_RUNTIME_FAILURE;
            }
        }
    }
    let metrics_listener = match metrics_addr {
        Some(addr) => match tokio::net::TcpListener::bind(addr).await {
            Ok(l) => Some(l),
            Err(e) => {
                tracing::error!(error = %e, %addr, "cannot bind the metrics listener");
                remove_sockets(&bound);
                return EXIT_RUNTIME_FAILURE;
            }
        },
        None => None,
    };

    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    // The admin listener stays up through the drain (`/ready` says 503,
    // `/live` 200) and stops after it.
    let (admin_stop_tx, admin_stop_rx) = watch::channel(false);

    let authenticated = bearer_token.is_some();
    let auth_token_path = bearer_token.as_ref().map(|file| file.path.clone());
    let (bearer, token_reloader) = match bearer_token {
        Some(AuthTokenFile {
            path,
            contents,
            tokens,
            permissions,
        }) => {
            let shared_tokens = Arc::new(ArcSwap::from_pointee(tokens));
            let reloader = TokenReloader::new(
                path,
                permissions,
                shared_tokens.clone(),
                contents,
                metrics.clone(),
            );
            (Some(shared_tokens), Some(reloader))
        }
        None => (None, None),
    };
    let reloaders = Reloaders {
        keyring: match &keyring_source {
            KeyringSource::File { path, permissions } => Some(KeyringReloader::new(
                path.clone(),
                *permissions,
                shared.clone(),
                metrics.clone(),
                book,
                initial_contents,
            )),
            KeyringSource::Ephemeral => None,
        },
        token: token_reloader,
    };
    if reloaders.is_empty() {
        // Nothing to reload; SIGHUP must still not kill the process.
        tokio::spawn(async move {
            while hangup.recv().await.is_some() {
                tracing::info!("SIGHUP ignored: --dev has no keyring file to reload");
            }
        });
    } else if let Err(e) = reload::spawn(reloaders, reload_debounce, hangup, shutdown_rx.clone()) {
        tracing::error!(error = %e, "cannot watch the keyring and token files for changes");
        remove_sockets(&bound);
        return EXIT_RUNTIME_FAILURE;
    }
    if let Some(listener) = metrics_listener {
        let local = shown_addr(listener.local_addr());
        tracing::info!(
            addr = %local,
            "serving metrics on /metrics, readiness on /ready, liveness on /live"
        );
        tokio::spawn(serve_admin(listener, metrics.clone(), admin_stop_rx));
    }

    let (health, health_service) = tonic_health::server::health_reporter();
    health
        .set_serving::<RequestStateServer<RequestStateService>>()
        .await;
    // Both reflection versions: grpcurl asks for v1 and falls back to v1alpha.
    let reflection = || {
        tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(reqstate_proto::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
    };
    let (reflection_v1, reflection_v1alpha) =
        match (reflection().build_v1(), reflection().build_v1alpha()) {
            (Ok(v1), Ok(v1alpha)) => (v1, v1alpha),
            (Err(e), _) | (_, Err(e)) => {
                tracing::error!(error = %e, "cannot build the reflection service");
                remove_sockets(&bound);
                return EXIT_RUNTIME_FAILURE;
            }
        };
    let service = RequestStateServer::new(RequestStateService::new(
        shared.clone(),
        replay,
        limits.clone(),
        metrics.clone(),
    ))
    .max_decoding_message_size(limits.max_request_bytes);
    let routes = Routes::new(health_service)
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha)
        .add_service(service);
    let gate = CallGateLayer::new(
        bearer,
        allow_uids,
        limits.max_concurrent_calls,
        limits.max_health_calls,
        limits.call_timeout,
        metrics.clone(),
    );

    let mut servers = JoinSet::new();
    let mut socket_paths = Vec::new();
    for listener in bound {
        let stopped = wait_for_shutdown(shutdown_rx.clone());
        match listener {
            BoundListener::Unix { listener, path } => {
                tracing::info!(
                    listen = %format!("unix:{}", path.display()),
                    auth = %listener_auth.describe(ListenerKind::Unix),
                    "serving gRPC"
                );
                socket_paths.push(path);
                let server = grpc_server(Server::builder(), &gate, &routes);
                servers.spawn(
                    server.serve_with_incoming_shutdown(UnixListenerStream::new(listener), stopped),
                );
            }
            BoundListener::Tcp(listener) => {
                let local = shown_addr(listener.local_addr());
                tracing::info!(
                    listen = %local,
                    tls = tls_server.is_some(),
                    auth = %listener_auth.describe(ListenerKind::Tcp),
                    "serving gRPC"
                );
                let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
                let template = tls_server.clone().unwrap_or_else(Server::builder);
                let server = grpc_server(template, &gate, &routes);
                servers.spawn(server.serve_with_incoming_shutdown(incoming, stopped));
            }
        }
    }

    tracing::info!(
        primary,
        generation = 1,
        auth = authenticated,
        "reqstate sidecar ready"
    );
    if service_manager::requested() {
        let addrs: Vec<String> = listen.iter().map(ToString::to_string).collect();
        service_manager::ready(&format!(
            "serving on {}; keyring generation 1, primary key {primary}",
            addrs.join(", ")
        ));
    }
    if dev {
        print_dev_banner(&listen, auth_token_path.as_deref());
    }

    let mut failed = false;
    tokio::select! {
        _ = terminate.0.recv() => tracing::info!("SIGTERM: draining"),
        _ = terminate.1.recv() => tracing::info!("SIGINT: draining"),
        Some(ended) = servers.join_next() => {
            let result = match ended {
                Ok(Ok(())) => "it ended".to_owned(),
                Ok(Err(e)) => crate::connect::error_chain(&e),
                Err(e) => e.to_string(),
            };
            tracing::error!(result, "a listener stopped unexpectedly; shutting down");
            failed = true;
        }
    }

    // Probes see NOT_SERVING first, then listeners stop accepting, and calls
    // in flight get until the deadline to finish.
    service_manager::stopping();
    metrics.start_draining();
    mark_not_serving(&health).await;
    let _ = shutdown_tx.send(true);
    let drained = tokio::time::timeout(drain_timeout, async {
        while let Some(ended) = servers.join_next().await {
            if let Ok(Err(e)) = ended {
                tracing::warn!(error = %e, "listener ended with an error while draining");
            }
        }
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            deadline_ms = drain_timeout.as_millis(),
            "drain deadline passed; closing the remaining connections"
        );
    } else {
        tracing::info!("drained");
    }
    let _ = admin_stop_tx.send(true);
    for path in &socket_paths {
        let _ = std::fs::remove_file(path);
    }
    if failed { EXIT_RUNTIME_FAILURE } else { 0 }
}

async fn wait_for_shutdown(mut shutdown: watch::Receiver<bool>) {
    // An error means the sender is gone, which also means shutting down.
    let _ = shutdown.wait_for(|stop| *stop).await;
}

fn remove_sockets(bound: &[BoundListener]) {
    for listener in bound {
        if let BoundListener::Unix { path, .. } = listener {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// A listener's address for a log line (`127.0.0.1:50051`), never Rust's
/// debug text.
fn shown_addr(addr: std::io::Result<std::net::SocketAddr>) -> String {
    addr.map_or_else(|e| format!("unknown ({e})"), |a| a.to_string())
}

fn print_dev_banner(listen: &[ListenAddr], auth_token_file: Option<&std::path::Path>) {
    // grpcurl's address argument: host:port, or `-unix PATH` for a socket.
    let target = listen
        .iter()
        .find_map(|addr| match addr {
            ListenAddr::Tcp(sock) => Some(sock.to_string()),
            ListenAddr::Unix(_) => None,
        })
        .or_else(|| {
            listen.iter().find_map(|addr| match addr {
                ListenAddr::Unix(path) => Some(format!("-unix {}", path.display())),
                ListenAddr::Tcp(_) => None,
            })
        })
        .unwrap_or_else(|| crate::config::DEV_LISTEN.to_string());
    let connect = listen.first().map_or_else(
        || format!("tcp:{}", crate::config::DEV_LISTEN),
        ToString::to_string,
    );
    let (callers, auth_header, auth_flag) = match auth_token_file {
        Some(path) => {
            let path = crate::keys::shell_word(&path.display().to_string());
            (
                "Callers need the bearer token.",
                format!("-H \"authorization: Bearer $(head -n1 {path})\" "),
                format!(" --auth-token-file {path}"),
            )
        }
        None => (
            "Anyone who can reach the port can mint: there is no bearer token.",
            String::new(),
            String::new(),
        ),
    };
    eprintln!(
        "\n\
         ************************************************************************\n\
         WARNING: reqstate is running in --dev mode.\n\
         The key is ephemeral and in memory only: every token minted now stops\n\
         verifying when this process exits.\n\
         {callers}\n\
         Never use --dev in production: give --keyring FILE (docs/KEYRING.md).\n\
         ************************************************************************\n"
    );
    let (mint, verify) = dev_banner_commands(&program(), &connect, &auth_flag);
    println!(
        "Try it with this binary: mint a token, then mint and verify one (docs/CLI.md):\n\n  \
         {mint}\n  \
         {mint} | {verify}\n\n\
         Or with grpcurl (server reflection; no .proto needed):\n\n  \
         grpcurl -plaintext {auth_header}-d '{{\"tool\":\"demo\",\"step\":\"confirm\",\"state_json\":\"{{\\\"n\\\":1}}\",\"ttl_seconds\":600}}' \\\n    \
         {target} reqstate.v1.RequestState/Mint\n\n  \
         grpcurl -plaintext {auth_header}-d '{{\"tool\":\"demo\",\"token\":\"<token>\"}}' \\\n    \
         {target} reqstate.v1.RequestState/Verify\n\n\
         Python and Node reach it too: clients/python/README.md, clients/node/README.md.\n"
    );
}

/// The banner's first mint and its verify, for `program` against `connect`
/// (`auth_flag`: ` --auth-token-file FILE` or empty): the verify reads the
/// mint's JSON on standard input (`-`).
pub fn dev_banner_commands(program: &str, connect: &str, auth_flag: &str) -> (String, String) {
    let connect = crate::keys::shell_word(connect);
    (
        format!(
            "{program} mint --connect {connect}{auth_flag} --tool demo --step confirm \
             --state-json '{{\"n\":1}}'"
        ),
        format!("{program} verify --connect {connect}{auth_flag} --tool demo -"),
    )
}

/// How to run this binary again from a shell: `reqstate` when that is what
/// was run (it is on the PATH), else its full path (`cargo run` runs
/// `target/…/reqstate`).
fn program() -> String {
    let argv0 = std::env::args_os().next().unwrap_or_default();
    if !argv0.to_string_lossy().contains('/') {
        return "reqstate".to_owned();
    }
    std::env::current_exe()
        .map(|p| crate::keys::shell_word(&p.display().to_string()))
        .unwrap_or_else(|_| "reqstate".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::convert::Infallible;
    use std::future::Future;
    use std::pin::Pin;
    use std::task::{Context, Poll};

    use http::{HeaderMap, Request, Response};
    use hyper::body::{Body as HttpBody, Bytes, Frame};
    use tonic::Status;
    use tonic::body::Body;

    type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

    /// How long a test waits for what the sidecar must do much sooner.
    const PATIENCE: Duration = Duration::from_secs(20);

    /// A response body that never ends.
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

    /// A gRPC service whose `Unary` method never answers (a batch far over
    /// its time) and whose `Stream` method answers at once with a stream
    /// that never ends (a health `Watch` with no change).
    #[derive(Clone)]
    struct Stalled;

    impl tonic::server::NamedService for Stalled {
        const NAME: &'static str = "test.Stalled";
    }

    impl tower::Service<Request<Body>> for Stalled {
        type Response = Response<Body>;
        type Error = Infallible;
        type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, Infallible>> + Send>>;

        fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, request: Request<Body>) -> Self::Future {
            let streams = request.uri().path() == "/test.Stalled/Stream";
            Box::pin(async move {
                if !streams {
                    std::future::pending::<()>().await;
                }
                let mut response = Response::new(Body::new(Endless));
                response.headers_mut().insert(
                    http::header::CONTENT_TYPE,
                    http::HeaderValue::from_static("application/grpc"),
                );
                Ok(response)
            })
        }
    }

    /// A sidecar's gRPC server, built as `serve` builds each listener's,
    /// over [`Stalled`], on a loopback port.
    async fn stalled_server(
        call_timeout: Duration,
    ) -> Result<(std::net::SocketAddr, Arc<Metrics>), Box<dyn std::error::Error + Send + Sync>>
    {
        let metrics = Arc::new(Metrics::new()?);
        let gate = CallGateLayer::new(None, Vec::new(), 1024, 16, call_timeout, metrics.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let server = grpc_server(Server::builder(), &gate, &Routes::new(Stalled));
        tokio::spawn(server.serve_with_incoming(TcpIncoming::from(listener)));
        Ok((addr, metrics))
    }

    /// The gRPC status a call to `method` ended with (from the headers of a
    /// trailers-only answer, or from the trailers), with the headers it
    /// came in. Sent with plain h2, `grpc-timeout` as given: gRPC clients
    /// (tonic's channel too) enforce that header themselves and would end
    /// the call first; what is measured here is the server's answer.
    async fn status_of_call(
        addr: std::net::SocketAddr,
        method: &str,
        grpc_timeout: Option<&'static str>,
    ) -> Result<(Status, HeaderMap), Box<dyn std::error::Error + Send + Sync>> {
        let tcp = tokio::net::TcpStream::connect(addr).await?;
        let (mut client, connection) = h2::client::handshake(tcp).await?;
        tokio::spawn(connection);
        let mut request = Request::builder()
            .method("POST")
            .uri(format!("http://{addr}/test.Stalled/{method}"))
            .header("content-type", "application/grpc")
            .header("te", "trailers");
        if let Some(value) = grpc_timeout {
            request = request.header("grpc-timeout", value);
        }
        let (response, _) = client.send_request(request.body(())?, true)?;
        let (parts, mut body) = response.await?.into_parts();
        if let Some(status) = Status::from_header_map(&parts.headers) {
            return Ok((status, parts.headers));
        }
        let trailers = tokio::time::timeout(PATIENCE, async {
            while let Some(data) = body.data().await {
                data?;
            }
            body.trailers().await
        })
        .await??
        .ok_or("no trailers")?;
        let status = Status::from_header_map(&trailers).ok_or("no grpc-status")?;
        Ok((status, trailers))
    }

    /// One deadline rule for every call shape, as a client sees it through
    /// the real server: a unary call past `--call-timeout-ms` and a stream
    /// still open at it both end `DEADLINE_EXCEEDED` with the gate's reason.
    /// Before, the unary call answered `CANCELLED` ("Timeout expired", from
    /// tonic's `Server::timeout`) while streams answered
    /// `DEADLINE_EXCEEDED`.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_call_shape_ends_deadline_exceeded_at_the_call_deadline() -> TestResult {
        let (addr, metrics) = stalled_server(Duration::from_millis(100)).await?;
        for method in ["Unary", "Stream"] {
            let started = tokio::time::Instant::now();
            let (status, headers) =
                tokio::time::timeout(PATIENCE, status_of_call(addr, method, None)).await??;
            assert!(started.elapsed() >= Duration::from_millis(100), "{method}");
            assert_eq!(
                status.code(),
                tonic::Code::DeadlineExceeded,
                "{method}: {status:?}"
            );
            assert!(
                status
                    .message()
                    .starts_with("the call deadline of 100 ms (--call-timeout-ms) passed"),
                "{method}: {status:?}"
            );
            assert_eq!(
                headers
                    .get(crate::wire::REASON_METADATA_KEY)
                    .map(|v| v.as_bytes()),
                Some(&b"deadline_exceeded"[..]),
                "{method}"
            );
        }
        // The unary call, stopped before its response, is counted.
        let page = String::from_utf8(metrics.render())?;
        assert!(
            page.contains("reqstate_calls_total{result=\"deadline_exceeded\",rpc=\"unknown\"} 1"),
            "{page}"
        );
        Ok(())
    }

    /// A caller's shorter `grpc-timeout` is the deadline, with the same
    /// answer: tonic's server reads that header too, outside the gate, and
    /// would answer `CANCELLED` if its timer fired first. Many calls at
    /// once, so a race between the two timers would show.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_callers_grpc_timeout_ends_the_call_deadline_exceeded_too() -> TestResult {
        const TIMEOUTS: [&str; 12] = [
            "1m", "2m", "3m", "5m", "8m", "13m", "21m", "34m", "55m", "89m", "1500u", "2S",
        ];
        let (addr, _metrics) = stalled_server(Duration::from_secs(3600)).await?;
        let mut calls = tokio::task::JoinSet::new();
        for _round in 0..4 {
            for timeout in TIMEOUTS {
                for method in ["Unary", "Stream"] {
                    calls.spawn(async move {
                        let ended = status_of_call(addr, method, Some(timeout)).await;
                        (method, timeout, ended.map(|(status, _)| status))
                    });
                }
            }
        }
        let mut ended = 0;
        while let Some(call) = tokio::time::timeout(PATIENCE, calls.join_next()).await? {
            let (method, timeout, status) = call?;
            let status = status.map_err(|e| {
                let mut chain = format!("{method} {timeout}: {e}");
                let mut source = e.source();
                while let Some(cause) = source {
                    chain.push_str(&format!(": {cause}"));
                    source = cause.source();
                }
                chain
            })?;
            assert_eq!(
                status.code(),
                tonic::Code::DeadlineExceeded,
                "{method} with grpc-timeout {timeout}: {status:?}"
            );
            assert!(
                status.message().starts_with("the caller's deadline of"),
                "{method} {timeout}: {status:?}"
            );
            ended += 1;
        }
        assert_eq!(ended, 4 * TIMEOUTS.len() * 2);
        Ok(())
    }
}
