//! The held locks the watchdog watches, and the handle a holder keeps for each.

use std::sync::Weak;
use std::time::Instant;

use crate::watchdog::Shared;
use crate::LostSignal;

/// One watched hold.
#[derive(Debug)]
pub(crate) struct Entry {
    pub(crate) key: String,
    pub(crate) owner: String,
    pub(crate) lost: LostSignal,
    pub(crate) state: EntryState,
}

#[derive(Debug, Clone, Copy)]
pub(crate) enum EntryState {
    /// Registered before the acquisition completed: not renewed, not timed.
    Pending,
    /// Held with the watchdog lease: renewed every interval until `renew_until`, if set.
    Renewed {
        valid_until: Instant,
        renew_until: Option<Instant>,
    },
    /// Held with a fixed lease: never renewed, lost when it runs out.
    Fixed { valid_until: Instant },
}

/// A hold's place in the watchdog. Dropping it stops everything the watchdog does for the hold
/// at once, synchronously: no renewal is sent for it afterwards.
///
/// Register before the acquisition completes and drop the registration first thing when
/// unlocking, so a renewal never outlives its hold.
#[derive(Debug)]
#[must_use = "dropping the registration stops the watchdog for this hold"]
pub struct Registration {
    pub(crate) id: u64,
    pub(crate) shared: Weak<Shared>,
    pub(crate) lost: LostSignal,
}

impl Registration {
    /// The acquisition succeeded with the watchdog lease: renew from now on. `valid_until` is the
    /// acquisition's own validity end.
    pub fn activate_renewed(&self, valid_until: Instant) {
        if let Some(shared) = self.shared.upgrade() {
            let renew_until = shared.config.max_hold.map(|cap| Instant::now() + cap);
            shared.set_state(
                self.id,
                EntryState::Renewed {
                    valid_until,
                    renew_until,
                },
            );
        }
    }

    /// The acquisition succeeded with a fixed lease: never renew, and fire
    /// [`LostReason::LeaseExpired`](crate::LostReason::LeaseExpired) at `valid_until`.
    pub fn activate_fixed(&self, valid_until: Instant) {
        if let Some(shared) = self.shared.upgrade() {
            shared.set_state(self.id, EntryState::Fixed { valid_until });
        }
    }

    /// The signal that fires when this hold is lost.
    pub fn lost_signal(&self) -> &LostSignal {
        &self.lost
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        #[cfg(feature = "sabotage")]
        if crate::sabotage::KEEP_RENEWING_RELEASED.load(std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        if let Some(shared) = self.shared.upgrade() {
            shared.entries.remove(&self.id);
        }
    }
}
