//! The Redlock core while masters die, pause, come back empty, or forget their scripts.

use std::time::{Duration, Instant};

use redlock_core::{Error, NodeErrorKind, Redlock, RedlockConfig, ReplicaAcks, RetryPolicy};
use redlock_testkit::{eventually, eventually_async, RedisCluster, RedisServer};
use redlock_tests::released_everywhere;

/// Far longer than a healthy node takes on a busy machine, far shorter than the lease.
const NODE_TIMEOUT: Duration = Duration::from_millis(500);
const LEASE: Duration = Duration::from_secs(30);

/// A client connected to every running node (a client connects lazily; the first request would
/// otherwise have to connect and load its script within one per-node timeout).
async fn redlock(cluster: &RedisCluster, retry: RetryPolicy) -> Redlock {
    redlock_with(cluster, NODE_TIMEOUT, retry).await
}

async fn redlock_with(
    cluster: &RedisCluster,
    node_timeout: Duration,
    retry: RetryPolicy,
) -> Redlock {
    let client = Redlock::new(RedlockConfig {
        node_timeout: Some(node_timeout),
        retry,
        ..RedlockConfig::with_nodes(cluster.urls())
    })
    .expect("valid config");
    let running = cluster
        .nodes()
        .iter()
        .filter(|node| node.is_running())
        .count();
    assert_eq!(
        client.readiness().await.reachable(),
        running,
        "every running node answers"
    );
    client
}

#[tokio::test]
async fn two_killed_masters_of_five_still_grant_the_lock() {
    let cluster = RedisCluster::start(5);
    let client = redlock(&cluster, RetryPolicy::none()).await;
    cluster.kill(0);
    cluster.kill(3);

    let lease = client
        .acquire("order:1", LEASE)
        .await
        .expect("majority of 3 grants");
    assert_eq!(lease.granted_by(), 3);
    assert_eq!(cluster.count_keys("redlock:order:1"), 3);
    client
        .release(&lease)
        .await
        .expect("released on the living majority");
    released_everywhere(&cluster, "redlock:order:1", LEASE / 3).await;
}

#[tokio::test]
async fn two_paused_masters_are_not_waited_for() {
    // A per-node timeout far longer than any healthy operation: waiting for a paused node
    // even once would show.
    const PATIENT: Duration = Duration::from_secs(10);
    let cluster = RedisCluster::start(5);
    let client = Redlock::new(RedlockConfig {
        node_timeout: Some(PATIENT),
        retry: RetryPolicy::none(),
        ..RedlockConfig::with_nodes(cluster.urls())
    })
    .expect("valid config");
    cluster.stop(1);
    cluster.stop(4);

    let started = Instant::now();
    let lease = client
        .acquire("order:2", LEASE)
        .await
        .expect("majority of 3 grants");
    assert_eq!(lease.granted_by(), 3);
    client
        .release(&lease)
        .await
        .expect("released by the running three");
    let took = started.elapsed();
    assert!(
        took < PATIENT / 2,
        "decided by the running majority, not by the paused nodes' timeout ({PATIENT:?}): {took:?}"
    );
    let budget = LEASE - PATIENT / 2 - client.config().drift_for(LEASE);
    assert!(lease.validity() > budget, "validity {:?}", lease.validity());
    cluster.resume(1);
    cluster.resume(4);
    // The paused nodes ran the acquisition and then its release, in that order.
    assert!(
        eventually_async(Duration::from_secs(5), || cluster
            .count_keys("redlock:order:2")
            == 0)
        .await
    );
}

#[tokio::test]
async fn three_dead_masters_fail_fast_with_no_quorum_and_leave_nothing() {
    let cluster = RedisCluster::start(5);
    cluster.kill(0);
    cluster.kill(1);
    cluster.kill(2);

    // A per-node timeout far longer than the bound below: waiting for a dead node even once
    // would show.
    const PATIENT: Duration = Duration::from_secs(10);
    for retry in [RetryPolicy::none(), RetryPolicy::default()] {
        let client = redlock_with(&cluster, PATIENT, retry).await;
        let started = Instant::now();
        let err = client
            .acquire("order:3", LEASE)
            .await
            .expect_err("no majority");
        let took = started.elapsed();
        match &err {
            Error::NoQuorum {
                answered,
                nodes,
                needed,
                source,
                ..
            } => {
                assert_eq!((*answered, *nodes, *needed), (2, 5, 3));
                assert!(source.is_some(), "the first node failure is the source");
            }
            other => panic!("expected NoQuorum, got {other:?}"),
        }
        assert!(err.is_retryable());
        // Dead nodes refuse at once: four attempts with their backoff (at most 140 ms) take
        // far less than one per-node timeout.
        assert!(took < PATIENT / 2, "gave up after {took:?}");
        // The two live grants were undone (a key left until its lease runs out fails).
        released_everywhere(&cluster, "redlock:order:3", LEASE / 3).await;
    }
}

#[tokio::test]
async fn three_paused_masters_get_the_release_after_the_grant_when_they_resume() {
    let cluster = RedisCluster::start(5);
    let client = redlock(&cluster, RetryPolicy::none()).await;
    // Connect first, so the paused nodes hold the acquisition's request in their sockets.
    let warmup = client.acquire("warmup", LEASE).await.expect("all up");
    client.release(&warmup).await.expect("released");
    for node in 0..3 {
        cluster.stop(node);
    }

    let err = client
        .acquire("order:4", LEASE)
        .await
        .expect_err("no majority");
    assert!(
        matches!(err, Error::NoQuorum { answered: 2, .. }),
        "{err:?}"
    );
    // The two running nodes' grants were undone (the paused ones are not counted).
    released_everywhere(&cluster, "redlock:order:4", LEASE / 3).await;
    for node in 0..3 {
        cluster.resume(node);
    }
    // The resumed nodes now run the queued grant and then the release behind it; the 30 s
    // lease cannot be what empties them within 5 s.
    assert!(
        eventually(Duration::from_secs(5), || cluster
            .count_keys("redlock:order:4")
            == 0),
        "a resumed node kept the abandoned grant: {:?}",
        (0..5)
            .map(|i| cluster.keys_on(i, "redlock:*"))
            .collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn a_master_restarted_empty_rejoins_and_counts_again() {
    let cluster = RedisCluster::start(5);
    // Retries: the restarted node is reconnected in the background, and the claim is that it
    // counts again, not that it does so on the first attempt.
    let client = redlock(&cluster, RetryPolicy::default()).await;
    let first = client.acquire("order:5", LEASE).await.expect("all up");
    client.release(&first).await.expect("released");

    cluster.kill(0);
    cluster.kill(1);
    cluster.kill(2);
    assert!(matches!(
        client.acquire("order:5", LEASE).await,
        Err(Error::NoQuorum { .. })
    ));

    cluster.restart(0);
    let lease = client
        .acquire("order:5", LEASE)
        .await
        .expect("the restarted node makes a majority again");
    assert_eq!(lease.granted_by(), 3);
    assert_eq!(
        cluster.keys_on(0, "redlock:*"),
        vec!["redlock:order:5".to_owned()]
    );
    client.release(&lease).await.expect("released");
}

#[tokio::test]
async fn script_flush_between_operations_is_invisible() {
    let cluster = RedisCluster::start(5);
    let client = redlock(&cluster, RetryPolicy::none()).await;
    for round in 0..3 {
        let name = format!("flushed:{round}");
        cluster.flush_scripts();
        let lease = client
            .acquire(&name, LEASE)
            .await
            .expect("acquire after flush");
        cluster.flush_scripts();
        let lease = client
            .extend(&lease, LEASE)
            .await
            .expect("extend after flush");
        cluster.flush_scripts();
        let rival = client.acquire_once(&name, LEASE).await;
        assert!(matches!(rival, Err(Error::Contended { .. })), "{rival:?}");
        cluster.flush_scripts();
        client.release(&lease).await.expect("release after flush");
        // Decided by a majority; the others' releases (resent whole after their NOSCRIPT)
        // land right after.
        released_everywhere(&cluster, "redlock:*", LEASE / 3).await;
    }
}

#[tokio::test]
async fn a_script_sent_again_after_noscript_is_confirmed_by_a_wait_of_its_own() {
    // The replica syncs at once, not after the default 5 s of waiting for more of them; the
    // master pings it rarely (a ping is a write the paused replica would not acknowledge).
    let master = RedisServer::builder()
        .args(["--repl-diskless-sync-delay", "0"])
        .args(["--repl-ping-replica-period", "60"])
        .start();
    let replica = RedisServer::builder()
        .arg("--replicaof")
        .args(["127.0.0.1", master.port().to_string().as_str()])
        .start();
    assert!(
        eventually(Duration::from_secs(10), || replica_confirms_a_write(
            &master
        )),
        "the replica syncs"
    );
    // Room for two `WAIT`s of a second each (the one after `NOSCRIPT`, the resent one's).
    let client = Redlock::new(RedlockConfig {
        node_timeout: Some(Duration::from_secs(3)),
        retry: RetryPolicy::none(),
        replica_acks: Some(ReplicaAcks {
            replicas: 1,
            timeout: Duration::from_secs(1),
        }),
        ..RedlockConfig::with_nodes(vec![master.url()])
    })
    .expect("valid config");
    // Confirmed by the replica; the script is cached from now on, so the next acquisition
    // sends it by SHA.
    let first = client
        .acquire("acks:first", LEASE)
        .await
        .expect("confirmed");

    // The master forgets its scripts and the replica stops acknowledging once it has all the
    // master sent. The `WAIT` after the refused `EVALSHA` asks for nothing new (Redis 7 counts
    // up to the master's offset then) and answers 1 at once; only a `WAIT` after the script
    // sent again by source can tell that its write reached no replica.
    redis::cmd("SCRIPT")
        .arg("FLUSH")
        .exec(&mut master.connection())
        .expect("SCRIPT FLUSH");
    assert!(
        eventually(Duration::from_secs(10), || replica_acknowledged_all(
            &master
        )),
        "the replica acknowledges the whole replication stream"
    );
    replica.stop();
    let refused = client.acquire("acks:second", LEASE).await;
    replica.resume();
    match refused {
        Err(Error::NoQuorum {
            source: Some(ref node),
            ..
        }) if matches!(
            node.kind,
            NodeErrorKind::NotReplicated {
                acked: 0,
                wanted: 1
            }
        ) => {}
        other => panic!("a write no replica has must not count: {other:?}"),
    }
    let left = || -> Vec<String> {
        redis::cmd("KEYS")
            .arg("redlock:acks:second")
            .query(&mut master.connection())
            .expect("KEYS")
    };
    assert!(
        eventually_async(Duration::from_secs(5), || left().is_empty()).await,
        "the unconfirmed grant is undone: {:?}",
        left()
    );

    assert!(
        eventually_async(Duration::from_secs(10), || replica_confirms_a_write(
            &master
        ))
        .await,
        "the replica acknowledges again once resumed"
    );
    let second = client
        .acquire("acks:second", LEASE)
        .await
        .expect("confirmed once the replica is back");
    client.release(&second).await.expect("release");
    client.release(&first).await.expect("release");
}

/// Whether the master's replica acknowledges a write of ours within a second (and so every
/// write before it). After a diskless sync a replica gets the replication stream only from its
/// first acknowledgement, up to a second later: this waits through that too.
fn replica_confirms_a_write(master: &RedisServer) -> bool {
    let mut connection = master.connection();
    redis::cmd("SET")
        .arg("replication-probe")
        .arg(1)
        .exec(&mut connection)
        .expect("SET");
    let acked: i64 = redis::cmd("WAIT")
        .arg(1)
        .arg(1000)
        .query(&mut connection)
        .expect("WAIT");
    acked >= 1
}

/// Whether the master's replica has acknowledged its whole replication stream, up to the
/// master's offset (replicas acknowledge once a second, and at once when a `WAIT` asks; a
/// `WAIT` that asks sends the request down the stream, which the next acknowledgement covers).
fn replica_acknowledged_all(master: &RedisServer) -> bool {
    let info: String = redis::cmd("INFO")
        .arg("replication")
        .query(&mut master.connection())
        .expect("INFO replication");
    let sent = info.lines().find_map(|line| {
        line.strip_prefix("master_repl_offset:")?
            .trim()
            .parse::<i64>()
            .ok()
    });
    let acknowledged = info
        .lines()
        .find_map(|line| line.strip_prefix("slave0:"))
        .and_then(|line| {
            line.split(',')
                .find_map(|pair| pair.strip_prefix("offset=")?.parse::<i64>().ok())
        });
    sent.is_some() && sent == acknowledged
}
