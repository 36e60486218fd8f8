//! `redlock-core`'s plain (non-reentrant) lock with its lease renewed while it is held, as
//! Redisson offers beside its reentrant lock.

use std::time::Instant;

use redlock_core::{Error, Lease, LostReason};

use redlock_core::lock_kind::FinishOnDrop;

use crate::lock_kind::{LeaseFacts, Registration, ReleasePhase, RenewScript};
use crate::{LostSignal, Watchdog};

impl Watchdog {
    /// Takes the plain (non-reentrant) lock `name` on the watchdog's lease, retrying by the
    /// quorum's [`RetryPolicy`](redlock_core::RetryPolicy) while it is contended, and renews it
    /// until the returned lease is released or dropped. Unlike `redlock-reentrant`'s `RLock`,
    /// a second acquisition by the same task is refused as contended.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe in effect, as [`Redlock::acquire`](redlock_core::Redlock::acquire): dropping
    /// the future leaves no key and no renewal behind.
    ///
    /// # Errors
    ///
    /// As [`Redlock::acquire`](redlock_core::Redlock::acquire), and [`Error::Shutdown`] once the
    /// watchdog was shut down (a lock granted meanwhile is released again).
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
    /// tokio::select! {
    ///     reason = lease.lost() => eprintln!("lost the lock: {reason}"),
    ///     () = async { /* the work, however long it takes */ } => {}
    /// }
    /// lease.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn acquire(&self, name: &str) -> Result<RenewedLease, Error> {
        if self.is_shut_down() {
            return Err(Error::Shutdown);
        }
        let lease = self.redlock().acquire(name, self.timeout()).await?;
        // No await from the grant to here: the hold is watched before anything can drop it.
        let registration = self.register(RenewScript::plain(), lease.key(), lease.owner().clone());
        registration.set(LeaseFacts {
            renew: true,
            release: ReleasePhase::None,
        });
        registration.confirmed(lease.valid_until(), self.timeout());
        let renewed = RenewedLease {
            watchdog: self.clone(),
            lease,
            registration: Some(registration),
        };
        if self.is_shut_down() {
            // Shut down while the grant was in flight: nothing would renew it.
            drop(renewed);
            return Err(Error::Shutdown);
        }
        Ok(renewed)
    }
}

/// A plain lock renewed by a [`Watchdog`] while it is held ([`Watchdog::acquire`]).
///
/// Its lost signal fires if a renewal is refused or no majority confirms one before the
/// validity the holder can prove runs out. Dropping it stops renewal at once and spawns its
/// release on the current runtime (outside one, the lock expires within one watchdog timeout);
/// prefer [`RenewedLease::release`], which reports the outcome.
#[must_use = "dropping the lease releases the lock"]
pub struct RenewedLease {
    /// Keeps the renewal task alive for as long as the lease is held.
    watchdog: Watchdog,
    /// The grant. Never handed out: extending or releasing it behind the watchdog's back would
    /// leave the lost deadline trusting a lease the nodes no longer hold.
    lease: Lease,
    /// `None` once released.
    registration: Option<Registration>,
}

impl RenewedLease {
    /// The lock name.
    pub fn name(&self) -> &str {
        self.lease.name()
    }

    /// The lock's Redis key.
    pub fn key(&self) -> &str {
        self.lease.key()
    }

    /// The end of the longest validity a majority confirmed (the grant or a renewal). Once the
    /// lease is lost, the grant's: never later than what the holder can prove.
    pub fn valid_until(&self) -> Instant {
        self.registration
            .as_ref()
            .and_then(Registration::valid_until)
            .unwrap_or_else(|| self.lease.valid_until())
    }

    /// The signal that fires when the lock is lost.
    pub fn lost_signal(&self) -> LostSignal {
        self.registration().lost_signal()
    }

    /// Waits until the lock is lost and tells why.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future changes nothing.
    pub async fn lost(&self) -> LostReason {
        self.lost_signal().lost().await
    }

    /// Whether the lock is lost.
    pub fn is_lost(&self) -> bool {
        self.lost_signal().is_lost()
    }

    /// Stops renewing and releases the lock (compare-and-delete on every node).
    ///
    /// # Cancel safety
    ///
    /// Renewal stops at the first poll. Dropped after that, the release is finished in a
    /// spawned task (or, with no runtime left, the lock expires within one watchdog timeout);
    /// it never deletes anyone else's lock.
    ///
    /// # Errors
    ///
    /// - [`Error::LockLost`]: the lock was lost before the release (its signal had fired, or a
    ///   majority no longer held it).
    /// - [`Error::NoQuorum`]: too few nodes answered; the lock expires with its lease where the
    ///   release did not land, and is not renewed any more.
    pub async fn release(mut self) -> Result<(), Error> {
        let registration = self.registration.take().expect("present until released");
        let lost = registration.lost_signal().reason();
        registration.set(LeaseFacts {
            renew: true,
            release: ReleasePhase::Sending,
        });
        let if_dropped = FinishOnDrop::spawning(self.detached_release());
        let outcome = self.watchdog.redlock().release(&self.lease).await;
        drop(if_dropped.disarm());
        match (outcome, lost) {
            (_, Some(reason)) => Err(Error::lock_lost(self.name(), reason)),
            (Err(Error::NotOwner { .. }), None) => {
                registration.declare_lost(LostReason::NotOwner);
                Err(Error::lock_lost(self.name(), LostReason::NotOwner))
            }
            (Err(err), None) => {
                registration.declare_lost(LostReason::Abandoned);
                Err(err)
            }
            (Ok(()), None) => {
                registration.ended();
                Ok(())
            }
        }
    }

    /// The release as a task of its own, for when nobody awaits its outcome (a dropped lease or
    /// a dropped `release`); a failure only reaches the log, the lease bounds what it leaves.
    fn detached_release(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let (redlock, lease) = (self.watchdog.redlock().clone(), self.lease.clone());
        async move {
            if let Err(err) = redlock.release(&lease).await {
                tracing::debug!(lock = %lease.name(), error = %err, "a detached release failed; the lock expires with its lease");
            }
        }
    }

    fn registration(&self) -> &Registration {
        self.registration
            .as_ref()
            .expect("present until released, which consumes the lease")
    }
}

impl std::fmt::Debug for RenewedLease {
    /// The lock and its state; not the watchdog (every hold of the client).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RenewedLease")
            .field("lease", &self.lease)
            .field("released", &self.registration.is_none())
            .field(
                "lost",
                &self
                    .registration
                    .as_ref()
                    .and_then(|r| r.lost_signal().reason()),
            )
            .finish_non_exhaustive()
    }
}

impl Drop for RenewedLease {
    fn drop(&mut self) {
        let Some(registration) = self.registration.take() else {
            return;
        };
        // No renewal from here on, whatever happens to the release; the holder let go of the
        // lease, so its signal has nothing more to tell.
        registration.ended();
        // Outside a runtime nothing is spawned: the lock expires with its lease.
        redlock_core::lock_kind::spawn_cleanup(self.detached_release());
    }
}
