//! Decided at quorum: an acquisition is decided by the first majority to answer, and the
//! replies still out may grant it later. A failed attempt's undo is queued behind it on every
//! node that had not answered, so a grant that lands late is taken back. The negative control
//! undoes only the grants it saw, and the late grant stays behind.
//!
//! One test in this binary: the sabotage switch is process-wide.

use std::sync::atomic::Ordering;
use std::time::Duration;

use redlock_reentrant::sabotage::UNDO_ONLY_SEEN_GRANTS;
use redlock_testkit::{rival_hold, RedisCluster};
use redlock_tests::client_with_timeouts;

const KEY: &str = "redlock:late-grant";
const RIVAL: &str = "rival-owner";
/// Longer than the test: nothing expires or is renewed meanwhile.
const LEASE: Duration = Duration::from_secs(120);

/// Node 2 is stopped; another owner holds the lock on nodes 0 and 1, so a majority refuses the
/// attempt while node 2's reply is out (its per-node timeout is long: the reply is not timed
/// out, only not awaited). Node 2 then resumes and runs what was queued for it. Returns the
/// owners that hold the lock on node 2 afterwards.
async fn owners_left_on_the_late_node() -> Vec<String> {
    let cluster = RedisCluster::start(3);
    let client = client_with_timeouts(&cluster, LEASE, Duration::from_secs(20)).await;
    for node in [0, 1] {
        rival_hold(&cluster, node, KEY, RIVAL);
    }
    let lock = client.get_lock("late-grant");
    cluster.stop(2);
    let taken = tokio::time::timeout(Duration::from_secs(10), lock.try_lock(Duration::ZERO, None))
        .await
        .expect("decided by the majority, not by the stopped node");
    assert_eq!(taken.ok(), Some(false), "a majority holds it for the rival");
    cluster.resume(2);
    // The client's own connection to node 2 carries its requests in order: once a later one
    // is answered, the attempt and its undo have run there.
    let inspected = lock.is_locked().await;
    assert!(matches!(inspected, Ok(true)), "{inspected:?}");
    let mut owners: Vec<String> = redis::cmd("HKEYS")
        .arg(KEY)
        .query(&mut cluster.node(2).connection())
        .expect("HKEYS");
    owners.retain(|owner| owner != RIVAL);
    client.shutdown().await;
    owners
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_grant_of_a_failed_attempt_is_undone_and_the_control_is_caught() {
    let left = owners_left_on_the_late_node().await;
    assert!(left.is_empty(), "the late grant was not undone: {left:?}");

    UNDO_ONLY_SEEN_GRANTS.store(true, Ordering::Relaxed);
    let left = owners_left_on_the_late_node().await;
    UNDO_ONLY_SEEN_GRANTS.store(false, Ordering::Relaxed);
    assert_eq!(
        left.len(),
        1,
        "the twin that undoes only the grants it saw leaves the late grant: {left:?}"
    );
}
