//! Waiters and the server: a refused attempt waits for a real release instead of spinning on
//! its own undo, and the pub/sub connections behind the wake-ups neither leak nor go deaf.
//! Every check reads the server (`INFO commandstats`, `CLIENT LIST TYPE pubsub`,
//! `PUBSUB NUMSUB`), not only what the client says about itself.
//!
//! Before the fixes: a waiter facing a holder on 2 of 3 nodes was granted the third, undid it,
//! and the undo's release message woke it again at once (about 8,500 acquire scripts, undos and
//! PUBLISHes on the third node during one 2 s `try_lock`); a pub/sub connection killed during a
//! wait was never resubscribed (waiters slept until the holder's lease ran out); pub/sub
//! connections outlived `shutdown()` and the client; one client-wide mutex was held across
//! every node's subscribe timeout.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use redlock_reentrant::{Error, LockClient, RLock};
use redlock_testkit::{
    client_connections, command_calls, eventually_async, kill_pubsub_clients, pubsub_clients,
    reset_command_stats, subscribers, CapturedLogs, Fault, FaultProxy, RedisCluster,
};
use redlock_tests::spawn_waiter;
use tokio::task::JoinHandle;

const NODE_TIMEOUT: Duration = Duration::from_millis(200);

async fn client(cluster: &RedisCluster) -> LockClient {
    LockClient::builder()
        .nodes(cluster.urls())
        .node_timeout(NODE_TIMEOUT)
        .build()
        .await
        .expect("client")
}

/// Subscribers of `channel` on each running node.
fn numsub(cluster: &RedisCluster, channel: &str) -> Vec<i64> {
    cluster
        .nodes()
        .iter()
        .filter(|node| node.is_running())
        .map(|node| subscribers(node, channel))
        .collect()
}

/// Pub/sub connections on each running node.
fn pubsub_connections(cluster: &RedisCluster) -> Vec<usize> {
    cluster
        .nodes()
        .iter()
        .filter(|node| node.is_running())
        .map(pubsub_clients)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_facing_a_holder_on_two_of_three_nodes_does_not_spin() {
    let cluster = RedisCluster::start(3);
    let holder = client(&cluster).await;
    let waiting = client(&cluster).await;

    // The holder wins on nodes 0 and 1 only: node 2 is down while it acquires, and comes back
    // empty.
    cluster.kill(2);
    let held = holder.get_lock("partial");
    held.lock().await.expect("granted by 2 of 3");
    cluster.restart(2);
    let third = cluster.node(2);
    reset_command_stats(third);

    let wait = Duration::from_secs(2);
    let started = Instant::now();
    let got = waiting
        .get_lock("partial")
        .try_lock(wait, None)
        .await
        .expect("try_lock");
    assert!(!got, "the holder still holds a majority");
    assert!(started.elapsed() >= wait);

    let calls = command_calls(third);
    let scripts =
        calls.get("evalsha").copied().unwrap_or(0) + calls.get("eval").copied().unwrap_or(0);
    let published = calls.get("publish").copied().unwrap_or(0);
    eprintln!("third node during one {wait:?} try_lock: {scripts} scripts, {published} PUBLISH");
    // An attempt before and after subscribing (each with its undo), and the holder's renewals
    // (none in 2 s of a 30 s lease): a handful, not thousands.
    assert!(
        scripts <= 12,
        "{scripts} scripts on the free node: {calls:?}"
    );
    assert_eq!(published, 0, "an undo announced a release: {calls:?}");
    held.unlock().await.expect("unlock");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_pubsub_connection_is_resubscribed_and_the_handover_stays_prompt() {
    let cluster = RedisCluster::start(3);
    let holder = client(&cluster).await;
    let waiting = client(&cluster).await;
    let channel = "redlock:killed:released";
    let held = holder.get_lock("killed");
    // The waiter's fallback would be min(PTTL, time left) = 30 s: only a release message, on a
    // subscription that survived the kill, wakes it sooner.
    held.lock_with_lease(Duration::from_secs(60))
        .await
        .expect("held");
    let waiter = spawn_waiter(waiting.get_lock("killed"), Duration::from_secs(30));
    assert!(
        eventually_async(Duration::from_secs(5), || numsub(&cluster, channel)
            == vec![1, 1, 1])
        .await,
        "subscribed: {:?}",
        numsub(&cluster, channel)
    );
    for node in cluster.nodes() {
        assert!(kill_pubsub_clients(node) >= 1);
    }
    assert!(
        eventually_async(Duration::from_secs(10), || numsub(&cluster, channel)
            == vec![1, 1, 1])
        .await,
        "resubscribed after the kill: {:?}",
        numsub(&cluster, channel)
    );
    let released = Instant::now();
    held.unlock().await.expect("unlock");
    let (got, woke) = waiter.await.expect("task");
    assert!(got.expect("try_lock"));
    let handover = woke - released;
    eprintln!("hand-over after the pub/sub connections were killed: {handover:?}");
    assert!(
        handover < Duration::from_secs(5),
        "woken by the message, not the 30 s fallback: {handover:?}"
    );
}

/// A lock held for a minute by a client that reaches the masters through fault proxies, and
/// a waiting client that reaches them directly: the holder's release can be kept from nodes 1
/// and 2 while node 0 applies and announces it.
struct SkewedRelease {
    cluster: RedisCluster,
    proxies: Vec<FaultProxy>,
    holder: LockClient,
    held: RLock,
    waiting: LockClient,
    channel: String,
}

impl SkewedRelease {
    async fn start(name: &str) -> SkewedRelease {
        let cluster = RedisCluster::start(3);
        let mut proxies = Vec::new();
        for port in cluster.ports() {
            let upstream = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
            proxies.push(FaultProxy::start(upstream).await.expect("proxy"));
        }
        let holder = LockClient::builder()
            .nodes(proxies.iter().map(FaultProxy::url))
            .node_timeout(Duration::from_secs(3))
            .build()
            .await
            .expect("holder client");
        let waiting = client(&cluster).await;
        // An explicit owner: the release runs in a task of its own.
        let owner = holder.new_owner();
        let held = holder.get_lock(name).with_owner(&owner);
        held.lock_with_lease(Duration::from_secs(60))
            .await
            .expect("held");
        reset_command_stats(cluster.node(1));
        SkewedRelease {
            cluster,
            proxies,
            holder,
            held,
            waiting,
            channel: format!("redlock:{name}:released"),
        }
    }

    /// Lock scripts run on node 1 since the start: only the waiters' once the holder's link
    /// to it is cut.
    fn attempts_on_node_1(&self) -> u64 {
        let calls = command_calls(self.cluster.node(1));
        calls.get("evalsha").copied().unwrap_or(0) + calls.get("eval").copied().unwrap_or(0)
    }

    /// Whether the waiting client is subscribed on every node.
    fn subscribed(&self) -> bool {
        numsub(&self.cluster, &self.channel) == vec![1, 1, 1]
    }

    /// Whether, within `within`, a waiter has tried before subscribing and once subscribed, and
    /// is subscribed on every node: asleep until the next announcement.
    async fn waiter_asleep(&self, within: Duration) -> bool {
        eventually_async(within, || {
            self.attempts_on_node_1() >= 2 && self.subscribed()
        })
        .await
    }

    /// Starts the holder's release with its requests to nodes 1 and 2 held in a partition:
    /// node 0 applies and announces it at once.
    fn release_on_node_0_only(&self) -> JoinHandle<Result<(), Error>> {
        for proxy in &self.proxies[1..] {
            proxy.set(Fault::Blackhole);
        }
        let held = self.held.clone();
        tokio::spawn(async move { held.unlock().await })
    }

    /// Heals the partition, so the release reaches nodes 1 and 2; returns when.
    fn heal(&self) -> Instant {
        let healed = Instant::now();
        for proxy in &self.proxies[1..] {
            proxy.set(Fault::Pass);
        }
        healed
    }

    async fn shutdown(self) {
        self.holder.shutdown().await;
        self.waiting.shutdown().await;
    }
}

/// A release that reaches the masters at different times: node 0 applies it at once, nodes 1
/// and 2 only once the holder's partitioned link to them heals. Node 0's announcement wakes
/// the waiter, whose attempt nodes 1 and 2 refuse (still held). Before the fix the waiter then
/// slept until its wait ran out (50 s here): the later announcements of the same release are
/// not new releases. Now a waiter refused right after a release looks again after a per-node
/// timeout (then twice as long each time).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_that_reaches_a_majority_late_still_wakes_the_waiter() {
    let skewed = SkewedRelease::start("skewed").await;
    let waiter = spawn_waiter(skewed.waiting.get_lock("skewed"), Duration::from_secs(50));
    // The waiter tried before subscribing and once subscribed, and sleeps.
    assert!(
        skewed.waiter_asleep(Duration::from_secs(5)).await,
        "subscribed: {:?}, attempts {}",
        numsub(&skewed.cluster, &skewed.channel),
        skewed.attempts_on_node_1()
    );
    let asleep = skewed.attempts_on_node_1();
    let unlock = skewed.release_on_node_0_only();
    assert!(
        eventually_async(Duration::from_secs(5), || skewed.attempts_on_node_1()
            > asleep)
        .await,
        "node 0's announcement never woke the waiter"
    );
    assert!(!waiter.is_finished(), "nodes 1 and 2 still hold the lock");
    let healed = skewed.heal();
    unlock
        .await
        .expect("task")
        .expect("unlock, late on two nodes");
    let (got, woke) = waiter.await.expect("task");
    assert!(got.expect("try_lock"), "the waiter got the lock");
    let handover = woke.saturating_duration_since(healed);
    eprintln!("hand-over after a release reached the majority late: {handover:?}");
    assert!(
        handover < Duration::from_secs(5),
        "looked again soon after the release, not after its 50 s wait: {handover:?}"
    );
    skewed.shutdown().await;
}

/// Two waiters in one client; a release lands late on two of three masters. Node 0's
/// announcement wakes the waiter whose turn it is (the first, asleep on the subscription; the
/// second waits in the client's line behind it), which is still refused and then gives up
/// when its short wait runs out. Before the fix it took the only wake-up with it: the other
/// waiter slept through the release until its own wait ran out (30 s here). Now a waiter that
/// leaves without the lock passes its turn on, and the next asks the nodes at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_woken_waiter_that_gives_up_wakes_the_next() {
    let skewed = SkewedRelease::start("handed-on").await;
    // The first waiter falls asleep first, so the first announcement wakes it.
    // Its wait is long enough to still be waiting when the release comes, however slow the
    // setup below is on a busy machine (nothing can hand it the lock before it gives up).
    let first = spawn_waiter(
        skewed.waiting.get_lock("handed-on"),
        Duration::from_secs(10),
    );
    assert!(
        skewed.waiter_asleep(Duration::from_secs(3)).await,
        "the first waiter is asleep"
    );
    let second = spawn_waiter(
        skewed.waiting.get_lock("handed-on"),
        Duration::from_secs(30),
    );
    let asleep = skewed.attempts_on_node_1();
    // The scenario needs the first waiter still waiting when the release comes, to be woken.
    assert!(
        !first.is_finished(),
        "the first waiter's wait ran out before the release"
    );
    let unlock = skewed.release_on_node_0_only();
    assert!(
        eventually_async(Duration::from_secs(3), || skewed.attempts_on_node_1()
            > asleep)
        .await,
        "node 0's announcement never woke a waiter"
    );
    let (first, _) = first.await.expect("task");
    assert!(
        matches!(first, Ok(false)),
        "nodes 1 and 2 held the lock for all of the first waiter's wait: {first:?}"
    );
    assert!(!second.is_finished(), "nodes 1 and 2 still hold the lock");
    let healed = skewed.heal();
    unlock
        .await
        .expect("task")
        .expect("unlock, late on two nodes");
    let (got, woke) = second.await.expect("task");
    assert!(
        matches!(got, Ok(true)),
        "the second waiter got the lock: {got:?}"
    );
    let handover = woke.saturating_duration_since(healed);
    eprintln!("hand-over to the second waiter: {handover:?}");
    assert!(
        handover < Duration::from_secs(5),
        "the second waiter was handed the wake-up, not left to its 30 s wait: {handover:?}"
    );
    skewed.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pubsub_connections_end_with_shutdown_and_with_the_last_client() {
    let cluster = RedisCluster::start(3);
    let holder = client(&cluster).await;
    let channel = "redlock:closing:released";
    let held = holder.get_lock("closing");
    held.lock_with_lease(Duration::from_secs(60))
        .await
        .expect("held");
    let connections = |cluster: &RedisCluster| -> Vec<usize> {
        cluster.nodes().iter().map(client_connections).collect()
    };
    let before = connections(&cluster);

    // Shutdown while a waiter waits: the waiter is told at once, and the pub/sub connections
    // close (their subscriptions with them).
    let waiting = client(&cluster).await;
    let waiter = tokio::spawn({
        let lock = waiting.get_lock("closing");
        async move { lock.try_lock(Duration::from_secs(30), None).await }
    });
    assert!(
        eventually_async(Duration::from_secs(5), || numsub(&cluster, channel)
            == vec![1, 1, 1])
        .await
    );
    assert_eq!(pubsub_connections(&cluster), vec![1, 1, 1]);
    waiting.shutdown().await;
    assert!(
        eventually_async(Duration::from_secs(5), || pubsub_connections(&cluster)
            == vec![0, 0, 0])
        .await,
        "pub/sub connections left after shutdown: {:?}",
        pubsub_connections(&cluster)
    );
    let outcome = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("the waiter hears of the shutdown")
        .expect("task");
    assert!(
        matches!(outcome, Err(redlock_reentrant::Error::Shutdown)),
        "{outcome:?}"
    );
    drop(waiting);

    // The last client dropped without shutdown: none of its connections stays open.
    let waiting = client(&cluster).await;
    let waiter = tokio::spawn({
        let lock = waiting.get_lock("closing");
        async move { lock.try_lock(Duration::from_secs(30), None).await }
    });
    assert!(
        eventually_async(Duration::from_secs(5), || numsub(&cluster, channel)
            == vec![1, 1, 1])
        .await
    );
    waiter.abort();
    let _ = waiter.await;
    drop(waiting);
    assert!(
        eventually_async(Duration::from_secs(5), || connections(&cluster) == before).await,
        "connections {:?}, {before:?} before the client",
        connections(&cluster)
    );
    held.unlock().await.expect("unlock");
}

/// On a current-thread runtime, so the log capture sees what the client's tasks write.
#[tokio::test(flavor = "current_thread")]
async fn subscriptions_follow_the_waiters_through_a_stopped_node_and_cancellation() {
    let logs = CapturedLogs::default();
    let _capture = logs.capture();
    let cluster = RedisCluster::start(3);
    let holder = client(&cluster).await;
    let waiting = client(&cluster).await;
    let channel = "redlock:stopped-sub:released";
    let held = holder.get_lock("stopped-sub");
    held.lock_with_lease(Duration::from_secs(60))
        .await
        .expect("held");
    // A waiter for another lock first, so the waiting client has its pub/sub connection to
    // every node before node 2 stops.
    let first_channel = "redlock:stopped-sub-first:released";
    let first_held = holder.get_lock("stopped-sub-first");
    first_held
        .lock_with_lease(Duration::from_secs(60))
        .await
        .expect("held");
    let first_waiter = tokio::spawn({
        let lock = waiting.get_lock("stopped-sub-first");
        async move { lock.try_lock(Duration::from_secs(30), None).await }
    });
    assert!(
        eventually_async(Duration::from_secs(5), || numsub(&cluster, first_channel)
            == vec![1, 1, 1])
        .await,
        "the first waiter subscribed: {:?}",
        numsub(&cluster, first_channel)
    );

    // Subscribing while node 2 is stopped: its subscribe times out and that connection is
    // dropped, not left subscribed; once it answers again, the waiter is subscribed there
    // exactly once.
    cluster.stop(2);
    let waiter = tokio::spawn({
        let lock = waiting.get_lock("stopped-sub");
        async move { lock.try_lock(Duration::from_secs(30), None).await }
    });
    assert!(
        eventually_async(Duration::from_secs(5), || numsub(&cluster, channel)
            == vec![1, 1])
        .await
    );
    // The event, not a guess at its time: node 2's SUBSCRIBE timed out (the library logs it,
    // naming the node).
    let stopped = format!("127.0.0.1:{}", cluster.node(2).port());
    let timed_out = || {
        logs.text()
            .lines()
            .any(|line| line.contains(&stopped) && line.contains("pub/sub request timed out"))
    };
    assert!(
        eventually_async(NODE_TIMEOUT * 25, timed_out).await,
        "node 2's subscribe never timed out: {}",
        logs.text()
    );
    cluster.resume(2);
    let both_subscribed = || {
        numsub(&cluster, channel) == vec![1, 1, 1]
            && numsub(&cluster, first_channel) == vec![1, 1, 1]
            && pubsub_connections(&cluster) == vec![1, 1, 1]
    };
    assert!(
        eventually_async(Duration::from_secs(10), both_subscribed).await,
        "subscribers {:?} and {:?}, pub/sub connections {:?}",
        numsub(&cluster, channel),
        numsub(&cluster, first_channel),
        pubsub_connections(&cluster)
    );

    // A waiter dropped mid-wait unsubscribes on the server.
    for waiter in [waiter, first_waiter] {
        waiter.abort();
        let _ = waiter.await;
    }
    assert!(
        eventually_async(Duration::from_secs(5), || numsub(&cluster, channel)
            == vec![0, 0, 0]
            && numsub(&cluster, first_channel) == vec![0, 0, 0])
        .await,
        "still subscribed: {:?} and {:?}",
        numsub(&cluster, channel),
        numsub(&cluster, first_channel)
    );
    assert_eq!(waiting.watched_channels(), 0);
    held.unlock().await.expect("unlock");
    first_held.unlock().await.expect("unlock");
}

/// Subscribers of each of `channels` on each running node: one connection and one
/// `PUBSUB NUMSUB` per node, whatever the number of channels.
fn numsubs(cluster: &RedisCluster, channels: &[String]) -> Vec<Vec<i64>> {
    cluster
        .nodes()
        .iter()
        .filter(|node| node.is_running())
        .map(|node| {
            let counts: Vec<(String, i64)> = redis::cmd("PUBSUB")
                .arg("NUMSUB")
                .arg(channels)
                .query(&mut node.connection())
                .unwrap_or_else(|e| panic!("PUBSUB NUMSUB on port {}: {e}", node.port()));
            counts.into_iter().map(|(_, count)| count).collect()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_node_does_not_serialise_subscriptions() {
    const WAITERS: usize = 20;
    // The waiting client's per-node timeout: long, so that subscriptions waiting for each
    // other's on the stopped node would cost seconds upon seconds, far beyond a busy machine's
    // noise, while subscriptions that do not wait cost nothing of it.
    const WAITING_TIMEOUT: Duration = Duration::from_secs(1);
    let cluster = RedisCluster::start(5);
    let holder = client(&cluster).await;
    let waiting = LockClient::builder()
        .nodes(cluster.urls())
        .node_timeout(WAITING_TIMEOUT)
        .build()
        .await
        .expect("client");
    let channels: Vec<String> = (0..WAITERS)
        .map(|i| format!("redlock:serial:{i}:released"))
        .collect();
    for i in 0..WAITERS {
        holder
            .get_lock(format!("serial:{i}"))
            .lock_with_lease(Duration::from_secs(60))
            .await
            .expect("held");
    }
    cluster.stop(4);
    // What one client-wide mutex held across each subscribe's timeout on the stopped node
    // made this: WAITERS per-node timeouts in a row.
    let serialised = WAITING_TIMEOUT * WAITERS as u32;
    let started = Instant::now();
    let waiters: Vec<_> = (0..WAITERS)
        .map(|i| {
            let lock = waiting.get_lock(format!("serial:{i}"));
            tokio::spawn(async move { lock.try_lock(Duration::from_secs(60), None).await })
        })
        .collect();
    let all_subscribed = || {
        numsubs(&cluster, &channels)
            .iter()
            .all(|counts| counts.iter().all(|n| *n == 1))
    };
    assert!(
        eventually_async(serialised, all_subscribed).await,
        "not subscribed after {serialised:?}: {:?}",
        numsubs(&cluster, &channels)
    );
    let took = started.elapsed();
    eprintln!("{WAITERS} waiters subscribed with a node stopped in {took:?}, {serialised:?} if serialised");
    // Each waiter waits for its own subscription only: a quarter of the serialised cost
    // leaves seconds for a busy machine and still fails if even a quarter of the waiters
    // queued behind the stopped node.
    assert!(
        took < serialised / 4,
        "{took:?}: subscriptions waited for each other ({serialised:?} if all did)"
    );
    for waiter in waiters {
        assert!(
            !waiter.is_finished(),
            "a waiter gave up: the locks are held"
        );
        waiter.abort();
    }
    cluster.resume(4);
    holder.shutdown().await;
    waiting.shutdown().await;
}
