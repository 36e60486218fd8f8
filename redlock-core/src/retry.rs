//! How often and how patiently a contended or failed request is tried again: the one retry
//! loop of every lock operation.

use std::future::Future;
use std::time::Duration;

/// Retries after a failed acquisition attempt, with a jittered backoff that grows with attempts.
///
/// Attempt `k` (counting retries from 0) sleeps a random time in `[c / 2, c]` where
/// `c = min(max_delay, base_delay * 2^k)`: rivals spread out instead of splitting votes again.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use redlock_core::RetryPolicy;
/// let policy = RetryPolicy { retries: 5, ..RetryPolicy::default() };
/// assert!(policy.delay(0) <= policy.base_delay);
/// assert!(policy.delay(30) <= policy.max_delay);
/// assert_eq!(RetryPolicy::none().retries, 0);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts after the first one. `0` tries exactly once.
    pub retries: u32,
    /// The ceiling of the first backoff.
    pub base_delay: Duration,
    /// The largest backoff, however many attempts were made.
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    /// Three retries, 20 ms growing to at most 400 ms.
    fn default() -> Self {
        Self {
            retries: 3,
            base_delay: Duration::from_millis(20),
            max_delay: Duration::from_millis(400),
        }
    }
}

impl RetryPolicy {
    /// A single attempt, no retry.
    pub fn none() -> Self {
        Self {
            retries: 0,
            ..Self::default()
        }
    }

    /// The jittered sleep before retry number `retry` (0 for the first retry).
    pub fn delay(&self, retry: u32) -> Duration {
        let ceiling = self
            .base_delay
            .saturating_mul(1u32.checked_shl(retry.min(31)).unwrap_or(u32::MAX))
            .min(self.max_delay);
        let half = ceiling / 2;
        let spread = u64::try_from((ceiling - half).as_micros()).unwrap_or(u64::MAX);
        half + Duration::from_micros(fastrand::u64(0..=spread))
    }

    /// The pauses between the attempts of one request, to take one at a time.
    pub fn backoff(&self) -> Backoff {
        Backoff {
            policy: *self,
            retry: 0,
            bounded: true,
        }
    }

    /// Runs `attempt` until its outcome is not worth another try (`again` says so) or the
    /// retries are spent, with a jittered pause ([`RetryPolicy::delay`]) between attempts; returns
    /// the last outcome.
    ///
    /// # Cancel safety
    ///
    /// As cancel safe as `attempt`: dropping the future drops the attempt in flight or the pause.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlock_core::RetryPolicy;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let policy = RetryPolicy { retries: 2, base_delay: Duration::from_millis(1), ..RetryPolicy::default() };
    /// let mut attempts = 0;
    /// let outcome: Result<(), &str> = policy
    ///     .retry(|| { attempts += 1; async { Err("no quorum") } }, |outcome| outcome.is_err())
    ///     .await;
    /// assert_eq!((outcome, attempts), (Err("no quorum"), 3));
    /// # }
    /// ```
    pub async fn retry<T, Fut>(
        &self,
        mut attempt: impl FnMut() -> Fut,
        again: impl Fn(&T) -> bool,
    ) -> T
    where
        Fut: Future<Output = T>,
    {
        let mut backoff = self.backoff();
        loop {
            let outcome = attempt().await;
            if !again(&outcome) {
                return outcome;
            }
            match backoff.next_delay() {
                Some(pause) => tokio::time::sleep(pause).await,
                None => return outcome,
            }
        }
    }
}

/// The pauses of one request's retries under a [`RetryPolicy`], growing with each.
///
/// # Examples
///
/// ```
/// use redlock_core::RetryPolicy;
/// let mut backoff = RetryPolicy { retries: 2, ..RetryPolicy::default() }.backoff();
/// assert!(backoff.next_delay().is_some());
/// assert!(backoff.next_delay().is_some());
/// assert_eq!(backoff.next_delay(), None, "two retries, then spent");
/// backoff.reset();
/// assert!(backoff.next_delay().is_some());
/// ```
#[derive(Debug, Clone)]
pub struct Backoff {
    policy: RetryPolicy,
    retry: u32,
    bounded: bool,
}

impl Backoff {
    /// The same pauses without the policy's limit on their number: for waiting that another
    /// bound ends (a deadline, a holder's lease).
    #[must_use]
    pub fn unbounded(self) -> Self {
        Self {
            bounded: false,
            ..self
        }
    }

    /// The pause before the next retry, or `None` once the retries are spent.
    pub fn next_delay(&mut self) -> Option<Duration> {
        if self.bounded && self.retry >= self.policy.retries {
            return None;
        }
        let pause = self.policy.delay(self.retry);
        self.retry = self.retry.saturating_add(1);
        Some(pause)
    }

    /// Starts over, as for a new request.
    pub fn reset(&mut self) {
        self.retry = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn delay_stays_within_half_and_full_ceiling(
            base_ms in 0u64..1_000,
            max_ms in 0u64..10_000,
            retry in 0u32..100,
        ) {
            let policy = RetryPolicy {
                retries: 100,
                base_delay: Duration::from_millis(base_ms),
                max_delay: Duration::from_millis(max_ms),
            };
            let ceiling = Duration::from_millis(base_ms)
                .saturating_mul(2u32.saturating_pow(retry.min(31)))
                .min(Duration::from_millis(max_ms));
            let delay = policy.delay(retry);
            prop_assert!(delay <= ceiling);
            prop_assert!(delay >= ceiling / 2);
        }
    }

    #[test]
    fn delays_grow_with_attempts_until_the_cap() {
        let policy = RetryPolicy {
            retries: 10,
            base_delay: Duration::from_millis(10),
            max_delay: Duration::from_millis(80),
        };
        // The floor of attempt k is base * 2^k / 2, so attempt 3 always waits longer than
        // attempt 0 can.
        assert!(policy.delay(3) >= Duration::from_millis(40));
        assert!(policy.delay(0) <= Duration::from_millis(10));
        assert!(policy.delay(9) <= Duration::from_millis(80));
    }
}
