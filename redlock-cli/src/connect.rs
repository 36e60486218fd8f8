//! The lock client, from the connection flags.

use std::time::Duration;

use redlock_reentrant::LockClient;

use crate::args::Connection;
use crate::exit::Failure;
use crate::report::Reporter;

/// Connects to the masters of `connection`; `watchdog_timeout` is the lease renewed while a
/// lock is held.
///
/// # Errors
///
/// [`Failure::Usage`] without nodes or with a bad URL (named by its position and redacted
/// address, never its password), [`Failure::Lock`] with `NoQuorum` when too few masters answer.
pub(crate) async fn connect(
    connection: &Connection,
    watchdog_timeout: Duration,
    out: &Reporter,
) -> Result<LockClient, Failure> {
    let nodes: Vec<&str> = connection
        .nodes
        .iter()
        .map(|url| url.trim())
        .filter(|url| !url.is_empty())
        .collect();
    if nodes.is_empty() {
        return Err(Failure::Usage(
            "no Redis nodes: pass --nodes redis://host:6379,... or set REDLOCK_NODES".to_owned(),
        ));
    }
    let mut builder = LockClient::builder()
        .nodes(nodes)
        .key_prefix(connection.key_prefix.clone())
        .watchdog_timeout(watchdog_timeout);
    if let Some(timeout) = connection.node_timeout {
        builder = builder.node_timeout(timeout);
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
