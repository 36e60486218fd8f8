//! What can go wrong with an `RLock`, as types a caller can act on.

use redlock_core::{InvalidArgument, NodeAddress, NodeError};
use redlock_watchdog::LostReason;

/// The errors of `redlock-reentrant`.
///
/// Waiting for a held lock is not an error: `lock()` waits and `try_lock()` answers `false`.
/// Messages name nodes without their passwords.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// This owner does not hold the lock (another task or client does, or nobody).
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
    /// Too few nodes answered to decide.
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
    /// An argument can never work; nothing was sent.
    #[error(transparent)]
    InvalidArgument(#[from] InvalidArgument),
    /// The lock's key holds Redis data of another type.
    #[error("key `{key}` holds Redis data that is not a lock (a {found}): choose another lock name or key prefix")]
    WrongType {
        /// The colliding key.
        key: String,
        /// The Redis type found there (`list`, `string`, `hash with no expiry`, ...).
        found: String,
    },
    /// A node answered with an error this library does not interpret.
    #[error("redis error on {node}")]
    Redis {
        /// The node, password hidden.
        node: NodeAddress,
        /// The error from redis-rs.
        #[source]
        source: redlock_core::redis::RedisError,
    },
    /// The client was shut down.
    #[error("the lock client was shut down")]
    ShutDown,
    /// Another failure of the quorum core.
    #[error(transparent)]
    Core(redlock_core::Error),
}

impl Error {
    /// A missing quorum for the lock `name`: `answered` nodes gave the answer that counted, out
    /// of the fan-out's nodes; the fan-out's first node failure is the source.
    pub(crate) fn no_quorum<T>(
        name: &str,
        answered: usize,
        fan: &mut redlock_core::FanOut<T>,
    ) -> Self {
        Error::NoQuorum {
            name: name.to_owned(),
            answered,
            nodes: fan.replies().len(),
            needed: fan.quorum(),
            source: fan.take_first_error(),
        }
    }

    /// The hold of lock `name` was lost for `reason`.
    pub(crate) fn lock_lost(name: &str, reason: LostReason) -> Self {
        Error::LockLost {
            name: name.to_owned(),
            reason,
        }
    }

    /// Whether another attempt may succeed (a missing quorum or a late grant).
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::NoQuorum { .. } => true,
            Error::Core(core) => core.is_retryable(),
            _ => false,
        }
    }
}

impl From<redlock_core::Error> for Error {
    fn from(err: redlock_core::Error) -> Self {
        use redlock_core::Error as Core;
        match err {
            Core::NotOwner { name } => Error::NotOwner { name },
            Core::NoQuorum {
                name,
                answered,
                nodes,
                needed,
                source,
            } => Error::NoQuorum {
                name,
                answered,
                nodes,
                needed,
                source,
            },
            Core::InvalidArgument(arg) => Error::InvalidArgument(arg),
            Core::WrongType { key, found } => Error::WrongType { key, found },
            Core::Redis { node, source } => Error::Redis { node, source },
            other => Error::Core(other),
        }
    }
}
