//! The spinning wait strategy: a waiter subscribes to nothing, looks again after growing pauses,
//! and gets the lock once the holder lets go, for a reentrant lock and both sides of a
//! read-write lock; a bad strategy is a typed error.

use std::time::Duration;

use redlock_reentrant::{Error, InvalidArgument, LockClient, WaitStrategy};
use redlock_testkit::{eventually_async, RedisCluster};
use redlock_tests::{client, WATCHDOG};

/// Long enough for anything that is awaited to happen on a busy machine.
const PATIENCE: Duration = Duration::from_secs(30);

async fn spinning_client(cluster: &RedisCluster) -> LockClient {
    LockClient::builder()
        .nodes(cluster.urls())
        .watchdog_timeout(WATCHDOG)
        .node_timeout(redlock_tests::room_for_a_busy_machine(WATCHDOG))
        .wait_strategy(WaitStrategy::Spin {
            initial: Duration::from_millis(2),
            max: Duration::from_millis(50),
        })
        .build()
        .await
        .expect("client")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spinning_waiter_subscribes_to_nothing_and_gets_the_lock_after_the_release() {
    let cluster = RedisCluster::start(3);
    let holder = client(&cluster, WATCHDOG).await;
    let waiter = spinning_client(&cluster).await;

    let guard = holder.get_lock("spin").acquire().await.expect("hold");
    let rw = holder.get_read_write_lock("spin-rw");
    let writing = rw.write_lock().acquire().await.expect("write");

    let waiting = tokio::spawn({
        let lock = waiter.get_lock("spin");
        let read = waiter.get_read_write_lock("spin-rw").read_lock();
        async move {
            lock.lock().await.expect("lock");
            read.lock().await.expect("read");
            (lock, read)
        }
    });
    // A window, not a bound: a waiting pub/sub waiter subscribes within its first attempt; a
    // spinning one never does.
    let subscribed = eventually_async(WATCHDOG / 3, || waiter.watched_channels() > 0).await;
    assert!(!subscribed, "a spinning waiter subscribed");
    assert!(!waiting.is_finished(), "the holder still holds");

    guard.unlock().await.expect("unlock");
    writing.unlock().await.expect("unlock");
    let (lock, read) = tokio::time::timeout(PATIENCE, waiting)
        .await
        .expect("the spinning waiter gets both locks")
        .expect("task");
    assert_eq!(waiter.watched_channels(), 0);
    // The task that took them is gone; its holds are released by force here.
    assert!(lock.force_unlock().await.expect("force"));
    assert!(read.force_unlock().await.expect("force"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_spinning_strategy_is_a_typed_error() {
    let cluster = RedisCluster::start(1);
    let zero = WaitStrategy::Spin {
        initial: Duration::ZERO,
        max: Duration::from_millis(5),
    };
    let built = LockClient::builder()
        .nodes(cluster.urls())
        .wait_strategy(zero)
        .build()
        .await;
    assert!(matches!(
        built,
        Err(Error::InvalidArgument(InvalidArgument::WaitStrategy { .. }))
    ));
    let client = client(&cluster, WATCHDOG).await;
    let lock = client.get_lock("spin-bad").with_wait_strategy(zero);
    assert!(matches!(
        lock.lock().await,
        Err(Error::InvalidArgument(InvalidArgument::WaitStrategy { .. }))
    ));
    assert_eq!(cluster.count_keys("*spin-bad*"), 0, "nothing was sent");
}
