//! The watchdog renewing core's plain (non-reentrant) lock: renewed while held, never after
//! release, side by side with reentrant holds in one watchdog, a lost majority told to the
//! holder in time, and a dropped lease released.
//!
//! A short timeout (3 s, renewed every 1 s) keeps the suite fast; the ratio is the default's.

use std::time::{Duration, Instant};

use redlock_reentrant::{
    redis, Error, LockClient, LostReason, Redlock, RedlockConfig, Watchdog, WatchdogConfig,
    WatchdogStats,
};
use redlock_testkit::{eventually_async, pttls, Monitor, RedisCluster};
use redlock_tests::{released_everywhere, rounds_pass};

const TIMEOUT: Duration = Duration::from_secs(3);
/// A thirtieth of the lease, as in the other watchdog tests: room for a busy machine.
const NODE_TIMEOUT: Duration = Duration::from_millis(100);

fn watchdog(cluster: &RedisCluster) -> Watchdog {
    let redlock = Redlock::new(RedlockConfig {
        node_timeout: Some(NODE_TIMEOUT),
        ..RedlockConfig::with_nodes(cluster.urls())
    })
    .expect("redlock");
    Watchdog::start(
        redlock,
        WatchdogConfig {
            timeout: TIMEOUT,
            ..WatchdogConfig::default()
        },
    )
    .expect("watchdog")
}

/// The PTTL a majority of `ttls` has at least (`-2`: absent). A Redlock lease lives on a
/// majority: a node that timed out lately is skipped while a majority answers, so a hold may be
/// missing from it, and renewals never recreate it there.
fn majority_pttl(ttls: &[i64]) -> i64 {
    let mut ttls = ttls.to_vec();
    ttls.sort_unstable();
    ttls[ttls.len() / 2]
}

/// The plain lock's batch renewal script, as `redlock-core` compiles it (its `lua.rs` includes
/// the same file; the test checks that the SHAs agree).
const RENEW_SOURCE: &str = include_str!("../../redlock-core/src/lua/renew.lua");

/// The keys of every renewal call among MONITOR `lines`: calls of the renewal script, by its
/// SHA (`EVALSHA`) or whole (`EVAL`, the first call on a connection). Nothing else counts: the
/// acquisition, the release and the test's own reads mention the key too.
fn renewal_batches(lines: &[String]) -> Vec<Vec<String>> {
    let sha = Redlock::renew_script().sha();
    assert_eq!(
        redis::Script::new(RENEW_SOURCE).get_hash(),
        sha,
        "RENEW_SOURCE is the script the watchdog sends"
    );
    lines
        .iter()
        .map(|line| monitor_args(line))
        .filter_map(|args| {
            let script = match args.first()?.to_ascii_uppercase().as_str() {
                "EVALSHA" => args.get(1)?.eq_ignore_ascii_case(sha),
                "EVAL" => args.get(1)? == RENEW_SOURCE,
                _ => false,
            };
            let keys: usize = args.get(2)?.parse().ok()?;
            script.then(|| args.get(3..3 + keys).map(<[String]>::to_vec))?
        })
        .collect()
}

/// The arguments of one line of redis-server's MONITOR output
/// (`+<time> [<db> <client>] "ARG" "ARG" ...`), unescaped: each is quoted, with `\"`, `\\`,
/// `\n`, `\r`, `\t`, `\a`, `\b` and `\xHH` escapes.
fn monitor_args(line: &str) -> Vec<String> {
    let Some(start) = line.find("] \"") else {
        return Vec::new();
    };
    let mut bytes = line.as_bytes()[start + 2..].iter().copied();
    let mut args = Vec::new();
    while bytes.next() == Some(b'"') {
        let mut arg = Vec::new();
        loop {
            match bytes.next() {
                None => return args,
                Some(b'"') => break,
                Some(b'\\') => match bytes.next() {
                    Some(b'n') => arg.push(b'\n'),
                    Some(b'r') => arg.push(b'\r'),
                    Some(b't') => arg.push(b'\t'),
                    Some(b'a') => arg.push(7),
                    Some(b'b') => arg.push(8),
                    Some(b'x') => {
                        let hex = [bytes.next(), bytes.next()];
                        let hex: String = hex.iter().flatten().map(|&b| char::from(b)).collect();
                        arg.push(u8::from_str_radix(&hex, 16).unwrap_or(b'?'));
                    }
                    Some(other) => arg.push(other),
                    None => return args,
                },
                Some(other) => arg.push(other),
            }
        }
        args.push(String::from_utf8_lossy(&arg).into_owned());
        if bytes.next() != Some(b' ') {
            break;
        }
    }
    args
}

/// The watchdog's counters between two rounds. A round bumps `rounds` and `calls_per_node`
/// one after the other, so one read can fall between the two; two reads a tenth of an interval
/// apart that agree did not (the next round is most of an interval away).
async fn settled_stats(watchdog: &Watchdog) -> WatchdogStats {
    for _ in 0..100 {
        let first = watchdog.stats();
        tokio::time::sleep(watchdog.config().renew_interval() / 10).await;
        if watchdog.stats() == first {
            return first;
        }
    }
    panic!(
        "the watchdog's counters never settled: {:?}",
        watchdog.stats()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_lock_is_renewed_while_held_and_never_after_release() {
    let cluster = RedisCluster::start(3);
    let watchdog = watchdog(&cluster);
    let monitors: Vec<Monitor> = cluster
        .nodes()
        .iter()
        .map(|node| Monitor::start(node.port()).expect("MONITOR"))
        .collect();
    let renewals_of = |key: &str| -> Vec<Vec<String>> {
        let lines: Vec<String> = monitors.iter().flat_map(Monitor::lines).collect();
        renewal_batches(&lines)
            .into_iter()
            .filter(|keys| keys.iter().any(|k| k == key))
            .collect()
    };
    let lease = watchdog.acquire("plain").await.expect("acquire");
    let first_validity = lease.valid_until();

    rounds_pass(&watchdog, 2).await;
    // Two intervals on, an unrenewed lease would have under a third of its 3 s left.
    let ttls = pttls(&cluster, "redlock:plain");
    assert!(majority_pttl(&ttls) > 1_500, "renewed: PTTLs {ttls:?}");
    assert!(
        lease.valid_until() > first_validity,
        "renewals move the validity"
    );
    // The second round started with the lease held: its call reached at least a majority.
    assert!(
        eventually_async(TIMEOUT, || renewals_of("redlock:plain").len() >= 2).await,
        "MONITOR sees the renewals: {:?}",
        renewals_of("redlock:plain")
    );
    assert!(!lease.is_lost());
    // One attempt each, asked again when too few nodes answered in time (a loaded machine): a
    // missing answer is not a refusal.
    let mut attempts = 0;
    let rival = loop {
        attempts += 1;
        match watchdog.redlock().acquire_once("plain", TIMEOUT).await {
            Err(Error::NoQuorum { .. }) if attempts < 4 => {}
            other => break other,
        }
    };
    assert!(
        matches!(rival, Err(Error::Contended { .. })),
        "not reentrant: {rival:?}"
    );

    // The owner token proves the hold: it never shows in Debug output (a log line).
    let token: String = redis::cmd("GET")
        .arg("redlock:plain")
        .query(&mut cluster.node(0).connection())
        .expect("GET");
    for shown in [format!("{lease:?}"), format!("{watchdog:?}")] {
        assert!(!shown.contains(&token), "the token shows: {shown}");
        assert!(shown.contains("plain"), "something is shown: {shown}");
    }

    lease.release().await.expect("release");
    // A lease taken once the release returned: every round that renews it started after the
    // release, and no such round may renew the released lock. A round that started before may
    // still have a renewal of it on the wire (it finds the key gone and cannot recreate it), so
    // a renewal after the release is not by itself a fault; one in a later round is.
    let after = watchdog.acquire("after").await.expect("acquire after");
    assert_eq!(
        watchdog.registered(),
        1,
        "the released lease is deregistered"
    );
    released_everywhere(&cluster, "redlock:plain", TIMEOUT / 3).await;
    // The round in flight may have started before `after` was held; the next two did not.
    rounds_pass(&watchdog, 3).await;
    assert!(
        eventually_async(TIMEOUT, || renewals_of("redlock:after").len() >= 4).await,
        "MONITOR sees the rounds after the release: {:?}",
        renewals_of("redlock:after")
    );
    let late: Vec<Vec<String>> = renewals_of("redlock:after")
        .into_iter()
        .filter(|keys| keys.iter().any(|k| k == "redlock:plain"))
        .collect();
    assert!(
        late.is_empty(),
        "rounds that started after the release renewed the released lock: {late:#?}"
    );
    assert_eq!(cluster.count_keys("redlock:plain"), 0, "never recreated");
    assert_eq!(watchdog.stats().lost, 0);
    after.release().await.expect("release");
    released_everywhere(&cluster, "redlock:after", TIMEOUT / 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_watchdog_renews_plain_and_reentrant_locks_side_by_side() {
    let cluster = RedisCluster::start(3);
    let client = LockClient::builder()
        .nodes(cluster.urls())
        .watchdog_timeout(TIMEOUT)
        .node_timeout(NODE_TIMEOUT)
        .build()
        .await
        .expect("client");
    let reentrant = client.get_lock("reentrant");
    reentrant.lock().await.expect("lock");
    let plain = client.watchdog().acquire("plain").await.expect("acquire");
    assert_eq!(client.watchdog().registered(), 2);

    // The round in flight may have listed the holds before the plain one was registered; the
    // next started with both.
    rounds_pass(client.watchdog(), 2).await;
    let before = settled_stats(client.watchdog()).await;
    rounds_pass(client.watchdog(), 2).await;
    let after = settled_stats(client.watchdog()).await;
    // Each kind is renewed by its own script: one call per kind per round.
    assert_eq!(
        after.calls_per_node - before.calls_per_node,
        2 * (after.rounds - before.rounds),
        "{before:?} -> {after:?}"
    );
    for key in ["redlock:reentrant", "redlock:plain"] {
        let ttls = pttls(&cluster, key);
        assert!(
            majority_pttl(&ttls) > 1_500,
            "{key} renewed: PTTLs {ttls:?}"
        );
    }

    plain.release().await.expect("release");
    reentrant.unlock().await.expect("unlock");
    for key in ["redlock:reentrant", "redlock:plain"] {
        released_everywhere(&cluster, key, TIMEOUT / 3).await;
    }
    assert_eq!(client.watchdog().registered(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_whose_majority_is_gone_is_told_before_its_validity_ends() {
    let cluster = RedisCluster::start(3);
    let watchdog = watchdog(&cluster);
    let lease = watchdog.acquire("plain").await.expect("acquire");
    cluster.kill(0);
    cluster.kill(1);

    let reason = tokio::time::timeout(TIMEOUT * 2, lease.lost())
        .await
        .expect("told within a lease");
    let told_at = Instant::now();
    assert_eq!(reason, LostReason::QuorumLost);
    assert!(
        told_at < lease.valid_until(),
        "told while the lock was still its own"
    );
    let released = lease.release().await;
    assert!(
        matches!(
            released,
            Err(Error::LockLost {
                reason: LostReason::QuorumLost,
                ..
            })
        ),
        "{released:?}"
    );
    assert_eq!(watchdog.registered(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shut_down_watchdog_takes_no_lock_and_its_holders_are_told() {
    let cluster = RedisCluster::start(3);
    let watchdog = watchdog(&cluster);
    let lease = watchdog.acquire("plain").await.expect("acquire");
    watchdog.shutdown();
    assert_eq!(lease.lost_signal().reason(), Some(LostReason::Shutdown));
    let refused = watchdog.acquire("other").await;
    assert!(matches!(refused, Err(Error::Shutdown)), "{refused:?}");
    let released = lease.release().await;
    assert!(
        matches!(
            released,
            Err(Error::LockLost {
                reason: LostReason::Shutdown,
                ..
            })
        ),
        "{released:?}"
    );
    // Released all the same: decided by a majority, the last delete may still be on its way.
    released_everywhere(&cluster, "redlock:plain", TIMEOUT / 3).await;
    // Anything the refused acquisition had sent would have reached each node before the
    // release sent after it on the same connection: by now it would show.
    assert_eq!(
        cluster.count_keys("redlock:other"),
        0,
        "a shut down watchdog takes no lock"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_plain_lease_stops_renewing_and_is_released() {
    let cluster = RedisCluster::start(3);
    let watchdog = watchdog(&cluster);
    let lease = watchdog.acquire("plain").await.expect("acquire");
    // Decided at the first majority: the third grant may still be on its way (or never come,
    // if the acquisition skipped a node that timed out lately). Each grant sent lands before
    // the release sent after it on the same connection.
    let everywhere = eventually_async(TIMEOUT / 3, || cluster.count_keys("redlock:plain") == 3);
    if !everywhere.await {
        assert!(
            cluster.count_keys("redlock:plain") >= 2,
            "granted on a majority"
        );
    }
    drop(lease);
    assert_eq!(watchdog.registered(), 0, "renewal stops at once");
    // The spawned release deletes the lock long before its lease ends: within a third of it, a
    // lock left to expire would still be there.
    released_everywhere(&cluster, "redlock:plain", TIMEOUT / 3).await;
    // Taken again at once by anyone: nothing was left behind.
    let again = watchdog.acquire("plain").await.expect("acquire again");
    again.release().await.expect("release");
}
