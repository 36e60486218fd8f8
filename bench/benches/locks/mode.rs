//! Full or smoke run, and how much work each workload does in each.

use std::time::Duration;

use crate::locker::Spec;

/// `cargo bench` passes `--bench`: a full run that writes `docs/`. Anything else (`cargo test
/// --bench locks`, a debug build) is a smoke run with tiny counts that only checks every
/// workload and implementation works.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Full,
    Smoke,
}

impl Mode {
    pub(crate) fn from_args() -> Self {
        if std::env::args().skip(1).any(|arg| arg == "--bench") {
            Mode::Full
        } else {
            Mode::Smoke
        }
    }

    pub(crate) fn sizes(self) -> Sizes {
        match self {
            Mode::Full => Sizes {
                runs: 3,
                warm_up: 200,
                uncontended_pairs: 2_000,
                parallel_tasks: 64,
                parallel_for: Duration::from_millis(1_500),
                contended_tasks: 16,
                contended_for: Duration::from_secs(2),
                quorum_pairs: 100,
                give_up_attempts: 20,
                stopped_pairs: 300,
                stopped_pairs_rslock: 5,
                stopped_phase_for: Duration::from_millis(1_500),
                watchdog_locks: 10_000,
                watchdog_batch: 500,
                watchdog_hold: Duration::from_millis(3_500),
                op_timeout: Duration::from_secs(10),
            },
            Mode::Smoke => Sizes {
                runs: 1,
                warm_up: 5,
                uncontended_pairs: 30,
                parallel_tasks: 8,
                parallel_for: Duration::from_millis(200),
                contended_tasks: 4,
                contended_for: Duration::from_millis(300),
                quorum_pairs: 5,
                give_up_attempts: 3,
                stopped_pairs: 5,
                stopped_pairs_rslock: 1,
                stopped_phase_for: Duration::from_millis(500),
                watchdog_locks: 300,
                watchdog_batch: 100,
                watchdog_hold: Duration::from_millis(1_300),
                op_timeout: Duration::from_secs(10),
            },
        }
    }
}

/// What to run: `cargo bench -p redlock-bench --bench locks -- contended ours-5 raw-1` runs some
/// workloads (by name part) with some implementations (by name), for profiling. A partial run
/// writes its report to a temporary directory, like a smoke run: it never overwrites `docs/`.
#[derive(Debug, Clone, Default)]
pub(crate) struct Selection {
    workloads: Vec<String>,
    specs: Vec<String>,
}

impl Selection {
    pub(crate) fn from_args() -> Self {
        let (specs, workloads) = std::env::args()
            .skip(1)
            .filter(|arg| !arg.starts_with('-'))
            .partition(|arg| Spec::all().iter().any(|s| s.to_string() == *arg));
        Self { workloads, specs }
    }

    pub(crate) fn is_partial(&self) -> bool {
        !self.workloads.is_empty() || !self.specs.is_empty()
    }

    pub(crate) fn wants(&self, workload: &str) -> bool {
        self.workloads.is_empty() || self.workloads.iter().any(|w| workload.contains(w.as_str()))
    }

    /// The implementations the lock workloads compare.
    pub(crate) fn specs(&self) -> Vec<Spec> {
        Spec::all()
            .into_iter()
            .filter(|s| self.specs.is_empty() || self.specs.contains(&s.to_string()))
            .collect()
    }
}

/// The counts and durations of one run of every workload.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sizes {
    /// How many times each workload runs (each figure is the median over runs).
    pub(crate) runs: usize,
    /// Unmeasured lock/unlock pairs before each measured series.
    pub(crate) warm_up: usize,
    pub(crate) uncontended_pairs: usize,
    pub(crate) parallel_tasks: usize,
    pub(crate) parallel_for: Duration,
    pub(crate) contended_tasks: usize,
    pub(crate) contended_for: Duration,
    /// Lock/unlock pairs with 2 of 5 nodes dead.
    pub(crate) quorum_pairs: usize,
    /// Attempts with 3 of 5 nodes dead.
    pub(crate) give_up_attempts: usize,
    /// Lock/unlock pairs of ours per phase of the stopped-minority workload.
    pub(crate) stopped_pairs: usize,
    /// The same for rslock, whose pairs last its whole response timeout when a node is stopped.
    pub(crate) stopped_pairs_rslock: usize,
    /// The most time one phase's pairs may take: a slow implementation does fewer pairs.
    pub(crate) stopped_phase_for: Duration,
    pub(crate) watchdog_locks: usize,
    pub(crate) watchdog_batch: usize,
    /// How long the watchdog workload holds its locks once all are taken.
    pub(crate) watchdog_hold: Duration,
    /// The longest any single lock operation may take before it counts as an error.
    pub(crate) op_timeout: Duration,
}
