//! One Redis master: its pool, its shared multiplexed connection, requests queued on it in the
//! order they were made, and whether it answers lately.
//!
//! [`Node`] and its public face are here; the rest, one concern a file: `open` (a node from its
//! URL), `connect` (connecting, in a task of its own), `identity` (one server never votes
//! twice), `link` (what a node's requests share, and awaiting their replies), `queue` (what a
//! request is sent as), `order` (requests reach the node in the order they were made),
//! `script` (a script call packed once), `wire` (the connection, and a cluster's resends).

mod connect;
mod identity;
mod link;
mod open;
mod order;
mod queue;
mod script;
mod wire;

pub(crate) use open::NodeOptions;
pub(crate) use script::{PreparedScript, Request};

use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt as _;
use redis::{Cmd, FromRedisValue, Value};

use crate::{NodeAddress, NodeError, NodeErrorKind, ScriptCall};
use link::{Link, Placed};

/// One independent Redis master.
///
/// Requests share one multiplexed connection checked out of the node's deadpool pool and kept
/// until it breaks. Checking out per request would cost deadpool's `UNWATCH` + `PING` health
/// check, a second round trip, on every lock operation; a multiplexed connection already
/// carries concurrent requests, pipelined.
///
/// **Requests reach the node in the order they were made.** A request is queued on the
/// connection when it is made, not when its reply is first awaited, and requests made while
/// the node is connecting wait in a queue of their own, in order. So a release always reaches
/// a node after the acquisition it undoes, even when that acquisition's reply is still
/// outstanding (the caller decided without it) or the node is paused.
///
/// **A node that does not answer is not waited on again and again.** A request that times
/// out, or a connection that fails, marks the node unresponsive; a fan-out that has a majority
/// of responsive nodes then skips it (releases are still sent, not awaited) and probes it with
/// a `PING` at most one at a time. The first answer from it, to the probe or to anything else,
/// makes it responsive again.
///
/// Connecting (TCP, TLS handshake, `AUTH`) has a bound of its own, the connect timeout, and
/// runs in a task of its own: a request waits for it at most its per-node timeout, and a
/// connection that takes longer is still there for the next request.
///
/// **A Redis Cluster member** (`redis+cluster://`) is one vote like a standalone master. Its
/// requests go through one redis-rs cluster connection, which routes each by its first key's
/// slot (every key of a lock shares the lock's hash tag) and follows the cluster's topology.
/// redis-rs never sends a request twice (no retries: a script whose reply was lost may have
/// run, and running it again would count a hold twice); the client sends one again itself only
/// when its slot moves (`TRYAGAIN`, `ASK`, `MOVED`: it ran none of it, see `until_run`). Requests
/// to one shard keep their order while fewer than redis-rs's 100 wait to enter the connection
/// and no slot moves; past that, their order is up to the scheduler. The lock scripts name the
/// hold in every request, so a late release or undo of an earlier hold never touches the next
/// one, and a late attempt never takes over a later hold; what reordering costs is a grant no
/// one holds, until its lease ends (docs/deployments.md).
pub struct Node {
    index: usize,
    endpoint: Endpoint,
    link: Arc<Link>,
}

/// How a node is reached: one server, or a Redis Cluster through its seed nodes.
#[derive(Clone)]
#[non_exhaustive]
pub enum Endpoint {
    /// A standalone master (or a single server of any kind).
    Server(Arc<redis::Client>),
    /// A Redis Cluster member: the URLs of its seed nodes, credentials included (never log
    /// them; [`Node::address`] is the printable form).
    Cluster(Arc<[String]>),
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node")
            .field("index", &self.index)
            .field("address", &self.link.address)
            .finish_non_exhaustive()
    }
}

impl Node {
    /// The node's position in the configuration.
    pub fn index(&self) -> usize {
        self.index
    }

    /// The node's URL, password hidden.
    pub fn address(&self) -> &NodeAddress {
        &self.link.address
    }

    /// How the node is reached, for what its request connection cannot carry (pub/sub).
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// Whether it is a Redis Cluster member (it runs a script's cluster variant).
    pub(crate) fn is_cluster_member(&self) -> bool {
        self.link.cluster
    }

    /// Whether the node's last request timed out (or its connection failed) and nothing was
    /// heard from it since: fan-outs with a majority of responsive nodes do not wait for it.
    pub(crate) fn is_unresponsive(&self) -> bool {
        self.link.unresponsive.load(Ordering::Relaxed)
    }

    /// Runs a script on this node within `timeout`.
    ///
    /// # Cancel safety
    ///
    /// The request is queued on the node's connection when this is called (not when the future
    /// is first polled), so it keeps its place before anything sent later, and its timeout runs
    /// from then. Dropping the future abandons the reply; a request the connection has not
    /// written yet is then skipped (redis-rs sends nothing nobody awaits), one already written
    /// still runs.
    ///
    /// # Errors
    ///
    /// A [`NodeError`] for a timeout, a failed connection or an error reply.
    pub fn run_script<T: FromRedisValue>(
        &self,
        call: &ScriptCall,
        timeout: Duration,
    ) -> impl Future<Output = Result<T, NodeError>> + Send + 'static {
        let request = Request::Script(Arc::new(PreparedScript::new(call, self.link.cluster)));
        self.decoded(self.submit(&request, timeout))
    }

    /// Runs one command on this node within `timeout`.
    ///
    /// # Cancel safety
    ///
    /// As [`Node::run_script`].
    ///
    /// # Errors
    ///
    /// A [`NodeError`] for a timeout, a failed connection or an error reply.
    pub fn query<T: FromRedisValue>(
        &self,
        cmd: &Cmd,
        timeout: Duration,
    ) -> impl Future<Output = Result<T, NodeError>> + Send + 'static {
        let request = Request::Command(Arc::new(cmd.clone()));
        self.decoded(self.submit(&request, timeout))
    }

    fn decoded<T: FromRedisValue>(
        &self,
        reply: impl Future<Output = Result<Value, NodeErrorKind>> + Send + 'static,
    ) -> impl Future<Output = Result<T, NodeError>> + Send + 'static {
        let link = Arc::clone(&self.link);
        // A map, not an async block, which would keep the reply's future twice.
        reply.map(move |reply| reply.and_then(decode).map_err(|kind| link.error(kind)))
    }

    /// The error of this node with `kind`.
    pub(crate) fn error(&self, kind: NodeErrorKind) -> NodeError {
        self.link.error(kind)
    }

    /// Queues `request` on the node now, and returns its reply within `timeout`. The returned
    /// future owns what it needs: it may finish in the background after its caller decided.
    pub(crate) fn submit(
        &self,
        request: &Request,
        timeout: Duration,
    ) -> impl Future<Output = Result<Value, NodeErrorKind>> + Send + 'static {
        let link = Arc::clone(&self.link);
        let (placed, deadline, keep_until) = link.place(Some(request), timeout);
        let request = request.clone();
        async move {
            let reply = {
                let link = Arc::clone(&link);
                async move { link.finish(placed, request, timeout).await }
            };
            if keep_until <= deadline {
                return match tokio::time::timeout_at(deadline, reply).await {
                    Ok(outcome) => outcome,
                    Err(_) => {
                        link.unresponsive.store(true, Ordering::Relaxed);
                        Err(NodeErrorKind::Timeout(timeout))
                    }
                };
            }
            // A release that must outlive the acquisitions queued before it: its caller hears
            // of a timeout at its own deadline, and the request stays out until `keep_until`.
            let mut reply = Box::pin(reply);
            match tokio::time::timeout_at(deadline, reply.as_mut()).await {
                Ok(outcome) => outcome,
                Err(_) => {
                    link.unresponsive.store(true, Ordering::Relaxed);
                    crate::spawn_cleanup(async move {
                        let _ = tokio::time::timeout_at(keep_until, reply).await;
                    });
                    Err(NodeErrorKind::Timeout(timeout))
                }
            }
        }
    }

    /// Starts a probe of an unresponsive node (a `PING` within `timeout`) unless one is in
    /// flight: its answer makes the node responsive again.
    pub(crate) fn probe(&self, timeout: Duration) {
        {
            let mut state = self.link.state();
            if !self.is_unresponsive() || state.probing {
                return;
            }
            state.probing = true;
        }
        // Clears the flag however the probe ends, its task dropped unfinished included.
        let probing = crate::FinishOnDrop::now(Arc::clone(&self.link), |link| {
            link.state().probing = false;
        });
        let ping = self.submit(&Request::Command(Arc::new(redis::cmd("PING"))), timeout);
        let probe = async move {
            let _ = ping.await;
            drop(probing);
        };
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(probe);
        }
    }

    /// Makes sure the node is connected, waiting at most the connect timeout.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the connection attempt goes on in its own task.
    ///
    /// # Errors
    ///
    /// A [`NodeError`] when no connection could be made (refused, unreachable, a failed TLS
    /// handshake or `AUTH`, or the connect timeout).
    pub async fn connect(&self) -> Result<(), NodeError> {
        let link = Arc::clone(&self.link);
        let timeout = self.link.connect_timeout.saturating_mul(2);
        let (placed, _, _) = link.place(None, timeout);
        let connected = async {
            match placed {
                Placed::Queued(_) | Placed::Connected => Ok(()),
                Placed::Waiting(done) => link.connected(done).await.map(|_| ()),
            }
        };
        match tokio::time::timeout(timeout, connected).await {
            Ok(outcome) => outcome.map_err(|kind| self.link.error(kind)),
            Err(_) => Err(self.link.error(NodeErrorKind::Timeout(timeout))),
        }
    }
}

/// The value a caller asked for.
pub(crate) fn decode<T: FromRedisValue>(value: Value) -> Result<T, NodeErrorKind> {
    redis::from_redis_value(value).map_err(|err| NodeErrorKind::Command(err.into()))
}
