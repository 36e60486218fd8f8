//! Small helpers the scenarios share: polling a condition with a deadline, reading a key's PTTL
//! or hash on every node, an error's whole chain on one line, and a random generator whose seed
//! a failure can be replayed with.

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

/// Another owner's hold of the lock hash `key` on node `node`, as its grant leaves it: the
/// field `owner` with a count of 1, for a minute (longer than any scenario runs).
///
/// # Panics
///
/// If the node does not answer.
pub fn rival_hold(cluster: &RedisCluster, node: usize, key: &str, owner: &str) {
    redis::pipe()
        .hset(key, owner, 1)
        .pexpire(key, 60_000)
        .query::<()>(&mut cluster.node(node).connection())
        .expect("seed the rival's hold");
}

/// The hash at `key` (a reentrant lock: hold field, its owner and number -> hold count) on every running node, in
/// whatever map type the caller wants it as.
pub fn hashes<T: redis::FromRedisValue>(cluster: &RedisCluster, key: &str) -> Vec<T> {
    cluster
        .nodes()
        .iter()
        .filter(|node| node.is_running())
        .map(|node| {
            redis::cmd("HGETALL")
                .arg(key)
                .query(&mut node.connection())
                .unwrap_or_else(|e| panic!("HGETALL on port {} failed: {e}", node.port()))
        })
        .collect()
}

/// An error, its `Debug` form and every cause below it, on one line: what a user could ever
/// see of it, for checks that a secret appears nowhere.
pub fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut chain = format!("{err} | {err:?}");
    let mut source = err.source();
    while let Some(cause) = source {
        chain.push_str(&format!(" | {cause}"));
        source = cause.source();
    }
    chain
}

/// A random generator seeded from `TEST_SEED` if set, else at random; the seed is printed so a
/// failing run can be replayed with `TEST_SEED=<seed>`.
pub fn seeded_rng() -> fastrand::Rng {
    let seed = test_seed();
    eprintln!("TEST_SEED={seed}");
    fastrand::Rng::with_seed(seed)
}

/// The seed in `TEST_SEED` if set, else a random one.
pub fn test_seed() -> u64 {
    std::env::var("TEST_SEED")
        .ok()
        .and_then(|seed| seed.parse().ok())
        .unwrap_or_else(|| fastrand::u64(..))
}
