//! `RPermitExpirableSemaphore`: at most N permits out at once, each held by a holder with a
//! lease of its own, on one master.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use redlock_core::lock_kind::{FanOut, ScriptCall};
use redlock_core::redis::FromRedisValue;
use redlock_core::{InvalidArgument, LostReason};
use tokio_util::sync::CancellationToken;

use crate::kind::{permit_count_key, FixedCount, Kind, Permits};
use crate::lua::{PermitsChanged, PermitsStatus, PERMITS_SET, PERMITS_STATUS, UNLOCK_PERMIT};
use crate::{Error, LockClient, LockGuard, RLock, WaitStrategy};

/// A semaphore whose permits expire with their holders: Redisson's
/// `RPermitExpirableSemaphore` for tokio, without its leaks. At most [`permits`] permits are
/// out at once, across every process and host.
///
/// - **Every permit has a holder and a lease.** [`acquire`] takes permits on the watchdog's
///   lease, renewed while this process lives (never an infinite lease); [`try_acquire`] takes
///   a fixed lease or the watchdog's. A crashed holder's permits come back within its lease,
///   whatever the other holders do: each permit's deadline is its own, on the server's clock.
/// - **A [`Permit`] is a guard**: it releases its permits when dropped, has an id (for
///   [`release`] from another process), a fencing token, and a lost signal that fires when
///   the permits are gone before their release (lease run out, renewal refused, released by
///   id elsewhere, the semaphore deleted).
/// - **Releases are owner-checked and never make permits.** A permit is released once; a
///   second or unknown release is an error ([`InvalidArgument::UnknownPermit`]), so the
///   permits out never exceed the count and nobody can release more than was taken.
/// - **Waiters are woken by every release** (pub/sub) and ask again, however many permits
///   each wants: a waiter for several permits is never left asleep while they are free. Every
///   wait is also bounded by the earliest lease out, so a lost message costs latency only.
///   The semaphore is not fair: a waiter for one permit may go in before a waiter for three.
/// - **The count is configuration**, kept on the server until changed or [`delete`]d:
///   [`try_set_permits`], [`set_permits`], [`add_permits`], [`drain_permits`]. An unset
///   semaphore has none. Lowering it below the permits out takes none back: no new permit is
///   granted until enough are released.
/// - **On several masters, a count fixed by the client and a larger quorum.** A semaphore of
///   more than one permit is not sound on a majority of independent masters (three holders of
///   a 2-permit semaphore can each win two of three masters), so
///   [`LockClient::get_permit_expirable_semaphore`] (the count set on the master) refuses a
///   client of several ([`InvalidArgument::UnsoundOnQuorum`]). [`LockClient::get_quorum_semaphore`]
///   fixes the count k in the client and asks `floor(k·N/(k+1)) + 1` of N masters for each
///   permit ([`quorum`]): holders of more than k permits would need more grants than the
///   masters can give. Its count verbs are refused; [`status`] says the most permits out on
///   any master that answered. A Redis Cluster member is one master.
///
/// [`permits`]: RPermitExpirableSemaphore::permits
/// [`acquire`]: RPermitExpirableSemaphore::acquire
/// [`try_acquire`]: RPermitExpirableSemaphore::try_acquire
/// [`release`]: RPermitExpirableSemaphore::release
/// [`delete`]: RPermitExpirableSemaphore::delete
/// [`try_set_permits`]: RPermitExpirableSemaphore::try_set_permits
/// [`set_permits`]: RPermitExpirableSemaphore::set_permits
/// [`add_permits`]: RPermitExpirableSemaphore::add_permits
/// [`drain_permits`]: RPermitExpirableSemaphore::drain_permits
/// [`quorum`]: RPermitExpirableSemaphore::quorum
/// [`status`]: RPermitExpirableSemaphore::status
///
/// # Examples
///
/// ```no_run
/// # async fn run(client: redlock_reentrant::LockClient) -> Result<(), redlock_reentrant::Error> {
/// // At most three workers call the payment provider at once.
/// let calls = client.get_permit_expirable_semaphore("payment-provider")?;
/// calls.try_set_permits(3).await?;
/// let permit = calls.acquire(1).await?;
/// tokio::select! {
///     reason = permit.lost() => eprintln!("lost the permit: {reason}"),
///     () = call_provider() => {}
/// }
/// permit.release().await?;
/// # Ok(()) }
/// # async fn call_provider() {}
/// ```
#[derive(Debug, Clone)]
pub struct RPermitExpirableSemaphore {
    client: LockClient,
    name: Arc<str>,
    /// The semaphore's key: its permits hash and count are kept beside it.
    key: Arc<str>,
    holders: Arc<str>,
    count_key: Arc<str>,
    channel: Arc<str>,
    /// `None`: the client's.
    wait: Option<WaitStrategy>,
    /// The count its client fixed, sound on the client's masters; `None`: the count set on
    /// the one master.
    fixed: Option<FixedCount>,
}

/// What a semaphore's master says of it (see [`RPermitExpirableSemaphore::status`]).
///
/// A snapshot: by the time it is read, permits may have come and gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct SemaphoreStatus {
    /// Whether the count of permits is set (an unset semaphore has none).
    pub set: bool,
    /// How many permits the semaphore has.
    pub permits: u32,
    /// How many are out: held, their lease not run out. May exceed `permits` after the count
    /// was lowered.
    pub acquired: u32,
}

impl SemaphoreStatus {
    /// How many permits are free: `permits - acquired`, 0 when more are out than the count.
    pub fn available(&self) -> u32 {
        self.permits.saturating_sub(self.acquired)
    }
}

/// The id of a permit out: give it to [`RPermitExpirableSemaphore::release`] to release the
/// permit from anywhere (another task, process or host). It names the permit's holder on the
/// server; `Debug` does not show it.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct PermitId(String);

impl PermitId {
    /// A permit id received as text (from [`PermitId::as_str`] in another process). Text that
    /// no permit could have as its id is refused by the release
    /// ([`InvalidArgument::UnknownPermit`]).
    pub fn new(id: impl Into<String>) -> Self {
        Self(id.into())
    }

    /// The id as text, to hand to another process.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether a permit could have this id: a hold's field (`{owner}:{number}`), never one of
    /// the permits hash's own fields (`~`, `@…`).
    fn is_well_formed(&self) -> bool {
        let Some((owner, number)) = self.0.rsplit_once(':') else {
            return false;
        };
        !owner.is_empty()
            && !owner.starts_with(['~', '@'])
            && !number.is_empty()
            && number.bytes().all(|byte| byte.is_ascii_digit())
    }
}

impl std::fmt::Debug for PermitId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PermitId(..)")
    }
}

/// Permits out, held until released or dropped (a guard, as [`LockGuard`]): the watchdog
/// renews an [`RPermitExpirableSemaphore::acquire`]d permit while this process lives; a fixed
/// lease is never renewed.
#[must_use = "the permits are released as soon as the permit is dropped"]
#[derive(Debug)]
pub struct Permit {
    guard: LockGuard,
    id: PermitId,
    permits: u32,
}

impl Permit {
    /// The permit's id (see [`RPermitExpirableSemaphore::release`]).
    pub fn id(&self) -> &PermitId {
        &self.id
    }

    /// How many permits it holds.
    pub fn permits(&self) -> u32 {
        self.permits
    }

    /// Its fencing token: greater than every token handed out by the master before it.
    pub fn fencing_token(&self) -> u64 {
        self.guard.fencing_token()
    }

    /// Waits until the permits are lost (before their release) and says why. Select on it
    /// next to the work.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    pub fn lost(&self) -> impl Future<Output = LostReason> + Send + 'static {
        self.guard.lost()
    }

    /// Whether the permits are lost (see [`LockGuard::is_lost`]).
    pub fn is_lost(&self) -> bool {
        self.guard.is_lost()
    }

    /// Why the permits were lost, once they are.
    pub fn lost_reason(&self) -> Option<LostReason> {
        self.guard.lost_reason()
    }

    /// A token cancelled when the permits are lost, for work that must stop with them.
    pub fn lost_token(&self) -> CancellationToken {
        self.guard.lost_token()
    }

    /// Releases the permits and wakes the waiters.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future at any await point still releases: the release is completed in a
    /// spawned task.
    ///
    /// # Errors
    ///
    /// [`Error::LockLost`] when the permits were lost before (their lease ran out, they were
    /// released by id, the semaphore was deleted); [`Error::NoQuorum`] when the master did
    /// not answer (the permits are given up: they come back with their lease).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(jobs: redlock_reentrant::RPermitExpirableSemaphore) -> Result<(), redlock_reentrant::Error> {
    /// let permit = jobs.acquire(2).await?;
    /// permit.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn release(self) -> Result<(), Error> {
        self.guard.unlock().await
    }
}

impl RPermitExpirableSemaphore {
    pub(crate) fn new(client: LockClient, name: String) -> Result<Self, Error> {
        crate::one_master::refuse_quorum(
            &client.inner,
            "a semaphore whose count is set on the masters",
            "each master would count only the permits it granted, and holders that each won a \
             different majority could together hold more permits than the semaphore has; use \
             one master, or LockClient::get_quorum_semaphore (a count fixed by the client, \
             granted by enough masters)",
        )?;
        Ok(Self::build(client, name, None))
    }

    /// The semaphore `name` of `permits` permits fixed by this client, on all its masters.
    pub(crate) fn new_fixed(client: LockClient, name: String, permits: u32) -> Result<Self, Error> {
        if permits == 0 {
            return Err(InvalidArgument::ZeroPermits { name }.into());
        }
        let nodes = client.inner.redlock.nodes().len();
        Ok(Self::build(
            client,
            name,
            Some(FixedCount::new(permits, nodes)),
        ))
    }

    fn build(client: LockClient, name: String, fixed: Option<FixedCount>) -> Self {
        let key = client.inner.redlock.config().key_for(&name);
        Self {
            holders: Kind::Permit.hold_key(&key).into(),
            count_key: permit_count_key(&key).into(),
            channel: crate::wakeup::channel_of(&key).into(),
            key: key.into(),
            name: name.into(),
            client,
            wait: None,
            fixed,
        }
    }

    /// The semaphore's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The count its client fixed ([`LockClient::get_quorum_semaphore`]), or `None` when the
    /// count is the one set on its master.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn run(client: redlock_reentrant::LockClient) -> Result<(), redlock_reentrant::Error> {
    /// let calls = client.get_quorum_semaphore("payment-provider", 3)?;
    /// assert_eq!(calls.fixed_permits(), Some(3));
    /// # Ok(()) }
    /// ```
    pub fn fixed_permits(&self) -> Option<u32> {
        self.fixed.map(|fixed| fixed.permits)
    }

    /// How many of the client's masters must grant each acquisition (and confirm each
    /// renewal): 1 on one master; `floor(k·N/(k+1)) + 1` of N for a count of k fixed by the
    /// client ([`ack_quorum`](redlock_core::quorum::ack_quorum)). The semaphore tolerates
    /// `N - quorum` masters down.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn run(client: redlock_reentrant::LockClient) -> Result<(), redlock_reentrant::Error> {
    /// // On five masters, three permits need four of them: one may be down.
    /// let calls = client.get_quorum_semaphore("payment-provider", 3)?;
    /// println!("{} masters must grant each permit", calls.quorum());
    /// # Ok(()) }
    /// ```
    pub fn quorum(&self) -> usize {
        self.fixed
            .map_or_else(|| self.client.inner.redlock.quorum(), |fixed| fixed.quorum)
    }

    /// The same semaphore, its waiters waiting with `strategy` rather than the client's (see
    /// [`RLock::with_wait_strategy`]).
    pub fn with_wait_strategy(&self, strategy: WaitStrategy) -> Self {
        Self {
            wait: Some(strategy),
            ..self.clone()
        }
    }

    /// Takes `permits` permits, waiting as long as it takes; the watchdog renews their lease
    /// while this process lives, and they come back within it when the process dies.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future at any await point leaves no permit, no waiter and no renewal
    /// behind: an attempt in flight is undone by a spawned clean-up.
    ///
    /// # Errors
    ///
    /// [`InvalidArgument::ZeroPermits`], [`InvalidArgument::TooManyPermits`] (more than the
    /// semaphore has: the wait could never end), [`InvalidArgument::EmptyName`],
    /// [`Error::WrongType`] (the semaphore's keys hold something else),
    /// [`InvalidArgument::PermitCountDiffers`] (a master has another count than the one its
    /// client fixed), [`Error::NoQuorum`] once the client's retry policy is spent,
    /// [`Error::Shutdown`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(jobs: redlock_reentrant::RPermitExpirableSemaphore) -> Result<(), redlock_reentrant::Error> {
    /// let permit = jobs.acquire(1).await?;
    /// // ... the work ...
    /// permit.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn acquire(&self, permits: u32) -> Result<Permit, Error> {
        let lock = self.permit_lock(permits)?;
        Self::permit(lock.acquire().await?, permits)
    }

    /// Takes `permits` permits if they are free within `wait` (`Duration::ZERO`: one look),
    /// with a fixed `lease` (never renewed), or the watchdog's with `None`. `None` when they
    /// were not free in time.
    ///
    /// # Cancel safety
    ///
    /// As [`RPermitExpirableSemaphore::acquire`].
    ///
    /// # Errors
    ///
    /// As [`RPermitExpirableSemaphore::acquire`], and [`InvalidArgument::ZeroLease`] or
    /// [`InvalidArgument::LeaseTooShort`] for a lease that can never be valid.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(jobs: redlock_reentrant::RPermitExpirableSemaphore) -> Result<(), redlock_reentrant::Error> {
    /// use std::time::Duration;
    /// match jobs.try_acquire(2, Duration::from_secs(5), Some(Duration::from_secs(60))).await? {
    ///     Some(permit) => permit.release().await?,
    ///     None => println!("busy"),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_acquire(
        &self,
        permits: u32,
        wait: Duration,
        lease: Option<Duration>,
    ) -> Result<Option<Permit>, Error> {
        let lock = self.permit_lock(permits)?;
        match lock.try_acquire(wait, lease).await? {
            Some(guard) => Self::permit(guard, permits).map(Some),
            None => Ok(None),
        }
    }

    /// The lock of a hold of `permits` permits, with an owner of its own: a permit is never
    /// re-entered, and is released once.
    fn permit_lock(&self, permits: u32) -> Result<RLock, Error> {
        if permits == 0 {
            return Err(InvalidArgument::ZeroPermits {
                name: self.name.to_string(),
            }
            .into());
        }
        if let Some(fixed) = self.fixed.filter(|fixed| permits > fixed.permits) {
            return Err(InvalidArgument::TooManyPermits {
                name: self.name.to_string(),
                asked: permits,
                count: fixed.permits,
            }
            .into());
        }
        let lock = RLock::permit(
            self.client.clone(),
            Arc::clone(&self.name),
            &self.key,
            Arc::new(Permits {
                count_key: Arc::clone(&self.count_key),
                weight: permits,
                fixed: self.fixed,
            }),
            &self.client.new_owner(),
        );
        Ok(match self.wait {
            Some(strategy) => lock.with_wait_strategy(strategy),
            None => lock,
        })
    }

    /// The permit that `guard` holds.
    fn permit(guard: LockGuard, permits: u32) -> Result<Permit, Error> {
        Ok(Permit {
            id: PermitId(guard.hold_field()?.as_str().to_owned()),
            guard,
            permits,
        })
    }

    /// Releases the permit `id` from anywhere: another task, process or host than the one that
    /// took it. Its holder is told it lost it (the lost signal fires when renewal finds it
    /// gone; its own release then says [`Error::LockLost`]). Prefer [`Permit::release`] where
    /// the permit is at hand.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future may leave the release applied or not; a second call tells which
    /// ([`InvalidArgument::UnknownPermit`] once it is).
    ///
    /// # Errors
    ///
    /// [`InvalidArgument::UnknownPermit`] when no such permit is out (released already, its
    /// lease ran out, never issued): nothing is changed, and no permit is ever made by a
    /// release. [`Error::NoQuorum`] when too few masters answered to tell (on one master: it
    /// did not answer; the release may have been applied). On several masters it is released
    /// on every master that has it, and done when any had it.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(jobs: redlock_reentrant::RPermitExpirableSemaphore, id: redlock_reentrant::PermitId) -> Result<(), redlock_reentrant::Error> {
    /// jobs.release(&id).await?;
    /// # Ok(()) }
    /// ```
    pub async fn release(&self, id: &PermitId) -> Result<(), Error> {
        self.check()?;
        let unknown = || -> Error {
            InvalidArgument::UnknownPermit {
                name: self.name.to_string(),
            }
            .into()
        };
        if !id.is_well_formed() {
            return Err(unknown());
        }
        let inner = &self.client.inner;
        let call = UNLOCK_PERMIT
            .call()
            .releasing()
            .key(&*self.holders)
            .arg(id.as_str())
            .arg(&*self.channel)
            .arg(inner.new_request_arg())
            .arg(1);
        let fan: FanOut<i64> = self.run_everywhere(call).await?;
        match released_by_id(
            fan.values().copied(),
            fan.answered(),
            fan.nodes(),
            self.quorum(),
        ) {
            Some(true) => Ok(()),
            Some(false) => Err(unknown()),
            None => Err(Error::no_quorum(&self.name, fan.answered(), fan)),
        }
    }

    /// The count of permits, the permits out and whether the count is set. Permits whose lease
    /// ran out are not counted (and are purged). With a count its client fixed, the count is
    /// the one the permits out were granted under (and `set`), or the client's while none is
    /// out (not `set`: a fixed count lives on the masters with its permits); on several masters,
    /// the count and the permits out are the most any master that answered has.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it changes nothing but the purge of expired permits.
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`], [`Error::NoQuorum`] (no majority of the masters answered),
    /// [`Error::Shutdown`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(jobs: redlock_reentrant::RPermitExpirableSemaphore) -> Result<(), redlock_reentrant::Error> {
    /// let status = jobs.status().await?;
    /// println!("{} of {} permits free", status.available(), status.permits);
    /// # Ok(()) }
    /// ```
    pub async fn status(&self) -> Result<SemaphoreStatus, Error> {
        self.check()?;
        let call = PERMITS_STATUS
            .call()
            .key(&*self.holders)
            .key(&*self.count_key);
        let answers: Vec<PermitsStatus> = self.run_on_a_majority(call).await?;
        let most = |of: fn(&PermitsStatus) -> u32| answers.iter().map(of).max().unwrap_or(0);
        // A count set on a master, or the fixed one its permits out were granted under; with
        // neither, a fixed count is this client's.
        let seen = most(|status| status.count.max(status.fixed));
        let set = answers.iter().any(|status| status.set || status.fixed > 0);
        let status = SemaphoreStatus {
            set,
            permits: match self.fixed {
                Some(fixed) if !set => fixed.permits,
                _ => seen,
            },
            acquired: most(|status| status.out),
        };
        Ok(status)
    }

    /// How many permits the semaphore has (0 when unset). Redisson's `getPermits`.
    ///
    /// # Cancel safety
    ///
    /// As [`RPermitExpirableSemaphore::status`].
    ///
    /// # Errors
    ///
    /// As [`RPermitExpirableSemaphore::status`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(jobs: redlock_reentrant::RPermitExpirableSemaphore) -> Result<(), redlock_reentrant::Error> {
    /// assert!(jobs.available_permits().await? <= jobs.permits().await?);
    /// # Ok(()) }
    /// ```
    pub async fn permits(&self) -> Result<u32, Error> {
        Ok(self.status().await?.permits)
    }

    /// How many permits are free now (see [`SemaphoreStatus::available`]).
    ///
    /// # Cancel safety
    ///
    /// As [`RPermitExpirableSemaphore::status`].
    ///
    /// # Errors
    ///
    /// As [`RPermitExpirableSemaphore::status`].
    pub async fn available_permits(&self) -> Result<u32, Error> {
        Ok(self.status().await?.available())
    }

    /// How many permits are out now.
    ///
    /// # Cancel safety
    ///
    /// As [`RPermitExpirableSemaphore::status`].
    ///
    /// # Errors
    ///
    /// As [`RPermitExpirableSemaphore::status`].
    pub async fn acquired_permits(&self) -> Result<u32, Error> {
        Ok(self.status().await?.acquired)
    }

    /// Sets the count of permits to `permits` unless it is set already; whether it did.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future may leave the count set or not; calling it again is harmless.
    ///
    /// # Errors
    ///
    /// [`InvalidArgument::PermitsFixed`] for a count its client fixed; otherwise as
    /// [`RPermitExpirableSemaphore::status`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(jobs: redlock_reentrant::RPermitExpirableSemaphore) -> Result<(), redlock_reentrant::Error> {
    /// if jobs.try_set_permits(3).await? {
    ///     println!("this process configured the semaphore");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_set_permits(&self, permits: u32) -> Result<bool, Error> {
        Ok(self.change("try-set", permits.into()).await?.done)
    }

    /// Sets the count of permits to `permits`, whatever it was. Permits out stay out; while
    /// more are out than the new count, none is granted.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future may leave the count set or not; calling it again is harmless.
    ///
    /// # Errors
    ///
    /// [`InvalidArgument::PermitsFixed`] for a count its client fixed; otherwise as
    /// [`RPermitExpirableSemaphore::status`].
    pub async fn set_permits(&self, permits: u32) -> Result<(), Error> {
        self.change("set", permits.into()).await.map(|_| ())
    }

    /// Adds `delta` permits to the count (a negative `delta` removes some); returns the new
    /// count.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future may leave it applied or not, and it is not idempotent: read the
    /// count before adding again.
    ///
    /// # Errors
    ///
    /// [`InvalidArgument::PermitsOutOfRange`] when the count would fall below zero or not fit a
    /// `u32` (nothing is changed), [`InvalidArgument::PermitsFixed`] for a count its client
    /// fixed; otherwise as [`RPermitExpirableSemaphore::status`].
    pub async fn add_permits(&self, delta: i64) -> Result<u32, Error> {
        let changed = self.change("add", delta).await?;
        if !changed.done {
            return Err(InvalidArgument::PermitsOutOfRange {
                name: self.name.to_string(),
                count: changed.before,
                delta,
            }
            .into());
        }
        Ok(changed.after)
    }

    /// Takes every free permit away by lowering the count to the permits out; returns how many
    /// were free. Redisson's `drainPermits`.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future may leave it applied or not.
    ///
    /// # Errors
    ///
    /// [`InvalidArgument::PermitsFixed`] for a count its client fixed; otherwise as
    /// [`RPermitExpirableSemaphore::status`].
    pub async fn drain_permits(&self) -> Result<u32, Error> {
        let changed = self.change("drain", 0).await?;
        Ok(changed.before.saturating_sub(changed.after))
    }

    /// Deletes the semaphore: its count and every permit out (their holders are told they lost
    /// them when renewal finds them gone), on every master. Whether there was anything to
    /// delete.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future may leave it applied or not; calling it again is harmless.
    ///
    /// # Errors
    ///
    /// As [`RPermitExpirableSemaphore::status`].
    pub async fn delete(&self) -> Result<bool, Error> {
        Ok(self.change("delete", 0).await?.done)
    }

    /// Runs `op` of `lua/permits_set.lua` with `value`: on the one master, or for `delete` on
    /// every master (done where any had something to delete, once a majority answered). A
    /// fixed count is never changed.
    pub(crate) async fn change(&self, op: &str, value: i64) -> Result<PermitsChanged, Error> {
        self.check()?;
        if let Some(fixed) = self.fixed.filter(|_| op != "delete") {
            return Err(InvalidArgument::PermitsFixed {
                name: self.name.to_string(),
                permits: fixed.permits,
            }
            .into());
        }
        let call = PERMITS_SET.call().replicated();
        // A deletion goes to every master, also one that stopped answering lately.
        let call = if op == "delete" {
            call.releasing()
        } else {
            call
        };
        let call = call
            .key(&*self.holders)
            .key(&*self.count_key)
            .arg(op)
            .arg(value)
            .arg(&*self.channel)
            .arg(self.client.inner.new_request_arg());
        let answers: Vec<PermitsChanged> = self.run_on_a_majority(call).await?;
        let mut changed = answers.into_iter();
        let first = changed.next().expect("a majority answered");
        Ok(changed.fold(first, |all, one| PermitsChanged {
            done: all.done || one.done,
            ..all
        }))
    }

    /// The client it was built by.
    pub(crate) fn client(&self) -> &LockClient {
        &self.client
    }

    /// The channel its changes are announced on.
    pub(crate) fn channel(&self) -> &str {
        &self.channel
    }

    /// Checks the client and the name before anything is sent.
    pub(crate) fn check(&self) -> Result<(), Error> {
        let inner = &self.client.inner;
        inner.check_open()?;
        inner.check_request(&self.name, inner.watchdog.timeout())
    }

    /// Runs `call` on every master of the semaphore, once.
    async fn run_everywhere<T: FromRedisValue>(
        &self,
        call: ScriptCall,
    ) -> Result<FanOut<T>, Error> {
        crate::one_master::run_everywhere(&self.client.inner, &self.key, call).await
    }

    /// Runs `call` on every master of the semaphore, once: the answers of a majority at least.
    async fn run_on_a_majority<T: FromRedisValue + Clone>(
        &self,
        call: ScriptCall,
    ) -> Result<Vec<T>, Error> {
        crate::one_master::run_on_a_majority(&self.client.inner, &self.name, &self.key, call).await
    }
}

/// Whether a release by id released the permit (`Some(true)`: some master had it), found it
/// nowhere (`Some(false)`: enough masters answered that a permit out, granted by `quorum` of
/// `nodes`, would have been on one of them), or cannot tell (`None`). `left` is each answering
/// master's reply: 0 where it released the permit.
fn released_by_id(
    mut left: impl Iterator<Item = i64>,
    answered: usize,
    nodes: usize,
    quorum: usize,
) -> Option<bool> {
    if left.any(|left| left == 0) {
        Some(true)
    } else if answered + quorum > nodes {
        Some(false)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::released_by_id;

    #[test]
    fn a_release_by_id_is_done_where_any_master_had_the_permit() {
        assert_eq!(released_by_id([-1, 0].into_iter(), 2, 5, 4), Some(true));
        assert_eq!(released_by_id([0].into_iter(), 1, 1, 1), Some(true));
    }

    #[test]
    fn a_permit_found_nowhere_is_unknown_only_where_it_could_not_hide() {
        // Granted by 4 of 5: any 2 answering masters include one that has it.
        assert_eq!(released_by_id([-1, -1].into_iter(), 2, 5, 4), Some(false));
        // One answering master may be the one it was not granted on.
        assert_eq!(released_by_id([-1].into_iter(), 1, 5, 4), None);
        // One master: its answer tells.
        assert_eq!(released_by_id([-1].into_iter(), 1, 1, 1), Some(false));
        assert_eq!(released_by_id(std::iter::empty(), 0, 1, 1), None);
    }
}
