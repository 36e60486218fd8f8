//! The benchmark checks itself before it measures: its percentiles, its reading of Lua
//! sources, and, with no lock at all, that the overlap checker does catch overlaps.

use std::time::Duration;

use tokio::runtime::Runtime;

use crate::contended::contend;
use crate::locker::Locker;
use crate::mode::Sizes;
use crate::redis_stats::lua_calls;
use crate::results::Results;
use crate::stats::{median, quantile};

pub(crate) fn run(runtime: &Runtime, sizes: &Sizes, results: &mut Results) {
    let ms: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
    if quantile(&ms, 0.5) != Duration::from_millis(50)
        || quantile(&ms, 0.99) != Duration::from_millis(99)
        || quantile(&ms, 1.0) != Duration::from_millis(100)
        || median(&[3.0, 1.0, 2.0]) != 2.0
    {
        results.problem("self-test: percentiles are wrong");
    }
    let names = lua_calls("redis.call('GET', KEYS[1]) redis.pcall( \"hexists\", k)");
    if names.into_iter().collect::<Vec<_>>() != ["get", "hexists"] {
        results.problem("self-test: Lua command names are misread");
    }
    let broken = Sizes {
        contended_for: Duration::from_millis(100),
        ..*sizes
    };
    let outcome = runtime.block_on(contend(&Locker::NoLock, "no-lock", 4, &broken));
    if outcome.overlaps == 0 {
        results.problem("self-test: with no lock at all, the overlap checker saw no overlap");
    } else {
        eprintln!(
            "self-test: with no lock, the overlap checker caught {} overlaps in {} acquisitions",
            outcome.overlaps,
            outcome.acquisitions()
        );
    }
}
