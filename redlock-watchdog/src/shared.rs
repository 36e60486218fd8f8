//! What the watchdog's handles, registrations and renewal task share: the registered holds,
//! how each changes, and the timetable every change is checked against.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use dashmap::DashMap;
use redlock_core::{LostReason, OwnerToken, Redlock};
use tokio_util::sync::CancellationToken;

use crate::registry::{Entry, EntryState};
use crate::schedule::Scheduler;
use crate::stats::Counters;
use crate::{LostSignal, Registration, RenewScript, WatchdogConfig};

#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) redlock: Redlock,
    pub(crate) config: WatchdogConfig,
    pub(crate) entries: DashMap<u64, Entry>,
    /// Shared with the renewal task, which sleeps on it without keeping the registry alive.
    pub(crate) scheduler: Arc<Scheduler>,
    pub(crate) counters: Counters,
    next_id: AtomicU64,
    pub(crate) shutdown: CancellationToken,
}

impl Shared {
    pub(crate) fn new(redlock: Redlock, config: WatchdogConfig) -> Self {
        let node_timeout = redlock.config().node_timeout_for(config.timeout);
        let drift = redlock.config().drift_for(config.timeout);
        Self {
            scheduler: Arc::new(Scheduler::new(&config, node_timeout, drift)),
            redlock,
            config,
            entries: DashMap::new(),
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
        let lost = LostSignal::new();
        self.entries.insert(
            id,
            Entry {
                key,
                owner,
                script,
                lost: lost.clone(),
                state: EntryState::Pending,
            },
        );
        Registration {
            id,
            shared: Arc::downgrade(self),
            lost,
            ended: false,
        }
    }

    /// Changes a hold's state, keeps its lost signal's deadline in step, and wakes the renewal
    /// task if it must act sooner than it planned.
    pub(crate) fn update_state(&self, id: u64, change: impl FnOnce(EntryState) -> EntryState) {
        let state = match self.entries.get_mut(&id) {
            Some(mut entry) => {
                entry.state = change(entry.state);
                entry
                    .lost
                    .set_deadline(self.scheduler.lost_deadline(entry.state));
                entry.state
            }
            None => return,
        };
        self.scheduler
            .wake_if_sooner(state, self.entries.len(), tokio::time::Instant::now());
    }

    /// Removes the hold from the watchdog and fires its signal (the first reason wins); counts
    /// and logs it.
    pub(crate) fn declare_lost(&self, id: u64, reason: LostReason) {
        if let Some((_, entry)) = self.entries.remove(&id) {
            entry.lost.fire(reason);
            self.counters.lost();
            let reason = entry.lost.reason().unwrap_or(reason);
            tracing::warn!(key = %entry.key, %reason, "lock lost");
        }
    }

    /// Removes every hold that is lost as of now (see [`Scheduler::overdue`]).
    pub(crate) fn declare_overdue_lost(&self) {
        let overdue = self.scheduler.overdue(
            self.entries
                .iter()
                .map(|entry| (*entry.key(), entry.state, entry.lost.reason())),
            tokio::time::Instant::now(),
        );
        for (id, reason) in overdue {
            self.declare_lost(id, reason);
        }
    }

    /// Every hold's state now.
    pub(crate) fn states(&self) -> Vec<EntryState> {
        self.entries.iter().map(|entry| entry.state).collect()
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}
