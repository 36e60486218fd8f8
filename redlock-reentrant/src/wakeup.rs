//! Waking waiters when a lock is released: one pub/sub connection per node, one subscription
//! per lock channel per client shared by all its local waiters, dropped with the last waiter.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use futures_util::future::join_all;
use futures_util::StreamExt;
use redlock_core::redis::aio::PubSubSink;
use redlock_core::redis::Msg;
use redlock_core::{NodeAddress, NodeSet};
use tokio::sync::Notify;

/// The release messages of every lock some local task waits for.
#[derive(Debug)]
pub(crate) struct Wakeups {
    nodes: Vec<NodeChannel>,
    channels: Arc<Mutex<HashMap<String, ChannelState>>>,
    /// Serializes SUBSCRIBE and UNSUBSCRIBE so a late UNSUBSCRIBE never undoes a newer SUBSCRIBE.
    changes: tokio::sync::Mutex<()>,
    timeout: Duration,
}

#[derive(Debug, Default)]
struct ChannelState {
    notify: Arc<Notify>,
    waiters: usize,
    subscribed: bool,
    last_release: Option<Vec<u8>>,
}

#[derive(Debug)]
struct NodeChannel {
    client: redlock_core::redis::Client,
    address: NodeAddress,
    /// The open connection's sink, with a generation so a dead connection's reader clears only
    /// its own.
    sink: Arc<Mutex<Option<(u64, PubSubSink)>>>,
    generation: AtomicU64,
}

/// A waiter's interest in one lock's release messages. Dropping it leaves; the last waiter to
/// leave unsubscribes.
#[derive(Debug)]
pub(crate) struct Subscription {
    wakeups: Arc<Wakeups>,
    channel: String,
    notify: Arc<Notify>,
}

impl Subscription {
    /// Resolves at the next release message (or at once if one came since the last call).
    pub(crate) fn notify(&self) -> &Notify {
        &self.notify
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let last = {
            let mut channels = lock(&self.wakeups.channels);
            match channels.get_mut(&self.channel) {
                Some(state) => {
                    state.waiters = state.waiters.saturating_sub(1);
                    state.waiters == 0
                }
                None => false,
            }
        };
        if !last {
            return;
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let wakeups = Arc::clone(&self.wakeups);
            let channel = std::mem::take(&mut self.channel);
            runtime.spawn(async move { wakeups.unsubscribe_if_unwatched(&channel).await });
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section leaves the map consistent; a panic elsewhere cannot half-write it.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Wakeups {
    pub(crate) fn new(nodes: &NodeSet, timeout: Duration) -> Self {
        Self {
            nodes: nodes
                .iter()
                .map(|node| NodeChannel {
                    client: node.client().clone(),
                    address: node.address().clone(),
                    sink: Arc::default(),
                    generation: AtomicU64::new(0),
                })
                .collect(),
            channels: Arc::default(),
            changes: tokio::sync::Mutex::new(()),
            timeout,
        }
    }

    /// Joins the waiters of `channel`, subscribing on every node if nobody here listens yet.
    /// Nodes that cannot be reached within the per-node timeout are skipped: waiters also retry
    /// when the holder's lease runs out.
    pub(crate) async fn subscribe(self: &Arc<Self>, channel: &str) -> Subscription {
        let notify = {
            let mut channels = lock(&self.channels);
            let state = channels.entry(channel.to_owned()).or_default();
            state.waiters += 1;
            Arc::clone(&state.notify)
        };
        let subscription = Subscription {
            wakeups: Arc::clone(self),
            channel: channel.to_owned(),
            notify,
        };
        let _changes = self.changes.lock().await;
        let needed = lock(&self.channels)
            .get(channel)
            .is_some_and(|state| !state.subscribed);
        if needed {
            join_all(
                self.nodes
                    .iter()
                    .map(|node| self.subscribe_on(node, channel)),
            )
            .await;
            if let Some(state) = lock(&self.channels).get_mut(channel) {
                state.subscribed = true;
            }
        }
        subscription
    }

    async fn subscribe_on(self: &Arc<Self>, node: &NodeChannel, channel: &str) {
        let outcome = tokio::time::timeout(self.timeout, async {
            let mut sink = self.sink_of(node).await?;
            sink.subscribe(channel).await
        })
        .await;
        match outcome {
            Ok(Ok(())) => {}
            Ok(Err(err)) => {
                tracing::debug!(node = %node.address, error = %err, "subscribe failed; waiters fall back to the lease");
                lock(&node.sink).take();
            }
            Err(_) => {
                tracing::debug!(node = %node.address, "subscribe timed out; waiters fall back to the lease");
                lock(&node.sink).take();
            }
        }
    }

    /// The node's pub/sub connection, opened (with its reader task) if there is none.
    async fn sink_of(
        self: &Arc<Self>,
        node: &NodeChannel,
    ) -> Result<PubSubSink, redlock_core::redis::RedisError> {
        if let Some((_, sink)) = lock(&node.sink).as_ref() {
            return Ok(sink.clone());
        }
        let (sink, stream) = node.client.get_async_pubsub().await?.split();
        let generation = node.generation.fetch_add(1, Ordering::Relaxed);
        *lock(&node.sink) = Some((generation, sink.clone()));
        let channels = Arc::clone(&self.channels);
        let slot = Arc::clone(&node.sink);
        tokio::spawn(async move {
            let mut stream = stream;
            while let Some(message) = stream.next().await {
                dispatch(&channels, &message);
            }
            // The connection is gone: the next subscription reconnects. Wake every waiter so
            // none sleeps on a message that cannot come.
            let mut slot = lock(&slot);
            if slot.as_ref().is_some_and(|(open, _)| *open == generation) {
                slot.take();
            }
            drop(slot);
            for state in lock(&channels).values() {
                state.notify.notify_waiters();
            }
        });
        // Channels already being watched are subscribed on the new connection too.
        let watched: Vec<String> = lock(&self.channels)
            .iter()
            .filter(|(_, state)| state.subscribed)
            .map(|(channel, _)| channel.clone())
            .collect();
        let mut resubscribe = sink.clone();
        for channel in watched {
            resubscribe.subscribe(&channel).await?;
        }
        Ok(sink)
    }

    async fn unsubscribe_if_unwatched(&self, channel: &str) {
        let _changes = self.changes.lock().await;
        let unwatched = {
            let mut channels = lock(&self.channels);
            match channels.get(channel) {
                Some(state) if state.waiters == 0 => {
                    let was_subscribed = state.subscribed;
                    channels.remove(channel);
                    was_subscribed
                }
                _ => false,
            }
        };
        if !unwatched {
            return;
        }
        join_all(self.nodes.iter().map(|node| async move {
            let sink = lock(&node.sink).as_ref().map(|(_, sink)| sink.clone());
            if let Some(mut sink) = sink {
                let _ = tokio::time::timeout(self.timeout, sink.unsubscribe(channel)).await;
            }
        }))
        .await;
    }

    /// How many channels this client listens to (for tests: subscriptions do not pile up).
    pub(crate) fn watched_channels(&self) -> usize {
        lock(&self.channels).len()
    }
}

/// Wakes one local waiter per release. Every node that held the lock announces the same
/// release; the copies after the first are ignored.
fn dispatch(channels: &Mutex<HashMap<String, ChannelState>>, message: &Msg) {
    let mut channels = lock(channels);
    let Some(state) = channels.get_mut(message.get_channel_name()) else {
        return;
    };
    let release = message.get_payload_bytes();
    if state.last_release.as_deref() == Some(release) {
        return;
    }
    state.last_release = Some(release.to_vec());
    state.notify.notify_one();
}
