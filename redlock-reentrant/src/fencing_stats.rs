//! How often a new hold's fencing token needed the write-back round trip.

use std::sync::atomic::{AtomicU64, Ordering};

/// A snapshot of a client's fencing counters since it was built.
///
/// On more than one master, a new hold's token is the largest candidate of the nodes that
/// granted it, written back to them unless a majority already gave it. Nodes asked for a
/// candidate above the client's last token give the same one, so in steady state the write-back
/// is the exception; concurrent new holds on other locks can still leave the nodes' counters
/// apart for a while.
///
/// # Examples
///
/// ```no_run
/// # async fn run(client: redlock_reentrant::LockClient) {
/// let stats = client.fencing_stats();
/// println!("{} of {} new holds needed a write-back", stats.written_back, stats.new_holds);
/// # }
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct FencingStats {
    /// New holds acquired, each with its token (nested acquisitions keep their hold's).
    pub new_holds: u64,
    /// Of those, the ones whose token was written back before the hold was reported.
    pub written_back: u64,
}

#[derive(Debug, Default)]
pub(crate) struct FencingCounters {
    new_holds: AtomicU64,
    written_back: AtomicU64,
}

impl FencingCounters {
    pub(crate) fn new_hold(&self, written_back: bool) {
        self.new_holds.fetch_add(1, Ordering::Relaxed);
        if written_back {
            self.written_back.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub(crate) fn snapshot(&self) -> FencingStats {
        FencingStats {
            new_holds: self.new_holds.load(Ordering::Relaxed),
            written_back: self.written_back.load(Ordering::Relaxed),
        }
    }
}
