//! Every metric docs/observability.md documents moves when what it counts happens, read through
//! `metrics-util`'s debugging recorder (installed once for this test binary: it holds one
//! test).

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use redlock_reentrant::{Error, LockClient, LostReason, RedlockConfig, ReplicaAcks, RetryPolicy};
use redlock_testkit::{eventually_async, RedisCluster};
use redlock_tests::{client_with_timeouts, rounds_pass, spawn_waiter, WATCHDOG};

/// The per-node timeout of the clients here: a twelfth of the lease, so that a loaded machine
/// adds no timeout, no missed quorum and no lost hold to the exact counts asserted below (the
/// default, 1 % of the lease, would be 30 ms). A paused master still times out.
const NODE_TIMEOUT: Duration = Duration::from_millis(250);

/// What was recorded so far, accumulated across snapshots (a snapshot resets what it reads).
struct Recorded {
    snapshotter: Snapshotter,
    /// Counter totals and gauge values by metric name and labels (`name{k=v,...}`).
    values: HashMap<String, f64>,
    /// Histogram sample counts by metric name and labels.
    samples: HashMap<String, usize>,
    /// The kind each metric was recorded as, by name: `counter`, `gauge` or `histogram`.
    kinds: HashMap<String, &'static str>,
    /// Metrics (name and labels) seen moving: a counter increased, a gauge changed, a histogram
    /// sampled. A metric registered and never moved shows in a snapshot all the same, at zero.
    moved: HashSet<String>,
}

impl Recorded {
    fn refresh(&mut self) {
        for (key, _, _, value) in self.snapshotter.snapshot().into_vec() {
            let key = key.key();
            let mut labels: Vec<String> = key
                .labels()
                .map(|label| format!("{}={}", label.key(), label.value()))
                .collect();
            labels.sort();
            let id = format!("{}{{{}}}", key.name(), labels.join(","));
            let (kind, moved) = match value {
                DebugValue::Counter(n) => {
                    *self.values.entry(id.clone()).or_default() += n as f64;
                    ("counter", n > 0)
                }
                // Read and reset by each snapshot: the change since the last one.
                DebugValue::Gauge(delta) => {
                    *self.values.entry(id.clone()).or_default() += delta.0;
                    ("gauge", delta.0 != 0.0)
                }
                DebugValue::Histogram(values) => {
                    *self.samples.entry(id.clone()).or_default() += values.len();
                    ("histogram", !values.is_empty())
                }
            };
            self.kinds.insert(key.name().to_owned(), kind);
            if moved {
                self.moved.insert(id);
            }
        }
    }

    /// The total of `name` over label sets that contain every `labels` pair.
    fn value(&mut self, name: &str, labels: &[&str]) -> f64 {
        self.refresh();
        self.values
            .iter()
            .filter(|(id, _)| matches(id, name, labels))
            .map(|(_, value)| value)
            .sum()
    }

    /// Waits until gauge `name` reads `value`, for up to 10 s: a gauge moves in the task that
    /// owns what it counts, a moment after what the test can see of it (a waiter counts itself
    /// once its subscription is in place).
    async fn gauge_reaches(&mut self, name: &str, value: f64) -> bool {
        eventually_async(Duration::from_secs(10), || self.value(name, &[]) == value).await
    }

    fn histogram_samples(&mut self, name: &str, labels: &[&str]) -> usize {
        self.refresh();
        self.samples
            .iter()
            .filter(|(id, _)| matches(id, name, labels))
            .map(|(_, count)| count)
            .sum()
    }
}

fn matches(id: &str, name: &str, labels: &[&str]) -> bool {
    id.strip_prefix(name).is_some_and(|rest| {
        rest.starts_with('{') && labels.iter().all(|label| rest.contains(label))
    })
}

/// The metric names of docs/observability.md's table, with their documented kind.
fn documented_metrics() -> Vec<(String, String)> {
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/observability.md"
    ))
    .expect("docs/observability.md");
    doc.lines()
        .filter_map(|line| line.strip_prefix("| `redlock_"))
        .filter_map(|rest| {
            let (name, rest) = rest.split_once('`')?;
            let kind = rest.split('|').nth(1)?.trim();
            Some((format!("redlock_{name}"), kind.to_owned()))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_documented_metric_moves_when_what_it_counts_happens() {
    let recorder = DebuggingRecorder::new();
    let mut recorded = Recorded {
        snapshotter: recorder.snapshotter(),
        values: HashMap::new(),
        samples: HashMap::new(),
        kinds: HashMap::new(),
        moved: HashSet::new(),
    };
    recorder
        .install()
        .expect("the only recorder of this test binary");
    let cluster = RedisCluster::start(3);
    let holder = client_with_timeouts(&cluster, WATCHDOG, NODE_TIMEOUT).await;
    let rival = client_with_timeouts(&cluster, WATCHDOG, NODE_TIMEOUT).await;

    // Acquired, renewed, contended, waited for, released.
    let lock = holder.get_lock("metrics:held");
    lock.lock().await.expect("lock");
    rounds_pass(holder.watchdog(), 2).await;
    assert!(recorded.value("redlock_renewals_total", &[]) >= 1.0);
    assert!(!rival
        .get_lock("metrics:held")
        .try_lock(Duration::ZERO, None)
        .await
        .expect("asks"));
    assert_eq!(
        recorded.value("redlock_acquisitions_total", &["outcome=contended"]),
        1.0
    );
    let waiter = spawn_waiter(rival.get_lock("metrics:held"), Duration::from_secs(30));
    assert!(
        eventually_async(Duration::from_secs(10), || rival.watched_channels() == 1).await,
        "the waiter subscribes"
    );
    assert!(
        recorded.gauge_reaches("redlock_waiters", 1.0).await,
        "one task waits: {}",
        recorded.value("redlock_waiters", &[])
    );
    assert!(
        recorded.gauge_reaches("redlock_subscriptions", 1.0).await,
        "one channel: {}",
        recorded.value("redlock_subscriptions", &[])
    );
    lock.unlock().await.expect("unlock");
    assert!(
        waiter.await.expect("task").0.expect("try_lock"),
        "the waiter took it"
    );
    assert_eq!(
        recorded.value("redlock_waiters", &[]),
        0.0,
        "nobody waits any more"
    );
    assert!(
        eventually_async(Duration::from_secs(10), || rival.watched_channels() == 0).await,
        "the subscription is dropped"
    );
    assert!(
        recorded.gauge_reaches("redlock_subscriptions", 0.0).await,
        "no channel: {}",
        recorded.value("redlock_subscriptions", &[])
    );
    assert!(
        recorded.histogram_samples("redlock_hold_seconds", &[]) >= 2,
        "two holds ended"
    );
    assert!(recorded.histogram_samples("redlock_wait_seconds", &["outcome=acquired"]) >= 2);

    // A key of another type where the lock would be: an error outcome.
    let key = holder.redlock().config().key_for("metrics:string");
    for node in cluster.nodes() {
        let _: () = redis::cmd("SET")
            .arg(&key)
            .arg("x")
            .query(&mut node.connection())
            .expect("SET");
    }
    assert!(matches!(
        holder.get_lock("metrics:string").lock().await,
        Err(Error::WrongType { .. })
    ));
    assert_eq!(
        recorded.value("redlock_acquisitions_total", &["outcome=error"]),
        1.0
    );

    // Force-unlocked under its holder: lost (not owner), and a nested acquisition then
    // answers that the hold was lost.
    let taken = holder.get_lock("metrics:taken");
    taken.lock().await.expect("lock");
    assert!(rival
        .get_lock("metrics:taken")
        .force_unlock()
        .await
        .expect("force"));
    let signal = taken.lost_signal().expect("held");
    let reason = tokio::time::timeout(WATCHDOG * 2, signal.lost())
        .await
        .expect("the next renewal finds it gone");
    assert_eq!(reason, LostReason::NotOwner);
    assert!(matches!(taken.lock().await, Err(Error::LockLost { .. })));
    assert_eq!(
        recorded.value("redlock_acquisitions_total", &["outcome=lost"]),
        1.0
    );
    assert_eq!(
        recorded.value("redlock_lost_total", &["reason=not_owner"]),
        1.0
    );
    while taken.unlock().await.is_ok() {}

    // A fixed lease that runs out.
    let fixed = holder.get_lock("metrics:fixed");
    fixed
        .lock_with_lease(Duration::from_millis(500))
        .await
        .expect("lock");
    let signal = fixed.lost_signal().expect("held");
    assert_eq!(
        tokio::time::timeout(Duration::from_secs(5), signal.lost())
            .await
            .expect("ends"),
        LostReason::LeaseExpired
    );
    assert_eq!(
        recorded.value("redlock_lost_total", &["reason=lease_expired"]),
        1.0
    );

    // Two of three masters paused: renewals fail, the hold is lost, acquisitions find no
    // quorum, and the paused masters time out.
    let quorum = holder.get_lock("metrics:quorum");
    quorum.lock().await.expect("lock");
    cluster.stop(0);
    cluster.stop(1);
    let signal = quorum.lost_signal().expect("held");
    assert_eq!(
        tokio::time::timeout(WATCHDOG * 2, signal.lost())
            .await
            .expect("lost"),
        LostReason::QuorumLost
    );
    let refused = rival
        .get_lock("metrics:elsewhere")
        .try_lock(Duration::ZERO, None)
        .await;
    cluster.resume(0);
    cluster.resume(1);
    assert!(
        matches!(refused, Err(Error::NoQuorum { .. })),
        "{refused:?}"
    );
    assert!(recorded.value("redlock_renewal_failures_total", &[]) >= 1.0);
    assert_eq!(
        recorded.value("redlock_lost_total", &["reason=quorum_lost"]),
        1.0
    );
    assert_eq!(
        recorded.value("redlock_acquisitions_total", &["outcome=no_quorum"]),
        1.0
    );
    let paused = format!("node={}", cluster.node(0).url());
    assert!(recorded.value("redlock_node_errors_total", &["kind=timeout", &paused]) >= 1.0);
    while quorum.unlock().await.is_ok() {}

    // A killed master: its broken connection, then refused connections.
    cluster.kill(2);
    let killed = format!("node={}", cluster.node(2).url());
    for _ in 0..2 {
        let lock = holder.get_lock("metrics:killed");
        if lock.lock().await.is_ok() {
            lock.unlock().await.expect("unlock");
        }
    }
    assert!(
        recorded.value("redlock_node_errors_total", &["kind=command", &killed])
            + recorded.value("redlock_node_errors_total", &["kind=connect", &killed])
            >= 1.0
    );

    // Replica acknowledgements asked of masters without replicas: never confirmed.
    let unreplicated = LockClient::builder()
        .redlock_config(RedlockConfig {
            nodes: vec![cluster.node(0).url()],
            retry: RetryPolicy::none(),
            replica_acks: Some(ReplicaAcks {
                replicas: 1,
                timeout: Duration::from_millis(10),
            }),
            ..RedlockConfig::default()
        })
        .build()
        .await
        .expect("client");
    assert!(unreplicated.get_lock("metrics:acks").lock().await.is_err());
    assert!(recorded.value("redlock_node_errors_total", &["kind=not_replicated"]) >= 1.0);

    // The client shuts down under a hold.
    let kept = holder.get_lock("metrics:kept");
    kept.lock().await.expect("lock");
    holder.shutdown().await;
    assert_eq!(
        recorded.value("redlock_lost_total", &["reason=shutdown"]),
        1.0
    );

    // Every documented metric was seen moving.
    let documented = documented_metrics();
    assert_eq!(
        documented.len(),
        9,
        "the table of docs/observability.md: {documented:?}"
    );
    recorded.refresh();
    for (name, kind) in documented {
        assert_eq!(
            recorded.kinds.get(&name).copied(),
            Some(kind.as_str()),
            "{name} is recorded as documented"
        );
        let moved: Vec<&String> = recorded
            .moved
            .iter()
            .filter(|id| matches(id, &name, &[]))
            .collect();
        assert!(!moved.is_empty(), "{name} never moved");
        match kind.as_str() {
            "counter" => assert!(recorded.value(&name, &[]) > 0.0, "{name} counted nothing"),
            "histogram" => assert!(recorded.histogram_samples(&name, &[]) > 0),
            // Moved up while a task waited, and back down since: nothing waits now.
            _ => assert_eq!(recorded.value(&name, &[]), 0.0, "{name} is back to zero"),
        }
    }
    rival.shutdown().await;
    unreplicated.shutdown().await;
}
