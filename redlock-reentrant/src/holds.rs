//! This process's holds: one cell per (lock key, owner), which serializes that owner's
//! operations on that lock and keeps its [`Hold`] state machine.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use dashmap::DashMap;
use redlock_core::OwnerToken;
use redlock_watchdog::LostSignal;
use tokio::sync::OwnedMutexGuard;

use crate::hold::Hold;
use crate::kind::{Kind, LockKeys};
use crate::lua::Shown;
use crate::WaitStrategy;
use redlock_core::lock_kind::unpoisoned;

/// Which hold: a lock key (the key the hold is kept in on the nodes), its kind and an owner.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct HoldKey {
    pub(crate) key: Arc<str>,
    pub(crate) kind: Kind,
    pub(crate) owner: OwnerToken,
}

impl HoldKey {
    /// The channel on which releases of the hold's lock are announced (both sides of a
    /// read-write lock share their lock's).
    pub(crate) fn channel(&self) -> String {
        crate::wakeup::channel_of(self.kind.lock_key(&self.key))
    }

    /// The hash field that names this owner's hold of `generation` on the nodes: the owner, and
    /// the hold. Every request of a hold names it, so one that arrives late (after a reconnect,
    /// or overtaken in a Redis Cluster member's queue) never counts for, or deletes, a later
    /// hold of the same owner: to the nodes, that is another holder.
    pub(crate) fn field(&self, generation: u64) -> OwnerToken {
        use std::fmt::Write as _;
        // Sized once (the owner, `:`, at most 20 digits): no growth on the way.
        let mut field = String::with_capacity(self.owner.as_str().len() + 21);
        let _ = write!(field, "{}", self.field_arg(Some(generation)).0);
        OwnerToken::from_string(field)
    }

    /// The field of this owner's hold of `generation`, to write into a request as it is sent;
    /// with `None`, what every field of this owner's holds starts with (an owner token has no
    /// `:` after its id, so no other owner's fields start with it).
    pub(crate) fn field_arg(&self, generation: Option<u64>) -> Shown<Field<'_>> {
        Shown(Field {
            owner: self.owner.as_str(),
            generation,
        })
    }
}

/// A hold's field (`{owner}:{generation}`), or the prefix of an owner's (`{owner}:`).
pub(crate) struct Field<'a> {
    owner: &'a str,
    generation: Option<u64>,
}

impl std::fmt::Display for Field<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:", self.owner)?;
        match self.generation {
            Some(generation) => write!(f, "{generation}"),
            None => Ok(()),
        }
    }
}

/// One owner's hold of one lock, as this process knows it.
#[derive(Debug, Default)]
pub(crate) struct HoldCell {
    /// Taken for the whole of an operation on the hold (an acquisition and its undo, an unlock
    /// and its retries): one operation at a time.
    turn: Arc<tokio::sync::Mutex<()>>,
    /// The hold: read at any time, changed under a lock never held across an `.await`.
    state: Mutex<Hold>,
}

impl HoldCell {
    /// The hold as it is now. Its transitions take a lost lease record into account where
    /// they plan; its readers (a token, a signal) answer from the record too.
    pub(crate) fn state(&self) -> MutexGuard<'_, Hold> {
        unpoisoned(self.state.lock())
    }

    /// The current hold's fencing token, while it is live.
    pub(crate) fn token(&self) -> Option<u64> {
        self.state().token()
    }

    /// The current hold's lost signal, live or lost.
    pub(crate) fn lost(&self) -> Option<LostSignal> {
        self.state().lost_signal()
    }

    /// The current hold's generation, live or lost.
    pub(crate) fn generation(&self) -> Option<u64> {
        self.state().generation()
    }
}

/// Every hold of one client.
#[derive(Debug, Default)]
pub(crate) struct Holds {
    cells: DashMap<HoldKey, Arc<HoldCell>>,
    /// Forced unlocks in flight.
    forcing: AtomicUsize,
    /// Forced unlocks completed (or dropped).
    forced: AtomicU64,
}

/// A forced unlock in flight; dropping it (done or cancelled) counts it as completed.
pub(crate) struct Forcing(Arc<Holds>);

impl Drop for Forcing {
    fn drop(&mut self) {
        self.0.forced.fetch_add(1, Ordering::SeqCst);
        self.0.forcing.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Holds {
    /// Waits for the hold's turn (creating its cell if there is none): the operation has the
    /// hold until the guard is dropped.
    pub(crate) async fn lock(self: &Arc<Self>, hold: &HoldKey) -> HoldGuard {
        let cell = Arc::clone(self.cells.entry(hold.clone()).or_default().value());
        let turn = Arc::clone(&cell.turn).lock_owned().await;
        HoldGuard {
            holds: Arc::clone(self),
            key: hold.clone(),
            cell: Some(cell),
            turn: Some(turn),
        }
    }

    /// The cell of a hold, if this process has one.
    pub(crate) fn get(&self, hold: &HoldKey) -> Option<Arc<HoldCell>> {
        self.cells.get(hold).map(|cell| Arc::clone(cell.value()))
    }

    /// Drops the cell of a hold that is free and that no operation is using.
    pub(crate) fn forget_if_idle(&self, hold: &HoldKey) {
        self.cells.remove_if(hold, |_, cell| {
            Arc::strong_count(cell) == 1
                && Arc::strong_count(&cell.turn) == 1
                && matches!(*cell.state(), Hold::Free)
        });
    }

    /// Every hold of a lock key, whoever the owner: their keys.
    pub(crate) fn keys_of(&self, key: &str) -> Vec<HoldKey> {
        self.cells
            .iter()
            .filter(|entry| &*entry.key().key == key)
            .map(|entry| entry.key().clone())
            .collect()
    }

    /// A forced unlock begins: acquisitions that overlap it are not granted (the deletion may
    /// land just after their grant, on a connection this process cannot order).
    pub(crate) fn begin_force(self: &Arc<Self>) -> Forcing {
        self.forcing.fetch_add(1, Ordering::SeqCst);
        Forcing(Arc::clone(self))
    }

    /// A mark to pass to [`Holds::forced_since`] later.
    pub(crate) fn force_epoch(&self) -> u64 {
        self.forced.load(Ordering::SeqCst)
    }

    /// Whether a forced unlock was in flight at some moment since `epoch` was read.
    pub(crate) fn forced_since(&self, epoch: u64) -> bool {
        self.forcing.load(Ordering::SeqCst) > 0 || self.forced.load(Ordering::SeqCst) != epoch
    }

    /// Every hold's key, in one canonical order (lock key, then owner): whoever locks several
    /// holds in this order (two concurrent shutdowns) never waits on another doing the same.
    pub(crate) fn keys(&self) -> Vec<HoldKey> {
        let mut keys: Vec<HoldKey> = self.cells.iter().map(|entry| entry.key().clone()).collect();
        keys.sort_by(|a, b| (&a.key, a.owner.as_str()).cmp(&(&b.key, b.owner.as_str())));
        keys
    }
}

/// One operation's turn on a hold. Letting go of it forgets the cell once the hold is free and
/// unused.
#[derive(Debug)]
pub(crate) struct HoldGuard {
    holds: Arc<Holds>,
    key: HoldKey,
    cell: Option<Arc<HoldCell>>,
    turn: Option<OwnedMutexGuard<()>>,
}

impl HoldGuard {
    /// The hold now (see [`HoldCell::state`]); never kept across an `.await`.
    pub(crate) fn state(&self) -> MutexGuard<'_, Hold> {
        self.cell.as_ref().expect("present until dropped").state()
    }
}

impl Drop for HoldGuard {
    fn drop(&mut self) {
        if let (Some(cell), Some(turn)) = (self.cell.take(), self.turn.take()) {
            drop(turn);
            drop(cell);
            self.holds.forget_if_idle(&self.key);
        }
    }
}

/// One owner's view of one lock: everything an operation needs to address it.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    pub(crate) name: Arc<str>,
    pub(crate) hold: HoldKey,
    /// The pub/sub channel on which the lock's release is announced.
    pub(crate) channel: Arc<str>,
    /// The fencing counter the lock's tokens come from.
    pub(crate) fence_key: Arc<str>,
    /// What the lock keeps besides the hold's key.
    pub(crate) keys: LockKeys,
    /// How its waiters wait.
    pub(crate) wait: WaitStrategy,
}

impl Target {
    pub(crate) fn key(&self) -> &str {
        &self.hold.key
    }

    pub(crate) fn kind(&self) -> Kind {
        self.hold.kind
    }

    /// The hash field of this owner's hold of `generation` (see [`HoldKey::field`]).
    pub(crate) fn field(&self, generation: u64) -> OwnerToken {
        self.hold.field(generation)
    }

    /// The same field (or, with `None`, its owner's prefix), written into a request as it is
    /// sent (see [`HoldKey::field_arg`]).
    pub(crate) fn field_arg(&self, generation: Option<u64>) -> Shown<Field<'_>> {
        self.hold.field_arg(generation)
    }

    pub(crate) fn channel(&self) -> &str {
        &self.channel
    }

    /// How many nodes decide its acquisitions, renewals and releases (`None`: a majority).
    pub(crate) fn quorum(&self) -> Option<usize> {
        self.keys.quorum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use redlock_core::redis::ToRedisArgs as _;

    #[test]
    fn a_field_written_into_a_request_is_the_field_the_hold_keeps() {
        let hold = HoldKey {
            key: Arc::from("redlock:k"),
            kind: Kind::Reentrant,
            owner: OwnerToken::from_string("client:task-3".into()),
        };
        assert_eq!(hold.field(42).as_str(), "client:task-3:42");
        assert_eq!(
            hold.field_arg(Some(42)).to_redis_args(),
            vec![b"client:task-3:42".to_vec()]
        );
        assert_eq!(
            hold.field_arg(None).to_redis_args(),
            vec![b"client:task-3:".to_vec()],
            "the owner's prefix"
        );
    }
}
