//! Uncontended: one task, a new key each time, lock + unlock pair latency. The implementations
//! take turns in blocks of pairs, so each sees the same moments of a noisy machine.

use std::time::{Duration, Instant};

use tokio::runtime::Runtime;

use crate::lab::Lab;
use crate::locker::{within, Locker, Spec};
use crate::mode::Sizes;
use crate::results::Results;
use crate::stats::{add_percentiles, micros, quantile, Metrics};

pub(crate) const WORKLOAD: &str = "uncontended";

/// Pairs one implementation does before the next takes its turn.
pub(crate) const BLOCK: usize = 50;

pub(crate) fn run_all(runtime: &Runtime, lab: &Lab, sizes: &Sizes, results: &mut Results) {
    for run in 0..sizes.runs {
        let lockers = lab.lockers.clone();
        let sizes = *sizes;
        // One task: our owner is the task.
        let task = runtime.spawn(async move { take_turns(&lockers, &sizes, run).await });
        match runtime.block_on(task).map_err(|e| e.to_string()) {
            Ok(Ok(outcomes)) => {
                for (spec, outcome) in outcomes {
                    results.add_samples(WORKLOAD, &spec.to_string(), &outcome.pairs);
                    results.record(WORKLOAD, spec.to_string(), run, outcome.metrics());
                }
            }
            Ok(Err(err)) | Err(err) => results.problem(format!("{WORKLOAD} run {run}: {err}")),
        }
    }
}

#[derive(Default)]
struct Outcome {
    pairs: Vec<Duration>,
    locks: Vec<Duration>,
    unlocks: Vec<Duration>,
    /// What the process spent on the pairs, every thread included.
    cost: Cost,
}

/// Process-wide counters, summed over the blocks of one implementation.
#[derive(Default, Clone, Copy)]
struct Cost {
    /// `None` unless the benchmark counts allocations (`--features alloc-counts`).
    allocations: Option<u64>,
    context_switches: u64,
    cpu: Duration,
}

impl Cost {
    fn now() -> Result<Self, String> {
        Ok(Self {
            allocations: crate::allocs::allocations(),
            context_switches: crate::cpu::context_switches()?,
            cpu: crate::cpu::process_cpu()?,
        })
    }

    fn add_since(&mut self, start: Self) -> Result<(), String> {
        let end = Self::now()?;
        self.allocations = match (end.allocations, start.allocations) {
            (Some(end), Some(start)) => {
                Some(self.allocations.unwrap_or(0) + end.saturating_sub(start))
            }
            _ => None,
        };
        self.context_switches += end.context_switches.saturating_sub(start.context_switches);
        self.cpu += end.cpu.saturating_sub(start.cpu);
        Ok(())
    }
}

impl Outcome {
    fn metrics(&self) -> Metrics {
        let mut metrics = Metrics::new();
        add_percentiles(&mut metrics, "pair", &self.pairs);
        for (name, samples) in [("lock", &self.locks), ("unlock", &self.unlocks)] {
            let mut sorted = samples.clone();
            sorted.sort_unstable();
            metrics.insert(format!("{name}_p50_us"), micros(quantile(&sorted, 0.5)));
        }
        // Back to back in one task: the rate is the inverse of the mean pair.
        let busy: Duration = self.pairs.iter().sum();
        metrics.insert(
            "ops_per_s".into(),
            self.pairs.len() as f64 / busy.as_secs_f64(),
        );
        let pairs = self.pairs.len().max(1) as f64;
        if let Some(allocations) = self.cost.allocations {
            metrics.insert("allocations_per_pair".into(), allocations as f64 / pairs);
        }
        metrics.insert(
            "context_switches_per_pair".into(),
            self.cost.context_switches as f64 / pairs,
        );
        metrics.insert(
            "cpu_us_per_pair".into(),
            self.cost.cpu.as_secs_f64() * 1e6 / pairs,
        );
        metrics
    }
}

/// Warms every implementation up, then gives each `BLOCK` pairs in turn until each has done
/// `sizes.uncontended_pairs`.
async fn take_turns(
    lockers: &[(Spec, Locker)],
    sizes: &Sizes,
    run: usize,
) -> Result<Vec<(Spec, Outcome)>, String> {
    let mut outcomes: Vec<(Spec, Outcome)> = Vec::new();
    for (spec, locker) in lockers {
        let mut warm = Outcome::default();
        pairs(
            *spec,
            locker,
            sizes,
            &format!("{run}:warm"),
            sizes.warm_up,
            &mut warm,
        )
        .await?;
        outcomes.push((*spec, Outcome::default()));
    }
    let mut block = 0;
    while outcomes[0].1.pairs.len() < sizes.uncontended_pairs {
        for ((spec, locker), (_, outcome)) in lockers.iter().zip(&mut outcomes) {
            let count = BLOCK.min(sizes.uncontended_pairs - outcome.pairs.len());
            pairs(
                *spec,
                locker,
                sizes,
                &format!("{run}:{block}"),
                count,
                outcome,
            )
            .await?;
        }
        block += 1;
    }
    Ok(outcomes)
}

/// `count` lock + unlock pairs on new keys, timed into `outcome`.
async fn pairs(
    spec: Spec,
    locker: &Locker,
    sizes: &Sizes,
    series: &str,
    count: usize,
    outcome: &mut Outcome,
) -> Result<(), String> {
    let keys: Vec<String> = (0..count)
        .map(|i| format!("bench:unc:{spec}:{series}:{i}"))
        .collect();
    // Room for the samples, so that only the pairs allocate while counted.
    for samples in [&mut outcome.pairs, &mut outcome.locks, &mut outcome.unlocks] {
        samples.reserve(count);
    }
    let start = Cost::now()?;
    for key in &keys {
        let started = Instant::now();
        let handle = within(sizes.op_timeout, locker.lock(key)).await?;
        let locked = Instant::now();
        within(sizes.op_timeout, locker.unlock(handle)).await?;
        let unlocked = Instant::now();
        outcome.pairs.push(unlocked - started);
        outcome.locks.push(locked - started);
        outcome.unlocks.push(unlocked - locked);
    }
    outcome.cost.add_since(start)
}
