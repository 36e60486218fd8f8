//! Wake-ups from a Redis Cluster member: one cluster pub/sub connection (RESP3), subscribed to
//! each wanted lock channel on the shard that owns the lock's slot (`SSUBSCRIBE`, Redis 7), or
//! where the servers have no shard channels, with `SUBSCRIBE` (releases are then broadcast).
//!
//! redis-rs routes each subscription to its slot's node and subscribes again after a
//! reconnection or a failover; each confirmation it reports wakes the channel's waiters, who
//! look again (a release may have gone unheard meanwhile). A disconnection forgets this
//! member's subscriptions until they are confirmed again.

use std::collections::HashMap;
use std::time::Duration;

use redlock_core::lock_kind::unpoisoned;
use redlock_core::redis::cluster::ClusterClientBuilder;
use redlock_core::redis::cluster_async::ClusterConnection;
use redlock_core::redis::{ProtocolVersion, PushInfo, PushKind, RedisError, RedisResult, Value};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{dispatch, Ended, Link, NodeTask};

/// The channels one cluster connection is subscribed to (and how: an unsubscribe must be of
/// the same kind), and the unsubscribes of ours whose confirmations (pushes) are still to be
/// read.
#[derive(Default)]
struct Subscriptions {
    active: HashMap<String, Channels>,
    unsubscribing: HashMap<String, usize>,
}

impl Subscriptions {
    /// An unsubscribe push for `channel`: whether the server dropped a subscription we still
    /// have (rather than confirming one of ours).
    fn server_dropped(&mut self, channel: &str) -> bool {
        if let Some(pending) = self.unsubscribing.get_mut(channel) {
            *pending = pending.saturating_sub(1);
            if *pending == 0 {
                self.unsubscribing.remove(channel);
            }
            return false;
        }
        self.active.contains_key(channel)
    }
}

/// How a member's servers take subscriptions.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Channels {
    /// Shard channels (`SSUBSCRIBE`).
    Sharded,
    /// Plain channels (`SUBSCRIBE`), where the servers have no shard channels.
    Plain,
}

/// A Redis Cluster member: one cluster connection (RESP3) and the pushes it reports.
pub(super) struct Member<'a>(pub(super) &'a [String]);

impl Link for Member<'_> {
    type Connection = (ClusterConnection, mpsc::UnboundedReceiver<PushInfo>);
    const NAME: &'static str = "cluster pub/sub";

    async fn connect(&self, connect_timeout: Duration) -> RedisResult<Self::Connection> {
        let (pushes, received) = mpsc::unbounded_channel();
        let connection = ClusterClientBuilder::new(self.0.iter().map(String::as_str))
            .use_protocol(ProtocolVersion::RESP3)
            .push_sender(pushes)
            .connection_timeout(connect_timeout)
            .build()?
            .get_async_connection()
            .await?;
        Ok((connection, received))
    }

    async fn serve(
        task: &mut NodeTask,
        (connection, pushes): Self::Connection,
        closed: &CancellationToken,
    ) -> Ended {
        // Decided per connection: shard channels until the servers refuse them. A cluster
        // upgraded to Redis 7 (its nodes restarted, so this connection made again) gets them
        // back, and hears releases sent with `SPUBLISH`.
        task.serve_cluster(connection, pushes, Channels::Sharded, closed)
            .await
    }
}

impl NodeTask {
    async fn serve_cluster(
        &mut self,
        mut connection: ClusterConnection,
        mut pushes: mpsc::UnboundedReceiver<PushInfo>,
        mut channels: Channels,
        closed: &CancellationToken,
    ) -> Ended {
        let mut subscribed = Subscriptions::default();
        drop(self.changes.take());
        for channel in self.wanted() {
            if !self
                .reconcile_cluster(&mut connection, &mut channels, &mut subscribed, channel)
                .await
            {
                return Ended::Broken;
            }
        }
        loop {
            tokio::select! {
                () = closed.cancelled() => return Ended::Closed,
                push = pushes.recv() => match push {
                    Some(push) => if !self.heard(push, &mut subscribed) {
                        return Ended::Broken;
                    },
                    None => return Ended::Broken,
                },
                () = self.changes.wake.notified() => {
                    for channel in self.changes.take() {
                        if !self.reconcile_cluster(&mut connection, &mut channels, &mut subscribed, channel).await {
                            return Ended::Broken;
                        }
                    }
                }
            }
        }
    }

    /// What the cluster connection reports: a release, a (re)confirmed subscription, or a
    /// lost connection to one of its nodes. Returns false when the connection must be made
    /// again: a node's connection dropped, or the server moved a subscription away (its slot
    /// migrated or failed over). A new connection learns the slot map afresh and subscribes
    /// every wanted channel again, on whichever node serves it now.
    fn heard(&self, push: PushInfo, subscribed: &mut Subscriptions) -> bool {
        let text = |value: Option<&Value>| match value {
            Some(Value::BulkString(bytes)) => Some(bytes.clone()),
            Some(Value::SimpleString(text)) => Some(text.clone().into_bytes()),
            _ => None,
        };
        match push.kind {
            PushKind::SMessage | PushKind::Message => {
                if let (Some(channel), Some(payload)) =
                    (text(push.data.first()), text(push.data.get(1)))
                {
                    dispatch(&self.shared, &String::from_utf8_lossy(&channel), &payload);
                }
            }
            PushKind::SSubscribe | PushKind::Subscribe => {
                if let Some(channel) = text(push.data.first()) {
                    self.confirm(&String::from_utf8_lossy(&channel));
                }
            }
            PushKind::Disconnection => {
                tracing::debug!(node = %self.address, "a cluster node's connection dropped; subscribing again");
                return false;
            }
            // The confirmation of an unsubscribe of ours is expected; any other, of a channel
            // still subscribed, is the server's doing.
            PushKind::SUnsubscribe | PushKind::Unsubscribe => {
                let moved = text(push.data.first()).is_some_and(|channel| {
                    subscribed.server_dropped(&String::from_utf8_lossy(&channel))
                });
                if moved {
                    tracing::debug!(node = %self.address, "the cluster moved a subscription away; subscribing again");
                    return false;
                }
            }
            _ => {}
        }
        true
    }

    /// Brings one channel's subscription in line with what the waiters want. Returns false
    /// when the connection did not answer in time.
    async fn reconcile_cluster(
        &self,
        connection: &mut ClusterConnection,
        channels: &mut Channels,
        subscribed: &mut Subscriptions,
        channel: String,
    ) -> bool {
        let wanted = unpoisoned(self.shared.channels.lock()).contains_key(&channel);
        let had = subscribed.active.get(&channel).copied();
        if wanted == had.is_some() {
            if wanted {
                self.confirm(&channel);
            }
            return true;
        }
        // An unsubscribe is of the kind the subscription was made with.
        let kind = had.unwrap_or(*channels);
        let outcome = self.request("cluster pub/sub", async {
            let first = change(connection, kind, &channel, wanted).await;
            match first {
                Err(err) if kind == Channels::Sharded && wanted && lacks_shard_channels(&err) => {
                    tracing::debug!(node = %self.address, "no shard channels on this cluster; subscribing to plain channels");
                    *channels = Channels::Plain;
                    change(connection, Channels::Plain, &channel, wanted)
                        .await
                        .map(|()| Channels::Plain)
                }
                other => other.map(|()| kind),
            }
        })
        .await;
        let Some(kind) = outcome else {
            return false;
        };
        if wanted {
            subscribed.active.insert(channel.clone(), kind);
            self.confirm(&channel);
        } else {
            subscribed.active.remove(&channel);
            *subscribed.unsubscribing.entry(channel).or_default() += 1;
        }
        true
    }
}

async fn change(
    connection: &mut ClusterConnection,
    channels: Channels,
    channel: &str,
    wanted: bool,
) -> Result<(), RedisError> {
    match (channels, wanted) {
        (Channels::Sharded, true) => connection.ssubscribe(channel).await,
        (Channels::Sharded, false) => connection.sunsubscribe(channel).await,
        (Channels::Plain, true) => connection.subscribe(channel).await,
        (Channels::Plain, false) => connection.unsubscribe(channel).await,
    }
}

/// Whether the servers refused `SSUBSCRIBE` as a command they do not have (before Redis 7, or
/// renamed away).
fn lacks_shard_channels(err: &RedisError) -> bool {
    !err.is_io_error()
        && err
            .to_string()
            .to_ascii_lowercase()
            .contains("unknown command")
}
