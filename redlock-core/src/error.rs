//! What can go wrong, as types a caller can act on.

use std::sync::Arc;
use std::time::Duration;

use crate::{LostReason, NodeAddress};

/// The errors of every lock built on the quorum: the plain [`Redlock`](crate::Redlock) lock
/// here, the watchdog-renewed one and the reentrant `RLock`, which re-export this type. Each
/// operation's `# Errors` says which variants it can return.
///
/// Contention ([`Error::Contended`]) is kept apart from breakage ([`Error::NoQuorum`]):
/// someone else holding a lock is not a failure of the system. Messages name nodes by their
/// [`NodeAddress`], so a password in a URL never shows.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Another owner holds the lock on enough nodes that no majority was possible.
    #[error("lock `{name}` is held by another owner{}", ttl_suffix(*ttl))]
    Contended {
        /// The lock name.
        name: String,
        /// The longest remaining lease reported by a node, `None` when no holder reported one.
        ttl: Option<Duration>,
    },
    /// Too few nodes answered to decide: the lock cannot be taken or released safely.
    #[error("no quorum for lock `{name}`: {answered} of {nodes} nodes answered, {needed} needed")]
    NoQuorum {
        /// The lock name.
        name: String,
        /// Nodes that gave a usable answer.
        answered: usize,
        /// Nodes configured.
        nodes: usize,
        /// The majority needed.
        needed: usize,
        /// The first node failure, if any.
        #[source]
        source: Option<NodeError>,
    },
    /// A majority granted the lock, but taking it used up its whole lease (minus clock drift).
    /// The partial lock was released everywhere.
    #[error("lock `{name}` was granted too late: {elapsed:?} of its {lease:?} lease were spent acquiring it")]
    ValidityExhausted {
        /// The lock name.
        name: String,
        /// Time spent acquiring.
        elapsed: Duration,
        /// The requested lease.
        lease: Duration,
    },
    /// The lock is not (or no longer) held by this owner on a majority of nodes: it expired,
    /// was taken over, or was never ours.
    #[error("lock `{name}` is not held by this owner")]
    NotOwner {
        /// The lock name.
        name: String,
    },
    /// This owner held the lock but lost it: its lease ran out, renewal failed, or it was
    /// force-unlocked. Work done under it since may have overlapped another holder's.
    #[error("lock `{name}` was lost: {reason}")]
    LockLost {
        /// The lock name.
        name: String,
        /// Why.
        reason: LostReason,
    },
    /// An argument can never work; nothing was sent to Redis.
    #[error(transparent)]
    InvalidArgument(#[from] InvalidArgument),
    /// The lock's key already holds Redis data of another type: the name collides with
    /// something that is not a lock.
    #[error("key `{key}` holds Redis data that is not a lock (a {found}): choose another lock name or key prefix")]
    WrongType {
        /// The colliding key.
        key: String,
        /// The Redis type found there (`list`, `string`, `hash with no expiry`, ...).
        found: String,
    },
    /// The lock client was shut down.
    #[error("the lock client was shut down")]
    Shutdown,
}

fn ttl_suffix(ttl: Option<Duration>) -> String {
    match ttl {
        Some(ttl) => format!(" (for up to {} ms more)", ttl.as_millis()),
        None => String::new(),
    }
}

impl Error {
    /// A missing quorum for the lock `name`: `answered` nodes gave the answer that counted;
    /// the fan-out's first node failure is the source.
    pub fn no_quorum<T>(name: &str, answered: usize, fan: crate::FanOut<T>) -> Self {
        Error::NoQuorum {
            name: name.to_owned(),
            answered,
            nodes: fan.nodes(),
            needed: fan.quorum(),
            source: fan.into_first_error(),
        }
    }

    /// The hold of lock `name` was lost for `reason`.
    pub fn lock_lost(name: &str, reason: LostReason) -> Self {
        Error::LockLost {
            name: name.to_owned(),
            reason,
        }
    }

    /// Whether another attempt may succeed: contention, a missing quorum or a late grant.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Error::Contended { .. } | Error::NoQuorum { .. } | Error::ValidityExhausted { .. }
        )
    }

    /// Whether the lock is held by someone else (as opposed to something being broken).
    pub fn is_contended(&self) -> bool {
        matches!(self, Error::Contended { .. })
    }
}

/// An argument that can never work.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidArgument {
    /// The lock name is empty.
    #[error("invalid argument: the lock name is empty")]
    EmptyName,
    /// The lease is zero.
    #[error("invalid argument: the lease is zero")]
    ZeroLease,
    /// The lease is too short to ever be valid: it does not exceed the per-node timeout plus
    /// the clock-drift allowance.
    #[error("invalid argument: a lease of {lease:?} is too short; it must exceed {minimum:?} (per-node timeout plus clock drift)")]
    LeaseTooShort {
        /// The requested lease.
        lease: Duration,
        /// The per-node timeout plus the clock-drift allowance for that lease.
        minimum: Duration,
    },
    /// The lease does not fit Redis's millisecond expiry.
    #[error("invalid argument: a lease of {lease:?} is too long")]
    LeaseTooLong {
        /// The requested lease.
        lease: Duration,
    },
    /// No node URL was given.
    #[error("invalid argument: no Redis node was given")]
    NoNodes,
    /// Two node URLs name one server (the same host and port, another database number of it,
    /// or a cluster seed two members share): that server would vote twice, and could make a
    /// majority on its own.
    #[error("invalid argument: nodes {first} and {second} are one server ({server}): listed twice, it would vote twice")]
    DuplicateNode {
        /// The position of the first URL naming it.
        first: usize,
        /// The position of the second.
        second: usize,
        /// The server, as `host:port` (never a password).
        server: String,
    },
    /// A node URL is not usable.
    #[error("invalid argument: node {index} ({address}) is not a usable Redis URL: {reason}")]
    NodeUrl {
        /// The position of the URL in the configuration.
        index: usize,
        /// The URL, password hidden.
        address: NodeAddress,
        /// Why it cannot be used.
        reason: String,
    },
    /// The per-node timeout (or the connect timeout) is zero.
    #[error("invalid argument: the per-node timeout or the connect timeout is zero")]
    ZeroNodeTimeout,
    /// The lock name is reserved by the lock client for keys of its own.
    #[error("invalid argument: the lock name `{name}` is reserved")]
    ReservedName {
        /// The name.
        name: String,
    },
    /// An explicit owner made by another lock client: each client keeps its own owners' holds,
    /// so two clients sharing one owner could both hold a lock.
    #[error("invalid argument: the lock owner belongs to another lock client")]
    ForeignOwner,
    /// A write lock asked for by an owner that holds the read lock of the same read-write
    /// lock: it would wait for itself. Release the read lock first (a writer may take the read
    /// lock, the other way round).
    #[error("invalid argument: the owner holds the read lock of `{name}`; a write lock would wait for itself (release the read lock first)")]
    UpgradeWouldDeadlock {
        /// The read-write lock's name.
        name: String,
    },
    /// The owner holds the reentrant lock `name` and asks for the write side of the read-write
    /// lock `name`, or the other way round: the two share one key on the nodes, and one owner
    /// cannot hold both (each would take the other for a hold of its own).
    #[error("invalid argument: the owner holds the other lock named `{name}` (a reentrant lock and a read-write lock's write side share their key)")]
    LockKindClash {
        /// The name both locks have.
        name: String,
    },
    /// A multi-lock with no member.
    #[error("invalid argument: a multi-lock needs at least one lock")]
    NoMembers,
    /// A multi-lock given one lock twice (the same name on the same nodes, or both sides of one
    /// read-write lock): it would wait for itself.
    #[error("invalid argument: the lock `{name}` is in the multi-lock twice")]
    DuplicateMember {
        /// The lock's name.
        name: String,
    },
    /// No permit asked for: a semaphore's acquisition takes at least one.
    #[error(
        "invalid argument: an acquisition of the semaphore `{name}` must take at least one permit"
    )]
    ZeroPermits {
        /// The semaphore's name.
        name: String,
    },
    /// More permits asked for at once than the semaphore has: the wait could never end.
    #[error(
        "invalid argument: {asked} permits asked of the semaphore `{name}`, which has {count}"
    )]
    TooManyPermits {
        /// The semaphore's name.
        name: String,
        /// How many were asked for.
        asked: u32,
        /// How many permits the semaphore has.
        count: u32,
    },
    /// A count of permits that would fall below zero (a negative `add_permits` larger than the
    /// count), or not fit a `u32`.
    #[error("invalid argument: the semaphore `{name}` has {count} permits; adding {delta} is out of range")]
    PermitsOutOfRange {
        /// The semaphore's name.
        name: String,
        /// The count it has.
        count: u32,
        /// What was to be added.
        delta: i64,
    },
    /// A count-down latch armed with a count of zero: it would be open at once.
    #[error("invalid argument: the count-down latch `{name}` needs a count of at least one")]
    ZeroCount {
        /// The latch's name.
        name: String,
    },
    /// An arming of a count-down latch whose count its client fixed
    /// (`LockClient::get_quorum_count_down_latch`): its count-downs arm it, with that count.
    #[error("invalid argument: the count-down latch `{name}` has a count of {count} fixed by its client; it is armed by its count-downs")]
    CountFixed {
        /// The latch's name.
        name: String,
        /// Its fixed count.
        count: u32,
    },
    /// A count-down of a latch whose count its client fixed found another round on a master
    /// (armed with another count, or by `try_set_count`): it counted nothing there.
    #[error("invalid argument: the count-down latch `{name}` was built with a count of {fixed}, but a master has a round of {found}")]
    CountDiffers {
        /// The latch's name.
        name: String,
        /// The count this client fixed.
        fixed: u32,
        /// The count of the round a master has.
        found: u32,
    },
    /// An empty id (a count-down's).
    #[error("invalid argument: the id is empty")]
    EmptyId,
    /// A release of permits that the semaphore handle does not hold (more than it took, or
    /// part of one acquisition): nothing is released.
    #[error("invalid argument: {asked} permits released of the semaphore `{name}`, whose handle holds {held} in other lots")]
    PermitsNotHeld {
        /// The semaphore's name.
        name: String,
        /// How many were to be released.
        asked: u32,
        /// How many the handle holds.
        held: u32,
    },
    /// A permit id that is not out: never issued, released already, or its lease ran out.
    #[error("invalid argument: no such permit of the semaphore `{name}` is out (released, expired or never issued)")]
    UnknownPermit {
        /// The semaphore's name.
        name: String,
    },
    /// A semaphore whose count the client fixed (`LockClient::get_quorum_semaphore`) found
    /// another count on a master (set by a client that fixed another, or by `set_permits`):
    /// two counts would let more permits out than either allows. Nothing was taken.
    #[error("invalid argument: the semaphore `{name}` was built with {fixed} permits, but a master has {found}")]
    PermitCountDiffers {
        /// The semaphore's name.
        name: String,
        /// The count this client fixed.
        fixed: u32,
        /// The count a master has.
        found: u32,
    },
    /// A change of the count of a semaphore whose count the client fixed: it is part of what
    /// makes the semaphore sound on its masters, and changes only with the clients' code.
    #[error("invalid argument: the semaphore `{name}` has a fixed count of {permits} permits; build it with another count to change it")]
    PermitsFixed {
        /// The semaphore's name.
        name: String,
        /// Its fixed count.
        permits: u32,
    },
    /// A primitive that a majority of independent masters cannot keep sound, built on several:
    /// refused before anything is sent.
    #[error("invalid argument: {primitive} is not sound on {nodes} independent masters: {reason}")]
    UnsoundOnQuorum {
        /// What was asked for.
        primitive: &'static str,
        /// How many masters the client has.
        nodes: usize,
        /// Why, and what to use instead.
        reason: &'static str,
    },
    /// A spinning wait strategy with a zero first pause, or a first pause longer than the
    /// longest.
    #[error("invalid argument: a spinning wait needs 0 < initial <= max pause, got {initial:?} and {max:?}")]
    WaitStrategy {
        /// The first pause.
        initial: Duration,
        /// The longest pause.
        max: Duration,
    },
    /// The clock-drift factor is negative, not finite, or 1 or more.
    #[error("invalid argument: the clock-drift factor must be in [0, 1), got {0}")]
    DriftFactor(f64),
    /// The key prefix has a `{` while a node is a Redis Cluster: each lock's keys must take
    /// the lock name as their hash tag, so they share one slot.
    #[error("invalid argument: the key prefix `{prefix}` has a `{{`, but with a Redis Cluster member the lock name is each key's hash tag")]
    HashTagInPrefix {
        /// The prefix.
        prefix: String,
    },
    /// With a Redis Cluster member, a lock name starting with `}` would leave its keys an empty
    /// hash tag, spread over several slots.
    #[error("invalid argument: the lock name `{name}` starts with `}}`, which a Redis Cluster member cannot take (the name is its keys' hash tag)")]
    EmptyHashTag {
        /// The name.
        name: String,
    },
    /// Retries were asked for with a zero base delay: rivals that split a vote would retry at
    /// once and split it again, in a tight loop.
    #[error("invalid argument: the retry policy's base delay is zero (rivals that split a vote would retry in a tight loop)")]
    ZeroRetryDelay,
    /// Replica acknowledgements (`WAIT`) were asked for with a zero timeout, which would wait
    /// forever, or from no replica.
    #[error("invalid argument: replica acknowledgements need at least one replica and a timeout above zero")]
    ReplicaAcks,
}

/// Why one node did not give an answer.
#[derive(Debug, thiserror::Error)]
#[error("{address}: {kind}")]
pub struct NodeError {
    /// The node's position in the configuration.
    pub index: usize,
    /// The node, password hidden.
    pub address: NodeAddress,
    /// What happened.
    #[source]
    pub kind: NodeErrorKind,
}

/// What happened to one node's request.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NodeErrorKind {
    /// No answer within the per-node timeout (a slow, paused or unreachable node).
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    /// No connection could be made (a dead node, refused, a failed TLS handshake or
    /// authentication, or none within the connect timeout).
    #[error("cannot connect: {0}")]
    Connect(#[source] Arc<ConnectError>),
    /// The node answered with an error or the connection broke mid-request.
    #[error("{0}")]
    Command(#[source] redis::RedisError),
    /// The write ran, but fewer replicas than asked for acknowledged it within the `WAIT`
    /// timeout (see [`RedlockConfig::replica_acks`](crate::RedlockConfig::replica_acks)): a
    /// failover could lose it, so it does not count.
    #[error("not confirmed by replicas: {acked} of {wanted} acknowledged")]
    NotReplicated {
        /// How many replicas acknowledged it.
        acked: i64,
        /// How many were asked for.
        wanted: usize,
    },
}

/// Why no connection to a node could be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// Refused, unreachable, a failed TLS handshake or a refused password.
    #[error("{0}")]
    Failed(#[source] deadpool_redis::PoolError),
    /// No connection within the connect timeout.
    #[error("no connection within {0:?}")]
    Timeout(Duration),
    /// No seed node of a Redis Cluster member answered, or none told the slot map.
    #[error("{0}")]
    Cluster(#[source] redis::RedisError),
    /// The server is one another node of the quorum already reached (the same run id under
    /// another name: a DNS alias, a second address): it must not vote twice, so this node
    /// never counts.
    #[error("this server is node {first}'s under another name: it would vote twice, so this node does not count")]
    Alias {
        /// The node that reached it first.
        first: usize,
    },
}

impl NodeError {
    /// The Redis type named by a `WRONGTYPE` reply, if that is what this is.
    pub fn wrong_type(&self) -> Option<String> {
        let NodeErrorKind::Command(err) = &self.kind else {
            return None;
        };
        if err.code() != Some("WRONGTYPE") {
            return None;
        }
        // Our scripts say "... holds a <kind> value" or "... holds a hash with no expiry";
        // Redis itself names no kind.
        let detail = err.detail().unwrap_or_default();
        let found = detail
            .split("holds a ")
            .nth(1)
            .map(|rest| rest.strip_suffix(" value").unwrap_or(rest).trim())
            .filter(|kind| !kind.is_empty())
            .unwrap_or("value of another kind");
        Some(found.to_owned())
    }

    /// Whether the node did not answer in time.
    pub fn is_timeout(&self) -> bool {
        matches!(self.kind, NodeErrorKind::Timeout(_))
    }
}
