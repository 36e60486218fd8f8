//! What a request is sent as: a script by SHA once the node has it cached, else by source, and
//! after a replicated write the `WAIT` that confirms it.

use std::sync::Arc;
use std::time::Duration;

use redis::{Cmd, ErrorKind, RedisError};

use super::link::{Confirmation, Link, Queued, Reply, State};
use super::order::{handed_over, queue_cmd};
use super::script::{PreparedScript, Request};
use super::wire::Wire;
use crate::ReplicaAcks;

/// Queues `request` on the connection (which must be there), and right after a replicated
/// write, the `WAIT` that confirms it.
pub(super) fn queue(
    link: &Link,
    state: &mut State,
    request: &Request,
    timeout: Duration,
) -> Queued {
    match request {
        Request::Script(script) => {
            let variant = script.variant(link.cluster);
            // A cluster member's shards each cache scripts of their own: `EVAL` always there
            // (an `EVALSHA` to a shard that never ran the script would come back `NOSCRIPT`).
            let by_sha =
                !link.cluster && !script.by_source && state.cached_scripts.contains(&variant.sha);
            if link.cluster {
                if let Some(wait) = wait_for(link, script, timeout) {
                    return queue_confirmed(
                        state,
                        variant.eval(),
                        wait,
                        variant.sha,
                        script.slot,
                        timeout,
                    );
                }
            }
            let mut queued = if by_sha {
                let evalsha = Arc::clone(&variant.evalsha);
                queue_cmd(state, evalsha, Some((variant.sha, true)), None, timeout)
            } else {
                queue_cmd(
                    state,
                    variant.eval(),
                    Some((variant.sha, false)),
                    None,
                    timeout,
                )
            };
            queued.confirmation = queue_wait(link, state, script, timeout);
            queued
        }
        Request::Command(cmd) => queue_cmd(state, Arc::clone(cmd), None, None, timeout),
    }
}

/// Queues the `WAIT` that confirms a replicated write just queued, when the node asks for
/// replica acknowledgements. It is part of the write's request: a resend after `NOSCRIPT` is
/// safe when nothing but its `WAIT` came after it.
///
/// `WAIT` blocks the connection it runs on (every request of this client to that node or
/// shard waits behind it), so it may take at most half the request's own timeout, whatever the
/// configured one.
pub(super) fn queue_wait(
    link: &Link,
    state: &mut State,
    script: &PreparedScript,
    request_timeout: Duration,
) -> Option<Confirmation> {
    let (wait, replicas) = wait_for(link, script, request_timeout)?;
    let queued = queue_cmd(state, Arc::new(wait), None, script.slot, request_timeout);
    state.queued -= 1;
    Some((queued.reply, replicas))
}

/// The `WAIT` that confirms `script`'s write, and how many replicas it must count, when the
/// node asks for replica acknowledgements and the script writes.
fn wait_for(
    link: &Link,
    script: &PreparedScript,
    request_timeout: Duration,
) -> Option<(Cmd, usize)> {
    let acks = link.replica_acks.filter(|_| script.replicated)?;
    let capped = ReplicaAcks {
        timeout: acks.timeout.min(request_timeout / 2),
        ..acks
    };
    let mut wait = redis::cmd("WAIT");
    wait.arg(acks.replicas).arg(capped.timeout_millis());
    Some((wait, acks.replicas))
}

/// Queues a replicated write on a Redis Cluster member together with the `WAIT` that confirms
/// it, as one pipeline to the master of its slot. Sent as two requests, each would be routed
/// on its own: after a failover, while the old master's connection is made again, the `WAIT`
/// could reach another node and count that node's replicas for a write it never saw.
fn queue_confirmed(
    state: &mut State,
    eval: Arc<Cmd>,
    (wait, replicas): (Cmd, usize),
    sha: &'static str,
    slot: Option<u16>,
    budget: Duration,
) -> Queued {
    use futures_util::FutureExt;

    let mut pipeline = redis::pipe();
    pipeline.add_command((*eval).clone()).add_command(wait);
    let connection = state.connection.as_ref().map(Wire::sender);
    let both = async move {
        match connection {
            Some(sender) => sender.send_pipeline(pipeline, 2, slot, budget).await,
            None => Err(RedisError::from(std::io::Error::from(
                std::io::ErrorKind::NotConnected,
            ))),
        }
    }
    .boxed()
    .shared();
    let part = |index: usize| -> Reply {
        Box::pin(both.clone().map(move |replies| {
            replies.and_then(|mut replies| {
                if replies.len() > index {
                    Ok(replies.swap_remove(index))
                } else {
                    Err(RedisError::from((
                        ErrorKind::Client,
                        "a pipeline reply is missing",
                    )))
                }
            })
        }))
    };
    let reply = Box::pin(tokio::task::unconstrained(part(0)));
    let mut queued = handed_over(state, reply, Some((sha, false)));
    queued.confirmation = Some((part(1), replicas));
    queued
}
