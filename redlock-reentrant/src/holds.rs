//! This process's holds: one cell per (lock key, owner), which serializes that owner's
//! operations on that lock and keeps its [`Hold`] state machine.

use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use dashmap::DashMap;
use redlock_core::OwnerToken;
use redlock_watchdog::lock_kind::GiveUp;
use redlock_watchdog::LostSignal;
use tokio::sync::OwnedMutexGuard;

use crate::hold::Hold;

/// Which hold: a lock key and an owner.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct HoldKey {
    pub(crate) key: Arc<str>,
    pub(crate) owner: OwnerToken,
}

impl HoldKey {
    /// The hash field that names this owner's hold of `generation` on the nodes: the owner, and
    /// the hold. Every request of a hold names it, so one that arrives late (after a reconnect,
    /// or overtaken in a Redis Cluster member's queue) never counts for, or deletes, a later
    /// hold of the same owner: to the nodes, that is another holder.
    pub(crate) fn field(&self, generation: u64) -> OwnerToken {
        OwnerToken::from_string(format!("{}{generation}", self.field_prefix()))
    }

    /// What every field of this owner's holds starts with (an owner token has no `:` after its
    /// id, so no other owner's fields start with it).
    pub(crate) fn field_prefix(&self) -> String {
        format!("{}:", self.owner.as_str())
    }
}

/// One owner's hold of one lock, as this process knows it.
#[derive(Debug, Default)]
pub(crate) struct HoldCell {
    /// Locked for the whole of an operation on the hold (an acquisition and its undo, an
    /// unlock and its retries).
    state: Arc<tokio::sync::Mutex<Hold>>,
    /// What can be read without waiting for an operation in flight, updated whenever an
    /// operation lets go of the state.
    snapshot: Mutex<Snapshot>,
    /// Generations of guards dropped, outside any runtime, while an operation had the state:
    /// the next operation gives those holds up.
    abandoned: Mutex<Vec<u64>>,
}

#[derive(Debug, Clone)]
struct Snapshot {
    token: Option<u64>,
    record: Option<GiveUp>,
    generation: Option<u64>,
    free: bool,
}

impl Default for Snapshot {
    fn default() -> Self {
        Self {
            token: None,
            record: None,
            generation: None,
            free: true,
        }
    }
}

impl HoldCell {
    /// The current hold's fencing token, while it is live.
    pub(crate) fn token(&self) -> Option<u64> {
        self.read().token
    }

    /// The current hold's lost signal, live or lost.
    pub(crate) fn lost(&self) -> Option<LostSignal> {
        self.read().record.map(|record| record.lost_signal())
    }

    /// A handle that gives the current hold up, live or lost.
    pub(crate) fn giver(&self) -> Option<GiveUp> {
        self.read().record
    }

    /// The current hold's generation, live or lost.
    pub(crate) fn generation(&self) -> Option<u64> {
        self.read().generation
    }

    /// Records that a guard of `generation` was dropped while the state was busy.
    pub(crate) fn abandon_later(&self, generation: u64) {
        self.abandoned
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(generation);
    }

    fn read(&self) -> Snapshot {
        self.snapshot
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn publish(&self, hold: &Hold) {
        *self.snapshot.lock().unwrap_or_else(PoisonError::into_inner) = Snapshot {
            token: hold.token(),
            record: hold.giver(),
            generation: hold.generation(),
            free: matches!(hold, Hold::Free),
        };
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
    /// Waits for the hold's state (creating its cell if there is none) and brings it up to
    /// date: guards abandoned meanwhile are applied.
    pub(crate) async fn lock(self: &Arc<Self>, hold: &HoldKey) -> HoldGuard {
        let cell = Arc::clone(self.cells.entry(hold.clone()).or_default().value());
        let state = Arc::clone(&cell.state).lock_owned().await;
        self.guard(hold, cell, state)
    }

    /// The hold's state if no operation has it now, without waiting (for `Drop`, which cannot
    /// wait); `None` when this process has no such hold or an operation has it.
    pub(crate) fn try_lock(self: &Arc<Self>, hold: &HoldKey) -> Option<HoldGuard> {
        let cell = self.get(hold)?;
        let state = Arc::clone(&cell.state).try_lock_owned().ok()?;
        Some(self.guard(hold, cell, state))
    }

    /// The guard of a hold whose state was just taken; it applies the releases of guards
    /// dropped meanwhile where nothing could be sent.
    fn guard(
        self: &Arc<Self>,
        hold: &HoldKey,
        cell: Arc<HoldCell>,
        state: OwnedMutexGuard<Hold>,
    ) -> HoldGuard {
        let mut guard = HoldGuard {
            holds: Arc::clone(self),
            key: hold.clone(),
            cell: Some(cell),
            state: Some(state),
        };
        let abandoned = std::mem::take(
            &mut *guard
                .cell()
                .abandoned
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        for generation in abandoned {
            guard.absorb_abandoned(generation);
        }
        guard
    }

    /// The cell of a hold, if this process has one.
    pub(crate) fn get(&self, hold: &HoldKey) -> Option<Arc<HoldCell>> {
        self.cells.get(hold).map(|cell| Arc::clone(cell.value()))
    }

    /// Drops the cell of a hold that is free and that no operation is using.
    fn forget_if_idle(&self, hold: &HoldKey) {
        self.cells.remove_if(hold, |_, cell| {
            Arc::strong_count(cell) == 1 && Arc::strong_count(&cell.state) == 1 && cell.read().free
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

/// One operation's exclusive use of a hold's state. Letting go of it publishes what others may
/// read without waiting, and forgets the cell once the hold is free and unused.
#[derive(Debug)]
pub(crate) struct HoldGuard {
    holds: Arc<Holds>,
    key: HoldKey,
    cell: Option<Arc<HoldCell>>,
    state: Option<OwnedMutexGuard<Hold>>,
}

impl HoldGuard {
    fn cell(&self) -> &HoldCell {
        self.cell.as_ref().expect("present until dropped")
    }
}

impl Deref for HoldGuard {
    type Target = Hold;

    fn deref(&self) -> &Hold {
        self.state.as_ref().expect("present until dropped")
    }
}

impl DerefMut for HoldGuard {
    fn deref_mut(&mut self) -> &mut Hold {
        self.state.as_mut().expect("present until dropped")
    }
}

impl Drop for HoldGuard {
    fn drop(&mut self) {
        if let (Some(cell), Some(state)) = (self.cell.take(), self.state.take()) {
            cell.publish(&state);
            drop(state);
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
}

impl Target {
    pub(crate) fn key(&self) -> &str {
        &self.hold.key
    }

    /// The hash field of this owner's hold of `generation` (see [`HoldKey::field`]).
    pub(crate) fn field(&self, generation: u64) -> OwnerToken {
        self.hold.field(generation)
    }

    /// What every field of this owner's holds starts with (see [`HoldKey::field_prefix`]).
    pub(crate) fn field_prefix(&self) -> String {
        self.hold.field_prefix()
    }

    pub(crate) fn channel(&self) -> &str {
        &self.channel
    }
}
