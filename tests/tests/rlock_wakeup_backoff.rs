//! Masters that refuse `SUBSCRIBE` (an ACL without it, a renamed command, a proxy without
//! pub/sub) are not reconnected to in a tight loop while someone waits: a refused subscription
//! counts as a failure and the pub/sub task backs off. The waiter still gets the lock, by the
//! lease.

use redlock_reentrant::redis;
use redlock_testkit::{RedisCluster, RedisServer};
use redlock_tests::{client, spawn_waiter, WATCHDOG};

/// Connections each master has accepted so far.
fn connections(cluster: &RedisCluster) -> Vec<u64> {
    (0..cluster.len())
        .map(|node| {
            let info: String = redis::cmd("INFO")
                .arg("stats")
                .query(&mut cluster.node(node).connection())
                .expect("INFO stats");
            info.lines()
                .find_map(|line| line.strip_prefix("total_connections_received:"))
                .and_then(|count| count.trim().parse().ok())
                .expect("total_connections_received")
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_refusing_subscribe_is_not_hammered_and_the_waiter_still_gets_in() {
    let cluster = RedisCluster::start_with(
        3,
        &RedisServer::builder().args(["--rename-command", "SUBSCRIBE", ""]),
    );
    let holder = client(&cluster, WATCHDOG).await;
    let waiting = client(&cluster, WATCHDOG).await;
    let lock = holder.get_lock("refused");
    lock.lock().await.expect("lock");

    let before = connections(&cluster);
    let waiter = spawn_waiter(waiting.get_lock("refused"), WATCHDOG * 10);
    // The measuring window: the waiter waits, its pub/sub task keeps being refused.
    let window = WATCHDOG / 2;
    tokio::time::sleep(window).await;
    let after = connections(&cluster);
    for (node, (before, after)) in before.iter().zip(&after).enumerate() {
        // The backoff allows a handful in 1.5 s (100 ms doubling); a loop makes thousands.
        assert!(
            after - before < 30,
            "master {node} got {} connections in {window:?}",
            after - before
        );
    }

    lock.unlock().await.expect("unlock");
    let (got, _) = waiter.await.expect("waiter");
    assert!(
        matches!(got, Ok(true)),
        "without wake-ups the waiter gets in by the lease: {got:?}"
    );
    holder.shutdown().await;
    waiting.shutdown().await;
}
