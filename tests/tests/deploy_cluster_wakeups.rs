//! A cluster's waiters choose shard or plain channels for each pub/sub connection they make,
//! not once for the life of the process: after a shard refused `SSUBSCRIBE` as a command it
//! does not have (a Redis 6 server during a rolling upgrade), the next connection tries shard
//! channels again, and a release another shard announces with `SPUBLISH` wakes its waiter.

use std::time::{Duration, Instant};

use redlock_reentrant::LockClient;
use redlock_testkit::{
    eventually_async, shard_subscribers, subscribers as plain_subscribers, ShardedCluster,
};
use redlock_tests::spawn_waiter;

const TIMEOUT: Duration = Duration::from_secs(3);
const NODE_TIMEOUT: Duration = Duration::from_millis(500);

async fn client_of(cluster: &ShardedCluster) -> LockClient {
    LockClient::builder()
        .nodes(vec![cluster.url()])
        .watchdog_timeout(TIMEOUT)
        .node_timeout(NODE_TIMEOUT)
        .build()
        .await
        .expect("client")
}

/// How many subscribers `channel` has as a shard channel and as a plain channel, summed over
/// the servers.
fn subscribers(cluster: &ShardedCluster, channel: &str) -> (i64, i64) {
    cluster.nodes().iter().fold((0, 0), |(s, p), node| {
        (
            s + shard_subscribers(node, channel),
            p + plain_subscribers(node, channel),
        )
    })
}

/// A lock name whose slot master `shard` serves.
fn name_on(cluster: &ShardedCluster, client: &LockClient, shard: usize) -> String {
    (0..)
        .map(|i| format!("upgrade:{i}"))
        .find(|name| cluster.master_of(&client.redlock().config().key_for(name)) == shard)
        .expect("some name hashes to that shard")
}

/// `holder` holds `name` while a client of `waiting` waits for it; once the waiter subscribes
/// with `expected` (shard, plain) subscriptions, the holder releases. Returns how long after
/// the release the waiter got the lock (the fallback would take 30 s).
async fn handover(
    cluster: &ShardedCluster,
    holder: &LockClient,
    waiting: &LockClient,
    name: &str,
    expected: (i64, i64),
) -> Duration {
    let held = holder.get_lock(name);
    held.lock_with_lease(Duration::from_secs(60))
        .await
        .expect("held");
    let waiter = spawn_waiter(waiting.get_lock(name), Duration::from_secs(30));
    let channel = format!("{}:released", holder.redlock().config().key_for(name));
    assert!(
        eventually_async(Duration::from_secs(10), || subscribers(cluster, &channel)
            == expected)
        .await,
        "the waiter's subscription to {name}: {:?}, expected {expected:?}",
        subscribers(cluster, &channel)
    );
    let released = Instant::now();
    held.unlock().await.expect("unlock");
    let (got, woke) = waiter.await.expect("task");
    assert!(got.expect("try_lock"), "the waiter takes the released lock");
    waiting
        .get_lock(name)
        .force_unlock()
        .await
        .expect("force_unlock");
    woke - released
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_pubsub_connection_tries_shard_channels_again_after_a_refusal() {
    // Server 0, a master, is still "Redis 6": no shard channels.
    let cluster = ShardedCluster::start_with_each(3, 0, |i| {
        if i == 0 {
            vec![
                "--rename-command",
                "SSUBSCRIBE",
                "",
                "--rename-command",
                "SPUBLISH",
                "",
            ]
        } else {
            Vec::new()
        }
    });
    let holder = client_of(&cluster).await;
    let waiting = client_of(&cluster).await;

    // A lock on the old server: its refusal makes the connection subscribe to plain channels,
    // where that server announces.
    let old = name_on(&cluster, &holder, 0);
    let woken = handover(&cluster, &holder, &waiting, &old, (0, 1)).await;
    assert!(
        woken < Duration::from_secs(5),
        "woken by the release: {woken:?}"
    );

    // The waiter's pub/sub connection is made again (a server restarted in the upgrade, a
    // dropped connection): a lock on an upgraded server is waited for on its shard channel,
    // where that server announces (`SPUBLISH`).
    for node in cluster.nodes() {
        let mut connection = node.connection();
        let clients: String = redis::cmd("CLIENT")
            .arg("LIST")
            .query(&mut connection)
            .expect("CLIENT LIST");
        // The pub/sub connections are the RESP3 ones (requests speak RESP2).
        for id in clients
            .lines()
            .filter(|client| client.split_whitespace().any(|field| field == "resp=3"))
            .filter_map(|client| client.strip_prefix("id=")?.split(' ').next())
        {
            let _: redis::Value = redis::cmd("CLIENT")
                .arg("KILL")
                .arg("ID")
                .arg(id)
                .query(&mut connection)
                .expect("CLIENT KILL");
        }
    }
    let new = name_on(&cluster, &holder, 1);
    let woken = handover(&cluster, &holder, &waiting, &new, (1, 0)).await;
    assert!(
        woken < Duration::from_secs(5),
        "woken by the SPUBLISH release, not the 30 s fallback: {woken:?}"
    );
    holder.shutdown().await;
    waiting.shutdown().await;
}
