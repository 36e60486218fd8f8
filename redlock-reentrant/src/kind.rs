//! Which lock a hold is of: a reentrant lock (`RLock`), a read-write lock's read or write
//! side, a fair lock, or a semaphore's permits. The kind says what the nodes keep of a hold and which scripts act on it; everything
//! else (the quorum, the hold record, renewal, the lost signal, fencing) is the same for all.

use std::sync::Arc;

use redlock_core::lock_kind::LockScript;
use redlock_core::quorum::ack_quorum;

use crate::lua;

/// The kind of lock a hold is of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Kind {
    /// A reentrant lock: one hash per lock, one holder.
    Reentrant,
    /// A read-write lock's read side: one hash of readers, each with its own deadline.
    Read,
    /// A read-write lock's write side: a reentrant lock's hash (the reentrant lock of the same
    /// name's) that also needs no reader.
    Write,
    /// A semaphore's permits: one hash of permits out, each with its own owner, deadline and
    /// weight, never more than the semaphore's count.
    Permit,
    /// A fair lock: a reentrant lock's hash of its own, granted in the order its waiters came
    /// (a queue of waiters, each kept by its heartbeat).
    Fair,
}

impl Kind {
    /// Takes or re-enters a hold on one node.
    pub(crate) fn acquire(self) -> &'static LockScript {
        match self {
            Kind::Fair => &lua::ACQUIRE_FAIR,
            Kind::Permit => &lua::ACQUIRE_PERMIT,
            Kind::Reentrant => &lua::ACQUIRE,
            Kind::Read => &lua::ACQUIRE_READ,
            Kind::Write => &lua::ACQUIRE_WRITE,
        }
    }

    /// Undoes one acquisition attempt where it landed.
    pub(crate) fn undo(self) -> &'static LockScript {
        match self {
            Kind::Permit => &lua::UNDO_PERMIT,
            Kind::Read => &lua::UNDO_READ,
            Kind::Reentrant | Kind::Write | Kind::Fair => &lua::UNDO,
        }
    }

    /// Releases one acquisition.
    pub(crate) fn unlock(self) -> &'static LockScript {
        match self {
            Kind::Permit => &lua::UNLOCK_PERMIT,
            Kind::Read => &lua::UNLOCK_READ,
            Kind::Reentrant | Kind::Write | Kind::Fair => &lua::UNLOCK,
        }
    }

    /// Renews holds in batches (the watchdog's script).
    pub(crate) fn renew(self) -> &'static LockScript {
        match self {
            Kind::Permit => &lua::RENEW_PERMIT,
            Kind::Read => &lua::RENEW_READ,
            Kind::Reentrant | Kind::Write | Kind::Fair => &lua::RENEW,
        }
    }

    /// Gives holds up in batches.
    pub(crate) fn abandon(self) -> &'static LockScript {
        match self {
            Kind::Permit => &lua::ABANDON_PERMIT,
            Kind::Read => &lua::ABANDON_READ,
            Kind::Reentrant | Kind::Write | Kind::Fair => &lua::ABANDON,
        }
    }

    /// What one node knows of the lock.
    pub(crate) fn inspect(self) -> &'static LockScript {
        match self {
            Kind::Permit => &lua::INSPECT_PERMIT,
            Kind::Read => &lua::INSPECT_READ,
            Kind::Reentrant | Kind::Write | Kind::Fair => &lua::INSPECT,
        }
    }

    /// The key of the lock's side a hold of this kind is kept in, from the lock's key.
    ///
    /// The write side is kept in the lock's own key, the hash of the reentrant lock of the
    /// same name: `redlock run NAME` of earlier versions (a reentrant lock) and of this one (the
    /// write side) exclude each other.
    pub(crate) fn hold_key(self, lock_key: &str) -> String {
        match self {
            Kind::Reentrant | Kind::Write => lock_key.to_owned(),
            Kind::Read => format!("{lock_key}:{READERS}"),
            Kind::Permit => format!("{lock_key}:{PERMITS}"),
            Kind::Fair => format!("{lock_key}:{FAIR_HOLDS}"),
        }
    }

    /// The lock's key, from the key a hold of this kind is kept in (see [`Kind::hold_key`]).
    pub(crate) fn lock_key(self, hold_key: &str) -> &str {
        match self {
            Kind::Reentrant | Kind::Write => hold_key,
            Kind::Read => strip(hold_key, READERS),
            Kind::Permit => strip(hold_key, PERMITS),
            Kind::Fair => strip(hold_key, FAIR_HOLDS),
        }
    }
}

/// `key` without `:{suffix}`.
fn strip<'k>(key: &'k str, suffix: &str) -> &'k str {
    key.strip_suffix(suffix)
        .and_then(|key| key.strip_suffix(':'))
        .unwrap_or(key)
}

const READERS: &str = "read";
const PERMITS: &str = "permits";
const PERMIT_COUNT: &str = "permit-count";
const WAITING_WRITERS: &str = "write-waiting";

/// The keys of a read-write lock on every node, all in its hash slot: the readers hash, the
/// writer's hash (the lock's own key) and the waiting writers' registrations.
#[derive(Debug)]
pub(crate) struct RwKeys {
    pub(crate) readers: Arc<str>,
    pub(crate) writer: Arc<str>,
    pub(crate) waiting: Arc<str>,
}

impl RwKeys {
    pub(crate) fn of(lock_key: &str) -> Self {
        Self {
            readers: Kind::Read.hold_key(lock_key).into(),
            writer: Kind::Write.hold_key(lock_key).into(),
            waiting: format!("{lock_key}:{WAITING_WRITERS}").into(),
        }
    }
}

/// What a hold's lock keeps on the nodes besides the key the hold is kept in, per kind of lock.
#[derive(Debug, Clone)]
pub(crate) enum LockKeys {
    /// Nothing else: a reentrant lock.
    Own,
    /// A read-write lock's keys (either side).
    ReadWrite(Arc<RwKeys>),
    /// A semaphore's count of permits, and the hold's weight.
    Permits(Arc<Permits>),
    /// A fair lock's queue of waiters.
    Fair(Arc<FairKeys>),
}

impl LockKeys {
    /// A read-write lock's keys, for a side of one.
    pub(crate) fn read_write(&self) -> Option<&RwKeys> {
        match self {
            LockKeys::ReadWrite(keys) => Some(keys),
            _ => None,
        }
    }

    /// How many nodes decide an acquisition, a renewal or a release of the lock's holds, when
    /// not a majority: a fixed-count semaphore's acknowledgement quorum.
    pub(crate) fn quorum(&self) -> Option<usize> {
        match self {
            LockKeys::Permits(permits) => permits.fixed.map(|fixed| fixed.quorum),
            _ => None,
        }
    }

    /// Whether every waiter of the lock is woken by a release (more than one may go in, or
    /// each must look to know its place), rather than the next of the client's line.
    pub(crate) fn wakes_all(&self) -> bool {
        !matches!(self, LockKeys::Own)
    }
}

const FAIR_HOLDS: &str = "fair";
const FAIR_QUEUE: &str = "fair-queue";
const FAIR_HEARTBEATS: &str = "fair-heartbeats";
const FAIR_TICKETS: &str = "fair-tickets";

/// A fair lock's queue on every node, in its hash slot: the waiters in order (a sorted set,
/// owner prefix -> ticket), their heartbeats (a sorted set, owner prefix -> deadline on the
/// server's clock) and the ticket counter.
#[derive(Debug)]
pub(crate) struct FairKeys {
    pub(crate) queue: Arc<str>,
    pub(crate) heartbeats: Arc<str>,
    pub(crate) tickets: Arc<str>,
}

impl FairKeys {
    pub(crate) fn of(lock_key: &str) -> Self {
        Self {
            queue: format!("{lock_key}:{FAIR_QUEUE}").into(),
            heartbeats: format!("{lock_key}:{FAIR_HEARTBEATS}").into(),
            tickets: format!("{lock_key}:{FAIR_TICKETS}").into(),
        }
    }
}

/// A semaphore's permit hold: the key of the semaphore's count of permits (in its hash slot),
/// how many permits the hold takes, and the count its client fixed, if it did.
#[derive(Debug)]
pub(crate) struct Permits {
    pub(crate) count_key: Arc<str>,
    pub(crate) weight: u32,
    pub(crate) fixed: Option<FixedCount>,
}

/// A semaphore count fixed by its client, and how many of the client's masters must grant each
/// acquisition for no more permits ever to be out ([`ack_quorum`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FixedCount {
    pub(crate) permits: u32,
    pub(crate) quorum: usize,
}

impl FixedCount {
    /// `permits` permits on `nodes` masters.
    pub(crate) fn new(permits: u32, nodes: usize) -> Self {
        Self {
            permits,
            quorum: ack_quorum(permits, nodes),
        }
    }
}

/// The key of the count of permits of the semaphore whose key is `lock_key`.
pub(crate) fn permit_count_key(lock_key: &str) -> String {
    format!("{lock_key}:{PERMIT_COUNT}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hold_key_leads_back_to_its_lock_key() {
        for kind in [
            Kind::Reentrant,
            Kind::Read,
            Kind::Write,
            Kind::Permit,
            Kind::Fair,
        ] {
            let hold_key = kind.hold_key("redlock:{orders}");
            assert_eq!(kind.lock_key(&hold_key), "redlock:{orders}", "{kind:?}");
        }
        let keys = RwKeys::of("redlock:{orders}");
        assert_eq!(&*keys.readers, "redlock:{orders}:read");
        assert_eq!(&*keys.writer, "redlock:{orders}");
        assert_eq!(&*keys.waiting, "redlock:{orders}:write-waiting");
        assert_eq!(
            Kind::Permit.hold_key("redlock:{orders}"),
            "redlock:{orders}:permits"
        );
        assert_eq!(
            permit_count_key("redlock:{orders}"),
            "redlock:{orders}:permit-count"
        );
    }
}
