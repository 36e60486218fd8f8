//! The holds the watchdog watches, and where each stands.

use std::time::{Duration, Instant};

use redlock_core::OwnerToken;

use crate::{LostSignal, RenewScript};

/// One watched hold. The owner's `Debug` hides it: a plain lock's token proves it holds the
/// lock.
#[derive(Debug)]
pub(crate) struct Entry {
    pub(crate) key: String,
    pub(crate) owner: OwnerToken,
    /// How this kind of lock is renewed.
    pub(crate) script: RenewScript,
    pub(crate) lost: LostSignal,
    pub(crate) state: EntryState,
}

/// Where a watched hold stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EntryState {
    /// Registered before the acquisition completed: not renewed, not timed.
    Pending,
    /// Held.
    Held(Held),
}

/// A held lock's lease as the watchdog keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Held {
    /// The end of the longest validity a majority confirmed (an acquisition or a renewal).
    /// Only ever moves later: no node's TTL is ever shortened (the scripts extend only), so
    /// every validity once confirmed stays backed by its majority.
    pub(crate) valid_until: Instant,
    /// The longest lease that moved `valid_until`: a hold no longer renewed is declared lost
    /// [`WatchdogConfig::fixed_lost_margin`](crate::WatchdogConfig::fixed_lost_margin) of it
    /// before its validity ends.
    pub(crate) lease: Duration,
    /// Renewed every interval (the watchdog lease) rather than left to run out (a fixed lease).
    pub(crate) renew: bool,
    /// The cap on renewal ([`WatchdogConfig::max_hold`](crate::WatchdogConfig::max_hold)).
    pub(crate) renew_until: Option<Instant>,
    /// Where the hold's final release stands.
    pub(crate) release: Release,
}

/// Where a hold's final release stands. While one is sent or unconfirmed, a renewal answered
/// "not held" by a majority is the release landing, not a loss: the hold is not declared lost
/// for it (it still is when its validity runs out unconfirmed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Release {
    /// None asked for.
    None,
    /// Being sent: renewal pauses, so no renewal races it.
    Sending,
    /// Sent, but no majority answered: it may have landed anywhere; the caller decides whether
    /// renewal resumes.
    Unconfirmed,
}

impl Held {
    /// This hold confirmed valid until `valid_until` by a grant or renewal of `lease`: the
    /// validity end moves only later, and so does the margin it is told lost by (the longest
    /// lease that moved it), so a short nested lease never shrinks the warning.
    pub(crate) fn valid_for(self, valid_until: Instant, lease: Duration) -> Self {
        if valid_until > self.valid_until {
            Self {
                valid_until,
                lease: self.lease.max(lease),
                ..self
            }
        } else {
            self
        }
    }

    /// Whether a round starting at `now` renews this hold.
    pub(crate) fn renewed_at(&self, now: Instant) -> bool {
        self.renew
            && self.release != Release::Sending
            && self.renew_until.is_none_or(|cap| now < cap)
    }

    /// Whether renewal stopped for good because of the cap, as of `at`.
    pub(crate) fn capped_at(&self, at: Instant) -> bool {
        self.renew_until.is_some_and(|cap| at >= cap)
    }
}
