//! Everything a [`Redlock`](crate::Redlock) is configured with.

use std::time::{Duration, Instant};

use crate::cluster::is_cluster_url;
use crate::members::first_duplicate;
use crate::quorum::{clock_drift, validity};
use crate::{InvalidArgument, NodeAddress, RetryPolicy};

/// The configuration of a [`Redlock`](crate::Redlock).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use redlock_core::RedlockConfig;
/// let config = RedlockConfig {
///     nodes: vec!["redis://127.0.0.1:7001".into(), "redis://127.0.0.1:7002".into(), "redis://127.0.0.1:7003".into()],
///     key_prefix: "myapp:lock:".into(),
///     node_timeout: Some(Duration::from_millis(50)),
///     ..RedlockConfig::default()
/// };
/// assert_eq!(config.node_timeout_for(Duration::from_secs(10)), Duration::from_millis(50));
/// ```
#[derive(Clone, PartialEq)]
pub struct RedlockConfig {
    /// URLs of N independent Redis masters (`redis://`, `rediss://` with the `tls-rustls`
    /// feature, `redis+unix://`; `user:password@` for AUTH or ACL). One URL is single-instance
    /// locking. Never replicas of each other: Redlock needs independent failures. Each server
    /// once: two URLs naming one server (another database of it, or a shared cluster seed) are
    /// refused with [`InvalidArgument::DuplicateNode`](crate::InvalidArgument::DuplicateNode).
    ///
    /// A member can also be a whole Redis Cluster: `redis+cluster://host:port` (or
    /// `rediss+cluster://`), with more seed nodes as `?addr=host:port&addr=host:port`. Each
    /// lock's keys then take the lock name as their hash tag (`{prefix}{name}`).
    pub nodes: Vec<String>,
    /// Prepended to every lock name to form its Redis key. Default `redlock:`. With a cluster
    /// member it may not contain `{`.
    pub key_prefix: String,
    /// How long one node may take to answer before it counts as failed for that request.
    /// `None` (the default) uses 1 % of the lease, clamped to 20 ms ..= 500 ms, so a 10 s lease
    /// waits at most 100 ms for a slow node.
    pub node_timeout: Option<Duration>,
    /// The clock-drift allowance as a fraction of the lease. Default `0.01`.
    pub clock_drift_factor: f64,
    /// The clock-drift allowance added to the fraction. Default 2 ms.
    pub clock_drift_floor: Duration,
    /// How long connecting to a node (TCP, TLS handshake, `AUTH`) may take. `None` (the
    /// default) is 2 s, or four per-node timeouts if that is longer. Connections are made in
    /// the background (and when the client is built): a request waits for one at most its
    /// per-node timeout, and a slow handshake still completes for the next request.
    pub connect_timeout: Option<Duration>,
    /// Retries of a failed acquisition.
    pub retry: RetryPolicy,
    /// The most connections the pool of each node may hold. Default 4. Commands share one
    /// multiplexed connection per node; the others serve while it is being replaced.
    pub pool_size: usize,
    /// Writes that must survive a failover (acquisitions, renewals, fencing write-backs) are
    /// confirmed with `WAIT` on each node: a node counts one only when this many replicas
    /// acknowledged it in time. `None` (the default) does not wait. See docs/deployments.md.
    pub replica_acks: Option<ReplicaAcks>,
}

/// How many replicas must acknowledge a write, and how long `WAIT` may take for them.
///
/// `WAIT` runs within the request's per-node timeout: keep `timeout` below it, or a node whose
/// replicas lag counts as timed out rather than unconfirmed.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use redlock_core::{RedlockConfig, ReplicaAcks};
/// let config = RedlockConfig {
///     nodes: vec!["redis+cluster://10.0.0.1:7000?addr=10.0.0.2:7000".into()],
///     node_timeout: Some(Duration::from_millis(200)),
///     replica_acks: Some(ReplicaAcks { replicas: 1, timeout: Duration::from_millis(100) }),
///     ..RedlockConfig::default()
/// };
/// assert_eq!(config.key_for("job"), "redlock:{job}");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplicaAcks {
    /// How many replicas must have the write.
    pub replicas: usize,
    /// How long `WAIT` waits for them (never zero: `WAIT` with 0 waits forever).
    pub timeout: Duration,
}

impl ReplicaAcks {
    pub(crate) fn timeout_millis(&self) -> u64 {
        u64::try_from(self.timeout.as_millis())
            .unwrap_or(u64::MAX)
            .max(1)
    }
}

impl Default for RedlockConfig {
    fn default() -> Self {
        Self {
            nodes: Vec::new(),
            key_prefix: "redlock:".to_owned(),
            node_timeout: None,
            connect_timeout: None,
            clock_drift_factor: 0.01,
            clock_drift_floor: Duration::from_millis(2),
            retry: RetryPolicy::default(),
            pool_size: 4,
            replica_acks: None,
        }
    }
}

const AUTO_TIMEOUT_MIN: Duration = Duration::from_millis(20);
const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
const AUTO_TIMEOUT_MAX: Duration = Duration::from_millis(500);
/// Redis stores expiries in milliseconds as a signed 64-bit number; stay far below.
const LONGEST_LEASE: Duration = Duration::from_secs(60 * 60 * 24 * 365 * 100);

/// The timings of requests about a lock with one lease ([`RedlockConfig::timing`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// The lease the requests set.
    pub lease: Duration,
    /// How long each node may take to answer ([`RedlockConfig::node_timeout_for`]).
    pub node_timeout: Duration,
    /// The clock-drift allowance for the lease ([`RedlockConfig::drift_for`]).
    pub drift: Duration,
}

impl Timing {
    /// The validity left to a grant that took `elapsed` ([`validity`]); `None`: none.
    pub fn validity(&self, elapsed: Duration) -> Option<Duration> {
        validity(self.lease, elapsed, self.drift)
    }

    /// The end of the validity of a grant whose requests started at `started`.
    pub fn valid_until(&self, started: Instant) -> Instant {
        started + self.lease.saturating_sub(self.drift)
    }
}

impl RedlockConfig {
    /// A configuration for these node URLs, everything else default.
    pub fn with_nodes<I, S>(nodes: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self {
            nodes: nodes.into_iter().map(Into::into).collect(),
            ..Self::default()
        }
    }

    /// The per-node timeout used for requests about a lock with this lease.
    pub fn node_timeout_for(&self, lease: Duration) -> Duration {
        self.node_timeout
            .unwrap_or_else(|| (lease / 100).clamp(AUTO_TIMEOUT_MIN, AUTO_TIMEOUT_MAX))
    }

    /// How long connecting to a node may take (see [`RedlockConfig::connect_timeout`]).
    pub fn connect_timeout(&self) -> Duration {
        self.connect_timeout.unwrap_or_else(|| {
            self.node_timeout
                .map_or(DEFAULT_CONNECT_TIMEOUT, |timeout| timeout.saturating_mul(4))
                .max(DEFAULT_CONNECT_TIMEOUT)
        })
    }

    /// The clock-drift allowance for this lease.
    pub fn drift_for(&self, lease: Duration) -> Duration {
        clock_drift(lease, self.clock_drift_factor, self.clock_drift_floor)
    }

    /// The timings of requests about a lock with this lease, computed once: the per-node
    /// timeout and the clock-drift allowance.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlock_core::RedlockConfig;
    /// let config = RedlockConfig::with_nodes(["redis://127.0.0.1:6379"]);
    /// let timing = config.timing(Duration::from_secs(10));
    /// assert_eq!(timing.node_timeout, config.node_timeout_for(timing.lease));
    /// assert_eq!(timing.drift, config.drift_for(timing.lease));
    /// ```
    pub fn timing(&self, lease: Duration) -> Timing {
        Timing {
            lease,
            node_timeout: self.node_timeout_for(lease),
            drift: self.drift_for(lease),
        }
    }

    /// The Redis key of a lock name: `{prefix}{name}`, or `{prefix}{{name}}` when a node is a
    /// Redis Cluster (the name is the hash tag every key of the lock shares).
    pub fn key_for(&self, name: &str) -> String {
        if self.has_cluster_member() {
            format!("{}{{{name}}}", self.key_prefix)
        } else {
            format!("{}{name}", self.key_prefix)
        }
    }

    /// The cluster hash slot of `key` when a node is a Redis Cluster member (`None` otherwise):
    /// calls that batch many locks' keys must keep to one slot.
    pub fn slot_of(&self, key: &str) -> Option<u16> {
        self.has_cluster_member()
            .then(|| crate::cluster::hash_slot(key.as_bytes()))
    }

    /// Whether a node is a Redis Cluster member (`redis+cluster://`).
    pub fn has_cluster_member(&self) -> bool {
        self.nodes.iter().any(|url| is_cluster_url(url))
    }

    /// Checks a lock name and lease before anything is sent.
    ///
    /// # Errors
    ///
    /// [`InvalidArgument::EmptyName`], [`InvalidArgument::ZeroLease`],
    /// [`InvalidArgument::LeaseTooLong`], or [`InvalidArgument::LeaseTooShort`] when the lease
    /// does not exceed the per-node timeout plus the drift allowance (no validity could remain).
    pub fn check_request(&self, name: &str, lease: Duration) -> Result<(), InvalidArgument> {
        if name.is_empty() {
            return Err(InvalidArgument::EmptyName);
        }
        if lease.is_zero() {
            return Err(InvalidArgument::ZeroLease);
        }
        if name.starts_with('}') && self.has_cluster_member() {
            // `{prefix}{}...}`: an empty hash tag, so the lock's keys would not share a slot.
            return Err(InvalidArgument::EmptyHashTag {
                name: name.to_owned(),
            });
        }
        if lease > LONGEST_LEASE {
            return Err(InvalidArgument::LeaseTooLong { lease });
        }
        let minimum = self
            .node_timeout_for(lease)
            .saturating_add(self.drift_for(lease));
        if lease <= minimum {
            return Err(InvalidArgument::LeaseTooShort { lease, minimum });
        }
        Ok(())
    }

    /// Checks the settings that do not depend on a request.
    pub(crate) fn check(&self) -> Result<(), InvalidArgument> {
        if self.nodes.is_empty() {
            return Err(InvalidArgument::NoNodes);
        }
        if let Some((first, second, server)) = first_duplicate(&self.nodes) {
            return Err(InvalidArgument::DuplicateNode {
                first,
                second,
                server,
            });
        }
        if self.node_timeout.is_some_and(|timeout| timeout.is_zero())
            || self
                .connect_timeout
                .is_some_and(|timeout| timeout.is_zero())
        {
            return Err(InvalidArgument::ZeroNodeTimeout);
        }
        if self.retry.retries > 0 && self.retry.base_delay.is_zero() {
            return Err(InvalidArgument::ZeroRetryDelay);
        }
        let factor = self.clock_drift_factor;
        if !(factor.is_finite() && (0.0..1.0).contains(&factor)) {
            return Err(InvalidArgument::DriftFactor(factor));
        }
        if self.has_cluster_member() && self.key_prefix.contains('{') {
            return Err(InvalidArgument::HashTagInPrefix {
                prefix: self.key_prefix.clone(),
            });
        }
        if self
            .replica_acks
            .is_some_and(|acks| acks.replicas == 0 || acks.timeout.is_zero())
        {
            return Err(InvalidArgument::ReplicaAcks);
        }
        Ok(())
    }
}

impl std::fmt::Debug for RedlockConfig {
    /// Node URLs are shown without their passwords.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedlockConfig")
            .field("nodes", &NodeAddress::redact_all(&self.nodes))
            .field("key_prefix", &self.key_prefix)
            .field("node_timeout", &self.node_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("clock_drift_factor", &self.clock_drift_factor)
            .field("clock_drift_floor", &self.clock_drift_floor)
            .field("retry", &self.retry)
            .field("pool_size", &self.pool_size)
            .field("replica_acks", &self.replica_acks)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_node_timeout_is_a_small_clamped_fraction_of_the_lease() {
        let config = RedlockConfig::default();
        let ms = Duration::from_millis;
        assert_eq!(config.node_timeout_for(Duration::from_secs(10)), ms(100));
        assert_eq!(config.node_timeout_for(Duration::from_secs(30)), ms(300));
        assert_eq!(config.node_timeout_for(ms(500)), ms(20));
        assert_eq!(config.node_timeout_for(Duration::from_secs(3600)), ms(500));
    }

    #[test]
    fn requests_that_can_never_hold_are_refused() {
        let config = RedlockConfig::with_nodes(["redis://127.0.0.1:1"]);
        assert_eq!(
            config.check_request("", Duration::from_secs(1)),
            Err(InvalidArgument::EmptyName)
        );
        assert_eq!(
            config.check_request("a", Duration::ZERO),
            Err(InvalidArgument::ZeroLease)
        );
        assert!(matches!(
            config.check_request("a", Duration::from_millis(22)),
            Err(InvalidArgument::LeaseTooShort { .. })
        ));
        assert!(config
            .check_request("a", Duration::from_millis(100))
            .is_ok());
    }

    #[test]
    fn a_name_that_would_leave_an_empty_hash_tag_is_refused_with_a_cluster_member() {
        let lease = Duration::from_secs(10);
        let cluster = RedlockConfig::with_nodes(["redis+cluster://127.0.0.1:7000"]);
        assert!(matches!(
            cluster.check_request("}job", lease),
            Err(InvalidArgument::EmptyHashTag { .. })
        ));
        assert!(cluster.check_request("job}x", lease).is_ok());
        let standalone = RedlockConfig::with_nodes(["redis://127.0.0.1:6379"]);
        assert!(standalone.check_request("}job", lease).is_ok());
    }

    #[test]
    fn debug_never_shows_a_password() {
        let config = RedlockConfig::with_nodes([
            "redis://:hunter2@127.0.0.1:1",
            "rediss://user:hunter2@host:2/0",
            "redis+unix:///tmp/r.sock?pass=hunter2",
        ]);
        let shown = format!("{config:?} {config:#?}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("127.0.0.1:1"), "{shown}");
    }

    #[test]
    fn the_connect_timeout_has_a_bound_of_its_own() {
        let mut config = RedlockConfig::with_nodes(["redis://127.0.0.1:1"]);
        assert_eq!(config.connect_timeout(), Duration::from_secs(2));
        config.node_timeout = Some(Duration::from_secs(1));
        assert_eq!(config.connect_timeout(), Duration::from_secs(4));
        config.connect_timeout = Some(Duration::from_millis(300));
        assert_eq!(config.connect_timeout(), Duration::from_millis(300));
        config.connect_timeout = Some(Duration::ZERO);
        assert_eq!(config.check(), Err(InvalidArgument::ZeroNodeTimeout));
    }

    #[test]
    fn settings_are_checked() {
        assert_eq!(
            RedlockConfig::default().check(),
            Err(InvalidArgument::NoNodes)
        );
        let mut config = RedlockConfig::with_nodes(["redis://127.0.0.1:1"]);
        config.clock_drift_factor = f64::NAN;
        assert!(matches!(
            config.check(),
            Err(InvalidArgument::DriftFactor(_))
        ));
        config.clock_drift_factor = 0.01;
        config.node_timeout = Some(Duration::ZERO);
        assert_eq!(config.check(), Err(InvalidArgument::ZeroNodeTimeout));
        config.node_timeout = None;
        config.retry.base_delay = Duration::ZERO;
        assert_eq!(config.check(), Err(InvalidArgument::ZeroRetryDelay));
        config.retry.retries = 0;
        assert_eq!(config.check(), Ok(()), "no retries, no pause to take");
    }

    #[test]
    fn one_server_listed_twice_is_refused() {
        let config = RedlockConfig::with_nodes([
            "redis://:pw@127.0.0.1:7000",
            "redis://127.0.0.1:7001",
            "redis://localhost:7000/2",
        ]);
        assert_eq!(
            config.check(),
            Err(InvalidArgument::DuplicateNode {
                first: 0,
                second: 2,
                server: "localhost:7000".to_owned()
            })
        );
    }
}
