//! Stopped minority: 5 masters, healthy, then 1 and then 2 of them SIGSTOPped (they accept
//! bytes and never answer). A majority still answers, so a lock should cost about what it costs
//! healthy: lock + unlock pairs one at a time, and 8 tasks contending for one lock, each phase
//! measured in the same run as the healthy one it is compared with.

use std::time::{Duration, Instant};

use redlock_testkit::RedisCluster;
use tokio::runtime::Runtime;

use crate::contended;
use crate::locker::{within, Locker};
use crate::mode::Sizes;
use crate::ours::Ours;
use crate::quorum_down::RSLOCK_RESPONSE_TIMEOUT;
use crate::results::Results;
use crate::stats::{add_percentiles, micros, quantile, Metrics};
use crate::theirs::Rslock;

pub(crate) const WORKLOAD: &str = "stopped-minority";
/// The contended part: 8 tasks on one lock, healthy and with 1 master stopped.
pub(crate) const CONTENDED: &str = "stopped-minority-contended";

/// Ours runs with this per-node timeout.
pub(crate) const OUR_TIMEOUT: Duration = Duration::from_millis(50);
/// How many tasks contend in the contended part.
pub(crate) const CONTENDING_TASKS: usize = 8;

/// The phases, by how many masters are stopped, and their labels.
pub(crate) const PHASES: [(usize, &str); 3] = [(0, "healthy"), (1, "1 stopped"), (2, "2 stopped")];

/// The label of one implementation in one phase.
pub(crate) fn label(implementation: &str, stopped: usize) -> String {
    let phase = PHASES
        .iter()
        .find(|(n, _)| *n == stopped)
        .map_or("?", |(_, name)| name);
    format!("{implementation}, {phase}")
}

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
    let ours = runtime.block_on(Ours::connect(&urls, None, |b| b.node_timeout(OUR_TIMEOUT)))?;
    let contenders = [
        ("ours-5".to_owned(), Locker::Ours(ours), OUR_TIMEOUT),
        (
            "rslock-5".to_owned(),
            Locker::Rslock(Rslock::new(&urls, false)),
            RSLOCK_RESPONSE_TIMEOUT,
        ),
    ];
    for (name, locker, _) in &contenders {
        let key = format!("bench:st:{run}:warm");
        if let Err(err) = runtime.block_on(pairs(locker, &key, sizes.warm_up.min(50), sizes)) {
            return Err(format!("{name}: warm-up failed: {err}"));
        }
    }

    let mut healthy: Option<Outcome> = None;
    let mut healthy_acq_per_s = f64::NAN;
    for (stopped, _) in PHASES {
        if stopped > 0 {
            cluster.stop(5 - stopped);
        }
        for (name, locker, timeout) in &contenders {
            let ours = name.starts_with("ours");
            let count = if ours {
                sizes.stopped_pairs
            } else {
                sizes.stopped_pairs_rslock
            };
            let key = format!("bench:st:{run}:{name}:{stopped}");
            let label = label(name, stopped);
            match runtime.block_on(pairs(locker, &key, count, sizes)) {
                Ok(outcome) => {
                    let base = if ours { healthy.as_ref() } else { None };
                    results.record(WORKLOAD, &label, run, outcome.metrics(*timeout, base));
                    if ours && stopped == 0 {
                        healthy = Some(outcome);
                    }
                }
                Err(err) => results.problem(format!("{WORKLOAD} {label}: {err}")),
            }
            if ours && stopped <= 1 {
                let key = format!("bench:stc:{run}:{stopped}");
                let outcome =
                    runtime.block_on(contended::contend(locker, &key, CONTENDING_TASKS, sizes));
                for err in outcome.errors.iter().take(3) {
                    results.problem(format!("{CONTENDED} {label}: {err}"));
                }
                if outcome.overlaps > 0 {
                    results.problem(format!(
                        "{CONTENDED} {label}: {} overlaps",
                        outcome.overlaps
                    ));
                }
                let acq_per_s = outcome.acquisitions() as f64 / outcome.elapsed.as_secs_f64();
                let mut metrics = Metrics::new();
                metrics.insert("acq_per_s".into(), acq_per_s);
                metrics.insert("overlaps".into(), outcome.overlaps as f64);
                if stopped == 0 {
                    healthy_acq_per_s = acq_per_s;
                } else {
                    metrics.insert("acq_per_s_x_healthy".into(), acq_per_s / healthy_acq_per_s);
                }
                results.record(CONTENDED, &label, run, metrics);
            }
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
    pairs: Vec<Duration>,
}

impl Outcome {
    fn sorted(&self) -> Vec<Duration> {
        let mut sorted = self.pairs.clone();
        sorted.sort_unstable();
        sorted
    }

    /// The percentiles, and against the same run's healthy phase where there is one.
    fn metrics(&self, node_timeout: Duration, healthy: Option<&Outcome>) -> Metrics {
        let mut metrics = Metrics::new();
        add_percentiles(&mut metrics, "pair", &self.pairs);
        metrics.insert("pairs".into(), self.pairs.len() as f64);
        metrics.insert("node_timeout_ms".into(), micros(node_timeout) / 1e3);
        let sorted = self.sorted();
        if let Some(healthy) = healthy {
            let base = healthy.sorted();
            for (name, q) in [("p50", 0.5), ("p99", 0.99)] {
                metrics.insert(
                    format!("pair_{name}_x_healthy"),
                    micros(quantile(&sorted, q)) / micros(quantile(&base, q)),
                );
            }
        }
        metrics
    }
}

/// Lock + unlock pairs, one at a time in a task, until `count` or the phase's time is up
/// (whichever first: an implementation that waits out every timeout still finishes); the
/// first error ends them.
async fn pairs(locker: &Locker, key: &str, count: usize, sizes: &Sizes) -> Result<Outcome, String> {
    let (locker, key, limit) = (locker.clone(), key.to_owned(), sizes.op_timeout);
    let budget = sizes.stopped_phase_for;
    let task = tokio::spawn(async move {
        let mut outcome = Outcome { pairs: Vec::new() };
        let phase = Instant::now();
        while outcome.pairs.len() < count && phase.elapsed() < budget {
            let started = Instant::now();
            let handle = within(limit, locker.acquire(&key)).await?;
            within(limit, locker.unlock(handle)).await?;
            outcome.pairs.push(started.elapsed());
        }
        Ok(outcome)
    });
    task.await.map_err(|e| e.to_string())?
}
