//! One Redis master: its pool, its shared multiplexed connection, and timed requests to it.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use deadpool_redis::{Connection, Manager, Pool, Runtime};
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, ErrorKind, FromRedisValue, RedisError, ServerErrorKind};
use tokio::sync::watch;

use crate::{ConnectError, InvalidArgument, NodeAddress, NodeError, NodeErrorKind, ScriptCall};

/// One independent Redis master.
///
/// Requests share one multiplexed connection checked out of the node's deadpool pool and kept
/// until it breaks. Checking out per request would cost deadpool's `UNWATCH` + `PING` health
/// check, a second round trip, on every lock operation; a multiplexed connection already
/// carries concurrent requests. Sharing one connection also keeps a node's requests in order,
/// so a release always reaches the node after the acquisition it undoes.
///
/// Connecting (TCP, TLS handshake, `AUTH`) has a bound of its own, the connect timeout, and
/// runs in a task of its own: a request waits for it at most its per-node timeout, and a
/// connection that takes longer is still there for the next request.
pub struct Node {
    index: usize,
    address: NodeAddress,
    client: redis::Client,
    pool: Pool,
    connect_timeout: Duration,
    shared: Arc<Mutex<Shared>>,
}

/// How a connection attempt ended, as every request waiting for it sees it.
type Connected = Option<Result<(), Arc<ConnectError>>>;

/// The connection requests share, and which scripts the node is known to have cached on it.
#[derive(Default)]
struct Shared {
    connection: Option<Connection>,
    /// Bumped whenever the connection is replaced: what was learned on an older one is stale.
    generation: u64,
    /// SHAs the node ran on this connection. Anything else is sent whole (`EVAL`): a request
    /// whose reply nobody awaits any more (the node was paused, the caller timed out) must not
    /// depend on a `NOSCRIPT` round trip.
    cached_scripts: HashSet<String>,
    /// The connection attempt in flight, if any.
    connecting: Option<watch::Receiver<Connected>>,
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node")
            .field("index", &self.index)
            .field("address", &self.address)
            .finish_non_exhaustive()
    }
}

impl Node {
    /// Opens a node from its URL. Nothing is connected until the first request (or
    /// [`Node::connect`]).
    pub(crate) fn open(
        index: usize,
        url: &str,
        pool_size: usize,
        connect_timeout: Duration,
    ) -> Result<Self, InvalidArgument> {
        let address = NodeAddress::redact(url);
        let unusable = |reason: String| InvalidArgument::NodeUrl {
            index,
            address: address.clone(),
            reason: hide_secret(reason, url),
        };
        let client = redis::Client::open(url).map_err(|err| unusable(err.to_string()))?;
        // Connecting is bounded by the connect timeout; every request by the caller's per-node
        // timeout (redis-rs's own response timeout would cut a longer configured one short).
        let connection_config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(connect_timeout))
            .set_response_timeout(None);
        let manager =
            Manager::new_with_config(client.get_connection_info().clone(), connection_config)
                .map_err(|err| unusable(err.to_string()))?;
        let pool = Pool::builder(manager)
            .max_size(pool_size.max(1))
            .runtime(Runtime::Tokio1)
            .build()
            .map_err(|err| unusable(err.to_string()))?;
        Ok(Self {
            index,
            address,
            client,
            pool,
            connect_timeout,
            shared: Arc::default(),
        })
    }

    /// The node's position in the configuration.
    pub fn index(&self) -> usize {
        self.index
    }

    /// The node's URL, password hidden.
    pub fn address(&self) -> &NodeAddress {
        &self.address
    }

    /// The node's redis-rs client, for what a pool cannot carry (pub/sub connections).
    pub fn client(&self) -> &redis::Client {
        &self.client
    }

    /// Runs a script on this node within `timeout`.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future abandons the reply, not the command: a script already sent still
    /// runs on the node.
    ///
    /// # Errors
    ///
    /// A [`NodeError`] for a timeout, a failed connection or an error reply.
    pub async fn run_script<T: FromRedisValue>(
        &self,
        call: &ScriptCall<'_>,
        timeout: Duration,
    ) -> Result<T, NodeError> {
        self.within(timeout, self.script_untimed(call)).await
    }

    /// Runs one command on this node within `timeout`.
    ///
    /// # Cancel safety
    ///
    /// As [`Node::run_script`]: a command already sent still runs.
    ///
    /// # Errors
    ///
    /// A [`NodeError`] for a timeout, a failed connection or an error reply.
    pub async fn query<T: FromRedisValue>(
        &self,
        cmd: &redis::Cmd,
        timeout: Duration,
    ) -> Result<T, NodeError> {
        self.within(timeout, async {
            let (mut connection, _) = self.connection().await?;
            cmd.query_async(&mut connection)
                .await
                .map_err(|err| self.command_failed(err))
        })
        .await
    }

    async fn within<T>(
        &self,
        timeout: Duration,
        request: impl std::future::Future<Output = Result<T, NodeErrorKind>>,
    ) -> Result<T, NodeError> {
        let outcome = match tokio::time::timeout(timeout, request).await {
            Ok(outcome) => outcome,
            Err(_) => Err(NodeErrorKind::Timeout(timeout)),
        };
        outcome.map_err(|kind| NodeError {
            index: self.index,
            address: self.address.clone(),
            kind,
        })
    }

    async fn script_untimed<T: FromRedisValue>(
        &self,
        call: &ScriptCall<'_>,
    ) -> Result<T, NodeErrorKind> {
        let (mut connection, generation) = self.connection().await?;
        let sha = call.sha();
        let by_sha = !call.is_by_source() && self.lock_shared().cached_scripts.contains(sha);
        if by_sha {
            match call.evalsha().query_async(&mut connection).await {
                Err(err) if err.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                    // Flushed or restarted: forget what we knew and send it whole.
                    self.lock_shared().cached_scripts.clear();
                }
                outcome => return outcome.map_err(|err| self.command_failed(err)),
            }
        }
        let outcome = call.eval().query_async(&mut connection).await;
        if outcome.is_ok() {
            let mut shared = self.lock_shared();
            if shared.generation == generation {
                shared.cached_scripts.insert(sha.to_owned());
            }
        }
        outcome.map_err(|err| self.command_failed(err))
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
        self.within(self.connect_timeout.saturating_mul(2), async {
            self.connection().await.map(|_| ())
        })
        .await
    }

    /// The shared connection and its generation, once connected. With no connection, a
    /// connection attempt starts in a task of its own (or the one in flight is joined).
    async fn connection(&self) -> Result<(MultiplexedConnection, u64), NodeErrorKind> {
        for _ in 0..2 {
            let mut connecting = {
                let mut shared = lock(&self.shared);
                if let Some(connection) = shared.connection.as_ref() {
                    return Ok((MultiplexedConnection::clone(connection), shared.generation));
                }
                match shared.connecting.as_ref() {
                    Some(connecting) => connecting.clone(),
                    None => {
                        let (done, connecting) = watch::channel(None);
                        shared.connecting = Some(connecting.clone());
                        tokio::spawn(connect(
                            self.pool.clone(),
                            Arc::clone(&self.shared),
                            self.connect_timeout,
                            done,
                        ));
                        connecting
                    }
                }
            };
            let outcome = connecting
                .wait_for(Option::is_some)
                .await
                .map(|outcome| outcome.clone())
                .unwrap_or(None);
            match outcome {
                Some(Ok(())) => continue, // connected: take it (it may have broken already)
                Some(Err(failure)) => return Err(NodeErrorKind::Connect(failure)),
                None => break,
            }
        }
        Err(NodeErrorKind::Connect(Arc::new(ConnectError::Timeout(
            self.connect_timeout,
        ))))
    }

    fn command_failed(&self, err: RedisError) -> NodeErrorKind {
        if err.is_io_error() || err.is_connection_dropped() || err.is_unrecoverable_error() {
            // Back to the pool: its health check discards it and the next request reconnects.
            let mut shared = self.lock_shared();
            shared.connection = None;
            shared.cached_scripts.clear();
        }
        NodeErrorKind::Command(err)
    }

    fn lock_shared(&self) -> std::sync::MutexGuard<'_, Shared> {
        lock(&self.shared)
    }
}

fn lock(shared: &Mutex<Shared>) -> std::sync::MutexGuard<'_, Shared> {
    // The guarded value is replaced whole, never left half-written: a poisoned lock still
    // holds a consistent value.
    shared
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// One connection attempt, in a task of its own so it outlives the request that started it.
async fn connect(
    pool: Pool,
    shared: Arc<Mutex<Shared>>,
    timeout: Duration,
    done: watch::Sender<Connected>,
) {
    let outcome = match tokio::time::timeout(timeout, pool.get()).await {
        Ok(Ok(connection)) => {
            let mut shared = lock(&shared);
            if shared.connection.is_none() {
                shared.connection = Some(connection);
                shared.generation += 1;
                shared.cached_scripts.clear();
            }
            Ok(())
        }
        Ok(Err(err)) => Err(Arc::new(ConnectError::Failed(err))),
        Err(_) => Err(Arc::new(ConnectError::Timeout(timeout))),
    };
    lock(&shared).connecting = None;
    done.send_replace(Some(outcome));
}

/// Removes a URL's password from a message that might echo the URL.
fn hide_secret(message: String, url: &str) -> String {
    match url::Url::parse(url)
        .ok()
        .and_then(|u| u.password().map(str::to_owned))
    {
        Some(password) if !password.is_empty() => message.replace(&password, "***"),
        _ => message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Built alone (`cargo test -p redlock-core`), redis-rs has TLS only with `tls-rustls`;
    /// in a workspace build another crate may turn it on, so the test asks redis-rs.
    #[test]
    fn a_tls_url_without_tls_support_says_so_without_the_password() {
        let url = "rediss://:topsecret@127.0.0.1:6380";
        let tls = redis::Client::open("rediss://127.0.0.1:6380").is_ok();
        match Node::open(0, url, 1, Duration::from_secs(1)) {
            Ok(node) => {
                assert!(tls, "accepted without TLS support");
                assert_eq!(node.address().as_str(), "rediss://:***@127.0.0.1:6380");
            }
            Err(err) => {
                assert!(!tls, "refused with TLS support: {err}");
                let shown = err.to_string();
                assert!(shown.to_lowercase().contains("tls"), "{shown}");
                assert!(!shown.contains("topsecret"), "{shown}");
            }
        }
    }
}
