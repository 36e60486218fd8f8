//! The one-master family on ours-1: the permit semaphore's throughput (tasks taking one of
//! [`PERMITS`] permits, renewed by the watchdog, and releasing it) against the counter floor
//! (one script `INCR`s the counter when it is below the count, 1 ms polling, `DECR` to
//! release: no holder, no lease), and
//! the fair lock's hand-over and longest wait in the contended workload against `RLock`'s.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::runtime::Runtime;

use crate::contended::{self, contend};
use crate::lab::Lab;
use crate::locker::{within, Kind, Locker, Spec};
use crate::mode::Sizes;
use crate::results::Results;
use crate::stats::Metrics;

pub(crate) const WORKLOAD: &str = "family";
/// The semaphore's count.
pub(crate) const PERMITS: u32 = 8;

pub(crate) fn run_all(runtime: &Runtime, lab: &Lab, sizes: &Sizes, results: &mut Results) {
    let ours = lab.lockers.iter().find_map(|(spec, locker)| match locker {
        Locker::Ours(ours) if *spec == Spec::new(Kind::Ours, 1) => Some(ours.clone()),
        _ => None,
    });
    let raw = lab.lockers.iter().find_map(|(spec, locker)| match locker {
        Locker::Raw(raw) if *spec == Spec::floor() => Some(raw.clone()),
        _ => None,
    });
    let (Some(ours), Some(raw)) = (ours, raw) else {
        results.problem(format!("{WORKLOAD}: needs ours-1 and raw-1"));
        return;
    };
    for run in 0..sizes.runs {
        let name = format!("bench:family:{run}");
        let mut metrics = Metrics::new();
        let mut problems = Vec::new();
        let semaphore = match ours.client.get_permit_expirable_semaphore(name.as_str()) {
            Ok(semaphore) => semaphore,
            Err(err) => {
                results.problem(format!("{WORKLOAD}: {err}"));
                return;
            }
        };
        if let Err(err) = runtime.block_on(semaphore.set_permits(PERMITS)) {
            results.problem(format!("{WORKLOAD}: {err}"));
            return;
        }
        let ours_run = runtime.block_on(permits_run(sizes, {
            let semaphore = semaphore.clone();
            move |_| {
                let semaphore = semaphore.clone();
                async move {
                    let permit = semaphore.acquire(1).await.map_err(|e| e.to_string())?;
                    Ok(async move { permit.release().await.map_err(|e| e.to_string()) })
                }
            }
        }));
        let counter = format!("{name}:counter");
        let raw_run = runtime.block_on(permits_run(sizes, {
            let (raw, counter) = (raw.clone(), counter.clone());
            move |_| {
                let (raw, counter) = (raw.clone(), counter.clone());
                async move {
                    raw.counter_acquire(&counter, PERMITS).await?;
                    Ok(async move { raw.counter_release(&counter).await })
                }
            }
        }));
        for (label, outcome) in [("semaphore", &ours_run), ("counter", &raw_run)] {
            metrics.insert(
                format!("{label}_ops_per_s"),
                outcome.pairs as f64 / outcome.elapsed.as_secs_f64(),
            );
            metrics.insert(format!("{label}_over"), outcome.over as f64);
            problems.extend(outcome.errors.iter().take(3).cloned());
            if outcome.over > 0 {
                problems.push(format!(
                    "{label}: {} times more than {PERMITS} inside",
                    outcome.over
                ));
            }
        }
        // The fair lock in the contended workload, beside `RLock`'s figures there.
        let fair = Locker::Ours(ours.fair());
        let key = format!("{name}:fair");
        let contended_run = runtime.block_on(contend(&fair, &key, sizes.contended_tasks, sizes));
        for (name, value) in contended_run.metrics() {
            metrics.insert(format!("fair_{name}"), value);
        }
        results.add_samples(FAIR_HANDOVER, "ours-1-fair", &contended_run.handovers);
        if contended_run.overlaps > 0 {
            problems.push(format!(
                "fair: {} overlapping holders",
                contended_run.overlaps
            ));
        }
        problems.extend(contended_run.errors.iter().take(3).cloned());
        metrics.insert("errors".into(), problems.len() as f64);
        for problem in problems {
            results.problem(format!("{WORKLOAD} run {run}: {problem}"));
        }
        results.record(WORKLOAD, "ours-1".to_owned(), run, metrics);
    }
}

/// The fair lock's hand-over samples (beside the contended workload's).
pub(crate) const FAIR_HANDOVER: &str = contended::HANDOVER;

struct Outcome {
    pairs: u64,
    /// Times a task found more than [`PERMITS`] inside with it.
    over: u64,
    elapsed: Duration,
    errors: Vec<String>,
}

/// `sizes.parallel_tasks` tasks take a permit with `take` (which returns the release), stay
/// inside for a yield, and release, for `sizes.parallel_for`.
async fn permits_run<T, F, R>(sizes: &Sizes, take: T) -> Outcome
where
    T: Fn(usize) -> F + Clone + Send + 'static,
    F: std::future::Future<Output = Result<R, String>> + Send,
    R: std::future::Future<Output = Result<(), String>> + Send,
{
    let started = Instant::now();
    let deadline = started + sizes.parallel_for;
    let inside = Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = (0..sizes.parallel_tasks)
        .map(|task| {
            let (take, inside) = (take.clone(), Arc::clone(&inside));
            let limit = sizes.op_timeout;
            tokio::spawn(async move {
                let (mut pairs, mut over) = (0u64, 0u64);
                while Instant::now() < deadline {
                    let release = match within(limit, take(task)).await {
                        Ok(release) => release,
                        Err(err) => return (pairs, over, Some(err)),
                    };
                    if inside.fetch_add(1, Ordering::SeqCst) + 1 > u64::from(PERMITS) {
                        over += 1;
                    }
                    tokio::task::yield_now().await;
                    inside.fetch_sub(1, Ordering::SeqCst);
                    if let Err(err) = within(limit, release).await {
                        return (pairs, over, Some(err));
                    }
                    pairs += 1;
                }
                (pairs, over, None)
            })
        })
        .collect();
    let mut outcome = Outcome {
        pairs: 0,
        over: 0,
        elapsed: Duration::ZERO,
        errors: Vec::new(),
    };
    for task in tasks {
        match task.await {
            Ok((pairs, over, error)) => {
                outcome.pairs += pairs;
                outcome.over += over;
                outcome.errors.extend(error);
            }
            Err(err) => outcome.errors.push(err.to_string()),
        }
    }
    outcome.elapsed = started.elapsed();
    outcome
}
