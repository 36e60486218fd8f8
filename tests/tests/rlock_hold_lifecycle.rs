//! A hold is released, given up (its lost signal fired), or still held and renewed: never
//! counted and unwatched, never renewed once its last handle is gone, and a fixed lease that
//! ran out ends it.
//!
//! Before the fixes: a final `unlock()` that missed the majority (or was dropped) had already
//! dropped the hold's watchdog registration, so the hold stayed counted but unwatched, and the
//! owner's next `lock()` was taken as nested (old token, no renewal) and expired under it; a
//! guard's `unlock()` dropped while waiting for the hold sent nothing and its `Drop` did
//! nothing, so the hold was renewed until the process exited; a guard dropped outside a
//! runtime left its registration renewed forever; after a fixed lease ran out, the owner's
//! `lock()` answered `LockLost` until it called `unlock()`.

use std::collections::HashMap;
use std::time::Duration;

use redlock_reentrant::{Error, LockClient, LostReason, RetryPolicy};
use redlock_testkit::{eventually_async, hashes, seeded_rng, RedisCluster};
use redlock_tests::SlowLinks;

const WATCHDOG: Duration = Duration::from_millis(1500);
const NODE_TIMEOUT: Duration = Duration::from_millis(100);
/// Each way, on a slow link.
const LINK_DELAY: Duration = Duration::from_millis(8);

async fn client(cluster: &RedisCluster) -> LockClient {
    client_with_node_timeout(cluster, NODE_TIMEOUT).await
}

async fn client_with_node_timeout(cluster: &RedisCluster, node_timeout: Duration) -> LockClient {
    LockClient::builder()
        .nodes(cluster.urls())
        .watchdog_timeout(WATCHDOG)
        .node_timeout(node_timeout)
        .retry(RetryPolicy::none())
        .build()
        .await
        .expect("client")
}

/// Lock hashes named `key` on the running nodes (unlock latches are not locks).
fn lock_keys(cluster: &RedisCluster, key: &str) -> usize {
    (0..cluster.len())
        .filter(|&node| cluster.node(node).is_running())
        .map(|node| cluster.keys_on(node, key).len())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_no_majority_answered_leaves_the_hold_counted_and_renewed() {
    const KEY: &str = "redlock:unanswered";
    let cluster = RedisCluster::start(5);
    let holder = client(&cluster).await;
    let rival = client(&cluster).await;
    let lock = holder.get_lock("unanswered");
    lock.lock().await.expect("lock");
    lock.lock().await.expect("nested");
    let token = lock.fencing_token();
    let signal = lock.lost_signal().expect("held");

    for node in 0..3 {
        cluster.stop(node);
    }
    let first = lock.unlock().await;
    assert!(matches!(first, Err(Error::NoQuorum { .. })), "{first:?}");
    assert_eq!(holder.watchdog().registered(), 1, "still watched");
    for node in 0..3 {
        cluster.resume(node);
    }
    // Renewed all along: two watchdog leases later it is still this holder's.
    tokio::time::sleep(WATCHDOG * 2).await;
    assert!(!signal.is_lost(), "lost: {:?}", signal.reason());
    assert!(!rival
        .get_lock("unanswered")
        .try_lock(Duration::ZERO, None)
        .await
        .expect("try_lock"));
    assert_eq!(lock_keys(&cluster, KEY), 5, "held on every node");

    // The retry reuses the request: the nodes that applied it answer as before.
    lock.unlock().await.expect("the retried nested unlock");
    assert_eq!(
        lock.fencing_token(),
        token,
        "one acquisition left, same hold"
    );
    assert_eq!(lock.hold_count().await.expect("count"), 1);

    // A final release no majority answered: the owner's next lock() finishes it first, then
    // takes a new hold (count 1, a new token), which is renewed.
    for node in 0..3 {
        cluster.stop(node);
    }
    let last = lock.unlock().await;
    assert!(matches!(last, Err(Error::NoQuorum { .. })), "{last:?}");
    assert_eq!(holder.watchdog().registered(), 1, "still watched");
    for node in 0..3 {
        cluster.resume(node);
    }
    lock.lock().await.expect("a new hold");
    assert_eq!(lock.hold_count().await.expect("count"), 1);
    assert!(lock.fencing_token() > token, "a new hold, not a nested one");
    assert_eq!(holder.watchdog().registered(), 1);
    tokio::time::sleep(WATCHDOG * 2).await;
    assert!(!lock.lost_signal().expect("held").is_lost());
    lock.unlock().await.expect("unlock");
    assert_eq!(holder.watchdog().registered(), 0);
    assert_eq!(lock_keys(&cluster, KEY), 0);
}

#[tokio::test(flavor = "current_thread")]
async fn an_unlock_dropped_at_any_point_still_releases() {
    let mut rng = seeded_rng();
    let cluster = RedisCluster::start(5);
    // Slow links to four masters and a stopped fifth make every release last a few link
    // delays (it is decided by the slow four): a wide window to drop in.
    let links = SlowLinks::start(&cluster, 4).await;
    let holder = links.client(WATCHDOG, NODE_TIMEOUT).await;
    links.slow_down(LINK_DELAY);
    cluster.stop(4);
    let mut dropped = 0;
    for round in 0..20 {
        let name = format!("dropped-unlock:{round}");
        let lock = holder.get_lock(&name);
        lock.lock().await.expect("lock");
        let depth = rng.u32(1..=2);
        if depth == 2 {
            lock.lock().await.expect("nested");
        }
        let offset = Duration::from_micros(rng.u64(0..=LINK_DELAY.as_micros() as u64 * 3));
        let mut released = 0;
        for _ in 0..depth {
            match tokio::time::timeout(offset, lock.unlock()).await {
                Ok(outcome) => outcome.expect("unlock"),
                Err(_) => dropped += 1,
            }
            released += 1;
        }
        assert_eq!(released, depth);
        // Each dropped release completes in a spawned task; the next operation on the hold
        // waits for it, so this is the released count.
        assert!(
            eventually_async(Duration::from_secs(5), || lock_keys(
                &cluster,
                &format!("redlock:{name}")
            ) == 0)
            .await,
            "round {round}: the lock is still there"
        );
    }
    assert!(dropped > 0, "no unlock was dropped");
    assert!(
        eventually_async(Duration::from_secs(5), || holder.watchdog().registered()
            == 0)
        .await,
        "renewed after its release: {} registrations",
        holder.watchdog().registered()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guard_unlock_dropped_while_waiting_for_its_hold_still_releases() {
    const KEY: &str = "redlock:guard-wait";
    const SLOW: Duration = Duration::from_millis(400);
    let cluster = RedisCluster::start(5);
    // Slow links long enough to see the nested attempt hold the hold, below.
    let links = SlowLinks::start(&cluster, 5).await;
    let holder = links.client(Duration::from_secs(30), SLOW * 5).await;
    let owner = holder.new_owner();
    let lock = holder.get_lock("guard-wait").with_owner(&owner);
    let guard = lock.acquire().await.expect("guard");

    // A nested lock() of the same owner lasts two link delays (its grants land after one,
    // their replies after two) and has the hold meanwhile; the guard's unlock waits for it
    // and is dropped while waiting.
    links.slow_down(SLOW);
    let nested = tokio::spawn({
        let lock = lock.clone();
        async move { lock.lock().await }
    });
    // The nested attempt has the hold once its grants landed on the running nodes.
    let counted_twice = || {
        hashes::<HashMap<String, u32>>(&cluster, KEY)
            .iter()
            .all(|hash| hash.values().eq([&2]))
    };
    assert!(
        eventually_async(Duration::from_secs(1), counted_twice).await,
        "the nested attempt's grants never landed"
    );
    let unlocked = tokio::time::timeout(Duration::from_millis(50), guard.unlock()).await;
    assert!(
        unlocked.is_err(),
        "still waiting when dropped: {unlocked:?}"
    );
    assert!(
        !nested.is_finished(),
        "the nested attempt had the hold all along (the guard's unlock was dropped waiting)"
    );
    nested.await.expect("task").expect("nested lock()");

    // The dropped unlock released the guard's acquisition: one unlock frees the lock.
    lock.unlock()
        .await
        .expect("the nested acquisition's unlock");
    assert!(
        eventually_async(Duration::from_secs(5), || holder.watchdog().registered()
            == 0)
        .await,
        "the hold is still renewed: {} registrations",
        holder.watchdog().registered()
    );
    assert_eq!(lock_keys(&cluster, KEY), 0);
    assert!(matches!(lock.unlock().await, Err(Error::NotOwner { .. })));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guard_dropped_outside_a_runtime_is_never_renewed_again() {
    const KEY: &str = "redlock:no-runtime";
    let cluster = RedisCluster::start(3);
    let holder = client(&cluster).await;
    let lock = holder.get_lock("no-runtime");
    let guard = lock.acquire().await.expect("guard");
    let signal = lock.lost_signal().expect("held");

    std::thread::spawn(move || drop(guard))
        .join()
        .expect("a thread with no runtime");
    assert_eq!(holder.watchdog().registered(), 0, "renewal stops at once");
    assert_eq!(signal.reason(), Some(LostReason::Abandoned));
    // Nothing renews it: the lock expires within its lease.
    assert!(
        eventually_async(WATCHDOG * 3, || lock_keys(&cluster, KEY) == 0).await,
        "still held after {:?}",
        WATCHDOG * 3
    );
    // The owner's next acquisition is a new hold.
    lock.lock().await.expect("a new hold");
    assert_eq!(lock.hold_count().await.expect("count"), 1);
    lock.unlock().await.expect("unlock");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fixed_lease_that_ran_out_ends_the_hold() {
    let cluster = RedisCluster::start(3);
    let holder = client(&cluster).await;
    let lock = holder.get_lock("let-it-expire");
    let lease = Duration::from_millis(500);

    // Redisson's idiom: lock with a lease and let it expire.
    lock.lock_with_lease(lease).await.expect("lock_with_lease");
    let first = lock.fencing_token().expect("held");
    let signal = lock.lost_signal().expect("held");
    assert_eq!(signal.lost().await, LostReason::LeaseExpired);
    lock.lock_with_lease(lease)
        .await
        .expect("the next acquisition is a new hold");
    assert!(lock.fencing_token().expect("held") > first, "a new token");
    assert_eq!(lock.hold_count().await.expect("count"), 1);
    lock.unlock().await.expect("the new hold unlocks");

    // Without waiting for the signal: right after the lease ends, by the clock alone.
    lock.lock_with_lease(lease).await.expect("lock_with_lease");
    tokio::time::sleep(lease).await;
    assert!(
        lock.try_lock(Duration::ZERO, Some(lease))
            .await
            .expect("try_lock"),
        "a new hold"
    );
    assert_eq!(lock.hold_count().await.expect("count"), 1);

    // An unlock of an expired hold says so, and it is over.
    tokio::time::sleep(lease).await;
    let unlocked = lock.unlock().await;
    assert!(
        matches!(
            unlocked,
            Err(Error::LockLost {
                reason: LostReason::LeaseExpired,
                ..
            })
        ),
        "{unlocked:?}"
    );
    assert!(matches!(lock.unlock().await, Err(Error::NotOwner { .. })));
    assert_eq!(holder.watchdog().registered(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_final_release_no_majority_answered_ends_within_its_lease() {
    // Its owner let go and nobody is left to retry (the owning task ended): the lock frees
    // within a lease, the registration goes, and the hold is over.
    const KEY: &str = "redlock:let-go";
    let cluster = std::sync::Arc::new(RedisCluster::start(3));
    let holder = client(&cluster).await;
    let lock = holder.get_lock("let-go");
    let signal = tokio::spawn({
        let lock = lock.clone();
        let cluster = std::sync::Arc::clone(&cluster);
        async move {
            lock.lock().await.expect("lock");
            let signal = lock.lost_signal().expect("held");
            for node in 1..3 {
                cluster.stop(node);
            }
            let last = lock.unlock().await;
            assert!(matches!(last, Err(Error::NoQuorum { .. })), "{last:?}");
            signal
        }
    })
    .await
    .expect("the owning task");
    for node in 1..3 {
        cluster.resume(node);
    }
    // The paused nodes ran the release on resume, or the key expires there: within a lease.
    assert!(
        eventually_async(WATCHDOG * 3, || lock_keys(&cluster, KEY) == 0).await,
        "still held {:?} after the owning task ended",
        WATCHDOG * 3
    );
    assert!(
        eventually_async(WATCHDOG * 2, || holder.watchdog().registered() == 0).await,
        "still registered"
    );
    assert!(signal.is_lost(), "the hold is over once its lease ran out");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guard_release_behind_a_pending_unlock_that_fails_again_gives_the_hold_up() {
    const KEY: &str = "redlock:behind-pending";
    let cluster = RedisCluster::start(3);
    let holder = client(&cluster).await;
    let lock = holder.get_lock("behind-pending");
    let guard = lock.acquire().await.expect("guard");
    lock.lock().await.expect("nested");
    let signal = lock.lost_signal().expect("held");

    for node in 1..3 {
        cluster.stop(node);
    }
    let nested = lock.unlock().await;
    assert!(matches!(nested, Err(Error::NoQuorum { .. })), "{nested:?}");
    // The guard's release retries the pending one first; no majority again: nobody is left
    // to retry the guard's own release, so the hold is given up rather than renewed on.
    let released = guard.unlock().await;
    assert!(
        matches!(released, Err(Error::NoQuorum { .. })),
        "{released:?}"
    );
    assert_eq!(signal.reason(), Some(LostReason::QuorumLost));
    assert_eq!(holder.watchdog().registered(), 0, "not renewed any more");
    for node in 1..3 {
        cluster.resume(node);
    }
    assert!(
        eventually_async(WATCHDOG * 3, || lock_keys(&cluster, KEY) == 0).await,
        "still held after {:?}",
        WATCHDOG * 3
    );
}

#[test]
fn a_hold_left_when_its_runtime_shuts_down_is_given_up_without_recursion() {
    // A runtime shutting down drops its tasks, and what their drops spawn, unstarted: the
    // release a guard owes must then be given up there and then, not spawned again and again.
    const KEY: &str = "redlock:runtime-ends";
    let cluster = RedisCluster::start(3);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let (holder, signal) = runtime.block_on(async {
        let holder = client(&cluster).await;
        let lock = holder.get_lock("runtime-ends");
        let guard = lock.acquire().await.expect("guard");
        let signal = lock.lost_signal().expect("held");
        let (held, is_held) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            let _guard = guard;
            held.send(()).expect("the test waits");
            std::future::pending::<()>().await;
        });
        is_held.await.expect("the task holds the guard");
        (holder, signal)
    });
    drop(runtime);
    assert_eq!(signal.reason(), Some(LostReason::Abandoned));
    assert_eq!(holder.watchdog().registered(), 0, "never renewed again");
    drop(holder);
    assert!(
        redlock_testkit::eventually(WATCHDOG * 3, || lock_keys(&cluster, KEY) == 0),
        "still held after {:?}",
        WATCHDOG * 3
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_force_unlock_overlapping_an_acquisition_in_the_same_client_leaves_no_untold_holder() {
    // The acquisition waits on a stopped node while two grants are in; the forced unlock
    // starts then. Its deletion would land right after those grants: the acquisition must
    // not come back as a hold nobody holds.
    const KEY: &str = "redlock:forced-race";
    let cluster = RedisCluster::start(3);
    let holder = client_with_node_timeout(&cluster, Duration::from_millis(300)).await;
    let lock = holder.get_lock("forced-race");
    cluster.stop(2);
    let acquiring = tokio::spawn({
        let lock = lock.clone();
        async move {
            lock.lock().await.expect("lock");
            lock.lost_signal().expect("held")
        }
    });
    assert!(
        eventually_async(Duration::from_secs(5), || cluster.keys_on(0, KEY).len()
            == 1)
        .await,
        "the acquisition never reached node 0"
    );
    lock.force_unlock().await.expect("force_unlock");
    let signal = acquiring.await.expect("the acquiring task");
    if !signal.is_lost() {
        for node in 0..2 {
            assert_eq!(
                cluster.keys_on(node, KEY).len(),
                1,
                "a holder that was not told holds nothing on node {node}"
            );
        }
    }
    cluster.resume(2);
    holder.shutdown().await;
}
