//! Whether the nodes answer: a readiness check a service can call, and the report of the
//! connections made when a client is built.

use std::time::Duration;

use crate::{NodeAddress, NodeError};

/// What one readiness check found: each node's state, and the majority locking needs.
///
/// # Examples
///
/// ```no_run
/// # async fn run(redlock: redlock_core::Redlock) {
/// let readiness = redlock.readiness().await;
/// if !readiness.is_ready() {
///     for failure in readiness.failures() {
///         eprintln!("{failure}"); // names the node without its password
///     }
/// }
/// # }
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub struct Readiness {
    /// Every node, in configuration order.
    pub nodes: Vec<NodeStatus>,
    /// How many nodes locking needs.
    pub quorum: usize,
}

/// One node's answer to a readiness check.
#[derive(Debug)]
#[non_exhaustive]
pub struct NodeStatus {
    /// The node, password hidden.
    pub address: NodeAddress,
    /// Its `PING` round trip, or why it did not answer (unreachable, refused, a wrong
    /// password, a failed TLS handshake, a timeout).
    pub result: Result<Duration, NodeError>,
}

impl Readiness {
    /// How many nodes answered.
    pub fn reachable(&self) -> usize {
        self.nodes.iter().filter(|node| node.result.is_ok()).count()
    }

    /// Whether a majority answered: locking can work.
    pub fn is_ready(&self) -> bool {
        self.reachable() >= self.quorum
    }

    /// The nodes that did not answer, and why.
    pub fn failures(&self) -> impl Iterator<Item = &NodeError> {
        self.nodes
            .iter()
            .filter_map(|node| node.result.as_ref().err())
    }
}
