//! Lease renewal for held locks, and the signal that tells a holder its lock is lost.
//!
//! A lock taken without an explicit lease gets the watchdog lease (default 30 s), renewed every
//! `timeout / 3` (10 s) for as long as the holding process lives and holds it. When the process
//! dies, nothing renews and the lock frees by itself within one timeout of the last renewal.
//!
//! - **One task per client**, not one per lock: a registry of held locks renewed in batches per
//!   node, so 10,000 held locks cost `ceil(10,000 / batch_size)` calls per node per round.
//! - **One record per hold**: its validity, whether it is renewed, where its release stands and
//!   why it was lost live in one place, which the lock kind's hold, the renewal task and the
//!   [`LostSignal`] all read; the signal's deadline is computed from it when read.
//! - **Never after unlock**: a hold is registered before its acquisition completes; renewal
//!   pauses while its release is sent and ends for good when the release is confirmed;
//!   renewal is compare-and-`PEXPIRE`, so even a renewal already on the wire cannot bring a
//!   released lock back.
//! - **Errors do not stop renewal**: a round that did not reach a majority is retried after a
//!   quarter interval. A majority answering "not held" loses the hold at once; renewals that
//!   keep failing lose it just before the last confirmed validity ends.
//! - **The holder is told**: each hold has a [`LostSignal`] to await or select on, with a
//!   tokio-util `CancellationToken` for work that must stop, and a tracing warning.
//! - **A cap** ([`WatchdogConfig::max_hold`]) stops renewing a hold after a maximum time.
//!
//! - **Any kind of lock**: the watchdog knows a lock only by its renewal script, which the
//!   lock kind supplies ([`lock_kind`]). [`Watchdog::acquire`] gives `redlock-core`'s plain lock a renewed
//!   lease ([`RenewedLease`]); `redlock-reentrant` registers its hashes with its own script.
//!
//! Most users get all of this through `redlock-reentrant`'s `RLock::lock()`.
//!
//! ```no_run
//! use std::time::Duration;
//! use redlock_core::{Redlock, RedlockConfig};
//! use redlock_watchdog::{Watchdog, WatchdogConfig};
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let redlock = Redlock::new(RedlockConfig::with_nodes(["redis://127.0.0.1:6379"]))?;
//! let watchdog = Watchdog::start(
//!     redlock,
//!     WatchdogConfig { timeout: Duration::from_secs(30), ..WatchdogConfig::default() },
//! )?;
//! assert_eq!(watchdog.config().renew_interval(), Duration::from_secs(10));
//! # Ok(()) }
//! ```

mod config;
mod deadline_timer;
mod lost;
mod record;
mod registration;
mod renew_script;
mod renewal;
mod renewed_lease;
#[cfg(feature = "sabotage")]
#[doc(hidden)]
pub mod sabotage;
mod schedule;
mod shared;
mod stats;
mod watchdog;

pub use config::WatchdogConfig;
pub use lost::LostSignal;
pub use redlock_core::LostReason;
pub use renewal::RENEWING_TARGET;
pub use renewed_lease::RenewedLease;
pub use stats::WatchdogStats;
pub use watchdog::Watchdog;

/// What a lock kind needs to have its holds renewed and watched: most users never name these.
///
/// A lock kind registers each hold with [`Watchdog::register`](crate::Watchdog::register), gets
/// a [`Registration`](crate::lock_kind::Registration) that owns the hold's lease record, and
/// tells it what a majority confirmed (`Registration::confirmed`) and what its own state says
/// of the lease after each transition (`Registration::set` with `LeaseFacts`). Its holders get
/// the record's [`LostSignal`], a view they cannot fire or re-arm.
pub mod lock_kind {
    pub use crate::record::{LeaseFacts, ReleasePhase};
    pub use crate::registration::{GiveUp, Registration};
    pub use crate::renew_script::RenewScript;
}

/// This crate's README example compiles (checked by `cargo test --doc`).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct CrateReadme;
