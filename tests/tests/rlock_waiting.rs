//! Waiting: `try_lock` gives up after about its wait, waiters wake on the release message (not
//! on their fallback timer), and one subscription per lock per client serves all its waiters.

use std::time::{Duration, Instant};

use redlock_reentrant::LockClient;
use redlock_testkit::{eventually_async, RedisCluster};
use redlock_tests::{released_everywhere, spawn_waiter};

/// The watchdog lease of the library's default configuration, which these clients use.
const LEASE: Duration = Duration::from_secs(30);

async fn client(cluster: &RedisCluster) -> LockClient {
    LockClient::builder()
        .nodes(cluster.urls())
        .build()
        .await
        .expect("client")
}

/// Subscribers of `channel` on each running node.
fn subscribers(cluster: &RedisCluster, channel: &str) -> Vec<i64> {
    cluster
        .nodes()
        .iter()
        .filter(|node| node.is_running())
        .map(|node| {
            let (_, count): (String, i64) = redis::cmd("PUBSUB")
                .arg("NUMSUB")
                .arg(channel)
                .query(&mut node.connection())
                .expect("PUBSUB NUMSUB");
            count
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn try_lock_gives_up_after_about_its_wait() {
    let cluster = RedisCluster::start(3);
    let holder = client(&cluster).await;
    let waiter = client(&cluster).await;
    let held = holder.get_lock("busy");
    held.lock_with_lease(Duration::from_secs(30))
        .await
        .expect("held");

    for wait in [Duration::ZERO, Duration::from_millis(400)] {
        let started = Instant::now();
        let got = waiter
            .get_lock("busy")
            .try_lock(wait, None)
            .await
            .expect("try_lock");
        let took = started.elapsed();
        assert!(!got, "the lock is held for 30 s");
        assert!(took >= wait, "gave up early: {took:?} < {wait:?}");
        assert!(
            took < wait + Duration::from_secs(2),
            "gave up late: {took:?} for {wait:?}"
        );
    }
    held.unlock().await.expect("unlock");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_wakes_the_waiter_long_before_the_lease_would_end() {
    for (nodes, dead) in [(1, 0), (5, 0), (5, 2)] {
        let cluster = RedisCluster::start(nodes);
        for node in 0..dead {
            cluster.kill(node);
        }
        let holder = client(&cluster).await;
        let waiting = client(&cluster).await;
        let held = holder.get_lock("handover");
        // The waiter's fallback would be min(PTTL, time left) = 30 s: only the release message
        // can wake it sooner.
        held.lock_with_lease(Duration::from_secs(60))
            .await
            .expect("held");
        let waiter = spawn_waiter(waiting.get_lock("handover"), Duration::from_secs(30));
        assert!(
            eventually_async(Duration::from_secs(5), || waiting.watched_channels() == 1).await,
            "the waiter subscribes to the lock's channel"
        );
        let released = Instant::now();
        held.unlock().await.expect("unlock");
        let (got, woke) = waiter.await.expect("task");
        assert!(got.expect("try_lock"), "the waiter takes the released lock");
        let handover = woke - released;
        eprintln!("{nodes} node(s), {dead} dead: hand-over {handover:?} after the release");
        assert!(
            handover < Duration::from_secs(5),
            "woken by the message, not the 30 s fallback: {handover:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_subscription_per_lock_per_client_is_shared_and_dropped_with_the_last_waiter() {
    let cluster = RedisCluster::start(3);
    let holder = client(&cluster).await;
    let waiting = client(&cluster).await;
    let channel = "redlock:shared:released";
    let held = holder.get_lock("shared");
    held.lock_with_lease(Duration::from_secs(60))
        .await
        .expect("held");

    let waiters: Vec<_> = (0..5)
        .map(|_| {
            let lock = waiting.get_lock("shared");
            tokio::spawn(async move {
                lock.lock().await.expect("lock");
                lock.unlock().await.expect("unlock");
            })
        })
        .collect();
    assert!(
        eventually_async(Duration::from_secs(5), || {
            waiting.watched_channels() == 1 && subscribers(&cluster, channel) == vec![1, 1, 1]
        })
        .await,
        "one subscription per node for five waiters: {:?}",
        subscribers(&cluster, channel)
    );

    held.unlock().await.expect("unlock");
    for waiter in waiters {
        waiter.await.expect("every waiter gets its turn");
    }
    assert!(
        eventually_async(Duration::from_secs(5), || {
            waiting.watched_channels() == 0 && subscribers(&cluster, channel) == vec![0, 0, 0]
        })
        .await,
        "the last waiter unsubscribes: {:?}",
        subscribers(&cluster, channel)
    );
    released_everywhere(&cluster, "redlock:shared", LEASE / 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_waiter_leaves_no_subscription_and_no_hold() {
    let cluster = RedisCluster::start(3);
    let holder = client(&cluster).await;
    let waiting = client(&cluster).await;
    let held = holder.get_lock("abandoned");
    held.lock_with_lease(Duration::from_secs(60))
        .await
        .expect("held");

    let lock = waiting.get_lock("abandoned");
    let outcome = tokio::time::timeout(Duration::from_millis(300), lock.lock()).await;
    assert!(outcome.is_err(), "still waiting when dropped");
    assert!(
        eventually_async(Duration::from_secs(5), || waiting.watched_channels() == 0).await,
        "the dropped waiter's subscription is gone"
    );
    held.unlock().await.expect("unlock");
    // Gone everywhere once the holder's release reached every node: the dropped waiter holds
    // nothing.
    released_everywhere(&cluster, "redlock:abandoned", LEASE / 3).await;
    assert_eq!(lock.fencing_token(), None);
    assert!(lock.try_lock(Duration::ZERO, None).await.expect("free"));
    lock.unlock().await.expect("unlock");
}

/// A task of the same client that holds the lock on a fixed lease and never lets go keeps
/// nobody waiting past that lease: the next task in the client's line watches the holder's
/// lost signal, not only its release. A task whose wait runs out while in line leaves it, and
/// the other still gets its turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_next_task_in_line_goes_when_the_holders_fixed_lease_runs_out() {
    let cluster = RedisCluster::start(3);
    let client = client(&cluster).await;
    let lease = Duration::from_millis(500);
    let holder = client.get_lock("line-lease");
    holder.lock_with_lease(lease).await.expect("held");
    let signal = holder.lost_signal().expect("the holder's signal");

    // In line too, and gives up before the lease ends.
    let impatient = spawn_waiter(client.get_lock("line-lease"), Duration::from_millis(50));
    let patient = {
        let lock = client.get_lock("line-lease");
        tokio::spawn(async move {
            lock.lock().await.expect("lock");
            lock.unlock().await
        })
    };
    let (gave_up, _) = impatient.await.expect("task");
    assert!(
        !gave_up.expect("try_lock"),
        "held for the whole of its wait"
    );
    // Bounded by the test harness only: without the signal watch it never returns.
    let released = tokio::time::timeout(LEASE, patient)
        .await
        .expect("the next in line goes once the holder's lease ran out")
        .expect("task");
    released.expect("acquired and released");
    assert!(signal.is_lost(), "the holder's lease ran out");
}
