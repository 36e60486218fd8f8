//! Heap allocations of this process, counted by its global allocator: what a lock + unlock
//! pair allocates, every thread included (the runtime's, the connections' driver tasks).

use std::alloc::System;

use stats_alloc::{StatsAlloc, INSTRUMENTED_SYSTEM};

/// The system allocator, counting.
#[global_allocator]
static ALLOCATOR: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Allocations so far (a reallocation counts as one).
pub(crate) fn allocations() -> u64 {
    let stats = ALLOCATOR.stats();
    u64::try_from(stats.allocations + stats.reallocations).unwrap_or(u64::MAX)
}
