//! The count-down latch on a real master: it opens after its count of distinct count-downs and
//! never before, a count-down counts once however often it is retried or repeated (a killed and
//! restarted caller process included), a late count-down of an earlier round never counts in
//! the next, every key has an expiry, bad input is a typed error, and several masters are
//! refused.

use std::time::Duration;

use redlock_reentrant::{Error, InvalidArgument, LockClient, RCountDownLatch};
use redlock_testkit::{HolderProcess, RedisCluster};
use redlock_tests::{client, WATCHDOG};

/// Long enough for anything that is awaited to happen on a busy machine; never a bound that a
/// test measures.
const PATIENCE: Duration = Duration::from_secs(30);

fn latch(client: &LockClient, name: &str) -> RCountDownLatch {
    client.get_count_down_latch(name).expect("one master")
}

fn key(client: &LockClient, name: &str) -> String {
    client.redlock().config().key_for(name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn it_opens_after_its_count_of_distinct_count_downs_and_never_before() {
    let cluster = RedisCluster::start(1);
    let alice = client(&cluster, WATCHDOG).await;
    let bob = client(&cluster, WATCHDOG).await;
    let (a, b) = (latch(&alice, "loaded"), latch(&bob, "loaded"));
    assert_eq!(a.count().await.expect("count"), 0, "unset is open");
    assert!(a.wait(Duration::ZERO).await.expect("wait"), "unset is open");
    b.count_down()
        .await
        .expect("a count-down of an open latch does nothing");
    assert!(a.try_set_count(3).await.expect("arm"));
    assert!(!b.try_set_count(5).await.expect("arm"), "armed already");
    let waiters: Vec<_> = (0..3)
        .map(|_| {
            let b = b.clone();
            tokio::spawn(async move { b.wait(PATIENCE).await })
        })
        .collect();
    a.count_down_as("shard-1").await.expect("count down");
    b.count_down_as("shard-1").await.expect("the same id again");
    assert_eq!(
        a.count().await.expect("count"),
        2,
        "the same id counts once"
    );
    a.count_down().await.expect("count down");
    assert_eq!(b.count().await.expect("count"), 1);
    assert!(
        !b.wait(Duration::ZERO).await.expect("wait"),
        "two of three: not open"
    );
    assert!(waiters.iter().all(|waiter| !waiter.is_finished()));
    b.count_down_as("shard-2")
        .await
        .expect("the last count-down");
    for waiter in waiters {
        assert!(
            tokio::time::timeout(PATIENCE, waiter)
                .await
                .expect("every waiter returns")
                .expect("task")
                .expect("wait"),
            "opened"
        );
    }
    assert_eq!(
        cluster.count_keys(&format!("{}*", key(&alice, "loaded"))),
        0,
        "an open latch leaves nothing"
    );
    // Armed again: a new round, counted from nothing.
    assert!(a.try_set_count(1).await.expect("arm again"));
    assert_eq!(b.count().await.expect("count"), 1);
    assert!(b.delete().await.expect("delete"));
    assert!(
        a.wait(Duration::ZERO).await.expect("wait"),
        "deleted is open"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_and_restarted_count_down_caller_counts_once() {
    let cluster = RedisCluster::start(1);
    let alice = client(&cluster, WATCHDOG).await;
    let l = latch(&alice, "shards");
    assert!(l.try_set_count(2).await.expect("arm"));
    for _ in 0..2 {
        // The shard's process counts down, then dies; restarted, it counts down again.
        let shard = HolderProcess::spawn(
            env!("CARGO_BIN_EXE_holder"),
            "count-down:shard-7:shards",
            WATCHDOG,
            &cluster.urls(),
        );
        shard.kill();
    }
    assert_eq!(
        l.count().await.expect("count"),
        1,
        "shard 7 counted once, however often it reported"
    );
    l.count_down_as("shard-8").await.expect("the other shard");
    assert!(l.wait(PATIENCE).await.expect("wait"), "opened");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_count_down_of_an_earlier_round_never_counts_in_the_next() {
    let cluster = RedisCluster::start(1);
    let alice = client(&cluster, WATCHDOG).await;
    let l = latch(&alice, "rounds");
    assert!(l.try_set_count(2).await.expect("arm"));
    let hash = format!("{}:latch", key(&alice, "rounds"));
    let mut redis = cluster.node(0).connection();
    let first_round: String = redis::cmd("HGET")
        .arg(&hash)
        .arg("gen")
        .query(&mut redis)
        .expect("the round's generation");
    l.delete().await.expect("the round ends");
    assert!(l.try_set_count(2).await.expect("armed again"));
    // A count-down of the first round, arriving now (as lua/latch.lua receives it).
    let script = redis::Script::new(concat!(
        include_str!("../../../redlock-reentrant/src/lua/announce.lua"),
        include_str!("../../../redlock-reentrant/src/lua/latch.lua")
    ));
    let (done, ..): (i64, i64, i64, String) = script
        .key(&hash)
        .key(format!("{hash}-done"))
        .arg("count-down")
        .arg("late")
        .arg(&first_round)
        .arg("channel")
        .arg("message")
        .arg(0)
        .invoke(&mut redis)
        .expect("the script");
    assert_eq!(done, 0, "not counted");
    assert_eq!(
        l.count().await.expect("count"),
        2,
        "the new round is untouched"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_key_expires_and_bad_input_is_a_typed_error() {
    let cluster = RedisCluster::start(1);
    let alice = client(&cluster, WATCHDOG).await;
    let l = latch(&alice, "ttl");
    let ttl = Duration::from_secs(60);
    assert!(l.try_set_count_with_ttl(3, ttl).await.expect("arm"));
    l.count_down().await.expect("count down");
    let mut redis = cluster.node(0).connection();
    for suffix in ["latch", "latch-done"] {
        let pttl: i64 = redis::cmd("PTTL")
            .arg(format!("{}:{suffix}", key(&alice, "ttl")))
            .query(&mut redis)
            .expect("pttl");
        assert!(
            pttl > 0 && pttl <= 60_000,
            "{suffix} expires within its ttl: {pttl}"
        );
    }
    let zero = l.try_set_count(0).await;
    assert!(
        matches!(
            zero,
            Err(Error::InvalidArgument(InvalidArgument::ZeroCount { .. }))
        ),
        "{zero:?}"
    );
    let no_ttl = latch(&alice, "other")
        .try_set_count_with_ttl(1, Duration::ZERO)
        .await;
    assert!(
        matches!(
            no_ttl,
            Err(Error::InvalidArgument(InvalidArgument::ZeroLease))
        ),
        "{no_ttl:?}"
    );
    let _: () = redis::cmd("SET")
        .arg(format!("{}:latch", key(&alice, "wrong")))
        .arg("x")
        .query(&mut redis)
        .expect("set");
    let wrong = latch(&alice, "wrong").count().await;
    assert!(matches!(wrong, Err(Error::WrongType { .. })), "{wrong:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_several_masters_a_latch_is_refused_before_anything_is_sent() {
    crate::refused_on_three_masters(|client| client.get_count_down_latch("ready")).await;
}
