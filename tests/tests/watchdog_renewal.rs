//! The watchdog in one process: nested holds renewed as one lock and never after unlock,
//! 10,000 holds renewed in batches on time, LOST before the validity ends when a majority stops
//! answering, renewal through a dead minority, and the maximum hold time.
//!
//! A short timeout (3 s, renewed every 1 s) keeps the suite fast; the ratio is the default's
//! (30 s, every 10 s).

use std::time::{Duration, Instant};

use futures_util::stream::{self, StreamExt};
use redlock_reentrant::{Error, LockClient, LostReason};
use redlock_testkit::{pttls, Monitor, RedisCluster};
use redlock_tests::{client_with_timeouts, rounds_pass};

const TIMEOUT: Duration = Duration::from_secs(3);
/// A thirtieth of the lease: tests run side by side on two cores, and 1 % of 3 s (30 ms) would
/// let a busy neighbour fail renewals that production's 300 ms (1 % of 30 s) would not.
const NODE_TIMEOUT: Duration = Duration::from_millis(100);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nested_hold_is_renewed_as_one_lock_and_never_after_unlock() {
    let cluster = RedisCluster::start(3);
    let client = client_with_timeouts(&cluster, TIMEOUT, NODE_TIMEOUT).await;
    let monitor = Monitor::start(cluster.node(0).port()).expect("MONITOR");

    let lock = client.get_lock("renewed");
    lock.lock().await.expect("lock");
    lock.lock().await.expect("nested");
    // Another hold keeps the rounds going after `renewed` is released, so the test can wait for
    // rounds (events) rather than sleep, and prove MONITOR sees renewals at all.
    let other = client.get_lock("other");
    other.lock().await.expect("other");
    assert_eq!(
        client.watchdog().registered(),
        2,
        "one entry per hold, not per nesting"
    );

    rounds_pass(client.watchdog(), 2).await;
    for pttl in pttls(&cluster, "redlock:renewed") {
        assert!(pttl > 1_500, "renewed: pttl {pttl}");
    }
    let renewals_while_held = monitor.count_after(0, "\"redlock:renewed\"");
    assert!(
        renewals_while_held >= 4,
        "MONITOR sees the lock's commands: {renewals_while_held}"
    );

    lock.unlock().await.expect("unlock");
    lock.unlock().await.expect("unlock");
    assert_eq!(client.watchdog().registered(), 1);
    assert_eq!(cluster.count_keys("redlock:renewed"), 0);
    let mark = monitor.lines().len();
    rounds_pass(client.watchdog(), 3).await;

    assert!(
        monitor.count_after(mark, "\"redlock:other\"") >= 3,
        "renewals of the other lock are seen"
    );
    let late: Vec<String> = monitor
        .lines()
        .into_iter()
        .skip(mark)
        .filter(|line| line.contains("\"redlock:renewed\""))
        .collect();
    assert!(
        late.is_empty(),
        "commands for the released lock after unlock: {late:#?}"
    );
    assert_eq!(cluster.count_keys("redlock:renewed"), 0, "never recreated");
    other.unlock().await.expect("unlock");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_holds_are_renewed_in_batches_on_time() {
    const HOLDS: usize = 10_000;
    let cluster = RedisCluster::start(3);
    let client = client_with_timeouts(&cluster, TIMEOUT, NODE_TIMEOUT).await;
    let batch = client.watchdog().config().batch_size;

    let started = Instant::now();
    let locks: Vec<_> = (0..HOLDS)
        .map(|i| client.get_lock(format!("scale:{i}")))
        .collect();
    stream::iter(&locks)
        .for_each_concurrent(64, |lock| async move { lock.lock().await.expect("lock") })
        .await;
    eprintln!("acquired {HOLDS} locks in {:?}", started.elapsed());
    assert_eq!(client.watchdog().registered(), HOLDS);

    let before = client.watchdog().stats();
    let mut lowest = i64::MAX;
    let target = before.rounds + 3;
    let deadline = Instant::now() + TIMEOUT * 5;
    let lowest_pttl = redis::Script::new(
        "local low = -1 for _, key in ipairs(redis.call('keys', ARGV[1])) do \
         local t = redis.call('pttl', key) if low < 0 or t < low then low = t end end return low",
    );
    while client.watchdog().stats().rounds < target {
        assert!(Instant::now() < deadline, "rounds stalled");
        for node in cluster.nodes() {
            let low: i64 = lowest_pttl
                .arg("redlock:scale:*")
                .invoke(&mut node.connection())
                .expect("lowest PTTL");
            lowest = lowest.min(low);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let after = client.watchdog().stats();
    let rounds = after.rounds - before.rounds;
    let calls = after.calls_per_node - before.calls_per_node;
    eprintln!(
        "{rounds} rounds, {calls} calls per node ({} per round, batch {batch}), lowest PTTL {lowest} ms of {} ms",
        calls / rounds,
        TIMEOUT.as_millis()
    );
    assert_eq!(
        calls,
        rounds * HOLDS.div_ceil(batch) as u64,
        "ceil(holds / batch) calls per node per round"
    );
    assert_eq!(after.lost, 0);
    // Renewed every third of the timeout, a key's PTTL dips to two thirds just before its next
    // renewal, less how far into the round its batch lands: allow a quarter interval for that.
    let two_thirds = TIMEOUT.as_millis() as i64 * 2 / 3;
    let slack = (TIMEOUT / 12).as_millis() as i64;
    assert!(
        lowest > two_thirds - slack,
        "a PTTL fell to {lowest} ms (two thirds: {two_thirds} ms): renewals came late"
    );
    client.shutdown().await;
    assert_eq!(
        cluster.count_keys("redlock:scale:*"),
        0,
        "shutdown released every hold"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_fires_before_the_validity_ends_when_a_majority_stops_answering() {
    let cluster = RedisCluster::start(5);
    let client = client_with_timeouts(&cluster, TIMEOUT, NODE_TIMEOUT).await;
    let guard = client
        .get_lock("partitioned")
        .acquire()
        .await
        .expect("held");
    rounds_pass(client.watchdog(), 1).await;

    for node in 0..3 {
        cluster.stop(node);
    }
    let stopped = Instant::now();
    let reason = tokio::time::timeout(TIMEOUT * 2, guard.lost())
        .await
        .expect("LOST fires");
    let told_after = stopped.elapsed();
    let validity = TIMEOUT - client.redlock().config().drift_for(TIMEOUT);
    eprintln!("told after {told_after:?}; the last confirmed validity ended within {validity:?}");
    assert_eq!(reason, LostReason::QuorumLost);
    assert!(
        told_after < validity,
        "told after the validity ran out: {told_after:?}"
    );
    assert!(matches!(guard.unlock().await, Err(Error::LockLost { .. })));

    for node in 0..3 {
        cluster.resume(node);
    }
    let next = client.get_lock("partitioned");
    assert!(
        next.try_lock(TIMEOUT * 2, None).await.expect("try_lock"),
        "a new acquisition works once the nodes are back"
    );
    next.unlock().await.expect("unlock");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewal_goes_on_through_a_dead_minority() {
    let cluster = RedisCluster::start(5);
    let client = client_with_timeouts(&cluster, TIMEOUT, NODE_TIMEOUT).await;
    let guard = client.get_lock("degraded").acquire().await.expect("held");
    cluster.kill(0);
    cluster.kill(4);
    let renewed = client.watchdog().stats().renewed;
    rounds_pass(client.watchdog(), 3).await;
    let confirmed = client.watchdog().stats().renewed - renewed;
    eprintln!("{confirmed} renewals confirmed by the 3 live masters in 3 rounds");
    assert!(
        confirmed >= 1,
        "renewals are confirmed by the living majority"
    );
    assert!(!guard.is_lost());
    for pttl in pttls(&cluster, "redlock:degraded") {
        assert!(pttl > 1_500, "pttl {pttl}");
    }
    guard.unlock().await.expect("unlock");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_maximum_hold_time_stops_renewal_and_tells_the_holder() {
    let cluster = RedisCluster::start(3);
    let capped = LockClient::builder()
        .nodes(cluster.urls())
        .watchdog_timeout(TIMEOUT)
        .node_timeout(NODE_TIMEOUT)
        .max_hold(Duration::from_millis(1_500))
        .build()
        .await
        .expect("client");
    let other = client_with_timeouts(&cluster, TIMEOUT, NODE_TIMEOUT).await;
    let guard = capped.get_lock("stuck").acquire().await.expect("held");
    let taken = Instant::now();

    let reason = tokio::time::timeout(TIMEOUT * 3, guard.lost())
        .await
        .expect("LOST fires");
    assert_eq!(reason, LostReason::MaxHoldReached);
    let held_for = taken.elapsed();
    eprintln!("told after {held_for:?} (cap 1.5 s, lease 3 s)");
    assert!(
        held_for >= Duration::from_millis(1_500),
        "told before the cap: {held_for:?}"
    );
    let next = other.get_lock("stuck");
    assert!(
        next.try_lock(TIMEOUT * 2, None).await.expect("try_lock"),
        "the lock frees"
    );
    next.unlock().await.expect("unlock");
}
