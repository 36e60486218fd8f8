//! N independent redis-server masters, the deployment Redlock runs on (not Redis Cluster mode).

use std::thread;

use crate::error::{report, HarnessError};
use crate::server::{RedisServer, RedisServerBuilder};

/// N independent [`RedisServer`]s, started in parallel, all killed on drop.
///
/// Node indices run from `0` to `len() - 1`; the per-node methods panic on an index out of range.
///
/// ```no_run
/// use redlock_testkit::RedisCluster;
///
/// let cluster = RedisCluster::start(5);
/// let urls = cluster.urls(); // hand these to the lock under test
/// cluster.stop(0); // a paused master
/// cluster.kill(1); // a crashed one
/// assert_eq!(cluster.count_keys("*"), 0); // over the 3 running nodes
/// # let _ = urls;
/// ```
#[derive(Debug)]
pub struct RedisCluster {
    nodes: Vec<RedisServer>,
}

impl RedisCluster {
    /// Starts `n` servers with the default options.
    ///
    /// # Panics
    ///
    /// If any server cannot start; the message shows its log's tail.
    pub fn start(n: usize) -> Self {
        Self::start_with(n, &RedisServer::builder())
    }

    /// Starts `n` servers with the default options.
    ///
    /// # Errors
    ///
    /// The first error of [`RedisServerBuilder::try_start`]; the servers that did start are killed.
    pub fn try_start(n: usize) -> Result<Self, HarnessError> {
        Self::try_start_with(n, &RedisServer::builder())
    }

    /// Starts `n` servers with the given options (a password, extra arguments, ...).
    ///
    /// # Panics
    ///
    /// If any server cannot start; the message shows its log's tail.
    pub fn start_with(n: usize, builder: &RedisServerBuilder) -> Self {
        Self::try_start_with(n, builder)
            .unwrap_or_else(|e| panic!("failed to start a {n}-node redis cluster: {}", report(&e)))
    }

    /// Starts `n` servers with the given options, in parallel.
    ///
    /// # Errors
    ///
    /// The first error of [`RedisServerBuilder::try_start`]; the servers that did start are killed.
    pub fn try_start_with(n: usize, builder: &RedisServerBuilder) -> Result<Self, HarnessError> {
        let results = in_parallel(n, |_| builder.try_start());
        // Collecting drops (and so kills) every started server if one failed.
        let nodes = results.into_iter().collect::<Result<Vec<_>, _>>()?;
        Ok(Self { nodes })
    }

    /// Servers started elsewhere (in cluster mode, say), killed on drop like the others.
    pub(crate) fn from_nodes(nodes: Vec<RedisServer>) -> Self {
        Self { nodes }
    }

    /// The nodes' URLs, `redis://127.0.0.1:PORT`, in node order.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }

    /// The nodes' ports, in node order.
    pub fn ports(&self) -> Vec<u16> {
        self.nodes.iter().map(RedisServer::port).collect()
    }

    /// Node `i`.
    pub fn node(&self, i: usize) -> &RedisServer {
        &self.nodes[i]
    }

    /// Node `i`, mutably.
    pub fn node_mut(&mut self, i: usize) -> &mut RedisServer {
        &mut self.nodes[i]
    }

    /// All nodes.
    pub fn nodes(&self) -> &[RedisServer] {
        &self.nodes
    }

    /// How many nodes there are, running or not.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether the cluster has no node at all.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Kills node `i` (SIGKILL); see [`RedisServer::kill`].
    pub fn kill(&self, i: usize) {
        self.nodes[i].kill();
    }

    /// Pauses node `i` (SIGSTOP); see [`RedisServer::stop`].
    pub fn stop(&self, i: usize) {
        self.nodes[i].stop();
    }

    /// Resumes node `i` (SIGCONT); see [`RedisServer::resume`].
    pub fn resume(&self, i: usize) {
        self.nodes[i].resume();
    }

    /// Restarts node `i` empty on the same port; see [`RedisServer::restart`].
    pub fn restart(&self, i: usize) {
        self.nodes[i].restart();
    }

    /// How many keys match `pattern` (a `KEYS` glob), summed over the running nodes; stopped and
    /// killed nodes are skipped.
    ///
    /// # Panics
    ///
    /// If a running node does not answer.
    pub fn count_keys(&self, pattern: &str) -> usize {
        (0..self.len())
            .filter(|&i| self.nodes[i].is_running())
            .map(|i| self.keys_on(i, pattern).len())
            .sum()
    }

    /// The running nodes that have a key matching `pattern` (stopped and killed nodes are
    /// skipped): where a lock was granted.
    ///
    /// # Panics
    ///
    /// If a running node does not answer.
    pub fn nodes_with(&self, pattern: &str) -> Vec<usize> {
        (0..self.len())
            .filter(|&i| self.nodes[i].is_running() && !self.keys_on(i, pattern).is_empty())
            .collect()
    }

    /// The keys matching `pattern` on node `i`, sorted.
    ///
    /// # Panics
    ///
    /// If node `i` does not answer (killed or stopped).
    pub fn keys_on(&self, i: usize, pattern: &str) -> Vec<String> {
        let node = &self.nodes[i];
        let mut keys: Vec<String> = redis::cmd("KEYS")
            .arg(pattern)
            .query(&mut node.connection())
            .unwrap_or_else(|e| panic!("KEYS {pattern} on port {} failed: {e}", node.port()));
        keys.sort();
        keys
    }

    /// Runs `SCRIPT FLUSH` on every running node, so the next `EVALSHA` gets `NOSCRIPT`.
    ///
    /// # Panics
    ///
    /// If a running node does not answer.
    pub fn flush_scripts(&self) {
        for node in self.nodes.iter().filter(|node| node.is_running()) {
            redis::cmd("SCRIPT")
                .arg("FLUSH")
                .exec(&mut node.connection())
                .unwrap_or_else(|e| panic!("SCRIPT FLUSH on port {} failed: {e}", node.port()));
        }
    }
}

/// `start` run `n` times at once, one thread each (servers take a while to come up): the
/// results in order. A panic in one run is raised again here.
pub(crate) fn in_parallel<T: Send>(n: usize, start: impl Fn(usize) -> T + Sync) -> Vec<T> {
    thread::scope(|scope| {
        let start = &start;
        let handles: Vec<_> = (0..n).map(|i| scope.spawn(move || start(i))).collect();
        handles
            .into_iter()
            .map(|handle| {
                handle
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    })
}
