//! A node's live connection and the handle a request is sent through; a Redis Cluster member
//! sends a request again while its slot moves (`until_run`), and what redis-rs's errors mean.

use std::future::Future;
use std::time::Duration;

use deadpool_redis::Connection;
use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
use redis::{Cmd, ErrorKind, RedisError, RedisResult, ServerErrorKind, Value};

use crate::RetryPolicy;

/// A node's live connection: checked out of its pool, or a cluster connection.
pub(super) enum Wire {
    Pooled(Connection),
    Cluster(ClusterConnection),
}

/// A handle on the live connection that a request is sent through.
pub(super) enum Sender {
    Multiplexed(MultiplexedConnection),
    Cluster(ClusterConnection),
}

impl Wire {
    pub(super) fn sender(&self) -> Sender {
        match self {
            Wire::Pooled(connection) => {
                Sender::Multiplexed(MultiplexedConnection::clone(connection))
            }
            Wire::Cluster(connection) => Sender::Cluster(connection.clone()),
        }
    }
}

impl Sender {
    /// Sends `cmd`; on a cluster, to the master of `slot` when given (commands without a key,
    /// like `WAIT`), else wherever its first key routes it.
    pub(super) async fn send(
        self,
        cmd: &Cmd,
        slot: Option<u16>,
        budget: Duration,
    ) -> RedisResult<Value> {
        match self {
            Sender::Multiplexed(mut connection) => connection.send_packed_command(cmd).await,
            Sender::Cluster(connection) => {
                until_run(budget, || {
                    let mut connection = connection.clone();
                    async move {
                        match slot {
                            Some(slot) => {
                                let route = Route::new(slot, SlotAddr::Master);
                                let routing = RoutingInfo::SingleNode(
                                    SingleNodeRoutingInfo::SpecificNode(route),
                                );
                                connection.route_command(cmd.clone(), routing).await
                            }
                            // A probe asks one node, not every one: a shard without a master
                            // (during a failover) must not keep the member's healthy shards
                            // from being asked.
                            None if is_ping(cmd) => {
                                let routing =
                                    RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random);
                                connection.route_command(cmd.clone(), routing).await
                            }
                            None => connection.req_packed_command(cmd).await,
                        }
                    }
                })
                .await
            }
        }
    }

    /// Sends `pipeline` as one request: on a cluster, to the master of `slot` (else wherever
    /// its first key routes it), every command of it on that one connection, in order.
    pub(super) async fn send_pipeline(
        self,
        pipeline: redis::Pipeline,
        count: usize,
        slot: Option<u16>,
        budget: Duration,
    ) -> RedisResult<Vec<Value>> {
        match self {
            Sender::Multiplexed(mut connection) => {
                connection.send_packed_commands(&pipeline, 0, count).await
            }
            Sender::Cluster(mut connection) => {
                let sent = until_run(budget, || {
                    let (mut connection, pipeline) = (connection.clone(), pipeline.clone());
                    async move {
                        match slot {
                            Some(slot) => {
                                let route = Route::new(slot, SlotAddr::Master);
                                let route = SingleNodeRoutingInfo::SpecificNode(route);
                                connection.route_pipeline(pipeline, 0, count, route).await
                            }
                            None => connection.req_packed_commands(&pipeline, 0, count).await,
                        }
                    }
                })
                .await;
                match sent {
                    // A pipeline's "task gone" is a bare broken pipe, which a shard's dropped
                    // connection can give too: a single command tells the two apart (its
                    // error names the task), and only then is the connection replaced.
                    Err(err) if err.is_io_error() => {
                        let ping = RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random);
                        match connection.route_command(redis::cmd("PING"), ping).await {
                            Err(gone) if cluster_task_gone(&gone) => Err(gone),
                            _ => Err(err),
                        }
                    }
                    sent => sent,
                }
            }
        }
    }
}

/// Sends a request to a Redis Cluster member (`send`, once per try) until the member runs it:
/// a request refused because its slot moves never ran, and is sent again after a short pause,
/// within `budget` (its per-node timeout); past it, the refusal is the answer (a slot left
/// migrating by an aborted resharding fails its locks as before, not as a silent member).
/// docs/deployments.md says why an `ASK` is not followed and what resending costs in order.
async fn until_run<T, F>(budget: Duration, mut send: impl FnMut() -> F) -> RedisResult<T>
where
    F: Future<Output = RedisResult<T>>,
{
    let started = tokio::time::Instant::now();
    let mut pauses = RetryPolicy {
        retries: 0,
        base_delay: Duration::from_millis(10),
        max_delay: Duration::from_millis(100),
    }
    .backoff()
    .unbounded();
    loop {
        match send().await {
            Err(err) if not_run_for_now(&err) => {
                let pause = pauses.next_delay().unwrap_or(Duration::from_millis(100));
                if started.elapsed() + pause >= budget {
                    return Err(err);
                }
                tokio::time::sleep(pause).await;
            }
            sent => return sent,
        }
    }
}

/// Whether a cluster member refused a request because its slot moves: it ran none of it.
fn not_run_for_now(err: &RedisError) -> bool {
    matches!(
        err.kind(),
        ErrorKind::Server(
            ServerErrorKind::Moved | ServerErrorKind::Ask | ServerErrorKind::TryAgain
        )
    )
}

/// Whether redis-rs's cluster connection answered that its task no longer takes requests. It
/// says so only in the error's text: `deploy_cluster_stall.rs` ends a connection's runtime to
/// pin that text to the redis-rs version the workspace builds.
pub(super) fn cluster_task_gone(err: &RedisError) -> bool {
    err.is_io_error() && err.to_string().contains("redis_cluster: Unable to")
}

fn is_ping(cmd: &Cmd) -> bool {
    matches!(cmd.args_iter().next(), Some(redis::Arg::Simple(verb)) if verb.eq_ignore_ascii_case(b"PING"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(kind: ServerErrorKind) -> RedisError {
        RedisError::from((ErrorKind::Server(kind), "refused"))
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_refused_while_its_slot_moves_is_sent_until_it_runs() {
        let tries = std::cell::Cell::new(0);
        let sent = until_run(Duration::from_secs(1), || {
            tries.set(tries.get() + 1);
            let answer = match tries.get() {
                1 => Err(refused(ServerErrorKind::TryAgain)),
                2 => Err(refused(ServerErrorKind::Ask)),
                3 => Err(refused(ServerErrorKind::Moved)),
                _ => Ok(7),
            };
            async move { answer }
        })
        .await;
        assert_eq!(sent.ok(), Some(7));
        assert_eq!(tries.get(), 4);
    }

    #[tokio::test(start_paused = true)]
    async fn past_its_budget_the_refusal_is_the_answer_and_other_errors_at_once() {
        let started = tokio::time::Instant::now();
        let tries = std::cell::Cell::new(0);
        let sent: RedisResult<()> = until_run(Duration::from_millis(500), || {
            tries.set(tries.get() + 1);
            async { Err(refused(ServerErrorKind::TryAgain)) }
        })
        .await;
        assert!(sent.is_err_and(|err| err.kind() == ErrorKind::Server(ServerErrorKind::TryAgain)));
        // Never a pause that would end past the budget; a pause may end up to one timer tick
        // (1 ms) after it was due, as tokio rounds a sleep up to its tick.
        assert!(
            started.elapsed() <= Duration::from_millis(501),
            "{:?}",
            started.elapsed()
        );
        assert!(tries.get() > 3, "sent {} times", tries.get());

        // A script that may have run (here: an error of its own) is never sent again.
        let tries = std::cell::Cell::new(0);
        let sent: RedisResult<()> = until_run(Duration::from_secs(1), || {
            tries.set(tries.get() + 1);
            async { Err(refused(ServerErrorKind::ResponseError)) }
        })
        .await;
        assert!(sent.is_err());
        assert_eq!(tries.get(), 1);
    }
}
