//! redlock sends what is still on its way before it exits: a release queued behind a master's
//! reconnection goes out once the master is back (within 2 s), rather than being dropped with
//! the process and leaving that master locked until the lease ends.

mod support;

use std::time::Duration;

use redlock_testkit::{eventually, Fault, FaultProxy};
use support::*;

/// The lock's key on master `node` exists.
fn key_on(masters: &redlock_testkit::RedisCluster, node: usize, key: &str) -> bool {
    redis::cmd("EXISTS")
        .arg(key)
        .query::<i64>(&mut masters.node(node).connection())
        .expect("EXISTS")
        == 1
}

/// The lock's PTTL on master `node`, in milliseconds.
fn pttl_on(masters: &redlock_testkit::RedisCluster, node: usize, key: &str) -> i64 {
    redis::cmd("PTTL")
        .arg(key)
        .query(&mut masters.node(node).connection())
        .expect("PTTL")
}

#[test]
fn a_release_queued_behind_a_reconnection_is_sent_before_redlock_exits() {
    let (masters, urls) = masters(3);
    // The third master is reached through a proxy, on a runtime of the test's own.
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let proxy = runtime
        .block_on(FaultProxy::start(
            ([127, 0, 0, 1], masters.node(2).port()).into(),
        ))
        .expect("proxy");
    let nodes = vec![urls[0].clone(), urls[1].clone(), proxy.url()];
    let scratch = Scratch::new();
    // Renewed every 3 s, so a renewal soon finds the connection cut below; a reconnection
    // held up is waited for far longer than the test needs.
    let mut holder = Running::start(
        redlock(&nodes)
            .env("REDLOCK_CONNECT_TIMEOUT", "10s")
            .args(["run", "flushed", "--watchdog-timeout", "9s", "--"])
            .args(job_until(&scratch.path("out"), &scratch.path("go"))),
    );
    scratch.await_file("out");
    let key = "redlock:flushed";
    // Decided by the first two to answer: the third master's grant may land a moment later.
    assert!(
        eventually(Duration::from_secs(10), || key_on(&masters, 2, key)),
        "the third master holds it too"
    );

    // Its connection is cut, and reconnecting is held up (a partition): what redlock sends
    // that master from now on waits in its queue until the partition heals.
    proxy.set(Fault::Reset);
    assert!(
        eventually(Duration::from_secs(10), || proxy.open_connections() == 0),
        "the connection was cut"
    );
    proxy.set(Fault::Blackhole);
    // A renewal round (seen on the first master) finds the cut connection and drops it.
    let before = pttl_on(&masters, 0, key);
    assert!(
        eventually(Duration::from_secs(20), || pttl_on(&masters, 0, key)
            > before),
        "a renewal round ran"
    );

    // The job ends: the release is decided by the first two masters, and the third one's waits
    // for the reconnection, which the partition healing lets through.
    scratch.touch("go");
    assert!(
        eventually(Duration::from_secs(10), || !key_on(&masters, 0, key)
            && !key_on(&masters, 1, key)),
        "released on a majority"
    );
    // Still waiting for the third master (2 s at most): the partition heals in that window.
    assert!(
        !holder.has_exited(),
        "redlock exited before the partition healed: {}",
        holder.stderr()
    );
    proxy.set(Fault::Pass);
    holder.wait().assert_code(0);
    // Exited: the release reached the third master before that (dropped with the process, it
    // would leave the key there for seconds more of its 9 s lease).
    assert!(
        eventually(Duration::from_millis(500), || !key_on(&masters, 2, key)),
        "the third master keeps the lock after redlock exited"
    );
}
