//! The watchdog handle: registers holds and owns the one renewal task of a client.

use std::sync::Arc;
use std::time::Duration;

use redlock_core::{InvalidArgument, OwnerToken, Redlock};

use crate::lock_kind::{Registration, RenewScript};
use crate::shared::Shared;
use crate::{LostReason, WatchdogConfig, WatchdogStats};

/// Renews the leases of held locks while their holder lives, and tells a holder when its lock
/// is lost.
///
/// One task per watchdog renews every registered hold each [`WatchdogConfig::renew_interval`],
/// in batches per node (compare-and-`PEXPIRE`, never recreating a lock that is gone). A renewal
/// confirmed by a majority moves the hold's validity forward; a majority answering "not held"
/// loses it at once; renewals that keep failing lose it just before its validity runs out, so
/// the holder hears of it while the lock is still its own.
///
/// It knows nothing of a lock's data: each hold is registered with its lock kind's
/// [`RenewScript`], and holds of several kinds are renewed side by side. A renewal only ever
/// extends a lease: it never shortens a TTL that a longer lease set. [`Watchdog::acquire`]
/// takes `redlock-core`'s plain (non-reentrant) lock with renewal.
///
/// Dropping the last handle stops the task; held locks then expire within one timeout.
///
/// A lock kind registers each hold it takes ([`Watchdog::register`], see
/// [`lock_kind`](crate::lock_kind)); most users never do, and meet the watchdog through
/// `redlock-reentrant`'s `RLock` or [`Watchdog::acquire`].
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
///     reason = lease.lost() => eprintln!("lock lost: {reason}"),
///     () = async { /* the work */ } => {}
/// }
/// lease.release().await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Watchdog {
    shared: Arc<Shared>,
}

impl Watchdog {
    /// Checks the configuration and spawns the renewal task on the current tokio runtime.
    ///
    /// # Errors
    ///
    /// [`InvalidArgument::LeaseTooShort`] when the timeout cannot hold against the per-node
    /// timeout and clock drift (it must exceed three times their sum), or
    /// [`InvalidArgument::ZeroLease`] for a zero timeout or interval.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime.
    pub fn start(redlock: Redlock, config: WatchdogConfig) -> Result<Self, InvalidArgument> {
        config.check(redlock.config())?;
        let config = WatchdogConfig {
            batch_size: config.batch_size.max(1),
            ..config
        };
        let shared = Arc::new(Shared::new(redlock, config));
        // The task holds the registry weakly: dropping the last handle drops it, which cancels
        // `shutdown` and ends the task.
        tokio::spawn(crate::renewal::run(Arc::downgrade(&shared)));
        Ok(Self { shared })
    }

    /// Registers a hold of the lock `key` by `owner`, renewed with its lock kind's `script`;
    /// pending until a grant is [`confirmed`](Registration::confirmed). Register before
    /// sending an acquisition whose hold must be known the moment it exists (or right after a
    /// plain grant, whose lease runs meanwhile).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use std::time::Instant;
    /// use redlock_core::{OwnerToken, Redlock, RedlockConfig};
    /// use redlock_watchdog::lock_kind::{LeaseFacts, ReleasePhase, RenewScript};
    /// use redlock_watchdog::{Watchdog, WatchdogConfig};
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let redlock = Redlock::new(RedlockConfig::with_nodes(["redis://127.0.0.1:6379"]))?;
    /// let watchdog = Watchdog::start(redlock, WatchdogConfig::default())?;
    /// // A plain lock's key and owner token; another kind of lock brings its own script.
    /// let owner = OwnerToken::new();
    /// let registration = watchdog.register(RenewScript::plain(), "redlock:report", owner.clone());
    /// // ... acquire the lock `redlock:report` for that owner; a majority granted it:
    /// # let valid_until = Instant::now();
    /// registration.set(LeaseFacts { renew: true, release: ReleasePhase::None });
    /// registration.confirmed(valid_until, watchdog.timeout());
    /// let lost = registration.lost_signal();
    /// tokio::select! {
    ///     reason = lost.lost() => eprintln!("lock lost: {reason}"),
    ///     () = async { /* the work */ } => {}
    /// }
    /// // First thing when unlocking: no renewal while the release is sent.
    /// registration.set(LeaseFacts { renew: true, release: ReleasePhase::Sending });
    /// // ... release the lock; once a majority confirmed it:
    /// registration.ended(); // its signal will never fire (dropped without this: abandoned)
    /// # Ok(()) }
    /// ```
    pub fn register(
        &self,
        script: RenewScript,
        key: impl Into<String>,
        owner: OwnerToken,
    ) -> Registration {
        self.shared.register(script, key.into(), owner)
    }

    /// The quorum client the watchdog renews through.
    pub fn redlock(&self) -> &Redlock {
        &self.shared.redlock
    }

    /// The configuration.
    pub fn config(&self) -> &WatchdogConfig {
        &self.shared.config
    }

    /// The lease every renewal sets.
    pub fn timeout(&self) -> Duration {
        self.shared.config.timeout
    }

    /// How many holds are registered (pending ones included).
    pub fn registered(&self) -> usize {
        self.shared.entries.len()
    }

    /// What the watchdog has done so far.
    pub fn stats(&self) -> WatchdogStats {
        self.shared.counters.snapshot()
    }

    /// Stops renewing. Holds still registered are told they are lost
    /// ([`LostReason::Shutdown`]); their locks expire within one timeout.
    pub fn shutdown(&self) {
        self.shared.shutdown.cancel();
        let ids: Vec<u64> = self
            .shared
            .entries
            .iter()
            .map(|entry| *entry.key())
            .collect();
        for id in ids {
            self.shared.declare_lost(id, LostReason::Shutdown);
        }
    }

    /// Whether [`Watchdog::shutdown`] was called.
    pub fn is_shut_down(&self) -> bool {
        self.shared.shutdown.is_cancelled()
    }
}
