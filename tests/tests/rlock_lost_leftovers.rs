//! Unlocking a hold that was lost deletes what is left of it on the nodes, where this owner
//! still holds it: the lock frees for others when the holder lets go, not a lease later.

use std::time::Duration;

use redlock_reentrant::{Error, LostReason};
use redlock_testkit::{eventually_async, RedisCluster};
use redlock_tests::{client, released_everywhere, WATCHDOG};

const KEY: &str = "redlock:leftover";

/// The lock's PTTL on node `node` (-2: no key).
fn pttl(cluster: &RedisCluster, node: usize) -> i64 {
    redis::cmd("PTTL")
        .arg(KEY)
        .query(&mut cluster.node(node).connection())
        .expect("PTTL")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unlocking_a_lost_hold_deletes_its_leftover_keys_at_once() {
    let cluster = RedisCluster::start(3);
    let holder = client(&cluster, WATCHDOG).await;
    let lock = holder.get_lock("leftover");
    lock.lock().await.expect("lock");
    let signal = lock.lost_signal().expect("held");

    // A majority stops answering: the hold is lost before its validity ends, while every
    // renewal round (retried each quarter interval) still renews the key on node 0.
    cluster.stop(1);
    cluster.stop(2);
    let reason = tokio::time::timeout(WATCHDOG * 3, signal.lost())
        .await
        .expect("the holder is told");
    assert_eq!(reason, LostReason::QuorumLost);
    let left = pttl(&cluster, 0);
    assert!(
        left > i64::try_from(WATCHDOG.as_millis() / 2).expect("fits"),
        "node 0 kept the key renewed: PTTL {left} ms"
    );

    // The owner lets go: told the hold was lost, and what is left of it goes at once, long
    // before node 0's lease would end it (a third of the watchdog lease against more than
    // half of it).
    let unlocked = lock.unlock().await;
    assert!(
        matches!(
            unlocked,
            Err(Error::LockLost {
                reason: LostReason::QuorumLost,
                ..
            })
        ),
        "{unlocked:?}"
    );
    assert!(
        eventually_async(WATCHDOG / 3, || pttl(&cluster, 0) == -2).await,
        "the leftover key is still on node 0: PTTL {} ms",
        pttl(&cluster, 0)
    );

    // The paused nodes run what was queued for them in order (the renewals that timed out,
    // then the deletion), so they end free too.
    cluster.resume(1);
    cluster.resume(2);
    released_everywhere(&cluster, KEY, WATCHDOG / 3).await;
    let rival = client(&cluster, WATCHDOG).await;
    assert!(
        rival
            .get_lock("leftover")
            .try_lock(Duration::ZERO, None)
            .await
            .expect("try_lock"),
        "free for another owner"
    );
}
