//! Mutual exclusion of `RLock` on real servers: many clients and tasks increment one plain Redis
//! counter with a non-atomic GET, pause, SET under one lock, and no update is lost.
//!
//! The counter lives on a separate "data" server, never on the lock nodes, so killing lock nodes
//! cannot touch it. Two checks guard the property: the final count (a lost update makes it
//! smaller) and an in-process overlap detector (a flag set on entry and cleared on exit). The
//! same workload without the lock runs every time and must be caught by both.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use redlock_reentrant::LockClient;
use redlock_testkit::{RedisCluster, RedisServer};
use redlock_tests::released_everywhere;

/// Lock clients (each its own `LockClient`, as separate processes would be).
const CLIENTS: usize = 3;
/// Concurrent tasks per client.
const TASKS: usize = 4;
/// Critical sections per task.
const SECTIONS: usize = 25;
/// The pause between GET and SET that widens the race window.
const RACE_WINDOW: Duration = Duration::from_millis(1);
const LOCK_NAME: &str = "exclusion";
/// The watchdog lease of the library's default configuration, which the lock clients use.
const LEASE: Duration = Duration::from_secs(30);
const COUNTER: &str = "exclusion:counter";

/// What the critical sections saw.
#[derive(Debug, Default)]
struct Detector {
    /// Set while some task is inside the critical section.
    inside: AtomicBool,
    /// How often a task found another one inside, on entry or on exit.
    overlaps: AtomicUsize,
}

/// One critical section: a non-atomic increment of the data counter, with the overlap check
/// around it.
async fn increment(data: &mut MultiplexedConnection, detector: &Detector) {
    if detector.inside.swap(true, Ordering::SeqCst) {
        detector.overlaps.fetch_add(1, Ordering::SeqCst);
    }
    let value: Option<u64> = redis::cmd("GET")
        .arg(COUNTER)
        .query_async(data)
        .await
        .expect("GET on the data server");
    tokio::time::sleep(RACE_WINDOW).await;
    redis::cmd("SET")
        .arg(COUNTER)
        .arg(value.unwrap_or(0) + 1)
        .exec_async(data)
        .await
        .expect("SET on the data server");
    if !detector.inside.swap(false, Ordering::SeqCst) {
        // Someone else left meanwhile: they were inside with us.
        detector.overlaps.fetch_add(1, Ordering::SeqCst);
    }
}

async fn data_connection(data: &RedisServer) -> MultiplexedConnection {
    data.client()
        .get_multiplexed_async_connection()
        .await
        .expect("connect to the data server")
}

async fn read_counter(data: &RedisServer) -> u64 {
    let value: Option<u64> = redis::cmd("GET")
        .arg(COUNTER)
        .query_async(&mut data_connection(data).await)
        .await
        .expect("GET the final count");
    value.unwrap_or(0)
}

/// The final count and the overlaps seen by a workload.
#[derive(Debug)]
struct Tally {
    count: u64,
    overlaps: usize,
    took: Duration,
}

const EXPECTED: u64 = (CLIENTS * TASKS * SECTIONS) as u64;

/// Runs `CLIENTS × TASKS × SECTIONS` increments on `data`, each under the one lock of the lock
/// nodes `lock_nodes` if given, with no lock at all otherwise.
async fn workload(lock_nodes: Option<Vec<String>>, data: &RedisServer) -> Tally {
    let detector = Arc::new(Detector::default());
    let mut clients = Vec::new();
    let mut tasks = Vec::new();
    let started = Instant::now();
    for _ in 0..CLIENTS {
        let client = match &lock_nodes {
            Some(urls) => Some(
                LockClient::builder()
                    .nodes(urls.iter().cloned())
                    .build()
                    .await
                    .expect("lock client"),
            ),
            None => None,
        };
        for _ in 0..TASKS {
            let lock = client.as_ref().map(|client| client.get_lock(LOCK_NAME));
            let detector = Arc::clone(&detector);
            let mut con = data_connection(data).await;
            tasks.push(tokio::spawn(async move {
                for _ in 0..SECTIONS {
                    match &lock {
                        Some(lock) => {
                            lock.lock().await.expect("lock");
                            increment(&mut con, &detector).await;
                            lock.unlock().await.expect("unlock our own hold");
                        }
                        None => increment(&mut con, &detector).await,
                    }
                }
            }));
        }
        clients.extend(client);
    }
    for task in tasks {
        task.await.expect("worker task");
    }
    let took = started.elapsed();
    if let Some(client) = clients.first() {
        let lock = client.get_lock(LOCK_NAME);
        assert!(
            !lock.is_locked().await.expect("is_locked"),
            "every hold was released"
        );
    }
    for client in clients {
        client.shutdown().await;
    }
    Tally {
        count: read_counter(data).await,
        overlaps: detector.overlaps.load(Ordering::SeqCst),
        took,
    }
}

/// The locked workload on `nodes` masters with `killed` of them killed first: no update lost,
/// no overlap seen, no lock key left on the living nodes.
async fn exclusion_holds(nodes: usize, killed: &[usize]) {
    let cluster = RedisCluster::start(nodes);
    let data = RedisServer::start();
    for &node in killed {
        cluster.kill(node);
    }
    let tally = workload(Some(cluster.urls()), &data).await;
    eprintln!(
        "{nodes} masters, {} killed: {} of {EXPECTED} increments in {:?}",
        killed.len(),
        tally.count,
        tally.took
    );
    assert_eq!(
        tally.overlaps, 0,
        "two tasks were inside the critical section at once"
    );
    assert_eq!(tally.count, EXPECTED, "an update was lost under the lock");
    // The last release was decided by a majority; the other living nodes follow.
    released_everywhere(&cluster, &format!("redlock:{LOCK_NAME}"), LEASE / 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_master_never_loses_an_update() {
    exclusion_holds(1, &[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_masters_never_lose_an_update() {
    exclusion_holds(5, &[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_masters_with_two_killed_never_lose_an_update() {
    exclusion_holds(5, &[1, 3]).await;
}

/// The deliberately broken variant: the same workload without the lock. Both checks must catch
/// it, or they could not catch a broken lock either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_checks_catch_the_workload_without_the_lock() {
    let data = RedisServer::start();
    let tally = workload(None, &data).await;
    eprintln!(
        "without the lock: {} of {EXPECTED} increments, {} overlaps, in {:?}",
        tally.count, tally.overlaps, tally.took
    );
    assert!(
        tally.count < EXPECTED,
        "the counter check missed the lost updates: {} of {EXPECTED}",
        tally.count
    );
    assert!(tally.overlaps > 0, "the overlap detector saw nothing");
}
