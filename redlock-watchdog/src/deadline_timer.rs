//! One thread that fires lost signals at their deadlines, whatever happens meanwhile to the
//! client, the watchdog's renewal task or the tokio runtime: a token handed to work that must
//! stop when the lock goes is cancelled on the clock, not when some task gets round to it.
//!
//! A signal is armed with its deadline; the thread sleeps until the earliest one, then looks at
//! that signal again: past its (possibly moved) deadline, it fires; moved later, it is armed
//! again at the new one; cleared, it is forgotten. Renewals that move a deadline later cost
//! nothing here until the old one comes. A signal nobody holds any more is forgotten too.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::{Condvar, Mutex, OnceLock, Weak};
use std::time::Instant;

use crate::record::LeaseRecord;
use redlock_core::lock_kind::unpoisoned;

/// The process's timer: the armed signals by deadline, and the thread's wake-up call.
struct Timer {
    armed: Mutex<BinaryHeap<Reverse<Armed>>>,
    changed: Condvar,
}

/// One signal waiting for `at`.
struct Armed {
    at: Instant,
    signal: Weak<LeaseRecord>,
}

impl PartialEq for Armed {
    fn eq(&self, other: &Self) -> bool {
        self.at == other.at
    }
}
impl Eq for Armed {}
impl PartialOrd for Armed {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Armed {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.at.cmp(&other.at)
    }
}

static TIMER: OnceLock<Option<&'static Timer>> = OnceLock::new();

/// Arms `signal` to be looked at by `at`. Without the thread (it could not be started), the
/// signal still fires by itself whenever it is read after its deadline.
pub(crate) fn arm(signal: Weak<LeaseRecord>, at: Instant) {
    let Some(timer) = *TIMER.get_or_init(start) else {
        return;
    };
    let mut armed = unpoisoned(timer.armed.lock());
    let sooner = armed.peek().is_none_or(|Reverse(first)| at < first.at);
    armed.push(Reverse(Armed { at, signal }));
    if sooner {
        timer.changed.notify_one();
    }
}

fn start() -> Option<&'static Timer> {
    let timer: &'static Timer = Box::leak(Box::new(Timer {
        armed: Mutex::new(BinaryHeap::new()),
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
    let mut armed = unpoisoned(timer.armed.lock());
    loop {
        let now = Instant::now();
        match armed.peek() {
            None => {
                armed = unpoisoned(timer.changed.wait(armed));
            }
            Some(Reverse(first)) if first.at > now => {
                let wait = first.at - now;
                armed = unpoisoned(timer.changed.wait_timeout(armed, wait)).0;
            }
            Some(_) => {
                let Some(Reverse(due)) = armed.pop() else {
                    continue;
                };
                // The signal is looked at without the timer's lock: firing it runs the token's
                // callbacks and wakes its waiters.
                drop(armed);
                if let Some(signal) = due.signal.upgrade() {
                    signal.look(due.at);
                }
                armed = unpoisoned(timer.armed.lock());
            }
        }
    }
}
