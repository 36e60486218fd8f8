//! The lock client, from the connection flags.

use std::time::Duration;

use redlock_reentrant::{ConfigError, LockClient, LockClientBuilder};

use crate::args::Connection;
use crate::exit::Failure;
use crate::report::Reporter;

/// The lease the watchdog renews for the client's holds.
#[derive(Debug, Clone, Copy)]
pub(crate) enum WatchdogLease {
    /// `--watchdog-timeout`, if given; else the environment's, else the library's default.
    Given(Option<Duration>),
    /// The command takes no lock (`status`, `unlock`): any lease that fits the node timeout.
    TakesNoLock,
}

/// How long redlock waits before it exits for what is still on its way to masters it did not
/// wait for (a release queued for one reconnecting, the replies of a slow one): past it, those
/// keep the lock until its lease ends, as a crashed holder's would.
pub(crate) const FLUSH: Duration = Duration::from_secs(2);

/// Shuts `client` down (every hold it has is released), then waits, at most [`FLUSH`], for
/// what is still on its way: the runtime ends with the process, and whatever it has not sent
/// by then is never sent.
pub(crate) async fn close(client: LockClient) {
    client.shutdown().await;
    drop(client);
    if !redlock_reentrant::cleanups_settled(FLUSH).await {
        tracing::debug!(
            "releases still on their way after {FLUSH:?}: those masters keep the lock until its lease ends"
        );
    }
}

/// Connects to the masters of `connection`.
///
/// The settings are read as the library reads them (`LockClientBuilder::from_env`: every
/// `REDLOCK_*` variable, an empty one meaning its default), with the flags on top, so that a
/// service and its cron job sharing one environment lock the same keys the same way. A flag is
/// taken as written (`--key-prefix ""` is the empty prefix).
///
/// # Errors
///
/// [`Failure::Usage`] without nodes, with a bad URL (named by its position and redacted
/// address, never its password) or another setting that cannot work (named by its variable),
/// [`Failure::Lock`] with `NoQuorum` when too few masters answer.
pub(crate) async fn connect(
    connection: &Connection,
    watchdog: WatchdogLease,
    out: &Reporter,
) -> Result<LockClient, Failure> {
    let no_nodes = || {
        Failure::Usage(
            "no Redis nodes: pass --nodes redis://host:6379,... or set REDLOCK_NODES".to_owned(),
        )
    };
    let nodes: Vec<&str> = connection
        .nodes
        .iter()
        .map(|url| url.trim())
        .filter(|url| !url.is_empty())
        .collect();
    if !connection.nodes.is_empty() && nodes.is_empty() {
        return Err(no_nodes());
    }
    let environment = |variable: &str| std::env::var(variable).ok();
    let node_timeout = connection.node_timeout.or_else(|| {
        environment("REDLOCK_NODE_TIMEOUT")
            .and_then(|value| humantime::parse_duration(value.trim()).ok())
    });
    let watchdog_timeout = match watchdog {
        WatchdogLease::Given(timeout) => timeout,
        // Ten node timeouts leave room for renewal rounds, if it were to renew anything.
        WatchdogLease::TakesNoLock => {
            node_timeout.map(|timeout| timeout.saturating_mul(10).max(Duration::from_secs(30)))
        }
    };
    let flags = Flags {
        nodes: (!nodes.is_empty()).then(|| nodes.join(",")),
        node_timeout: connection.node_timeout.map(humanize),
        watchdog_timeout: watchdog_timeout.map(humanize),
    };
    let mut builder = LockClientBuilder::from_lookup(|variable| {
        flags.value_of(variable).or_else(|| environment(variable))
    })
    .map_err(|err| match err {
        ConfigError::Missing { .. } => no_nodes(),
        other => Failure::Usage(other.to_string()),
    })?;
    if let Some(prefix) = &connection.key_prefix {
        builder = builder.key_prefix(prefix.clone());
    }
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
    node_timeout: Option<String>,
    watchdog_timeout: Option<String>,
}

impl Flags {
    fn value_of(&self, variable: &str) -> Option<String> {
        match variable {
            "REDLOCK_NODES" => self.nodes.clone(),
            "REDLOCK_NODE_TIMEOUT" => self.node_timeout.clone(),
            "REDLOCK_WATCHDOG_TIMEOUT" => self.watchdog_timeout.clone(),
            _ => None,
        }
    }
}

fn humanize(duration: Duration) -> String {
    humantime::format_duration(duration).to_string()
}
