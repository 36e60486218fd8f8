//! One Redis Cluster as the whole quorum, one of its shards stalled (its master SIGSTOPped, no
//! replica to take over): the holds on the other shards stay renewed, and only the stalled
//! shard's holds are lost. Renewal keeps a bounded number of batches out without waves, and
//! applies each as soon as it is decided, so the stalled shard's timeouts do not add up in
//! front of the healthy shards' renewals.

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
