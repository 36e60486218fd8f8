//! With a majority of masters up, a holder can release (Redlock's liveness promise): a final
//! unlock is done as soon as the answers prove that no majority can still hold the lock for
//! this owner, even when fewer than a majority answered "released" because the hold was
//! granted on exactly a majority and one of those masters stopped.

use std::time::Duration;

use redlock_reentrant::{redis, Error, LockClient, RetryPolicy};
use redlock_testkit::{eventually_async, rival_hold, RedisCluster};
use redlock_tests::{released_everywhere, SlowLinks, WATCHDOG};

/// Room for a busy machine: a tenth of the watchdog lease.
const NODE_TIMEOUT: Duration = Duration::from_millis(300);

async fn client(cluster: &RedisCluster) -> LockClient {
    LockClient::builder()
        .nodes(cluster.urls())
        .watchdog_timeout(WATCHDOG)
        .node_timeout(NODE_TIMEOUT)
        .retry(RetryPolicy::none())
        .build()
        .await
        .expect("client")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_granted_by_exactly_a_majority_is_released_with_one_of_them_stopped() {
    let cluster = RedisCluster::start(5);
    let key = "redlock:exactly-three";
    rival_hold(&cluster, 3, key, "rival-owner");
    rival_hold(&cluster, 4, key, "rival-owner");
    let client = client(&cluster).await;
    let lock = client.get_lock("exactly-three");
    assert!(
        lock.try_lock(Duration::ZERO, None).await.expect("try_lock"),
        "three of five masters are free"
    );
    let holders = |node: usize| cluster.keys_on(node, key).len();
    assert_eq!(
        (0..3).map(holders).sum::<usize>(),
        3,
        "granted on the three free masters"
    );

    // One of the three stops: two answer "released", two "not held", one nothing.
    cluster.stop(0);
    let released = lock.unlock().await;
    cluster.resume(0);
    assert!(
        released.is_ok(),
        "four of five masters answered and none of them holds it for us: {released:?}"
    );
    assert!(
        matches!(lock.unlock().await, Err(Error::NotOwner { .. })),
        "and nothing is left to release"
    );
    // The stopped master keeps our key until its lease ends; nothing renews it any more.
    for node in 1..3 {
        assert!(cluster.keys_on(node, key).is_empty(), "released on {node}");
    }
    client.shutdown().await;
    for node in 3..5 {
        redis::cmd("DEL")
            .arg(key)
            .query::<()>(&mut cluster.node(node).connection())
            .expect("DEL");
    }
    released_everywhere(&cluster, key, WATCHDOG * 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nested_unlock_with_one_of_exactly_a_majority_stopped_stays_undecided() {
    let cluster = RedisCluster::start(5);
    let key = "redlock:nested-three";
    rival_hold(&cluster, 3, key, "rival-owner");
    rival_hold(&cluster, 4, key, "rival-owner");
    let client = client(&cluster).await;
    let lock = client.get_lock("nested-three");
    assert!(lock.try_lock(Duration::ZERO, None).await.expect("outer"));
    assert!(lock.try_lock(Duration::ZERO, None).await.expect("nested"));

    // The hold goes on after a nested unlock, so its count must drop on a majority: two of
    // the three masters that hold it cannot show that.
    cluster.stop(0);
    let nested = lock.unlock().await;
    cluster.resume(0);
    assert!(
        matches!(nested, Err(Error::NoQuorum { .. })),
        "a nested unlock needs a majority that applied it: {nested:?}"
    );
    client.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_final_unlock_waits_for_a_late_reply_that_shows_the_hold_was_lost() {
    let cluster = RedisCluster::start(3);
    // Master 0's replies come late; the others answer at once.
    let links = SlowLinks::start(&cluster, 1).await;
    // Room for the late reply: a node timeout well above the slow link's round trip.
    let client = links.client(WATCHDOG * 4, WATCHDOG / 2).await;
    let lock = client.get_lock("mostly-gone");
    lock.lock().await.expect("lock");
    // Decided by the first majority: wait for master 0's grant too.
    assert!(
        eventually_async(WATCHDOG, || cluster.count_keys("redlock:mostly-gone") == 3).await,
        "granted everywhere"
    );
    // The hold is gone from masters 0 and 1 behind the holder's back (a forced unlock from
    // elsewhere, a restart without persistence): only master 2 still has it.
    for node in 0..2 {
        redis::cmd("DEL")
            .arg("redlock:mostly-gone")
            .query::<()>(&mut cluster.node(node).connection())
            .expect("DEL");
    }
    links.slow_down(WATCHDOG / 20);
    // Released on 2, not held on 1 at once; master 0's "not held" is on its way. Deciding
    // before it arrives would call a lost hold released.
    let unlocked = lock.unlock().await;
    assert!(
        matches!(unlocked, Err(Error::LockLost { .. })),
        "the holder is told its hold was lost: {unlocked:?}"
    );
    client.shutdown().await;
}
