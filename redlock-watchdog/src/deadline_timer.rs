//! One thread that fires lost signals at their deadlines, whatever happens meanwhile to the
//! client, the watchdog's renewal task or the tokio runtime: a token handed to work that must
//! stop when the lock goes is cancelled on the clock, not when some task gets round to it.
//!
//! A signal is armed with its deadline; the thread sleeps until the earliest one, then looks at
//! that signal again: past its (possibly moved) deadline, it fires; moved later, it is armed
//! again at the new one. Renewals that move a deadline later cost nothing here until the old
//! one comes. A hold that ends (released, or lost before its deadline) takes its arming back at
//! once, so a service that takes and releases locks all day keeps no arming per past hold and
//! does not wake the thread for it; a signal nobody holds any more is forgotten too.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock, Weak};
use std::time::Instant;

use crate::record::LeaseRecord;
use redlock_core::lock_kind::unpoisoned;

/// The process's timer: the armed signals by deadline, and the thread's wake-up call.
struct Timer {
    state: Mutex<Armed>,
    changed: Condvar,
}

/// What the thread waits for.
#[derive(Default)]
struct Armed {
    /// The armed signals, soonest first.
    signals: BTreeMap<Arming, Weak<LeaseRecord>>,
    /// When the thread wakes next by itself; `None` while it waits for an arming. An arming
    /// before it wakes the thread; a later one waits for that wake-up, so holds taken and
    /// released again and again never wake it.
    sleeping_until: Option<Instant>,
}

/// One arming of one signal: its deadline, and a number no other arming has. A record keeps
/// its current one, to tell the thread's look at it from an older one and to take it back
/// when the hold ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Arming {
    pub(crate) at: Instant,
    id: u64,
}

impl Arming {
    /// A new arming for `at`, to hand to [`arm`] once the record remembers it.
    pub(crate) fn new(at: Instant) -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        Self {
            at,
            id: NEXT.fetch_add(1, Ordering::Relaxed),
        }
    }
}

static TIMER: OnceLock<Option<&'static Timer>> = OnceLock::new();

fn timer() -> Option<&'static Timer> {
    *TIMER.get_or_init(start)
}

impl Timer {
    fn state(&self) -> MutexGuard<'_, Armed> {
        unpoisoned(self.state.lock())
    }
}

/// Arms `signal` to be looked at by `arming.at`. Without the thread (it could not be started),
/// the signal still fires by itself whenever it is read after its deadline.
pub(crate) fn arm(signal: Weak<LeaseRecord>, arming: Arming) {
    let Some(timer) = timer() else {
        return;
    };
    let mut armed = timer.state();
    let sooner = armed.sleeping_until.is_none_or(|until| arming.at < until);
    armed.signals.insert(arming, signal);
    if sooner {
        // Set here, so that armings before the thread runs do not each wake it again.
        armed.sleeping_until = Some(arming.at);
        timer.changed.notify_one();
    }
}

/// Takes an arming back: the hold ended, or was armed again sooner. The thread is not woken
/// for it; when it wakes for the deadline it had, it finds the next one.
pub(crate) fn disarm(arming: Arming) {
    if let Some(timer) = timer() {
        timer.state().signals.remove(&arming);
    }
}

/// Whether `arming` is still waiting for the thread.
#[cfg(test)]
pub(crate) fn is_armed(arming: Arming) -> bool {
    timer().is_some_and(|timer| timer.state().signals.contains_key(&arming))
}

fn start() -> Option<&'static Timer> {
    let timer: &'static Timer = Box::leak(Box::new(Timer {
        state: Mutex::default(),
        changed: Condvar::new(),
    }));
    match std::thread::Builder::new()
        .name("redlock-lost-timer".into())
        .spawn(move || run(timer))
    {
        Ok(_) => Some(timer),
        Err(err) => {
            tracing::warn!(error = %err, "cannot start the lost signals' timer thread; a lost signal's token is then cancelled only when the signal is read");
            None
        }
    }
}

fn run(timer: &Timer) {
    let mut armed = timer.state();
    loop {
        let now = Instant::now();
        match armed.signals.first_key_value().map(|(arming, _)| *arming) {
            None => {
                armed.sleeping_until = None;
                armed = unpoisoned(timer.changed.wait(armed));
            }
            Some(first) if first.at > now => {
                armed.sleeping_until = Some(first.at);
                armed = unpoisoned(timer.changed.wait_timeout(armed, first.at - now)).0;
            }
            Some(due) => {
                let Some(signal) = armed.signals.remove(&due) else {
                    continue;
                };
                // The signal is looked at without the timer's lock: firing it runs the token's
                // callbacks and wakes its waiters.
                drop(armed);
                if let Some(signal) = signal.upgrade() {
                    signal.look(due);
                }
                armed = timer.state();
            }
        }
    }
}
