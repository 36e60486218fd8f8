//! One client's tasks that want the same lock take turns in the order they asked, and only the
//! task whose turn it is asks the nodes: a hand-over between them costs one attempt. Read on
//! the server (`MONITOR`), with the `redlock_waiters` gauge telling when a task is in line.
//!
//! This binary holds one test: the gauge is the process's, and another test's waiters would
//! move it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use redlock_testkit::{eventually_async, Monitor, RedisCluster};
use redlock_tests::client_with_timeouts;
use redlock_tests::script_calls::{self, is_new_attempt, is_release};

/// Long beside any stall of a busy machine: no attempt times out, so every attempt counted is
/// one the client chose to make.
const NODE_TIMEOUT: Duration = Duration::from_secs(2);
/// The watchdog lease of the library's default configuration.
const DEFAULT_LEASE: Duration = Duration::from_secs(30);
const KEY: &str = "redlock:line";
const TASKS: usize = 6;

/// The `redlock_waiters` gauge, as the recorder saw it move.
struct Waiters {
    snapshotter: Snapshotter,
    value: f64,
}

impl Waiters {
    fn now(&mut self) -> f64 {
        for (key, _, _, value) in self.snapshotter.snapshot().into_vec() {
            if let (true, DebugValue::Gauge(delta)) = (key.key().name() == "redlock_waiters", value)
            {
                self.value += delta.0;
            }
        }
        self.value
    }
}

/// The lock's new holds' attempts and releases that `monitor` recorded.
fn calls(monitor: &Monitor) -> (usize, usize) {
    let commands = script_calls::on(monitor, KEY);
    let count =
        |kind: fn(&script_calls::Command) -> bool| commands.iter().filter(|c| kind(c)).count();
    (count(is_new_attempt), count(is_release))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_of_one_client_take_turns_in_order_and_each_hand_over_costs_one_attempt() {
    let recorder = DebuggingRecorder::new();
    let mut waiters = Waiters {
        snapshotter: recorder.snapshotter(),
        value: 0.0,
    };
    recorder
        .install()
        .expect("the only recorder of this binary");

    let cluster = RedisCluster::start(3);
    let client = client_with_timeouts(&cluster, DEFAULT_LEASE, NODE_TIMEOUT).await;
    let monitor = Monitor::start(cluster.node(0).port()).expect("MONITOR");
    let holder = client.get_lock("line");
    holder.lock().await.expect("the first hold");

    let order = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for task in 0..TASKS {
        let lock = client.get_lock("line");
        let order = Arc::clone(&order);
        tasks.push(tokio::spawn(async move {
            lock.lock().await.expect("its turn");
            order.lock().expect("order").push(task);
            lock.unlock().await.expect("released");
        }));
        // In line before the next one asks.
        assert!(
            eventually_async(Duration::from_secs(10), || waiters.now()
                == (task + 1) as f64)
            .await,
            "task {task} never joined the line: {} waiting",
            waiters.now()
        );
    }
    // Another task that will not wait is told at once that the lock is taken, without asking
    // the nodes.
    let lock = client.get_lock("line");
    let tried = tokio::spawn(async move { lock.try_lock(Duration::ZERO, None).await })
        .await
        .expect("task");
    assert!(!tried.expect("try_lock"), "the lock is taken here");

    holder.unlock().await.expect("released");
    for task in tasks {
        task.await.expect("every task gets its turn");
    }
    assert_eq!(
        *order.lock().expect("order"),
        (0..TASKS).collect::<Vec<_>>(),
        "first come, first served"
    );
    // Every release is recorded once the last one is: what came before it on this node is in.
    assert!(
        eventually_async(Duration::from_secs(10), || calls(&monitor).1 == TASKS + 1).await,
        "the node ran {:?} attempts and releases",
        calls(&monitor)
    );
    assert_eq!(
        calls(&monitor).0,
        TASKS + 1,
        "one attempt per hold: nobody asked the node out of turn"
    );
    assert_eq!(waiters.now(), 0.0);
    client.shutdown().await;
}
