//! Redis Cluster as a quorum member, on real clusters (3 masters and 3 replicas, joined by
//! `redis-cli --cluster create`): reentrancy with every key of a lock in its slot, waiters woken
//! through shard channels (and plain channels where those are missing, chosen again for each
//! pub/sub connection), the watchdog, a killed
//! holder process, replica acknowledgements (`WAIT`), a failover under a held lock and under a
//! waiter, and a quorum of three independent clusters.
//!
//! Timings are asserted against the configured lease with margins of a second or more, and no
//! bound assumes a holder process renewed on schedule; the figures are printed (`--nocapture`
//! shows them).

use std::time::{Duration, Instant};

use redlock_reentrant::{Error, LockClient, LockClientBuilder, RLock, ReplicaAcks, RetryPolicy};
use redlock_testkit::{
    eventually_async, kill_resp3_clients, shard_subscribers, subscribers as plain_subscribers,
    HolderProcess, ShardedCluster,
};
use redlock_tests::spawn_waiter;

/// The watchdog lease of the clients here: renewed every second.
const TIMEOUT: Duration = Duration::from_secs(3);
/// A per-node timeout generous enough for a loaded machine.
const NODE_TIMEOUT: Duration = Duration::from_millis(500);
/// How long past its lease a lock may take to free and be taken.
const LATE: Duration = Duration::from_millis(1500);
/// How much earlier than the PTTL a master reported a lock may be taken: redis-server counts in
/// whole milliseconds and reads its clock once per command. A measurement's grain, not room for
/// lateness.
const PTTL_GRAIN: Duration = Duration::from_millis(50);
/// How many times a one-shot attempt is made again when too few members answered in time (a
/// loaded machine): a missing answer is not a "no".
const RETRIES: u32 = 3;

/// Whether `lock` can be taken at once (and then it is held), asked again when too few members
/// answered in time.
async fn takes_at_once(lock: &RLock) -> bool {
    let mut retries = 0;
    loop {
        match lock.try_lock(Duration::ZERO, None).await {
            Ok(taken) => return taken,
            Err(err) if err.is_retryable() && retries < RETRIES => retries += 1,
            Err(err) => panic!("try_lock failed: {err}"),
        }
    }
}

/// A retry policy whose pauses add up to at least 13 s: 50-100 ms doubling to 0.5-1 s, 30
/// times.
const OUTLASTS_A_FAILOVER: RetryPolicy = RetryPolicy {
    retries: 30,
    base_delay: Duration::from_millis(100),
    max_delay: Duration::from_secs(1),
};

/// The configuration the clients here share: `members`, the watchdog lease [`TIMEOUT`] and
/// the per-node timeout [`NODE_TIMEOUT`].
fn builder_of(members: Vec<String>) -> LockClientBuilder {
    LockClient::builder()
        .nodes(members)
        .watchdog_timeout(TIMEOUT)
        .node_timeout(NODE_TIMEOUT)
}

async fn client_of(members: Vec<String>) -> LockClient {
    builder_of(members).build().await.expect("client")
}

/// A lock name whose slot `shard` serves: a lock on it tells when that shard takes locks
/// again.
fn name_on_shard(cluster: &ShardedCluster, client: &LockClient, shard: usize) -> String {
    (0..)
        .map(|i| format!("probe:{i}"))
        .find(|name| cluster.master_of(&key_of(client, name)) == shard)
        .expect("some name hashes to that shard")
}

/// Tries `client`'s lock on `name` until it is granted (the shard takes locks again, and the
/// client's cluster connection knows its master), then unlocks it. Returns how many tries
/// were refused.
///
/// # Panics
///
/// If the shard takes no lock within 30 s of `since`.
async fn until_the_shard_takes_locks(client: &LockClient, name: &str, since: Instant) -> usize {
    let lock = client.get_lock(name);
    let mut refused = 0;
    while !lock
        .try_lock(Duration::ZERO, Some(Duration::from_secs(5)))
        .await
        .unwrap_or(false)
    {
        refused += 1;
        assert!(
            since.elapsed() < Duration::from_secs(30),
            "the shard never took locks again"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    lock.unlock().await.expect("probe unlock");
    refused
}

fn key_of(client: &LockClient, name: &str) -> String {
    client.redlock().config().key_for(name)
}

/// How many subscribers `channel` has as a shard channel and as a plain channel, summed over
/// the running servers.
fn subscribers(cluster: &ShardedCluster, channel: &str) -> (i64, i64) {
    cluster
        .nodes()
        .iter()
        .filter(|node| node.is_running())
        .map(|node| {
            (
                shard_subscribers(node, channel),
                plain_subscribers(node, channel),
            )
        })
        .fold((0, 0), |(s, p), (ds, dp)| (s + ds, p + dp))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_member_locks_reentrantly_with_every_key_of_a_lock_in_its_slot() {
    let cluster = ShardedCluster::start(3, 1);
    let client = client_of(vec![cluster.url()]).await;
    let rival = client_of(vec![cluster.url()]).await;
    let lock = client.get_lock("invoice:7");
    let key = key_of(&client, "invoice:7");
    assert_eq!(key, "redlock:{invoice:7}", "the name is the hash tag");

    lock.lock().await.expect("lock");
    let first_token = lock.fencing_token().expect("token");
    lock.lock().await.expect("nested lock");
    assert_eq!(lock.hold_count().await.expect("count"), 2);
    let master = cluster.master_of(&key);
    let hash = cluster.hash_on(master, &key);
    assert_eq!(hash.len(), 1, "one owner: {hash:?}");
    assert_eq!(hash.values().next().map(String::as_str), Some("2"));
    let counter_key = format!("{key}:fencing-counter");
    let mut on_master = cluster.node(master).connection();
    let counter: Option<u64> = redis::cmd("GET")
        .arg(&counter_key)
        .query(&mut on_master)
        .expect("GET counter");
    assert_eq!(
        counter,
        Some(first_token),
        "the lock's own counter sits in its slot, on its master"
    );
    assert!(
        !takes_at_once(&rival.get_lock("invoice:7")).await,
        "held locks are refused to others"
    );

    // Locks on every shard at once: each script keeps to its lock's slot.
    let names: Vec<String> = (0..12).map(|i| format!("order:{i}")).collect();
    let masters: std::collections::HashSet<usize> = names
        .iter()
        .map(|name| cluster.master_of(&key_of(&client, name)))
        .collect();
    assert_eq!(masters.len(), 3, "the names spread over every shard");
    for name in &names {
        rival
            .get_lock(name)
            .lock()
            .await
            .expect("lock on its shard");
    }
    for name in &names {
        rival
            .get_lock(name)
            .unlock()
            .await
            .expect("unlock on its shard");
    }

    lock.unlock().await.expect("inner unlock");
    assert_eq!(lock.hold_count().await.expect("count"), 1);
    lock.unlock().await.expect("outer unlock");
    // One member, the cluster: the unlock returned on its answer, so the delete is done.
    assert!(cluster.hash_on(master, &key).is_empty(), "released");
    let next = rival.get_lock("invoice:7");
    next.lock().await.expect("the next holder");
    assert!(
        next.fencing_token().expect("token") > first_token,
        "tokens increase from holder to holder"
    );
    next.unlock().await.expect("unlock");
    client.shutdown().await;
    rival.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_wakes_a_waiter_through_the_locks_shard_channel() {
    let cluster = ShardedCluster::start(3, 1);
    handover_is_woken_by_the_release(&cluster, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_channels_wake_waiters_where_shard_channels_are_missing() {
    // Servers without SPUBLISH and SSUBSCRIBE, as before Redis 7.
    let cluster = ShardedCluster::start_with(
        3,
        1,
        &[
            "--rename-command",
            "SPUBLISH",
            "",
            "--rename-command",
            "SSUBSCRIBE",
            "",
        ],
    );
    handover_is_woken_by_the_release(&cluster, false).await;
}

/// A holder with a 60 s lease releases while another client waits: only the release message
/// can wake the waiter long before its 30 s fallback.
async fn handover_is_woken_by_the_release(cluster: &ShardedCluster, sharded: bool) {
    let holder = client_of(vec![cluster.url()]).await;
    let waiting = client_of(vec![cluster.url()]).await;
    handover(cluster, &holder, &waiting, "handover", sharded).await;
    holder.shutdown().await;
    waiting.shutdown().await;
}

/// `holder` holds `name` with a 60 s lease while a client of `waiting` waits for it on a shard
/// channel (`sharded`) or a plain one, then releases: only the release message can wake the
/// waiter long before its 30 s fallback. The waiter unlocks what it got.
async fn handover(
    cluster: &ShardedCluster,
    holder: &LockClient,
    waiting: &LockClient,
    name: &str,
    sharded: bool,
) {
    let held = holder.get_lock(name);
    held.lock_with_lease(Duration::from_secs(60))
        .await
        .expect("held");
    let waiter = spawn_waiter(waiting.get_lock(name), Duration::from_secs(30));
    let channel = format!("{}:released", key_of(holder, name));
    let expected = if sharded { (1, 0) } else { (0, 1) };
    assert!(
        eventually_async(Duration::from_secs(10), || subscribers(cluster, &channel)
            == expected)
        .await,
        "the waiter subscribes to {name} ({} channel): {:?}",
        if sharded { "shard" } else { "plain" },
        subscribers(cluster, &channel)
    );
    let released = Instant::now();
    held.unlock().await.expect("unlock");
    let (got, woke) = waiter.await.expect("task");
    assert!(got.expect("try_lock"), "the waiter takes the released lock");
    let handover = woke - released;
    eprintln!("cluster, sharded {sharded}: hand-over {handover:?} after the release");
    assert!(
        handover < Duration::from_secs(5),
        "woken by the message, not the 30 s fallback: {handover:?}"
    );
    assert!(
        eventually_async(Duration::from_secs(10), || subscribers(cluster, &channel)
            == (0, 0))
        .await,
        "the last waiter's subscription is dropped"
    );
}

/// Shard or plain channels are chosen for each pub/sub connection, not once for the life of
/// the process: after a shard refused `SSUBSCRIBE` as a command it does not have (a Redis 6
/// server during a rolling upgrade), the next connection tries shard channels again, and a
/// release another shard announces with `SPUBLISH` wakes its waiter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_pubsub_connection_tries_shard_channels_again_after_a_refusal() {
    // Server 0, a master, is still "Redis 6": no shard channels.
    let old_server = [
        "--rename-command",
        "SSUBSCRIBE",
        "",
        "--rename-command",
        "SPUBLISH",
        "",
    ];
    let cluster = ShardedCluster::start_with_each(3, 0, |i| {
        if i == 0 {
            old_server.to_vec()
        } else {
            Vec::new()
        }
    });
    let holder = client_of(vec![cluster.url()]).await;
    let waiting = client_of(vec![cluster.url()]).await;

    // A lock on the old server: its refusal makes the connection subscribe to plain channels,
    // where that server announces.
    let old = name_on_shard(&cluster, &holder, 0);
    handover(&cluster, &holder, &waiting, &old, false).await;

    // The waiter's pub/sub connection is made again (a server restarted in the upgrade, a
    // dropped connection): a lock on an upgraded server is waited for on its shard channel,
    // where that server announces (`SPUBLISH`).
    let killed: usize = cluster.nodes().iter().map(kill_resp3_clients).sum();
    assert!(killed > 0, "the waiter's pub/sub connection is closed");
    let new = name_on_shard(&cluster, &holder, 1);
    handover(&cluster, &holder, &waiting, &new, true).await;
    holder.shutdown().await;
    waiting.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watchdog_renews_a_cluster_lock_and_a_killed_holder_frees_it_within_its_lease() {
    let cluster = ShardedCluster::start(3, 1);
    let url = cluster.url();
    let holder = HolderProcess::spawn(
        env!("CARGO_BIN_EXE_holder"),
        "cron",
        TIMEOUT,
        std::slice::from_ref(&url),
    );
    let client = client_of(vec![url]).await;
    let lock = client.get_lock("cron");
    let key = key_of(&client, "cron");
    let master = cluster.master_of(&key);
    let pttl = || -> i64 {
        let mut connection = cluster.node(master).connection();
        redis::cmd("PTTL")
            .arg(&key)
            .query(&mut connection)
            .expect("PTTL")
    };

    // Renewed: across three leases, the key never runs low and nobody else gets it.
    let started = Instant::now();
    let mut lowest = i64::MAX;
    while started.elapsed() < TIMEOUT * 3 {
        let left = pttl();
        assert!(
            left > 0,
            "the holder's key is gone after {:?}",
            started.elapsed()
        );
        lowest = lowest.min(left);
        assert!(!takes_at_once(&lock).await, "taken from a living holder");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    println!(
        "lowest PTTL over {:?} of renewals: {lowest} ms",
        TIMEOUT * 3
    );
    assert!(
        lowest > 1000,
        "renewed every {:?}: the PTTL stays above a third of the lease, got {lowest} ms",
        TIMEOUT / 3
    );

    // The lease the master has just before the kill: renewals only lengthen it, and a dead
    // holder sends none, so the lock cannot be taken before it runs out.
    let read_at = Instant::now();
    let left = Duration::from_millis(u64::try_from(pttl()).expect("held before the kill"));
    holder.kill();
    let killed = Instant::now();
    let guard = lock
        .try_acquire(Duration::from_secs(10), None)
        .await
        .expect("try_acquire answers")
        .expect("the lock frees once the killed holder's lease runs out");
    let taken_at = Instant::now();
    let took = taken_at - killed;
    println!(
        "kill -> acquired in {took:?} (lease {TIMEOUT:?}, {left:?} left just before the kill)"
    );
    assert!(took < TIMEOUT + LATE, "freed {took:?} after the kill");
    assert!(
        taken_at - read_at + PTTL_GRAIN >= left,
        "taken {:?} after the master was seen to hold {left:?} more",
        taken_at - read_at
    );
    assert!(guard.fencing_token() > holder.token());
    guard.unlock().await.expect("unlock");
    client.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replica_acknowledgements_refuse_a_write_no_replica_has() {
    let cluster = ShardedCluster::start(3, 1);
    let client = builder_of(vec![cluster.url()])
        .replica_acks(ReplicaAcks {
            replicas: 1,
            timeout: Duration::from_millis(200),
        })
        .build()
        .await
        .expect("client");
    let lock = client.get_lock("confirmed");
    let key = key_of(&client, "confirmed");
    lock.lock().await.expect("confirmed by the replica");
    lock.unlock().await.expect("unlock");

    // Pause the shard's replica: the master still takes the write, but no replica acknowledges
    // it, so the member does not count it, and the attempt is undone.
    let master = cluster.master_of(&key);
    let replica = replica_of(&cluster, master);
    cluster.node(replica).stop();
    let refused = lock.try_lock(Duration::ZERO, None).await;
    cluster.node(replica).resume();
    match refused {
        Err(Error::NoQuorum { .. }) => {}
        other => panic!("an unreplicated acquisition must not count: {other:?}"),
    }
    assert!(
        eventually_async(Duration::from_secs(5), || cluster
            .hash_on(master, &key)
            .is_empty())
        .await,
        "the unconfirmed grant is undone"
    );
    lock.lock()
        .await
        .expect("confirmed again once the replica is back");
    lock.unlock().await.expect("unlock");
    client.shutdown().await;
}

/// More than the loopback socket buffers can hold between a master and a paused replica: four
/// times the largest send and receive buffers the kernel allows, and at least 32 MB.
fn ballast_bytes() -> usize {
    let largest = |path: &str| -> usize {
        std::fs::read_to_string(path)
            .ok()
            .and_then(|line| line.split_whitespace().last()?.parse().ok())
            .unwrap_or(0)
    };
    let buffers = largest("/proc/sys/net/ipv4/tcp_wmem") + largest("/proc/sys/net/ipv4/tcp_rmem");
    (buffers * 4).max(32 << 20)
}

/// The replica of `master` (a server whose `ROLE` names `master`'s port).
fn replica_of(cluster: &ShardedCluster, master: usize) -> usize {
    let port = i64::from(cluster.node(master).port());
    (0..cluster.nodes().len())
        .find(|&i| {
            let mut connection = cluster.node(i).connection();
            let role: Vec<redis::Value> = redis::cmd("ROLE").query(&mut connection).expect("ROLE");
            matches!(role.first(), Some(redis::Value::BulkString(r)) if r == b"slave")
                && matches!(role.get(2), Some(redis::Value::Int(p)) if *p == port)
        })
        .expect("every master has a replica")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_under_a_held_lock_keeps_it_or_tells_its_holder_at_the_next_renewal() {
    let cluster = ShardedCluster::start(3, 1);
    // A lease that outlasts the failover (node timeout 1.5 s, then an election).
    let lease = Duration::from_secs(10);
    let client = builder_of(vec![cluster.url()])
        .watchdog_timeout(lease)
        .build()
        .await
        .expect("client");
    let rival = client_of(vec![cluster.url()]).await;
    let guard = client.get_lock("migration").acquire().await.expect("held");
    let key = key_of(&client, "migration");
    let master = cluster.master_of(&key);
    let probe = name_on_shard(&cluster, &client, master);

    cluster.node(master).kill();
    let killed = Instant::now();
    let promoted = cluster.wait_for_failover(&key, master);
    let failed_over = killed.elapsed();
    let refused = until_the_shard_takes_locks(&rival, &probe, killed).await;
    let locking_again = killed.elapsed();

    // The holder either kept its lock (the replica had it), and then the rival never gets it,
    // or is told it lost it at its first renewal on the promoted master (the documented
    // window of asynchronous replication).
    let rival_lock = rival.get_lock("migration");
    let kept = !guard.is_lost() && !cluster.hash_on(promoted, &key).is_empty();
    if kept {
        assert!(
            !rival_lock
                .try_lock(Duration::ZERO, None)
                .await
                .unwrap_or(false),
            "the rival took a lock its holder still has"
        );
        // Renewals reach the new master: its PTTL rises again within two renewal intervals.
        let pttl = || -> i64 {
            redis::cmd("PTTL")
                .arg(&key)
                .query(&mut cluster.node(promoted).connection())
                .expect("PTTL")
        };
        // Once the PTTL is below what a renewal half an interval ago would leave, a rise can
        // only be a renewal that reached the new master.
        let interval = lease / 3;
        let low = i64::try_from((lease - interval / 2).as_millis()).unwrap_or(i64::MAX);
        assert!(
            eventually_async(lease, || (1..low).contains(&pttl())).await,
            "the promoted replica holds the key, its lease running down"
        );
        let before = pttl();
        assert!(
            eventually_async(interval * 2, || pttl() > before).await,
            "a renewal reached the promoted master (PTTL {before} ms never rose)"
        );
    } else {
        // The replica did not have the grant: the caveat of asynchronous replication
        // (docs/deployments.md). The holder's first renewal on the promoted master tells it
        // (`NotOwner`), within a renewal interval (a lease here is room for a busy machine);
        // until then a rival may get in, which is that documented window: counted, not refused.
        let deadline = Instant::now() + lease;
        let mut in_the_window = 0;
        while !guard.is_lost() {
            assert!(
                Instant::now() < deadline,
                "a holder whose key is gone is told within a lease"
            );
            if rival_lock
                .try_lock(Duration::ZERO, None)
                .await
                .unwrap_or(false)
            {
                in_the_window += 1;
                rival_lock.unlock().await.expect("rival unlock");
            }
            // Paced by the event it waits for: the holder's loss ends the pause at once.
            let _ = tokio::time::timeout(Duration::from_millis(100), guard.lost()).await;
        }
        let reason = guard.lost().await;
        // Told: the lock frees within a lease of the holder's last renewal, for the rival.
        assert!(
            rival_lock
                .try_lock(lease + LATE, None)
                .await
                .expect("the rival asks"),
            "the lock frees once its holder is told it lost it"
        );
        rival_lock.unlock().await.expect("rival unlock");
        println!(
            "holder told: {reason:?}; the rival got in {in_the_window} times before (the window of asynchronous replication)"
        );
    }
    println!(
        "failover: replica promoted {failed_over:?} after the kill, the shard took locks again \
         {locking_again:?} after the kill ({refused} refusals); holder kept its lock: {kept}"
    );
    if kept {
        guard.unlock().await.expect("unlock after the failover");
    }
    client.shutdown().await;
    rival.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_that_loses_the_grant_tells_the_holder_and_tokens_still_increase() {
    // The replication caveat, provoked: the shard's replica is paused, and 32 MB written to the
    // shard first fill the replication socket, so the grant after them is still in the master's
    // output buffer when the master is killed: the promoted replica never has it.
    let cluster = ShardedCluster::start(3, 1);
    let lease = Duration::from_secs(10);
    let client = builder_of(vec![cluster.url()])
        .watchdog_timeout(lease)
        .build()
        .await
        .expect("client");
    let rival = client_of(vec![cluster.url()]).await;
    let key = key_of(&client, "lost-write");
    let master = cluster.master_of(&key);
    let replica = replica_of(&cluster, master);
    // An earlier hold leaves the lock's fencing counter on both, so the failover brings back an
    // older counter, not a missing one (which the clock start would cover anyway).
    let earlier = client.get_lock("lost-write");
    earlier.lock().await.expect("an earlier hold");
    earlier.unlock().await.expect("unlock");
    let counter_key = format!("{key}:fencing-counter");
    let counter_on = |node: usize| -> Option<u64> {
        let mut connection = cluster.node(node).connection();
        let _: () = redis::cmd("READONLY")
            .query(&mut connection)
            .expect("READONLY");
        redis::cmd("GET")
            .arg(&counter_key)
            .query(&mut connection)
            .expect("GET counter")
    };
    assert!(
        eventually_async(Duration::from_secs(5), || counter_on(replica).is_some()
            && counter_on(replica) == counter_on(master))
        .await,
        "the replica has the counter"
    );
    cluster.node(replica).stop();
    let _: () = redis::cmd("SET")
        .arg(format!("{key}:ballast"))
        .arg(vec![b'x'; ballast_bytes()])
        .query(&mut cluster.node(master).connection())
        .expect("SET the ballast");
    let guard = client.get_lock("lost-write").acquire().await.expect("held");
    let held_token = guard.fencing_token();
    cluster.node(master).kill();
    let killed = Instant::now();
    cluster.node(replica).resume();
    let promoted = cluster.wait_for_failover(&key, master);
    assert!(
        cluster.hash_on(promoted, &key).is_empty(),
        "the promoted replica never had the grant"
    );
    assert!(
        counter_on(promoted) < Some(held_token),
        "the promoted replica's counter is older than the lost holder's token"
    );
    // The window the caveat describes: the rival can take the lock while the holder has not
    // heard yet. Its token is still above the holder's: the counter came back older, and
    // cluster members take the clock at every new hold.
    let rival_lock = rival.get_lock("lost-write");
    let mut taken = false;
    while !taken {
        taken = rival_lock
            .try_lock(Duration::ZERO, Some(Duration::from_secs(30)))
            .await
            .unwrap_or(false);
        if !taken {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(
            killed.elapsed() < Duration::from_secs(30),
            "the shard never took locks again"
        );
    }
    let rival_token = rival_lock.fencing_token().expect("token");
    assert!(
        rival_token > held_token,
        "tokens increase across a failover that lost the counter's last write: {rival_token} after {held_token}"
    );
    let reason = tokio::time::timeout(lease, guard.lost())
        .await
        .expect("the holder is told at its next renewal");
    assert_eq!(reason, redlock_reentrant::LostReason::NotOwner);
    println!(
        "lost write: holder told {reason:?} {:?} after the kill (renewal interval {:?})",
        killed.elapsed(),
        lease / 3
    );
    rival_lock.unlock().await.expect("unlock");
    client.shutdown().await;
    rival.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quorum_of_standalone_masters_and_a_cluster_locks_and_wakes_waiters() {
    let masters = redlock_testkit::RedisCluster::start(2);
    let cluster = ShardedCluster::start(3, 0);
    let mut members = masters.urls();
    members.push(cluster.url());
    let holder = client_of(members.clone()).await;
    let waiting = client_of(members).await;
    let key = key_of(&holder, "mixed");
    assert_eq!(key, "redlock:{mixed}", "hash-tagged on every member");
    let lock = holder.get_lock("mixed");
    lock.lock().await.expect("lock");
    lock.lock().await.expect("nested");
    assert!(
        eventually_async(Duration::from_secs(5), || {
            masters.count_keys(&key) + cluster.hash_on(cluster.master_of(&key), &key).len() == 3
        })
        .await,
        "held on all three members"
    );
    let waiter = spawn_waiter(waiting.get_lock("mixed"), Duration::from_secs(30));
    assert!(
        eventually_async(Duration::from_secs(10), || waiting.watched_channels() == 1).await,
        "the waiter subscribes"
    );
    lock.unlock().await.expect("inner");
    let released = Instant::now();
    lock.unlock().await.expect("outer");
    let (got, woke) = waiter.await.expect("task");
    assert!(got.expect("try_lock"), "the waiter takes it");
    assert!(
        woke - released < Duration::from_secs(5),
        "woken by a release message, not the 30 s fallback"
    );
    masters.kill(0);
    lock.lock()
        .await
        .expect("one standalone master and the cluster are a majority");
    lock.unlock().await.expect("unlock");
    holder.shutdown().await;
    waiting.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_clusters_make_one_quorum_that_outlives_one_of_them() {
    // Three independent clusters, one vote each ("beyond one datacenter"), no replicas.
    let clusters: Vec<ShardedCluster> = (0..3).map(|_| ShardedCluster::start(3, 0)).collect();
    let members: Vec<String> = clusters.iter().map(ShardedCluster::url).collect();
    let client = client_of(members.clone()).await;
    let rival = client_of(members).await;
    let lock = client.get_lock("ledger");
    let key = key_of(&client, "ledger");
    lock.lock().await.expect("lock on three clusters");
    // Decided at the first majority: the third grant may still be on its way.
    let held_on = || {
        clusters
            .iter()
            .filter(|cluster| cluster.hash_on(cluster.master_of(&key), &key).len() == 1)
            .count()
    };
    assert!(
        eventually_async(Duration::from_secs(5), || held_on() == 3).await,
        "held on every member"
    );
    let first = lock.fencing_token().expect("token");
    lock.unlock().await.expect("unlock");

    // One whole member gone (its shard for the lock killed): a majority of two still decides.
    let lost = clusters[0].master_of(&key);
    clusters[0].node(lost).kill();
    lock.lock()
        .await
        .expect("two members of three are a majority");
    assert!(lock.fencing_token().expect("token") > first);
    assert!(
        !takes_at_once(&rival.get_lock("ledger")).await,
        "one holder at a time"
    );
    lock.unlock().await.expect("unlock");
    let next = rival.get_lock("ledger");
    // Released by a majority; the last member's delete may still be on its way.
    assert!(
        next.try_lock(TIMEOUT, None).await.expect("asks"),
        "free again"
    );
    next.unlock().await.expect("unlock");
    client.shutdown().await;
    rival.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_whose_shard_fails_over_is_subscribed_again_and_woken_by_the_release() {
    let cluster = ShardedCluster::start(3, 1);
    let holder = client_of(vec![cluster.url()]).await;
    // Retries that outlast a failover (at least 13 s of pauses, docs/deployments.md): the
    // waiter is woken during the outage (its subscription confirmed again before the promotion) and
    // its attempts fail with `NoQuorum` until the promotion; the default policy gives up.
    let waiting = builder_of(vec![cluster.url()])
        .retry(OUTLASTS_A_FAILOVER)
        .build()
        .await
        .expect("client");
    let name = "nightly-report";
    let key = key_of(&holder, name);
    let channel = format!("{key}:released");
    // A fixed lease far longer than the test: only the release can let the waiter in.
    let lease = Duration::from_secs(120);
    let held = holder.get_lock(name);
    held.lock_with_lease(lease).await.expect("held");
    let master = cluster.master_of(&key);
    let replica = replica_of(&cluster, master);
    let replica_has_grant = || {
        let mut connection = cluster.node(replica).connection();
        redis::cmd("READONLY")
            .query::<()>(&mut connection)
            .expect("READONLY");
        redis::cmd("EXISTS")
            .arg(&key)
            .query::<bool>(&mut connection)
            .expect("EXISTS on the replica")
    };
    assert!(
        eventually_async(Duration::from_secs(10), replica_has_grant).await,
        "the grant reaches the replica before its master dies"
    );
    let waiter = spawn_waiter(waiting.get_lock(name), Duration::from_secs(90));
    assert!(
        eventually_async(Duration::from_secs(10), || subscribers(&cluster, &channel)
            == (1, 0))
        .await,
        "the waiter subscribes to the lock's shard channel: {:?}",
        subscribers(&cluster, &channel)
    );

    cluster.node(master).kill();
    let killed = Instant::now();
    let promoted = cluster.wait_for_failover(&key, master);
    assert_eq!(
        promoted, replica,
        "the replica that has the grant takes over"
    );
    // The holder's client learns the new master through a lock of another name on the shard.
    let probe = name_on_shard(&cluster, &holder, promoted);
    until_the_shard_takes_locks(&holder, &probe, killed).await;
    assert!(
        eventually_async(Duration::from_secs(20), || shard_subscribers(
            cluster.node(promoted),
            &channel
        ) == 1)
        .await,
        "the waiter subscribes again on the promoted master: {:?}",
        subscribers(&cluster, &channel)
    );
    let resubscribed = killed.elapsed();
    assert!(
        !waiter.is_finished(),
        "the waiter still waits: the lock is held"
    );

    let released = Instant::now();
    held.unlock()
        .await
        .expect("the holder releases on the promoted master");
    let (got, woke) = waiter.await.expect("task");
    assert!(got.expect("try_lock"), "the waiter takes the released lock");
    let handover = woke - released;
    eprintln!(
        "failover under a waiter: subscribed again {resubscribed:?} after the kill, \
         hand-over {handover:?} after the release"
    );
    assert!(
        handover < Duration::from_secs(10),
        "woken by the release, not by the lease running out: {handover:?}"
    );
    holder.shutdown().await;
    waiting.shutdown().await;
}
