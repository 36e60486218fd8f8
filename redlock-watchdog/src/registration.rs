//! The faces a lock kind keeps for each hold the watchdog watches: the owning registration,
//! and a handle that can only give the hold up.

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use crate::record::{Held, LeaseFacts, LeaseRecord};
use crate::shared::Shared;
use crate::{LostReason, LostSignal};

/// A hold's place in the watchdog, kept by the lock kind that took the hold. Dropping it stops
/// everything the watchdog does for the hold at once, synchronously: no renewal is sent for it
/// afterwards. A lost hold is never renewed either.
///
/// Register before the acquisition completes, tell the watchdog what a majority confirmed with
/// [`Registration::confirmed`] and what the owner's state says of the lease with
/// [`Registration::set`] (renewed or not, where the final release stands), and end it with
/// [`Registration::ended`] once the release is confirmed. Dropped without that, the hold is
/// abandoned: nothing renews it, and its signal fires at the deadline it had
/// ([`LostReason::Abandoned`]).
#[derive(Debug)]
#[must_use = "dropping the registration stops the watchdog for this hold"]
pub struct Registration {
    pub(crate) id: u64,
    pub(crate) shared: Weak<Shared>,
    pub(crate) record: Arc<LeaseRecord>,
}

impl Registration {
    /// A majority confirmed the hold valid until `valid_until`, by a grant of `lease`. The
    /// validity end only ever moves later.
    pub fn confirmed(&self, valid_until: Instant, lease: Duration) {
        let held = self.record.confirmed(valid_until, lease);
        self.changed(held);
    }

    /// The owner's facts of the lease after one of its transitions: whether it is renewed, and
    /// where its final release stands. Renewal that turns on starts the
    /// [`max_hold`](crate::WatchdogConfig::max_hold) cap.
    pub fn set(&self, facts: LeaseFacts) {
        // The broken twin of the negative control renews on through the release (and after).
        #[cfg(feature = "sabotage")]
        let facts =
            if crate::sabotage::KEEP_RENEWING_RELEASED.load(std::sync::atomic::Ordering::Relaxed) {
                LeaseFacts {
                    release: crate::lock_kind::ReleasePhase::None,
                    ..facts
                }
            } else {
                facts
            };
        let held = self
            .record
            .set(facts, tokio::time::Instant::now().into_std());
        self.changed(held);
    }

    /// Wakes the renewal task if the hold, as it is now, needs it sooner than planned.
    fn changed(&self, held: Option<Held>) {
        if let (Some(shared), Some(held)) = (self.shared.upgrade(), held) {
            shared.changed(held);
        }
    }

    /// Whether the watchdog renews the hold now (held, renewed, not paused, below the cap).
    pub fn is_renewed(&self) -> bool {
        self.record
            .held()
            .is_some_and(|held| held.renewed_at(Instant::now()))
    }

    /// The end of the longest validity confirmed so far, while the hold is held (`None` once
    /// it is lost, released or abandoned).
    pub fn valid_until(&self) -> Option<Instant> {
        self.record.valid_until()
    }

    /// The signal that fires when this hold is lost: a view its holders may keep.
    pub fn lost_signal(&self) -> LostSignal {
        LostSignal::of(Arc::clone(&self.record))
    }

    /// A handle that can give the hold up from anywhere, for a lock kind that cannot reach
    /// its registration at that moment.
    pub fn giver(&self) -> GiveUp {
        GiveUp {
            record: Arc::clone(&self.record),
        }
    }

    /// The hold's final release was confirmed: the watchdog forgets it, and its signal will
    /// never fire.
    pub fn ended(self) {
        // Out of the watchdog first: a round deciding meanwhile must not count it as lost.
        if self.leave_watchdog() {
            self.record.end();
        }
    }

    /// Declares the hold lost for `reason` now: fires its signal (the first reason wins),
    /// removes it from the watchdog, and counts and logs it as lost.
    pub fn declare_lost(self, reason: LostReason) {
        if let Some(shared) = self.shared.upgrade() {
            shared.declare_lost(self.id, reason);
        }
        self.record.lose(reason);
    }
}

impl Registration {
    /// Takes the hold out of the watchdog: no renewal is sent for it afterwards. `false` only
    /// in the negative control's broken twin, which keeps renewing it.
    fn leave_watchdog(&self) -> bool {
        #[cfg(feature = "sabotage")]
        if crate::sabotage::KEEP_RENEWING_RELEASED.load(std::sync::atomic::Ordering::Relaxed) {
            return false;
        }
        if let Some(shared) = self.shared.upgrade() {
            shared.entries.remove(&self.id);
        }
        true
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        // Ended already, or nothing renews it from now on: anyone still holding its signal is
        // told when the validity it has runs out (on the timer thread, whatever happens to the
        // runtime).
        if self.leave_watchdog() {
            self.record.abandon();
        }
    }
}

/// Gives a hold up: its signal fires now and nothing renews it any more. Cheap to clone; the
/// registration stays with the lock kind, which unwinds the hold when it next can.
#[derive(Debug, Clone)]
pub struct GiveUp {
    record: Arc<LeaseRecord>,
}

impl GiveUp {
    /// Declares the hold lost for `reason` now, unless it was released or lost already.
    pub fn give_up(&self, reason: LostReason) {
        self.record.lose(reason);
    }

    /// The hold's signal.
    pub fn lost_signal(&self) -> LostSignal {
        LostSignal::of(Arc::clone(&self.record))
    }
}
