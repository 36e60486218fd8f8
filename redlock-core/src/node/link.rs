//! What a node's requests share: its connection state, the queue while it connects, and placing
//! a request then awaiting its reply (a forgotten script sent again only when that is safe).

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use redis::{ErrorKind, RedisResult, ServerErrorKind, Value};
use tokio::sync::oneshot;

use super::connect::{ConnectAttempt, Connector};
use super::decode;
use super::identity::Identities;
use super::order::queue_cmd;
use super::queue::{queue, queue_wait};
use super::script::Request;
use super::wire::{cluster_task_gone, Wire};
use crate::unpoisoned::unpoisoned;
use crate::{ConnectError, NodeAddress, NodeError, NodeErrorKind, ReplicaAcks};

/// What requests to the node share, also from tasks that outlive the caller.
pub(super) struct Link {
    pub(super) index: usize,
    pub(super) address: NodeAddress,
    pub(super) connector: Connector,
    /// Whether it is a cluster member: scripts with a cluster variant run that one.
    pub(super) cluster: bool,
    /// Writes marked replicated are confirmed with `WAIT` when set.
    pub(super) replica_acks: Option<ReplicaAcks>,
    pub(super) connect_timeout: Duration,
    pub(super) state: Mutex<State>,
    /// A request timed out or connecting failed, and nothing was heard from the node since.
    /// Outside the lock: every fan-out reads it for every node.
    pub(super) unresponsive: AtomicBool,
    /// The servers the set's nodes reached, to find one reached twice.
    pub(super) identities: Arc<Identities>,
}

/// How long a release stays out at least, whatever its caller's timeout: a stalled node whose
/// buffers are full takes queued requests late, and a release given up meanwhile would be
/// skipped while the acquisition before it still runs (bounded by memory, not correctness:
/// the caller learned of the timeout long before).
const RELEASE_PATIENCE: Duration = Duration::from_secs(10);

/// `from + by`, or a far future where that does not fit (an absurd configured timeout).
fn later(from: tokio::time::Instant, by: Duration) -> tokio::time::Instant {
    from.checked_add(by)
        .unwrap_or_else(|| from + Duration::from_secs(60 * 60 * 24 * 365))
}

/// A reply being awaited from the node.
pub(super) type Reply = Pin<Box<dyn Future<Output = RedisResult<Value>> + Send>>;

/// The connection, what is known to be cached on it, the queue while connecting, and health.
#[derive(Default)]
pub(super) struct State {
    pub(super) connection: Option<Wire>,
    /// Bumped whenever the connection is replaced: what was learned on an older one is stale.
    pub(super) generation: u64,
    /// SHAs the node ran on this connection. Anything else is sent whole (`EVAL`). A few
    /// dozen at most (the scripts are statics), searched on every request: a list compares
    /// fewer bytes than a hash set hashes.
    pub(super) cached_scripts: Vec<&'static str>,
    /// Whether a connection attempt is in flight.
    pub(super) connecting: bool,
    /// Requests made while connecting, in order; sent in that order once connected.
    pub(super) waiting: VecDeque<Waiting>,
    /// How many requests were queued on the connection so far: a request's sequence number.
    pub(super) queued: u64,
    /// A probe of an unresponsive node is in flight.
    pub(super) probing: bool,
    /// The latest deadline of a request placed so far that is not a release. A releasing
    /// request stays out at least this long, and its own timeout more (its caller hears of a
    /// timeout at its own deadline): were it given up before an earlier request was written,
    /// redis-rs would skip it (nobody awaits it) and still write the earlier one, an
    /// acquisition it was to undo.
    pub(super) latest_deadline: Option<tokio::time::Instant>,
}

/// A request queued while the node connects (`None`: only waiting for the connection).
pub(super) struct Waiting {
    pub(super) request: Option<Request>,
    /// The request's per-node timeout (it bounds a replicated write's `WAIT`).
    pub(super) timeout: Duration,
    pub(super) done: oneshot::Sender<Result<Option<Queued>, Arc<ConnectError>>>,
}

/// A request on the connection: its reply, its place in the queue, and how it was sent.
pub(super) struct Queued {
    pub(super) reply: Reply,
    /// The `WAIT` queued right after a replicated write.
    pub(super) confirmation: Option<Confirmation>,
    pub(super) sequence: u64,
    pub(super) generation: u64,
    /// The script SHA it was sent by (`EVALSHA`), or by source (`EVAL`) for a script.
    pub(super) script: Option<(&'static str, bool)>,
}

/// The reply of the `WAIT` after a replicated write, and how many replicas it must count.
pub(super) type Confirmation = (Reply, usize);

/// How a request was first placed: on the connection, or in the connecting queue.
pub(super) enum Placed {
    Queued(Queued),
    /// Connected, and nothing to send (a wish to be connected).
    Connected,
    Waiting(oneshot::Receiver<Result<Option<Queued>, Arc<ConnectError>>>),
}

impl Link {
    pub(super) fn state(&self) -> MutexGuard<'_, State> {
        // The guarded value is never left half-written: a poisoned lock still holds a
        // consistent value.
        unpoisoned(self.state.lock())
    }

    pub(super) fn error(&self, kind: NodeErrorKind) -> NodeError {
        crate::telemetry::node_error(&self.address, &kind);
        NodeError {
            index: self.index,
            address: self.address.clone(),
            kind,
        }
    }

    /// Places a request (or, with `None`, a wish to be connected) in line: on the connection
    /// if there is one, else in the connecting queue, starting a connection attempt if none is
    /// in flight. Returns where it went, its deadline (`timeout` from now), and how long it
    /// stays out regardless: for a release, past the deadline of every acquisition queued
    /// before it, and its own timeout more.
    pub(super) fn place(
        self: &Arc<Self>,
        request: Option<&Request>,
        timeout: Duration,
    ) -> (Placed, tokio::time::Instant, tokio::time::Instant) {
        let now = tokio::time::Instant::now();
        let deadline = later(now, timeout);
        let keep_until;
        let waiting = {
            let mut state = self.state();
            match request {
                Some(request) if request.is_releasing() => {
                    let after_earlier = state
                        .latest_deadline
                        .map_or(deadline, |latest| later(latest, timeout));
                    keep_until = deadline
                        .max(after_earlier)
                        .max(later(now, RELEASE_PATIENCE));
                }
                _ => {
                    keep_until = deadline;
                    state.latest_deadline = Some(
                        state
                            .latest_deadline
                            .map_or(deadline, |latest| latest.max(deadline)),
                    );
                }
            }
            if state.connection.is_some() {
                let placed = match request {
                    Some(request) => Placed::Queued(queue(self, &mut state, request, timeout)),
                    None => Placed::Connected,
                };
                return (placed, deadline, keep_until);
            }
            // Made only here: a request placed on the connection needs none.
            let (done, waiting) = oneshot::channel();
            state.waiting.push_back(Waiting {
                request: request.cloned(),
                timeout,
                done,
            });
            if state.connecting {
                return (Placed::Waiting(waiting), deadline, keep_until);
            }
            state.connecting = true;
            waiting
        };
        // Spawned outside the lock: with no runtime, the attempt fails the queue at once
        // (under the lock) without blaming the node.
        crate::finish_on_drop::finish_in_background(
            ConnectAttempt {
                link: Arc::clone(self),
            },
            |attempt| Box::pin(attempt.run()),
            ConnectAttempt::abandon,
        );
        (Placed::Waiting(waiting), deadline, keep_until)
    }

    /// The queued request once connected, or why no connection came.
    pub(super) async fn connected(
        &self,
        done: oneshot::Receiver<Result<Option<Queued>, Arc<ConnectError>>>,
    ) -> Result<Option<Queued>, NodeErrorKind> {
        match done.await {
            Ok(Ok(queued)) => Ok(queued),
            Ok(Err(failure)) => Err(NodeErrorKind::Connect(failure)),
            Err(_) => Err(NodeErrorKind::Connect(Arc::new(ConnectError::Timeout(
                self.connect_timeout,
            )))),
        }
    }

    /// Awaits the reply of a placed request. A script the node forgot (`NOSCRIPT`) is sent
    /// again by source only if nothing was queued after it: a resent request must never land
    /// after a later one (a release overtaken by its own retry, say). Otherwise the `NOSCRIPT`
    /// is the answer: the request did not run.
    pub(super) async fn finish(
        &self,
        placed: Placed,
        request: Request,
        timeout: Duration,
    ) -> Result<Value, NodeErrorKind> {
        let queued = match placed {
            Placed::Queued(queued) => queued,
            Placed::Waiting(done) => self.connected(done).await?.ok_or_else(nothing_placed)?,
            Placed::Connected => return Err(nothing_placed()),
        };
        let (sequence, generation, script) = (queued.sequence, queued.generation, queued.script);
        let confirmation = queued.confirmation;
        let outcome = self.finish_script(
            queued.reply,
            (sequence, generation),
            script,
            &request,
            timeout,
        );
        let (value, resent) = outcome.await?;
        // A script sent again has a `WAIT` of its own after it; the first one confirmed nothing.
        match resent.or(confirmation) {
            Some((reply, wanted)) => self.confirmed(value, reply, wanted, generation).await,
            None => Ok(value),
        }
    }

    /// Awaits `WAIT`'s count after a replicated write: the write counts only when at least
    /// `wanted` replicas have it.
    async fn confirmed(
        &self,
        value: Value,
        reply: Reply,
        wanted: usize,
        generation: u64,
    ) -> Result<Value, NodeErrorKind> {
        let acked = self
            .settle(reply.await, generation)
            .map_err(NodeErrorKind::Command)
            .and_then(decode::<i64>)?;
        if usize::try_from(acked).is_ok_and(|acked| acked >= wanted) {
            Ok(value)
        } else {
            Err(NodeErrorKind::NotReplicated { acked, wanted })
        }
    }

    /// Awaits a request's own reply, resending a forgotten script when that is safe (with the
    /// `WAIT` that confirms the resent one, for a replicated write).
    async fn finish_script(
        &self,
        reply: Reply,
        (sequence, generation): (u64, u64),
        script: Option<(&'static str, bool)>,
        request: &Request,
        timeout: Duration,
    ) -> Result<(Value, Option<Confirmation>), NodeErrorKind> {
        match self.settle(reply.await, generation) {
            Err(err) if err.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                let resent = {
                    let mut state = self.state();
                    if state.generation == generation {
                        state.cached_scripts.clear();
                    }
                    // A cluster member is sent scripts by source and never answers `NOSCRIPT`;
                    // resending there would split the script from its `WAIT` again.
                    let last = state.generation == generation
                        && state.queued == sequence + 1
                        && state.connection.is_some()
                        && !self.cluster;
                    match request {
                        Request::Script(script) if last => {
                            let variant = script.variant(self.cluster);
                            let resent =
                                queue_cmd(&mut state, variant.eval(), None, script.slot, timeout);
                            let confirmation = queue_wait(self, &mut state, script, timeout);
                            Some((resent, confirmation))
                        }
                        _ => None,
                    }
                };
                match resent {
                    Some((resent, confirmation)) => {
                        let outcome = self.settle(resent.reply.await, generation);
                        if outcome.is_ok() {
                            if let Request::Script(script) = request {
                                self.cached(generation, script.variant(self.cluster).sha);
                            }
                        }
                        let value = outcome.map_err(NodeErrorKind::Command)?;
                        Ok((value, confirmation))
                    }
                    None => Err(NodeErrorKind::Command(err)),
                }
            }
            Ok(value) => {
                if let Some((sha, false)) = script {
                    self.cached(generation, sha);
                }
                Ok((value, None))
            }
            Err(err) => Err(NodeErrorKind::Command(err)),
        }
    }

    /// Turns a reply into a result, and learns from it: an answer means the node is there; a
    /// broken connection is given back for the next request to reconnect.
    fn settle(&self, reply: RedisResult<Value>, generation: u64) -> RedisResult<Value> {
        let reply = reply.and_then(Value::extract_error);
        match &reply {
            Err(err)
                if err.is_io_error()
                    || err.is_connection_dropped()
                    || err.is_unrecoverable_error() =>
            {
                let mut state = self.state();
                // A cluster connection is kept: it reconnects each shard itself, and a new one
                // could overtake requests the old one has not sent yet to healthy shards. Unless
                // its task is gone (its runtime ended, say): then it sends nothing any more, and
                // nothing queued on it can be overtaken.
                let replace = !self.cluster || cluster_task_gone(err);
                if state.generation == generation && replace {
                    // Back to the pool: its health check discards it.
                    state.connection = None;
                    state.cached_scripts.clear();
                }
            }
            _ => self.unresponsive.store(false, Ordering::Relaxed),
        }
        reply
    }

    fn cached(&self, generation: u64, sha: &'static str) {
        let mut state = self.state();
        if state.generation == generation && !state.cached_scripts.contains(&sha) {
            state.cached_scripts.push(sha);
        }
    }
}

/// A placement with no request (a wish to be connected) has no reply to await.
fn nothing_placed() -> NodeErrorKind {
    NodeErrorKind::Command(redis::RedisError::from(std::io::Error::other(
        "no request was placed",
    )))
}
