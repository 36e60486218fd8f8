//! The fan-out: one request to every node in parallel, each bounded by the per-node timeout,
//! and the per-node outcomes with the quorum verdict.

use std::time::{Duration, Instant};

use futures_util::future::join_all;
use futures_util::TryFutureExt as _;
use redis::FromRedisValue;
use tracing::Instrument;

use crate::quorum::majority;
use crate::{InvalidArgument, Node, NodeError, RedlockConfig, ScriptCall};

/// The N independent masters a lock lives on.
///
/// The reentrant lock and the watchdog send their own scripts through [`NodeSet::run_script`],
/// so fan-out, timing and error handling live in one place.
#[derive(Debug)]
pub struct NodeSet {
    nodes: Vec<Node>,
}

impl NodeSet {
    pub(crate) fn open(config: &RedlockConfig) -> Result<Self, InvalidArgument> {
        let nodes = config
            .nodes
            .iter()
            .enumerate()
            .map(|(index, url)| Node::open(index, url, config.pool_size, config.connect_timeout()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self { nodes })
    }

    /// How many nodes there are.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether there are no nodes (never true for a built set).
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// How many nodes must agree: `N / 2 + 1`.
    pub fn quorum(&self) -> usize {
        #[cfg(feature = "sabotage")]
        if crate::sabotage::on(&crate::sabotage::QUORUM_OF_ONE) {
            return 1;
        }
        majority(self.nodes.len())
    }

    /// The nodes, in configuration order.
    pub fn iter(&self) -> impl Iterator<Item = &Node> {
        self.nodes.iter()
    }

    /// Runs a script on every node at once, each within `timeout`.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future abandons the replies, not the commands: scripts already sent still
    /// run. A caller that changes state must undo it when dropped (see [`crate::SpawnOnDrop`]).
    pub async fn run_script<T: FromRedisValue>(
        &self,
        call: &ScriptCall<'_>,
        timeout: Duration,
    ) -> FanOut<T> {
        self.fan_out(|node| node.run_script(call, timeout)).await
    }

    /// Runs a script on the nodes for which `ask(node index)` is true, at once, each within
    /// `timeout`; the others reply [`NodeErrorKind::NotAsked`](crate::NodeErrorKind::NotAsked).
    /// For follow-ups that only matter where an earlier fan-out landed.
    ///
    /// # Cancel safety
    ///
    /// As [`NodeSet::run_script`].
    pub async fn run_script_on<T: FromRedisValue>(
        &self,
        call: &ScriptCall<'_>,
        timeout: Duration,
        ask: impl Fn(usize) -> bool,
    ) -> FanOut<T> {
        self.fan_out(|node| {
            let asked = ask(node.index());
            async move {
                if asked {
                    node.run_script(call, timeout).await
                } else {
                    Err(NodeError {
                        index: node.index(),
                        address: node.address().clone(),
                        kind: crate::NodeErrorKind::NotAsked,
                    })
                }
            }
        })
        .await
    }

    /// Runs one command on every node at once, each within `timeout`.
    ///
    /// # Cancel safety
    ///
    /// As [`NodeSet::run_script`].
    pub async fn query<T: FromRedisValue>(&self, cmd: &redis::Cmd, timeout: Duration) -> FanOut<T> {
        self.fan_out(|node| node.query(cmd, timeout)).await
    }

    async fn fan_out<'a, T, F>(&'a self, request: impl Fn(&'a Node) -> F) -> FanOut<T>
    where
        F: std::future::Future<Output = Result<T, NodeError>> + 'a,
    {
        let started = Instant::now();
        let requests = self.nodes.iter().map(|node| {
            let span = tracing::debug_span!("redlock.node", node = node.index(), address = %node.address());
            request(node)
                .inspect_err(|err| {
                    if !err.is_not_asked() {
                        tracing::debug!(error = %err.kind, "node request failed");
                    }
                })
                .instrument(span)
        });
        let replies = join_all(requests).await;
        FanOut {
            replies,
            started,
            elapsed: started.elapsed(),
            quorum: self.quorum(),
        }
    }
}

/// What every node answered to one fanned-out request.
#[derive(Debug)]
pub struct FanOut<T> {
    replies: Vec<Result<T, NodeError>>,
    started: Instant,
    elapsed: Duration,
    quorum: usize,
}

impl<T> FanOut<T> {
    /// Each node's reply, in configuration order.
    pub fn replies(&self) -> &[Result<T, NodeError>] {
        &self.replies
    }

    /// Each node's reply, owned.
    pub fn into_replies(self) -> Vec<Result<T, NodeError>> {
        self.replies
    }

    /// When the request was sent (a monotonic clock).
    pub fn started(&self) -> Instant {
        self.started
    }

    /// From sending to the last reply or timeout.
    pub fn elapsed(&self) -> Duration {
        self.elapsed
    }

    /// How many nodes must agree.
    pub fn quorum(&self) -> usize {
        self.quorum
    }

    /// How many nodes gave a usable (non-error) reply.
    pub fn answered(&self) -> usize {
        self.replies.iter().filter(|reply| reply.is_ok()).count()
    }

    /// How many nodes replied with a value that satisfies `test`.
    pub fn count(&self, test: impl Fn(&T) -> bool) -> usize {
        self.replies
            .iter()
            .filter(|reply| reply.as_ref().is_ok_and(&test))
            .count()
    }

    /// Whether a majority replied with a value that satisfies `test`.
    pub fn has_quorum(&self, test: impl Fn(&T) -> bool) -> bool {
        self.count(test) >= self.quorum
    }

    /// The successful replies.
    pub fn values(&self) -> impl Iterator<Item = &T> {
        self.replies.iter().filter_map(|reply| reply.as_ref().ok())
    }

    /// The node errors.
    pub fn errors(&self) -> impl Iterator<Item = &NodeError> {
        self.replies.iter().filter_map(|reply| reply.as_ref().err())
    }

    /// Takes the first node failure out (a node not asked is no failure), for use as an
    /// error's source.
    pub fn take_first_error(&mut self) -> Option<NodeError> {
        let position = self
            .replies
            .iter()
            .position(|reply| reply.as_ref().is_err_and(|err| !err.is_not_asked()))?;
        let placeholder = Err(NodeError {
            index: usize::MAX,
            address: crate::NodeAddress::redact(""),
            kind: crate::NodeErrorKind::NotAsked,
        });
        std::mem::replace(&mut self.replies[position], placeholder).err()
    }

    /// The Redis type named by `WRONGTYPE` replies, when so many nodes gave one that the
    /// others can never make a majority: the key is not a lock, and no retry will change that.
    /// A minority answering `WRONGTYPE` is a verdict of nothing (it counts as not granting).
    pub fn wrong_type(&self) -> Option<String> {
        let wrong: Vec<String> = self.errors().filter_map(NodeError::wrong_type).collect();
        let others = self.replies.len() - wrong.len();
        (!wrong.is_empty() && others < self.quorum).then(|| wrong[0].clone())
    }
}
