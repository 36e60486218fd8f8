//! The lock client, from the connection flags.

use std::time::Duration;

use redlock_reentrant::{ConfigError, LockClient, LockClientBuilder};

use crate::args::Connection;
use crate::exit::Failure;
use crate::report::Reporter;

/// Connects to the masters of `connection`; `watchdog_timeout` is the lease renewed while a
/// lock is held.
///
/// The settings are read as the library reads them (`LockClientBuilder::from_env`: every
/// `REDLOCK_*` variable, an empty one meaning its default), with the flags on top, so that a
/// service and its cron job sharing one environment lock the same keys the same way.
///
/// # Errors
///
/// [`Failure::Usage`] without nodes, with a bad URL (named by its position and redacted
/// address, never its password) or another setting that cannot work (named by its variable),
/// [`Failure::Lock`] with `NoQuorum` when too few masters answer.
pub(crate) async fn connect(
    connection: &Connection,
    watchdog_timeout: Option<Duration>,
    out: &Reporter,
) -> Result<LockClient, Failure> {
    let nodes: Vec<&str> = connection
        .nodes
        .iter()
        .map(|url| url.trim())
        .filter(|url| !url.is_empty())
        .collect();
    let flags = Flags {
        nodes: (!nodes.is_empty()).then(|| nodes.join(",")),
        key_prefix: connection.key_prefix.clone(),
        node_timeout: connection.node_timeout.map(humanize),
        watchdog_timeout: watchdog_timeout.map(humanize),
    };
    let builder = LockClientBuilder::from_lookup(|variable| {
        flags
            .value_of(variable)
            .or_else(|| std::env::var(variable).ok())
    })
    .map_err(|err| match err {
        ConfigError::Missing { .. } => Failure::Usage(
            "no Redis nodes: pass --nodes redis://host:6379,... or set REDLOCK_NODES".to_owned(),
        ),
        other => Failure::Usage(other.to_string()),
    })?;
    let client = builder.build().await?;
    let nodes = client.redlock().nodes();
    let addresses: Vec<String> = nodes
        .iter()
        .map(|node| node.address().to_string())
        .collect();
    out.info(&format!(
        "{} of the nodes make a majority: {}",
        nodes.quorum(),
        addresses.join(", ")
    ));
    Ok(client)
}

/// The connection flags given, as the values of the variables they stand for.
struct Flags {
    nodes: Option<String>,
    key_prefix: Option<String>,
    node_timeout: Option<String>,
    watchdog_timeout: Option<String>,
}

impl Flags {
    fn value_of(&self, variable: &str) -> Option<String> {
        match variable {
            "REDLOCK_NODES" => self.nodes.clone(),
            "REDLOCK_KEY_PREFIX" => self.key_prefix.clone(),
            "REDLOCK_NODE_TIMEOUT" => self.node_timeout.clone(),
            "REDLOCK_WATCHDOG_TIMEOUT" => self.watchdog_timeout.clone(),
            _ => None,
        }
    }
}

fn humanize(duration: Duration) -> String {
    humantime::format_duration(duration).to_string()
}
