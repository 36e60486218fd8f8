//! Contended: many tasks on one key. Each waits for the lock, checks that nobody else is
//! inside, yields once inside, releases. Hand-over is the time from one holder's release to a
//! different task's acquisition, on one monotonic clock.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use redlock_reentrant::CancellationToken;
use tokio::runtime::Runtime;

use crate::lab::Lab;
use crate::locker::{within, Locker, Spec};
use crate::mode::Sizes;
use crate::redis_stats;
use crate::results::Results;
use crate::stats::{add_percentiles, micros, millis, Metrics};

pub(crate) const WORKLOAD: &str = "contended";
/// The plot of hand-over latencies.
pub(crate) const HANDOVER: &str = "handover";

/// The prefix of the per-command figures (`cmd.evalsha`: EVALSHA calls per acquisition).
pub(crate) const COMMAND: &str = "cmd.";

/// How long spawned clean-ups may take to land before the command counters are read.
const SETTLE: Duration = Duration::from_millis(50);

pub(crate) fn run_all(runtime: &Runtime, lab: &Lab, sizes: &Sizes, results: &mut Results) {
    for run in 0..sizes.runs {
        for (spec, locker) in &lab.lockers {
            let cluster = lab.cluster(*spec);
            if let Err(err) = redis_stats::reset(cluster, spec.nodes) {
                results.problem(format!("{WORKLOAD} {spec}: {err}"));
            }
            let key = format!("bench:con:{spec}:{run}");
            let outcome = runtime.block_on(async {
                let outcome = contend(locker, &key, sizes.contended_tasks, sizes).await;
                tokio::time::sleep(SETTLE).await;
                outcome
            });
            let mut metrics = outcome.metrics();
            match redis_stats::calls(cluster, spec.nodes) {
                Ok(calls) => {
                    let counted = redis_stats::count(&calls, spec.kind);
                    let acquisitions = outcome.acquisitions().max(1) as f64;
                    metrics.insert("cmds_per_acq".into(), counted.all as f64 / acquisitions);
                    metrics.insert(
                        "requests_per_acq".into(),
                        counted.requests as f64 / acquisitions,
                    );
                    for (command, n) in calls {
                        metrics.insert(format!("{COMMAND}{command}"), n as f64 / acquisitions);
                    }
                }
                Err(err) => results.problem(format!("{WORKLOAD} {spec}: {err}")),
            }
            check(&outcome, *spec, run, results);
            results.add_samples(HANDOVER, &spec.to_string(), &outcome.handovers);
            results.record(WORKLOAD, spec.to_string(), run, metrics);
        }
    }
}

/// Overlaps and errors are problems.
fn check(outcome: &Outcome, spec: Spec, run: usize, results: &mut Results) {
    if outcome.overlaps > 0 {
        results.problem(format!(
            "{WORKLOAD} {spec} run {run}: {} overlapping holders",
            outcome.overlaps
        ));
    }
    for err in outcome.errors.iter().take(3) {
        results.problem(format!("{WORKLOAD} {spec} run {run}: {err}"));
    }
}

/// What one contended run saw.
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    pub(crate) per_task: Vec<u64>,
    pub(crate) waits: Vec<Duration>,
    /// The longest wait still unfinished when the run stopped.
    pub(crate) unfinished_wait: Duration,
    pub(crate) handovers: Vec<Duration>,
    pub(crate) overlaps: u64,
    pub(crate) errors: Vec<String>,
    pub(crate) elapsed: Duration,
}

impl Outcome {
    pub(crate) fn acquisitions(&self) -> u64 {
        self.per_task.iter().sum()
    }

    pub(crate) fn metrics(&self) -> Metrics {
        let mut metrics = Metrics::new();
        let acquisitions = self.acquisitions();
        metrics.insert(
            "acq_per_s".into(),
            acquisitions as f64 / self.elapsed.as_secs_f64(),
        );
        add_percentiles(&mut metrics, "wait", &self.waits);
        let longest = self.waits.iter().max().copied().unwrap_or_default();
        metrics.insert(
            "wait_max_incl_unfinished_ms".into(),
            millis(longest.max(self.unfinished_wait)),
        );
        add_percentiles(&mut metrics, "handover", &self.handovers);
        let min = self.per_task.iter().min().copied().unwrap_or(0);
        let max = self.per_task.iter().max().copied().unwrap_or(0);
        metrics.insert("task_min".into(), min as f64);
        metrics.insert("task_max".into(), max as f64);
        metrics.insert(
            "fairness".into(),
            if max == 0 {
                0.0
            } else {
                min as f64 / max as f64
            },
        );
        metrics.insert("overlaps".into(), self.overlaps as f64);
        metrics.insert("errors".into(), self.errors.len() as f64);
        metrics.insert("handovers".into(), self.handovers.len() as f64);
        metrics.insert("unfinished_wait_us".into(), micros(self.unfinished_wait));
        metrics
    }
}

/// The shared view of the run: who is inside, and the log of acquisitions and releases.
#[derive(Default)]
struct Shared {
    inside: AtomicBool,
    overlaps: AtomicU64,
    log: Mutex<Log>,
}

#[derive(Default)]
struct Log {
    per_task: Vec<u64>,
    waits: Vec<Duration>,
    handovers: Vec<Duration>,
    unfinished_wait: Duration,
    /// The last release: which task, when.
    last_release: Option<(usize, Instant)>,
    errors: Vec<String>,
}

impl Shared {
    fn log(&self) -> std::sync::MutexGuard<'_, Log> {
        self.log.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn acquired(&self, task: usize, asked: Instant, acquired: Instant) {
        let mut log = self.log();
        log.per_task[task] += 1;
        log.waits.push(acquired - asked);
        if let Some((releaser, released)) = log.last_release {
            if releaser != task {
                log.handovers
                    .push(acquired.saturating_duration_since(released));
            }
        }
    }
}

/// `tasks` tasks contend for `key` during `sizes.contended_for`.
pub(crate) async fn contend(locker: &Locker, key: &str, tasks: usize, sizes: &Sizes) -> Outcome {
    let shared = Arc::new(Shared::default());
    shared.log().per_task = vec![0; tasks];
    let stop = CancellationToken::new();
    let started = Instant::now();
    let handles: Vec<_> = (0..tasks)
        .map(|task| {
            let (locker, key, shared, stop) = (
                locker.clone(),
                key.to_owned(),
                Arc::clone(&shared),
                stop.clone(),
            );
            let limit = sizes.op_timeout;
            tokio::spawn(async move { holder(task, &locker, &key, &shared, &stop, limit).await })
        })
        .collect();
    tokio::time::sleep(sizes.contended_for).await;
    stop.cancel();
    let elapsed = started.elapsed();
    for handle in handles {
        if let Err(err) = handle.await {
            shared.log().errors.push(err.to_string());
        }
    }
    let mut log = std::mem::take(&mut *shared.log());
    Outcome {
        per_task: log.per_task,
        waits: log.waits,
        unfinished_wait: log.unfinished_wait,
        handovers: std::mem::take(&mut log.handovers),
        overlaps: shared.overlaps.load(Ordering::SeqCst),
        errors: log.errors,
        elapsed,
    }
}

async fn holder(
    task: usize,
    locker: &Locker,
    key: &str,
    shared: &Shared,
    stop: &CancellationToken,
    limit: Duration,
) {
    while !stop.is_cancelled() {
        let asked = Instant::now();
        let handle = tokio::select! {
            biased;
            () = stop.cancelled() => {
                let mut log = shared.log();
                log.unfinished_wait = log.unfinished_wait.max(asked.elapsed());
                return;
            }
            taken = within(limit, locker.lock(key)) => match taken {
                Ok(handle) => handle,
                Err(err) => {
                    shared.log().errors.push(err);
                    return;
                }
            },
        };
        let acquired = Instant::now();
        if shared.inside.swap(true, Ordering::SeqCst) {
            shared.overlaps.fetch_add(1, Ordering::SeqCst);
        }
        shared.acquired(task, asked, acquired);
        // Work that awaits: another task runs meanwhile, and would be inside too without the lock.
        tokio::task::yield_now().await;
        shared.inside.store(false, Ordering::SeqCst);
        shared.log().last_release = Some((task, Instant::now()));
        if let Err(err) = within(limit, locker.unlock(handle)).await {
            shared.log().errors.push(err);
            return;
        }
    }
}
