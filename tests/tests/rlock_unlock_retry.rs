//! A retried unlock whose first replies were lost does not report a false "not owner" or a
//! false loss.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use redlock_reentrant::{Error, LockClient};
use redlock_testkit::{eventually_async, Fault, FaultProxy, RedisCluster};
use redlock_tests::released_everywhere;

/// Room for a busy machine's stalls (with the default retries on top) while every node runs;
/// the stopped ones never answer in time anyway.
const NODE_TIMEOUT: Duration = Duration::from_millis(250);
/// The watchdog lease of the library's default configuration.
const DEFAULT_LEASE: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unlock_retried_after_its_replies_were_lost_succeeds() {
    let cluster = RedisCluster::start(5);
    let client = LockClient::builder()
        .nodes(cluster.urls())
        .node_timeout(NODE_TIMEOUT)
        .build()
        .await
        .expect("client");
    let lock = client.get_lock("flaky");
    lock.lock().await.expect("lock");

    // A majority stops answering: the unlock reaches them (queued in their sockets), but no
    // reply comes back in time.
    for node in 0..3 {
        cluster.stop(node);
    }
    let first = lock.unlock().await;
    assert!(
        matches!(first, Err(Error::NoQuorum { answered: 2, .. })),
        "{first:?}"
    );
    for node in 0..3 {
        cluster.resume(node);
    }
    // Every node applied the first unlock once it resumed.
    released_everywhere(&cluster, "redlock:flaky", DEFAULT_LEASE / 3).await;

    // Every node already applied it, so every node now says "not held". The first try got no
    // answer from three and "released" from two: on those five, "not held" is that try
    // landing, not the hold lost (counted as "not owner", the retry would fail).
    lock.unlock()
        .await
        .expect("the retry counts the first try's landing as released");
    assert!(
        matches!(lock.unlock().await, Err(Error::NotOwner { .. })),
        "and it is over now"
    );
    assert_eq!(cluster.count_keys("redlock:flaky"), 0);
}

/// A guard whose release no majority answers cannot be retried (the guard is gone), so the
/// hold is given up: renewal stops at once, the outer hold's lost signal fires, the lock is
/// deleted once the nodes answer again (long before its lease would end), and the owner's next
/// acquisition is a new hold with a new token, not a nested one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guard_release_no_majority_answers_gives_the_hold_up() {
    let cluster = RedisCluster::start(5);
    let lease = Duration::from_secs(30);
    let client = LockClient::builder()
        .nodes(cluster.urls())
        .node_timeout(NODE_TIMEOUT)
        .watchdog_timeout(lease)
        .build()
        .await
        .expect("client");
    let lock = client.get_lock("stranded");
    let outer = lock.acquire().await.expect("outer");
    let inner = lock.acquire().await.expect("nested");
    let first_token = outer.fencing_token();
    assert_eq!(client.watchdog().registered(), 1);

    for node in 0..3 {
        cluster.stop(node);
    }
    let released = inner.unlock().await;
    assert!(
        matches!(released, Err(Error::NoQuorum { .. })),
        "{released:?}"
    );
    assert_eq!(
        client.watchdog().registered(),
        0,
        "nothing renews a hold given up"
    );
    assert!(outer.is_lost(), "the outer hold is told");
    for node in 0..3 {
        cluster.resume(node);
    }
    // Deleted once the nodes answer, not left to its lease.
    released_everywhere(&cluster, "redlock:stranded", lease / 3).await;
    assert!(matches!(outer.unlock().await, Err(Error::LockLost { .. })));

    let again = lock.acquire().await.expect("a new hold");
    assert!(
        again.fencing_token() > first_token,
        "a new hold, not a nested one"
    );
    assert_eq!(lock.hold_count().await.expect("count"), 1);
    again.unlock().await.expect("released");
}

/// An unlock dropped once its release ran on every node (the replies held up on the way back)
/// is finished in the background, and its retry counts the nodes the dropped try reached: the
/// retry runs behind the first try on each connection, every node says "not held", and that
/// is the release landing, not the hold lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unlock_dropped_once_it_ran_completes_as_a_release_not_a_loss() {
    let cluster = RedisCluster::start(3);
    let mut proxies = Vec::new();
    for port in cluster.ports() {
        let upstream = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        proxies.push(FaultProxy::start(upstream).await.expect("proxy"));
    }
    let client = LockClient::builder()
        .nodes(proxies.iter().map(FaultProxy::url))
        // Long beside the hand-offs below on a busy machine: no reply is given up.
        .node_timeout(Duration::from_secs(5))
        .build()
        .await
        .expect("client");
    // An explicit owner: the unlock runs in the test's own task all the same.
    let owner = client.new_owner();
    let lock = client.get_lock("dropped-unlock").with_owner(&owner);
    lock.lock().await.expect("lock");
    let signal = lock.lost_signal().expect("the hold's signal");

    for proxy in &proxies {
        proxy.set(Fault::HoldReplies);
    }
    let applied = eventually_async(Duration::from_secs(10), || {
        cluster.count_keys("redlock:dropped-unlock") == 0
    });
    tokio::select! {
        released = lock.unlock() => panic!("no reply can come back: {released:?}"),
        applied = applied => assert!(applied, "the release never ran"),
    }
    // Dropped: finished in the background, behind the first try on each connection.
    for proxy in &proxies {
        proxy.set(Fault::Pass);
    }
    assert!(
        redlock_reentrant::cleanups_settled(DEFAULT_LEASE).await,
        "the release finished in the background"
    );
    assert!(
        !signal.is_lost(),
        "released, not lost: {:?}",
        signal.reason()
    );
    assert!(matches!(lock.unlock().await, Err(Error::NotOwner { .. })));
}
