//! What the watchdog's handles, registrations and renewal task share: the registered holds,
//! how each changes, and the timetable every change is checked against.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use dashmap::DashMap;
use redlock_core::{LostReason, OwnerToken, Redlock, Timing};
use tokio_util::sync::CancellationToken;

use crate::lock_kind::{Registration, RenewScript};
use crate::record::{Held, LeaseRecord};
use crate::schedule::Scheduler;
use crate::stats::Counters;
use crate::WatchdogConfig;

#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) redlock: Redlock,
    pub(crate) config: WatchdogConfig,
    /// The timings of every renewal: the watchdog lease, its per-node timeout and drift.
    pub(crate) timing: Timing,
    /// The records of the holds watched now: shared with their registrations, which remove
    /// them when they go.
    pub(crate) entries: Entries,
    /// Shared with the renewal task, which sleeps on it without keeping the registry alive.
    pub(crate) scheduler: Arc<Scheduler>,
    pub(crate) counters: Counters,
    next_id: AtomicU64,
    pub(crate) shutdown: CancellationToken,
}

impl Shared {
    pub(crate) fn new(redlock: Redlock, config: WatchdogConfig) -> Self {
        let timing = redlock.config().timing(config.timeout);
        Self {
            scheduler: Arc::new(Scheduler::new(&config, timing)),
            timing,
            redlock,
            config,
            entries: Entries::default(),
            counters: Counters::default(),
            next_id: AtomicU64::new(0),
            shutdown: CancellationToken::new(),
        }
    }

    /// Registers a pending hold.
    pub(crate) fn register(
        self: &Arc<Self>,
        script: RenewScript,
        key: String,
        owner: OwnerToken,
    ) -> Registration {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let record = Arc::new(LeaseRecord::new(key, owner, script, self.scheduler.rule()));
        self.entries.insert(id, Arc::clone(&record));
        Registration {
            id,
            shared: Arc::downgrade(self),
            record,
        }
    }

    /// A hold changed: wakes the renewal task if it must act sooner than it planned.
    pub(crate) fn changed(&self, held: Held) {
        self.scheduler
            .wake_if_sooner(Some(held), self.entries.len(), tokio::time::Instant::now());
    }

    /// Removes the hold from the watchdog and loses it (the first reason wins); counts and
    /// logs it.
    pub(crate) fn declare_lost(&self, id: u64, reason: LostReason) {
        if let Some((_, record)) = self.entries.remove(&id) {
            record.lose(reason);
            self.counters.lost();
            let reason = record
                .reason_at(std::time::Instant::now())
                .unwrap_or(reason);
            tracing::warn!(key = %record.key, %reason, "lock lost");
        }
    }

    /// Removes every hold that is over as of `now` (tokio's clock): lost (past its deadline,
    /// or given up elsewhere), or ended.
    pub(crate) fn declare_overdue_lost(&self) {
        let now = tokio::time::Instant::now().into_std();
        let over: Vec<(u64, Option<LostReason>)> = self
            .entries
            .iter()
            .filter_map(|entry| {
                let reason = entry.reason_at(now);
                (reason.is_some() || entry.is_over()).then_some((*entry.key(), reason))
            })
            .collect();
        for (id, reason) in over {
            match reason {
                Some(reason) => self.declare_lost(id, reason),
                None => {
                    self.entries.remove(&id);
                }
            }
        }
    }

    /// Every watched hold's lease now (`None`: pending).
    pub(crate) fn states(&self) -> Vec<Option<Held>> {
        self.entries.iter().map(|entry| entry.held()).collect()
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// The records of the holds watched now, by registration id, and how many there are: every
/// hold change reads the count, and a map's own count locks each of its shards in turn.
#[derive(Debug, Default)]
pub(crate) struct Entries {
    map: DashMap<u64, Arc<LeaseRecord>>,
    count: AtomicUsize,
}

impl Entries {
    fn insert(&self, id: u64, record: Arc<LeaseRecord>) {
        // Counted first: a remove racing with this insert (a shutdown that finds the entry at
        // once) must never take the count below the map's size.
        self.count.fetch_add(1, Ordering::Relaxed);
        if self.map.insert(id, record).is_some() {
            self.count.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Removes hold `id`'s record, if it is still here.
    pub(crate) fn remove(&self, id: &u64) -> Option<(u64, Arc<LeaseRecord>)> {
        let removed = self.map.remove(id);
        if removed.is_some() {
            self.count.fetch_sub(1, Ordering::Relaxed);
        }
        removed
    }

    /// How many holds are watched.
    pub(crate) fn len(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    /// Every watched hold's record.
    pub(crate) fn iter(&self) -> dashmap::iter::Iter<'_, u64, Arc<LeaseRecord>> {
        self.map.iter()
    }
}
