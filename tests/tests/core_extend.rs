//! `Redlock::extend` never shortens a lease: whatever its outcome (granted, refused, timed out,
//! or its future dropped with requests still queued on the masters), the holder's old validity
//! stays true on every master.
//!
//! Each test waits, through `MONITOR`, until the extend's requests have run on the masters it
//! checks, so that the check reads what they left and not what they had not yet done.

use std::time::Duration;

use redlock_core::{Error, Lease, Redlock, RedlockConfig};
use redlock_testkit::{eventually_async, pttls, Monitor, RedisCluster};
use redlock_tests::SlowLinks;

/// The lease the holder takes.
const LEASE: Duration = Duration::from_secs(10);
/// The shorter lease an extend asks for: a master that applied it as a bare `PEXPIRE` would
/// keep the key for at most this long.
const SHORT: Duration = Duration::from_secs(2);
/// Room for a busy machine, a thirtieth of the lease.
const NODE_TIMEOUT: Duration = Duration::from_millis(300);
/// How late a slow link delivers each chunk.
const DELAY: Duration = Duration::from_secs(1);

const KEY: &str = "redlock:report";

fn redlock(cluster: &RedisCluster) -> Redlock {
    Redlock::new(RedlockConfig {
        node_timeout: Some(NODE_TIMEOUT),
        ..RedlockConfig::with_nodes(cluster.urls())
    })
    .expect("valid config")
}

/// Monitors of the masters `nodes`, started after the acquisition: every command they record
/// with the short lease's milliseconds for our key is the extend's.
fn monitors(cluster: &RedisCluster, nodes: &[usize]) -> Vec<Monitor> {
    nodes
        .iter()
        .map(|&i| Monitor::start(cluster.node(i).port()).expect("MONITOR"))
        .collect()
}

/// Waits until at least `at_least` of the monitored masters have run the extend (bounded by
/// half the lease), so that the check after it reads what they left.
async fn extend_ran_on(monitors: &[Monitor], at_least: usize) {
    let short = format!("\"{}\"", SHORT.as_millis());
    let ran = || {
        monitors
            .iter()
            .filter(|monitor| {
                monitor
                    .lines()
                    .iter()
                    .any(|line| line.contains(KEY) && line.contains(&short))
            })
            .count()
            >= at_least
    };
    assert!(
        eventually_async(LEASE / 2, ran).await,
        "the extend's requests ran on fewer than {at_least} of the monitored masters"
    );
}

/// Every master still keeps the key for longer than the short lease, and the holder's lease is
/// still valid: the extend shortened nothing under it.
fn nothing_shortened(cluster: &RedisCluster, lease: &Lease) {
    let pttls = pttls(cluster, KEY);
    let short = i64::try_from(SHORT.as_millis()).expect("millis");
    assert!(
        pttls.iter().all(|pttl| *pttl > short),
        "an extend shortened the lease on a master: {pttls:?} (the short lease: {short} ms)"
    );
    assert!(lease.is_valid(), "the test outlived the holder's lease");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_extend_does_not_shorten_the_lease_it_leaves_the_holder_relying_on() {
    let cluster = RedisCluster::start(3);
    let holder = redlock(&cluster);
    let rival = redlock(&cluster);
    let lease = holder.acquire("report", LEASE).await.expect("acquire");
    let paused = monitors(&cluster, &[1, 2]);

    cluster.stop(1);
    cluster.stop(2);
    let extended = holder.extend(&lease, SHORT).await;
    assert!(
        matches!(extended, Err(Error::NoQuorum { .. })),
        "with two of three masters stopped, the extend is undecided: {extended:?}"
    );
    cluster.resume(1);
    cluster.resume(2);
    // A request queued on a stopped master runs once it resumes, after the extend failed.
    extend_ran_on(&paused, 1).await;

    nothing_shortened(&cluster, &lease);
    let taken = rival.acquire_once("report", LEASE).await;
    assert!(
        matches!(taken, Err(Error::Contended { .. })),
        "a rival got in while the holder's lease is valid: {taken:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_extend_does_not_shorten_the_lease() {
    let cluster = RedisCluster::start(3);
    // Every link delays each chunk by a second: the extend's requests are on their way when
    // its future is dropped, and reach the masters after that.
    let links = SlowLinks::start(&cluster, 3).await;
    let holder = Redlock::new(RedlockConfig {
        node_timeout: Some(SHORT / 2),
        ..RedlockConfig::with_nodes(links.urls())
    })
    .expect("valid config");
    let lease = holder.acquire("report", LEASE).await.expect("acquire");
    let all = monitors(&cluster, &[0, 1, 2]);
    links.slow_down(DELAY);

    let dropped = tokio::time::timeout(DELAY / 4, holder.extend(&lease, SHORT)).await;
    assert!(dropped.is_err(), "dropped before a reply: {dropped:?}");
    extend_ran_on(&all, 3).await;

    nothing_shortened(&cluster, &lease);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_granted_shorter_extend_keeps_the_longer_validity() {
    let cluster = RedisCluster::start(3);
    let holder = redlock(&cluster);
    let lease = holder.acquire("report", LEASE).await.expect("acquire");
    let all = monitors(&cluster, &[0, 1, 2]);

    let extended = holder.extend(&lease, SHORT).await.expect("extend");
    assert_eq!(
        (extended.valid_until(), extended.lease()),
        (lease.valid_until(), lease.lease()),
        "the longer lease stands, and the returned lease says so"
    );
    extend_ran_on(&all, 3).await;
    nothing_shortened(&cluster, &extended);

    // A longer extend still lengthens it everywhere.
    let longer = holder.extend(&lease, LEASE * 2).await.expect("extend");
    assert!(longer.valid_until() > lease.valid_until());
    let lengthened = || {
        pttls(&cluster, KEY)
            .iter()
            .all(|pttl| *pttl > i64::try_from(LEASE.as_millis()).expect("millis"))
    };
    assert!(
        eventually_async(LEASE / 2, lengthened).await,
        "a longer extend reached every master: {:?}",
        pttls(&cluster, KEY)
    );
}
