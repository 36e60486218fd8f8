//! The spinning wait strategy: a waiter subscribes to nothing, looks again after growing pauses,
//! and gets the lock once the holder lets go, for a reentrant lock and both sides of a
//! read-write lock; a bad strategy is a typed error.

use std::time::Duration;

use redlock_reentrant::{Error, InvalidArgument, LockClient, WaitStrategy};
use redlock_testkit::{eventually_async, Monitor, RedisCluster};
use redlock_tests::{client, WATCHDOG};

/// Requests seen on the nodes before a waiter counts as spinning: several looks on each of the
/// three nodes (the holder's renewals, once in 30 s, are a few of them at most).
const LOOKS: usize = 15;

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
async fn a_spinning_waiter_subscribes_to_nothing_and_gets_the_lock_soon_after_the_release() {
    let cluster = RedisCluster::start(3);
    // The holder's lease outlasts the test's patience: a waiter that looked again only when
    // the lease ran out would fail; a spinning one looks again within its longest pause.
    let holder = client(&cluster, Duration::from_secs(90)).await;
    let waiter = spinning_client(&cluster).await;

    let guard = holder.get_lock("spin").acquire().await.expect("hold");
    let writing = holder
        .get_read_write_lock("spin-rw")
        .write_lock()
        .acquire()
        .await
        .expect("write");
    // Every node's commands: a node a busy machine's client skipped for a while sees none.
    let monitors: Vec<Monitor> = (0..cluster.len())
        .map(|node| Monitor::start(cluster.node(node).port()).expect("MONITOR"))
        .collect();
    let looks = |key: &str| {
        monitors
            .iter()
            .flat_map(Monitor::lines)
            .filter(|line| line.contains("EVAL") && line.contains(key))
            .count()
    };
    let plain = tokio::spawn({
        let lock = waiter.get_lock("spin");
        async move { lock.acquire().await.expect("lock").unlock().await }
    });
    let read = tokio::spawn({
        let read = waiter.get_read_write_lock("spin-rw").read_lock();
        async move { read.acquire().await.expect("read").unlock().await }
    });
    // Both waiters are spinning: each has looked again and again, and subscribed to nothing.
    assert!(
        eventually_async(PATIENCE, || looks("redlock:spin\"") >= LOOKS
            && looks("spin-rw:read") >= LOOKS)
        .await,
        "the waiters look again"
    );
    assert_eq!(waiter.watched_channels(), 0, "a spinning waiter subscribed");
    assert!(
        !plain.is_finished() && !read.is_finished(),
        "the holder still holds"
    );

    guard.unlock().await.expect("unlock");
    writing.unlock().await.expect("unlock");
    for task in [plain, read] {
        tokio::time::timeout(PATIENCE, task)
            .await
            .expect("the spinning waiters get the locks")
            .expect("task")
            .expect("unlock");
    }
    assert_eq!(waiter.watched_channels(), 0);
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
