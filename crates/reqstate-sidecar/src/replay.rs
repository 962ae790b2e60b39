//! The spent-token store of single-use tokens (docs/SINGLE_USE.md): in this
//! process (`--replay-store memory`, the default) or in Redis, shared by every
//! sidecar of a fleet (`--replay-store redis://…`, `rediss://…`, `unix://…`,
//! or a Redis Cluster with `--replay-cluster`).
//!
//! Redis records are written with one atomic `SET <name> 1 NX PXAT <ms>` per
//! token (pipelined for a batch): exactly one of any number of concurrent
//! consumes of a token, on any sidecar, gets `OK`. Every store call has a
//! deadline; a store that errs or does not answer in time makes the consume
//! fail closed (`REASON_REPLAY_STORE_UNAVAILABLE`) and nothing else: the
//! sidecar keeps serving, and the Redis connection reconnects by itself.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use reqstate::{MemoryReplayStore, ReplayStore as _, SpentId, StoreError};
use tokio::sync::OnceCell;

use crate::metrics::Metrics;

/// The default `--replay-capacity`: live records held by the memory store.
pub const DEFAULT_MEMORY_CAPACITY: usize = 1_000_000;
/// The default `--replay-timeout-ms`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(250);
/// The default `--replay-key-prefix`.
pub const DEFAULT_KEY_PREFIX: &str = "reqstate:";

/// Where spent tokens are recorded, as configured.
#[derive(Clone, PartialEq, Eq)]
pub enum ReplayStoreConfig {
    /// In this process: bounded, swept, lost on restart.
    Memory {
        /// Live records held at most.
        capacity: usize,
    },
    /// One Redis (or Valkey) server.
    Redis {
        /// `redis://`, `rediss://` (TLS) or `unix://` URL, with user and
        /// password if the server needs them.
        url: String,
        /// Prefix of every record name.
        prefix: String,
        /// Deadline of each store call.
        timeout: Duration,
    },
    /// A Redis Cluster, found from these seed nodes.
    Cluster {
        /// Seed node URLs.
        urls: Vec<String>,
        /// Prefix of every record name.
        prefix: String,
        /// Deadline of each store call.
        timeout: Duration,
    },
}

/// Shows the URLs without their passwords.
impl fmt::Debug for ReplayStoreConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReplayStoreConfig::Memory { capacity } => f
                .debug_struct("Memory")
                .field("capacity", capacity)
                .finish(),
            ReplayStoreConfig::Redis {
                url,
                prefix,
                timeout,
            } => f
                .debug_struct("Redis")
                .field("url", &redacted(url))
                .field("prefix", prefix)
                .field("timeout", timeout)
                .finish(),
            ReplayStoreConfig::Cluster {
                urls,
                prefix,
                timeout,
            } => f
                .debug_struct("Cluster")
                .field(
                    "urls",
                    &urls.iter().map(|u| redacted(u)).collect::<Vec<_>>(),
                )
                .field("prefix", prefix)
                .field("timeout", timeout)
                .finish(),
        }
    }
}

/// A URL with any password replaced by `***`, for logs and errors.
pub fn redacted(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let (authority, path) = match rest.find('/') {
        Some(at) => rest.split_at(at),
        None => (rest, ""),
    };
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split(':').next().unwrap_or("");
            let shown = if userinfo.contains(':') {
                format!("{user}:***")
            } else {
                // `redis://secret@host` puts the password alone before `@`.
                "***".to_string()
            };
            format!("{scheme}://{shown}@{host}{path}")
        }
        None => url.to_string(),
    }
}

enum Backend {
    Memory(MemoryReplayStore),
    Redis(redis::aio::ConnectionManager),
    Cluster(Box<Cluster>),
}

/// A cluster connection, made on first use (and retried on the next call
/// while the cluster cannot be reached); it then follows the cluster's
/// topology and reconnects by itself.
struct Cluster {
    client: redis::cluster::ClusterClient,
    connection: OnceCell<redis::cluster_async::ClusterConnection>,
}

/// The sidecar's spent-token store.
pub struct Replay {
    backend: Backend,
    prefix: String,
    timeout: Duration,
    metrics: Arc<Metrics>,
    description: String,
}

impl fmt::Debug for Replay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Replay")
            .field("store", &self.description)
            .finish_non_exhaustive()
    }
}

/// Why a store could not be set up (a bad URL): a configuration error.
#[derive(Debug)]
pub struct ReplaySetupError(pub String);

impl fmt::Display for ReplaySetupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ReplaySetupError {}

impl Replay {
    /// Sets the store up. Nothing is connected yet: a Redis that is down at
    /// start makes consumes fail closed until it is up, and the sidecar
    /// serves everything else meanwhile.
    pub fn new(
        config: &ReplayStoreConfig,
        metrics: Arc<Metrics>,
    ) -> Result<Self, ReplaySetupError> {
        let bad_url = |url: &str, e: redis::RedisError| {
            ReplaySetupError(format!(
                "--replay-store {}: {}",
                redacted(url),
                e.detail().unwrap_or("not a Redis URL")
            ))
        };
        let (backend, prefix, timeout, description) = match config {
            ReplayStoreConfig::Memory { capacity } => (
                Backend::Memory(MemoryReplayStore::new(*capacity)),
                String::new(),
                DEFAULT_TIMEOUT,
                format!("memory (capacity {capacity})"),
            ),
            ReplayStoreConfig::Redis {
                url,
                prefix,
                timeout,
            } => {
                if url.starts_with("rediss://") {
                    install_tls_provider();
                }
                let client = redis::Client::open(url.as_str()).map_err(|e| bad_url(url, e))?;
                let manager_config = redis::aio::ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(*timeout))
                    .set_response_timeout(Some(*timeout))
                    .set_number_of_retries(1)
                    .set_max_delay(Duration::from_secs(2));
                let manager =
                    redis::aio::ConnectionManager::new_lazy_with_config(client, manager_config)
                        .map_err(|e| bad_url(url, e))?;
                (
                    Backend::Redis(manager),
                    prefix.clone(),
                    *timeout,
                    format!("redis {}", redacted(url)),
                )
            }
            ReplayStoreConfig::Cluster {
                urls,
                prefix,
                timeout,
            } => {
                if urls.iter().any(|u| u.starts_with("rediss://")) {
                    install_tls_provider();
                }
                let client =
                    redis::cluster::ClusterClient::builder(urls.iter().map(String::as_str))
                        .connection_timeout(*timeout)
                        .response_timeout(*timeout)
                        .retries(1)
                        .build()
                        .map_err(|e| bad_url(&urls.join(","), e))?;
                (
                    Backend::Cluster(Box::new(Cluster {
                        client,
                        connection: OnceCell::new(),
                    })),
                    prefix.clone(),
                    *timeout,
                    format!(
                        "redis cluster {}",
                        urls.iter()
                            .map(|u| redacted(u))
                            .collect::<Vec<_>>()
                            .join(",")
                    ),
                )
            }
        };
        Ok(Replay {
            backend,
            prefix,
            timeout,
            metrics,
            description,
        })
    }

    /// What the store is, for logs (no password).
    pub fn description(&self) -> &str {
        &self.description
    }

    fn record_name(&self, id: &SpentId) -> String {
        format!("{}{}", self.prefix, id.record_name())
    }

    /// Records one spent token: `Ok(true)` if this call recorded it.
    pub async fn record(&self, id: &SpentId, until: u64, now: u64) -> Result<bool, StoreError> {
        self.record_many(&[(*id, until)], now)
            .await
            .pop()
            .unwrap_or(Err(StoreError::Unavailable))
    }

    /// Records many spent tokens in one round trip (a pipeline on Redis),
    /// one answer per item, in order.
    pub async fn record_many(
        &self,
        items: &[(SpentId, u64)],
        now: u64,
    ) -> Vec<Result<bool, StoreError>> {
        if items.is_empty() {
            return Vec::new();
        }
        let started = Instant::now();
        let answers = match &self.backend {
            Backend::Memory(store) => items
                .iter()
                .map(|(id, until)| store.insert_if_absent(id, *until, now))
                .collect(),
            Backend::Redis(manager) => {
                let mut connection = manager.clone();
                self.pipelined(&mut connection, items).await
            }
            Backend::Cluster(cluster) => {
                let connected = tokio::time::timeout(
                    self.timeout,
                    cluster
                        .connection
                        .get_or_try_init(|| cluster.client.get_async_connection()),
                )
                .await;
                match connected {
                    Ok(Ok(connection)) => self.concurrent(connection, items).await,
                    Ok(Err(e)) => {
                        tracing::warn!(error = ?e.kind(), "replay store: cannot reach the cluster");
                        vec![Err(StoreError::Unavailable); items.len()]
                    }
                    Err(_) => vec![Err(StoreError::Unavailable); items.len()],
                }
            }
        };
        self.metrics
            .observe_replay_store(started.elapsed(), &answers);
        answers
    }

    /// The command that records one token: `SET <name> 1 NX PXAT <ms>`.
    /// The record must outlive the token: `until` is in seconds, PXAT in
    /// milliseconds; a date past what Redis can hold is clamped there (it
    /// outlives every token anyway).
    fn set_command(&self, id: &SpentId, until: u64) -> redis::Cmd {
        let expire_ms = until
            .saturating_add(1)
            .saturating_mul(1000)
            .min(i64::MAX as u64);
        let mut cmd = redis::cmd("SET");
        cmd.arg(self.record_name(id))
            .arg(1)
            .arg("NX")
            .arg("PXAT")
            .arg(expire_ms);
        cmd
    }

    /// One SET per item, all in flight at once on the cluster's multiplexed
    /// connections (a cluster refuses a pipeline whose keys span slots),
    /// under one deadline.
    async fn concurrent(
        &self,
        connection: &redis::cluster_async::ClusterConnection,
        items: &[(SpentId, u64)],
    ) -> Vec<Result<bool, StoreError>> {
        let calls = items.iter().map(|(id, until)| {
            let mut connection = connection.clone();
            let cmd = self.set_command(id, *until);
            async move { cmd.query_async::<Option<String>>(&mut connection).await }
        });
        match tokio::time::timeout(self.timeout, futures_util::future::join_all(calls)).await {
            Ok(replies) => replies
                .into_iter()
                .map(|reply| match reply {
                    Ok(reply) => Ok(reply.is_some()),
                    Err(e) => Err(store_error(&e)),
                })
                .collect(),
            Err(_) => {
                tracing::warn!(
                    timeout_ms = self.timeout.as_millis() as u64,
                    "replay store timed out"
                );
                vec![Err(StoreError::Unavailable); items.len()]
            }
        }
    }

    /// `SET <name> 1 NX PXAT <ms>` for each item, in one pipeline (one round
    /// trip), under the deadline.
    async fn pipelined<C: redis::aio::ConnectionLike + Send>(
        &self,
        connection: &mut C,
        items: &[(SpentId, u64)],
    ) -> Vec<Result<bool, StoreError>> {
        let mut pipeline = redis::pipe();
        for (id, until) in items {
            pipeline.add_command(self.set_command(id, *until));
        }
        let answered: Result<Result<Vec<Option<String>>, redis::RedisError>, _> =
            tokio::time::timeout(self.timeout, pipeline.query_async(connection)).await;
        match answered {
            Ok(Ok(replies)) if replies.len() == items.len() => replies
                .into_iter()
                .map(|reply| Ok(reply.is_some()))
                .collect(),
            Ok(Ok(replies)) => {
                tracing::warn!(
                    expected = items.len(),
                    got = replies.len(),
                    "replay store: a pipeline answered the wrong number of replies"
                );
                vec![Err(StoreError::Unavailable); items.len()]
            }
            Ok(Err(e)) => vec![Err(store_error(&e)); items.len()],
            Err(_) => {
                tracing::warn!(
                    timeout_ms = self.timeout.as_millis() as u64,
                    "replay store timed out"
                );
                vec![Err(StoreError::Unavailable); items.len()]
            }
        }
    }
}

/// What a Redis error means for a consume: a server out of memory under a
/// `noeviction` policy is full (it will not drop records to make room:
/// docs/SINGLE_USE.md); anything else is unavailable. Logged, without the
/// server's message (which could quote a key).
fn store_error(e: &redis::RedisError) -> StoreError {
    tracing::warn!(error = ?e.kind(), code = ?e.code(), "replay store error");
    if e.code() == Some("OOM") {
        StoreError::Full
    } else {
        StoreError::Unavailable
    }
}

/// rustls needs a process-wide crypto provider for `rediss://`: ring, as
/// the rest of the sidecar uses. Installing it twice is harmless.
fn install_tls_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_reach_logs() {
        assert_eq!(
            redacted("redis://app:hunter2@cache:6379/0"),
            "redis://app:***@cache:6379/0"
        );
        assert_eq!(redacted("rediss://hunter2@cache"), "rediss://***@cache");
        assert_eq!(redacted("redis://cache:6379"), "redis://cache:6379");
        assert_eq!(redacted("unix:///run/redis.sock"), "unix:///run/redis.sock");
        let config = ReplayStoreConfig::Redis {
            url: "redis://u:hunter2@h".into(),
            prefix: "p:".into(),
            timeout: DEFAULT_TIMEOUT,
        };
        assert!(!format!("{config:?}").contains("hunter2"));
    }
}
