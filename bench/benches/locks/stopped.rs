//! Stopped nodes: 5 nodes, 2 of them SIGSTOPped (they accept bytes and never answer). Every
//! request to them lasts the per-node timeout, so lock latency must track it.

use std::time::{Duration, Instant};

use redlock_testkit::RedisCluster;
use tokio::runtime::Runtime;

use crate::locker::{within, Locker};
use crate::mode::Sizes;
use crate::ours::Ours;
use crate::quorum_down::RSLOCK_RESPONSE_TIMEOUT;
use crate::results::Results;
use crate::stats::{add_percentiles, micros, millis, quantile, Metrics};
use crate::theirs::Rslock;

pub(crate) const WORKLOAD: &str = "stopped-nodes";

/// The per-node timeouts ours is run with.
const OUR_TIMEOUTS: [Duration; 2] = [Duration::from_millis(50), Duration::from_millis(100)];

pub(crate) fn run_all(runtime: &Runtime, sizes: &Sizes, results: &mut Results) {
    for run in 0..sizes.runs {
        if let Err(err) = one_run(runtime, sizes, run, results) {
            results.problem(format!("{WORKLOAD} run {run}: {err}"));
        }
    }
}

fn one_run(
    runtime: &Runtime,
    sizes: &Sizes,
    run: usize,
    results: &mut Results,
) -> Result<(), String> {
    let cluster = RedisCluster::try_start(5).map_err(|e| e.to_string())?;
    let urls = cluster.urls();
    let mut contenders: Vec<(String, Locker, Duration)> = Vec::new();
    for timeout in OUR_TIMEOUTS {
        let ours = runtime.block_on(Ours::connect(&urls, None, |b| b.node_timeout(timeout)))?;
        let label = format!("ours-5, node timeout {} ms", timeout.as_millis());
        contenders.push((label, Locker::Ours(ours), timeout));
    }
    contenders.push((
        "rslock-5".to_owned(),
        Locker::Rslock(Rslock::new(&urls, false)),
        RSLOCK_RESPONSE_TIMEOUT,
    ));
    for (label, locker, _) in &contenders {
        let key = format!("bench:st:{run}:warm");
        if let Err(err) = runtime.block_on(pairs(locker, &key, sizes.warm_up.min(20), sizes)) {
            return Err(format!("{label}: warm-up failed: {err}"));
        }
    }

    cluster.stop(3);
    cluster.stop(4);
    for (label, locker, timeout) in &contenders {
        let key = format!("bench:st:{run}:{label}");
        match runtime.block_on(pairs(locker, &key, sizes.stopped_pairs, sizes)) {
            Ok(outcome) => results.record(WORKLOAD, label.clone(), run, outcome.metrics(*timeout)),
            Err(err) => results.problem(format!("{WORKLOAD} {label}: {err}")),
        }
    }
    cluster.resume(3);
    cluster.resume(4);
    for (_, locker, _) in &contenders {
        runtime.block_on(locker.close());
    }
    Ok(())
}

struct Outcome {
    locks: Vec<Duration>,
    unlocks: Vec<Duration>,
    pairs: Vec<Duration>,
}

impl Outcome {
    fn metrics(&self, node_timeout: Duration) -> Metrics {
        let mut metrics = Metrics::new();
        add_percentiles(&mut metrics, "lock", &self.locks);
        add_percentiles(&mut metrics, "unlock", &self.unlocks);
        add_percentiles(&mut metrics, "pair", &self.pairs);
        metrics.insert("node_timeout_ms".into(), millis(node_timeout));
        let mut sorted = self.pairs.clone();
        sorted.sort_unstable();
        metrics.insert(
            "pair_p50_per_node_timeout".into(),
            micros(quantile(&sorted, 0.5)) / micros(node_timeout),
        );
        metrics
    }
}

/// `count` acquire + unlock pairs, in a task; the first error ends them.
async fn pairs(locker: &Locker, key: &str, count: usize, sizes: &Sizes) -> Result<Outcome, String> {
    let (locker, key, limit) = (locker.clone(), key.to_owned(), sizes.op_timeout);
    let task = tokio::spawn(async move {
        let mut outcome = Outcome {
            locks: Vec::new(),
            unlocks: Vec::new(),
            pairs: Vec::new(),
        };
        for _ in 0..count {
            let started = Instant::now();
            let handle = within(limit, locker.acquire(&key)).await?;
            let locked = Instant::now();
            within(limit, locker.unlock(handle)).await?;
            outcome.locks.push(locked - started);
            outcome.unlocks.push(locked.elapsed());
            outcome.pairs.push(started.elapsed());
        }
        Ok(outcome)
    });
    task.await.map_err(|e| e.to_string())?
}
