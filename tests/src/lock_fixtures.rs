//! Small helpers shared by the lock scenarios: polling a condition with a deadline, and reading
//! a key's PTTL on every node.

use std::time::{Duration, Instant};

use crate::RedisCluster;

/// Polls `condition` every few milliseconds until it holds or `deadline` passes; returns
/// whether it held. For waiting on an effect in Redis that no event announces.
pub fn eventually(deadline: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let until = Instant::now() + deadline;
    loop {
        if condition() {
            return true;
        }
        if Instant::now() >= until {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The async form of [`eventually`], which yields to the runtime between polls.
pub async fn eventually_async(deadline: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let until = Instant::now() + deadline;
    loop {
        if condition() {
            return true;
        }
        if Instant::now() >= until {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The PTTL of `key` in milliseconds on every running node (`-2`: absent, `-1`: no expiry).
pub fn pttls(cluster: &RedisCluster, key: &str) -> Vec<i64> {
    cluster
        .nodes()
        .iter()
        .filter(|node| node.is_running())
        .map(|node| {
            redis::cmd("PTTL")
                .arg(key)
                .query(&mut node.connection())
                .unwrap_or_else(|e| panic!("PTTL on port {} failed: {e}", node.port()))
        })
        .collect()
}
