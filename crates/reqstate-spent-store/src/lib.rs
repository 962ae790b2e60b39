//! The spent-token stores of single-use tokens (docs/SINGLE_USE.md): where
//! the sidecar and the command line record that a single-use token was
//! consumed, in this process (`--replay-store memory`, the default) or in
//! Redis, shared by every sidecar of a fleet (`--replay-store redis://…`,
//! `rediss://…`, `unix://…`, or a Redis Cluster with `--replay-cluster`).
//!
//! Redis records are written with one atomic `SET <name> <attempt> NX GET PX
//! <ms>` per token (pipelined for a batch): exactly one of any number of
//! concurrent consumes of a token, on any sidecar, records it. The lifetime is
//! relative ([`reqstate::shared_record_lifetime`]): long enough for every
//! verifier whatever its leeway, while every verifier's clock is within
//! `--replay-max-skew-ms` of Redis's, which the clock guard checks against
//! Redis `TIME` (at start, every 10 s, and before a consume after a
//! wall-clock step), refusing consumes while it does not hold. Every store
//! call has a deadline; a store that errs or does not answer in time makes
//! the consume fail closed (`REASON_REPLAY_STORE_UNAVAILABLE`) and nothing
//! else: the caller keeps serving, and the Redis connection reconnects by
//! itself. A call whose outcome is unknown (it may have been recorded) leaves
//! its attempt id behind, so that the caller's retry through this process is
//! accepted once if it was.
//!
//! The store knows nothing of the gRPC server that uses it: what it did is
//! reported to a [`StoreObserver`] (the sidecar's metrics implement it), so
//! the server depends on the store and never the reverse.
//!
//! - [`config`]: what to connect to ([`StoreConfig`]), its defaults, and
//!   URLs shown without their passwords;
//! - [`outcome`]: what a consume asks for ([`Spend`]) and what it gets
//!   ([`Recorded`], [`Unspent`], [`finish`]);
//! - [`observer`]: how the store reports its calls and clock readings;
//! - one module per store kind: `memory`, `redis` (one server: the
//!   `SET … NX GET` protocol every shared store speaks), `cluster`;
//! - `clock`: the clock guard against the store's `TIME`; `pending`: the
//!   attempts of unknown outcome.

// The other lints are declared once, in the workspace's `[workspace.lints]`.
#![forbid(unsafe_code)]

mod clock;
mod cluster;
pub mod config;
mod memory;
pub mod observer;
pub mod outcome;
mod pending;
mod redis;

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use reqstate::{MemoryReplayStore, SpentId, StoreError};

pub use clock::CLOCK_CHECK_PERIOD;
pub use config::{
    DEFAULT_KEY_PREFIX, DEFAULT_MAX_SKEW, DEFAULT_MEMORY_CAPACITY, DEFAULT_TIMEOUT, StoreConfig,
    StoreSetupError, redacted,
};
pub use observer::{StoreObserver, Unobserved};
pub use outcome::{Recorded, RetryOffer, Spend, StoreDetail, StoreFailure, Unspent, finish};

use crate::clock::ClockGuard;
use crate::cluster::Cluster;
use crate::pending::Pending;

/// This host's wall clock, in milliseconds since the epoch (0 before it):
/// what the clock guard compares with the store's `TIME`, and what a
/// record's lifetime is counted from when a caller's `now` is later.
pub(crate) fn wall_ms() -> i128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i128)
}

/// Where this store keeps its records.
enum Backend {
    Memory(MemoryReplayStore),
    Redis(::redis::aio::ConnectionManager),
    Cluster(Box<Cluster>),
}

/// A spent-token store, as configured: one per process, shared by every
/// call (it is `Sync`; a Redis store multiplexes one connection).
pub struct SpentStore {
    backend: Backend,
    /// The deployment's prefix of every record name.
    prefix: String,
    timeout: Duration,
    observer: Arc<dyn StoreObserver>,
    description: String,
    /// Redis only: the clock check.
    clock: Option<ClockGuard>,
    /// Redis only: the attempts of unknown outcome.
    pending: Pending,
}

impl fmt::Debug for SpentStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SpentStore")
            .field("store", &self.description)
            .finish_non_exhaustive()
    }
}

impl SpentStore {
    /// Sets the store up, reporting to `observer`. Nothing is connected yet:
    /// a Redis that is down at start makes consumes fail closed until it is
    /// up, and the caller serves everything else meanwhile.
    /// [`SpentStore::watch_clock`] connects at once and keeps the clock
    /// check current.
    pub fn new(
        config: &StoreConfig,
        observer: Arc<dyn StoreObserver>,
    ) -> Result<Self, StoreSetupError> {
        let (backend, prefix, timeout, description, clock) = match config {
            StoreConfig::Memory { capacity } => (
                Backend::Memory(MemoryReplayStore::new(*capacity)),
                String::new(),
                DEFAULT_TIMEOUT,
                format!("memory (capacity {capacity})"),
                None,
            ),
            StoreConfig::Redis {
                url,
                prefix,
                timeout,
                max_skew,
            } => (
                Backend::Redis(redis::connect(url, *timeout)?),
                prefix.clone(),
                *timeout,
                format!("redis {}", redacted(url)),
                Some(ClockGuard::new(*max_skew)),
            ),
            StoreConfig::Cluster {
                urls,
                prefix,
                timeout,
                max_skew,
            } => (
                Backend::Cluster(Box::new(Cluster::new(urls, *timeout)?)),
                prefix.clone(),
                *timeout,
                format!("redis cluster {}", redacted(&urls.join(","))),
                Some(ClockGuard::new(*max_skew)),
            ),
        };
        Ok(SpentStore {
            backend,
            prefix,
            timeout,
            observer,
            description,
            clock,
            pending: Pending::default(),
        })
    }

    /// What the store is, for logs (no password).
    pub fn description(&self) -> &str {
        &self.description
    }

    fn record_name(&self, id: &SpentId) -> String {
        redis::record_name(&self.prefix, id)
    }

    /// For a shared store: reads its clock now and then every
    /// [`CLOCK_CHECK_PERIOD`], for as long as the store lives (which also
    /// opens the connection at start rather than on the first consume).
    /// Nothing for the memory store. Must be called within a Tokio runtime.
    pub fn watch_clock(self: &Arc<Self>) {
        if self.clock.is_none() {
            return;
        }
        let store = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(CLOCK_CHECK_PERIOD);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                let Some(store) = store.upgrade() else {
                    return;
                };
                if let Ok(connection) = store.connection().await {
                    let _ = store.read_clock(&connection).await;
                }
            }
        });
    }

    /// The connection to a shared store, or why there is none.
    async fn connection(&self) -> Result<redis::Connection, StoreFailure> {
        match &self.backend {
            Backend::Memory(_) => Err(StoreError::Unavailable.into()),
            Backend::Redis(manager) => Ok(redis::Connection::Redis(manager.clone())),
            Backend::Cluster(cluster) => cluster.connection(self.timeout).await,
        }
    }

    /// Records one spent token: `Ok(true)` if this call recorded it.
    pub async fn record(&self, spend: Spend, now: u64) -> Recorded {
        self.record_many(&[spend], now)
            .await
            .pop()
            .unwrap_or(Err(StoreError::Unavailable.into()))
    }

    /// Records many spent tokens in one round trip (a pipeline on Redis),
    /// one answer per item, in order.
    pub async fn record_many(&self, items: &[Spend], now: u64) -> Vec<Recorded> {
        if items.is_empty() {
            return Vec::new();
        }
        let started = Instant::now();
        let answers = match &self.backend {
            Backend::Memory(store) => memory::record(store, items, now),
            Backend::Redis(_) | Backend::Cluster(_) => self.record_shared(items, now).await,
        };
        self.observer.consumed(started.elapsed(), &answers);
        answers
    }
}
