//! Why a held lock stopped being its holder's.

/// Why a hold was lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LostReason {
    /// A majority of nodes answered that this owner no longer holds the lock: it expired, was
    /// force-unlocked, or a node restarted empty.
    #[error("the lock is no longer held by this owner on a majority of nodes")]
    NotOwner,
    /// No renewal was confirmed by a majority before the validity of the last confirmed one ran
    /// out: nodes down or unreachable, or this process paused past its lease.
    #[error("no renewal was confirmed by a majority of nodes before the lease ran out")]
    QuorumLost,
    /// The configured maximum hold time was reached; renewal stopped and the lease ran out.
    #[error("the maximum hold time was reached and the lease ran out")]
    MaxHoldReached,
    /// The lock's fixed lease (not renewed) is running out: told a margin before its
    /// validity ends, so the holder can stop while the lock is still its own.
    #[error("the lock's lease is running out")]
    LeaseExpired,
    /// The watchdog was shut down while the lock was held.
    #[error("the watchdog was shut down")]
    Shutdown,
    /// A handle of the hold went away where its release could not be sent (a guard dropped
    /// outside a tokio runtime, or whose release no majority answered): the hold was given up,
    /// is no longer renewed, and expires with its lease.
    #[error("the hold was given up: its release could not be sent")]
    Abandoned,
}
