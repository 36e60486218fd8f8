//! A lock client's settings from environment variables (`REDLOCK_*`), the twelve-factor way.

use std::time::Duration;

use crate::config::{ConfigError, LockClientConfig, Naming, ReplicaAcksConfig, RetryConfig};

/// Each setting and the variable it is read from: the one place their names are paired.
const VARIABLES: [(&str, &str); 13] = [
    ("nodes", "REDLOCK_NODES"),
    ("key_prefix", "REDLOCK_KEY_PREFIX"),
    ("watchdog_timeout", "REDLOCK_WATCHDOG_TIMEOUT"),
    ("node_timeout", "REDLOCK_NODE_TIMEOUT"),
    ("connect_timeout", "REDLOCK_CONNECT_TIMEOUT"),
    ("retry.retries", "REDLOCK_RETRIES"),
    ("retry.base_delay", "REDLOCK_RETRY_BASE_DELAY"),
    ("retry.max_delay", "REDLOCK_RETRY_MAX_DELAY"),
    ("clock_drift_factor", "REDLOCK_CLOCK_DRIFT_FACTOR"),
    ("pool_size", "REDLOCK_POOL_SIZE"),
    ("renew_batch_size", "REDLOCK_RENEW_BATCH_SIZE"),
    ("max_hold", "REDLOCK_MAX_HOLD"),
    ("replica_acks.replicas", "REDLOCK_REPLICA_ACKS"),
];

/// `replica_acks.timeout`'s variable, apart: the table is of settings one variable sets alone.
const REPLICA_ACKS_TIMEOUT: &str = "REDLOCK_REPLICA_ACKS_TIMEOUT";

/// The environment variable of a setting (`field` as [`LockClientConfig`] names it).
pub(crate) fn variable_of(field: &str) -> &'static str {
    if field == "replica_acks.timeout" {
        return REPLICA_ACKS_TIMEOUT;
    }
    VARIABLES
        .iter()
        .find(|(name, _)| *name == field)
        .map_or("REDLOCK_*", |(_, variable)| variable)
}

impl LockClientConfig {
    /// Reads the settings from the environment. Unset (or empty) variables keep the default;
    /// `REDLOCK_NODES` is required.
    ///
    /// | variable | setting | example |
    /// | --- | --- | --- |
    /// | `REDLOCK_NODES` | `nodes`, comma-separated | `redis://a:6379,redis://b:6379,redis://c:6379` |
    /// | `REDLOCK_KEY_PREFIX` | `key_prefix` | `billing:lock:` |
    /// | `REDLOCK_WATCHDOG_TIMEOUT` | `watchdog_timeout` | `30s` |
    /// | `REDLOCK_NODE_TIMEOUT` | `node_timeout` | `50ms` |
    /// | `REDLOCK_CONNECT_TIMEOUT` | `connect_timeout` | `2s` |
    /// | `REDLOCK_RETRIES` | `retry.retries` | `3` |
    /// | `REDLOCK_RETRY_BASE_DELAY` | `retry.base_delay` | `20ms` |
    /// | `REDLOCK_RETRY_MAX_DELAY` | `retry.max_delay` | `400ms` |
    /// | `REDLOCK_CLOCK_DRIFT_FACTOR` | `clock_drift_factor` | `0.01` |
    /// | `REDLOCK_POOL_SIZE` | `pool_size` | `4` |
    /// | `REDLOCK_RENEW_BATCH_SIZE` | `renew_batch_size` | `500` |
    /// | `REDLOCK_MAX_HOLD` | `max_hold` | `1h` |
    /// | `REDLOCK_REPLICA_ACKS` | `replica_acks.replicas` | `1` |
    /// | `REDLOCK_REPLICA_ACKS_TIMEOUT` | `replica_acks.timeout` | `100ms` |
    ///
    /// Durations are humantime strings (`30s`, `250ms`, `1m 30s`).
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the variable: a value that does not parse (never shown when it
    /// is `REDLOCK_NODES`, whose URLs may hold passwords), or `REDLOCK_REPLICA_ACKS` without
    /// `REDLOCK_REPLICA_ACKS_TIMEOUT`.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|variable| std::env::var(variable).ok())
    }

    /// [`LockClientConfig::from_env`] over any source of variables (a test's map, a secrets
    /// store).
    ///
    /// # Errors
    ///
    /// As [`LockClientConfig::from_env`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlock_reentrant::LockClientConfig;
    ///
    /// let config = LockClientConfig::from_lookup(|variable| match variable {
    ///     "REDLOCK_NODES" => Some("redis://a:6379, redis://b:6379, redis://c:6379".into()),
    ///     "REDLOCK_NODE_TIMEOUT" => Some("50ms".into()),
    ///     _ => None,
    /// })?;
    /// assert_eq!(config.nodes.len(), 3);
    /// assert_eq!(config.node_timeout, Some(Duration::from_millis(50)));
    ///
    /// let bad = LockClientConfig::from_lookup(|variable| match variable {
    ///     "REDLOCK_NODES" => Some("redis://a:6379".into()),
    ///     "REDLOCK_WATCHDOG_TIMEOUT" => Some("thirty".into()),
    ///     _ => None,
    /// });
    /// assert!(bad.unwrap_err().to_string().starts_with("REDLOCK_WATCHDOG_TIMEOUT"));
    /// # Ok::<(), redlock_reentrant::ConfigError>(())
    /// ```
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let read = |field: &str| {
            lookup(variable_of(field))
                .map(|value| value.trim().to_owned())
                .filter(|value| !value.is_empty())
        };
        let duration = |field: &str| -> Result<Option<Duration>, ConfigError> {
            read(field)
                .map(|value| {
                    humantime::parse_duration(&value).map_err(|err| invalid(field, &value, &err))
                })
                .transpose()
        };
        let number = |field: &str| -> Result<Option<u64>, ConfigError> {
            read(field)
                .map(|value| value.parse().map_err(|err| invalid(field, &value, &err)))
                .transpose()
        };
        let size = |field: &str| -> Result<Option<usize>, ConfigError> {
            number(field)?
                .map(|n| usize::try_from(n).map_err(|err| invalid(field, &n.to_string(), &err)))
                .transpose()
        };
        let nodes: Vec<String> = read("nodes")
            .map(|list| crate::config::split_nodes(&list))
            .unwrap_or_default();
        let retries = number("retry.retries")?
            .map(|n| u32::try_from(n).map_err(|err| invalid("retry.retries", &n.to_string(), &err)))
            .transpose()?;
        let (base_delay, max_delay) = (duration("retry.base_delay")?, duration("retry.max_delay")?);
        let retry = (retries.is_some() || base_delay.is_some() || max_delay.is_some()).then(|| {
            RetryConfig {
                retries: retries.unwrap_or(crate::RetryPolicy::default().retries),
                base_delay,
                max_delay,
            }
        });
        let replica_acks = match (
            size("replica_acks.replicas")?,
            duration("replica_acks.timeout")?,
        ) {
            (Some(replicas), Some(timeout)) => Some(ReplicaAcksConfig { replicas, timeout }),
            (None, None) => None,
            (Some(_), None) => {
                return Err(ConfigError::Missing {
                    setting: REPLICA_ACKS_TIMEOUT.to_owned(),
                })
            }
            (None, Some(_)) => {
                return Err(ConfigError::Missing {
                    setting: variable_of("replica_acks.replicas").to_owned(),
                })
            }
        };
        let clock_drift_factor = read("clock_drift_factor")
            .map(|value| {
                value
                    .parse()
                    .map_err(|err| invalid("clock_drift_factor", &value, &err))
            })
            .transpose()?;
        Ok(Self {
            nodes,
            key_prefix: read("key_prefix"),
            watchdog_timeout: duration("watchdog_timeout")?,
            node_timeout: duration("node_timeout")?,
            connect_timeout: duration("connect_timeout")?,
            retry,
            clock_drift_factor,
            pool_size: size("pool_size")?,
            renew_batch_size: size("renew_batch_size")?,
            max_hold: duration("max_hold")?,
            replica_acks,
        })
    }

    /// [`LockClientConfig::into_builder`], naming settings by their environment variables.
    pub(crate) fn into_env_builder(self) -> Result<crate::LockClientBuilder, ConfigError> {
        self.into_builder_naming(Naming::Environment(variable_of))
    }
}

/// A variable whose value does not parse. Only `REDLOCK_NODES` could hold a secret, and it is
/// never parsed here.
fn invalid(field: &str, value: &str, err: &dyn std::fmt::Display) -> ConfigError {
    ConfigError::Invalid {
        setting: variable_of(field).to_owned(),
        reason: format!("cannot parse `{value}`: {err}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_setting_has_its_own_variable() {
        let mut variables: Vec<&str> = VARIABLES.iter().map(|(_, variable)| *variable).collect();
        variables.push(REPLICA_ACKS_TIMEOUT);
        let count = variables.len();
        variables.sort_unstable();
        variables.dedup();
        assert_eq!(variables.len(), count);
        assert!(variables
            .iter()
            .all(|variable| variable.starts_with("REDLOCK_")));
    }
}
