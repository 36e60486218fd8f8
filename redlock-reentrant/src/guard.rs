//! The RAII form of a hold: a guard that knows its owner, its fencing token and its lost signal.

use std::future::Future;

use redlock_watchdog::{LostReason, LostSignal};
use tokio_util::sync::CancellationToken;

use crate::{Error, RLock};

/// One hold of an [`RLock`], released when dropped.
///
/// The guard remembers its owner, so it can be moved into another task and unlocked there.
/// Prefer [`LockGuard::unlock`], which reports the outcome; `Drop` never blocks: it spawns the
/// release on the current runtime, or, outside one, leaves the lock to its lease.
///
/// # Examples
///
/// ```no_run
/// # async fn run(client: redlock_reentrant::LockClient) -> Result<(), redlock_reentrant::Error> {
/// let guard = client.get_lock("report").acquire().await?;
/// let token = guard.fencing_token();
/// tokio::select! {
///     reason = guard.lost() => eprintln!("stopped: lock lost ({reason})"),
///     () = write_report(token) => {}
/// }
/// guard.unlock().await?;
/// # Ok(()) }
/// # async fn write_report(_token: u64) {}
/// ```
#[must_use = "the lock is released as soon as the guard is dropped"]
#[derive(Debug)]
pub struct LockGuard {
    lock: RLock,
    token: u64,
    lost: LostSignal,
    released: bool,
}

impl LockGuard {
    pub(crate) fn new(lock: RLock, token: u64, lost: LostSignal) -> Self {
        Self {
            lock,
            token,
            lost,
            released: false,
        }
    }

    /// The lock, bound to this guard's owner.
    pub fn lock(&self) -> &RLock {
        &self.lock
    }

    /// The hold's fencing token: pass it to the resource you protect, which should refuse
    /// writes carrying a smaller token than one it has seen.
    pub fn fencing_token(&self) -> u64 {
        self.token
    }

    /// Waits until the hold is lost and says why. Select on it next to the work.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    pub fn lost(&self) -> impl Future<Output = LostReason> + Send + 'static {
        let lost = self.lost.clone();
        async move { lost.lost().await }
    }

    /// Whether the hold is lost.
    pub fn is_lost(&self) -> bool {
        self.lost.is_lost()
    }

    /// A token cancelled when the hold is lost, for work that must stop with it.
    pub fn lost_token(&self) -> CancellationToken {
        self.lost.token()
    }

    /// Releases this hold and reports the outcome.
    ///
    /// # Cancel safety
    ///
    /// As [`RLock::unlock`]: dropping the future may leave the release half-applied; the hold
    /// then expires with its lease.
    ///
    /// # Errors
    ///
    /// As [`RLock::unlock`]; [`Error::LockLost`] when the hold was lost before.
    ///
    /// If too few nodes answer ([`Error::NoQuorum`]), the release is not given up: the guard
    /// is gone, so it goes on in the background (as on drop) until it is applied or the hold
    /// is lost. A hold whose guard is gone never stays renewed.
    pub async fn unlock(mut self) -> Result<(), Error> {
        self.released = true;
        let outcome = self.lock.unlock().await;
        if matches!(outcome, Err(Error::NoQuorum { .. })) {
            release_in_background(self.lock.clone());
        }
        outcome
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if !self.released {
            release_in_background(self.lock.clone());
        }
    }
}

/// Releases one hold of `lock`, retrying with the lock's backoff while too few nodes answer,
/// until the release is applied or the hold is lost (the watchdog declares it lost when its
/// renewals miss the majority, so this ends). Needs a runtime; without one the hold is left to
/// expire.
fn release_in_background(lock: RLock) {
    redlock_core::spawn_cleanup(async move {
        let retry = lock.inner().redlock.config().retry;
        let mut attempt: u32 = 0;
        loop {
            match lock.unlock().await {
                Err(Error::NoQuorum { .. }) => {
                    tokio::time::sleep(retry.delay(attempt)).await;
                    attempt = attempt.saturating_add(1);
                }
                Err(err) => {
                    tracing::debug!(lock = %lock.name(), error = %err, "background release ended");
                    return;
                }
                Ok(()) => return,
            }
        }
    });
}
