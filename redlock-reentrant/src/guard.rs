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
    /// If too few nodes answer ([`Error::NoQuorum`]), nobody could retry the release once the
    /// guard is gone, so the hold is given up: renewal stops, the lost signal fires
    /// ([`LostReason::QuorumLost`]) for any nested hold of it still in use, and the lock is
    /// deleted on the nodes that answer; elsewhere it expires within its lease. A hold whose
    /// guard is gone is never renewed.
    ///
    /// # Cancel safety
    ///
    /// As [`RLock::unlock`]: dropping the future may leave the release half-applied; the hold
    /// then expires with its lease.
    ///
    /// # Errors
    ///
    /// As [`RLock::unlock`]; [`Error::LockLost`] when the hold was lost before.
    pub async fn unlock(mut self) -> Result<(), Error> {
        self.released = true;
        self.lock.unlock_or_give_up().await
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        let lock = self.lock.clone();
        redlock_core::spawn_cleanup(async move {
            if let Err(err) = lock.unlock_or_give_up().await {
                tracing::debug!(lock = %lock.name(), error = %err, "release on guard drop failed");
            }
        });
    }
}
