//! Prometheus metrics and the admin listener that serves them with readiness.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use prometheus::{
    Encoder, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge,
    IntGaugeVec, Opts, Registry, TextEncoder,
};
use reqstate::Keyring;
use tokio::net::TcpListener;
use tokio::sync::watch;

use reqstate_spent_store::{Recorded, StoreObserver};

use crate::key_evidence::KeyringCollector;
use crate::live_keyring::SharedKeyring;

/// Every metric the sidecar exports, in its own registry.
pub struct Metrics {
    registry: Registry,
    calls: IntCounterVec,
    batch_items: IntCounterVec,
    latency: HistogramVec,
    keyring_generation: IntGauge,
    reloads: IntCounter,
    reload_failures: IntCounter,
    // Added for reload time limits (reload.rs).
    reload_timeouts: IntCounter,
    auth_token_reloads: IntCounter,
    auth_token_reload_failures: IntCounter,
    keys: IntGaugeVec,
    draining: IntGauge,
    replay_records: IntCounterVec,
    replay_store_latency: prometheus::Histogram,
    replay_store_clock_skew: prometheus::Gauge,
    replay_store_max_skew: prometheus::Gauge,
    ready: AtomicBool,
    /// The series of the service's successful calls, by rpc
    /// ([`HOT_RPCS`]): looked up once, on the first such call, rather than
    /// on every call (a lookup hashes the label values under a lock).
    /// Resolved lazily so that a series appears only once it counts.
    hot_calls: [OnceLock<(IntCounter, Histogram)>; HOT_RPCS.len()],
    /// `reqstate_batch_items_total{result="ok"}` of MintBatch and
    /// VerifyBatch, resolved as `hot_calls`.
    hot_batch_items: [OnceLock<IntCounter>; 2],
    /// `reqstate_replay_records_total` for `consumed` and `replayed`.
    hot_replay_records: [OnceLock<IntCounter>; 2],
}

/// The rpcs whose successful calls have their series resolved once.
const HOT_RPCS: [&str; 7] = [
    "Mint",
    "Verify",
    "MintBatch",
    "VerifyBatch",
    "Seal",
    "Unseal",
    "ListKeys",
];

/// The batch rpcs of [`Metrics::hot_batch_items`].
const BATCH_RPCS: [&str; 2] = ["MintBatch", "VerifyBatch"];

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

fn registered<T: prometheus::core::Collector + Clone + 'static>(
    registry: &Registry,
    metric: Result<T, prometheus::Error>,
) -> Result<T, prometheus::Error> {
    let metric = metric?;
    registry.register(Box::new(metric.clone()))?;
    Ok(metric)
}

impl Metrics {
    /// Creates and registers every metric.
    pub fn new() -> Result<Metrics, prometheus::Error> {
        let registry = Registry::new();
        let calls = registered(
            &registry,
            IntCounterVec::new(
                Opts::new(
                    "reqstate_calls_total",
                    "gRPC calls by rpc (a method name, or unknown for any other \
                     path) and result: ok, a token failure reason (expired, \
                     retired_key …), a refusal (unauthenticated, \
                     permission_denied, overloaded, invalid_argument), or \
                     deadline_exceeded",
                ),
                &["rpc", "result"],
            ),
        )?;
        let batch_items = registered(
            &registry,
            IntCounterVec::new(
                Opts::new(
                    "reqstate_batch_items_total",
                    "Items of MintBatch and VerifyBatch calls by rpc and result",
                ),
                &["rpc", "result"],
            ),
        )?;
        let latency = registered(
            &registry,
            HistogramVec::new(
                HistogramOpts::new(
                    "reqstate_call_duration_seconds",
                    "Time spent handling a gRPC call, by rpc",
                )
                .buckets(vec![
                    0.000_025, 0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01,
                    0.025, 0.05, 0.1, 0.25, 1.0,
                ]),
                &["rpc"],
            ),
        )?;
        let keyring_generation = registered(
            &registry,
            IntGauge::new(
                "reqstate_keyring_generation",
                "Keyrings loaded since start: 1 at start, one more per successful reload",
            ),
        )?;
        let reloads = registered(
            &registry,
            IntCounter::new(
                "reqstate_keyring_reloads_total",
                "Keyring reloads that succeeded and were swapped in",
            ),
        )?;
        let reload_failures = registered(
            &registry,
            IntCounter::new(
                "reqstate_keyring_reload_failures_total",
                "Keyring reloads refused (unreadable, insecure or invalid file, or a \
                 schedule that refuses live tokens under the policy served); the \
                 previous keyring stayed in service. One per refused version of the \
                 file: the same refused bytes read again on a directory event are not \
                 counted again (a SIGHUP always is)",
            ),
        )?;
        // Added for reload time limits (reload.rs).
        let reload_timeouts = registered(
            &registry,
            IntCounter::new(
                "reqstate_keyring_reload_timeouts_total",
                "Keyring reloads abandoned because reading the file took too long \
                 (also counted as failures); the previous keyring stayed in service",
            ),
        )?;
        let auth_token_reloads = registered(
            &registry,
            IntCounter::new(
                "reqstate_auth_token_reloads_total",
                "Bearer token file reloads that changed the accepted tokens",
            ),
        )?;
        let auth_token_reload_failures = registered(
            &registry,
            IntCounter::new(
                "reqstate_auth_token_reload_failures_total",
                "Bearer token file reloads refused (unreadable file, no valid token); \
                 the previous tokens stayed accepted. One per refused version of the \
                 file, as for the keyring",
            ),
        )?;
        let keys = registered(
            &registry,
            IntGaugeVec::new(
                Opts::new(
                    "reqstate_keyring_key",
                    "One series per key of the keyring in service, value 1",
                ),
                &["key_id", "status", "algorithm"],
            ),
        )?;
        let draining = registered(
            &registry,
            IntGauge::new(
                "reqstate_draining",
                "1 once shutdown has begun and in-flight calls are draining",
            ),
        )?;
        let replay_records = registered(
            &registry,
            IntCounterVec::new(
                Opts::new(
                    "reqstate_replay_records_total",
                    "Single-use tokens handed to the replay store, by result: consumed \
                     (recorded now), replayed (already spent: refused), replay_store_full \
                     and replay_store_unavailable (not recorded: refused, fail closed)",
                ),
                &["result"],
            ),
        )?;
        let replay_store_latency = registered(
            &registry,
            prometheus::Histogram::with_opts(
                HistogramOpts::new(
                    "reqstate_replay_store_duration_seconds",
                    "Time of one replay store call (one token, or one pipelined batch)",
                )
                .buckets(vec![
                    0.000_01, 0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01,
                    0.025, 0.05, 0.1, 0.25, 1.0,
                ]),
            ),
        )?;
        let replay_store_clock_skew = registered(
            &registry,
            prometheus::Gauge::new(
                "reqstate_replay_store_clock_skew_seconds",
                "This sidecar's clock minus the replay store's (Redis TIME), at the last \
                 reading (every 10 s); consumes are refused while its magnitude exceeds \
                 reqstate_replay_store_max_skew_seconds",
            ),
        )?;
        let replay_store_max_skew = registered(
            &registry,
            prometheus::Gauge::new(
                "reqstate_replay_store_max_skew_seconds",
                "The clock difference with the replay store beyond which consumes are \
                 refused (--replay-max-skew-ms); 0 for the memory store",
            ),
        )?;
        Ok(Metrics {
            registry,
            calls,
            batch_items,
            latency,
            keyring_generation,
            reloads,
            reload_failures,
            reload_timeouts,
            auth_token_reloads,
            auth_token_reload_failures,
            keys,
            draining,
            replay_records,
            replay_store_latency,
            replay_store_clock_skew,
            replay_store_max_skew,
            ready: AtomicBool::new(true),
            hot_calls: Default::default(),
            hot_batch_items: Default::default(),
            hot_replay_records: Default::default(),
        })
    }

    // The rpc and result labels are `&'static str`: they can only come from
    // the fixed sets in the code (`call_gate::KNOWN_RPCS`, core reasons),
    // never from what a caller sent, so callers cannot add series.

    /// Counts one call and its duration.
    pub fn observe_call(&self, rpc: &'static str, result: &'static str, elapsed: Duration) {
        if result == "ok"
            && let Some(i) = HOT_RPCS.iter().position(|hot| *hot == rpc)
        {
            let (calls, latency) = self.hot_calls[i].get_or_init(|| {
                (
                    self.calls.with_label_values(&[rpc, "ok"]),
                    self.latency.with_label_values(&[rpc]),
                )
            });
            calls.inc();
            latency.observe(elapsed.as_secs_f64());
            return;
        }
        self.calls.with_label_values(&[rpc, result]).inc();
        self.latency
            .with_label_values(&[rpc])
            .observe(elapsed.as_secs_f64());
    }

    /// Counts a call the gate ended without the service's answer: refused,
    /// or stopped at its deadline (no latency).
    pub fn observe_refusal(&self, rpc: &'static str, result: &'static str) {
        self.calls.with_label_values(&[rpc, result]).inc();
    }

    /// Counts one item of a batch.
    pub fn observe_batch_item(&self, rpc: &'static str, result: &'static str) {
        if result == "ok"
            && let Some(i) = BATCH_RPCS.iter().position(|hot| *hot == rpc)
        {
            self.hot_batch_items[i]
                .get_or_init(|| self.batch_items.with_label_values(&[rpc, "ok"]))
                .inc();
            return;
        }
        self.batch_items.with_label_values(&[rpc, result]).inc();
    }

    /// Records the keyring now in service.
    pub fn keyring_in_service(&self, keyring: &Keyring, generation: u64) {
        self.keyring_generation
            .set(i64::try_from(generation).unwrap_or(i64::MAX));
        self.keys.reset();
        for key in keyring.keys() {
            self.keys
                .with_label_values(&[
                    &key.id().to_string(),
                    key.status().name(),
                    key.algorithm().name(),
                ])
                .set(1);
        }
    }

    /// Registers the per-key metrics of [`crate::key_evidence`] (tokens
    /// minted, accepted and refused per key, each key's status now, the
    /// minting and newest key ids, the keyring file's SHA-256), read from
    /// the keyring in service at each scrape.
    pub fn watch_keyring(&self, shared: SharedKeyring) -> Result<(), prometheus::Error> {
        self.registry
            .register(Box::new(KeyringCollector::new(shared)?))
    }

    /// Counts a successful reload.
    pub fn reload_succeeded(&self) {
        self.reloads.inc();
    }

    /// Counts a refused reload.
    pub fn reload_failed(&self) {
        self.reload_failures.inc();
    }

    /// Counts a reload abandoned for taking too long (reload.rs).
    pub fn reload_timed_out(&self) {
        self.reload_timeouts.inc();
    }

    /// Counts a bearer token reload that changed the tokens (bearer.rs).
    pub fn auth_token_reload_succeeded(&self) {
        self.auth_token_reloads.inc();
    }

    /// Counts a refused bearer token reload (bearer.rs).
    pub fn auth_token_reload_failed(&self) {
        self.auth_token_reload_failures.inc();
    }

    /// Marks the sidecar as draining: `/ready` answers 503 from now on.
    pub fn start_draining(&self) {
        self.draining.set(1);
        self.ready.store(false, Ordering::SeqCst);
    }

    /// The Prometheus text exposition of every metric.
    pub fn render(&self) -> Vec<u8> {
        let mut out = Vec::new();
        // Encoding into a Vec only fails on metrics the registry could not
        // have accepted; an empty page is then the honest answer.
        if TextEncoder::new()
            .encode(&self.registry.gather(), &mut out)
            .is_err()
        {
            out.clear();
        }
        out
    }

    fn is_ready(&self) -> bool {
        self.ready.load(Ordering::SeqCst)
    }
}

/// The spent-token store reports its calls and clock readings here
/// (`reqstate_replay_*`): the store knows nothing of these metrics.
impl StoreObserver for Metrics {
    /// Counts one replay store call and the answer for each of its tokens.
    fn consumed(&self, took: Duration, answers: &[Recorded]) {
        self.replay_store_latency.observe(took.as_secs_f64());
        for answer in answers {
            let (result, hot) = match answer {
                Ok(true) => ("consumed", Some(0)),
                Ok(false) => ("replayed", Some(1)),
                Err(failure) => match failure.error {
                    reqstate::StoreError::Full => ("replay_store_full", None),
                    reqstate::StoreError::Unavailable => ("replay_store_unavailable", None),
                },
            };
            match hot {
                Some(i) => self.hot_replay_records[i]
                    .get_or_init(|| self.replay_records.with_label_values(&[result]))
                    .inc(),
                None => self.replay_records.with_label_values(&[result]).inc(),
            }
        }
    }

    /// Records a reading of the replay store's clock: this clock minus the
    /// store's, and the bound.
    fn clock_read(&self, skew_ms: i64, max_skew: Duration) {
        self.replay_store_clock_skew.set(skew_ms as f64 / 1000.0);
        self.replay_store_max_skew.set(max_skew.as_secs_f64());
    }
}

/// Serves `GET /metrics` (Prometheus text format), `GET /ready` (200, or
/// 503 while draining: take the sidecar out of service) and `GET /live`
/// (200 as long as the process answers, draining included: a liveness probe
/// must not restart a sidecar that is finishing its calls) on `listener`
/// until `shutdown` changes.
pub async fn serve_admin(
    listener: TcpListener,
    metrics: Arc<Metrics>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = shutdown.changed() => return,
        };
        let (stream, _) = match accepted {
            Ok(conn) => conn,
            Err(e) => {
                tracing::warn!(error = %e, "metrics listener: accept failed");
                continue;
            }
        };
        let metrics = metrics.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req: Request<hyper::body::Incoming>| {
                let metrics = metrics.clone();
                async move { Ok::<_, Infallible>(admin_response(&req, &metrics)) }
            });
            if let Err(e) = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                tracing::debug!(error = %e, "metrics connection ended with an error");
            }
        });
    }
}

fn admin_response<B>(req: &Request<B>, metrics: &Metrics) -> Response<Full<Bytes>> {
    let (status, content_type, body) = match (req.method().as_str(), req.uri().path()) {
        ("GET", "/metrics") => (
            StatusCode::OK,
            "text/plain; version=0.0.4",
            Bytes::from(metrics.render()),
        ),
        ("GET", "/ready") if metrics.is_ready() => {
            (StatusCode::OK, "text/plain", Bytes::from_static(b"ready\n"))
        }
        ("GET", "/ready") => (
            StatusCode::SERVICE_UNAVAILABLE,
            "text/plain",
            Bytes::from_static(b"draining\n"),
        ),
        ("GET", "/live") => (StatusCode::OK, "text/plain", Bytes::from_static(b"live\n")),
        _ => (
            StatusCode::NOT_FOUND,
            "text/plain",
            Bytes::from_static(b"not found: try /metrics, /ready or /live\n"),
        ),
    };
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(content_type),
    );
    response
}
