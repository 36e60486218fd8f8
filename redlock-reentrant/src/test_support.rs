//! What the unit tests of holds and lines share: a watchdog that sends nothing, and its
//! registrations.

use redlock_core::{OwnerToken, Redlock, RedlockConfig};
use redlock_watchdog::lock_kind::{Registration, RenewScript};
use redlock_watchdog::{Watchdog, WatchdogConfig};

/// A watchdog on a node nobody listens on: nothing here sends anything, and what the renewal
/// task tries fails quietly.
pub(crate) fn watchdog() -> Watchdog {
    let redlock = Redlock::new(RedlockConfig::with_nodes(["redis://127.0.0.1:1"])).expect("config");
    Watchdog::start(redlock, WatchdogConfig::default()).expect("watchdog")
}

/// A new hold's registration with `watchdog`: its lease record and lost signal.
pub(crate) fn registration(watchdog: &Watchdog) -> Registration {
    watchdog.register(RenewScript::new(&crate::lua::RENEW), "k", OwnerToken::new())
}
