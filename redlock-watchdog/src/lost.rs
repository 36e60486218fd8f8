//! The signal a holder awaits or selects on to learn that its lock is lost.

use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Instant;

use redlock_core::LostReason;
use tokio_util::sync::CancellationToken;

/// Fires once, when a hold is lost, and tells why.
///
/// Cheap to clone; every clone sees the same event. [`LostSignal::token`] gives a tokio-util
/// [`CancellationToken`] to hand to work that must stop when the lock goes.
///
/// A signal can carry a deadline: the end of the validity the holder can prove. Once it has
/// passed, [`LostSignal::is_lost`], [`LostSignal::reason`] and [`LostSignal::lost`] report the
/// hold lost by themselves, without waiting for the watchdog's task to get there: a holder that
/// checks before touching the resource is told on time even on a machine too busy to run that
/// task promptly.
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
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    token: CancellationToken,
    reason: OnceLock<LostReason>,
    /// When the hold is lost unless something moves this later, and what it is lost to then.
    deadline: Mutex<Option<(Instant, LostReason)>>,
}

impl LostSignal {
    /// A signal that has not fired and has no deadline.
    pub fn new() -> Self {
        Self::default()
    }

    /// Fires the signal; the first reason wins. Returns whether this call fired it.
    pub fn fire(&self, reason: LostReason) -> bool {
        let first = self.inner.reason.set(reason).is_ok();
        if first {
            redlock_core::telemetry::lost(reason);
            self.inner.token.cancel();
        }
        first
    }

    /// Sets (or clears) the instant at which the hold is lost for `reason` if the signal has
    /// not fired before.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use redlock_watchdog::{LostReason, LostSignal};
    /// let signal = LostSignal::new();
    /// signal.set_deadline(Some((Instant::now() + Duration::from_secs(60), LostReason::LeaseExpired)));
    /// assert!(!signal.is_lost());
    /// signal.set_deadline(Some((Instant::now(), LostReason::LeaseExpired)));
    /// assert_eq!(signal.reason(), Some(LostReason::LeaseExpired));
    /// ```
    pub fn set_deadline(&self, deadline: Option<(Instant, LostReason)>) {
        *self
            .inner
            .deadline
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = deadline;
    }

    /// The deadline, if one is set.
    pub fn deadline(&self) -> Option<(Instant, LostReason)> {
        *self
            .inner
            .deadline
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether the hold is lost (fired, or past its deadline).
    pub fn is_lost(&self) -> bool {
        self.reason().is_some()
    }

    /// Why the hold was lost, once it is. A deadline that has passed fires the signal here.
    pub fn reason(&self) -> Option<LostReason> {
        if let Some(reason) = self.inner.reason.get() {
            return Some(*reason);
        }
        let (at, reason) = self.deadline()?;
        if Instant::now() < at {
            return None;
        }
        self.fire(reason);
        self.inner.reason.get().copied()
    }

    /// Waits until the hold is lost and tells why.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future changes nothing; await it again at will.
    pub async fn lost(&self) -> LostReason {
        loop {
            if let Some(reason) = self.reason() {
                return reason;
            }
            match self.deadline() {
                Some((at, _)) => {
                    tokio::select! {
                        () = self.inner.token.cancelled() => {}
                        () = tokio::time::sleep_until(tokio::time::Instant::from_std(at)) => {}
                    }
                }
                None => self.inner.token.cancelled().await,
            }
        }
    }

    /// A token cancelled when the hold is lost (by the watchdog's task at the latest).
    pub fn token(&self) -> CancellationToken {
        self.inner.token.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_first_reason_wins() {
        let signal = LostSignal::new();
        assert!(signal.fire(LostReason::QuorumLost));
        assert!(!signal.fire(LostReason::NotOwner));
        assert_eq!(signal.reason(), Some(LostReason::QuorumLost));
    }

    #[test]
    fn a_deadline_moved_later_is_not_lost() {
        let signal = LostSignal::new();
        let now = Instant::now();
        signal.set_deadline(Some((
            now + Duration::from_secs(10),
            LostReason::QuorumLost,
        )));
        assert!(!signal.is_lost());
        signal.set_deadline(Some((
            now + Duration::from_secs(20),
            LostReason::QuorumLost,
        )));
        assert!(!signal.is_lost());
        signal.set_deadline(None);
        assert!(!signal.is_lost());
    }

    #[tokio::test]
    async fn lost_resolves_at_the_deadline_without_anyone_firing_it() {
        let signal = LostSignal::new();
        let at = Instant::now() + Duration::from_millis(50);
        signal.set_deadline(Some((at, LostReason::LeaseExpired)));
        let reason = tokio::time::timeout(Duration::from_secs(1), signal.lost())
            .await
            .expect("resolves by the deadline");
        assert_eq!(reason, LostReason::LeaseExpired);
        assert!(signal.token().is_cancelled());
    }
}
