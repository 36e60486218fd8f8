//! Waking waiters when a lock is released: one pub/sub connection per node, one subscription
//! per lock channel per client shared by all its local waiters, dropped with the last waiter.
//!
//! Each node has a task of its own that owns its pub/sub connection: it connects when a channel
//! is wanted, subscribes and unsubscribes to match the channels local waiters want, reconnects
//! (with a jittered backoff) when the connection drops or stops answering, subscribes every
//! wanted channel again, and wakes their waiters, who look again: a release may have been
//! missed meanwhile. A slow or stopped node delays only its own task. Closing the client (or
//! dropping it) ends the tasks and their connections. A Redis Cluster member's task subscribes
//! through the cluster (`cluster`).

mod cluster;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use redlock_core::lock_kind::unpoisoned;
use redlock_core::lock_kind::{Endpoint, NodeSet};
use redlock_core::redis::aio::{PubSub, PubSubSink, PubSubStream};
use redlock_core::redis::{Msg, RedisResult};
use redlock_core::telemetry::{self, GaugeUnit};
use redlock_core::{NodeAddress, RetryPolicy};
use tokio::sync::{watch, Notify};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The release messages of every lock some local task waits for.
pub(crate) struct Wakeups {
    shared: Arc<Shared>,
    /// Each node's task takes the names of channels to bring in line with what is wanted.
    nodes: Vec<Arc<Changes>>,
    /// How long a new waiter waits for its subscription to be confirmed.
    request_timeout: Duration,
}

impl std::fmt::Debug for Wakeups {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wakeups")
            .field("nodes", &self.nodes.len())
            .field("watched_channels", &self.watched_channels())
            .finish_non_exhaustive()
    }
}

struct Shared {
    channels: Mutex<HashMap<String, ChannelState>>,
    closed: CancellationToken,
    /// Subscriptions confirmed on this many nodes hear every release: any majority of the
    /// nodes, which a release is published on, shares one of them.
    enough: usize,
    nodes: usize,
}

struct ChannelState {
    /// The channel in the subscriptions gauge while local waiters want it.
    _counted: GaugeUnit,
    notify: Arc<Notify>,
    waiters: usize,
    /// A release wakes every waiter, not one (see [`Wakeups::subscribe`]).
    wake_all: bool,
    /// The last release announced, and when its first copy came (the copies other nodes
    /// announce of the same release are ignored).
    last_release: Option<(Vec<u8>, Instant)>,
    /// Which nodes confirmed the subscription, and how many (for waiters to await).
    subscribed_on: Vec<bool>,
    confirmed: watch::Sender<usize>,
}

impl ChannelState {
    fn new(nodes: usize) -> Self {
        Self {
            _counted: GaugeUnit::new(telemetry::SUBSCRIPTIONS),
            notify: Arc::new(Notify::new()),
            waiters: 0,
            wake_all: false,
            last_release: None,
            subscribed_on: vec![false; nodes],
            confirmed: watch::Sender::new(0),
        }
    }

    /// Records whether `node` has the subscription; returns whether it just gained it.
    fn set_subscribed(&mut self, node: usize, subscribed: bool) -> bool {
        let was = std::mem::replace(&mut self.subscribed_on[node], subscribed);
        let count = self.subscribed_on.iter().filter(|on| **on).count();
        self.confirmed.send_replace(count);
        subscribed && !was
    }
}

/// A waiter's interest in one lock's release messages. Dropping it leaves; the last waiter to
/// leave unsubscribes.
pub(crate) struct Subscription {
    shared: Arc<Shared>,
    nodes: Vec<Arc<Changes>>,
    channel: String,
    notify: Arc<Notify>,
}

impl std::fmt::Debug for Subscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscription")
            .field("channel", &self.channel)
            .finish_non_exhaustive()
    }
}

impl Subscription {
    /// Resolves at the next release message (or at once if one came since the last call), or
    /// when a node's subscription is (re)confirmed and waiters should look again.
    pub(crate) fn notify(&self) -> &Notify {
        &self.notify
    }

    /// When this client last heard a release of the lock announced (by the first node that
    /// announced it), whichever of its waiters was woken: no wake-up is needed to tell that a
    /// release came.
    pub(crate) fn last_release_heard(&self) -> Option<Instant> {
        unpoisoned(self.shared.channels.lock())
            .get(&self.channel)
            .and_then(|state| state.last_release.as_ref().map(|(_, heard)| *heard))
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let last = {
            let mut channels = unpoisoned(self.shared.channels.lock());
            let last = channels.get_mut(&self.channel).is_some_and(|state| {
                state.waiters = state.waiters.saturating_sub(1);
                state.waiters == 0
            });
            if last {
                channels.remove(&self.channel);
            }
            last
        };
        if last {
            // Each node's task unsubscribes (no runtime needed to ask it).
            for node in &self.nodes {
                node.push(&self.channel);
            }
        }
    }
}

/// The pub/sub channel on which the release of the lock `key` is announced: the one place
/// its name is built.
pub(crate) fn channel_of(key: &str) -> String {
    format!("{key}:released")
}

impl Wakeups {
    /// Starts one task per node on the current runtime; none connects until a channel is wanted.
    pub(crate) fn start(
        nodes: &NodeSet,
        quorum: usize,
        connect_timeout: Duration,
        request_timeout: Duration,
    ) -> Self {
        let shared = Arc::new(Shared {
            channels: Mutex::new(HashMap::new()),
            closed: CancellationToken::new(),
            enough: nodes.len() + 1 - quorum.min(nodes.len()),
            nodes: nodes.len(),
        });
        let senders = nodes
            .iter()
            .map(|node| {
                let changes = Arc::new(Changes::default());
                let task = NodeTask {
                    index: node.index(),
                    endpoint: node.endpoint().clone(),
                    address: node.address().clone(),
                    shared: Arc::clone(&shared),
                    changes: Arc::clone(&changes),
                    connect_timeout,
                    request_timeout,
                };
                tokio::spawn(task.run());
                changes
            })
            .collect();
        Self {
            shared,
            nodes: senders,
            request_timeout,
        }
    }

    /// Joins the waiters of `channel`, subscribing on every node if nobody here listens yet,
    /// and waits (at most the per-node timeout) until enough nodes confirmed it that every
    /// release reaches it. Nodes that answer later, or come back, wake the waiters when they
    /// confirm, so a release in the gap is not slept through.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a dropped call leaves like a dropped [`Subscription`].
    ///
    /// `wake_all`: a release wakes every waiter of the channel rather than one (the two sides
    /// of a read-write lock share a channel, and a writer's release frees readers and writers
    /// alike; each side's line has its own waiter).
    pub(crate) async fn subscribe(&self, channel: &str, wake_all: bool) -> Subscription {
        let (notify, mut confirmed, first) = {
            let mut channels = unpoisoned(self.shared.channels.lock());
            let state = channels
                .entry(channel.to_owned())
                .or_insert_with(|| ChannelState::new(self.shared.nodes));
            state.waiters += 1;
            state.wake_all |= wake_all;
            (
                Arc::clone(&state.notify),
                state.confirmed.subscribe(),
                state.waiters == 1,
            )
        };
        let subscription = Subscription {
            shared: Arc::clone(&self.shared),
            nodes: self.nodes.clone(),
            channel: channel.to_owned(),
            notify,
        };
        if first {
            for node in &self.nodes {
                node.push(channel);
            }
        }
        let enough = self.shared.enough;
        // Not confirmed in time: the waiter looks again when a node confirms, and at worst
        // when the holder's lease runs out.
        let _ = tokio::time::timeout(
            self.request_timeout,
            confirmed.wait_for(|count| *count >= enough),
        )
        .await;
        subscription
    }

    /// How many channels this client's waiters listen to right now.
    pub(crate) fn watched_channels(&self) -> usize {
        unpoisoned(self.shared.channels.lock()).len()
    }

    /// Ends every node's task and closes its connection; wakes every waiter (who then finds
    /// the client shut down).
    pub(crate) fn close(&self) {
        self.shared.closed.cancel();
        for state in unpoisoned(self.shared.channels.lock()).values() {
            state.notify.notify_waiters();
        }
    }
}

impl Drop for Wakeups {
    fn drop(&mut self) {
        self.close();
    }
}

/// One node's pub/sub connection and the channels it is subscribed to.
struct NodeTask {
    index: usize,
    endpoint: Endpoint,
    address: NodeAddress,
    shared: Arc<Shared>,
    changes: Arc<Changes>,
    connect_timeout: Duration,
    request_timeout: Duration,
}

/// The channels whose subscription on one node may have to change, coalesced: a channel
/// wanted and unwanted many times while its node is unreachable is looked at once.
#[derive(Default)]
struct Changes {
    channels: Mutex<HashSet<String>>,
    wake: Notify,
}

impl Changes {
    fn push(&self, channel: &str) {
        unpoisoned(self.channels.lock()).insert(channel.to_owned());
        self.wake.notify_one();
    }

    fn take(&self) -> HashSet<String> {
        std::mem::take(&mut *unpoisoned(self.channels.lock()))
    }
}

/// Why a connection ended.
enum Ended {
    /// The client closed: stop.
    Closed,
    /// The connection broke or stopped answering: connect again.
    Broken,
}

/// How a node's pub/sub connection is made and served: all that differs between a standalone
/// master and a Redis Cluster member. [`NodeTask::keep_connected`] does the rest.
trait Link {
    /// A connection, as `serve` takes it.
    type Connection;
    /// Names the connection in log lines.
    const NAME: &'static str;
    /// Connects (the caller bounds it by `connect_timeout` too).
    async fn connect(&self, connect_timeout: Duration) -> RedisResult<Self::Connection>;
    /// Subscribes every wanted channel and serves the connection until it ends.
    async fn serve(
        task: &mut NodeTask,
        connection: Self::Connection,
        closed: &CancellationToken,
    ) -> Ended;
}

/// A standalone master: one pub/sub connection (`SUBSCRIBE`).
struct Master<'a>(&'a redlock_core::redis::Client);

impl Link for Master<'_> {
    type Connection = PubSub;
    const NAME: &'static str = "pub/sub";

    async fn connect(&self, _: Duration) -> RedisResult<PubSub> {
        self.0.get_async_pubsub().await
    }

    async fn serve(task: &mut NodeTask, connection: PubSub, closed: &CancellationToken) -> Ended {
        let (sink, stream) = connection.split();
        task.serve(sink, stream, closed).await
    }
}

impl NodeTask {
    async fn run(self) {
        match self.endpoint.clone() {
            Endpoint::Cluster(seeds) => self.keep_connected(cluster::Member(&seeds)).await,
            Endpoint::Server(client) => self.keep_connected(Master(&client)).await,
            _ => {
                tracing::warn!(node = %self.address, "no wake-ups from a node of an unknown kind; waiters fall back to the lease")
            }
        }
    }

    /// Keeps a connection to the node while channels are wanted, until the client closes:
    /// connects, serves the connection, and after a failure waits (see [`pause_after_break`])
    /// before connecting again.
    async fn keep_connected<L: Link>(mut self, link: L) {
        let closed = self.shared.closed.clone();
        let mut failures = 0u32;
        loop {
            // Nothing wanted, nothing connected: wait until a channel is.
            while !self.anything_wanted() {
                tokio::select! {
                    () = closed.cancelled() => return,
                    () = self.changes.wake.notified() => {}
                }
            }
            let connected = tokio::select! {
                () = closed.cancelled() => return,
                connected = tokio::time::timeout(self.connect_timeout, link.connect(self.connect_timeout)) => connected,
            };
            let pause = match connected {
                Ok(Ok(connection)) => {
                    let served = Instant::now();
                    let ended = L::serve(&mut self, connection, &closed).await;
                    self.forget_subscriptions();
                    if let Ended::Closed = ended {
                        return;
                    }
                    tracing::debug!(node = %self.address, "{} connection lost or subscription refused; reconnecting", L::NAME);
                    pause_after_break(served.elapsed(), &mut failures)
                }
                failed => {
                    let error = match failed {
                        Ok(Err(err)) => err.to_string(),
                        _ => format!("no connection within {:?}", self.connect_timeout),
                    };
                    tracing::debug!(node = %self.address, %error, "{} connection failed; waiters fall back to the lease", L::NAME);
                    let pause = RECONNECT.delay(failures);
                    failures = failures.saturating_add(1);
                    Some(pause)
                }
            };
            if let Some(pause) = pause {
                tokio::select! {
                    () = closed.cancelled() => return,
                    () = tokio::time::sleep(pause) => {}
                }
            }
        }
    }

    fn anything_wanted(&self) -> bool {
        !unpoisoned(self.shared.channels.lock()).is_empty()
    }

    /// Serves one connection until it ends.
    async fn serve(
        &mut self,
        mut sink: PubSubSink,
        mut stream: PubSubStream,
        closed: &CancellationToken,
    ) -> Ended {
        let mut subscribed: HashSet<String> = HashSet::new();
        // Every wanted channel, subscribed afresh: what was queued meanwhile is covered.
        drop(self.changes.take());
        for channel in self.wanted() {
            if !self.reconcile(&mut sink, &mut subscribed, channel).await {
                return Ended::Broken;
            }
        }
        loop {
            tokio::select! {
                () = closed.cancelled() => return Ended::Closed,
                message = stream.next() => match message {
                    Some(message) => dispatch_message(&self.shared, &message),
                    None => return Ended::Broken,
                },
                () = self.changes.wake.notified() => {
                    for channel in self.changes.take() {
                        if !self.reconcile(&mut sink, &mut subscribed, channel).await {
                            return Ended::Broken;
                        }
                    }
                }
            }
        }
    }

    /// Every channel some waiter wants now.
    fn wanted(&self) -> Vec<String> {
        unpoisoned(self.shared.channels.lock())
            .keys()
            .cloned()
            .collect()
    }

    /// One (un)subscribe request within the request timeout; `None`, logged, when it failed or
    /// did not answer in time (the connection is then dropped).
    async fn request<T, E: std::fmt::Display>(
        &self,
        kind: &str,
        request: impl std::future::Future<Output = Result<T, E>>,
    ) -> Option<T> {
        match tokio::time::timeout(self.request_timeout, request).await {
            Ok(Ok(value)) => Some(value),
            Ok(Err(err)) => {
                tracing::debug!(node = %self.address, error = %err, "{kind} request failed");
                None
            }
            Err(_) => {
                tracing::debug!(node = %self.address, "{kind} request timed out");
                None
            }
        }
    }

    /// Brings one channel's subscription in line with what the waiters want, and records it.
    /// Returns false when the connection did not answer in time (it is then dropped).
    async fn reconcile(
        &self,
        sink: &mut PubSubSink,
        subscribed: &mut HashSet<String>,
        channel: String,
    ) -> bool {
        let wanted = unpoisoned(self.shared.channels.lock()).contains_key(&channel);
        let have = subscribed.contains(&channel);
        if wanted != have {
            let change = async {
                if wanted {
                    sink.subscribe(&channel).await
                } else {
                    sink.unsubscribe(&channel).await
                }
            };
            if self.request("pub/sub", change).await.is_none() {
                return false;
            }
            if wanted {
                subscribed.insert(channel.clone());
            } else {
                subscribed.remove(&channel);
            }
        }
        if wanted {
            self.confirm(&channel);
        }
        true
    }

    /// The node has `channel`: record it, and wake its waiters if that is news (a release
    /// before it may have gone unheard).
    fn confirm(&self, channel: &str) {
        let mut channels = unpoisoned(self.shared.channels.lock());
        if let Some(state) = channels.get_mut(channel) {
            if state.set_subscribed(self.index, true) {
                state.notify.notify_waiters();
            }
        }
    }

    /// The connection is gone: no channel is subscribed on this node any more.
    fn forget_subscriptions(&self) {
        let mut channels = unpoisoned(self.shared.channels.lock());
        for state in channels.values_mut() {
            state.set_subscribed(self.index, false);
        }
    }
}

/// A connection that served this long before it broke was healthy: the next one is made at
/// once.
const STEADY: Duration = Duration::from_secs(5);

/// After a connection that served for `served` broke: the pause before the next one (`None`:
/// at once), counting `failures` in a row. One that broke early (a refused `SUBSCRIBE`: an ACL
/// without it, a renamed command, a proxy without pub/sub; a server that evicts pub/sub
/// clients; a cluster shard without a master, mid-failover) is a failure like a refused
/// connection, so a node is never reconnected to in a tight loop; waiters meanwhile hear the
/// other nodes' announcements, or wake at the lease.
fn pause_after_break(served: Duration, failures: &mut u32) -> Option<Duration> {
    if served >= STEADY {
        *failures = 0;
        return None;
    }
    let pause = RECONNECT.delay(*failures);
    *failures = failures.saturating_add(1);
    Some(pause)
}

/// The pauses before connecting again, by failures in a row ([`RetryPolicy::delay`]): 100 ms
/// doubling to 2 s, jittered so the nodes' tasks and clients do not retry in step. Reconnecting
/// never gives up (`retries` is unused): it ends when the client closes.
const RECONNECT: RetryPolicy = RetryPolicy {
    retries: u32::MAX,
    base_delay: Duration::from_millis(100),
    max_delay: Duration::from_secs(2),
};

fn dispatch_message(shared: &Shared, message: &Msg) {
    dispatch(
        shared,
        message.get_channel_name(),
        message.get_payload_bytes(),
    );
}

/// Wakes one local waiter per release (every waiter, on a channel that asks for it). Every node that held the lock announces the same
/// release; the copies after the first are ignored.
fn dispatch(shared: &Shared, channel: &str, release: &[u8]) {
    let mut channels = unpoisoned(shared.channels.lock());
    let Some(state) = channels.get_mut(channel) else {
        return;
    };
    if state
        .last_release
        .as_ref()
        .is_some_and(|(last, _)| last.as_slice() == release)
    {
        return;
    }
    state.last_release = Some((release.to_vec(), Instant::now()));
    if state.wake_all {
        // Each waiter enabled its wake-up before its last attempt: none misses this.
        state.notify.notify_waiters();
    } else {
        state.notify.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_that_breaks_early_is_a_failure_and_a_steady_one_resets_them() {
        let mut failures = 0;
        for expected in 1..=8 {
            let pause = pause_after_break(Duration::from_millis(3), &mut failures);
            assert!(pause.is_some_and(|pause| pause >= Duration::from_millis(50)));
            assert_eq!(failures, expected, "counted");
        }
        assert!(pause_after_break(STEADY * 2, &mut failures).is_none());
        assert_eq!(failures, 0);
    }

    #[test]
    fn backoff_grows_to_two_seconds_and_stays_jittered() {
        for failures in 0..40 {
            let pause = RECONNECT.delay(failures);
            assert!(pause <= Duration::from_secs(2), "{pause:?}");
            assert!(pause >= Duration::from_millis(50), "{pause:?}");
        }
        assert!(RECONNECT.delay(10) >= Duration::from_secs(1));
    }

    #[test]
    fn enough_nodes_meet_every_majority() {
        for nodes in 1..10usize {
            let quorum = nodes / 2 + 1;
            let enough = nodes + 1 - quorum;
            // Any `enough` nodes and any `quorum` nodes share at least one.
            assert!(enough + quorum > nodes, "{nodes} nodes");
            assert!(enough <= nodes);
        }
    }
}
