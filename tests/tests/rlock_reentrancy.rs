//! Reentrancy and owners: nested holds count up and down, other tasks and clients wait, and a
//! non-owner's unlock changes nothing.

use std::collections::HashMap;
use std::time::Duration;

use redlock_reentrant::Error;
use redlock_testkit::{hashes, RedisCluster};
use redlock_tests::{client, released_everywhere, WATCHDOG};

async fn nested_holds_count_up_and_down(cluster: RedisCluster) {
    let alice = client(&cluster, WATCHDOG).await;
    let bob = client(&cluster, WATCHDOG).await;
    let lock = alice.get_lock("nested");

    let mut counts = Vec::new();
    for _ in 0..3 {
        lock.lock().await.expect("lock");
        counts.push(lock.hold_count().await.expect("count"));
    }
    let token = lock.fencing_token().expect("held");
    for hash in hashes::<HashMap<String, u32>>(&cluster, "redlock:nested") {
        assert_eq!(hash.len(), 1, "one owner field: {hash:?}");
        assert_eq!(hash.values().copied().collect::<Vec<_>>(), vec![3]);
        let owner = hash.keys().next().expect("field");
        assert!(
            owner.starts_with(alice.id()),
            "owner is client id + task: {owner}"
        );
    }

    // Another task of the same client is another owner: it waits, and cannot unlock.
    let same_client_other_task = tokio::spawn({
        let lock = alice.get_lock("nested");
        async move {
            let refused = lock.unlock().await;
            let busy = lock.try_lock(Duration::ZERO, None).await;
            let held_here = lock.is_held_by_current_task().await;
            (refused, busy, held_here)
        }
    });
    let (refused, busy, held_here) = same_client_other_task.await.expect("task");
    assert!(
        matches!(refused, Err(Error::NotOwner { .. })),
        "{refused:?}"
    );
    assert!(!busy.expect("try_lock"), "another task must not enter");
    assert!(!held_here.expect("is_held"));
    assert_eq!(
        lock.hold_count().await.expect("count"),
        3,
        "the refused unlock changed nothing"
    );

    // Another client waits too.
    let bobs = bob.get_lock("nested");
    assert!(!bobs.try_lock(Duration::ZERO, None).await.expect("try_lock"));
    assert!(matches!(bobs.unlock().await, Err(Error::NotOwner { .. })));
    let waiter = tokio::spawn(async move {
        bobs.lock().await.expect("bob gets it at zero");
        let token = bobs.fencing_token();
        bobs.unlock().await.expect("bob unlocks");
        token
    });

    for _ in 0..3 {
        assert_eq!(
            lock.fencing_token(),
            Some(token),
            "nested holds keep the token"
        );
        assert!(!waiter.is_finished(), "bob must wait while a hold remains");
        lock.unlock().await.expect("unlock");
        counts.push(lock.hold_count().await.expect("count"));
    }
    assert_eq!(counts, vec![1, 2, 3, 2, 1, 0]);
    assert_eq!(lock.fencing_token(), None);
    let bobs_token = waiter.await.expect("task").expect("token");
    assert!(
        bobs_token > token,
        "next holder's token {bobs_token} > {token}"
    );
    released_everywhere(&cluster, "redlock:nested", WATCHDOG / 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nested_holds_on_one_master() {
    nested_holds_count_up_and_down(RedisCluster::start(1)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nested_holds_on_five_masters() {
    nested_holds_count_up_and_down(RedisCluster::start(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nested_holds_on_five_masters_with_two_dead() {
    let cluster = RedisCluster::start(5);
    cluster.kill(1);
    cluster.kill(3);
    nested_holds_count_up_and_down(cluster).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_explicit_owner_and_a_guard_unlock_from_another_task() {
    let cluster = RedisCluster::start(3);
    let client = client(&cluster, WATCHDOG).await;

    let owner = client.new_owner();
    let lock = client.get_lock("moving").with_owner(&owner);
    lock.lock().await.expect("lock");
    let elsewhere = tokio::spawn(async move {
        assert!(lock
            .is_held_by_current_task()
            .await
            .expect("held by the owner"));
        lock.unlock().await
    });
    elsewhere
        .await
        .expect("task")
        .expect("the explicit owner unlocks from another task");
    released_everywhere(&cluster, "redlock:moving", WATCHDOG / 3).await;

    let guard = client.get_lock("moving").acquire().await.expect("guard");
    let token = guard.fencing_token();
    let moved = tokio::spawn(async move { guard.unlock().await });
    moved
        .await
        .expect("task")
        .expect("a guard unlocks from any task");
    released_everywhere(&cluster, "redlock:moving", WATCHDOG / 3).await;

    let guard = client
        .get_lock("moving")
        .acquire()
        .await
        .expect("guard again");
    assert!(guard.fencing_token() > token);
    // Dropping a guard releases the lock (in a spawned task), long before its lease ends.
    drop(guard);
    released_everywhere(&cluster, "redlock:moving", WATCHDOG / 3).await;
}

#[test]
fn outside_a_task_the_owner_is_the_calling_thread() {
    let cluster = RedisCluster::start(1);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let client = runtime.block_on(client(&cluster, WATCHDOG));
    let lock = client.get_lock("threads");

    runtime
        .block_on(lock.lock())
        .expect("lock from this thread");
    assert_eq!(runtime.block_on(lock.hold_count()).expect("count"), 1);
    runtime
        .block_on(lock.lock())
        .expect("reentrant from this thread");
    assert_eq!(runtime.block_on(lock.hold_count()).expect("count"), 2);

    std::thread::scope(|scope| {
        scope.spawn(|| {
            assert_eq!(runtime.block_on(lock.hold_count()).expect("count"), 0);
            assert!(matches!(
                runtime.block_on(lock.unlock()),
                Err(Error::NotOwner { .. })
            ));
        });
    });
    runtime.block_on(lock.unlock()).expect("unlock");
    runtime.block_on(lock.unlock()).expect("unlock");
    runtime.block_on(released_everywhere(
        &cluster,
        "redlock:threads",
        WATCHDOG / 3,
    ));
}
