//! The fault-injection suite and the cross-crate scenarios of the redlock crates.
//!
//! This package drives the locks through the lock-agnostic harness in `redlock-testkit`: its
//! `tests/*.rs` are the scenarios, named by area, its binaries (`holder`, `fault_worker`) hold
//! locks in child processes. It is the only package that turns on `redlock-reentrant`'s
//! `sabotage` feature, for the broken twins the fault suite's checkers must catch (the
//! benchmark has a package of its own, `bench/`, so that it measures the lock users ship).
//!
//! Its library holds the lock fixtures the scenarios share.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use redlock_reentrant::{Error, LockClient, LockClientBuilder, RLock, Watchdog};
use redlock_testkit::{eventually_async, Fault, ProxyGrid, RedisCluster};
use tokio::task::JoinHandle;

/// The watchdog lease most scenarios give their clients: 3 s, renewed every 1 s, the default's
/// ratio (30 s, every 10 s) at a tenth of the wait.
pub const WATCHDOG: Duration = Duration::from_secs(3);

/// A client of `cluster`'s masters whose locks taken without a lease get `watchdog_timeout`,
/// renewed every third of it, with [`room_for_a_busy_machine`] per node; the rest of its
/// configuration is the library's default.
///
/// # Panics
///
/// If the client cannot be built.
pub async fn client(cluster: &RedisCluster, watchdog_timeout: Duration) -> LockClient {
    build(
        LockClient::builder()
            .watchdog_timeout(watchdog_timeout)
            .node_timeout(room_for_a_busy_machine(watchdog_timeout)),
        cluster,
    )
    .await
}

/// The per-node timeout the scenarios' clients get: a twelfth of the watchdog lease (250 ms
/// for 3 s). The default, 1 % of the lease (30 ms), suits production's 30 s leases on their own
/// hosts, not tests that share two busy cores.
pub fn room_for_a_busy_machine(watchdog_timeout: Duration) -> Duration {
    watchdog_timeout / 12
}

/// A [`client`] whose masters each get `node_timeout` to answer a request.
///
/// # Panics
///
/// If the client cannot be built.
pub async fn client_with_timeouts(
    cluster: &RedisCluster,
    watchdog_timeout: Duration,
    node_timeout: Duration,
) -> LockClient {
    build(
        LockClient::builder()
            .watchdog_timeout(watchdog_timeout)
            .node_timeout(node_timeout),
        cluster,
    )
    .await
}

async fn build(builder: LockClientBuilder, cluster: &RedisCluster) -> LockClient {
    builder.nodes(cluster.urls()).build().await.expect("client")
}

/// Waits until `watchdog` has run `rounds` more renewal rounds: an event to wait for, where a
/// sleep would guess.
///
/// # Panics
///
/// If they do not run within `rounds + 2` watchdog timeouts.
pub async fn rounds_pass(watchdog: &Watchdog, rounds: u64) {
    let target = watchdog.stats().rounds + rounds;
    let limit = watchdog.timeout() * u32::try_from(rounds + 2).unwrap_or(u32::MAX);
    let passed = eventually_async(limit, || watchdog.stats().rounds >= target).await;
    assert!(passed, "the watchdog stopped running rounds");
}

/// Waits until no key matching `pattern` is left on any running node: a release, undo,
/// force-unlock or shutdown is decided by a majority, and the other masters' deletes may still be
/// on their way when it returns. `within` bounds the wait; pass a fraction of the lease (a third
/// is plenty), so that a key left behind until its expiry still fails the test.
///
/// # Panics
///
/// If keys are still there after `within`, naming how many.
pub async fn released_everywhere(cluster: &RedisCluster, pattern: &str, within: Duration) {
    let gone = eventually_async(within, || cluster.count_keys(pattern) == 0).await;
    assert!(
        gone,
        "{pattern} left on the nodes ({} keys) {within:?} after the release",
        cluster.count_keys(pattern)
    );
}

/// Slow links to the first masters of a cluster: each behind a proxy that passes traffic until
/// [`SlowLinks::slow_down`], then delays every chunk both ways. An operation decided by a
/// majority returns as soon as that majority answers, so a test that needs an operation to
/// last (to drop it while its grants are on the nodes and their replies on the way, or to
/// overlap it with another) slows the links rather than pausing a node.
pub struct SlowLinks {
    /// One row of the testkit's proxies: this client's links to the slow masters.
    grid: ProxyGrid,
    urls: Vec<String>,
}

impl SlowLinks {
    /// Proxies the first `slow` masters of `cluster`; the others are reached directly.
    ///
    /// # Panics
    ///
    /// If a proxy cannot start.
    pub async fn start(cluster: &RedisCluster, slow: usize) -> Self {
        let upstreams: Vec<SocketAddr> = cluster.ports()[..slow]
            .iter()
            .map(|port| SocketAddr::from((Ipv4Addr::LOCALHOST, *port)))
            .collect();
        let grid = ProxyGrid::start(1, &upstreams).await.expect("proxies");
        let mut urls = grid.urls(0);
        urls.extend(cluster.urls().into_iter().skip(slow));
        Self { grid, urls }
    }

    /// The masters' URLs, the slow ones through their proxies.
    pub fn urls(&self) -> Vec<String> {
        self.urls.clone()
    }

    /// From now on, every chunk on every slow link arrives `delay` late, both ways.
    pub fn slow_down(&self, delay: Duration) {
        self.grid.set_worker(0, Fault::Delay(delay));
    }

    /// A client of these masters (see [`client_with_timeouts`]).
    ///
    /// # Panics
    ///
    /// If the client cannot be built.
    pub async fn client(&self, watchdog_timeout: Duration, node_timeout: Duration) -> LockClient {
        LockClient::builder()
            .watchdog_timeout(watchdog_timeout)
            .node_timeout(node_timeout)
            .nodes(self.urls())
            .build()
            .await
            .expect("client")
    }
}

/// A task waiting for `lock` for up to `wait`: whether it got the lock, and when its wait
/// returned. It unlocks what it got.
///
/// # Panics
///
/// The task panics if the unlock of a lock it got fails.
pub fn spawn_waiter(lock: RLock, wait: Duration) -> JoinHandle<(Result<bool, Error>, Instant)> {
    tokio::spawn(async move {
        let got = lock.try_lock(wait, None).await;
        let returned = Instant::now();
        if matches!(got, Ok(true)) {
            lock.unlock().await.expect("the waiter unlocks");
        }
        (got, returned)
    })
}

/// The lock's script calls as a node ran them (`MONITOR`), told apart by their shape: the one
/// place that knows how each of `redlock-reentrant`'s scripts lays out its keys and arguments.
pub mod script_calls {
    use redlock_testkit::{monitored_command, Monitor};

    /// A recorded command: its name, then its arguments.
    pub type Command = Vec<Vec<u8>>;

    /// The script calls (`EVALSHA`, or `EVAL` after a `NOSCRIPT`) on `key` that `monitor`
    /// recorded, oldest first.
    pub fn on(monitor: &Monitor, key: &str) -> Vec<Command> {
        monitor
            .lines()
            .iter()
            .filter_map(|line| monitored_command(line))
            .filter(|command| {
                let name = command[0].to_ascii_uppercase();
                (name == b"EVALSHA" || name == b"EVAL")
                    && command.iter().any(|arg| arg.as_slice() == key.as_bytes())
            })
            .collect()
    }

    /// A release (`unlock.lua`): one key, then the hold field and the lock's channel (an undo
    /// has the count where a release has the channel).
    pub fn is_release(command: &Command) -> bool {
        command.len() == 8 && command[2] == b"1" && command[5].ends_with(b":released")
    }

    /// A new hold's attempt (`acquire.lua`, expected count 0): two keys, its hold field, the
    /// lease, the count, the fencing hint and the owner's prefix.
    pub fn is_new_attempt(command: &Command) -> bool {
        command.len() == 10 && command[2] == b"2" && command[7] == b"0"
    }

    /// An undo (`undo.lua`): one key and four arguments, the count after the field (an
    /// attempt has two keys, a renewal batch one key and two arguments).
    pub fn is_undo(command: &Command) -> bool {
        command.len() == 8 && command[2] == b"1" && !is_release(command)
    }
}
