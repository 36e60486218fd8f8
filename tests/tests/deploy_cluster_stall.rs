//! One Redis Cluster as the whole quorum, in trouble: one of its shards stalled (its master
//! SIGSTOPped, no replica to take over), so the holds on the other shards stay renewed and only
//! the stalled shard's holds are lost (renewal keeps a bounded number of batches out without
//! waves, and applies each as soon as it is decided, so the stalled shard's timeouts do not
//! add up in front of the healthy shards' renewals); and the cluster connection's task gone
//! with the runtime it ran on, so the member connects again.

use std::collections::HashSet;
use std::time::Duration;

use redlock_reentrant::{LockClient, LostReason, LostSignal, ReplicaAcks};
use redlock_testkit::{eventually_async, ShardedCluster};

/// The watchdog lease: renewed every 2 s, each renewal batch given 500 ms (a quarter interval).
const TIMEOUT: Duration = Duration::from_secs(6);
const NODE_TIMEOUT: Duration = Duration::from_millis(500);
/// Locks on as many distinct slots, so as many renewal batches; about a third on the stalled
/// shard. A healthy hold is declared lost 10 batch timeouts after its last renewal. Waves of
/// 32 batches, each holding a stalled one, take 10 a round, and rounds that missed come back
/// to back in another order, so some healthy holds wait longer; a window of 32 takes 4 a round
/// (about 107 stalled batches), 8 for two rounds at the worst.
const LOCKS: usize = 320;

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
    connects_again_after_its_task_ended(false);
}

/// The same with replica acknowledgements, where every write and its `WAIT` go as one
/// pipeline, whose error for a task gone names nothing (the member then asks with a single
/// command; here the undo of the failed attempt, a single command, would tell too).
#[test]
fn a_cluster_member_with_replica_acks_whose_connection_task_ended_connects_again() {
    connects_again_after_its_task_ended(true);
}

fn connects_again_after_its_task_ended(replica_acks: bool) {
    let cluster = ShardedCluster::start(3, usize::from(replica_acks));
    let runtime = || {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("runtime")
    };
    let first = runtime();
    let client = first.block_on(async {
        let mut builder = LockClient::builder()
            .nodes([cluster.url()])
            .node_timeout(NODE_TIMEOUT);
        if replica_acks {
            builder = builder.replica_acks(ReplicaAcks {
                replicas: 1,
                timeout: Duration::from_millis(200),
            });
        }
        let client = builder.build().await.expect("client");
        // A replica still syncing acknowledges nothing yet: the first writes may be refused.
        taken_within_tries(&client, "before").await;
        client
    });
    // The cluster connection's task ends with the runtime it was spawned on.
    drop(first);
    let second = runtime();
    second.block_on(taken_within_tries(&client, "after"));
}

/// Takes and releases the lock `name`, asked again (25 tries, 5 s at most) while the member does
/// not answer.
async fn taken_within_tries(client: &LockClient, name: &str) {
    let lock = client.get_lock(name);
    let mut refused = 0;
    while !lock
        .try_lock(Duration::ZERO, Some(TIMEOUT))
        .await
        .unwrap_or(false)
    {
        refused += 1;
        assert!(refused < 25, "the member never took `{name}`");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    lock.unlock().await.expect("unlock");
}
