//! A nested acquisition never shortens its hold's lease, on any node, and the Redis TTL and the
//! holder's lost deadline always agree: nobody else gets in while the holder believes.
//!
//! Before the fix, a nested `lock()` on a `lock_with_lease(20 s)` hold reset the TTL to the
//! watchdog lease (3 s here) with nothing renewing it, and the lost signal stayed set for the
//! 20 s end: the key expired at 3 s and another client took the lock while the first still
//! believed. A nested `try_lock(.., Some(short))` set the short lease, and its undo (when its
//! replies came late) restored the count but not the TTL.

use std::time::{Duration, Instant};

use redlock_reentrant::{LostReason, RLock};
use redlock_testkit::{eventually_async, pttls, seeded_rng, RedisCluster};
use redlock_tests::{client_with_timeouts, released_everywhere, SlowLinks};

/// The watchdog lease: the nested acquisition's old effect cut the TTL to it.
const WATCHDOG: Duration = Duration::from_secs(3);
/// A twelfth of the watchdog lease: room for a busy machine, and still below the short lease
/// the second test takes (a lease must exceed the node timeout).
const NODE_TIMEOUT: Duration = Duration::from_millis(250);
/// Each way, on a slow link.
const LINK_DELAY: Duration = Duration::from_millis(8);
/// PTTL counts whole milliseconds.
const PTTL_ROUNDING: Duration = Duration::from_millis(2);

/// The TTL that a majority of the running nodes still gives `key`, read now.
fn majority_pttl(cluster: &RedisCluster, key: &str) -> Duration {
    let mut pttls = pttls(cluster, key);
    pttls.sort_unstable_by(|a, b| b.cmp(a));
    Duration::from_millis(u64::try_from(pttls[cluster.len() / 2]).unwrap_or(0))
}

/// The holder's lost deadline never lies beyond what a majority of nodes still grants.
///
/// Each node's key lives until at most the end of the reads plus its PTTL, so this compares
/// the deadline with an upper bound of the majority's expiry: however long a busy machine takes
/// over the reads, a correct holder passes, and a holder that believes past the keys (by the
/// seconds the bugs above made it) fails.
fn assert_deadline_within_ttl(lock: &RLock, cluster: &RedisCluster, key: &str) {
    let (deadline, _) = lock
        .lost_signal()
        .expect("held")
        .deadline()
        .expect("a held lock has a deadline");
    let granted = majority_pttl(cluster, key);
    let read = Instant::now();
    assert!(
        deadline <= read + granted + PTTL_ROUNDING,
        "the holder believes {:?} more, a majority grants {granted:?}",
        deadline.saturating_duration_since(read)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nested_lock_on_a_fixed_lease_never_shortens_it_and_renews_while_held() {
    const KEY: &str = "redlock:nested-fixed";
    let fixed = WATCHDOG * 2;
    let cluster = RedisCluster::start(3);
    let holder = client_with_timeouts(&cluster, WATCHDOG, NODE_TIMEOUT).await;
    let rival = client_with_timeouts(&cluster, WATCHDOG, NODE_TIMEOUT).await;
    let lock = holder.get_lock("nested-fixed");

    let requested = Instant::now();
    lock.lock_with_lease(fixed).await.expect("fixed lease");
    let before = majority_pttl(&cluster, KEY);
    lock.lock().await.expect("nested lock()");
    let after = majority_pttl(&cluster, KEY);
    // Cut, it would be at most the watchdog lease; kept, the fixed lease less the time the
    // nested lock() took. Half-way between them leaves seconds of room either side.
    let halfway = (fixed + WATCHDOG) / 2;
    assert!(
        after > halfway,
        "PTTL {before:?} before the nested lock(), {after:?} after: cut towards {WATCHDOG:?}"
    );
    assert_deadline_within_ttl(&lock, &cluster, KEY);
    let signal = lock.lost_signal().expect("held");

    // Renewed while the nested acquisition is held: the holder's deadline moves past the
    // fixed lease's end, and the nodes' keys with it (past the watchdog lease, where the cut
    // key used to expire, too).
    let past_fixed = requested + fixed + WATCHDOG / 3;
    assert!(
        eventually_async(fixed * 2, || signal
            .deadline()
            .is_some_and(|(deadline, _)| deadline > past_fixed))
        .await,
        "never renewed past the fixed lease: {:?}",
        signal.deadline()
    );
    assert!(!signal.is_lost(), "lost: {:?}", signal.reason());
    assert_deadline_within_ttl(&lock, &cluster, KEY);
    assert!(
        !rival
            .get_lock("nested-fixed")
            .try_lock(Duration::ZERO, None)
            .await
            .expect("try_lock"),
        "another client got in while the holder believed"
    );

    // Unlocking the nested acquisition stops renewal; the hold keeps the lease it has and
    // ends with it: the holder is told (LeaseExpired) before the rival gets in.
    lock.unlock().await.expect("nested unlock");
    assert_deadline_within_ttl(&lock, &cluster, KEY);
    let rival_lock = rival.get_lock("nested-fixed");
    let got = rival_lock
        .try_lock(fixed * 3, None)
        .await
        .expect("try_lock");
    let rival_in = Instant::now();
    assert!(got, "the hold ends once its lease runs out");
    assert_eq!(signal.reason(), Some(LostReason::LeaseExpired));
    let (told_at, _) = signal.deadline().expect("deadline");
    assert!(
        told_at <= rival_in,
        "the rival got in {:?} before the holder's deadline",
        told_at.saturating_duration_since(rival_in)
    );
    eprintln!(
        "nested lock() on a {fixed:?} fixed lease: hold ended {:?} after the request",
        rival_in - requested
    );
    rival_lock.unlock().await.expect("unlock");
    assert!(matches!(
        lock.unlock().await,
        Err(redlock_reentrant::Error::LockLost {
            reason: LostReason::LeaseExpired,
            ..
        })
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nested_fixed_lease_never_shortens_a_renewed_hold_even_when_undone() {
    const KEY: &str = "redlock:nested-short";
    let mut rng = seeded_rng();
    let cluster = RedisCluster::start(5);
    let links = SlowLinks::start(&cluster, 4).await;
    let holder = links.client(WATCHDOG, NODE_TIMEOUT).await;
    let lock = holder.get_lock("nested-short");
    lock.lock().await.expect("renewed hold");
    // Cut, a TTL would be at most the short lease; renewed every third of the watchdog lease,
    // it stays above two thirds of it. Twice the short lease leaves a second either side.
    let short = WATCHDOG / 6;
    let floor = short * 2;

    // Granted: the short lease does not cut the hold's TTL.
    assert!(lock
        .try_lock(Duration::ZERO, Some(short))
        .await
        .expect("nested"));
    assert!(majority_pttl(&cluster, KEY) > floor);
    assert_deadline_within_ttl(&lock, &cluster, KEY);
    lock.unlock().await.expect("nested unlock");

    // Dropped half-way (slow links to four nodes and a stopped fifth make every attempt last a
    // few link delays): undone, and still no node's TTL was cut to the short lease.
    links.slow_down(LINK_DELAY);
    cluster.stop(4);
    let mut dropped = 0;
    for _ in 0..20 {
        let offset = Duration::from_micros(rng.u64(0..=LINK_DELAY.as_micros() as u64 * 4));
        match tokio::time::timeout(offset, lock.try_lock(Duration::ZERO, Some(short))).await {
            Ok(granted) => {
                // Not granted in time on a stalled machine is no hold to release.
                if granted.expect("nested") {
                    lock.unlock().await.expect("nested unlock");
                }
            }
            Err(_) => dropped += 1,
        }
        for (node, pttl) in pttls(&cluster, KEY).into_iter().enumerate() {
            assert!(
                pttl > floor.as_millis() as i64,
                "node {node}: PTTL cut to {pttl} ms"
            );
        }
    }
    let last_attempt = Instant::now();
    assert!(dropped > 0, "no attempt was dropped");
    cluster.resume(4);
    // A dropped attempt's undo is sent by a task of its own, which a busy machine may not have
    // run yet: the nodes count the outer hold alone once it has (a third of the lease at most).
    let settled = Instant::now() + WATCHDOG / 3;
    let mut count = lock.hold_count().await.expect("count");
    while count != 1 && Instant::now() < settled {
        tokio::time::sleep(Duration::from_millis(20)).await;
        count = lock.hold_count().await.expect("count");
    }
    assert_eq!(count, 1, "the dropped attempts were not all undone");
    // Past the end a short lease set by the last attempt would have had: still held.
    tokio::time::sleep_until((last_attempt + short * 2).into()).await;
    assert!(!lock.lost_signal().expect("held").is_lost());
    assert!(majority_pttl(&cluster, KEY) > floor, "still held");
    lock.unlock().await.expect("unlock");
    released_everywhere(&cluster, KEY, WATCHDOG / 3).await;
}
