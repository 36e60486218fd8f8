//! The RAII form of a hold: a guard that knows its owner, its fencing token and its lost signal.

use std::future::Future;

use redlock_core::OwnerToken;
use redlock_watchdog::{LostReason, LostSignal};
use tokio_util::sync::CancellationToken;

use crate::hold::Grant;
use crate::unlock::{pay, OnNoQuorum, OwedRelease};
use crate::{Error, RLock};

/// One acquisition of an [`RLock`], released when dropped.
///
/// The guard remembers its owner and its hold, so it can be moved into another task and
/// unlocked there, and it never releases a later hold of the same owner. Prefer
/// [`LockGuard::unlock`], which reports the outcome; `Drop` never blocks: it spawns the release
/// on the current runtime. Dropped outside any runtime, nothing can be sent: the hold is given
/// up at once (renewal stops, the lost signal fires with [`LostReason::Abandoned`]) and the
/// lock expires with its lease. A guard's hold is never renewed once the guard is gone.
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
    /// The hold's generation, which names it on the nodes with its owner.
    generation: u64,
    lost: LostSignal,
    release: OwedRelease,
}

impl LockGuard {
    pub(crate) fn new(lock: RLock, grant: Grant, release: OwedRelease) -> Self {
        Self {
            lock,
            token: grant.token,
            generation: grant.generation,
            lost: grant.lost,
            release,
        }
    }

    /// The hold's field on the nodes: its owner and generation (a permit's id).
    pub(crate) fn hold_field(&self) -> Result<OwnerToken, Error> {
        self.lock.hold_field(self.generation)
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

    /// Whether the hold is lost. It answers from the clock too: once the validity the holder
    /// can prove has run out, it is lost, even if the watchdog's task has not run yet.
    pub fn is_lost(&self) -> bool {
        self.lost.is_lost()
    }

    /// Why the hold was lost, once it is (see [`LockGuard::is_lost`]).
    pub fn lost_reason(&self) -> Option<LostReason> {
        self.lost.reason()
    }

    /// A token cancelled when the hold is lost, for work that must stop with it.
    pub fn lost_token(&self) -> CancellationToken {
        self.lost.token()
    }

    /// Releases this acquisition and reports the outcome.
    ///
    /// If too few nodes answer ([`Error::NoQuorum`]), nobody could retry the release once the
    /// guard is gone, so the hold is given up: renewal stops, the lost signal fires
    /// ([`LostReason::QuorumLost`]) for any nested hold of it still in use, and the lock is
    /// deleted on the nodes that answer; elsewhere it expires within its lease.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future at any await point still releases: the release is completed in a
    /// spawned task (and given up as above if no majority answers).
    ///
    /// # Errors
    ///
    /// As [`RLock::unlock`]; [`Error::LockLost`] when the hold was lost before, and
    /// [`Error::NotOwner`] when the guard's hold had already ended some other way (released
    /// through [`RLock::unlock`] by the same owner).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(lock: redlock_reentrant::RLock) -> Result<(), redlock_reentrant::Error> {
    /// let guard = lock.acquire().await?;
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub async fn unlock(self) -> Result<(), Error> {
        let Self { lost, release, .. } = self;
        match pay(release, OnNoQuorum::GiveUp).await {
            Ok(_) => Ok(()),
            // The guard's hold ended some other way; if it was lost, say so.
            Err(Error::NotOwner { name }) => match lost.reason() {
                Some(reason) => Err(Error::LockLost { name, reason }),
                None => Err(Error::NotOwner { name }),
            },
            Err(err) => Err(err),
        }
    }
}
