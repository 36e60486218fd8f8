//! One Redis master: its pool, its shared multiplexed connection, and timed requests to it.

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::Duration;

use deadpool_redis::{Connection, Manager, Pool, Runtime};
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, ErrorKind, FromRedisValue, RedisError, ServerErrorKind};

use crate::{InvalidArgument, NodeAddress, NodeError, NodeErrorKind, ScriptCall};

/// One independent Redis master.
///
/// Requests share one multiplexed connection checked out of the node's deadpool pool and kept
/// until it breaks. Checking out per request would cost deadpool's `UNWATCH` + `PING` health
/// check, a second round trip, on every lock operation; a multiplexed connection already
/// carries concurrent requests. Sharing one connection also keeps a node's requests in order,
/// so a release always reaches the node after the acquisition it undoes.
pub struct Node {
    index: usize,
    address: NodeAddress,
    client: redis::Client,
    pool: Pool,
    shared: Mutex<Shared>,
}

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
    /// Opens a node from its URL. Nothing is connected until the first request.
    pub(crate) fn open(index: usize, url: &str, pool_size: usize) -> Result<Self, InvalidArgument> {
        let address = NodeAddress::redact(url);
        let unusable = |reason: String| InvalidArgument::NodeUrl {
            index,
            address: address.clone(),
            reason: hide_secret(reason, url),
        };
        let client = redis::Client::open(url).map_err(|err| unusable(err.to_string()))?;
        // Our own per-node timeout bounds every request, connecting included; redis-rs's
        // defaults (1 s to connect, 500 ms to answer) would cut a longer configured one short,
        // and a link slower than 1 s per round trip could never connect at all.
        let connection_config = AsyncConnectionConfig::new()
            .set_connection_timeout(None)
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
            shared: Mutex::new(Shared::default()),
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

    /// The shared connection (checked out of the pool when there is none yet) and its generation.
    async fn connection(&self) -> Result<(MultiplexedConnection, u64), NodeErrorKind> {
        {
            let shared = self.lock_shared();
            if let Some(connection) = shared.connection.as_ref() {
                return Ok((MultiplexedConnection::clone(connection), shared.generation));
            }
        }
        let fresh = self.pool.get().await.map_err(NodeErrorKind::Connect)?;
        let handle = MultiplexedConnection::clone(&fresh);
        let mut shared = self.lock_shared();
        if shared.connection.is_none() {
            shared.connection = Some(fresh);
            shared.generation += 1;
            shared.cached_scripts.clear();
        }
        Ok((handle, shared.generation))
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
        // The guarded value is replaced whole, never left half-written: a poisoned lock still
        // holds a consistent value.
        self.shared
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
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
        match Node::open(0, url, 1) {
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
