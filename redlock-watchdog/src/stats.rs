//! Counters of what the watchdog did, for tests, benchmarks and metrics.

use std::sync::atomic::{AtomicU64, Ordering};

/// A snapshot of the watchdog's counters since it started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WatchdogStats {
    /// Renewal rounds run (ticks with at least one lock to renew).
    pub rounds: u64,
    /// Renewal script calls sent to each node (one per batch per round).
    pub calls_per_node: u64,
    /// Lock renewals confirmed by a majority.
    pub renewed: u64,
    /// Holds declared lost.
    pub lost: u64,
}

#[derive(Debug, Default)]
pub(crate) struct Counters {
    rounds: AtomicU64,
    calls_per_node: AtomicU64,
    renewed: AtomicU64,
    lost: AtomicU64,
}

impl Counters {
    pub(crate) fn round(&self, batches: usize, renewed: usize) {
        self.rounds.fetch_add(1, Ordering::Relaxed);
        self.calls_per_node
            .fetch_add(batches as u64, Ordering::Relaxed);
        self.renewed.fetch_add(renewed as u64, Ordering::Relaxed);
    }

    pub(crate) fn lost(&self) {
        self.lost.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> WatchdogStats {
        WatchdogStats {
            rounds: self.rounds.load(Ordering::Relaxed),
            calls_per_node: self.calls_per_node.load(Ordering::Relaxed),
            renewed: self.renewed.load(Ordering::Relaxed),
            lost: self.lost.load(Ordering::Relaxed),
        }
    }
}
