//! The faults a proxy injects, and what each does to either direction of a connection.

use std::time::Duration;

/// What a proxy does to the bytes it carries, each fault modelling a real network event.
///
/// Changing the fault applies at once to open connections and new ones. "Requests" are the
/// bytes from the client to redis-server, "replies" the bytes back. A side's close travels
/// like its bytes: delayed by a delay, and held while its direction is held or its bytes are
/// discarded, until the fault changes.
///
/// No fault silently loses bytes on a connection that stays alive, because TCP never does:
/// while a connection lives, every byte arrives, in order, however late (retransmission
/// outlasts a partition). Bytes are lost only with the connection itself, and then both ends
/// learn of it. A fault that lost bytes from a live stream would leave a client out of step
/// with the server for good (a redis-rs multiplexed connection pairs each reply with the
/// oldest request still waiting for one), a failure no real network produces. So
/// [`Blackhole`](Self::Blackhole) holds bytes rather than discarding them, and a connection
/// that [`DropReplies`](Self::DropReplies) discarded replies on is reset when that fault ends,
/// the way a real connection that lost them would be dead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Forwards both ways: a healthy network.
    Pass,
    /// Delivers each chunk, in either direction, this long after it was read: a slow or
    /// congested link. Reading is not slowed and order is kept: a later chunk never overtakes
    /// an earlier one.
    Delay(Duration),
    /// Forwards requests; keeps the replies, in order, until the fault changes: a one-way
    /// partition of the return path, so the commands run but the client waits for their
    /// replies, which are late rather than lost. The held replies are delivered when the fault changes to [`Pass`](Self::Pass) or
    /// [`Delay`](Self::Delay), still held under [`Blackhole`](Self::Blackhole), discarded
    /// under [`DropReplies`](Self::DropReplies) (with what that implies), and the connections
    /// are reset under [`Reset`](Self::Reset).
    HoldReplies,
    /// A silent partition: nothing passes either way while it lasts, and nothing is lost.
    /// The bytes read both ways are held, in order, and delivered when the partition heals
    /// (to [`Pass`](Self::Pass) or [`Delay`](Self::Delay)), as TCP retransmission would
    /// deliver them; so a request sent during the partition runs only after it heals, and its
    /// reply still reaches the connection it was sent on. Connections stay open, and new ones
    /// are accepted and held the same way (the client's handshake waits). Changed to
    /// [`HoldReplies`](Self::HoldReplies) or [`DropReplies`](Self::DropReplies), the held
    /// requests are delivered and the replies follow that fault; to [`Reset`](Self::Reset),
    /// the connections are reset.
    Blackhole,
    /// A crash of the connections: closes every open connection with a TCP RST on both sides,
    /// and accepts and resets new ones at once, while the fault lasts.
    Reset,
    /// The server runs the commands but the client never hears back: requests are forwarded
    /// and replies discarded, as when a connection dies after the server executed a command.
    /// A connection that discarded any reply bytes cannot be used again (it would be out of
    /// step), so when the fault changes to anything else it is reset (RST both sides) and the
    /// client sees a connection error and reconnects. Connections that discarded nothing just
    /// continue.
    DropReplies,
}

/// The two directions of a proxied connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Direction {
    /// Client to redis-server.
    Requests,
    /// Redis-server to client.
    Replies,
}

/// What becomes of the bytes in one direction under a fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Action {
    /// Written on (when due).
    Deliver,
    /// Kept, in order, until the fault changes.
    Hold,
    /// Thrown away, which dooms the connection: see [`Fault::DropReplies`].
    Discard,
}

impl Direction {
    /// What happens under `fault` to the bytes due in this direction.
    pub(super) fn action(self, fault: Fault) -> Action {
        match (fault, self) {
            (Fault::Pass | Fault::Delay(_), _)
            | (Fault::HoldReplies | Fault::DropReplies, Direction::Requests) => Action::Deliver,
            (Fault::DropReplies, Direction::Replies) => Action::Discard,
            // Under `Reset` the connection is about to be reset: nothing more goes through.
            (Fault::HoldReplies, Direction::Replies) | (Fault::Blackhole | Fault::Reset, _) => {
                Action::Hold
            }
        }
    }
}

/// A proxy's fault as its connections see it.
#[derive(Debug, Clone, Copy)]
pub(super) struct State {
    pub(super) fault: Fault,
    /// How many times the fault became [`Fault::Reset`]: an open connection resets when this
    /// changes, even if the fault moved on before its task looked.
    pub(super) resets: u64,
    /// How many times the fault changed from [`Fault::DropReplies`] to another: a connection
    /// that discarded replies resets when this changes, even if the fault came back to
    /// `DropReplies` before its task looked.
    pub(super) drops_ended: u64,
}
