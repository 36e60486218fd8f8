//! The fan-out: one request to every node in parallel, each bounded by the per-node timeout,
//! and the per-node outcomes with the quorum verdict.

use std::future::Future;
use std::time::{Duration, Instant};

use std::sync::Arc;

use futures_util::stream::{FuturesUnordered, StreamExt};
use futures_util::FutureExt as _;
use redis::FromRedisValue;
use smallvec::SmallVec;

use crate::node::{NodeOptions, PreparedScript, Request};
use crate::quorum::majority;
use crate::{InvalidArgument, Node, NodeError, NodeErrorKind, RedlockConfig, ScriptCall};

/// How many batch calls (renewal rounds, a shutdown's releases) a client keeps out at once,
/// each started as soon as another is decided: with a Redis Cluster member there is a batch
/// per hash slot, and redis-rs's cluster request queue (100 requests) must not fill, since
/// requests waiting to enter it may enter in any order (docs/deployments.md).
pub const BATCHES_IN_FLIGHT: usize = 32;

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
        let options = NodeOptions {
            pool_size: config.pool_size,
            connect_timeout: config.connect_timeout(),
            replica_acks: config.replica_acks,
            identities: Arc::default(),
        };
        let nodes = config
            .nodes
            .iter()
            .enumerate()
            .map(|(index, url)| Node::open(index, url, &options))
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

    /// Runs a script on every node at once, each within `timeout`, and waits for every reply
    /// (a node that stopped answering lately excepted, while a majority answers).
    ///
    /// # Cancel safety
    ///
    /// The requests are queued on every node's connection when this is first polled, and keep
    /// their place before anything sent later. Dropping the future abandons the replies; a
    /// request a connection has not written yet is then skipped. A caller that changes state
    /// must undo it when dropped (see [`crate::FinishOnDrop`]).
    pub fn run_script<'a, T: FromRedisValue + 'a>(
        &'a self,
        call: &ScriptCall,
        timeout: Duration,
    ) -> impl Future<Output = FanOut<T>> + 'a {
        self.run_script_until(call, timeout, |_| false)
    }

    /// Runs a script on every node at once, each within `timeout`, and returns as soon as
    /// `decided` says the replies so far settle the outcome (or every reply is in). The
    /// requests still out finish in the background, each within `timeout`, and their late
    /// effects are the caller's to account for: a release sent after this one reaches every
    /// node after it. Nodes not awaited are [`Slot::Pending`].
    ///
    /// `decided` sees the replies so far, with [`FanOut::in_flight`] counting the ones still
    /// awaited.
    ///
    /// # Cancel safety
    ///
    /// As [`NodeSet::run_script`].
    pub fn run_script_until<'a, T: FromRedisValue + 'a>(
        &'a self,
        call: &ScriptCall,
        timeout: Duration,
        decided: impl Fn(&FanOut<T>) -> bool + 'a,
    ) -> impl Future<Output = FanOut<T>> + 'a {
        self.run_script_on(call, timeout, |_| true, decided)
    }

    /// Runs a script on the nodes for which `ask(node index)` is true, at once, each within
    /// `timeout`; the others are [`Slot::NotAsked`].
    /// For follow-ups that only matter where an earlier fan-out landed. Returns as
    /// [`NodeSet::run_script_until`] does.
    ///
    /// # Cancel safety
    ///
    /// As [`NodeSet::run_script`].
    pub fn run_script_on<'a, T: FromRedisValue + 'a>(
        &'a self,
        call: &ScriptCall,
        timeout: Duration,
        ask: impl Fn(usize) -> bool + 'a,
        decided: impl Fn(&FanOut<T>) -> bool + 'a,
    ) -> impl Future<Output = FanOut<T>> + 'a {
        // Plain functions around one async one: each async layer would hold the fan-out's
        // future once more, and every caller's future with it. The call was packed as it was
        // built; its request is made here (the cluster variant packed only where a node runs
        // it), when the future is made; nothing is sent before its first poll.
        let to_cluster = self.nodes.iter().any(Node::is_cluster_member);
        let quorum = call
            .quorum()
            .map_or_else(|| self.quorum(), |quorum| quorum.clamp(1, self.nodes.len()));
        let request = Request::Script(Arc::new(PreparedScript::new(call, to_cluster)));
        self.fan_out(request, timeout, quorum, ask, decided)
    }

    /// Runs one command on every node at once, each within `timeout`, waiting for every reply.
    ///
    /// # Cancel safety
    ///
    /// As [`NodeSet::run_script`].
    pub fn query<'a, T: FromRedisValue + 'a>(
        &'a self,
        cmd: &redis::Cmd,
        timeout: Duration,
    ) -> impl Future<Output = FanOut<T>> + 'a {
        let request = Request::Command(Arc::new(cmd.clone()));
        self.fan_out(request, timeout, self.quorum(), |_| true, |_| false)
    }

    async fn fan_out<T: FromRedisValue>(
        &self,
        request: Request,
        timeout: Duration,
        quorum: usize,
        ask: impl Fn(usize) -> bool,
        decided: impl Fn(&FanOut<T>) -> bool,
    ) -> FanOut<T> {
        let started = Instant::now();
        // With a majority answering, a node that stopped answering is not waited on; one
        // reading of the flags decides both the count and which nodes are skipped.
        let unresponsive: SmallVec<[bool; 16]> =
            self.nodes.iter().map(Node::is_unresponsive).collect();
        let responsive = unresponsive.iter().filter(|flag| !**flag).count();
        let skip_unresponsive = responsive >= quorum;
        let mut replies = Vec::with_capacity(self.nodes.len());
        let mut awaited = Vec::with_capacity(self.nodes.len());
        let mut unawaited = Vec::new();
        for node in &self.nodes {
            let index = node.index();
            if !ask(index) {
                replies.push(Slot::NotAsked);
            } else if skip_unresponsive && unresponsive[index] {
                node.probe(timeout);
                if request.is_releasing() {
                    unawaited.push(node.submit(&request, timeout));
                }
                replies.push(Slot::Skipped);
            } else {
                replies.push(Slot::Pending);
                let reply = node.submit(&request, timeout);
                // A map, not an async block: the block would keep the reply's future twice
                // (once captured, once awaited), doubling every fan-out's future.
                awaited.push(reply.map(move |reply| (index, reply)));
            }
        }
        let mut fan = FanOut {
            replies,
            started,
            elapsed: Duration::ZERO,
            quorum,
            in_flight: awaited.len(),
        };
        let mut rest = None;
        if awaited.len() == 1 && !decided(&fan) {
            // One node to hear from (N = 1, or the others not asked): no set to poll.
            let (index, reply) = awaited.pop().expect("one").await;
            fan.in_flight = 0;
            fan.replies[index] = self.decode(index, reply);
        } else if !awaited.is_empty() {
            let mut awaited: FuturesUnordered<_> = awaited.into_iter().collect();
            while fan.in_flight > 0 && !decided(&fan) {
                let Some((index, reply)) = awaited.next().await else {
                    break;
                };
                fan.in_flight -= 1;
                fan.replies[index] = self.decode(index, reply);
            }
            rest = (!awaited.is_empty()).then_some(awaited);
        }
        fan.elapsed = started.elapsed();
        fan.in_flight = 0;
        if rest.is_some() || !unawaited.is_empty() {
            // The rest finish in the background: their answers (or timeouts) still tell each
            // node's health, and nothing they send is cut short.
            let rest = async move {
                let unawaited = futures_util::future::join_all(unawaited);
                let awaited = async move {
                    if let Some(mut rest) = rest {
                        while rest.next().await.is_some() {}
                    }
                };
                futures_util::future::join(unawaited, awaited).await;
            };
            crate::spawn_cleanup(rest);
        }
        fan
    }

    /// A node's reply as the caller's type, or its error (logged at debug level).
    fn decode<T: FromRedisValue>(
        &self,
        index: usize,
        reply: Result<redis::Value, NodeErrorKind>,
    ) -> Slot<T> {
        let node = &self.nodes[index];
        match reply.and_then(crate::node::decode) {
            Ok(value) => Slot::Replied(value),
            Err(kind) => {
                tracing::debug!(node = index, address = %node.address(), error = %kind, "node request failed");
                Slot::Failed(node.error(kind))
            }
        }
    }
}

/// What one node gave a fanned-out request.
#[derive(Debug)]
pub enum Slot<T> {
    /// Its reply.
    Replied(T),
    /// Its request failed: an error reply, a timeout, no connection.
    Failed(NodeError),
    /// Not sent: an earlier answer made it pointless ([`NodeSet::run_script_on`]).
    NotAsked,
    /// Sent, and not waited for: the outcome was decided first. It finishes in the background,
    /// bounded by the per-node timeout.
    Pending,
    /// Not waited on: the node stopped answering lately, so a majority answers without it
    /// (a release is still sent to it; it is probed meanwhile).
    Skipped,
}

impl<T> Slot<T> {
    /// The reply, if the node gave one.
    pub fn reply(&self) -> Option<&T> {
        match self {
            Slot::Replied(value) => Some(value),
            _ => None,
        }
    }
}

/// What every node answered to one fanned-out request.
#[derive(Debug)]
pub struct FanOut<T> {
    replies: Vec<Slot<T>>,
    started: Instant,
    elapsed: Duration,
    quorum: usize,
    in_flight: usize,
}

impl<T> FanOut<T> {
    /// What each node gave, in configuration order.
    pub fn slots(&self) -> &[Slot<T>] {
        &self.replies
    }

    /// How many nodes the request was for.
    pub fn nodes(&self) -> usize {
        self.replies.len()
    }

    /// When the request was sent (a monotonic clock).
    pub fn started(&self) -> Instant {
        self.started
    }

    /// From sending to the reply that decided the outcome (or the last reply or timeout).
    pub fn elapsed(&self) -> Duration {
        self.elapsed
    }

    /// How many replies are still awaited: only non-zero while the fan-out runs, for the
    /// `decided` test of [`NodeSet::run_script_until`].
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Whether a majority said yes (`yes` of them), or a majority answered and the replies still
    /// in flight can no longer make `yes` a majority: the test an acquisition is decided by.
    pub fn decided_by(&self, yes: usize) -> bool {
        yes >= self.quorum || (self.answered() >= self.quorum && yes + self.in_flight < self.quorum)
    }

    /// Whether every node for which `which(node index)` is true has replied (a reply, an error
    /// or a timeout; not a reply still in flight).
    pub fn replied_on(&self, which: impl Fn(usize) -> bool) -> bool {
        self.replies
            .iter()
            .enumerate()
            .all(|(node, slot)| !which(node) || !matches!(slot, Slot::Pending))
    }

    /// How many nodes gave no usable reply: errors, timeouts, nodes not awaited, and while the
    /// fan-out runs, the replies still in flight.
    pub fn unanswered(&self) -> usize {
        self.replies.len() - self.answered()
    }

    /// How many nodes must agree.
    pub fn quorum(&self) -> usize {
        self.quorum
    }

    /// How many nodes gave a usable (non-error) reply.
    pub fn answered(&self) -> usize {
        self.values().count()
    }

    /// How many nodes replied with a value that satisfies `test`.
    pub fn count(&self, test: impl Fn(&T) -> bool) -> usize {
        self.values().filter(|value| test(value)).count()
    }

    /// Whether a majority replied with a value that satisfies `test`.
    pub fn has_quorum(&self, test: impl Fn(&T) -> bool) -> bool {
        self.count(test) >= self.quorum
    }

    /// The successful replies.
    pub fn values(&self) -> impl Iterator<Item = &T> {
        self.replies.iter().filter_map(Slot::reply)
    }

    /// The nodes' failures (a node not asked, not waited for or skipped is none).
    pub fn errors(&self) -> impl Iterator<Item = &NodeError> {
        self.replies.iter().filter_map(|slot| match slot {
            Slot::Failed(err) => Some(err),
            _ => None,
        })
    }

    /// The first node failure, for use as an error's source.
    pub(crate) fn into_first_error(self) -> Option<NodeError> {
        self.replies.into_iter().find_map(|slot| match slot {
            Slot::Failed(err) => Some(err),
            _ => None,
        })
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
