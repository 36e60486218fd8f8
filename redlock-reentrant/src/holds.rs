//! This process's holds: one cell per (lock key, owner), which serializes that owner's
//! operations on that lock and remembers its count, fencing token, renewal and lost signal.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use dashmap::DashMap;
use redlock_watchdog::{LostSignal, Registration};
use tokio::sync::Mutex;

/// Which hold: a lock key and an owner field.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct HoldKey {
    pub(crate) key: Arc<str>,
    pub(crate) owner: Arc<str>,
}

/// One owner's hold of one lock, as this process knows it.
#[derive(Debug, Default)]
pub(crate) struct HoldCell {
    /// Locked for the whole of an acquisition attempt (and its undo), or an unlock.
    pub(crate) state: Arc<Mutex<HoldState>>,
    /// The fencing token of the current hold; 0 when there is none. Readable without waiting.
    token: AtomicU64,
    /// The current hold's lost signal, readable without waiting for an operation in flight.
    lost: std::sync::Mutex<Option<LostSignal>>,
}

/// What one owner's hold is now.
#[derive(Debug, Default)]
pub(crate) struct HoldState {
    /// Nested acquisitions not yet released.
    pub(crate) count: u32,
    /// The watchdog's entry for the hold; dropped first thing by the last unlock.
    pub(crate) registration: Option<Registration>,
    /// Fires when the hold is lost.
    pub(crate) lost: Option<LostSignal>,
    /// The request id of an unlock that did not reach a majority: a retry reuses it, so nodes
    /// that already applied it answer as before instead of "not owner".
    pub(crate) pending_unlock: Option<String>,
}

impl HoldState {
    /// Why the current hold was lost, if it was.
    pub(crate) fn lost_reason(&self) -> Option<redlock_watchdog::LostReason> {
        self.lost.as_ref().and_then(LostSignal::reason)
    }

    /// Forgets the hold (after its last release, or once it was lost).
    pub(crate) fn clear(&mut self, cell: &HoldCell) {
        self.count = 0;
        self.registration = None;
        self.lost = None;
        self.pending_unlock = None;
        cell.set_token(None);
        cell.set_lost(None);
    }
}

impl HoldCell {
    /// The current hold's fencing token.
    pub(crate) fn token(&self) -> Option<u64> {
        match self.token.load(Ordering::Acquire) {
            0 => None,
            token => Some(token),
        }
    }

    pub(crate) fn set_token(&self, token: Option<u64>) {
        self.token.store(token.unwrap_or(0), Ordering::Release);
    }

    /// The current hold's lost signal.
    pub(crate) fn lost(&self) -> Option<LostSignal> {
        self.lost
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    pub(crate) fn set_lost(&self, lost: Option<LostSignal>) {
        *self
            .lost
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = lost;
    }
}

/// Every hold of one client.
#[derive(Debug, Default)]
pub(crate) struct Holds {
    cells: DashMap<HoldKey, Arc<HoldCell>>,
}

impl Holds {
    /// The cell of a hold, created empty if there is none.
    pub(crate) fn cell(&self, hold: &HoldKey) -> Arc<HoldCell> {
        Arc::clone(self.cells.entry(hold.clone()).or_default().value())
    }

    /// The cell of a hold, if this process has one.
    pub(crate) fn get(&self, hold: &HoldKey) -> Option<Arc<HoldCell>> {
        self.cells.get(hold).map(|cell| Arc::clone(cell.value()))
    }

    /// Drops the cell of a hold that is over and that no operation is using.
    pub(crate) fn forget_if_idle(&self, hold: &HoldKey) {
        self.cells.remove_if(hold, |_, cell| {
            Arc::strong_count(cell) == 1
                && Arc::strong_count(&cell.state) == 1
                && cell.token().is_none()
        });
    }

    /// Every hold of a lock key, whoever the owner.
    pub(crate) fn of_key(&self, key: &str) -> Vec<(HoldKey, Arc<HoldCell>)> {
        self.cells
            .iter()
            .filter(|entry| &*entry.key().key == key)
            .map(|entry| (entry.key().clone(), Arc::clone(entry.value())))
            .collect()
    }

    /// Every hold.
    pub(crate) fn all(&self) -> Vec<(HoldKey, Arc<HoldCell>)> {
        self.cells
            .iter()
            .map(|entry| (entry.key().clone(), Arc::clone(entry.value())))
            .collect()
    }
}

/// One owner's view of one lock: everything an operation needs to address it.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    pub(crate) name: Arc<str>,
    pub(crate) hold: HoldKey,
}

impl Target {
    pub(crate) fn key(&self) -> &str {
        &self.hold.key
    }

    pub(crate) fn owner(&self) -> &str {
        &self.hold.owner
    }

    /// The pub/sub channel on which the lock's release is announced.
    pub(crate) fn channel(&self) -> String {
        format!("{}:released", self.hold.key)
    }
}
