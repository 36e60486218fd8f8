//! A switch that breaks the watchdog on purpose, for the fault-injection suite's negative
//! controls.
//!
//! Compiled only with the `sabotage` feature, which no product should enable. The suite runs a
//! deliberately broken twin with the switch on and fails unless its checkers catch it: a checker
//! that cannot fail proves nothing. The switch is process-wide and off until set.
//!
//! ```
//! use std::sync::atomic::Ordering;
//! redlock_watchdog::sabotage::KEEP_RENEWING_RELEASED.store(true, Ordering::Relaxed);
//! # redlock_watchdog::sabotage::KEEP_RENEWING_RELEASED.store(false, Ordering::Relaxed);
//! ```

use std::sync::atomic::AtomicBool;

/// Dropping a [`Registration`](crate::lock_kind::Registration) leaves its hold in the watchdog, which
/// keeps renewing it after the release (the bug of redisson#7272).
pub static KEEP_RENEWING_RELEASED: AtomicBool = AtomicBool::new(false);
