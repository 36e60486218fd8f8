//! A lock client's settings as data: read from a service's own configuration file (feature
//! `serde`) or from the environment ([`LockClientConfig::from_env`]), checked with errors that
//! name the setting, and turned into a [`LockClientBuilder`].

use std::time::Duration;

use redlock_core::{NodeAddress, Redlock, RedlockConfig, ReplicaAcks, RetryPolicy};
use redlock_watchdog::WatchdogConfig;

use crate::LockClientBuilder;

/// Every setting of a lock client. Only `nodes` is required; every other field left out keeps
/// the library's default.
///
/// With the `serde` feature it deserializes from any serde format. Durations are strings like
/// `"30s"`, `"250ms"` or `"1m 30s"`, and unknown fields are refused, so a misspelt setting is an
/// error rather than a silent default:
///
/// ```toml
/// nodes = ["redis://10.0.0.1:6379", "redis://10.0.0.2:6379", "redis://10.0.0.3:6379"]
/// key_prefix = "billing:lock:"
/// watchdog_timeout = "30s"
/// node_timeout = "50ms"
/// retry = { retries = 3, base_delay = "20ms", max_delay = "400ms" }
/// ```
///
/// `Debug` shows node URLs with their passwords hidden.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use redlock_reentrant::LockClientConfig;
///
/// let config = LockClientConfig {
///     nodes: vec!["redis://127.0.0.1:6379".into()],
///     watchdog_timeout: Some(Duration::from_secs(10)),
///     ..LockClientConfig::default()
/// };
/// let builder = config.into_builder().expect("a usable configuration");
/// # let _ = builder;
/// ```
#[derive(Clone, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
pub struct LockClientConfig {
    /// The quorum's members: URLs of N independent Redis masters (`redis://`, `rediss://`,
    /// `redis+unix://`), or Redis Clusters (`redis+cluster://host:port?addr=host:port`). One
    /// URL is single-instance locking. Required. In a file, a list of URLs or one string of
    /// comma-separated URLs (as `REDLOCK_NODES`); a value of another shape is refused without
    /// being echoed, since URLs may hold passwords.
    #[cfg_attr(
        feature = "serde",
        serde(deserialize_with = "nodes_serde::deserialize")
    )]
    pub nodes: Vec<String>,
    /// Prepended to every lock name to form its key. Default `redlock:`.
    #[cfg_attr(feature = "serde", serde(default))]
    pub key_prefix: Option<String>,
    /// The lease of locks taken without one, renewed every third of it. Default 30 s.
    #[cfg_attr(feature = "serde", serde(default, with = "humantime_serde"))]
    pub watchdog_timeout: Option<Duration>,
    /// How long one node may take to answer. Default 1 % of the lease, within 20 ms ..= 500 ms.
    #[cfg_attr(feature = "serde", serde(default, with = "humantime_serde"))]
    pub node_timeout: Option<Duration>,
    /// How long connecting to a node may take. Default 2 s, or four node timeouts if longer.
    #[cfg_attr(feature = "serde", serde(default, with = "humantime_serde"))]
    pub connect_timeout: Option<Duration>,
    /// Retries of an acquisition that found no quorum. Default 3 retries, 20 ms growing to
    /// 400 ms.
    #[cfg_attr(feature = "serde", serde(default))]
    pub retry: Option<RetryConfig>,
    /// The clock-drift allowance as a fraction of the lease, in `[0, 1)`. Default 0.01.
    #[cfg_attr(feature = "serde", serde(default))]
    pub clock_drift_factor: Option<f64>,
    /// Connections in each node's pool. Default 4.
    #[cfg_attr(feature = "serde", serde(default))]
    pub pool_size: Option<usize>,
    /// Locks per renewal call. Default 500.
    #[cfg_attr(feature = "serde", serde(default))]
    pub renew_batch_size: Option<usize>,
    /// Stop renewing a hold after this long; it then expires and its holder is told. Off by
    /// default.
    #[cfg_attr(feature = "serde", serde(default, with = "humantime_serde"))]
    pub max_hold: Option<Duration>,
    /// Confirm acquisitions and renewals with `WAIT` on each node (see docs/deployments.md).
    /// Off by default.
    #[cfg_attr(feature = "serde", serde(default))]
    pub replica_acks: Option<ReplicaAcksConfig>,
}

/// The node URLs in a comma-separated list (`REDLOCK_NODES`, or `nodes` written as one string),
/// blanks around each and empty entries dropped.
pub(crate) fn split_nodes(list: &str) -> Vec<String> {
    list.split(',')
        .map(str::trim)
        .filter(|url| !url.is_empty())
        .map(str::to_owned)
        .collect()
}

/// `nodes` from a file: a list of URLs or one comma-separated string. Errors never quote a
/// value, which could be a URL with its password.
#[cfg(feature = "serde")]
mod nodes_serde {
    use serde::de::{Deserializer, Error, SeqAccess, Unexpected, Visitor};

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Vec<String>, D::Error> {
        deserializer.deserialize_any(Nodes)
    }

    const EXPECTED: &str = "a list of node URLs, or one string of comma-separated node URLs";

    struct Nodes;

    impl<'de> Visitor<'de> for Nodes {
        type Value = Vec<String>;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(EXPECTED)
        }

        fn visit_str<E: Error>(self, list: &str) -> Result<Self::Value, E> {
            Ok(super::split_nodes(list))
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let mut nodes = Vec::new();
            while let Some(url) = seq.next_element::<Url>()? {
                nodes.push(url.0);
            }
            Ok(nodes)
        }
    }

    /// One URL of the list: a string, or an error that names only the shape found.
    struct Url(String);

    impl<'de> serde::Deserialize<'de> for Url {
        fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            struct One;
            impl Visitor<'_> for One {
                type Value = String;
                fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    f.write_str("a node URL")
                }
                fn visit_str<E: Error>(self, url: &str) -> Result<String, E> {
                    Ok(url.to_owned())
                }
                fn visit_bytes<E: Error>(self, _: &[u8]) -> Result<String, E> {
                    Err(E::invalid_type(Unexpected::Other("bytes"), &self))
                }
            }
            deserializer.deserialize_string(One).map(Url)
        }
    }
}

/// Retries of an acquisition that found no quorum (see [`RetryPolicy`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
pub struct RetryConfig {
    /// Attempts after the first one.
    pub retries: u32,
    /// The ceiling of the first pause. Default 20 ms.
    #[cfg_attr(feature = "serde", serde(default, with = "humantime_serde"))]
    pub base_delay: Option<Duration>,
    /// The longest pause. Default 400 ms.
    #[cfg_attr(feature = "serde", serde(default, with = "humantime_serde"))]
    pub max_delay: Option<Duration>,
}

/// How many replicas must acknowledge a write, and how long `WAIT` may take (see
/// [`ReplicaAcks`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
pub struct ReplicaAcksConfig {
    /// Replicas that must have the write (at least 1).
    pub replicas: usize,
    /// How long `WAIT` waits for them (above zero, below the node timeout).
    #[cfg_attr(feature = "serde", serde(with = "humantime_serde"))]
    pub timeout: Duration,
}

/// A configuration that cannot be used: which setting, and why. The setting is named as it
/// was given: a field (`node_timeout`, `nodes[2]`) or an environment variable
/// (`REDLOCK_NODE_TIMEOUT`). A node URL is shown with its password hidden, never whole.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A required setting is missing.
    #[error("{setting} is not set")]
    Missing {
        /// The setting.
        setting: String,
    },
    /// A setting has a value that cannot work.
    #[error("{setting}: {reason}")]
    Invalid {
        /// The setting.
        setting: String,
        /// Why it cannot work.
        reason: String,
    },
}

/// How settings are named in errors: by their field, or by the environment variable they came
/// from (`env` hands in the function that names a field's variable).
#[derive(Clone, Copy)]
pub(crate) enum Naming {
    Fields,
    Environment(fn(&str) -> &'static str),
}

impl Naming {
    /// The name of `field` (`nodes`, `retry.base_delay`, ...).
    pub(crate) fn of(self, field: &str) -> String {
        match self {
            Naming::Fields => field.to_owned(),
            Naming::Environment(variable_of) => variable_of(field).to_owned(),
        }
    }

    /// The name of node `index`.
    fn node(self, index: usize) -> String {
        match self {
            Naming::Fields => format!("nodes[{index}]"),
            Naming::Environment(_) => format!("{} (node {index})", self.of("nodes")),
        }
    }
}

impl LockClientConfig {
    /// Checks every setting and returns the builder they make.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the first setting that cannot work: no nodes, a URL that is not
    /// a usable Redis URL, a zero duration, a drift factor outside `[0, 1)`, a zero pool or
    /// batch size, a zero retry delay, replica acknowledgements from no replica, a key prefix
    /// with `{` beside a cluster member, one server listed twice.
    pub fn into_builder(self) -> Result<LockClientBuilder, ConfigError> {
        self.into_builder_naming(Naming::Fields)
    }

    pub(crate) fn into_builder_naming(
        self,
        naming: Naming,
    ) -> Result<LockClientBuilder, ConfigError> {
        let invalid = |field: &str, reason: &str| ConfigError::Invalid {
            setting: naming.of(field),
            reason: reason.to_owned(),
        };
        if self.nodes.is_empty() {
            return Err(ConfigError::Missing {
                setting: naming.of("nodes"),
            });
        }
        for (field, duration) in [
            ("watchdog_timeout", self.watchdog_timeout),
            ("node_timeout", self.node_timeout),
            ("connect_timeout", self.connect_timeout),
            ("max_hold", self.max_hold),
        ] {
            if duration.is_some_and(|duration| duration.is_zero()) {
                return Err(invalid(field, "must be above zero"));
            }
        }
        for (field, size) in [
            ("pool_size", self.pool_size),
            ("renew_batch_size", self.renew_batch_size),
        ] {
            if size == Some(0) {
                return Err(invalid(field, "must be at least 1"));
            }
        }
        if let Some(factor) = self.clock_drift_factor {
            if !(factor.is_finite() && (0.0..1.0).contains(&factor)) {
                return Err(invalid("clock_drift_factor", "must be in [0, 1)"));
            }
        }
        if let Some(acks) = self.replica_acks {
            if acks.replicas == 0 {
                return Err(invalid("replica_acks.replicas", "must be at least 1"));
            }
            if acks.timeout.is_zero() {
                return Err(invalid(
                    "replica_acks.timeout",
                    "must be above zero (WAIT 0 waits forever)",
                ));
            }
        }
        let defaults = RedlockConfig::default();
        let retry = self.retry.map_or(defaults.retry, |retry| {
            let base = RetryPolicy::default();
            RetryPolicy {
                retries: retry.retries,
                base_delay: retry.base_delay.unwrap_or(base.base_delay),
                max_delay: retry.max_delay.unwrap_or(base.max_delay),
            }
        });
        if retry.retries > 0 && retry.base_delay.is_zero() {
            return Err(invalid(
                "retry.base_delay",
                "must be above zero (rivals that split a vote would retry in a tight loop)",
            ));
        }
        if retry.base_delay > retry.max_delay {
            return Err(invalid(
                "retry.base_delay",
                "is longer than retry.max_delay",
            ));
        }
        let redlock = RedlockConfig {
            nodes: self.nodes,
            key_prefix: self.key_prefix.unwrap_or(defaults.key_prefix),
            node_timeout: self.node_timeout,
            connect_timeout: self.connect_timeout,
            clock_drift_factor: self
                .clock_drift_factor
                .unwrap_or(defaults.clock_drift_factor),
            retry,
            pool_size: self.pool_size.unwrap_or(defaults.pool_size),
            replica_acks: self.replica_acks.map(|acks| ReplicaAcks {
                replicas: acks.replicas,
                timeout: acks.timeout,
            }),
            ..defaults
        };
        check_nodes(&redlock, naming)?;
        let watchdog_defaults = WatchdogConfig::default();
        let watchdog = WatchdogConfig {
            timeout: self.watchdog_timeout.unwrap_or(watchdog_defaults.timeout),
            batch_size: self
                .renew_batch_size
                .unwrap_or(watchdog_defaults.batch_size),
            max_hold: self.max_hold,
            ..watchdog_defaults
        };
        if let Err(err) = watchdog.check(&redlock) {
            let reason = match (err, redlock.node_timeout) {
                (redlock_core::InvalidArgument::LeaseTooShort { minimum, .. }, Some(node)) => {
                    format!("{:?} cannot work with a node timeout of {node:?}: it must exceed {minimum:?}", watchdog.timeout)
                }
                (redlock_core::InvalidArgument::LeaseTooShort { minimum, .. }, None) => {
                    format!(
                        "{:?} is too short: it must exceed {minimum:?}",
                        watchdog.timeout
                    )
                }
                (other, _) => other.to_string(),
            };
            return Err(ConfigError::Invalid {
                setting: naming.of("watchdog_timeout"),
                reason,
            });
        }
        Ok(LockClientBuilder::default()
            .redlock_config(redlock)
            .watchdog_config(watchdog))
    }
}

/// Opens the nodes (nothing connects) to find a URL that cannot be used, and the settings the
/// quorum core refuses.
fn check_nodes(config: &RedlockConfig, naming: Naming) -> Result<(), ConfigError> {
    use redlock_core::InvalidArgument;
    match Redlock::new(config.clone()) {
        Ok(_) => Ok(()),
        Err(redlock_core::Error::InvalidArgument(InvalidArgument::NodeUrl {
            index,
            address,
            reason,
        })) => Err(ConfigError::Invalid {
            setting: naming.node(index),
            reason: format!("{address} is not a usable Redis URL: {reason}"),
        }),
        Err(redlock_core::Error::InvalidArgument(InvalidArgument::HashTagInPrefix { .. })) => {
            Err(ConfigError::Invalid {
                setting: naming.of("key_prefix"),
                reason: "may not contain `{` with a Redis Cluster member (the lock name is the hash tag)".to_owned(),
            })
        }
        Err(other) => Err(ConfigError::Invalid {
            setting: naming.of("nodes"),
            reason: other.to_string(),
        }),
    }
}

impl std::fmt::Debug for LockClientConfig {
    /// Node URLs are shown without their passwords.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockClientConfig")
            .field("nodes", &NodeAddress::redact_all(&self.nodes))
            .field("key_prefix", &self.key_prefix)
            .field("watchdog_timeout", &self.watchdog_timeout)
            .field("node_timeout", &self.node_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("retry", &self.retry)
            .field("clock_drift_factor", &self.clock_drift_factor)
            .field("pool_size", &self.pool_size)
            .field("renew_batch_size", &self.renew_batch_size)
            .field("max_hold", &self.max_hold)
            .field("replica_acks", &self.replica_acks)
            .finish()
    }
}
