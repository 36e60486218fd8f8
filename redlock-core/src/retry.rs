//! How often and how patiently a contended or failed acquisition is tried again.

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
