//! The watchdog renewing core's plain (non-reentrant) lock: renewed while held, never after
//! release, side by side with reentrant holds in one watchdog, a lost majority told to the
//! holder in time, and a dropped lease released.
//!
//! A short timeout (3 s, renewed every 1 s) keeps the suite fast; the ratio is the default's.

use std::time::{Duration, Instant};

use redlock_reentrant::{
    redis, Error, LockClient, LostReason, Redlock, RedlockConfig, Watchdog, WatchdogConfig,
};
use redlock_testkit::{eventually_async, pttls, RedisCluster};
use redlock_tests::rounds_pass;

const TIMEOUT: Duration = Duration::from_secs(3);
/// A thirtieth of the lease, as in the other watchdog tests: room for a busy machine.
const NODE_TIMEOUT: Duration = Duration::from_millis(100);

fn watchdog(cluster: &RedisCluster) -> Watchdog {
    let redlock = Redlock::new(RedlockConfig {
        node_timeout: Some(NODE_TIMEOUT),
        ..RedlockConfig::with_nodes(cluster.urls())
    })
    .expect("redlock");
    Watchdog::start(
        redlock,
        WatchdogConfig {
            timeout: TIMEOUT,
            ..WatchdogConfig::default()
        },
    )
    .expect("watchdog")
}

/// Waits until `key` is gone from every node: a release confirmed by a majority may still be on
/// its way to a slow one (its lease bounds it; a third of it is plenty here).
async fn released_everywhere(cluster: &RedisCluster, key: &str) {
    let gone = eventually_async(TIMEOUT / 3, || cluster.count_keys(key) == 0).await;
    assert!(gone, "{key} left on {} nodes", cluster.count_keys(key));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_lock_is_renewed_while_held_and_never_after_release() {
    let cluster = RedisCluster::start(3);
    let watchdog = watchdog(&cluster);
    let lease = watchdog.acquire("plain").await.expect("acquire");
    let first_validity = lease.valid_until();

    rounds_pass(&watchdog, 2).await;
    // Two intervals on, an unrenewed lease would have under a third of its 3 s left.
    for pttl in pttls(&cluster, "redlock:plain") {
        assert!(pttl > 1_500, "renewed: pttl {pttl}");
    }
    assert!(
        lease.valid_until() > first_validity,
        "renewals move the validity"
    );
    assert!(!lease.is_lost());
    let rival = watchdog.redlock().acquire_once("plain", TIMEOUT).await;
    assert!(
        matches!(rival, Err(Error::Contended { .. })),
        "not reentrant: {rival:?}"
    );

    // The owner token proves the hold: it never shows in Debug output (a log line).
    let token: String = redis::cmd("GET")
        .arg("redlock:plain")
        .query(&mut cluster.node(0).connection())
        .expect("GET");
    for shown in [format!("{lease:?}"), format!("{watchdog:?}")] {
        assert!(!shown.contains(&token), "the token shows: {shown}");
        assert!(shown.contains("plain"), "something is shown: {shown}");
    }

    lease.release().await.expect("release");
    assert_eq!(watchdog.registered(), 0, "no renewal after release");
    released_everywhere(&cluster, "redlock:plain").await;
    assert_eq!(watchdog.stats().lost, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_watchdog_renews_plain_and_reentrant_locks_side_by_side() {
    let cluster = RedisCluster::start(3);
    let client = LockClient::builder()
        .nodes(cluster.urls())
        .watchdog_timeout(TIMEOUT)
        .node_timeout(NODE_TIMEOUT)
        .build()
        .await
        .expect("client");
    let reentrant = client.get_lock("reentrant");
    reentrant.lock().await.expect("lock");
    let plain = client.watchdog().acquire("plain").await.expect("acquire");
    assert_eq!(client.watchdog().registered(), 2);

    let before = client.watchdog().stats();
    rounds_pass(client.watchdog(), 2).await;
    let after = client.watchdog().stats();
    // Each kind is renewed by its own script: one call per kind per round.
    assert!(
        after.calls_per_node - before.calls_per_node >= 2 * (after.rounds - before.rounds),
        "{before:?} -> {after:?}"
    );
    for key in ["redlock:reentrant", "redlock:plain"] {
        for pttl in pttls(&cluster, key) {
            assert!(pttl > 1_500, "{key} renewed: pttl {pttl}");
        }
    }

    plain.release().await.expect("release");
    reentrant.unlock().await.expect("unlock");
    for key in ["redlock:reentrant", "redlock:plain"] {
        released_everywhere(&cluster, key).await;
    }
    assert_eq!(client.watchdog().registered(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_whose_majority_is_gone_is_told_before_its_validity_ends() {
    let cluster = RedisCluster::start(3);
    let watchdog = watchdog(&cluster);
    let lease = watchdog.acquire("plain").await.expect("acquire");
    cluster.kill(0);
    cluster.kill(1);

    let reason = tokio::time::timeout(TIMEOUT * 2, lease.lost())
        .await
        .expect("told within a lease");
    let told_at = Instant::now();
    assert_eq!(reason, LostReason::QuorumLost);
    assert!(
        told_at < lease.valid_until(),
        "told while the lock was still its own"
    );
    let released = lease.release().await;
    assert!(
        matches!(
            released,
            Err(Error::LockLost {
                reason: LostReason::QuorumLost,
                ..
            })
        ),
        "{released:?}"
    );
    assert_eq!(watchdog.registered(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shut_down_watchdog_takes_no_lock_and_its_holders_are_told() {
    let cluster = RedisCluster::start(3);
    let watchdog = watchdog(&cluster);
    let lease = watchdog.acquire("plain").await.expect("acquire");
    watchdog.shutdown();
    assert_eq!(lease.lost_signal().reason(), Some(LostReason::Shutdown));
    let refused = watchdog.acquire("other").await;
    assert!(matches!(refused, Err(Error::ShutDown)), "{refused:?}");
    assert_eq!(cluster.count_keys("redlock:other"), 0);
    let released = lease.release().await;
    assert!(
        matches!(
            released,
            Err(Error::LockLost {
                reason: LostReason::Shutdown,
                ..
            })
        ),
        "{released:?}"
    );
    assert_eq!(
        cluster.count_keys("redlock:plain"),
        0,
        "released all the same"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_plain_lease_stops_renewing_and_is_released() {
    let cluster = RedisCluster::start(3);
    let watchdog = watchdog(&cluster);
    let lease = watchdog.acquire("plain").await.expect("acquire");
    // Decided at the first majority: the third grant may still be on its way.
    assert!(
        eventually_async(TIMEOUT / 3, || cluster.count_keys("redlock:plain") == 3).await,
        "granted on every node"
    );
    drop(lease);
    assert_eq!(watchdog.registered(), 0, "renewal stops at once");
    // A third of the lease: a lock left to expire would still be there.
    let released = eventually_async(TIMEOUT / 3, || cluster.count_keys("redlock:plain") == 0).await;
    assert!(
        released,
        "the spawned release deletes the lock long before its lease ends"
    );
    // Taken again at once by anyone: nothing was left behind.
    let again = watchdog.acquire("plain").await.expect("acquire again");
    again.release().await.expect("release");
}
