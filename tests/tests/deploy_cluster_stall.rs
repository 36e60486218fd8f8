//! One Redis Cluster as the whole quorum, in trouble: one of its shards stalled (its master
//! SIGSTOPped, no replica to take over), so the holds on the other shards stay renewed and only
//! the stalled shard's holds are lost (renewal keeps a bounded number of batches out without
//! waves, and applies each as soon as it is decided, so the stalled shard's timeouts do not
//! add up in front of the healthy shards' renewals); and the cluster connection's task gone
//! with the runtime it ran on, so the member connects again.

use std::collections::HashSet;
use std::time::Duration;

use redlock_reentrant::{LockClient, LostReason, LostSignal};
use redlock_testkit::{eventually_async, ShardedCluster};

/// The watchdog lease: renewed every 2 s, each renewal batch given 500 ms (a quarter interval).
const TIMEOUT: Duration = Duration::from_secs(6);
const NODE_TIMEOUT: Duration = Duration::from_millis(500);
/// Locks on as many distinct slots, so as many renewal batches; about a third on the stalled
/// shard. Waves of 32 batches each holding a stalled one would take 15 batch timeouts a round,
/// past the 10 a healthy hold can wait before it is declared lost; a window of 32 takes about
/// 5.
const LOCKS: usize = 480;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_shard_loses_its_own_holds_only() {
    // Without full coverage, the other shards keep serving while one master is stopped.
    let cluster = ShardedCluster::start_with(3, 0, &["--cluster-require-full-coverage", "no"]);
    let client = LockClient::builder()
        .nodes([cluster.url()])
        .watchdog_timeout(TIMEOUT)
        .node_timeout(NODE_TIMEOUT)
        .build()
        .await
        .expect("client");
    let config = client.redlock().config().clone();

    // One lock per slot, kept by a task each (the owner is the task).
    let mut slots = HashSet::new();
    let names: Vec<String> = (0..)
        .map(|i| format!("stall:{i}"))
        .filter(|name| slots.insert(config.slot_of(&config.key_for(name))))
        .take(LOCKS)
        .collect();
    let stalled = cluster.master_of(&config.key_for(&names[0]));
    let mut held: Vec<(bool, LostSignal)> = Vec::with_capacity(LOCKS);
    let mut guards = Vec::with_capacity(LOCKS);
    for name in &names {
        let lock = client.get_lock(name);
        guards.push(lock.acquire().await.expect("acquire"));
        let on_stalled = cluster.master_of(&config.key_for(name)) == stalled;
        held.push((on_stalled, lock.lost_signal().expect("held")));
    }
    let on_stalled = held.iter().filter(|(stalled, _)| *stalled).count();
    assert!(
        on_stalled > LOCKS / 5 && on_stalled < LOCKS / 2,
        "{on_stalled} of {LOCKS} on the stalled shard"
    );

    cluster.node(stalled).stop();
    // The stalled shard's holds are lost once their validity runs short, a lease at most.
    let all_lost = eventually_async(TIMEOUT * 3, || {
        held.iter()
            .filter(|(stalled, _)| *stalled)
            .all(|(_, signal)| signal.is_lost())
    })
    .await;
    // And one interval more, for renewals of the other shards that would come too late.
    tokio::time::sleep(TIMEOUT / 3).await;
    let healthy_lost: Vec<Option<LostReason>> = held
        .iter()
        .filter(|(stalled, _)| !*stalled)
        .map(|(_, signal)| signal.reason())
        .filter(Option::is_some)
        .collect();
    cluster.node(stalled).resume();
    assert!(all_lost, "the stalled shard's holds were not all told");
    assert!(
        healthy_lost.is_empty(),
        "{} of {} holds on healthy shards lost: {:?}",
        healthy_lost.len(),
        LOCKS - on_stalled,
        healthy_lost.first()
    );
    drop(guards);
    let stats = client.watchdog().stats();
    eprintln!(
        "stalled shard: {on_stalled} holds lost, {} healthy kept; watchdog {stats:?}",
        LOCKS - on_stalled
    );
}

/// A cluster connection is kept for the member's life (a new one could overtake requests the
/// old one has not sent yet), unless its task is gone: then it sends nothing any more, and the
/// member connects again. redis-rs says so only in its error's text; this pins that text to
/// the redis-rs version the workspace builds, by ending the runtime the connection ran on.
#[test]
fn a_cluster_member_whose_connection_task_ended_connects_again() {
    let cluster = ShardedCluster::start(3, 0);
    let runtime = || {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("runtime")
    };
    let first = runtime();
    let client = first.block_on(async {
        let client = LockClient::builder()
            .nodes([cluster.url()])
            .node_timeout(NODE_TIMEOUT)
            .build()
            .await
            .expect("client");
        let lock = client.get_lock("before");
        assert!(lock
            .try_lock(Duration::ZERO, Some(TIMEOUT))
            .await
            .expect("try_lock"));
        lock.unlock().await.expect("unlock");
        client
    });
    // The cluster connection's task ends with the runtime it was spawned on.
    drop(first);
    let second = runtime();
    second.block_on(async {
        let lock = client.get_lock("after");
        let mut refused = 0;
        while !lock
            .try_lock(Duration::ZERO, Some(TIMEOUT))
            .await
            .unwrap_or(false)
        {
            refused += 1;
            assert!(
                refused < 10,
                "the member never connected again after its connection's task ended"
            );
        }
        lock.unlock().await.expect("unlock");
    });
}
