//! A lock that was granted: what it is, who holds it, and until when it can be trusted.

use std::time::{Duration, Instant};

use crate::OwnerToken;

/// A granted lock, as returned by [`Redlock::acquire`](crate::Redlock::acquire).
///
/// Its validity is the part of the lease that remains after the time spent acquiring and the
/// clock-drift allowance: the holder may act on the lock until [`Lease::valid_until`].
/// Dropping a `Lease` does not release it; the lock then expires with its lease.
#[must_use = "a lease that is dropped without release stays held until it expires"]
#[derive(Debug, Clone)]
pub struct Lease {
    pub(crate) name: String,
    pub(crate) key: String,
    pub(crate) owner: OwnerToken,
    pub(crate) lease: Duration,
    pub(crate) validity: Duration,
    pub(crate) valid_until: Instant,
    pub(crate) granted_by: usize,
}

impl Lease {
    /// The lock name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The Redis key (prefix + name).
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The owner token written to the nodes.
    pub fn owner(&self) -> &OwnerToken {
        &self.owner
    }

    /// The lease requested from Redis.
    pub fn lease(&self) -> Duration {
        self.lease
    }

    /// The validity when the lock was granted: lease - elapsed - drift.
    pub fn validity(&self) -> Duration {
        self.validity
    }

    /// The instant after which the holder must no longer rely on the lock.
    pub fn valid_until(&self) -> Instant {
        self.valid_until
    }

    /// The validity left now (zero once it has run out).
    pub fn remaining_validity(&self) -> Duration {
        self.valid_until.saturating_duration_since(Instant::now())
    }

    /// Whether some validity is left now.
    pub fn is_valid(&self) -> bool {
        Instant::now() < self.valid_until
    }

    /// How many nodes had granted the lock when a majority decided it (at least a majority).
    /// Nodes whose replies were still out may grant it a moment later: they hold it too, and
    /// the release frees it there as well.
    pub fn granted_by(&self) -> usize {
        self.granted_by
    }
}
