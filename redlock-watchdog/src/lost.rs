//! The signal a holder awaits or selects on to learn that its lock is lost.

use std::sync::{Arc, OnceLock};

use tokio_util::sync::CancellationToken;

/// Why a hold was lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LostReason {
    /// A majority of nodes answered that this owner no longer holds the lock: it expired, was
    /// force-unlocked, or a node restarted empty.
    #[error("the lock is no longer held by this owner on a majority of nodes")]
    NotOwner,
    /// No renewal was confirmed by a majority before the validity of the last confirmed one ran
    /// out: nodes down or unreachable, or this process paused past its lease.
    #[error("no renewal was confirmed by a majority of nodes before the lease ran out")]
    QuorumLost,
    /// The configured maximum hold time was reached; renewal stopped and the lease ran out.
    #[error("the maximum hold time was reached and the lease ran out")]
    MaxHoldReached,
    /// The lock's fixed lease (not renewed) ran out.
    #[error("the lock's lease ran out")]
    LeaseExpired,
    /// The watchdog was shut down while the lock was held.
    #[error("the watchdog was shut down")]
    Shutdown,
}

/// Fires once, when a hold is lost, and tells why.
///
/// Cheap to clone; every clone sees the same event. [`LostSignal::token`] gives a tokio-util
/// [`CancellationToken`] to hand to work that must stop when the lock goes.
///
/// # Examples
///
/// ```
/// use redlock_watchdog::{LostReason, LostSignal};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let signal = LostSignal::new();
/// assert!(!signal.is_lost());
/// signal.fire(LostReason::NotOwner);
/// assert_eq!(signal.lost().await, LostReason::NotOwner);
/// assert!(signal.token().is_cancelled());
/// # }
/// ```
#[derive(Debug, Clone, Default)]
pub struct LostSignal {
    token: CancellationToken,
    reason: Arc<OnceLock<LostReason>>,
}

impl LostSignal {
    /// A signal that has not fired.
    pub fn new() -> Self {
        Self::default()
    }

    /// Fires the signal; the first reason wins. Returns whether this call fired it.
    pub fn fire(&self, reason: LostReason) -> bool {
        let first = self.reason.set(reason).is_ok();
        if first {
            self.token.cancel();
        }
        first
    }

    /// Whether the hold is lost.
    pub fn is_lost(&self) -> bool {
        self.reason.get().is_some()
    }

    /// Why the hold was lost, once it is.
    pub fn reason(&self) -> Option<LostReason> {
        self.reason.get().copied()
    }

    /// Waits until the hold is lost and tells why.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future changes nothing; await it again at will.
    pub async fn lost(&self) -> LostReason {
        self.token.cancelled().await;
        self.reason().unwrap_or(LostReason::NotOwner)
    }

    /// A token cancelled when the hold is lost.
    pub fn token(&self) -> CancellationToken {
        self.token.clone()
    }
}
