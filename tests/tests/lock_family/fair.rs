//! The fair lock on a real master: waiters get it in the order they came, a crashed waiter in
//! the middle of the queue is dropped within its heartbeat (the waiters behind it do not wait
//! for it), a waiter that gives up or is dropped leaves the queue, a one-shot try never goes
//! before a live waiter, and several masters are refused.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use redlock_reentrant::{LockClient, RLock};
use redlock_testkit::{eventually_async, HolderProcess, RedisCluster};
use redlock_tests::{client, released_everywhere, WATCHDOG};

/// Long enough for anything that is awaited to happen on a busy machine; never a bound that a
/// test measures.
const PATIENCE: Duration = Duration::from_secs(30);

/// The watchdog lease of clients whose waiters must stay queued while the test looks: their
/// heartbeat (a third of it, 4 s) leaves a busy machine seconds to refresh it.
const WAITER_WATCHDOG: Duration = Duration::from_secs(12);

fn fair(client: &LockClient, name: &str) -> RLock {
    client.get_fair_lock(name).expect("one master")
}

fn queue_key(client: &LockClient, name: &str) -> String {
    format!("{}:fair-queue", client.redlock().config().key_for(name))
}

/// How many waiters the queue of `name` has now.
fn queued(cluster: &RedisCluster, client: &LockClient, name: &str) -> usize {
    let mut redis = cluster.node(0).connection();
    redis::cmd("ZCARD")
        .arg(queue_key(client, name))
        .query(&mut redis)
        .expect("zcard")
}

/// Waits until the queue of `name` has `n` waiters.
async fn until_queued(cluster: &RedisCluster, client: &LockClient, name: &str, n: usize) {
    assert!(
        eventually_async(PATIENCE, || queued(cluster, client, name) == n).await,
        "{n} waiters queued (found {})",
        queued(cluster, client, name)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_get_the_lock_in_the_order_they_came() {
    let cluster = RedisCluster::start(1);
    let name = "orders";
    let holder = client(&cluster, WAITER_WATCHDOG).await;
    let held = fair(&holder, name).acquire().await.expect("held");
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut waiters = Vec::new();
    let mut clients = Vec::new();
    for i in 0..5 {
        // Two waiting tasks per client for some: each task has its own place.
        let waiter_client = match i % 2 {
            0 => client(&cluster, WAITER_WATCHDOG).await,
            _ => clients.last().cloned().expect("a client"),
        };
        clients.push(waiter_client.clone());
        let lock = fair(&waiter_client, name);
        let order = Arc::clone(&order);
        waiters.push(tokio::spawn(async move {
            let guard = lock.acquire().await.expect("acquired");
            order.lock().expect("order").push(i);
            guard.unlock().await.expect("unlock");
        }));
        until_queued(&cluster, &holder, name, i + 1).await;
    }
    held.unlock().await.expect("release");
    for waiter in waiters {
        tokio::time::timeout(PATIENCE, waiter)
            .await
            .expect("every waiter gets it")
            .expect("task");
    }
    assert_eq!(
        *order.lock().expect("order"),
        [0, 1, 2, 3, 4],
        "first come, first served"
    );
    // The last waiter's grant took the queue's keys with it: nothing waits for a heartbeat to
    // run out (4 s).
    released_everywhere(
        &cluster,
        &format!("{}*", holder.redlock().config().key_for(name)),
        WAITER_WATCHDOG / 6,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_waiter_in_the_middle_of_the_queue_is_dropped_within_its_heartbeat() {
    let cluster = RedisCluster::start(1);
    let name = "payouts";
    let holder = client(&cluster, WAITER_WATCHDOG).await;
    let held = fair(&holder, name).acquire().await.expect("held");
    let first = client(&cluster, WAITER_WATCHDOG).await;
    let first_waits = tokio::spawn({
        let lock = fair(&first, name);
        async move { lock.acquire().await }
    });
    until_queued(&cluster, &holder, name, 1).await;
    // The middle waiter is a process, killed while it waits: it never withdraws. Its heartbeat
    // (a third of its 3 s lease, at least four node timeouts: 1 s) runs out on the server.
    let crashed = HolderProcess::start(
        env!("CARGO_BIN_EXE_holder"),
        &format!("fair:{name}"),
        WATCHDOG,
        &cluster.urls(),
    );
    until_queued(&cluster, &holder, name, 2).await;
    let last = client(&cluster, WAITER_WATCHDOG).await;
    let last_waits = tokio::spawn({
        let lock = fair(&last, name);
        async move { lock.acquire().await }
    });
    until_queued(&cluster, &holder, name, 3).await;
    crashed.kill();
    held.unlock().await.expect("release");
    let first_holds = tokio::time::timeout(PATIENCE, first_waits)
        .await
        .expect("the first waiter gets it")
        .expect("task")
        .expect("acquire");
    assert!(
        !last_waits.is_finished(),
        "the last waiter comes after the first"
    );
    first_holds.unlock().await.expect("release");
    // The dead waiter stood before the last one: it is dropped within its heartbeat, and the
    // last waiter gets the lock without waiting for anything else.
    let last_holds = tokio::time::timeout(PATIENCE, last_waits)
        .await
        .expect("the last waiter gets it past the dead one")
        .expect("task")
        .expect("acquire");
    assert_eq!(
        queued(&cluster, &holder, name),
        0,
        "the dead waiter is gone"
    );
    last_holds.unlock().await.expect("release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_that_gives_up_or_is_dropped_leaves_the_queue() {
    let cluster = RedisCluster::start(1);
    let name = "refunds";
    let holder = client(&cluster, WAITER_WATCHDOG).await;
    let held = fair(&holder, name).acquire().await.expect("held");
    // A heartbeat (40 s) longer than the test's patience: only the withdrawal empties the
    // queue in time, never the heartbeat running out.
    let waiter = client(&cluster, Duration::from_secs(120)).await;
    let lock = fair(&waiter, name);
    assert!(
        !lock
            .try_lock(Duration::from_millis(300), None)
            .await
            .expect("try_lock"),
        "held throughout"
    );
    until_queued(&cluster, &holder, name, 0).await;
    let dropped = tokio::spawn({
        let lock = lock.clone();
        async move { lock.acquire().await }
    });
    until_queued(&cluster, &holder, name, 1).await;
    dropped.abort();
    until_queued(&cluster, &holder, name, 0).await;
    held.unlock().await.expect("release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_waiter_is_first_until_its_heartbeat_stops() {
    let cluster = RedisCluster::start(1);
    let name = "exports";
    let holder = client(&cluster, WAITER_WATCHDOG).await;
    let held = fair(&holder, name).acquire().await.expect("held");
    let waiter = HolderProcess::start(
        env!("CARGO_BIN_EXE_holder"),
        &format!("fair:{name}"),
        WAITER_WATCHDOG,
        &cluster.urls(),
    );
    until_queued(&cluster, &holder, name, 1).await;
    // Stopped, the waiter stops looking: its heartbeat (4 s) runs out and the queue drops it.
    // Until then it is first, free lock or not.
    let other = client(&cluster, WAITER_WATCHDOG).await;
    let lock = fair(&other, name);
    waiter.stop();
    held.unlock().await.expect("release");
    assert!(
        !lock.try_lock(Duration::ZERO, None).await.expect("try_lock"),
        "the waiter is first while its heartbeat lasts"
    );
    assert!(
        lock.try_lock(PATIENCE, None).await.expect("try_lock"),
        "the stopped waiter's heartbeat ran out"
    );
    assert_eq!(queued(&cluster, &holder, name), 0);
    // Resumed, it queues again behind the holder, and gets it after.
    waiter.resume();
    until_queued(&cluster, &holder, name, 1).await;
    lock.unlock().await.expect("release");
    assert!(
        waiter.wait_acquired(PATIENCE).is_some(),
        "the resumed waiter gets it next"
    );
    waiter.kill();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_several_masters_a_fair_lock_is_refused_before_anything_is_sent() {
    crate::refused_on_three_masters(|client| client.get_fair_lock("queue")).await;
}
