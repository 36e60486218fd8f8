//! Connecting a node: one attempt at a time, in a task of its own, bounded by the connect
//! timeout; the server is identified before any request is sent, and the requests that waited
//! are then queued in order.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use deadpool_redis::{Connection, Pool};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use redis::{RedisError, RedisResult, Value};

use super::identity::run_id_of;
use super::link::Link;
use super::queue::queue;
use super::wire::Wire;
use crate::ConnectError;
use crate::FinishOnDrop;

/// Where a node's connections come from.
pub(super) enum Connector {
    Pool(Pool),
    Cluster(Box<ClusterClient>),
}

/// One connection attempt, in a task of its own so it outlives the requests waiting for it.
/// Dropped unfinished (its runtime ended), it fails the waiting requests and lets the next
/// request try again.
pub(super) struct ConnectAttempt {
    pub(super) link: Arc<Link>,
}

impl ConnectAttempt {
    pub(super) async fn run(self) {
        let attempt = FinishOnDrop::now(self, |attempt| {
            let timeout = attempt.link.connect_timeout;
            attempt.finish(Err(Arc::new(ConnectError::Timeout(timeout))), true);
        });
        let timeout = attempt.link.connect_timeout;
        let connecting = async {
            match &attempt.link.connector {
                Connector::Pool(pool) => pool
                    .get()
                    .await
                    .map(Wire::Pooled)
                    .map_err(ConnectError::Failed),
                Connector::Cluster(client) => client
                    .get_async_connection()
                    .await
                    .map(Wire::Cluster)
                    .map_err(ConnectError::Cluster),
            }
        };
        let identified = async {
            let mut wire = connecting.await?;
            match &mut wire {
                Wire::Pooled(connection) => attempt.identify(connection).await?,
                Wire::Cluster(connection) => attempt.identify_cluster(connection).await?,
            }
            Ok(wire)
        };
        let outcome = match tokio::time::timeout(timeout, identified).await {
            Ok(outcome) => outcome.map_err(Arc::new),
            Err(_) => Err(Arc::new(ConnectError::Timeout(timeout))),
        };
        attempt.disarm().finish(outcome, true);
    }

    /// Asks the server who it is, and refuses it if another node of the set reached it first.
    /// A server that does not tell (an ACL without `INFO`) is not checked.
    async fn identify(&self, connection: &mut Connection) -> Result<(), ConnectError> {
        let info: RedisResult<String> = redis::cmd("INFO")
            .arg("server")
            .query_async(&mut **connection)
            .await;
        let Some(run_id) = info.as_deref().ok().and_then(run_id_of) else {
            return Ok(());
        };
        self.claim(&[run_id])
    }

    /// Asks one node of the cluster for every node's id (`CLUSTER NODES`), and refuses the
    /// member if another member of the set reached one of them first: one cluster given as two
    /// members (disjoint seeds) would vote twice. A cluster that does not tell (an ACL without
    /// `CLUSTER`) is not checked.
    async fn identify_cluster(
        &self,
        connection: &mut ClusterConnection,
    ) -> Result<(), ConnectError> {
        let mut nodes = redis::cmd("CLUSTER");
        nodes.arg("NODES");
        let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random);
        let listing = match connection.route_command(nodes, routing).await {
            Ok(Value::BulkString(bytes)) => String::from_utf8_lossy(&bytes).into_owned(),
            Ok(Value::VerbatimString { text, .. }) => text,
            // Not allowed to ask (an ACL without `CLUSTER`, a renamed command): not checked.
            Err(err) if refused_command(&err) => return Ok(()),
            // Anything else (`CLUSTERDOWN`, `LOADING`, no answer): not connected yet; the
            // next request tries again, rather than keeping a connection never checked.
            Err(err) => return Err(ConnectError::Cluster(err)),
            Ok(_) => return Ok(()),
        };
        let ids: Vec<&str> = listing
            .lines()
            .filter_map(|line| line.split_whitespace().next())
            .collect();
        if ids.is_empty() {
            return Ok(());
        }
        self.claim(&ids)
    }

    /// Claims `ids` for this node, or says which node reached them first.
    fn claim(&self, ids: &[&str]) -> Result<(), ConnectError> {
        let node = self.link.index;
        self.link.identities.claim(ids, node).map_err(|first| {
            if self.link.identities.first_report(node) {
                tracing::error!(node = %self.link.address, first, "this node is another node's server under another name: it would vote twice, so it never counts; list each server once");
            }
            ConnectError::Alias { first }
        })
    }

    /// Gives up without trying (no runtime to connect on): the queue fails, the node is not
    /// blamed.
    pub(super) fn abandon(self) {
        let timeout = self.link.connect_timeout;
        self.finish(Err(Arc::new(ConnectError::Timeout(timeout))), false);
    }

    fn finish(self, outcome: Result<Wire, Arc<ConnectError>>, blame: bool) {
        let mut state = self.link.state();
        state.connecting = false;
        let waiting = std::mem::take(&mut state.waiting);
        match outcome {
            Ok(connection) => {
                if state.connection.is_none() {
                    state.connection = Some(connection);
                    state.generation += 1;
                    state.cached_scripts.clear();
                }
                for waiting in waiting {
                    if waiting.done.is_closed() {
                        continue; // nobody awaits it any more: never sent, like redis-rs does
                    }
                    let queued = waiting
                        .request
                        .as_ref()
                        .map(|request| queue(&self.link, &mut state, request, waiting.timeout));
                    let _ = waiting.done.send(Ok(queued));
                }
            }
            Err(failure) => {
                if blame {
                    self.link.unresponsive.store(true, Ordering::Relaxed);
                }
                for waiting in waiting {
                    let _ = waiting.done.send(Err(Arc::clone(&failure)));
                }
            }
        }
    }
}

/// Whether a server refused a command as one its user may not run or it does not have.
fn refused_command(err: &RedisError) -> bool {
    err.code() == Some("NOPERM")
        || err
            .to_string()
            .to_ascii_lowercase()
            .contains("unknown command")
}
