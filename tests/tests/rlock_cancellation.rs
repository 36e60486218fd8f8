//! A dropped `lock()` leaves no hold, no waiter and no renewal behind; a dropped nested
//! acquisition leaves the hold count as it was.
//!
//! Four of five masters answer through slow links and the fifth is paused, so every attempt
//! lasts a few link delays (it is decided by the slow four); the runtime is single-threaded so
//! the test can look at the nodes right after a drop, before the spawned undo has run, and
//! prove it hit the window where grants were already on the nodes.

use std::time::Duration;

use redlock_testkit::{eventually_async, seeded_rng, RedisCluster};
use redlock_tests::SlowLinks;

/// Room for a busy machine's stalls; the paused fifth never answers in time anyway.
const NODE_TIMEOUT: Duration = Duration::from_millis(250);
/// Each way, on the links to the four answering masters.
const LINK_DELAY: Duration = Duration::from_millis(8);
/// A long lease, so expiry can never be what empties the nodes during the test.
const WATCHDOG: Duration = Duration::from_secs(60);

/// Lock hashes matching `pattern` on the running nodes.
fn locks(cluster: &RedisCluster, pattern: &str) -> usize {
    (0..cluster.len())
        .filter(|&node| cluster.node(node).is_running())
        .map(|node| cluster.keys_on(node, pattern).len())
        .sum()
}

#[tokio::test(flavor = "current_thread")]
async fn a_lock_dropped_at_random_points_leaves_no_hold_and_no_renewal() {
    let mut rng = seeded_rng();
    let cluster = RedisCluster::start(5);
    let links = SlowLinks::start(&cluster, 4).await;
    let client = links.client(WATCHDOG, NODE_TIMEOUT).await;
    let warmup = client.get_lock("warmup");
    warmup.lock().await.expect("all up");
    warmup.unlock().await.expect("unlock");
    links.slow_down(LINK_DELAY);
    cluster.stop(4);

    let (mut dropped, mut dropped_holding) = (0, 0);
    for round in 0..40 {
        let lock = client.get_lock(format!("cancel:{round}"));
        // Past the acquisition fan-out, into the fencing write-back and beyond.
        let offset = Duration::from_micros(rng.u64(0..=LINK_DELAY.as_micros() as u64 * 6));
        match tokio::time::timeout(offset, lock.lock()).await {
            Ok(outcome) => {
                outcome.expect("lock");
                lock.unlock().await.expect("unlock");
            }
            Err(_) => {
                dropped += 1;
                // Blocking on purpose: the undo spawned by the drop has not run yet.
                if locks(&cluster, &format!("redlock:cancel:{round}")) > 0 {
                    dropped_holding += 1;
                }
                assert_eq!(lock.fencing_token(), None, "a dropped lock() is no hold");
            }
        }
    }
    eprintln!("dropped {dropped}, of which {dropped_holding} after grants");
    assert!(dropped_holding > 0, "no drop landed after a grant");
    assert!(
        eventually_async(Duration::from_secs(5), || {
            locks(&cluster, "redlock:cancel:*") == 0 && client.watchdog().registered() == 0
        })
        .await,
        "left behind: {} keys, {} watchdog registrations",
        locks(&cluster, "redlock:cancel:*"),
        client.watchdog().registered()
    );
    cluster.resume(4);
    assert!(
        eventually_async(Duration::from_secs(5), || locks(
            &cluster,
            "redlock:cancel:*"
        ) == 0)
        .await,
        "keys left on the resumed node: {:?}",
        cluster.keys_on(4, "redlock:cancel:*")
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_nested_lock_dropped_at_random_points_leaves_the_count_as_it_was() {
    let mut rng = seeded_rng();
    let cluster = RedisCluster::start(5);
    let links = SlowLinks::start(&cluster, 4).await;
    let client = links.client(WATCHDOG, NODE_TIMEOUT).await;
    let lock = client.get_lock("nested-cancel");
    lock.lock().await.expect("first hold");
    let token = lock.fencing_token();
    links.slow_down(LINK_DELAY);
    cluster.stop(4);

    let mut dropped = 0;
    for _ in 0..30 {
        let offset = Duration::from_micros(rng.u64(0..=LINK_DELAY.as_micros() as u64 * 4));
        match tokio::time::timeout(offset, lock.lock()).await {
            Ok(outcome) => {
                outcome.expect("nested lock");
                lock.unlock().await.expect("nested unlock");
            }
            Err(_) => dropped += 1,
        }
        assert_eq!(
            lock.fencing_token(),
            token,
            "the hold and its token survive"
        );
    }
    assert!(dropped > 0);
    // The next nested lock waits for every pending undo (they hold this owner's cell).
    lock.lock().await.expect("nested");
    assert_eq!(
        lock.hold_count().await.expect("count"),
        2,
        "the dropped attempts were undone"
    );
    lock.unlock().await.expect("unlock");
    lock.unlock().await.expect("unlock");
    let gone = || locks(&cluster, "redlock:nested-cancel") == 0;
    assert!(
        eventually_async(Duration::from_secs(5), gone).await,
        "released on the running nodes"
    );
    cluster.resume(4);
    assert!(
        eventually_async(Duration::from_secs(5), gone).await,
        "the resumed node applied every increment and its undo"
    );
}
