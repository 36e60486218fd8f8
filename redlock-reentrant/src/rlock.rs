//! `RLock`: Redisson's reentrant lock surface on the quorum, with the waiting loop.

use std::sync::Arc;
use std::time::Duration;

use redlock_watchdog::LostSignal;
use tokio::time::Instant;

use crate::acquire::{attempt, Acquired, LeaseMode, Outcome};
use crate::client::Inner;
use crate::holds::{HoldKey, Target};
use crate::inspect::inspect;
use crate::owner::OwnerSource;
use crate::unlock::OnNoQuorum;
use crate::{Error, LockClient, LockGuard, LockOwner};

/// A reentrant distributed lock, Redisson's `RLock` for tokio.
///
/// One Redis hash per lock on each master: the field is the owner (this client's UUID plus the
/// current tokio task, or an explicit [`LockOwner`]), the value the hold count. Nested
/// acquisition by the same owner counts up; each [`RLock::unlock`] counts down; the lock frees at
/// zero. Another task, even of the same client, is another owner and waits.
///
/// Every operation runs on the quorum of the client's masters. Waiters sleep until the holder's
/// release is announced by pub/sub (or its lease runs out), never by polling.
///
/// Cheap to clone. Prefer the guard-returning calls ([`RLock::acquire`],
/// [`RLock::try_acquire`]) in Rust code: the guard knows its owner, carries the fencing token and
/// the lost signal, and unlocks when dropped.
///
/// # Owner outside a task
///
/// Inside `Runtime::block_on` (no task), the owner is the calling OS thread: `block_on` drives
/// its future on that thread only.
///
/// # Examples
///
/// ```no_run
/// # async fn run(client: redlock_reentrant::LockClient) -> Result<(), redlock_reentrant::Error> {
/// let lock = client.get_lock("orders:42");
/// lock.lock().await?;            // waits; the watchdog renews the lease
/// lock.lock().await?;            // same task: reentrant, count 2
/// assert_eq!(lock.hold_count().await?, 2);
/// lock.unlock().await?;
/// lock.unlock().await?;          // free
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct RLock {
    client: LockClient,
    name: Arc<str>,
    key: Arc<str>,
    owner: OwnerSource,
}

impl RLock {
    pub(crate) fn new(
        client: LockClient,
        name: Arc<str>,
        key: Arc<str>,
        owner: OwnerSource,
    ) -> Self {
        Self {
            client,
            name,
            key,
            owner,
        }
    }

    /// The lock name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The same lock, owned by `owner` from whatever task uses it.
    pub fn with_owner(&self, owner: &LockOwner) -> RLock {
        RLock {
            owner: OwnerSource::Fixed(Arc::clone(&owner.0)),
            ..self.clone()
        }
    }

    fn inner(&self) -> &Arc<Inner> {
        &self.client.inner
    }

    fn target(&self) -> Target {
        Target {
            name: Arc::clone(&self.name),
            hold: HoldKey {
                key: Arc::clone(&self.key),
                owner: self.owner.resolve(&self.client.inner.id),
            },
        }
    }

    /// Takes the lock, waiting as long as it takes; the watchdog renews its lease while this
    /// process lives (see [`LockClientBuilder::watchdog_timeout`](crate::LockClientBuilder::watchdog_timeout)).
    ///
    /// # Cancel safety
    ///
    /// Dropping the future at any await point leaves no hold, no waiter and no renewal behind:
    /// an attempt in flight is undone on every node by a spawned clean-up.
    ///
    /// # Errors
    ///
    /// [`Error::NoQuorum`] once the client's retry policy is spent, [`Error::WrongType`],
    /// [`Error::InvalidArgument`] (empty name), [`Error::LockLost`] (a nested acquisition of a
    /// hold that was lost), [`Error::ShutDown`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(lock: redlock_reentrant::RLock) -> Result<(), redlock_reentrant::Error> {
    /// lock.lock().await?;
    /// lock.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub async fn lock(&self) -> Result<(), Error> {
        self.acquire_waiting(None, LeaseMode::Watchdog)
            .await
            .map(|_| ())
    }

    /// Takes the lock with a fixed lease, waiting as long as it takes. The lease is never
    /// renewed: the lock frees when it runs out, unlocked or not.
    ///
    /// # Cancel safety
    ///
    /// As [`RLock::lock`].
    ///
    /// # Errors
    ///
    /// As [`RLock::lock`], and [`Error::InvalidArgument`] for a zero or too short lease.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(lock: redlock_reentrant::RLock) -> Result<(), redlock_reentrant::Error> {
    /// lock.lock_with_lease(std::time::Duration::from_secs(10)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn lock_with_lease(&self, lease: Duration) -> Result<(), Error> {
        self.acquire_waiting(None, LeaseMode::Fixed(lease))
            .await
            .map(|_| ())
    }

    /// Tries to take the lock, waiting at most about `wait` for its holder to release it.
    /// `lease`: `None` for the watchdog lease (renewed), `Some` for a fixed one.
    /// Returns whether the lock was taken.
    ///
    /// With `wait` zero it makes one attempt. On N > 1 nodes, rivals trying at the very same
    /// moment can split the votes so that none gets a majority: each undoes its partial grants
    /// and answers `false`. For "exactly one of these runs", give a small wait: the undo
    /// announces a release, and the waiters try again.
    ///
    /// # Cancel safety
    ///
    /// As [`RLock::lock`].
    ///
    /// # Errors
    ///
    /// As [`RLock::lock_with_lease`]. Contention is not an error: it answers `false`.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(lock: redlock_reentrant::RLock) -> Result<(), redlock_reentrant::Error> {
    /// use std::time::Duration;
    /// if lock.try_lock(Duration::from_secs(2), None).await? {
    ///     // ... work ...
    ///     lock.unlock().await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_lock(&self, wait: Duration, lease: Option<Duration>) -> Result<bool, Error> {
        let mode = lease.map_or(LeaseMode::Watchdog, LeaseMode::Fixed);
        Ok(self.acquire_waiting(Some(wait), mode).await?.is_some())
    }

    /// [`RLock::lock`], returning a guard that unlocks when dropped.
    ///
    /// # Cancel safety
    ///
    /// As [`RLock::lock`].
    ///
    /// # Errors
    ///
    /// As [`RLock::lock`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(lock: redlock_reentrant::RLock) -> Result<(), redlock_reentrant::Error> {
    /// let guard = lock.acquire().await?;
    /// println!("token {}", guard.fencing_token());
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub async fn acquire(&self) -> Result<LockGuard, Error> {
        let acquired = self.acquire_waiting(None, LeaseMode::Watchdog).await?;
        Ok(self.guard(acquired.expect("waiting without a deadline only ends acquired")))
    }

    /// [`RLock::lock_with_lease`], returning a guard that unlocks when dropped.
    ///
    /// # Cancel safety
    ///
    /// As [`RLock::lock`].
    ///
    /// # Errors
    ///
    /// As [`RLock::lock_with_lease`].
    pub async fn acquire_with_lease(&self, lease: Duration) -> Result<LockGuard, Error> {
        let acquired = self.acquire_waiting(None, LeaseMode::Fixed(lease)).await?;
        Ok(self.guard(acquired.expect("waiting without a deadline only ends acquired")))
    }

    /// [`RLock::try_lock`], returning a guard when the lock was taken.
    ///
    /// # Cancel safety
    ///
    /// As [`RLock::lock`].
    ///
    /// # Errors
    ///
    /// As [`RLock::try_lock`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(lock: redlock_reentrant::RLock) -> Result<(), redlock_reentrant::Error> {
    /// use std::time::Duration;
    /// match lock.try_acquire(Duration::ZERO, None).await? {
    ///     Some(guard) => guard.unlock().await?,
    ///     None => println!("busy"),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_acquire(
        &self,
        wait: Duration,
        lease: Option<Duration>,
    ) -> Result<Option<LockGuard>, Error> {
        let mode = lease.map_or(LeaseMode::Watchdog, LeaseMode::Fixed);
        Ok(self
            .acquire_waiting(Some(wait), mode)
            .await?
            .map(|acquired| self.guard(acquired)))
    }

    fn guard(&self, acquired: Acquired) -> LockGuard {
        let owner = self.owner.resolve(&self.client.inner.id);
        let lock = RLock {
            owner: OwnerSource::Fixed(owner),
            ..self.clone()
        };
        LockGuard::new(lock, acquired.token, acquired.lost)
    }

    /// Releases one hold of this owner; the last one frees the lock and wakes a waiter.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future may leave the release applied on some nodes only; the hold is then
    /// neither renewed nor released, and expires with its lease. Calling `unlock` again
    /// completes it (the same request id is reused, so nodes that applied it do not answer
    /// "not owner").
    ///
    /// # Errors
    ///
    /// - [`Error::NotOwner`]: this owner holds no hold of this lock (nothing is changed).
    /// - [`Error::LockLost`]: this owner held it, but the hold was lost meanwhile.
    /// - [`Error::NoQuorum`]: too few nodes answered after the retries; call again.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(lock: redlock_reentrant::RLock) -> Result<(), redlock_reentrant::Error> {
    /// lock.lock().await?;
    /// lock.unlock().await?;
    /// assert!(matches!(lock.unlock().await, Err(redlock_reentrant::Error::NotOwner { .. })));
    /// # Ok(()) }
    /// ```
    pub async fn unlock(&self) -> Result<(), Error> {
        crate::unlock::unlock(self.inner(), &self.target(), OnNoQuorum::KeepHold)
            .await
            .map(|_| ())
    }

    /// As [`unlock`](Self::unlock), but a release no majority answered gives the whole hold up
    /// (for guards: nobody can call again once the guard is gone).
    pub(crate) async fn unlock_or_give_up(&self) -> Result<(), Error> {
        crate::unlock::unlock(self.inner(), &self.target(), OnNoQuorum::GiveUp)
            .await
            .map(|_| ())
    }

    /// Deletes the lock whoever holds it, waking a waiter. Returns whether a majority of nodes
    /// held it. Holders in this client are told their hold is lost at once; holders elsewhere
    /// learn it at their next renewal.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future may leave the lock deleted on some nodes only.
    ///
    /// # Errors
    ///
    /// [`Error::NoQuorum`], [`Error::InvalidArgument`].
    pub async fn force_unlock(&self) -> Result<bool, Error> {
        crate::unlock::force_unlock(self.inner(), &self.target()).await
    }

    /// Whether anyone holds the lock on a majority of nodes.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it changes nothing.
    ///
    /// # Errors
    ///
    /// [`Error::NoQuorum`], [`Error::WrongType`], [`Error::InvalidArgument`].
    pub async fn is_locked(&self) -> Result<bool, Error> {
        Ok(inspect(self.inner(), &self.target()).await?.locked)
    }

    /// Whether this owner (the current task, or the explicit owner) holds the lock.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it changes nothing.
    ///
    /// # Errors
    ///
    /// As [`RLock::is_locked`].
    pub async fn is_held_by_current_task(&self) -> Result<bool, Error> {
        Ok(self.hold_count().await? > 0)
    }

    /// This owner's hold count on a majority of nodes; 0 when it does not hold the lock.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it changes nothing.
    ///
    /// # Errors
    ///
    /// As [`RLock::is_locked`].
    pub async fn hold_count(&self) -> Result<u32, Error> {
        Ok(inspect(self.inner(), &self.target()).await?.hold_count)
    }

    /// How long the lock's lease still runs on a majority of nodes; `None` when it is not held.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it changes nothing.
    ///
    /// # Errors
    ///
    /// As [`RLock::is_locked`].
    pub async fn remaining_ttl(&self) -> Result<Option<Duration>, Error> {
        Ok(inspect(self.inner(), &self.target()).await?.remaining_ttl)
    }

    /// The fencing token of this owner's current hold: strictly greater than every earlier
    /// holder's, the same for nested acquisitions. `None` when this owner holds nothing.
    pub fn fencing_token(&self) -> Option<u64> {
        let target = self.target();
        self.inner().holds.get(&target.hold)?.token()
    }

    /// The lost signal of this owner's current hold, if it holds the lock.
    pub fn lost_signal(&self) -> Option<LostSignal> {
        let target = self.target();
        self.inner().holds.get(&target.hold)?.lost()
    }

    /// Attempts until acquired, or until `wait` (if any) has passed while the lock is held by
    /// someone else. Between attempts it sleeps until a release is announced or the holder's
    /// lease runs out, whichever comes first.
    async fn acquire_waiting(
        &self,
        wait: Option<Duration>,
        mode: LeaseMode,
    ) -> Result<Option<Acquired>, Error> {
        let inner = self.inner();
        let target = self.target();
        let deadline = wait.map(|wait| Instant::now() + wait);
        let policy = inner.redlock.config().retry;
        let mut retries = 0;
        let mut subscription = None;
        loop {
            // Listen before trying, so a release between the attempt and the sleep still wakes us.
            let mut notified = subscription
                .as_ref()
                .map(|s: &crate::wakeup::Subscription| Box::pin(s.notify().notified()));
            if let Some(notified) = notified.as_mut() {
                notified.as_mut().enable();
            }
            let left = || deadline.map(|d| d.saturating_duration_since(Instant::now()));
            match attempt(inner, &target, mode).await {
                Ok(Outcome::Acquired(acquired)) => return Ok(Some(acquired)),
                Ok(Outcome::Held { ttl }) => {
                    retries = 0;
                    if left() == Some(Duration::ZERO) {
                        return Ok(None);
                    }
                    if subscription.is_none() {
                        drop(notified);
                        subscription = Some(inner.wakeups.subscribe(&target.channel()).await);
                        continue; // try again now that releases reach us
                    }
                    let fallback = [ttl, left()].into_iter().flatten().min();
                    let sleep = async {
                        match fallback {
                            Some(fallback) => tokio::time::sleep(fallback).await,
                            None => std::future::pending().await,
                        }
                    };
                    tokio::select! {
                        () = async { if let Some(n) = notified { n.await } } => {}
                        () = sleep => {}
                    }
                }
                Err(err) if err.is_retryable() && retries < policy.retries => {
                    let pause = policy.delay(retries);
                    retries += 1;
                    if left().is_some_and(|left| left <= pause) {
                        return Err(err);
                    }
                    tokio::time::sleep(pause).await;
                }
                Err(err) => return Err(err),
            }
        }
    }
}
