//! The watchdog handle: registers holds and owns the one renewal task of a client.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use dashmap::DashMap;
use redlock_core::{InvalidArgument, Redlock};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::registry::{Entry, EntryState};
use crate::stats::Counters;
use crate::{LostReason, LostSignal, Registration, WatchdogConfig, WatchdogStats};

/// Renews the leases of held locks while their holder lives, and tells a holder when its lock
/// is lost.
///
/// One task per watchdog renews every registered hold each [`WatchdogConfig::renew_interval`],
/// in batches per node (compare-and-`PEXPIRE`, never recreating a lock that is gone). A renewal
/// confirmed by a majority moves the hold's validity forward; a majority answering "not held"
/// loses it at once; renewals that keep failing lose it just before its validity runs out, so
/// the holder hears of it while the lock is still its own.
///
/// The data it renews is the reentrant lock's: a hash per lock whose fields are owners. A
/// renewal only ever extends a lease: it never shortens a TTL that a longer lease set.
///
/// Dropping the last handle stops the task; held locks then expire within one timeout.
///
/// # Examples
///
/// ```no_run
/// use std::time::Instant;
/// use redlock_core::{Redlock, RedlockConfig};
/// use redlock_watchdog::{Watchdog, WatchdogConfig};
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let redlock = Redlock::new(RedlockConfig::with_nodes(["redis://127.0.0.1:6379"]))?;
/// let watchdog = Watchdog::start(redlock, WatchdogConfig::default())?;
/// let registration = watchdog.register("redlock:report", "client-uuid:task-7");
/// // ... acquire the hash lock `redlock:report` for owner `client-uuid:task-7` ...
/// # let valid_until = Instant::now();
/// registration.activate_renewed(valid_until);
/// let lost = registration.lost_signal().clone();
/// tokio::select! {
///     reason = lost.lost() => eprintln!("lock lost: {reason}"),
///     () = async { /* the work */ } => {}
/// }
/// drop(registration); // first thing when unlocking: no renewal after this
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Watchdog {
    shared: Arc<Shared>,
}

#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) redlock: Redlock,
    pub(crate) config: WatchdogConfig,
    pub(crate) entries: DashMap<u64, Entry>,
    pub(crate) reschedule: Arc<Notify>,
    /// What the renewal task last planned; a hold that makes it due sooner wakes it.
    pub(crate) schedule: std::sync::Mutex<Schedule>,
    /// How long the last round took per hold, in nanoseconds: the lead before the next.
    pub(crate) round_time_per_hold: AtomicU64,
    pub(crate) counters: Counters,
    next_id: AtomicU64,
    shutdown: CancellationToken,
}

impl Watchdog {
    /// Checks the configuration and spawns the renewal task on the current tokio runtime.
    ///
    /// # Errors
    ///
    /// [`InvalidArgument::LeaseTooShort`] when the timeout cannot hold against the per-node
    /// timeout and clock drift (it must exceed three times their sum), or
    /// [`InvalidArgument::ZeroLease`] for a zero timeout or interval.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime.
    pub fn start(redlock: Redlock, config: WatchdogConfig) -> Result<Self, InvalidArgument> {
        let timeout = config.timeout;
        if timeout.is_zero() || config.renew_interval().is_zero() {
            return Err(InvalidArgument::ZeroLease);
        }
        // A renewal started one interval after the last confirmed one must be able to confirm
        // before the hold is declared lost.
        let node_timeout = redlock.config().node_timeout_for(timeout);
        // Saturating: a huge setting is refused, never a panic.
        let drift = redlock.config().drift_for(timeout);
        let minimum = config
            .renew_interval()
            .saturating_add(config.lost_margin(node_timeout))
            .saturating_add(drift)
            .max(node_timeout.saturating_add(drift).saturating_mul(3));
        if timeout <= minimum {
            return Err(InvalidArgument::LeaseTooShort {
                lease: timeout,
                minimum,
            });
        }
        let shared = Arc::new(Shared {
            redlock,
            config: WatchdogConfig {
                batch_size: config.batch_size.max(1),
                ..config
            },
            entries: DashMap::new(),
            reschedule: Arc::new(Notify::new()),
            schedule: std::sync::Mutex::new(Schedule::default()),
            // A guess until the first round measures it.
            round_time_per_hold: AtomicU64::new(20_000),
            counters: Counters::default(),
            next_id: AtomicU64::new(0),
            shutdown: CancellationToken::new(),
        });
        // The task holds the registry weakly: dropping the last handle drops it, which cancels
        // `shutdown` and ends the task.
        tokio::spawn(crate::renewal::run(
            Arc::downgrade(&shared),
            Arc::clone(&shared.reschedule),
            shared.shutdown.clone(),
        ));
        Ok(Self { shared })
    }

    /// Registers a hold of the hash lock `key` by the field `owner`, pending until activated.
    /// Register before sending the acquisition.
    pub fn register(&self, key: impl Into<String>, owner: impl Into<String>) -> Registration {
        let id = self.shared.next_id.fetch_add(1, Ordering::Relaxed);
        let lost = LostSignal::new();
        self.shared.entries.insert(
            id,
            Entry {
                key: key.into(),
                owner: owner.into(),
                lost: lost.clone(),
                state: EntryState::Pending,
            },
        );
        Registration {
            id,
            shared: Arc::downgrade(&self.shared),
            lost,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &WatchdogConfig {
        &self.shared.config
    }

    /// The lease every renewal sets.
    pub fn timeout(&self) -> Duration {
        self.shared.config.timeout
    }

    /// How many holds are registered (pending ones included).
    pub fn registered(&self) -> usize {
        self.shared.entries.len()
    }

    /// What the watchdog has done so far.
    pub fn stats(&self) -> WatchdogStats {
        self.shared.counters.snapshot()
    }

    /// Stops renewing. Holds still registered are told they are lost
    /// ([`LostReason::Shutdown`]); their locks expire within one timeout.
    pub fn shutdown(&self) {
        self.shared.shutdown.cancel();
        let ids: Vec<u64> = self
            .shared
            .entries
            .iter()
            .map(|entry| *entry.key())
            .collect();
        for id in ids {
            self.shared.declare_lost(id, LostReason::Shutdown);
        }
    }

    /// Whether [`Watchdog::shutdown`] was called.
    pub fn is_shut_down(&self) -> bool {
        self.shared.shutdown.is_cancelled()
    }
}

impl Shared {
    /// Changes a hold's state, keeps its lost signal's deadline in step, and wakes the renewal
    /// task if it must act sooner than it planned.
    pub(crate) fn update_state(&self, id: u64, change: impl FnOnce(EntryState) -> EntryState) {
        let state = match self.entries.get_mut(&id) {
            Some(mut entry) => {
                entry.state = change(entry.state);
                entry.lost.set_deadline(self.lost_deadline(entry.state));
                entry.state
            }
            None => return,
        };
        self.wake_if_sooner(state);
    }

    /// Wakes the task only if it must act before it planned to: this hold's lost deadline comes
    /// sooner (a short fixed lease), or the round moved earlier by more than 1 % of the
    /// interval (each hold makes the round a little longer, so it starts a little earlier; the
    /// lead is twice the expected round, which absorbs that much). Holds taken by the thousand
    /// wake it a handful of times, not once each.
    fn wake_if_sooner(&self, state: EntryState) {
        let now = std::time::Instant::now();
        let schedule = self
            .schedule
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(wake) = schedule.wake else {
            self.reschedule.notify_one();
            return;
        };
        let set_at = self.set_at(state, now);
        if schedule.earliest_set_at.is_none() && set_at.is_some() {
            // The first renewed hold the task has not planned for: the plan starts from it.
            self.reschedule.notify_one();
            return;
        }
        let earliest = [schedule.earliest_set_at, set_at]
            .into_iter()
            .flatten()
            .min();
        let slack = self.config.renew_interval() / 100;
        let round_sooner = self
            .next_round(earliest, None)
            .is_some_and(|round| round + slack < wake);
        let lost_sooner = self
            .lost_deadline(state)
            .is_some_and(|(deadline, _)| tokio::time::Instant::from_std(deadline) < wake);
        if round_sooner || lost_sooner {
            self.reschedule.notify_one();
        }
    }

    /// When renewal of a hold activated now stops, if the watchdog caps it. A cap too far away
    /// to represent is no cap.
    pub(crate) fn renew_cap(&self) -> Option<std::time::Instant> {
        self.config
            .max_hold
            .and_then(|cap| std::time::Instant::now().checked_add(cap))
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
}

/// What the renewal task last planned (see `renewal::run`).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Schedule {
    /// When it will wake.
    pub(crate) wake: Option<tokio::time::Instant>,
    /// The earliest lease-set instant among renewed holds, when it planned.
    pub(crate) earliest_set_at: Option<tokio::time::Instant>,
}

impl Drop for Shared {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}
