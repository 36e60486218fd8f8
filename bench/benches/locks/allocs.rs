//! Heap allocations of this process, counted by its global allocator when the benchmark is
//! built with `--features alloc-counts`: what a lock + unlock pair allocates, every thread
//! included (the runtime's, the connections' driver tasks). Off by default: the counters are
//! shared by every thread, and would tax every allocation of the timed workloads.

/// The system allocator, counting.
#[cfg(feature = "alloc-counts")]
#[global_allocator]
static ALLOCATOR: &stats_alloc::StatsAlloc<std::alloc::System> = &stats_alloc::INSTRUMENTED_SYSTEM;

/// Allocations so far (a reallocation counts as one); `None` unless counted.
pub(crate) fn allocations() -> Option<u64> {
    #[cfg(feature = "alloc-counts")]
    {
        let stats = ALLOCATOR.stats();
        Some(u64::try_from(stats.allocations + stats.reallocations).unwrap_or(u64::MAX))
    }
    #[cfg(not(feature = "alloc-counts"))]
    None
}
