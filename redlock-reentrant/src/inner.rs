//! What every operation of a client shares: its id, the quorum, the watchdog, the wake-ups and
//! this process's holds. The operations (`acquire`, `unlock`, `inspect`, `wait`) depend on this
//! module and on nothing of each other's callers; `client` and `rlock` compose them.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use redlock_core::{Error, InvalidArgument, OwnerToken, Redlock, Timing};
use redlock_watchdog::lock_kind::{Registration, RenewScript};
use redlock_watchdog::Watchdog;

use crate::fencing_stats::FencingCounters;
use crate::gate::Gates;
use crate::holds::{Holds, Target};
use crate::lua::Shown;
use crate::wakeup::Wakeups;
use crate::WaitStrategy;

/// A request's number within this client (see [`Inner::request_id`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RequestId(pub(crate) u64);

/// A request id as the nodes see it: `{client}:{n}`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RequestText<'a> {
    client: &'a str,
    id: RequestId,
}

impl std::fmt::Display for RequestText<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.client, self.id.0)
    }
}

#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) id: String,
    pub(crate) redlock: Redlock,
    pub(crate) watchdog: Watchdog,
    pub(crate) wakeups: Wakeups,
    pub(crate) holds: Arc<Holds>,
    /// Each lock's line of this client's tasks that want a new hold of it.
    pub(crate) gates: Arc<Gates>,
    /// The timings of requests on the watchdog's lease (every release, undo and inspection).
    pub(crate) timing: Timing,
    /// The nodes' fencing counter shared by every lock, or `None` with a Redis Cluster member,
    /// where each lock has its own (see [`Inner::fence_key_of`]).
    shared_fence_key: Option<Arc<str>>,
    closed: AtomicBool,
    requests: AtomicU64,
    /// The largest fencing token this client handed out: new holds ask every node for a
    /// candidate above it, so the nodes' counters converge.
    largest_token: AtomicU64,
    pub(crate) counters: FencingCounters,
    /// How locks wait unless they say otherwise.
    pub(crate) wait_strategy: WaitStrategy,
}

impl Inner {
    pub(crate) fn new(
        redlock: Redlock,
        watchdog: Watchdog,
        wakeups: Wakeups,
        wait_strategy: WaitStrategy,
    ) -> Self {
        let config = redlock.config();
        let shared_fence_key = (!config.has_cluster_member())
            .then(|| format!("{}{}", config.key_prefix, FENCE_COUNTER).into());
        let timing = config.timing(watchdog.timeout());
        Self {
            timing,
            id: uuid::Uuid::new_v4().to_string(),
            redlock,
            watchdog,
            wakeups,
            holds: Arc::default(),
            gates: Arc::default(),
            shared_fence_key,
            closed: AtomicBool::new(false),
            requests: AtomicU64::new(0),
            largest_token: AtomicU64::new(0),
            counters: FencingCounters::default(),
            wait_strategy,
        }
    }

    /// The fencing counter for the lock `key`: one per node shared by every lock, or with a
    /// Redis Cluster member, one per lock beside it (`{key}:fencing-counter`, in its slot: a
    /// script may only touch keys of one slot, and no one key lives in every slot). Built once
    /// per `RLock`.
    pub(crate) fn fence_key_of(&self, key: &str) -> Arc<str> {
        match &self.shared_fence_key {
            Some(shared) => Arc::clone(shared),
            None => format!("{key}:{FENCE_COUNTER}").into(),
        }
    }

    /// Refuses every operation from now on.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
    }

    /// Registers a new hold of `target`, named `field` on the nodes, with the watchdog, renewed
    /// by this lock kind's script.
    pub(crate) fn register(&self, target: &Target, field: &OwnerToken) -> Registration {
        self.watchdog.register(
            RenewScript::new(target.kind().renew()).with_quorum(target.quorum()),
            target.key(),
            field.clone(),
        )
    }

    pub(crate) fn check_open(&self) -> Result<(), Error> {
        if self.is_shut_down() {
            Err(Error::Shutdown)
        } else {
            Ok(())
        }
    }

    pub(crate) fn is_shut_down(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Checks a lock name and lease before anything is sent: the quorum's rules, and no lock
    /// may take the name of the nodes' fencing counter.
    pub(crate) fn check_request(&self, name: &str, lease: Duration) -> Result<(), Error> {
        self.redlock.config().check_request(name, lease)?;
        if name == FENCE_COUNTER {
            return Err(InvalidArgument::ReservedName {
                name: name.to_owned(),
            }
            .into());
        }
        Ok(())
    }

    /// The smallest fencing candidate to ask the nodes for: one above the largest token this
    /// client handed out (0 before the first). Nodes that granted the same holds then stand at
    /// the same counter, and a new hold's candidates agree, so its token needs no write-back.
    /// Only a hint: every node still gives at least its counter plus one.
    pub(crate) fn token_hint(&self) -> u64 {
        // Lua's numbers are exact below 2^53: no hint beyond (tokens are clock microseconds,
        // about 2^50 today).
        const EXACT: u64 = (1 << 53) - 1;
        match self.largest_token.load(Ordering::Relaxed) {
            0 => 0,
            largest => largest.saturating_add(1).min(EXACT),
        }
    }

    /// Remembers a token handed out (see [`Inner::token_hint`]).
    pub(crate) fn handed_out(&self, token: u64) {
        self.largest_token.fetch_max(token, Ordering::Relaxed);
    }

    /// A request id unique within this client: a counter. With the client's UUID
    /// ([`Inner::request_arg`]) it is unique across every client: for release messages,
    /// which must be unique, not secret (no syscall per id).
    pub(crate) fn request_id(&self) -> RequestId {
        RequestId(self.requests.fetch_add(1, Ordering::Relaxed))
    }

    /// Request `id` as it is written into a request (`{client}:{n}`), with no string of its own.
    pub(crate) fn request_arg(&self, id: RequestId) -> Shown<RequestText<'_>> {
        Shown(RequestText {
            client: &self.id,
            id,
        })
    }

    /// A new request id, as it is written into a request.
    pub(crate) fn new_request_arg(&self) -> Shown<RequestText<'_>> {
        self.request_arg(self.request_id())
    }

    /// How long a waiting writer's registration lasts on the nodes unless the writer looks
    /// again (it does within a third of it): a third of the watchdog's lease (10 s by default),
    /// and at least four per-node timeouts, so a look that takes its whole timeout still comes
    /// in time. A writer that crashed while it waited holds new readers up for at most this.
    pub(crate) fn writer_heartbeat(&self) -> Duration {
        (self.timing.lease / 3).max(self.timing.node_timeout * 4)
    }

    /// The per-node request timeout for a lock on the watchdog's lease (the configured one,
    /// or the default share of that lease).
    pub(crate) fn node_timeout(&self) -> Duration {
        self.timing.node_timeout
    }
}

/// The name (after the key prefix) of each node's fencing counter. No lock may have this name
/// ([`InvalidArgument::ReservedName`]).
pub const FENCE_COUNTER: &str = "fencing-counter";

#[cfg(test)]
mod tests {
    use super::*;
    use redlock_core::redis::ToRedisArgs as _;

    #[test]
    fn a_request_id_is_written_as_the_client_and_its_number() {
        let text = RequestText {
            client: "9f0c",
            id: RequestId(41),
        };
        assert_eq!(Shown(text).to_redis_args(), vec![b"9f0c:41".to_vec()]);
    }
}
