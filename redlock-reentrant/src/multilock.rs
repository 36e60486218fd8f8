//! `MultiLock`: all of several locks, or none.

use std::time::Duration;

use futures_util::future::select_all;
use redlock_core::{Error, InvalidArgument, LostReason};
use tokio::time::Instant;

use crate::{LockGuard, RLock};

/// All of several locks at once, or none: Redisson's `RedissonMultiLock` for tokio. Members are
/// any mix of [`RLock`]s and read-write lock sides ([`RReadWriteLock`](crate::RReadWriteLock)),
/// also of different [`LockClient`](crate::LockClient)s (other deployments).
///
/// - **No deadlock between multi-locks**: members are always taken in one canonical order (by
///   deployment, then key), whatever order they were given in, so two multi-locks over the same
///   locks never each hold what the other waits for (Redisson takes them in the given order:
///   its issue #1160).
/// - **One wait budget**: `try_acquire(wait, ..)` gives every member what is left of `wait`.
/// - **Nothing left held**: when a member cannot be had (the wait ran out, an error, the future
///   dropped), the members already taken are released before it returns.
/// - **The Redlock validity rule for a fixed lease**: members are taken one after another, so
///   the first one's lease has run longest; the moment any member's validity runs out before
///   the last is taken (even while a later one is still waited for), all are released and the
///   attempt answers `None`. With the watchdog's lease (no fixed one) each member is renewed; a
///   member taken away meanwhile fails the attempt at once with [`Error::LockLost`] naming it.
/// - The guard's [`lost`](MultiGuard::lost) fires when any member's hold is lost.
///
/// Redisson's `RedissonRedLock` (a majority of independent locks) is not here: every lock of
/// this crate already is one, on the client's N masters (`redlock-core`'s quorum, with parallel
/// requests and the validity check `RedissonRedLock` lacks).
///
/// # Examples
///
/// ```no_run
/// # async fn run(client: redlock_reentrant::LockClient) -> Result<(), redlock_reentrant::Error> {
/// use redlock_reentrant::MultiLock;
/// let transfer = MultiLock::new([
///     client.get_lock("account:17"),
///     client.get_lock("account:4"),
///     client.get_read_write_lock("rates").read_lock(),
/// ])?;
/// let guard = transfer.acquire().await?;
/// // ... both accounts and a stable view of the rates ...
/// guard.unlock().await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct MultiLock {
    /// In the canonical order.
    members: Vec<RLock>,
}

impl MultiLock {
    /// A multi-lock over `members`, in any order.
    ///
    /// # Errors
    ///
    /// [`InvalidArgument::NoMembers`] for none; [`InvalidArgument::DuplicateMember`] when two
    /// members are one lock (the same name on the same deployment, both sides of one read-write
    /// lock included): the second would wait for the first.
    pub fn new(members: impl IntoIterator<Item = RLock>) -> Result<Self, Error> {
        let mut members: Vec<(String, RLock)> = members
            .into_iter()
            .map(|member| (member.identity(), member))
            .collect();
        if members.is_empty() {
            return Err(InvalidArgument::NoMembers.into());
        }
        members.sort_by(|(a, _), (b, _)| a.cmp(b));
        if let Some(pair) = members.windows(2).find(|pair| pair[0].0 == pair[1].0) {
            return Err(InvalidArgument::DuplicateMember {
                name: pair[1].1.name().to_owned(),
            }
            .into());
        }
        Ok(Self {
            members: members.into_iter().map(|(_, member)| member).collect(),
        })
    }

    /// The members, in the order they are taken.
    pub fn members(&self) -> &[RLock] {
        &self.members
    }

    /// Takes every member, waiting as long as it takes; each is renewed by its client's
    /// watchdog while held.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future releases the members already taken (as dropped guards do) and
    /// leaves nothing of the one in flight.
    ///
    /// # Errors
    ///
    /// Any member's error ([`RLock::acquire`]); the members taken before it are released.
    pub async fn acquire(&self) -> Result<MultiGuard, Error> {
        self.take(None, None)
            .await
            .map(|guard| guard.expect("waiting without a deadline only ends acquired"))
    }

    /// Takes every member within about `wait` in all (`Duration::MAX` waits as long as it
    /// takes), each with `lease` (`None`: the watchdog's, renewed). `None` when some member
    /// stayed held elsewhere for the whole wait, or a fixed lease ran out on a member before
    /// the last was taken: nothing is held then.
    ///
    /// # Cancel safety
    ///
    /// As [`MultiLock::acquire`].
    ///
    /// # Errors
    ///
    /// As [`MultiLock::acquire`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(locks: redlock_reentrant::MultiLock) -> Result<(), redlock_reentrant::Error> {
    /// use std::time::Duration;
    /// if let Some(guard) = locks.try_acquire(Duration::from_secs(2), None).await? {
    ///     guard.unlock().await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_acquire(
        &self,
        wait: Duration,
        lease: Option<Duration>,
    ) -> Result<Option<MultiGuard>, Error> {
        self.take(Some(wait), lease).await
    }

    async fn take(
        &self,
        wait: Option<Duration>,
        lease: Option<Duration>,
    ) -> Result<Option<MultiGuard>, Error> {
        let started = Instant::now();
        let deadline = wait.and_then(|wait| started.checked_add(wait));
        // Dropped (on failure, or with this future) before it is handed out: every member
        // taken is released.
        let mut guards = Vec::with_capacity(self.members.len());
        for member in &self.members {
            let left = match (wait, deadline) {
                (Some(_), Some(deadline)) => deadline.saturating_duration_since(Instant::now()),
                // A wait too long to represent, or none at all.
                _ => Duration::MAX,
            };
            // A member taken earlier may be lost while this one is waited for (its fixed lease
            // ran out, or it was taken away): the set can never be held together then, so the
            // wait ends at once.
            let losses: Vec<_> = guards
                .iter()
                .map(|guard: &LockGuard| {
                    let name = guard.lock().name().to_owned();
                    let lost = guard.lost();
                    Box::pin(async move { (name, lost.await) })
                })
                .collect();
            let earlier_lost = async move {
                if losses.is_empty() {
                    std::future::pending().await
                } else {
                    select_all(losses).await.0
                }
            };
            let taken = tokio::select! {
                taken = member.try_acquire(left, lease) => taken,
                (name, reason) = earlier_lost => {
                    release_all(guards).await;
                    return lost_before_complete(name, reason);
                }
            };
            match taken {
                Ok(Some(guard)) => guards.push(guard),
                Ok(None) => {
                    release_all(guards).await;
                    return Ok(None);
                }
                Err(err) => {
                    release_all(guards).await;
                    return Err(err);
                }
            }
            if let Some((name, reason)) = guards
                .iter()
                .find_map(|guard| Some((guard.lock().name().to_owned(), guard.lost_reason()?)))
            {
                release_all(guards).await;
                return lost_before_complete(name, reason);
            }
        }
        Ok(Some(MultiGuard { guards }))
    }
}

/// What an attempt answers when member `name` was lost (for `reason`) before the set was
/// complete: a fixed lease that ran out is the validity rule (`None`: not taken in time); any
/// other loss is that member's.
fn lost_before_complete(name: String, reason: LostReason) -> Result<Option<MultiGuard>, Error> {
    match reason {
        LostReason::LeaseExpired => Ok(None),
        reason => Err(Error::LockLost { name, reason }),
    }
}

/// Releases the members taken by an attempt that failed, the last taken first, before the
/// attempt answers: nothing of it is held when its caller looks. Their errors are the
/// attempt's to ignore (a member that cannot be released is given up, and expires with its
/// lease). Dropped half-way, the rest are released as dropped guards are.
async fn release_all(guards: Vec<LockGuard>) {
    for guard in guards.into_iter().rev() {
        if let Err(err) = guard.unlock().await {
            tracing::debug!(error = %err, "a member of a failed multi-lock attempt was not released cleanly");
        }
    }
}

/// Every member of a [`MultiLock`], held; released when dropped.
#[must_use = "the locks are released as soon as the guard is dropped"]
#[derive(Debug)]
pub struct MultiGuard {
    /// In the canonical order.
    guards: Vec<LockGuard>,
}

impl MultiGuard {
    /// Each member's guard, in the order they were taken.
    pub fn guards(&self) -> &[LockGuard] {
        &self.guards
    }

    /// Each member's guard, to keep or release one by one (each releases its member when
    /// dropped, as always).
    pub fn into_guards(self) -> Vec<LockGuard> {
        self.guards
    }

    /// Each member's fencing token, in the order they were taken.
    pub fn fencing_tokens(&self) -> Vec<u64> {
        self.guards.iter().map(LockGuard::fencing_token).collect()
    }

    /// Waits until any member's hold is lost and says why: the set is no longer held.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    pub fn lost(&self) -> impl std::future::Future<Output = LostReason> + Send + 'static {
        let losses: Vec<_> = self
            .guards
            .iter()
            .map(|guard| Box::pin(guard.lost()))
            .collect();
        async move { select_all(losses).await.0 }
    }

    /// Whether any member's hold is lost.
    pub fn is_lost(&self) -> bool {
        self.guards.iter().any(LockGuard::is_lost)
    }

    /// Releases every member (the last taken first) and reports the first error.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future still releases every member: a member's release in flight is
    /// completed in a spawned task, and the members not reached yet are released as dropped
    /// guards are.
    ///
    /// # Errors
    ///
    /// The first member's error ([`LockGuard::unlock`]); every member is released whatever
    /// the others answer.
    pub async fn unlock(self) -> Result<(), Error> {
        let mut first = Ok(());
        for guard in self.guards.into_iter().rev() {
            let released = guard.unlock().await;
            if first.is_ok() {
                first = released;
            }
        }
        first
    }
}
