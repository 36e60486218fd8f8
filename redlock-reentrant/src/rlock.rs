//! `RLock`: Redisson's reentrant lock surface on the quorum.

use std::sync::Arc;
use std::time::Duration;

use redlock_core::OwnerToken;
use redlock_watchdog::LostSignal;

use crate::hold::LeaseMode;
use crate::holds::{HoldKey, Target};
use crate::inner::Inner;
use crate::inspect::{inspect, LockStatus};
use crate::kind::{Kind, LockKeys, Permits};
use crate::owner::OwnerSource;
use crate::unlock::{pay, OnNoQuorum, Owed};
use crate::wait::acquire_waiting;
use crate::{Error, LockClient, LockGuard, LockOwner, WaitStrategy};

/// A reentrant distributed lock, Redisson's `RLock` for tokio.
///
/// One Redis hash per lock on each master: the field names the hold (its owner, this client's
/// UUID plus the current tokio task or an explicit [`LockOwner`], and the hold's number), the
/// value the hold count. Nested acquisition by the same owner counts up; each
/// [`RLock::unlock`] counts down; the lock frees at zero. Another task, even of the same
/// client, is another owner and waits.
///
/// Every operation runs on the quorum of the client's masters. Waiters sleep until the holder's
/// release is announced by pub/sub (or its lease runs out); they do not poll a holder. One
/// release wakes one attempt per waiting client. If a majority still names a holder after a
/// release was heard (a new holder got in, or the release has not reached the slower masters
/// yet), the waiter looks again after a per-node timeout, then after twice as long each time
/// (never later than the holder's TTL), until the next release resets it: a release that
/// lands late on some masters costs a waiter about a per-node timeout, not a lease.
///
/// Cheap to clone. Prefer the guard-returning calls ([`RLock::acquire`],
/// [`RLock::try_acquire`]) in Rust code: the guard knows its owner, carries the fencing token and
/// the lost signal, and unlocks when dropped.
///
/// # The lease of a nested hold
///
/// A hold's lease is the longest any of its live acquisitions asked for, and no acquisition
/// ever shortens it, on any node. A nested [`lock()`](RLock::lock) on a hold taken with a fixed
/// lease turns renewal on (as Redisson does) for as long as that nested acquisition is held;
/// once it is unlocked, renewal stops and the hold keeps the lease it has then (never less than
/// its fixed one), and ends when that runs out. A nested fixed lease on a renewed hold changes
/// nothing but, if it is longer, how long the lock outlives a crash. The holder's lost signal
/// always fires before the lease it can prove runs out on a majority.
///
/// # When a hold ends
///
/// - **Released**: its last `unlock` reached a majority.
/// - **A fixed lease ran out** ([`LostReason::LeaseExpired`](crate::LostReason::LeaseExpired)):
///   letting a lease expire is a way to release (Redisson's "lock with a lease and let it
///   expire"). The lost signal fires a tenth of the lease before the validity ends, at most
///   the watchdog's lost margin
///   ([`WatchdogConfig::fixed_lost_margin`](crate::WatchdogConfig::fixed_lost_margin)), so the
///   holder can stop while the lock is still its own; from then on an `unlock` of it answers
///   [`Error::LockLost`] (and deletes what is left of it), and the owner's next acquisition
///   starts a new hold (count 1, a new fencing token).
/// - **Taken away** (force-unlocked, renewal refused or unconfirmed, a release given up): the
///   lost signal fires and every operation on the hold answers [`Error::LockLost`] until its
///   acquisitions are unwound, one `unlock` each. Then the owner can lock afresh.
///
/// A release that no majority answered leaves the hold counted, for the caller to retry
/// ([`RLock::unlock`]); the owner's next acquisition retries it first. A nested one stays
/// renewed; a final one is not renewed any more (its owner let go), so the lock frees within
/// the lease it has even if nobody retries.
///
/// # Waiting, and who goes first
///
/// The tasks of one [`LockClient`](crate::LockClient) that wait for the same lock take turns
/// in the order they asked (first come, first served), and only the task whose turn it is asks
/// the nodes: while one of them holds the lock, the others send nothing, and its release hands
/// the lock to the next with one attempt. A task that gives up (its wait ran out, its future
/// was dropped) passes its turn on; a holder whose lost signal fired, or whose fixed lease ran
/// out, holds up nobody, even before it lets go; nor does one whose final unlock no majority
/// answered (its owner let go). A nested acquisition of a hold its owner has does not queue. A
/// `lock` future polled once and then neither polled nor dropped keeps its place, as a tokio
/// `Mutex::lock` future does: drop what you no longer await. Between clients (other processes) the lock is not fair, as Redisson's
/// `RLock` is not: waiters elsewhere wake on the release's announcement and the first
/// majority wins.
///
/// # Owners, tasks and concurrent futures
///
/// The owner is the current tokio task. Inside `Runtime::block_on` (no task), it is the
/// calling OS thread: `block_on` drives its future on that thread only. Futures run
/// concurrently *in one task* (`tokio::join!`, `select!`, `FuturesUnordered`) are one owner:
/// the second `lock()` is reentrant, not a wait, so they do not exclude each other. Give each
/// its own [`LockOwner`] ([`RLock::with_owner`]), or spawn them as tasks.
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
    /// The key its holds are kept in (a read-write lock's side: that side's key).
    key: Arc<str>,
    kind: Kind,
    /// Built once, with the key: the release channel, the fencing counter, and a read-write
    /// lock's keys.
    channel: Arc<str>,
    fence_key: Arc<str>,
    keys: LockKeys,
    owner: OwnerSource,
    /// `None`: the client's.
    wait: Option<WaitStrategy>,
}

impl RLock {
    /// A lock of `kind` whose key is `lock_key`, with what else it keeps on the nodes (`keys`):
    /// a reentrant lock, a side of a read-write lock, a fair lock, a semaphore's permits.
    pub(crate) fn new(
        client: LockClient,
        name: Arc<str>,
        lock_key: &str,
        kind: Kind,
        keys: LockKeys,
    ) -> Self {
        let channel = crate::wakeup::channel_of(lock_key).into();
        let fence_key = client.inner.fence_key_of(lock_key);
        Self {
            client,
            name,
            key: kind.hold_key(lock_key).into(),
            kind,
            channel,
            fence_key,
            keys,
            owner: OwnerSource::CurrentTask,
            wait: None,
        }
    }

    /// A hold of `permits.weight` permits of the semaphore whose key is `lock_key`, owned by
    /// `owner` alone (a permit is never re-entered: each has an owner of its own).
    pub(crate) fn permit(
        client: LockClient,
        name: Arc<str>,
        lock_key: &str,
        permits: Arc<Permits>,
        owner: &LockOwner,
    ) -> Self {
        RLock {
            owner: OwnerSource::Fixed(owner.token().clone()),
            ..RLock::new(
                client,
                name,
                lock_key,
                Kind::Permit,
                LockKeys::Permits(permits),
            )
        }
    }

    /// The lock name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The same lock, owned by `owner` from whatever task uses it.
    ///
    /// An owner of another [`LockClient`] is refused by every operation
    /// ([`InvalidArgument::ForeignOwner`](crate::InvalidArgument::ForeignOwner)): each client
    /// keeps its own owners' holds, so two clients sharing one owner could both hold the lock.
    pub fn with_owner(&self, owner: &LockOwner) -> RLock {
        let source = if owner.belongs_to(&self.client.inner.id) {
            OwnerSource::Fixed(owner.token().clone())
        } else {
            OwnerSource::Foreign
        };
        RLock {
            owner: source,
            ..self.clone()
        }
    }

    /// The same lock, waiting for a holder's release with `strategy` rather than the client's
    /// ([`LockClientBuilder::wait_strategy`](crate::LockClientBuilder::wait_strategy)). A
    /// spinning strategy with a zero or inverted pause is refused by every operation
    /// ([`InvalidArgument::WaitStrategy`](crate::InvalidArgument::WaitStrategy)).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(client: redlock_reentrant::LockClient) -> Result<(), redlock_reentrant::Error> {
    /// use redlock_reentrant::WaitStrategy;
    /// let lock = client.get_lock("report").with_wait_strategy(WaitStrategy::spin());
    /// if lock.try_lock(std::time::Duration::from_secs(1), None).await? {
    ///     lock.unlock().await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn with_wait_strategy(&self, strategy: WaitStrategy) -> RLock {
        RLock {
            wait: Some(strategy),
            ..self.clone()
        }
    }

    /// Which lock this is, whatever its owner or side: its nodes and its key (both sides of a
    /// read-write lock are one lock). Two handles with the same identity are one lock.
    ///
    /// The nodes are taken in sorted order, so clients that list the same URLs in another order
    /// agree; a node written two ways (a host name and its address) is two nodes here.
    pub(crate) fn identity(&self) -> String {
        let mut nodes: Vec<String> = self
            .client
            .inner
            .redlock
            .nodes()
            .iter()
            .map(|node| node.address().to_string())
            .collect();
        nodes.sort();
        let mut identity = nodes.join(" ");
        identity.push(' ');
        // Both sides of a read-write lock, and the reentrant lock sharing the write side's key,
        // are one lock; a fair lock is a lock of its own.
        identity.push_str(match self.kind {
            Kind::Fair | Kind::Permit => &self.key,
            Kind::Reentrant | Kind::Read | Kind::Write => self.kind.lock_key(&self.key),
        });
        identity
    }

    /// The field that names this lock's hold of `generation` by its owner on the nodes.
    pub(crate) fn hold_field(&self, generation: u64) -> Result<OwnerToken, Error> {
        Ok(self.target()?.field(generation))
    }

    fn inner(&self) -> &Arc<Inner> {
        &self.client.inner
    }

    fn target(&self) -> Result<Target, Error> {
        Ok(Target {
            name: Arc::clone(&self.name),
            hold: HoldKey {
                key: Arc::clone(&self.key),
                kind: self.kind,
                owner: self.owner.resolve(&self.client.inner.id)?,
            },
            channel: Arc::clone(&self.channel),
            fence_key: Arc::clone(&self.fence_key),
            keys: self.keys.clone(),
            wait: self
                .wait
                .unwrap_or(self.client.inner.wait_strategy)
                .validate()?,
        })
    }

    /// Takes the lock, waiting as long as it takes; the watchdog renews its lease while this
    /// process lives (see [`LockClientBuilder::watchdog_timeout`](crate::LockClientBuilder::watchdog_timeout)).
    ///
    /// **Prefer [`RLock::acquire`]**: its guard releases the hold when dropped. The hold taken
    /// here belongs to this task, not to a value, so nothing releases it if the task ends
    /// before its `unlock()` (a panic unwinding through `lock(); work(); unlock();`, an early
    /// `?` return): the watchdog renews it for as long as the client lives, and no other task
    /// can unlock it. Redisson has the same hazard with threads. Where `lock()` is used, set
    /// [`LockClientBuilder::max_hold`](crate::LockClientBuilder::max_hold) as a safety net.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future at any await point leaves no hold, no waiter and no renewal behind:
    /// an attempt in flight is undone on every node by a spawned clean-up. A nested
    /// acquisition dropped half-way leaves the count as it was.
    ///
    /// # Errors
    ///
    /// [`Error::NoQuorum`] once the client's retry policy is spent, [`Error::WrongType`],
    /// [`Error::InvalidArgument`] (empty or reserved name), [`Error::LockLost`] (a nested
    /// acquisition of a hold that was lost), [`Error::Shutdown`].
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
        acquire_waiting(self.inner(), &self.target()?, None, LeaseMode::Watchdog)
            .await
            .map(|_| ())
    }

    /// Takes the lock with a fixed lease, waiting as long as it takes. The lease is never
    /// renewed: the lock frees when it runs out, unlocked or not, and the holder's lost signal
    /// fires a tenth of the lease before that, at most the watchdog's lost margin
    /// ([`LostReason::LeaseExpired`](crate::LostReason::LeaseExpired)); the owner's next
    /// acquisition is then a new hold. Nested in a hold of this owner, it never shortens that
    /// hold's lease (see [the lease of a nested hold](RLock#the-lease-of-a-nested-hold)).
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
        acquire_waiting(self.inner(), &self.target()?, None, LeaseMode::Fixed(lease))
            .await
            .map(|_| ())
    }

    /// Tries to take the lock, waiting at most about `wait` for its holder to release it
    /// (`Duration::MAX` waits as long as it takes). `lease`: `None` for the watchdog lease
    /// (renewed), `Some` for a fixed one. Returns whether the lock was taken.
    ///
    /// With `wait` zero it makes one attempt, or none when another task of this client holds
    /// the lock or waits for it first (it answers `false` at once). On N > 1 nodes, rivals trying at the very same
    /// moment can split the votes so that none gets a majority: each undoes its partial grants
    /// and, with time left to wait, tries again after a short jittered pause, so one of them
    /// wins. For "exactly one of these runs", give a small wait rather than zero.
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
        Ok(
            acquire_waiting(self.inner(), &self.target()?, Some(wait), mode)
                .await?
                .is_some(),
        )
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
        self.acquire_guard(None, LeaseMode::Watchdog)
            .await
            .map(|guard| guard.expect("waiting without a deadline only ends acquired"))
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
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(lock: redlock_reentrant::RLock) -> Result<(), redlock_reentrant::Error> {
    /// let guard = lock.acquire_with_lease(std::time::Duration::from_secs(10)).await?;
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub async fn acquire_with_lease(&self, lease: Duration) -> Result<LockGuard, Error> {
        self.acquire_guard(None, LeaseMode::Fixed(lease))
            .await
            .map(|guard| guard.expect("waiting without a deadline only ends acquired"))
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
        self.acquire_guard(Some(wait), mode).await
    }

    async fn acquire_guard(
        &self,
        wait: Option<Duration>,
        mode: LeaseMode,
    ) -> Result<Option<LockGuard>, Error> {
        // The owner is resolved here, in the caller's task, and the guard keeps it.
        let target = self.target()?;
        let lock = RLock {
            owner: OwnerSource::Fixed(target.hold.owner.clone()),
            ..self.clone()
        };
        let grant = acquire_waiting(self.inner(), &target, wait, mode).await?;
        Ok(grant.map(|grant| {
            let release = Owed::new(
                Arc::clone(self.inner()),
                target,
                Some(grant.generation),
                Some(mode),
            );
            LockGuard::new(lock, grant, release)
        }))
    }

    /// Releases one acquisition of this owner's hold; the last one frees the lock and wakes a
    /// waiter. Without a guard, it releases the latest acquisition.
    ///
    /// # Cancel safety
    ///
    /// An unlock, once called, always ends in a definite state: dropped at any await point,
    /// it is completed in a spawned task (the same release is retried, and a node where the
    /// dropped try may have landed is not taken for a lost hold); if no majority answers there either, the hold is given
    /// up (its lost signal fires, renewal stops, the lock is deleted where it can be and
    /// expires elsewhere).
    ///
    /// # Errors
    ///
    /// - [`Error::NotOwner`]: this owner holds no hold of this lock (nothing is changed).
    /// - [`Error::LockLost`]: this owner held it, but the hold was lost meanwhile (one
    ///   acquisition of it is unwound; once the last is, what is left of the hold on the nodes,
    ///   where this owner still holds the lock, is deleted at once rather than left to its
    ///   lease). A final unlock is done once every reply is in or timed
    ///   out and the answers prove that no majority can still hold the lock for this owner,
    ///   also when a master that held it does not answer: it returns `Ok` when the masters that
    ///   released it, with those that did not answer, could have made the hold a majority, and
    ///   `LockLost` when they could not (the hold had already expired on too many of them).
    /// - [`Error::NoQuorum`]: too few nodes answered after the retries. The release may have
    ///   landed on some nodes, so do not rely on the lock any more. The hold stays counted so
    ///   that calling `unlock` again (it retries the same request) or the owner's next
    ///   acquisition (it retries it first) can finish it; a final release's hold is no longer
    ///   renewed, and ends with the lease it has if nobody retries.
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
        let owed = Owed::new(Arc::clone(self.inner()), self.target()?, None, None);
        pay(owed, OnNoQuorum::KeepHold).await.map(|_| ())
    }

    /// Deletes the lock whoever holds it, waking a waiter. Returns whether a majority of nodes
    /// held it. Holders in this client are told their hold is lost before anything is sent (an
    /// operation in flight on a hold is waited for first), and no acquisition in this client
    /// that overlaps the forced unlock is granted (it is undone and retried); holders in other
    /// clients learn it at their next renewal, and until then may still believe they hold it:
    /// this is an operator's override, outside the lock's promise.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future may leave the lock deleted on some nodes only; local holders told
    /// before it was dropped stay lost.
    ///
    /// # Errors
    ///
    /// [`Error::NoQuorum`], [`Error::InvalidArgument`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(lock: redlock_reentrant::RLock) -> Result<(), redlock_reentrant::Error> {
    /// if lock.force_unlock().await? {
    ///     println!("it was held; it is free now");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn force_unlock(&self) -> Result<bool, Error> {
        crate::unlock::force_unlock(self.inner(), &self.target()?).await
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
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(lock: redlock_reentrant::RLock) -> Result<(), redlock_reentrant::Error> {
    /// println!("locked: {}", lock.is_locked().await?);
    /// # Ok(()) }
    /// ```
    pub async fn is_locked(&self) -> Result<bool, Error> {
        Ok(inspect(self.inner(), &self.target()?).await?.locked)
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
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(lock: redlock_reentrant::RLock) -> Result<(), redlock_reentrant::Error> {
    /// assert!(!lock.is_held_by_current_task().await?);
    /// # Ok(()) }
    /// ```
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
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(lock: redlock_reentrant::RLock) -> Result<(), redlock_reentrant::Error> {
    /// lock.lock().await?;
    /// assert_eq!(lock.hold_count().await?, 1);
    /// # Ok(()) }
    /// ```
    pub async fn hold_count(&self) -> Result<u32, Error> {
        Ok(inspect(self.inner(), &self.target()?).await?.hold_count)
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
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(lock: redlock_reentrant::RLock) -> Result<(), redlock_reentrant::Error> {
    /// if let Some(ttl) = lock.remaining_ttl().await? {
    ///     println!("held for {ttl:?} more");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn remaining_ttl(&self) -> Result<Option<Duration>, Error> {
        Ok(inspect(self.inner(), &self.target()?).await?.remaining_ttl)
    }

    /// The lock's status as a majority of its nodes report it, whoever holds it: locked or
    /// free, the holder's hold count, the remaining lease, and the fencing counter. One round
    /// trip, like [`RLock::is_locked`]; what `redlock status` prints.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it changes nothing.
    ///
    /// # Errors
    ///
    /// As [`RLock::is_locked`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(lock: redlock_reentrant::RLock) -> Result<(), redlock_reentrant::Error> {
    /// let status = lock.status().await?;
    /// println!("locked: {}, {} of {} nodes answered", status.locked, status.answered, status.nodes);
    /// # Ok(()) }
    /// ```
    pub async fn status(&self) -> Result<LockStatus, Error> {
        Ok(inspect(self.inner(), &self.target()?).await?.status)
    }

    /// The fencing token of this owner's current hold: strictly greater than every earlier
    /// holder's, the same for nested acquisitions. `None` when this owner holds nothing live.
    pub fn fencing_token(&self) -> Option<u64> {
        let target = self.target().ok()?;
        self.inner().holds.get(&target.hold)?.token()
    }

    /// The lost signal of this owner's current hold, if it has one (live, or lost and not yet
    /// unwound).
    pub fn lost_signal(&self) -> Option<LostSignal> {
        let target = self.target().ok()?;
        self.inner().holds.get(&target.hold)?.lost()
    }
}
