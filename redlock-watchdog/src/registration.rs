//! The handle a holder keeps for each hold the watchdog watches.

use std::sync::Weak;
use std::time::{Duration, Instant};

use crate::registry::{EntryState, Held, Release};
use crate::shared::Shared;
use crate::{LostReason, LostSignal};

/// A hold's place in the watchdog. Dropping it stops everything the watchdog does for the hold
/// at once, synchronously: no renewal is sent for it afterwards. Firing its [`LostSignal`] does
/// the same: a lost hold is never renewed.
///
/// Register before the acquisition completes, say the release is in flight with
/// [`Registration::releasing`], and end the registration with [`Registration::ended`] once the
/// release is confirmed. Dropped without that, the hold is abandoned: nothing renews it, and
/// its signal fires at the deadline it had ([`LostReason::Abandoned`]).
#[derive(Debug)]
#[must_use = "dropping the registration stops the watchdog for this hold"]
pub struct Registration {
    pub(crate) id: u64,
    pub(crate) shared: Weak<Shared>,
    pub(crate) lost: LostSignal,
    /// Set by [`Registration::ended`]: the hold was released, its signal will never fire.
    pub(crate) ended: bool,
}

impl Registration {
    /// An acquisition with the watchdog lease succeeded, valid until `valid_until`: renew from
    /// now on. The validity end only ever moves later.
    pub fn activate_renewed(&self, valid_until: Instant) {
        self.update(|state, shared| match state {
            EntryState::Pending => EntryState::Held(Held {
                valid_until,
                lease: shared.scheduler.lease(),
                renew: true,
                renew_until: shared.scheduler.renew_cap(tokio::time::Instant::now()),
                release: Release::None,
            }),
            EntryState::Held(held) => EntryState::Held(Held {
                renew: true,
                renew_until: if held.renew {
                    held.renew_until
                } else {
                    shared.scheduler.renew_cap(tokio::time::Instant::now())
                },
                ..held.valid_for(valid_until, shared.scheduler.lease())
            }),
        });
    }

    /// An acquisition with the fixed lease `lease` succeeded, valid until `valid_until`. A
    /// pending hold is not renewed and is lost ([`LostReason::LeaseExpired`])
    /// [`WatchdogConfig::fixed_lost_margin`](crate::WatchdogConfig::fixed_lost_margin) before
    /// the validity ends, so its holder can stop while the lock is still its own; a held one
    /// keeps its renewal, and its validity end moves to `valid_until` if that is later.
    pub fn activate_fixed(&self, valid_until: Instant, lease: Duration) {
        self.update(|state, _| match state {
            EntryState::Pending => EntryState::Held(Held {
                valid_until,
                lease,
                renew: false,
                renew_until: None,
                release: Release::None,
            }),
            EntryState::Held(held) => EntryState::Held(held.valid_for(valid_until, lease)),
        });
    }

    /// Stops renewing: the hold keeps the validity it has (the longest confirmed so far) and is
    /// lost ([`LostReason::LeaseExpired`]) a margin before it ends, as a fixed lease is.
    pub fn stop_renewing(&self) {
        self.update(|state, _| match state {
            EntryState::Held(held) => EntryState::Held(Held {
                renew: false,
                renew_until: None,
                ..held
            }),
            pending => pending,
        });
    }

    /// The final release is being sent: no renewal until it is decided, but the hold is still
    /// watched (its lost deadline stands), and "not held" answers are read as the release
    /// landing rather than as a loss.
    pub fn releasing(&self) {
        self.set_release(Release::Sending);
    }

    /// The final release was sent but no majority answered: the pause ends (renewal goes on if
    /// the hold is renewed; see [`Registration::stop_renewing`]), and "not held" answers are
    /// still read as the release landing, until it is retried.
    pub fn release_unconfirmed(&self) {
        self.set_release(Release::Unconfirmed);
    }

    fn set_release(&self, release: Release) {
        // The broken twin of the negative control renews on through the release (and after).
        #[cfg(feature = "sabotage")]
        if crate::sabotage::KEEP_RENEWING_RELEASED.load(std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        self.update(|state, _| match state {
            EntryState::Held(held) => EntryState::Held(Held { release, ..held }),
            pending => pending,
        });
    }

    /// Whether the watchdog renews the hold now (held, renewed, not paused, below the cap).
    pub fn is_renewed(&self) -> bool {
        let Some(shared) = self.shared.upgrade() else {
            return false;
        };
        let now = Instant::now();
        shared.entries.get(&self.id).is_some_and(
            |entry| matches!(entry.state, EntryState::Held(held) if held.renewed_at(now)),
        )
    }

    /// The end of the longest validity confirmed so far, once the hold is held.
    pub fn valid_until(&self) -> Option<Instant> {
        let shared = self.shared.upgrade()?;
        let entry = shared.entries.get(&self.id)?;
        match entry.state {
            EntryState::Held(held) => Some(held.valid_until),
            EntryState::Pending => None,
        }
    }

    /// The signal that fires when this hold is lost.
    pub fn lost_signal(&self) -> &LostSignal {
        &self.lost
    }

    /// The hold's final release was confirmed: the watchdog forgets it, and its signal will
    /// never fire. A registration dropped without this (the client or the watchdog dropped with
    /// the hold still held) leaves its signal to fire at the deadline it had
    /// ([`LostReason::Abandoned`]), since nothing renews the hold any more.
    pub fn ended(mut self) {
        self.ended = true;
    }

    /// Declares the hold lost for `reason` now: fires its signal (the first reason wins),
    /// removes it from the watchdog, and counts and logs it as lost.
    pub fn declare_lost(self, reason: LostReason) {
        if let Some(shared) = self.shared.upgrade() {
            shared.declare_lost(self.id, reason);
        }
        self.lost.fire(reason);
    }

    fn update(&self, change: impl FnOnce(EntryState, &Shared) -> EntryState) {
        if let Some(shared) = self.shared.upgrade() {
            shared.update_state(self.id, |state| change(state, &shared));
        }
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
        if self.ended {
            // Released: no validity to run out any more.
            self.lost.set_deadline(None);
        } else {
            // Nothing renews it from now on: anyone still holding its signal is told when the
            // validity it has runs out (on the timer thread, whatever happens to the runtime).
            self.lost.abandon();
        }
    }
}
