//! A real Redis Cluster (cluster mode): masters with replicas on free loopback ports, joined by
//! `redis-cli --cluster create`, one quorum member for the lock under test.

use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use crate::cluster::{in_parallel, RedisCluster};
use crate::error::HarnessError;
use crate::server::RedisServer;

/// How long a cluster node may go unheard before its replica takes over: short, so a failover
/// test is quick, and still far above any pause of a loaded machine's scheduler.
pub const CLUSTER_NODE_TIMEOUT: Duration = Duration::from_millis(1500);

/// How long the cluster may take to form (every slot served, every node agreeing) or to
/// settle after a failover.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(30);

/// A Redis Cluster of `masters` masters with `replicas` replicas each, every server killed on
/// drop.
///
/// Node indices run over every server; which are masters changes with failovers, so ask
/// [`ShardedCluster::master_of`].
///
/// ```no_run
/// use redlock_testkit::ShardedCluster;
///
/// let cluster = ShardedCluster::start(3, 1); // 3 masters, 3 replicas
/// let member = cluster.url(); // redis+cluster://127.0.0.1:P?addr=...
/// let master = cluster.master_of("redlock:{job}");
/// cluster.node(master).kill(); // its replica takes over within a few seconds
/// cluster.wait_for_failover("redlock:{job}", master);
/// # let _ = member;
/// ```
#[derive(Debug)]
pub struct ShardedCluster {
    nodes: Vec<RedisServer>,
}

impl ShardedCluster {
    /// Starts and joins the cluster.
    ///
    /// # Panics
    ///
    /// If it cannot start or does not form in time; the message says why.
    pub fn start(masters: usize, replicas: usize) -> Self {
        Self::try_start(masters, replicas)
            .unwrap_or_else(|err| panic!("failed to start a Redis Cluster: {err}"))
    }

    /// Starts and joins the cluster.
    ///
    /// # Errors
    ///
    /// A server that did not start, `redis-cli --cluster create` failing, or a cluster that
    /// did not form within 30 s; every started server is killed.
    pub fn try_start(masters: usize, replicas: usize) -> Result<Self, HarnessError> {
        Self::try_start_with(masters, replicas, &[])
    }

    /// Starts and joins a cluster whose servers get `args` too (`--rename-command`, ...).
    ///
    /// # Panics
    ///
    /// If it cannot start or does not form in time; the message says why.
    pub fn start_with(masters: usize, replicas: usize, args: &[&str]) -> Self {
        Self::try_start_with(masters, replicas, args)
            .unwrap_or_else(|err| panic!("failed to start a Redis Cluster: {err}"))
    }

    /// Starts and joins a cluster whose servers get `args` too.
    ///
    /// # Errors
    ///
    /// As [`ShardedCluster::try_start`].
    pub fn try_start_with(
        masters: usize,
        replicas: usize,
        args: &[&str],
    ) -> Result<Self, HarnessError> {
        Self::try_start_with_each(masters, replicas, |_| args.to_vec())
    }

    /// Starts and joins a cluster whose server `i` gets `args(i)` too: a mixed cluster, one
    /// server without the commands of a newer version, say. The first `masters` servers are
    /// the masters, `redis-cli --cluster create` giving them the slots in that order.
    ///
    /// # Panics
    ///
    /// As [`ShardedCluster::start`].
    pub fn start_with_each<'a>(
        masters: usize,
        replicas: usize,
        args: impl Fn(usize) -> Vec<&'a str> + Sync,
    ) -> Self {
        Self::try_start_with_each(masters, replicas, args)
            .unwrap_or_else(|err| panic!("failed to start a Redis Cluster: {err}"))
    }

    fn try_start_with_each<'a>(
        masters: usize,
        replicas: usize,
        args: impl Fn(usize) -> Vec<&'a str> + Sync,
    ) -> Result<Self, HarnessError> {
        let count = masters * (1 + replicas);
        let started = in_parallel(count, |i| cluster_node(&args(i)));
        let cluster = Self {
            nodes: started.into_iter().collect::<Result<Vec<_>, _>>()?,
        };
        let addresses: Vec<String> = cluster
            .nodes
            .iter()
            .map(|node| format!("127.0.0.1:{}", node.port()))
            .collect();
        let output = Command::new(redis_cli())
            .args(["--cluster", "create"])
            .args(&addresses)
            .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
            .output()
            .map_err(|source| HarnessError::Io {
                context: "could not run redis-cli --cluster create".to_owned(),
                source,
            })?;
        if !output.status.success() {
            return Err(HarnessError::Cluster(format!(
                "redis-cli --cluster create failed ({}): {}{}",
                output.status,
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            )));
        }
        // Replicas that never finished their first sync cannot take over, nor acknowledge a
        // write (`WAIT`).
        cluster.wait_until(
            SETTLE_TIMEOUT,
            "every node ok and every replica in sync",
            |c| {
                c.running()
                    .all(|node| cluster_ok(node) && (is_master(node) || in_sync(node)))
            },
        )?;
        Ok(cluster)
    }

    /// The member URL for the lock client: `redis+cluster://127.0.0.1:P?addr=127.0.0.1:Q...`,
    /// every server a seed.
    pub fn url(&self) -> String {
        let mut seeds = self.nodes.iter().map(RedisServer::port);
        let first = seeds.next().unwrap_or_default();
        let rest: Vec<String> = seeds.map(|port| format!("addr=127.0.0.1:{port}")).collect();
        if rest.is_empty() {
            format!("redis+cluster://127.0.0.1:{first}")
        } else {
            format!("redis+cluster://127.0.0.1:{first}?{}", rest.join("&"))
        }
    }

    /// Server `i`.
    pub fn node(&self, i: usize) -> &RedisServer {
        &self.nodes[i]
    }

    /// Every server.
    pub fn nodes(&self) -> &[RedisServer] {
        &self.nodes
    }

    /// The index of the server that is master of `key`'s slot now, as the running servers see
    /// it.
    ///
    /// # Panics
    ///
    /// If no running server names a master for the slot.
    pub fn master_of(&self, key: &str) -> usize {
        self.try_master_of(key)
            .unwrap_or_else(|| panic!("no running node names a master for {key}"))
    }

    fn try_master_of(&self, key: &str) -> Option<usize> {
        let mut connection = self.running().next()?.try_connection().ok()?;
        let slot: i64 = redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(key)
            .query(&mut connection)
            .ok()?;
        let port = self
            .running()
            .filter(|node| is_master(node))
            .find(|node| serves(node, slot))?
            .port();
        self.nodes.iter().position(|node| node.port() == port)
    }

    /// Waits until a running server other than `old_master` is master of `key`'s slot and
    /// every running server reports the cluster ok; returns the new master's index.
    ///
    /// # Panics
    ///
    /// If that takes more than 30 s.
    pub fn wait_for_failover(&self, key: &str, old_master: usize) -> usize {
        let mut promoted = None;
        self.wait_until(SETTLE_TIMEOUT, "a replica to take over", |cluster| {
            promoted = cluster
                .try_master_of(key)
                .filter(|master| *master != old_master);
            promoted.is_some() && cluster.running().all(cluster_ok)
        })
        .unwrap_or_else(|err| panic!("{err}"));
        promoted.unwrap_or_else(|| unreachable!("set when the wait ends"))
    }

    /// `key`'s value as a hash on the server `i` (empty when absent).
    ///
    /// # Panics
    ///
    /// If the server does not answer.
    pub fn hash_on(&self, i: usize, key: &str) -> std::collections::HashMap<String, String> {
        let mut connection = self.nodes[i].connection();
        redis::cmd("HGETALL")
            .arg(key)
            .query(&mut connection)
            .unwrap_or_else(|err| panic!("HGETALL {key} on node {i}: {err}"))
    }

    fn running(&self) -> impl Iterator<Item = &RedisServer> {
        self.nodes.iter().filter(|node| node.is_running())
    }

    fn wait_until(
        &self,
        timeout: Duration,
        what: &str,
        mut done: impl FnMut(&Self) -> bool,
    ) -> Result<(), HarnessError> {
        let start = Instant::now();
        while !done(self) {
            if start.elapsed() > timeout {
                return Err(HarnessError::Cluster(format!(
                    "waited {timeout:?} for {what}"
                )));
            }
            thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }
}

impl RedisCluster {
    /// `n` independent servers in cluster mode, each a Redis Cluster of one shard serving every
    /// slot: quorum members reached as `redis+cluster://` ([`RedisCluster::cluster_urls`]), with
    /// every per-node fault of [`RedisCluster`] (a restarted server keeps its slots: its
    /// cluster configuration file stays).
    ///
    /// # Panics
    ///
    /// If a server cannot start or its cluster does not come up within 30 s.
    pub fn start_single_shard_clusters(n: usize) -> Self {
        let started: Result<Vec<RedisServer>, HarnessError> =
            in_parallel(n, |_| cluster_node(&[])).into_iter().collect();
        let nodes = started.unwrap_or_else(|err| panic!("a cluster-mode server: {err}"));
        for node in &nodes {
            let _: () = redis::cmd("CLUSTER")
                .arg("ADDSLOTSRANGE")
                .arg(0)
                .arg(16383)
                .query(&mut node.connection())
                .unwrap_or_else(|err| panic!("CLUSTER ADDSLOTSRANGE: {err}"));
        }
        let start = Instant::now();
        while !nodes.iter().all(cluster_ok) {
            assert!(
                start.elapsed() < SETTLE_TIMEOUT,
                "single-shard clusters not ok after {SETTLE_TIMEOUT:?}"
            );
            thread::sleep(Duration::from_millis(20));
        }
        RedisCluster::from_nodes(nodes)
    }

    /// Each server as a cluster member: `redis+cluster://127.0.0.1:PORT`.
    pub fn cluster_urls(&self) -> Vec<String> {
        self.ports()
            .into_iter()
            .map(|port| format!("redis+cluster://127.0.0.1:{port}"))
            .collect()
    }
}

/// One cluster-mode server: its bus on a free port of its own (the default, port + 10000, may be
/// taken or out of range), picked afresh with the client port on each attempt to start.
fn cluster_node(args: &[&str]) -> Result<RedisServer, HarnessError> {
    let node_timeout = CLUSTER_NODE_TIMEOUT.as_millis().to_string();
    RedisServer::builder()
        .args(["--cluster-enabled", "yes"])
        .args(["--cluster-config-file", "nodes.conf"])
        .args(["--cluster-node-timeout", node_timeout.as_str()])
        .port_arg("--cluster-port")
        // Replicas sync at once, not after the default 5 s of waiting for more of them.
        .args(["--repl-diskless-sync-delay", "0"])
        .args(args.iter().copied())
        .try_start()
}

fn redis_cli() -> std::path::PathBuf {
    // Beside the configured redis-server, else on PATH.
    std::env::var_os("REDIS_SERVER_BIN")
        .map(std::path::PathBuf::from)
        .and_then(|server| server.parent().map(|dir| dir.join("redis-cli")))
        .filter(|cli| cli.exists())
        .unwrap_or_else(|| "redis-cli".into())
}

/// Whether a cluster-mode server reports its cluster ok (`CLUSTER INFO`): every slot served.
/// A master restarted from its configuration says so only after a short delay of its own.
pub fn cluster_ok(node: &RedisServer) -> bool {
    node.try_connection()
        .ok()
        .and_then(|mut connection| {
            redis::cmd("CLUSTER")
                .arg("INFO")
                .query::<String>(&mut connection)
                .ok()
        })
        .is_some_and(|info| info.contains("cluster_state:ok"))
}

/// Whether a replica's link to its master is up (its first sync done).
fn in_sync(node: &RedisServer) -> bool {
    node.try_connection()
        .ok()
        .and_then(|mut connection| {
            redis::cmd("INFO")
                .arg("replication")
                .query::<String>(&mut connection)
                .ok()
        })
        .is_some_and(|info| info.contains("master_link_status:up"))
}

fn is_master(node: &RedisServer) -> bool {
    node.try_connection()
        .ok()
        .and_then(|mut connection| {
            redis::cmd("ROLE")
                .query::<Vec<redis::Value>>(&mut connection)
                .ok()
        })
        .and_then(|role| role.into_iter().next())
        .is_some_and(|role| matches!(role, redis::Value::BulkString(ref b) if b == b"master"))
}

/// Whether `node` serves `slot` itself (in its own `CLUSTER SLOTS` view, the master of a range
/// comes first: `[start, end, [ip, port, id, ...], replicas...]`).
fn serves(node: &RedisServer, slot: i64) -> bool {
    let Some(mut connection) = node.try_connection().ok() else {
        return false;
    };
    let Ok(ranges) = redis::cmd("CLUSTER")
        .arg("SLOTS")
        .query::<Vec<Vec<redis::Value>>>(&mut connection)
    else {
        return false;
    };
    let int = |value: Option<&redis::Value>| match value {
        Some(redis::Value::Int(n)) => Some(*n),
        _ => None,
    };
    ranges.iter().any(|range| {
        let master_port = match range.get(2) {
            Some(redis::Value::Array(master)) => int(master.get(1)),
            _ => None,
        };
        matches!((int(range.first()), int(range.get(1))), (Some(start), Some(end)) if (start..=end).contains(&slot))
            && master_port == Some(i64::from(node.port()))
    })
}
