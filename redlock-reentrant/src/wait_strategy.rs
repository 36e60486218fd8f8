//! How a waiting acquisition learns that a lock may be free: pub/sub (the default) or spinning.

use std::time::Duration;

use redlock_core::{Backoff, InvalidArgument, RetryPolicy};

/// How a waiting acquisition learns that the lock may be free, for any lock kind: set per
/// client ([`LockClientBuilder::wait_strategy`](crate::LockClientBuilder::wait_strategy)) or
/// per lock ([`RLock::with_wait_strategy`](crate::RLock::with_wait_strategy)).
///
/// Either way every wait is bounded by what the nodes report (the holder's lease), so a lost
/// message or a slow spin costs latency, never liveness; and either way the tasks of one client
/// that wait for the same exclusive lock take turns, so only one of them asks the nodes (a
/// read-write lock's readers do not: each waiting reader asks, since all of them get in).
///
/// # Examples
///
/// ```no_run
/// # async fn run(client: redlock_reentrant::LockClient) -> Result<(), redlock_reentrant::Error> {
/// use redlock_reentrant::WaitStrategy;
/// // Thousands of locks, waited for rarely: no subscription per lock.
/// let lock = client.get_lock("job:1234").with_wait_strategy(WaitStrategy::spin());
/// lock.lock().await?;
/// lock.unlock().await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum WaitStrategy {
    /// A waiter subscribes to the lock's release channel on every node and looks again when a
    /// release is announced (or the holder's lease runs out): one look per release, and a
    /// subscription per lock waited for.
    #[default]
    PubSub,
    /// A waiter subscribes to nothing and looks again after a jittered, exponentially growing
    /// pause: from about `initial`, doubling up to `max` (Redisson's `RSpinLock`), never later
    /// than the holder's lease or the end of the wait. For services waiting on very many locks
    /// (no subscription per lock), or Redis Cluster deployments where every `PUBLISH` is
    /// broadcast to every node.
    Spin {
        /// The first pause (half of it to all of it, at random).
        initial: Duration,
        /// The longest pause.
        max: Duration,
    },
}

impl WaitStrategy {
    /// Spinning from 1 ms, doubling up to 128 ms (Redisson's `RSpinLock` default).
    pub fn spin() -> Self {
        WaitStrategy::Spin {
            initial: Duration::from_millis(1),
            max: Duration::from_millis(128),
        }
    }

    /// Checks the pauses: neither zero, `initial` no longer than `max`.
    ///
    /// # Errors
    ///
    /// [`InvalidArgument::WaitStrategy`] naming what is wrong.
    pub fn validate(self) -> Result<Self, InvalidArgument> {
        match self {
            WaitStrategy::Spin { initial, max } if initial.is_zero() || max < initial => {
                Err(InvalidArgument::WaitStrategy { initial, max })
            }
            strategy => Ok(strategy),
        }
    }

    /// The pauses between looks, when spinning.
    pub(crate) fn spin_backoff(self) -> Option<Backoff> {
        match self {
            WaitStrategy::PubSub => None,
            WaitStrategy::Spin { initial, max } => Some(
                RetryPolicy {
                    retries: u32::MAX,
                    base_delay: initial,
                    max_delay: max,
                }
                .backoff()
                .unbounded(),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spin_pauses_grow_to_their_ceiling_and_bad_pauses_are_refused() {
        let mut pauses = WaitStrategy::spin().spin_backoff().expect("spinning");
        let seen: Vec<Duration> = (0..12)
            .map(|_| pauses.next_delay().expect("unbounded"))
            .collect();
        assert!(seen[0] <= Duration::from_millis(1));
        assert!(seen
            .iter()
            .all(|pause| *pause <= Duration::from_millis(128)));
        assert!(seen[11] >= Duration::from_millis(64), "{seen:?}");
        assert!(WaitStrategy::PubSub.spin_backoff().is_none());
        let zero = WaitStrategy::Spin {
            initial: Duration::ZERO,
            max: Duration::from_millis(5),
        };
        assert!(zero.validate().is_err());
        let inverted = WaitStrategy::Spin {
            initial: Duration::from_millis(9),
            max: Duration::from_millis(5),
        };
        assert!(inverted.validate().is_err());
        assert_eq!(WaitStrategy::spin().validate(), Ok(WaitStrategy::spin()));
    }
}
