//! The count-down latch whose count its client fixes, on several real masters: a count-down is
//! an id in a set on every master, done once a majority has it, and readers count the union of
//! a majority's sets. It opens after its count of distinct count-downs and never before, with a
//! master stopped while some count down and another while readers look; a killed count-down
//! process counts once; the count is every client's; bad input is a typed error.

use std::time::Duration;

use redlock_reentrant::{Error, InvalidArgument, LockClient, RCountDownLatch};
use redlock_testkit::{HolderProcess, RedisCluster};
use redlock_tests::{client, WATCHDOG};

/// Long enough for anything that is awaited to happen on a busy machine; never a bound that a
/// test measures.
const PATIENCE: Duration = Duration::from_secs(30);

fn fixed(client: &LockClient, name: &str, count: u32) -> RCountDownLatch {
    client
        .get_quorum_count_down_latch(name, count)
        .expect("a count of at least one")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_three_masters_it_opens_after_its_count_of_distinct_count_downs_and_never_before() {
    let cluster = RedisCluster::start(3);
    let alice = client(&cluster, WATCHDOG).await;
    let bob = client(&cluster, WATCHDOG).await;
    let name = "loaded";
    let (a, b) = (fixed(&alice, name, 3), fixed(&bob, name, 3));
    assert_eq!(a.fixed_count(), Some(3));
    assert_eq!(a.count().await.expect("count"), 3, "armed from the start");
    assert!(!a.wait(Duration::ZERO).await.expect("wait"));
    // A bound, never measured: it spans two process starts and a stopped master's timeouts.
    let waiter = tokio::spawn({
        let b = b.clone();
        async move { b.wait(PATIENCE * 4).await }
    });

    a.count_down_as("shard-1").await.expect("count down");
    b.count_down_as("shard-1").await.expect("the same id again");
    a.count_down_as("shard-1").await.expect("and again");
    assert_eq!(b.count().await.expect("count"), 2, "one id, counted once");
    // A count-down caller process killed after it counted down, started again: once.
    for _ in 0..2 {
        let shard = HolderProcess::spawn(
            env!("CARGO_BIN_EXE_holder"),
            &format!("quorum-count-down:shard-2:3:{name}"),
            WATCHDOG,
            &cluster.urls(),
        );
        shard.kill();
    }
    assert_eq!(a.count().await.expect("count"), 1);
    assert!(!waiter.is_finished(), "two of three: not open");

    // Master 0 misses shard-1 (as a master cut off when it was counted down would), and
    // master 1 stops: the majority read (0 and 2) still counts it, from master 2. The last
    // count-down, with master 1 stopped, is done on the other two.
    let done_key = format!("{}:latch-done", alice.redlock().config().key_for(name));
    let ids_on = |node: usize| -> Vec<String> {
        let mut ids: Vec<String> = redis::cmd("SMEMBERS")
            .arg(&done_key)
            .query(&mut cluster.node(node).connection())
            .expect("SMEMBERS");
        ids.sort();
        ids
    };
    let _: i64 = redis::cmd("SREM")
        .arg(&done_key)
        .arg("shard-1")
        .query(&mut cluster.node(0).connection())
        .expect("SREM");
    assert_eq!(ids_on(0), ["shard-2"]);
    cluster.stop(1);
    assert_eq!(
        b.count().await.expect("count"),
        1,
        "the union of a majority"
    );
    // The last count-down brings what the majority holds to master 0 too, and opens it.
    b.count_down_as("shard-3").await.expect("the last one");
    assert_eq!(ids_on(0), ["shard-1", "shard-2", "shard-3"]);
    assert!(
        waiter.await.expect("waiter").expect("wait"),
        "the waiter saw it open"
    );
    assert_eq!(a.count().await.expect("count"), 0);
    a.count_down_as("shard-4")
        .await
        .expect("an extra count-down");
    assert_eq!(a.count().await.expect("count"), 0, "open stays open");
    cluster.resume(1);

    // Deleted on every master (clean-up after its one round): every key gone.
    assert!(a.delete().await.expect("delete"));
    assert_eq!(b.count().await.expect("count"), 3);
    let key = alice.redlock().config().key_for(name);
    // (Master 1, which stopped answering lately, is sent the deletion without being awaited.)
    let pattern = format!("{key}:latch*");
    assert!(
        redlock_testkit::eventually_async(PATIENCE, || cluster.count_keys(&pattern) == 0).await,
        "the latch's keys deleted on every master"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn its_keys_expire_and_bad_input_is_a_typed_error() {
    let cluster = RedisCluster::start(3);
    let alice = client(&cluster, WATCHDOG).await;
    let bob = client(&cluster, WATCHDOG).await;
    let zero = alice.get_quorum_count_down_latch("x", 0);
    assert!(
        matches!(
            zero,
            Err(Error::InvalidArgument(InvalidArgument::ZeroCount { .. }))
        ),
        "{zero:?}"
    );
    let two = fixed(&alice, "ready", 2);
    let armed = two.try_set_count(2).await;
    assert!(
        matches!(
            armed,
            Err(Error::InvalidArgument(InvalidArgument::CountFixed {
                count: 2,
                ..
            }))
        ),
        "{armed:?}"
    );
    let empty = two.count_down_as("").await;
    assert!(
        matches!(empty, Err(Error::InvalidArgument(InvalidArgument::EmptyId))),
        "{empty:?}"
    );
    assert_eq!(cluster.count_keys("*"), 0, "nothing was sent");

    two.count_down_as("one").await.expect("count down");
    let key = alice.redlock().config().key_for("ready");
    for node in 0..3 {
        for suffix in ["latch", "latch-done"] {
            let ttl: i64 = redis::cmd("PTTL")
                .arg(format!("{key}:{suffix}"))
                .query(&mut cluster.node(node).connection())
                .expect("PTTL");
            assert!(ttl > 0, "{suffix} on master {node} expires: {ttl}");
        }
    }
    // Another count: refused, counted nowhere.
    let three = fixed(&bob, "ready", 3);
    for answer in [
        three.count_down_as("two").await.map(|()| 0),
        three.count().await,
    ] {
        assert!(
            matches!(
                answer,
                Err(Error::InvalidArgument(InvalidArgument::CountDiffers {
                    fixed: 3,
                    found: 2,
                    ..
                }))
            ),
            "{answer:?}"
        );
    }
    assert_eq!(two.count().await.expect("count"), 1, "only one counted");
    assert!(two.delete().await.expect("delete"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_one_master_it_meets_a_round_armed_there() {
    let cluster = RedisCluster::start(1);
    let alice = client(&cluster, WATCHDOG).await;
    let armed = alice.get_count_down_latch("jobs").expect("one master");
    assert!(armed.try_set_count(5).await.expect("arm"));
    let differs = fixed(&alice, "jobs", 2).count_down_as("a").await;
    assert!(
        matches!(
            differs,
            Err(Error::InvalidArgument(InvalidArgument::CountDiffers {
                fixed: 2,
                found: 5,
                ..
            }))
        ),
        "{differs:?}"
    );
    assert_eq!(armed.count().await.expect("count"), 5, "nothing counted");
    assert!(armed.delete().await.expect("delete"));
    // A fixed latch's round, met by the other kind: counted down there, it stays once open.
    let two = fixed(&alice, "jobs", 2);
    two.count_down_as("a").await.expect("count down");
    assert!(!armed.try_set_count(3).await.expect("arm"), "armed already");
    armed.count_down_as("b").await.expect("count down");
    assert_eq!(two.count().await.expect("count"), 0, "open");
    assert!(two.wait(Duration::ZERO).await.expect("wait"));
    assert!(two.delete().await.expect("delete"));
}
