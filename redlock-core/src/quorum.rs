//! The Redlock arithmetic: majority size, clock drift, remaining validity and leases in
//! milliseconds.
//!
//! One place computes these so the core, the reentrant lock and the watchdog all agree.

use std::time::Duration;

/// The number of nodes that must agree: `n / 2 + 1`.
///
/// # Examples
///
/// ```
/// use redlock_core::quorum::majority;
/// assert_eq!(majority(1), 1);
/// assert_eq!(majority(4), 3);
/// assert_eq!(majority(5), 3);
/// ```
pub const fn majority(nodes: usize) -> usize {
    nodes / 2 + 1
}

/// The number of nodes that must grant a permit of a `permits`-permit semaphore, so that no
/// more than `permits` permits are ever out: `floor(permits * nodes / (permits + 1)) + 1`.
///
/// Each node grants at most `permits` permits, so `permits + 1` holders would need
/// `(permits + 1) * quorum > permits * nodes` grants from `permits * nodes` places (weights
/// count the same way: holders of `permits + 1` permits or more need as many grants). For one
/// permit it is the [`majority`]. It tolerates `nodes - quorum` nodes down, and never fewer
/// than one node is needed; a `permits` of 0 counts as 1.
///
/// # Examples
///
/// ```
/// use redlock_core::quorum::{ack_quorum, majority};
/// assert_eq!(ack_quorum(1, 5), majority(5));
/// assert_eq!(ack_quorum(2, 3), 3); // every master: none may fail
/// assert_eq!(ack_quorum(2, 5), 4); // one may fail
/// assert_eq!(ack_quorum(3, 1), 1);
/// ```
pub const fn ack_quorum(permits: u32, nodes: usize) -> usize {
    let permits = if permits == 0 { 1 } else { permits as usize };
    // `permits * nodes` in u128: no overflow for any u32 and usize.
    (permits as u128 * nodes as u128 / (permits as u128 + 1)) as usize + 1
}

/// The allowance for clock drift between this client and the Redis nodes over one lease:
/// `lease * factor + floor`.
///
/// A negative or non-finite `factor` counts as zero.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use redlock_core::quorum::clock_drift;
/// let drift = clock_drift(Duration::from_secs(10), 0.01, Duration::from_millis(2));
/// assert_eq!(drift, Duration::from_millis(102));
/// ```
pub fn clock_drift(lease: Duration, factor: f64, floor: Duration) -> Duration {
    let factor = if factor.is_finite() && factor > 0.0 {
        factor
    } else {
        0.0
    };
    lease.mul_f64(factor).saturating_add(floor)
}

/// How long a lock taken with `lease` can still be trusted after `elapsed` was spent taking it:
/// `lease - elapsed - drift`, or `None` when that is zero or less.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use redlock_core::quorum::validity;
/// let ms = Duration::from_millis;
/// assert_eq!(validity(ms(1000), ms(100), ms(12)), Some(ms(888)));
/// assert_eq!(validity(ms(1000), ms(988), ms(12)), None);
/// ```
pub fn validity(lease: Duration, elapsed: Duration, drift: Duration) -> Option<Duration> {
    #[cfg(feature = "sabotage")]
    if crate::sabotage::on(&crate::sabotage::SKIP_VALIDITY) {
        let left = lease.saturating_sub(elapsed).saturating_sub(drift);
        return Some(left.max(Duration::from_millis(1)));
    }
    lease
        .checked_sub(elapsed)
        .and_then(|left| left.checked_sub(drift))
        .filter(|left| !left.is_zero())
}

/// A duration as Redis's millisecond expiry: rounded up (a lease shorter than asked would break
/// the validity promise), saturating for durations too long to represent. The one conversion of
/// every lock script's lease argument.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use redlock_core::quorum::lease_millis;
/// assert_eq!(lease_millis(Duration::from_micros(1_500)), 2);
/// assert_eq!(lease_millis(Duration::from_secs(30)), 30_000);
/// assert_eq!(lease_millis(Duration::MAX), u64::MAX);
/// ```
pub fn lease_millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos().div_ceil(1_000_000)).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn majority_of_small_clusters() {
        let expected = [(1, 1), (2, 2), (3, 2), (4, 3), (5, 3), (6, 4), (7, 4)];
        for (nodes, needed) in expected {
            assert_eq!(majority(nodes), needed, "nodes = {nodes}");
        }
    }

    #[test]
    fn drift_ignores_a_nonsense_factor() {
        let floor = Duration::from_millis(2);
        for factor in [f64::NAN, f64::INFINITY, -1.0] {
            assert_eq!(clock_drift(Duration::from_secs(1), factor, floor), floor);
        }
    }

    proptest! {
        #[test]
        fn two_majorities_always_share_a_node(nodes in 1usize..64) {
            prop_assert!(2 * majority(nodes) > nodes);
            prop_assert!(majority(nodes) <= nodes);
        }

        #[test]
        fn more_holders_than_permits_never_find_enough_grants(
            permits in 1u32..40,
            nodes in 1usize..40,
        ) {
            let quorum = ack_quorum(permits, nodes);
            // Pigeonhole: permits + 1 holders' grants exceed what the nodes can give...
            prop_assert!((permits as usize + 1) * quorum > permits as usize * nodes);
            // ...and with one grant fewer each they would not: the quorum is the smallest.
            prop_assert!((permits as usize + 1) * (quorum - 1) <= permits as usize * nodes);
            prop_assert!(quorum <= nodes.max(1));
            prop_assert_eq!(ack_quorum(1, nodes), majority(nodes));
        }

        #[test]
        fn validity_is_never_positive_once_elapsed_reaches_lease_minus_drift(
            lease_ms in 0u64..1_000_000,
            drift_ms in 0u64..10_000,
            over_ms in 0u64..1_000_000,
        ) {
            let lease = Duration::from_millis(lease_ms);
            let drift = Duration::from_millis(drift_ms);
            let elapsed = lease.saturating_sub(drift) + Duration::from_millis(over_ms);
            prop_assert_eq!(validity(lease, elapsed, drift), None);
        }

        #[test]
        fn validity_is_exactly_what_is_left_before_that(
            lease_ms in 1u64..1_000_000,
            drift_ms in 0u64..10_000,
            elapsed_ms in 0u64..1_000_000,
        ) {
            prop_assume!(elapsed_ms + drift_ms < lease_ms);
            let got = validity(
                Duration::from_millis(lease_ms),
                Duration::from_millis(elapsed_ms),
                Duration::from_millis(drift_ms),
            );
            prop_assert_eq!(got, Some(Duration::from_millis(lease_ms - elapsed_ms - drift_ms)));
        }

        #[test]
        fn validity_never_exceeds_the_lease_minus_drift(
            lease_us in 0u64..10_000_000,
            elapsed_us in 0u64..10_000_000,
            factor in 0.0f64..0.5,
        ) {
            let lease = Duration::from_micros(lease_us);
            let drift = clock_drift(lease, factor, Duration::from_millis(2));
            if let Some(left) = validity(lease, Duration::from_micros(elapsed_us), drift) {
                prop_assert!(left + drift <= lease);
                prop_assert!(!left.is_zero());
            }
        }
    }
}
