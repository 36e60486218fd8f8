//! A lock whose slot migrates between a Redis Cluster's masters (`CLUSTER SETSLOT ...
//! MIGRATING/IMPORTING`, `MIGRATE`, as `redis-cli --cluster reshard` does it): while the slot
//! moves, the servers refuse the lock's scripts without running them (`TRYAGAIN`, `ASK`), and
//! the client sends them again until the slot's new owner runs them, within the per-node
//! timeout, rather than failing for the whole migration. The client has no retry policy: the
//! operation is tried once, and only the request's own resending can carry it across.

use std::time::Duration;

use redlock_reentrant::{LockClient, RetryPolicy};
use redlock_testkit::{error_counts, eventually_async, ShardedCluster};

/// The watchdog lease: long beside the per-node timeout.
const TIMEOUT: Duration = Duration::from_secs(30);
/// Room for the migration to end while a request waits for it.
const NODE_TIMEOUT: Duration = Duration::from_secs(5);

fn query<T: redis::FromRedisValue>(cluster: &ShardedCluster, node: usize, cmd: &redis::Cmd) -> T {
    cmd.query(&mut cluster.node(node).connection())
        .unwrap_or_else(|err| panic!("{cmd:?} on node {node}: {err}"))
}

/// How many requests server `node` refused with `TRYAGAIN` or `ASK` so far.
fn refusals(cluster: &ShardedCluster, node: usize) -> u64 {
    let counts = error_counts(cluster.node(node));
    ["TRYAGAIN", "ASK"]
        .iter()
        .filter_map(|code| counts.get(*code))
        .sum()
}

/// Moves `keys` from master `source` to master `target` (`MIGRATE`).
fn migrate_keys(cluster: &ShardedCluster, source: usize, target: usize, keys: &[String]) {
    let port = cluster.node(target).port();
    let _: () = query(
        cluster,
        source,
        redis::cmd("MIGRATE")
            .arg("127.0.0.1")
            .arg(port)
            .arg("")
            .arg(0)
            .arg(5000)
            .arg("KEYS")
            .arg(keys),
    );
}

/// Moves every key of `slot` still on master `source` to master `target`.
fn migrate(cluster: &ShardedCluster, source: usize, target: usize, slot: i64) {
    let keys: Vec<String> = query(
        cluster,
        source,
        redis::cmd("CLUSTER")
            .arg("GETKEYSINSLOT")
            .arg(slot)
            .arg(100),
    );
    if !keys.is_empty() {
        migrate_keys(cluster, source, target, &keys);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_sent_while_the_locks_slot_migrates_runs_on_its_new_owner() {
    let cluster = ShardedCluster::start(3, 0);
    let client = LockClient::builder()
        .nodes(vec![cluster.url()])
        .watchdog_timeout(TIMEOUT)
        .node_timeout(NODE_TIMEOUT)
        // No retry of the operation: the request itself waits out the migration.
        .retry(RetryPolicy::none())
        .build()
        .await
        .expect("client");
    // Released from another task: an explicit owner.
    let lock = client.get_lock("migrating").with_owner(&client.new_owner());
    let key = client.redlock().config().key_for("migrating");
    lock.lock().await.expect("locked");

    let source = cluster.master_of(&key);
    let target = (source + 1) % 3;
    let slot: i64 = query(
        &cluster,
        source,
        redis::cmd("CLUSTER").arg("KEYSLOT").arg(&key),
    );
    let id = |node: usize| -> String { query(&cluster, node, redis::cmd("CLUSTER").arg("MYID")) };
    let (source_id, target_id) = (id(source), id(target));
    let setslot = |node: usize, state: &str, owner: &str| {
        let _: () = query(
            &cluster,
            node,
            redis::cmd("CLUSTER")
                .arg("SETSLOT")
                .arg(slot)
                .arg(state)
                .arg(owner),
        );
    };
    // The migration begins, and the lock's hash moves first; the slot's other keys (its
    // fencing counter) are still on the source.
    setslot(target, "IMPORTING", &source_id);
    setslot(source, "MIGRATING", &target_id);
    migrate_keys(&cluster, source, target, std::slice::from_ref(&key));
    let refused_before = refusals(&cluster, source);

    let unlocking = tokio::spawn(async move { (lock.unlock().await, lock) });
    // The source refuses the release (its key moved: `ASK`)...
    let refused = || refusals(&cluster, source) > refused_before;
    if !eventually_async(NODE_TIMEOUT / 2, refused).await {
        let done = unlocking.await.expect("task").0;
        panic!(
            "the source never refused the release: {:?}, the release: {done:?}",
            error_counts(cluster.node(source))
        );
    }
    // ... and the migration ends: the rest of the slot's keys move, and every master learns
    // the slot's new owner.
    migrate(&cluster, source, target, slot);
    for node in [target, source, 3 - source - target] {
        setslot(node, "NODE", &target_id);
    }

    let (unlocked, lock) = unlocking.await.expect("the unlocking task");
    assert!(
        unlocked.is_ok(),
        "the release failed for the migration: {unlocked:?}"
    );
    assert!(
        cluster.hash_on(target, &key).is_empty(),
        "released on the new owner"
    );
    // The lock works on the slot's new owner.
    assert!(lock.try_lock(Duration::ZERO, None).await.expect("try_lock"));
    assert!(!cluster.hash_on(target, &key).is_empty());
    lock.unlock().await.expect("released");
    client.shutdown().await;
}
