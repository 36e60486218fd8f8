//! How long a renewed lease lasts, how often it is renewed, and for how long at most.

use std::time::Duration;

use redlock_core::{InvalidArgument, RedlockConfig};

/// The watchdog's settings.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use redlock_watchdog::WatchdogConfig;
/// let config = WatchdogConfig { timeout: Duration::from_secs(3), ..WatchdogConfig::default() };
/// assert_eq!(config.renew_interval(), Duration::from_secs(1));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchdogConfig {
    /// The lease each renewal sets (Redisson's `lockWatchdogTimeout`). Default 30 s. A holder
    /// that dies stops renewing, and its locks free within this time of the last renewal.
    pub timeout: Duration,
    /// How often locks are renewed. `None` (the default) is `timeout / 3`: 10 s for 30 s.
    pub interval: Option<Duration>,
    /// How many locks one renewal script call carries. Default 500: 10,000 held locks cost
    /// 20 calls per node per tick, sent concurrently on one connection.
    pub batch_size: usize,
    /// A cap on how long one hold is renewed. After it, renewal stops, the lease runs out and the
    /// holder is told the lock is lost: a stuck holder cannot keep a lock forever. Off by default.
    pub max_hold: Option<Duration>,
}

impl Default for WatchdogConfig {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(30),
            interval: None,
            batch_size: 500,
            max_hold: None,
        }
    }
}

impl WatchdogConfig {
    /// The time between two renewals of a healthy lock.
    pub fn renew_interval(&self) -> Duration {
        self.interval.unwrap_or(self.timeout / 3)
    }

    /// The time before retrying after a renewal that did not reach a majority: a quarter of the
    /// interval, so a flaky node costs a few retries before the lease is in danger.
    pub fn retry_interval(&self) -> Duration {
        self.renew_interval() / 4
    }

    /// How long one node may take to answer a renewal batch: the quorum's per-node timeout, or a
    /// quarter of the interval if that is longer. Renewal is not in a hurry, it has a deadline: a
    /// batch of hundreds of locks on a busy node deserves more time than one lock operation.
    pub fn renew_request_timeout(&self, node_timeout: Duration) -> Duration {
        node_timeout.max(self.renew_interval() / 4)
    }

    /// Whether this watchdog can work with the quorum's `redlock` settings: a renewal started
    /// one interval after the last confirmed one must be able to confirm before the hold is
    /// declared lost, and the lease must leave room for three requests.
    ///
    /// # Errors
    ///
    /// [`InvalidArgument::ZeroLease`] for a zero timeout or interval,
    /// [`InvalidArgument::LeaseTooShort`] (with the shortest lease that works) otherwise.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlock_core::RedlockConfig;
    /// use redlock_watchdog::WatchdogConfig;
    /// let quorum = RedlockConfig {
    ///     node_timeout: Some(Duration::from_secs(2)),
    ///     ..RedlockConfig::with_nodes(["redis://127.0.0.1:6379"])
    /// };
    /// let watchdog = WatchdogConfig { timeout: Duration::from_secs(3), ..WatchdogConfig::default() };
    /// assert!(watchdog.check(&quorum).is_err());
    /// assert!(WatchdogConfig::default().check(&quorum).is_ok());
    /// ```
    pub fn check(&self, redlock: &RedlockConfig) -> Result<(), InvalidArgument> {
        let timeout = self.timeout;
        if timeout.is_zero() || self.renew_interval().is_zero() {
            return Err(InvalidArgument::ZeroLease);
        }
        let redlock_core::Timing {
            node_timeout,
            drift,
            ..
        } = redlock.timing(timeout);
        // Saturating: a huge setting is refused, never a panic.
        let minimum = self
            .renew_interval()
            .saturating_add(self.lost_margin(node_timeout))
            .saturating_add(drift)
            .max(node_timeout.saturating_add(drift).saturating_mul(3));
        if timeout <= minimum {
            return Err(InvalidArgument::LeaseTooShort {
                lease: timeout,
                minimum,
            });
        }
        Ok(())
    }

    /// How long before the end of its validity an unconfirmed hold is declared lost: a round in
    /// flight when the deadline passes, and one more that could still confirm it. The holder is
    /// told while the lock is still its own.
    pub fn lost_margin(&self, node_timeout: Duration) -> Duration {
        self.renew_request_timeout(node_timeout).saturating_mul(2)
    }

    /// How long before the end of its validity a hold that is not renewed (a fixed lease, or a
    /// hold whose renewal stopped) is declared lost: a tenth of the lease that set the
    /// validity, and never more than [`WatchdogConfig::lost_margin`]. Time for the holder to
    /// stop (a job to be killed, a write to be given up) while the lock is still its own.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlock_watchdog::WatchdogConfig;
    /// let config = WatchdogConfig::default();
    /// let node_timeout = Duration::from_millis(300);
    /// // A one-second lease: told 100 ms before its validity ends.
    /// assert_eq!(
    ///     config.fixed_lost_margin(Duration::from_secs(1), node_timeout),
    ///     Duration::from_millis(100)
    /// );
    /// // A long one: no earlier than a renewed hold would be.
    /// assert_eq!(
    ///     config.fixed_lost_margin(Duration::from_secs(3600), node_timeout),
    ///     config.lost_margin(node_timeout)
    /// );
    /// ```
    pub fn fixed_lost_margin(&self, lease: Duration, node_timeout: Duration) -> Duration {
        fixed_lost_margin(self.lost_margin(node_timeout), lease)
    }
}

/// A tenth of `lease`, at most `lost_margin`.
pub(crate) fn fixed_lost_margin(lost_margin: Duration, lease: Duration) -> Duration {
    lost_margin.min(lease / 10)
}
