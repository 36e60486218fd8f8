//! Switches that break the lock on purpose, for the fault-injection suite's negative controls.
//!
//! Compiled only with the `sabotage` feature, which no product should enable. The suite runs a
//! deliberately broken twin of the lock with one switch on, in a process of its own, and fails
//! unless its checkers catch the twin: a checker that cannot fail proves nothing. Every switch
//! is process-wide and off until set. The quorum's and the watchdog's switches are re-exported
//! here.
//!
//! ```
//! use std::sync::atomic::Ordering;
//! redlock_reentrant::sabotage::RELEASE_WITHOUT_COMPARE.store(true, Ordering::Relaxed);
//! # redlock_reentrant::sabotage::RELEASE_WITHOUT_COMPARE.store(false, Ordering::Relaxed);
//! ```

use std::sync::atomic::{AtomicBool, Ordering};

pub use redlock_core::sabotage::{QUORUM_OF_ONE, SKIP_VALIDITY};
pub use redlock_watchdog::sabotage::KEEP_RENEWING_RELEASED;

/// A release deletes the lock without checking who holds it.
pub static RELEASE_WITHOUT_COMPARE: AtomicBool = AtomicBool::new(false);

/// A failed attempt is undone only on the nodes seen to grant it, not on those whose replies
/// were still out when the attempt was decided: a grant that lands late stays.
pub static UNDO_ONLY_SEEN_GRANTS: AtomicBool = AtomicBool::new(false);

pub(crate) fn undo_only_seen_grants() -> bool {
    UNDO_ONLY_SEEN_GRANTS.load(Ordering::Relaxed)
}

pub(crate) fn skip_validity() -> bool {
    SKIP_VALIDITY.load(Ordering::Relaxed)
}

pub(crate) fn release_without_compare() -> bool {
    RELEASE_WITHOUT_COMPARE.load(Ordering::Relaxed)
}
