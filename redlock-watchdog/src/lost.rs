//! The signal a holder awaits or selects on to learn that its lock is lost: a read-only view
//! of the hold's lease record.

use std::sync::Arc;
use std::time::Instant;

use redlock_core::LostReason;
use tokio_util::sync::CancellationToken;

use crate::record::LeaseRecord;

/// Fires once, when a hold is lost, and tells why.
///
/// Cheap to clone; every clone sees the same event. [`LostSignal::token`] gives a tokio-util
/// [`CancellationToken`] to hand to work that must stop when the lock goes.
///
/// The hold is lost a margin before the end of the validity its holder can prove (see
/// [`WatchdogConfig::lost_margin`](crate::WatchdogConfig::lost_margin) and
/// [`WatchdogConfig::fixed_lost_margin`](crate::WatchdogConfig::fixed_lost_margin)) unless a
/// renewal moves that later. Past it, [`LostSignal::is_lost`], [`LostSignal::reason`] and
/// [`LostSignal::lost`] report the hold lost by themselves, and a timer thread of the library
/// cancels the token then, whatever happens to the watchdog's task or the runtime.
///
/// A view only: nothing a holder does with it delays or re-arms it. Read past its deadline, it
/// reports the loss the timer thread is about to report.
///
/// # Examples
///
/// ```no_run
/// use redlock_core::{Redlock, RedlockConfig};
/// use redlock_watchdog::{Watchdog, WatchdogConfig};
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let redlock = Redlock::new(RedlockConfig::with_nodes(["redis://127.0.0.1:6379"]))?;
/// let watchdog = Watchdog::start(redlock, WatchdogConfig::default())?;
/// let lease = watchdog.acquire("nightly-report").await?;
/// let signal = lease.lost_signal().clone();
/// let work = tokio::spawn(async move {
///     tokio::select! {
///         reason = signal.lost() => eprintln!("stopped: {reason}"),
///         () = async { /* the work */ } => {}
///     }
/// });
/// work.await?;
/// lease.release().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct LostSignal {
    record: Arc<LeaseRecord>,
}

impl std::fmt::Debug for LostSignal {
    /// Whether it fired and why; not the record (its owner).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LostSignal")
            .field("lost", &self.record.peek(Instant::now()))
            .finish_non_exhaustive()
    }
}

impl LostSignal {
    pub(crate) fn of(record: Arc<LeaseRecord>) -> Self {
        Self { record }
    }

    /// When the hold will be lost unless a renewal confirms it first, and what it will be lost
    /// to then; once lost, the instant it had. `None` before the hold is granted, and once it
    /// is released.
    pub fn deadline(&self) -> Option<(Instant, LostReason)> {
        self.record.deadline()
    }

    /// Whether the hold is lost (fired, or past its deadline).
    pub fn is_lost(&self) -> bool {
        self.reason().is_some()
    }

    /// Why the hold was lost, once it is.
    pub fn reason(&self) -> Option<LostReason> {
        self.record.reason_at(Instant::now())
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
            let token = self.record.token();
            match self.deadline() {
                Some((at, _)) => {
                    tokio::select! {
                        () = token.cancelled() => {}
                        () = tokio::time::sleep_until(tokio::time::Instant::from_std(at)) => {}
                    }
                }
                None => token.cancelled().await,
            }
        }
    }

    /// A token cancelled when the hold is lost, by its deadline at the latest (a timer thread
    /// of the library's cancels it then, whatever happens to the client, the watchdog's task or
    /// the runtime).
    pub fn token(&self) -> CancellationToken {
        self.record.token().clone()
    }
}
