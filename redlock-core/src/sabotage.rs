//! Switches that break the quorum on purpose, for the fault-injection suite's negative controls.
//!
//! Compiled only with the `sabotage` feature, which no product should enable. The suite runs a
//! deliberately broken twin of the lock with one switch on and fails unless its checkers catch
//! the twin: a checker that cannot fail proves nothing. Every switch is process-wide and off
//! until set.
//!
//! ```
//! use std::sync::atomic::Ordering;
//! // A worker process of the fault suite, told to be the broken twin:
//! redlock_core::sabotage::QUORUM_OF_ONE.store(true, Ordering::Relaxed);
//! # redlock_core::sabotage::QUORUM_OF_ONE.store(false, Ordering::Relaxed);
//! ```

use std::sync::atomic::{AtomicBool, Ordering};

/// Count one node's vote as a majority.
pub static QUORUM_OF_ONE: AtomicBool = AtomicBool::new(false);

/// Accept a majority however long it took to gather: no validity check. The reentrant lock
/// also counts the lease from the reply instead of the request (the classic mistake the
/// validity check exists to prevent).
pub static SKIP_VALIDITY: AtomicBool = AtomicBool::new(false);

pub(crate) fn on(switch: &AtomicBool) -> bool {
    switch.load(Ordering::Relaxed)
}
