//! Read-write: ours' read-write lock on one key, readers only and a 90 % read mix, beside ours'
//! reentrant lock on that one key (every pair exclusive) and on a key per task (`parallel`).

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redlock_reentrant::{LockClient, RLock};
use tokio::runtime::Runtime;

use crate::lab::Lab;
use crate::locker::{within, Kind, Locker, Spec};
use crate::mode::Sizes;
use crate::results::Results;
use crate::stats::Metrics;

pub(crate) const WORKLOAD: &str = "read-write";

/// One writer in this many pairs of the mix.
const WRITE_EVERY: u64 = 10;

pub(crate) fn run_all(runtime: &Runtime, lab: &Lab, sizes: &Sizes, results: &mut Results) {
    for run in 0..sizes.runs {
        for (spec, locker) in &lab.lockers {
            let Locker::Ours(ours) = locker else {
                continue;
            };
            if spec.kind != Kind::Ours {
                continue;
            }
            let client = &ours.client;
            let mut metrics = Metrics::new();
            let mut problems = Vec::new();
            for (name, mix) in [
                ("readers", Mix::ReadersOnly),
                ("exclusive", Mix::Exclusive),
                ("mixed", Mix::NinetyPercentReads),
            ] {
                let outcome = runtime.block_on(one_run(*spec, client, sizes, run, mix));
                metrics.insert(
                    format!("{name}_ops_per_s"),
                    outcome.pairs as f64 / outcome.elapsed.as_secs_f64(),
                );
                if mix == Mix::NinetyPercentReads {
                    metrics.insert("mixed_writes".into(), outcome.writes as f64);
                    metrics.insert("overlaps".into(), outcome.overlaps as f64);
                }
                problems.extend(outcome.errors.into_iter().take(3));
                if outcome.overlaps > 0 {
                    problems.push(format!(
                        "{} writer overlaps in the {name} run",
                        outcome.overlaps
                    ));
                }
            }
            metrics.insert("errors".into(), problems.len() as f64);
            for problem in problems {
                results.problem(format!("{WORKLOAD} {spec} run {run}: {problem}"));
            }
            results.record(WORKLOAD, spec.to_string(), run, metrics);
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mix {
    /// Every task reads the one lock.
    ReadersOnly,
    /// Every task takes the one reentrant lock.
    Exclusive,
    /// One pair in [`WRITE_EVERY`] writes, the rest read.
    NinetyPercentReads,
}

struct Outcome {
    pairs: u64,
    writes: u64,
    overlaps: u64,
    elapsed: Duration,
    errors: Vec<String>,
}

/// Who is inside: readers count up by one, a writer by a million; a writer that finds anyone
/// else inside, or a reader that finds a writer, is an overlap.
const WRITER: i64 = 1_000_000;

async fn one_run(spec: Spec, client: &LockClient, sizes: &Sizes, run: usize, mix: Mix) -> Outcome {
    let started = Instant::now();
    let deadline = started + sizes.parallel_for;
    let name = format!("bench:rw:{spec}:{run}:{mix:?}");
    let inside = Arc::new(AtomicI64::new(0));
    let tasks: Vec<_> = (0..sizes.parallel_tasks)
        .map(|task| {
            let rw = client.get_read_write_lock(name.as_str());
            let exclusive = client.get_lock(format!("{name}:exclusive"));
            let inside = Arc::clone(&inside);
            let limit = sizes.op_timeout;
            tokio::spawn(async move {
                let (mut pairs, mut writes, mut overlaps) = (0u64, 0u64, 0u64);
                while Instant::now() < deadline {
                    let (lock, weight): (RLock, i64) = match mix {
                        Mix::ReadersOnly => (rw.read_lock(), 1),
                        Mix::Exclusive => (exclusive.clone(), WRITER),
                        Mix::NinetyPercentReads
                            if (pairs + task as u64).is_multiple_of(WRITE_EVERY) =>
                        {
                            (rw.write_lock(), WRITER)
                        }
                        Mix::NinetyPercentReads => (rw.read_lock(), 1),
                    };
                    let pair = async {
                        within(limit, async {
                            lock.lock().await.map_err(|e| e.to_string())
                        })
                        .await?;
                        let before = inside.fetch_add(weight, Ordering::SeqCst);
                        // Inside for a moment others can see: another task may run here.
                        tokio::task::yield_now().await;
                        let during = inside.load(Ordering::SeqCst) - weight;
                        let overlap = if weight == WRITER {
                            before != 0 || during != 0
                        } else {
                            before >= WRITER || during >= WRITER
                        };
                        inside.fetch_sub(weight, Ordering::SeqCst);
                        within(limit, async {
                            lock.unlock().await.map_err(|e| e.to_string())
                        })
                        .await?;
                        Ok::<bool, String>(overlap)
                    };
                    match pair.await {
                        Ok(overlap) => {
                            pairs += 1;
                            writes += u64::from(weight == WRITER);
                            overlaps += u64::from(overlap);
                        }
                        Err(err) => return (pairs, writes, overlaps, Some(err)),
                    }
                }
                (pairs, writes, overlaps, None)
            })
        })
        .collect();
    let mut outcome = Outcome {
        pairs: 0,
        writes: 0,
        overlaps: 0,
        elapsed: Duration::ZERO,
        errors: Vec::new(),
    };
    for task in tasks {
        match task.await {
            Ok((pairs, writes, overlaps, error)) => {
                outcome.pairs += pairs;
                outcome.writes += writes;
                outcome.overlaps += overlaps;
                outcome.errors.extend(error);
            }
            Err(err) => outcome.errors.push(err.to_string()),
        }
    }
    outcome.elapsed = started.elapsed();
    outcome
}
