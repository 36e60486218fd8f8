//! `MultiLock` on real masters: all or nothing, no deadlock between multi-locks given their
//! members in opposite orders, the validity rule for a fixed lease, the lost signal, a dropped
//! acquisition leaving nothing, and typed errors for bad member lists.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use redlock_reentrant::{Error, InvalidArgument, MultiLock};
use redlock_testkit::{eventually_async, RedisCluster};
use redlock_tests::{client, released_everywhere, WATCHDOG};

/// Long enough for anything that is awaited to happen on a busy machine.
const PATIENCE: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_locks_over_the_same_locks_in_opposite_orders_never_deadlock_nor_overlap() {
    let cluster = RedisCluster::start(3);
    let alice = client(&cluster, WATCHDOG).await;
    let bob = client(&cluster, WATCHDOG).await;
    let forward = MultiLock::new([
        alice.get_lock("m:a"),
        alice.get_lock("m:b"),
        alice.get_read_write_lock("m:c").write_lock(),
    ])
    .expect("members");
    let backward = MultiLock::new([
        bob.get_read_write_lock("m:c").write_lock(),
        bob.get_lock("m:b"),
        bob.get_lock("m:a"),
    ])
    .expect("members");
    let inside = Arc::new(AtomicUsize::new(0));
    let overlaps = Arc::new(AtomicUsize::new(0));
    let rounds = |locks: MultiLock| {
        let (inside, overlaps) = (Arc::clone(&inside), Arc::clone(&overlaps));
        tokio::spawn(async move {
            for _ in 0..15 {
                let guard = locks.acquire().await.expect("acquire");
                if inside.fetch_add(1, Ordering::SeqCst) != 0 {
                    overlaps.fetch_add(1, Ordering::SeqCst);
                }
                tokio::task::yield_now().await;
                inside.fetch_sub(1, Ordering::SeqCst);
                guard.unlock().await.expect("unlock");
            }
        })
    };
    let (one, two) = (rounds(forward), rounds(backward));
    tokio::time::timeout(PATIENCE, async {
        one.await.expect("task");
        two.await.expect("task");
    })
    .await
    .expect("no deadlock");
    assert_eq!(
        overlaps.load(Ordering::SeqCst),
        0,
        "two holders of the set at once"
    );
    released_everywhere(&cluster, "redlock:m:*", WATCHDOG / 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_held_elsewhere_leaves_nothing_held_and_a_dropped_attempt_neither() {
    let cluster = RedisCluster::start(3);
    let alice = client(&cluster, WATCHDOG).await;
    let bob = client(&cluster, WATCHDOG).await;
    // "n:z" sorts last: the others are taken before it is found held.
    let locks = MultiLock::new([
        alice.get_lock("n:z"),
        alice.get_lock("n:a"),
        alice.get_read_write_lock("n:m").read_lock(),
    ])
    .expect("members");
    let held = bob
        .get_lock("n:z")
        .acquire()
        .await
        .expect("bob holds one member");

    assert!(locks
        .try_acquire(WATCHDOG / 3, None)
        .await
        .expect("try")
        .is_none());
    for member in locks.members() {
        if member.name() != "n:z" {
            assert!(
                !member.is_locked().await.expect("status"),
                "{} left held",
                member.name()
            );
        }
    }

    // Dropped while it waits for the held member: the members it took are released.
    let waiting = tokio::spawn({
        let locks = locks.clone();
        async move { locks.acquire().await }
    });
    let first = alice.get_lock("n:a");
    assert!(eventually_async(PATIENCE, || cluster.count_keys("redlock:n:a") > 0).await);
    waiting.abort();
    released_everywhere(&cluster, "redlock:n:a", WATCHDOG / 3).await;
    released_everywhere(&cluster, "redlock:n:m*", WATCHDOG / 3).await;
    assert!(!first.is_locked().await.expect("status"));

    held.unlock().await.expect("unlock");
    let guard = locks
        .try_acquire(PATIENCE, None)
        .await
        .expect("try")
        .expect("free now");
    assert_eq!(guard.fencing_tokens().len(), 3);
    guard.unlock().await.expect("unlock");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fixed_lease_that_runs_out_before_the_last_member_fails_the_whole_set() {
    let cluster = RedisCluster::start(3);
    let alice = client(&cluster, WATCHDOG).await;
    let bob = client(&cluster, WATCHDOG).await;
    let locks = MultiLock::new([alice.get_lock("v:a"), alice.get_lock("v:b")]).expect("members");
    // The last member is held for five seconds; the set's fixed lease is one second: the first
    // member's lease runs out while the set waits for the last.
    let _held = bob
        .get_lock("v:b")
        .acquire_with_lease(Duration::from_secs(5))
        .await
        .expect("bob holds the last member");
    let taken = locks
        .try_acquire(PATIENCE, Some(Duration::from_secs(1)))
        .await
        .expect("try");
    assert!(
        taken.is_none(),
        "a set whose first lease ran out was handed out"
    );
    // It stopped when the first member's lease ran out, not when the last member freed: bob
    // still holds that one.
    assert!(
        cluster.nodes_with("redlock:v:b").len() >= 2,
        "the attempt waited for a member it could no longer use"
    );
    released_everywhere(&cluster, "redlock:v:a", WATCHDOG).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_guard_is_lost_when_any_member_is() {
    let cluster = RedisCluster::start(3);
    let alice = client(&cluster, WATCHDOG).await;
    let bob = client(&cluster, WATCHDOG).await;
    let locks = MultiLock::new([alice.get_lock("l:a"), alice.get_lock("l:b")]).expect("members");
    let guard = locks.acquire().await.expect("acquire");
    assert!(!guard.is_lost());
    assert!(bob.get_lock("l:b").force_unlock().await.expect("force"));
    let reason = tokio::time::timeout(PATIENCE, guard.lost())
        .await
        .expect("the lost signal fires");
    assert!(guard.is_lost(), "{reason:?}");
    let unlocked = guard.unlock().await;
    assert!(
        matches!(unlocked, Err(Error::LockLost { .. })),
        "{unlocked:?}"
    );
    released_everywhere(&cluster, "redlock:l:*", WATCHDOG / 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_member_lists_are_typed_errors() {
    let cluster = RedisCluster::start(1);
    let alice = client(&cluster, WATCHDOG).await;
    let bob = client(&cluster, WATCHDOG).await;
    let no_members = MultiLock::new(Vec::new());
    assert!(matches!(
        no_members,
        Err(Error::InvalidArgument(InvalidArgument::NoMembers))
    ));
    let rw = alice.get_read_write_lock("doc");
    for twice in [
        vec![
            alice.get_lock("x"),
            alice.get_lock("y"),
            alice.get_lock("x"),
        ],
        vec![rw.read_lock(), rw.write_lock()],
        vec![alice.get_lock("x"), bob.get_lock("x")],
    ] {
        let refused = MultiLock::new(twice);
        assert!(
            matches!(
                refused,
                Err(Error::InvalidArgument(
                    InvalidArgument::DuplicateMember { .. }
                ))
            ),
            "{refused:?}"
        );
    }
}
