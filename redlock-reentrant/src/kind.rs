//! Which lock a hold is of: a reentrant lock (`RLock`), or a read-write lock's read or write
//! side. The kind says what the nodes keep of a hold and which scripts act on it; everything
//! else (the quorum, the hold record, renewal, the lost signal, fencing) is the same for all.

use std::sync::Arc;

use redlock_core::lock_kind::LockScript;

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
}

impl Kind {
    /// Takes or re-enters a hold on one node.
    pub(crate) fn acquire(self) -> &'static LockScript {
        match self {
            Kind::Reentrant => &lua::ACQUIRE,
            Kind::Read => &lua::ACQUIRE_READ,
            Kind::Write => &lua::ACQUIRE_WRITE,
        }
    }

    /// Undoes one acquisition attempt where it landed.
    pub(crate) fn undo(self) -> &'static LockScript {
        match self {
            Kind::Read => &lua::UNDO_READ,
            Kind::Reentrant | Kind::Write => &lua::UNDO,
        }
    }

    /// Releases one acquisition.
    pub(crate) fn unlock(self) -> &'static LockScript {
        match self {
            Kind::Read => &lua::UNLOCK_READ,
            Kind::Reentrant | Kind::Write => &lua::UNLOCK,
        }
    }

    /// Renews holds in batches (the watchdog's script).
    pub(crate) fn renew(self) -> &'static LockScript {
        match self {
            Kind::Read => &lua::RENEW_READ,
            Kind::Reentrant | Kind::Write => &lua::RENEW,
        }
    }

    /// Gives holds up in batches.
    pub(crate) fn abandon(self) -> &'static LockScript {
        match self {
            Kind::Read => &lua::ABANDON_READ,
            Kind::Reentrant | Kind::Write => &lua::ABANDON,
        }
    }

    /// What one node knows of the lock.
    pub(crate) fn inspect(self) -> &'static LockScript {
        match self {
            Kind::Read => &lua::INSPECT_READ,
            Kind::Reentrant | Kind::Write => &lua::INSPECT,
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
        }
    }

    /// The lock's key, from the key a hold of this kind is kept in (see [`Kind::hold_key`]).
    pub(crate) fn lock_key(self, hold_key: &str) -> &str {
        match self {
            Kind::Reentrant | Kind::Write => hold_key,
            Kind::Read => hold_key
                .strip_suffix(READERS)
                .and_then(|key| key.strip_suffix(':'))
                .unwrap_or(hold_key),
        }
    }
}

const READERS: &str = "read";
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hold_key_leads_back_to_its_lock_key() {
        for kind in [Kind::Reentrant, Kind::Read, Kind::Write] {
            let hold_key = kind.hold_key("redlock:{orders}");
            assert_eq!(kind.lock_key(&hold_key), "redlock:{orders}", "{kind:?}");
        }
        let keys = RwKeys::of("redlock:{orders}");
        assert_eq!(&*keys.readers, "redlock:{orders}:read");
        assert_eq!(&*keys.writer, "redlock:{orders}");
        assert_eq!(&*keys.waiting, "redlock:{orders}:write-waiting");
    }
}
