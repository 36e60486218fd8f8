//! Input and edge cases that used to panic, hang, or answer wrongly: an endless wait, an
//! endless hold cap, the fencing counter's name, a key of the wrong kind on a minority or with
//! no expiry, an undecided release, an attempt in flight when the client shuts down, and an
//! explicit owner used with another client.

use std::time::Duration;

use redlock_core::Error as CoreError;
use redlock_reentrant::{
    Error, InvalidArgument, LockClient, Redlock, RedlockConfig, FENCE_COUNTER,
};
use redlock_testkit::{eventually_async, RedisCluster};
use redlock_tests::{client, released_everywhere, SlowLinks, WATCHDOG};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_wait_and_an_endless_hold_cap_are_accepted() {
    let cluster = RedisCluster::start(3);
    // Both used to panic: "overflow when adding duration to instant".
    let capped = LockClient::builder()
        .nodes(cluster.urls())
        .watchdog_timeout(Duration::from_secs(3))
        .max_hold(Duration::MAX)
        .build()
        .await
        .expect("client");
    let other = client(&cluster, WATCHDOG).await;
    let lock = capped.get_lock("forever");
    assert!(lock.try_lock(Duration::MAX, None).await.expect("free"));
    let waiter = tokio::spawn({
        let lock = other.get_lock("forever");
        async move {
            let got = lock
                .try_lock(Duration::MAX, Some(Duration::from_secs(5)))
                .await;
            lock.unlock().await.expect("unlock");
            got
        }
    });
    assert!(
        eventually_async(Duration::from_secs(5), || other.watched_channels() == 1).await,
        "the waiter waits"
    );
    lock.unlock().await.expect("unlock");
    assert!(waiter.await.expect("task").expect("try_lock"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_of_another_client_is_refused() {
    let cluster = RedisCluster::start(1);
    let (a, b) = (
        client(&cluster, WATCHDOG).await,
        client(&cluster, WATCHDOG).await,
    );
    let owner = a.new_owner();
    let mine = a.get_lock("shared-owner").with_owner(&owner);
    mine.lock().await.expect("lock");
    // Client b keeps no hold for this owner: were it allowed, the nodes would grant it a new
    // hold as the same owner, and both clients would hold the lock.
    let theirs = b.get_lock("shared-owner").with_owner(&owner);
    let refused = |result: Result<(), Error>| {
        matches!(
            result,
            Err(Error::InvalidArgument(InvalidArgument::ForeignOwner))
        )
    };
    assert!(refused(theirs.lock().await));
    assert!(refused(
        theirs.try_lock(Duration::ZERO, None).await.map(|_| ())
    ));
    assert!(refused(theirs.unlock().await));
    assert!(refused(theirs.hold_count().await.map(|_| ())));
    assert_eq!(theirs.fencing_token(), None);
    assert_eq!(mine.hold_count().await.expect("count"), 1, "untouched");
    mine.unlock().await.expect("unlock");
    released_everywhere(&cluster, "redlock:shared-owner", WATCHDOG / 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fencing_counters_name_is_reserved() {
    let cluster = RedisCluster::start(3);
    let client = client(&cluster, WATCHDOG).await;
    let reserved = client.get_lock(FENCE_COUNTER);
    let refused = |outcome: &Result<(), Error>| {
        matches!(
            outcome,
            Err(Error::InvalidArgument(InvalidArgument::ReservedName { .. }))
        )
    };
    assert!(refused(&reserved.lock().await));
    assert!(refused(
        &reserved.try_lock(Duration::ZERO, None).await.map(|_| ())
    ));
    assert!(refused(&reserved.is_locked().await.map(|_| ())));
    assert!(refused(&reserved.force_unlock().await.map(|_| ())));
    // Other locks still get fencing tokens.
    let lock = client.get_lock("after-reserved");
    lock.lock().await.expect("lock");
    assert!(lock.fencing_token().is_some());
    lock.unlock().await.expect("unlock");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_of_the_wrong_kind_on_a_minority_is_outvoted() {
    const KEY: &str = "redlock:minority-string";
    let cluster = RedisCluster::start(3);
    redis::cmd("SET")
        .arg(KEY)
        .arg("not a lock")
        .exec(&mut cluster.node(0).connection())
        .expect("seed a string");
    let holder = client(&cluster, WATCHDOG).await;
    let rival = client(&cluster, WATCHDOG).await;

    // Free on the majority: taken.
    let lock = holder.get_lock("minority-string");
    assert!(lock.try_lock(Duration::ZERO, None).await.expect("2 of 3"));
    // Held on the majority: merely contended, not an error.
    let contended = rival
        .get_lock("minority-string")
        .try_lock(Duration::ZERO, None)
        .await;
    assert!(matches!(contended, Ok(false)), "{contended:?}");
    assert!(lock.is_locked().await.expect("is_locked"));
    lock.unlock().await.expect("unlock");

    // On a majority it is a verdict: the key is not a lock.
    redis::cmd("SET")
        .arg(KEY)
        .arg("not a lock")
        .exec(&mut cluster.node(1).connection())
        .expect("seed a string");
    let err = lock.lock().await.expect_err("not a lock");
    assert!(
        matches!(&err, Error::WrongType { found, .. } if found == "string"),
        "{err:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hash_with_no_expiry_is_reported_not_waited_on() {
    const KEY: &str = "redlock:foreign-hash";
    let cluster = RedisCluster::start(3);
    for node in cluster.nodes() {
        redis::cmd("HSET")
            .arg(KEY)
            .arg("user")
            .arg("42")
            .exec(&mut node.connection())
            .expect("seed a hash");
    }
    let client = client(&cluster, WATCHDOG).await;
    let lock = client.get_lock("foreign-hash");
    // It used to wait forever: a "holder" with no TTL never releases.
    let outcome = tokio::time::timeout(Duration::from_secs(10), lock.lock())
        .await
        .expect("answers at once");
    assert!(
        matches!(&outcome, Err(Error::WrongType { found, .. }) if found == "hash with no expiry"),
        "{outcome:?}"
    );
    assert!(matches!(
        lock.is_locked().await,
        Err(Error::WrongType { .. })
    ));
    for node in cluster.nodes() {
        let value: String = redis::cmd("HGET")
            .arg(KEY)
            .arg("user")
            .query(&mut node.connection())
            .expect("HGET");
        assert_eq!(value, "42", "the hash is untouched");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_or_extension_the_silent_nodes_could_still_decide_is_no_quorum() {
    const KEY: &str = "redlock:undecided";
    let cluster = RedisCluster::start(5);
    let redlock = Redlock::new(RedlockConfig {
        node_timeout: Some(Duration::from_millis(250)),
        ..RedlockConfig::with_nodes(cluster.urls())
    })
    .expect("config");
    assert!(redlock.readiness().await.is_ready());
    let lease = redlock
        .acquire("undecided", Duration::from_secs(10))
        .await
        .expect("acquired");
    // Granted by a majority, whose grants have landed; the others' may be on their way, or
    // never sent on a busy machine (a request that timed out before it was written).
    let holding = cluster.nodes_with(KEY);
    assert!(holding.len() >= 3, "granted by a majority: {holding:?}");
    // One node lost the key (one whose grant landed: no late grant brings it back); two do
    // not answer. The two that did not answer may hold it, and with the two that do, that is
    // a majority: undecided, not "not owner".
    let (answering, lost) = (&holding[..2], holding[2]);
    let silent: Vec<usize> = (0..5)
        .filter(|node| !answering.contains(node) && *node != lost)
        .collect();
    redis::cmd("DEL")
        .arg(KEY)
        .exec(&mut cluster.node(lost).connection())
        .expect("DEL");
    for &node in &silent {
        cluster.stop(node);
    }
    let extended = redlock.extend(&lease, Duration::from_secs(10)).await;
    assert!(
        matches!(extended, Err(CoreError::NoQuorum { .. })),
        "{extended:?}"
    );
    let released = redlock.release(&lease).await;
    assert!(
        matches!(released, Err(CoreError::NoQuorum { .. })),
        "{released:?}"
    );
    for &node in &silent {
        cluster.resume(node);
    }
    // The release reached the silent nodes all the same: once they answer, the lock is gone,
    // long before its lease ends.
    released_everywhere(&cluster, KEY, Duration::from_secs(10) / 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attempt_in_flight_at_shutdown_never_returns_a_hold() {
    const KEY: &str = "redlock:at-shutdown";
    const SLOW: Duration = Duration::from_millis(300);
    let cluster = RedisCluster::start(5);
    let links = SlowLinks::start(&cluster, 5).await;
    let client = links.client(Duration::from_secs(30), SLOW * 5).await;
    // Slow links hold every attempt for two link delays after its grants landed: shutdown
    // comes meanwhile.
    links.slow_down(SLOW);
    let attempt = tokio::spawn({
        let lock = client.get_lock("at-shutdown");
        async move { lock.lock().await }
    });
    assert!(
        eventually_async(Duration::from_secs(5), || cluster.count_keys(KEY) > 0).await,
        "the attempt reached the nodes"
    );
    client.shutdown().await;
    let outcome = attempt.await.expect("task");
    assert!(matches!(outcome, Err(Error::Shutdown)), "{outcome:?}");
    // Nothing left behind once the undo crossed the slow links.
    released_everywhere(&cluster, KEY, Duration::from_secs(30) / 3).await;
    assert_eq!(client.watchdog().registered(), 0);
}
