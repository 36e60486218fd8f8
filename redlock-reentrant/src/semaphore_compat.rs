//! Redisson's `RSemaphore` verbs on the permit semaphore: [`RSemaphore`] keeps the permits it
//! took (they come back when its process dies), and [`UnownedSemaphore`] is the plain counter,
//! whose permits leak on a crash.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use redlock_core::lock_kind::unpoisoned;
use redlock_core::InvalidArgument;
use tokio::time::Instant;

use crate::{Error, Permit, RPermitExpirableSemaphore, SemaphoreStatus};

/// Redisson's `RSemaphore` verbs (`acquire(n)`, `try_acquire(n, wait)`, `release(n)`), with
/// permits that come back when their holder dies: the handle keeps the [`Permit`]s it took,
/// renewed by the watchdog while this process lives. Clones share them; when the last clone is
/// dropped, the permits it still holds are released.
///
/// `release(n)` releases permits this handle took, never more: releasing permits it does not
/// hold is [`InvalidArgument::PermitsNotHeld`], and a permit is never made out of nothing (for
/// Redisson's unowned release, see [`UnownedSemaphore`]). It releases whole acquisitions that
/// add up to `n`, the latest first (`acquire(2)` then `release(1)` is refused: the two permits
/// were taken as one).
///
/// One master only, as [`RPermitExpirableSemaphore`] whose count is set on the master (its
/// count verbs change it at run time, which no quorum could keep sound).
///
/// # Examples
///
/// ```no_run
/// # async fn run(client: redlock_reentrant::LockClient) -> Result<(), redlock_reentrant::Error> {
/// let workers = client.get_semaphore("workers")?;
/// workers.try_set_permits(5).await?;
/// workers.acquire(1).await?;
/// // ... the work ...
/// workers.release(1).await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct RSemaphore {
    core: RPermitExpirableSemaphore,
    /// The permits this handle took, oldest first.
    held: Arc<Mutex<Vec<Permit>>>,
}

impl RSemaphore {
    pub(crate) fn new(core: RPermitExpirableSemaphore) -> Self {
        Self {
            core,
            held: Arc::default(),
        }
    }

    /// The permit semaphore underneath: its count's verbs, status, and permits by id.
    pub fn permits_semaphore(&self) -> &RPermitExpirableSemaphore {
        &self.core
    }

    /// Takes `permits` permits, waiting as long as it takes (see
    /// [`RPermitExpirableSemaphore::acquire`]); this handle keeps them until
    /// [`RSemaphore::release`].
    ///
    /// # Cancel safety
    ///
    /// As [`RPermitExpirableSemaphore::acquire`]: dropped, it leaves no permit behind.
    ///
    /// # Errors
    ///
    /// As [`RPermitExpirableSemaphore::acquire`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(workers: redlock_reentrant::RSemaphore) -> Result<(), redlock_reentrant::Error> {
    /// workers.acquire(2).await?;
    /// workers.release(2).await?;
    /// # Ok(()) }
    /// ```
    pub async fn acquire(&self, permits: u32) -> Result<(), Error> {
        let permit = self.core.acquire(permits).await?;
        unpoisoned(self.held.lock()).push(permit);
        Ok(())
    }

    /// Takes `permits` permits if they are free within `wait`; whether it did.
    ///
    /// # Cancel safety
    ///
    /// As [`RSemaphore::acquire`].
    ///
    /// # Errors
    ///
    /// As [`RPermitExpirableSemaphore::acquire`].
    pub async fn try_acquire(&self, permits: u32, wait: Duration) -> Result<bool, Error> {
        match self.core.try_acquire(permits, wait, None).await? {
            Some(permit) => {
                unpoisoned(self.held.lock()).push(permit);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Releases `permits` of the permits this handle took: whole acquisitions adding up to
    /// `permits`, the latest first, all or none.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future still releases the acquisitions it took out of the handle (each in
    /// a spawned task).
    ///
    /// # Errors
    ///
    /// [`InvalidArgument::PermitsNotHeld`] when this handle's acquisitions cannot make up
    /// `permits` (nothing is released), [`InvalidArgument::ZeroPermits`]; otherwise the first error of
    /// [`Permit::release`] (the other acquisitions are released all the same).
    pub async fn release(&self, permits: u32) -> Result<(), Error> {
        if permits == 0 {
            return Err(InvalidArgument::ZeroPermits {
                name: self.core.name().to_owned(),
            }
            .into());
        }
        let lots = {
            let mut held = unpoisoned(self.held.lock());
            let weights: Vec<u32> = held.iter().map(Permit::permits).collect();
            let Some(chosen) = choose_lots(&weights, permits) else {
                return Err(InvalidArgument::PermitsNotHeld {
                    name: self.core.name().to_owned(),
                    asked: permits,
                    held: weights
                        .iter()
                        .fold(0, |sum, weight| sum.saturating_add(*weight)),
                }
                .into());
            };
            // Taken out in reverse order, so that earlier indexes stay where they are.
            chosen
                .into_iter()
                .rev()
                .map(|index| held.remove(index))
                .collect::<Vec<Permit>>()
        };
        let mut first_error = None;
        for permit in lots {
            if let Err(err) = permit.release().await {
                first_error.get_or_insert(err);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// How many permits this handle holds.
    pub fn held_permits(&self) -> u32 {
        unpoisoned(self.held.lock())
            .iter()
            .fold(0, |sum, permit| sum.saturating_add(permit.permits()))
    }

    /// As [`RPermitExpirableSemaphore::try_set_permits`].
    ///
    /// # Cancel safety
    ///
    /// As [`RPermitExpirableSemaphore::try_set_permits`].
    ///
    /// # Errors
    ///
    /// As [`RPermitExpirableSemaphore::try_set_permits`].
    pub async fn try_set_permits(&self, permits: u32) -> Result<bool, Error> {
        self.core.try_set_permits(permits).await
    }

    /// As [`RPermitExpirableSemaphore::add_permits`].
    ///
    /// # Cancel safety
    ///
    /// As [`RPermitExpirableSemaphore::add_permits`].
    ///
    /// # Errors
    ///
    /// As [`RPermitExpirableSemaphore::add_permits`].
    pub async fn add_permits(&self, delta: i64) -> Result<u32, Error> {
        self.core.add_permits(delta).await
    }

    /// As [`RPermitExpirableSemaphore::available_permits`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    ///
    /// # Errors
    ///
    /// As [`RPermitExpirableSemaphore::status`].
    pub async fn available_permits(&self) -> Result<u32, Error> {
        self.core.available_permits().await
    }

    /// As [`RPermitExpirableSemaphore::drain_permits`].
    ///
    /// # Cancel safety
    ///
    /// As [`RPermitExpirableSemaphore::drain_permits`].
    ///
    /// # Errors
    ///
    /// As [`RPermitExpirableSemaphore::status`].
    pub async fn drain_permits(&self) -> Result<u32, Error> {
        self.core.drain_permits().await
    }
}

/// Which of the acquisitions `weights` (oldest first) make up exactly `permits`, preferring the
/// latest; `None` when none do. Looked for among at most [`LOTS_SEARCHED`] sums, then greedily
/// (latest first, skipping one larger than what is left).
fn choose_lots(weights: &[u32], permits: u32) -> Option<Vec<usize>> {
    if permits == 0 {
        return None;
    }
    // Each reachable sum, with the acquisitions making it up (the latest ones tried first, so
    // the first way found to a sum keeps them).
    let mut sums: std::collections::BTreeMap<u32, Vec<usize>> = [(0, Vec::new())].into();
    for (index, weight) in weights.iter().enumerate().rev() {
        let reached: Vec<(u32, Vec<usize>)> = sums
            .iter()
            .filter_map(|(sum, chosen)| {
                let sum = sum.checked_add(*weight).filter(|sum| *sum <= permits)?;
                let mut chosen = chosen.clone();
                chosen.push(index);
                Some((sum, chosen))
            })
            .collect();
        for (sum, chosen) in reached {
            sums.entry(sum).or_insert(chosen);
        }
        if let Some(chosen) = sums.get(&permits) {
            let mut chosen = chosen.clone();
            chosen.sort_unstable();
            return Some(chosen);
        }
        if sums.len() > LOTS_SEARCHED {
            return greedy_lots(weights, permits);
        }
    }
    None
}

/// How many partial sums [`choose_lots`] keeps before it goes greedy.
const LOTS_SEARCHED: usize = 4096;

fn greedy_lots(weights: &[u32], permits: u32) -> Option<Vec<usize>> {
    let mut left = permits;
    let mut chosen = Vec::new();
    for (index, weight) in weights.iter().enumerate().rev() {
        if *weight <= left {
            left -= weight;
            chosen.push(index);
        }
    }
    chosen.sort_unstable();
    (left == 0).then_some(chosen)
}

/// Redisson's `RSemaphore` exactly: a counter of free permits with no holders.
/// `acquire(n)` lowers it and `release(n)` raises it, whoever calls.
///
/// **Permits leak on a crash**: a process that dies between `acquire` and `release` takes its
/// permits with it, for good (Redisson #2045, #4462), and a `release` without an `acquire`
/// makes permits out of nothing (#5066). Use [`RSemaphore`] or [`RPermitExpirableSemaphore`]
/// unless something outside this library releases what it acquires.
///
/// Its count is the permit semaphore's: `acquire(n)` lowers it by `n` when `n` are free,
/// `release(n)` raises it. One master only.
///
/// # Examples
///
/// ```no_run
/// # async fn run(client: redlock_reentrant::LockClient) -> Result<(), redlock_reentrant::Error> {
/// let tickets = client.get_unowned_semaphore("tickets")?;
/// tickets.release(10).await?; // ten permits out of nothing
/// tickets.acquire(1).await?; // one fewer, until someone releases one
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct UnownedSemaphore {
    core: RPermitExpirableSemaphore,
}

impl UnownedSemaphore {
    pub(crate) fn new(core: RPermitExpirableSemaphore) -> Self {
        Self { core }
    }

    /// Lowers the count by `permits` when that many are free, waiting as long as it takes.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future may leave the permits taken (a request in flight): they are then
    /// gone until someone releases as many.
    ///
    /// # Errors
    ///
    /// As [`RPermitExpirableSemaphore::status`], and [`InvalidArgument::ZeroPermits`].
    pub async fn acquire(&self, permits: u32) -> Result<(), Error> {
        self.take(permits, None).await.map(|_| ())
    }

    /// Lowers the count by `permits` if that many are free within `wait`; whether it did.
    ///
    /// # Cancel safety
    ///
    /// As [`UnownedSemaphore::acquire`].
    ///
    /// # Errors
    ///
    /// As [`UnownedSemaphore::acquire`].
    pub async fn try_acquire(&self, permits: u32, wait: Duration) -> Result<bool, Error> {
        self.take(permits, Some(wait)).await
    }

    async fn take(&self, permits: u32, wait: Option<Duration>) -> Result<bool, Error> {
        if permits == 0 {
            return Err(InvalidArgument::ZeroPermits {
                name: self.core.name().to_owned(),
            }
            .into());
        }
        let deadline = wait.and_then(|wait| Instant::now().checked_add(wait));
        let inner = &self.core.client().inner;
        crate::one_master::wait_announced(inner, self.core.channel(), deadline, false, || async {
            Ok(self.core.change("take", permits.into()).await?.done)
        })
        .await
    }

    /// Raises the count by `permits`, whoever took them (or nobody: this makes permits).
    ///
    /// # Cancel safety
    ///
    /// Dropping the future may leave it applied or not.
    ///
    /// # Errors
    ///
    /// As [`RPermitExpirableSemaphore::add_permits`].
    pub async fn release(&self, permits: u32) -> Result<(), Error> {
        self.core.add_permits(permits.into()).await.map(|_| ())
    }

    /// The count and the permits out (see [`RPermitExpirableSemaphore::status`]).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    ///
    /// # Errors
    ///
    /// As [`RPermitExpirableSemaphore::status`].
    pub async fn status(&self) -> Result<SemaphoreStatus, Error> {
        self.core.status().await
    }

    /// How many permits are free.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    ///
    /// # Errors
    ///
    /// As [`RPermitExpirableSemaphore::status`].
    pub async fn available_permits(&self) -> Result<u32, Error> {
        self.core.available_permits().await
    }

    /// As [`RPermitExpirableSemaphore::try_set_permits`].
    ///
    /// # Cancel safety
    ///
    /// As [`RPermitExpirableSemaphore::try_set_permits`].
    ///
    /// # Errors
    ///
    /// As [`RPermitExpirableSemaphore::try_set_permits`].
    pub async fn try_set_permits(&self, permits: u32) -> Result<bool, Error> {
        self.core.try_set_permits(permits).await
    }

    /// As [`RPermitExpirableSemaphore::drain_permits`].
    ///
    /// # Cancel safety
    ///
    /// As [`RPermitExpirableSemaphore::drain_permits`].
    ///
    /// # Errors
    ///
    /// As [`RPermitExpirableSemaphore::status`].
    pub async fn drain_permits(&self) -> Result<u32, Error> {
        self.core.drain_permits().await
    }
}

#[cfg(test)]
mod tests {
    use super::choose_lots;

    #[test]
    fn a_release_takes_whole_acquisitions_latest_first() {
        assert_eq!(choose_lots(&[1, 2, 1], 1), Some(vec![2]));
        assert_eq!(choose_lots(&[1, 2, 1], 3), Some(vec![1, 2]));
        assert_eq!(choose_lots(&[1, 2, 1], 4), Some(vec![0, 1, 2]));
        // A larger acquisition is skipped for smaller earlier ones.
        assert_eq!(choose_lots(&[1, 3], 1), Some(vec![0]));
        assert_eq!(choose_lots(&[2], 1), None, "two permits taken as one");
        assert_eq!(choose_lots(&[1, 1], 3), None, "more than held");
        assert_eq!(choose_lots(&[], 1), None);
        assert_eq!(choose_lots(&[1], 0), None, "nothing to release");
        assert_eq!(choose_lots(&[2, 1], 2), Some(vec![0]), "the lot that fits");
        assert_eq!(choose_lots(&[3, 2, 2], 5), Some(vec![0, 2]));
    }
}
