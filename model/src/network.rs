//! The messages between clients and masters, and the links that carry them. A link is one TCP
//! connection: requests and replies each arrive in the order they were sent, any link may run
//! ahead of any other, and a lost connection loses everything in flight on it. One fault breaks
//! the order of requests: on a Redis Cluster member, a request may overtake the one queued
//! before it on its link (redis-rs's cluster connection keeps order only below 100 queued
//! requests; [`Faults::overtakes`]).
//!
//! Every request but a new hold's acquisition names the hold it is for (the hold's own field in
//! the lock hash), so a request of an earlier hold that arrives late finds no field of its own.
//!
//! [`Faults::overtakes`]: crate::config::Faults::overtakes

use crate::config::Tick;
use crate::master::Grant;

/// A request from a client to a master: one script call.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Request {
    /// `acquire.lua` for hold `hold`.
    Acquire {
        /// Whether the client still awaits the answer (not once its operation is decided).
        awaited: bool,
        /// The hold (its generation at the client).
        hold: u8,
        /// The count the client expects (0 for a new hold).
        expected: u8,
        /// The lease asked for.
        lease: Tick,
        /// The smallest fencing candidate wanted.
        hint: u64,
    },
    /// `fence.lua`: write the chosen token back.
    Fence {
        /// Whether the client still awaits the answer.
        awaited: bool,
        /// The new hold.
        hold: u8,
        /// The token.
        token: u64,
    },
    /// `undo.lua`: take back an attempt that set the count to `expected_after`. Not awaited.
    Undo {
        /// The hold the attempt was for.
        hold: u8,
        /// The count the attempt would have set.
        expected_after: u8,
    },
    /// `unlock.lua`: release one acquisition of hold `hold`, counted `expected`.
    Unlock {
        /// Whether the client still awaits the answer.
        awaited: bool,
        /// The hold released. Also the request id a retry repeats: only a final release leaves
        /// a latch, and a hold has one final release.
        hold: u8,
        /// The count before this release.
        expected: u8,
    },
    /// `renew.lua` for hold `hold`.
    Renew {
        /// Whether the watchdog still awaits the answer.
        awaited: bool,
        /// The hold renewed.
        hold: u8,
    },
    /// `abandon.lua`: a hold given up. Not awaited.
    Abandon {
        /// The hold given up.
        hold: u8,
    },
}

/// A master's reply to a client.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Reply {
    /// To `Acquire`.
    Acquire(Grant),
    /// To `Fence`: whether the counter stands at the token.
    Fence(bool),
    /// To `Unlock`: the holds left, or `None` when the owner does not hold it there.
    Unlock(Option<u8>),
    /// To `Renew`: whether the owner holds it there, renewed.
    Renew(bool),
}

impl Request {
    /// Whether this belongs to the watchdog's round (else to the client's operation).
    pub fn is_renewal(&self) -> bool {
        matches!(self, Request::Renew { .. })
    }

    /// Whether the client awaits the answer.
    pub fn is_awaited(&self) -> bool {
        match self {
            Request::Acquire { awaited, .. }
            | Request::Fence { awaited, .. }
            | Request::Unlock { awaited, .. }
            | Request::Renew { awaited, .. } => *awaited,
            Request::Undo { .. } | Request::Abandon { .. } => false,
        }
    }

    /// The client no longer awaits the answer: the master runs it, and answers nobody.
    pub fn unawait(&mut self) {
        match self {
            Request::Acquire { awaited, .. }
            | Request::Fence { awaited, .. }
            | Request::Unlock { awaited, .. }
            | Request::Renew { awaited, .. } => *awaited = false,
            Request::Undo { .. } | Request::Abandon { .. } => {}
        }
    }
}

impl Reply {
    /// Whether this answers the watchdog's round.
    pub fn is_renewal(&self) -> bool {
        matches!(self, Reply::Renew(_))
    }
}

/// One client–master connection.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Link {
    /// Requests sent and not yet run, oldest first.
    pub requests: Vec<Request>,
    /// Replies sent and not yet read, oldest first.
    pub replies: Vec<Reply>,
}

impl Link {
    /// Whether nothing is in flight either way.
    pub fn is_idle(&self) -> bool {
        self.requests.is_empty() && self.replies.is_empty()
    }

    /// The client decided its operation (or its round, `renewal`): answers still to come are
    /// not awaited, and those not read are dropped.
    pub fn settle(&mut self, renewal: bool) {
        for request in &mut self.requests {
            if request.is_renewal() == renewal {
                request.unawait();
            }
        }
        self.replies.retain(|reply| reply.is_renewal() != renewal);
    }

    /// The request queued second runs before the one queued first.
    pub fn overtake(&mut self) {
        self.requests.swap(0, 1);
    }

    /// The connection drops: what was in flight is gone.
    pub fn lose(&mut self) {
        self.requests.clear();
        self.replies.clear();
    }
}
