//! A Redis Cluster (`--replay-cluster`): found from seed nodes, followed
//! through its topology changes by the client, each record written on the
//! shard of its key. A cluster refuses pipelines whose keys span slots, so
//! a batch is one concurrent `SET` per record.

use std::time::Duration;

use tokio::sync::OnceCell;

use crate::SpentStore;
use crate::config::StoreSetupError;
use crate::outcome::StoreFailure;
use crate::redis::{Attempt, Connection, SetFailure, bad_url, install_tls_provider};

/// A cluster connection, made on first use (and retried on the next call
/// while the cluster cannot be reached); it then follows the cluster's
/// topology and reconnects by itself.
pub(crate) struct Cluster {
    client: ::redis::cluster::ClusterClient,
    connection: OnceCell<::redis::cluster_async::ClusterConnection>,
}

impl Cluster {
    /// A cluster client for these seed nodes; nothing is connected yet.
    pub(crate) fn new(urls: &[String], timeout: Duration) -> Result<Self, StoreSetupError> {
        if urls.iter().any(|u| u.starts_with("rediss://")) {
            install_tls_provider();
        }
        let client = ::redis::cluster::ClusterClient::builder(urls.iter().map(String::as_str))
            .connection_timeout(timeout)
            .response_timeout(timeout)
            .retries(1)
            .build()
            .map_err(|e| bad_url(&urls.join(","), e))?;
        Ok(Cluster {
            client,
            connection: OnceCell::new(),
        })
    }

    /// The cluster's connection, made now if it is not yet, within `timeout`.
    pub(crate) async fn connection(&self, timeout: Duration) -> Result<Connection, StoreFailure> {
        let connected = tokio::time::timeout(
            timeout,
            self.connection
                .get_or_try_init(|| self.client.get_async_connection()),
        )
        .await;
        match connected {
            Ok(Ok(connection)) => Ok(Connection::Cluster(connection.clone())),
            Ok(Err(e)) => {
                tracing::warn!(error = %e.category(), "replay store: cannot reach the cluster");
                Err(StoreFailure::unavailable(
                    "the replay store cannot be reached",
                ))
            }
            Err(_) => Err(StoreFailure::unavailable(format!(
                "the replay store did not answer within {} ms",
                timeout.as_millis()
            ))),
        }
    }
}

impl SpentStore {
    /// One SET per item, all in flight at once on the cluster's multiplexed
    /// connections (a cluster refuses a pipeline whose keys span slots),
    /// under one deadline.
    pub(crate) async fn concurrent(
        &self,
        connection: &::redis::cluster_async::ClusterConnection,
        attempts: &[Attempt],
    ) -> Vec<Result<Option<Vec<u8>>, SetFailure>> {
        let calls = attempts.iter().map(|attempt| {
            let mut connection = connection.clone();
            let cmd = attempt.command();
            async move { cmd.query_async::<Option<Vec<u8>>>(&mut connection).await }
        });
        match tokio::time::timeout(self.timeout, futures_util::future::join_all(calls)).await {
            Ok(replies) => replies
                .into_iter()
                .map(|reply| reply.map_err(|e| self.set_failure(&e)))
                .collect(),
            Err(_) => vec![Err(SetFailure::Lost(self.timed_out())); attempts.len()],
        }
    }
}
