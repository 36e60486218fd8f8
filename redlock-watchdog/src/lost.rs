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
/// A signal can carry a deadline: a margin before the end of the validity the holder can prove
/// (see [`WatchdogConfig::lost_margin`](crate::WatchdogConfig::lost_margin) and
/// [`WatchdogConfig::fixed_lost_margin`](crate::WatchdogConfig::fixed_lost_margin)). Once it has
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
pub(crate) struct Inner {
    token: CancellationToken,
    reason: OnceLock<LostReason>,
    deadline: Mutex<Deadline>,
}

#[derive(Debug, Default)]
struct Deadline {
    /// When the hold is lost unless something moves this later, and what it is lost to then.
    at: Option<(Instant, LostReason)>,
    /// The deadline the timer thread will look at this signal for, if armed.
    armed: Option<Instant>,
}

impl Inner {
    fn fire(&self, reason: LostReason) -> bool {
        let first = self.reason.set(reason).is_ok();
        if first {
            redlock_core::telemetry::lost(reason);
            self.token.cancel();
        }
        first
    }

    fn deadline(&self) -> std::sync::MutexGuard<'_, Deadline> {
        self.deadline.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The timer thread's look, for the deadline it was armed with: fires the signal past its
    /// deadline, or arms it again at a deadline moved later. An older arming is ignored.
    pub(crate) fn look(self: &Arc<Self>, armed_for: Instant) {
        let mut deadline = self.deadline();
        if deadline.armed != Some(armed_for) {
            return;
        }
        deadline.armed = None;
        if self.reason.get().is_some() {
            return;
        }
        match deadline.at {
            None => {}
            Some((at, reason)) if at <= Instant::now() => {
                drop(deadline);
                self.fire(reason);
            }
            Some((at, _)) => {
                deadline.armed = Some(at);
                drop(deadline);
                crate::deadline_timer::arm(Arc::downgrade(self), at);
            }
        }
    }
}

impl LostSignal {
    /// A signal that has not fired and has no deadline.
    pub fn new() -> Self {
        Self::default()
    }

    /// Fires the signal; the first reason wins. Returns whether this call fired it.
    pub fn fire(&self, reason: LostReason) -> bool {
        self.inner.fire(reason)
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
        let mut state = self.inner.deadline();
        state.at = deadline;
        // The timer thread fires the token by the deadline, whoever else reads the signal.
        if let Some((at, _)) = deadline {
            if state.armed.is_none_or(|armed| at < armed) && self.inner.reason.get().is_none() {
                state.armed = Some(at);
                drop(state);
                crate::deadline_timer::arm(Arc::downgrade(&self.inner), at);
            }
        }
    }

    /// Keeps the deadline's instant but says the hold is lost then because nothing renews or
    /// releases it any more ([`LostReason::Abandoned`]): its registration went without a
    /// release (the client, or the watchdog, was dropped).
    pub(crate) fn abandon(&self) {
        let mut state = self.inner.deadline();
        if let Some((at, _)) = state.at {
            state.at = Some((at, LostReason::Abandoned));
        }
    }

    /// The deadline, if one is set.
    pub fn deadline(&self) -> Option<(Instant, LostReason)> {
        self.inner.deadline().at
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

    /// A token cancelled when the hold is lost, by its deadline at the latest (a timer thread
    /// of the library's cancels it then, whatever happens to the client, the watchdog's task or
    /// the runtime).
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

    /// Polls `done` on this thread for up to `within`: no runtime, nothing reads the signal.
    fn within(within: Duration, done: impl Fn() -> bool) -> bool {
        let until = Instant::now() + within;
        while Instant::now() < until {
            if done() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        done()
    }

    #[test]
    fn the_token_is_cancelled_at_the_deadline_with_no_runtime_and_no_reader() {
        let signal = LostSignal::new();
        let token = signal.token();
        signal.set_deadline(Some((
            Instant::now() + Duration::from_millis(50),
            LostReason::LeaseExpired,
        )));
        assert!(
            within(Duration::from_secs(10), || token.is_cancelled()),
            "the timer thread cancels the token"
        );
        assert_eq!(signal.inner.reason.get(), Some(&LostReason::LeaseExpired));
    }

    #[test]
    fn a_deadline_moved_later_or_cleared_is_not_fired_at_the_old_one() {
        let later = LostSignal::new();
        let cleared = LostSignal::new();
        // Far enough that the moves below happen before it, however busy the machine.
        let soon = Instant::now() + Duration::from_secs(2);
        for signal in [&later, &cleared] {
            signal.set_deadline(Some((soon, LostReason::QuorumLost)));
        }
        later.set_deadline(Some((
            soon + Duration::from_secs(3600),
            LostReason::QuorumLost,
        )));
        cleared.set_deadline(None);
        // A third signal due after the old deadline: the timer looks in deadline order, so once
        // it fired this one it had looked at the other two at the old deadline.
        let witness = LostSignal::new();
        witness.set_deadline(Some((
            soon + Duration::from_millis(50),
            LostReason::QuorumLost,
        )));
        assert!(within(Duration::from_secs(10), || witness
            .token()
            .is_cancelled()));
        assert!(!later.token().is_cancelled());
        assert!(!cleared.token().is_cancelled());
    }

    #[test]
    fn an_abandoned_hold_is_told_so_at_its_deadline() {
        let signal = LostSignal::new();
        signal.set_deadline(Some((
            Instant::now() + Duration::from_secs(1),
            LostReason::QuorumLost,
        )));
        signal.abandon();
        assert!(within(Duration::from_secs(10), || signal
            .token()
            .is_cancelled()));
        assert_eq!(signal.reason(), Some(LostReason::Abandoned));
    }
}
