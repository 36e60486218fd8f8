//! The watchdog in one process: nested holds renewed as one lock and never after unlock,
//! 10,000 holds renewed in batches on time, LOST before the validity ends when a majority stops
//! answering, renewal through a dead minority, and the maximum hold time.
//!
//! A short timeout (3 s, renewed every 1 s) keeps the suite fast; the ratio is the default's
//! (30 s, every 10 s). The 10,000 holds get 9 s, room for their rounds on a loaded machine.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::stream::{self, StreamExt};
use redlock_reentrant::{Error, LockClient, LostReason, Watchdog, WatchdogStats};
use redlock_testkit::{eventually_async, pttls, Monitor, RedisCluster};
use redlock_tests::{client_with_timeouts, released_everywhere, rounds_pass};

const TIMEOUT: Duration = Duration::from_secs(3);
/// A thirtieth of the lease: tests run side by side on two cores, and 1 % of 3 s (30 ms) would
/// let a busy neighbour fail renewals that production's 300 ms (1 % of 30 s) would not.
const NODE_TIMEOUT: Duration = Duration::from_millis(100);

/// The reentrant lock's batch renewal script, as the library compiles it
/// (`redlock-reentrant/src/lua.rs` includes the same file).
const RENEW_SOURCE: &str = include_str!("../../redlock-reentrant/src/lua/renew.lua");

/// The keys of every renewal call among MONITOR `lines`: calls of the renewal script, by its
/// SHA (`EVALSHA`) or whole (`EVAL`, the first call on a connection). Nothing else counts: the
/// acquisitions, the fencing write-back, the unlock and the test's own reads mention the key too.
fn renewal_batches(lines: &[String]) -> Vec<Vec<String>> {
    let sha = redis::Script::new(RENEW_SOURCE).get_hash().to_owned();
    lines
        .iter()
        .map(|line| monitor_args(line))
        .filter_map(|args| {
            let script = match args.first()?.to_ascii_uppercase().as_str() {
                "EVALSHA" => args.get(1)?.eq_ignore_ascii_case(&sha),
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

/// The PTTL a majority of `ttls` has at least (`-2`: absent). A Redlock lease lives on a
/// majority: a node that timed out lately is skipped while a majority answers, so a hold may be
/// missing from it, and renewals never recreate it there.
fn majority_pttl(ttls: &[i64]) -> i64 {
    let mut ttls = ttls.to_vec();
    ttls.sort_unstable();
    ttls[ttls.len() / 2]
}

/// Every line the monitors recorded so far.
fn all_lines(monitors: &[Monitor]) -> Vec<String> {
    monitors.iter().flat_map(Monitor::lines).collect()
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
async fn a_nested_hold_is_renewed_as_one_lock_and_never_after_unlock() {
    let cluster = RedisCluster::start(3);
    let client = client_with_timeouts(&cluster, TIMEOUT, NODE_TIMEOUT).await;
    let monitors: Vec<Monitor> = cluster
        .nodes()
        .iter()
        .map(|node| Monitor::start(node.port()).expect("MONITOR"))
        .collect();
    let renewals_of = |key: &str| -> Vec<Vec<String>> {
        renewal_batches(&all_lines(&monitors))
            .into_iter()
            .filter(|keys| keys.iter().any(|k| k == key))
            .collect()
    };

    let lock = client.get_lock("renewed");
    lock.lock().await.expect("lock");
    lock.lock().await.expect("nested");
    // Another hold keeps the rounds going after `renewed` is released, so the test can wait for
    // rounds (events) rather than sleep.
    let other = client.get_lock("other");
    other.lock().await.expect("other");
    // The control: renewals disabled. A fixed lease is never renewed, yet MONITOR sees its
    // acquisition, its nested acquisition and the test's PTTL like the renewed lock's: counting
    // lines that mention a key would count them as renewals.
    let fixed = client.get_lock("fixed");
    fixed.lock_with_lease(TIMEOUT * 10).await.expect("fixed");
    fixed
        .lock_with_lease(TIMEOUT * 10)
        .await
        .expect("nested fixed");
    assert_eq!(
        client.watchdog().registered(),
        3,
        "one entry per hold, not per nesting"
    );

    // The round in flight may have started before the last hold; the next two did not. Each
    // sends one call per node, and nodes run what was sent even when the round was decided
    // without them: at least two calls each (a majority), four in all.
    rounds_pass(client.watchdog(), 3).await;
    let renewed = eventually_async(TIMEOUT, || renewals_of("redlock:renewed").len() >= 4).await;
    let renewals = renewals_of("redlock:renewed");
    assert!(
        renewed,
        "renewal calls for the held lock: {}",
        renewals.len()
    );
    for keys in &renewals {
        assert_eq!(
            keys.iter().filter(|k| *k == "redlock:renewed").count(),
            1,
            "a nested hold is renewed once per call: {keys:?}"
        );
    }
    let ttls = pttls(&cluster, "redlock:renewed");
    assert!(majority_pttl(&ttls) > 1_500, "renewed: PTTLs {ttls:?}");
    let fixed_seen = all_lines(&monitors)
        .iter()
        .filter(|line| line.contains("\"redlock:fixed\""))
        .count();
    assert!(fixed_seen > 0, "MONITOR sees the fixed lease's commands");
    assert_eq!(
        renewals_of("redlock:fixed"),
        Vec::<Vec<String>>::new(),
        "the fixed lease's {fixed_seen} commands are not renewals"
    );

    lock.unlock().await.expect("unlock");
    lock.unlock().await.expect("unlock");
    // A hold registered once the unlock returned: every round that renews it started after the
    // unlock, and no such round may renew the released lock. (A round that started before the
    // unlock may still have a renewal of it on the wire; that one finds the lock gone and cannot
    // bring it back.)
    let after = client.get_lock("after");
    after.lock().await.expect("after");
    assert_eq!(client.watchdog().registered(), 3);
    released_everywhere(&cluster, "redlock:renewed", TIMEOUT / 3).await;
    rounds_pass(client.watchdog(), 3).await;
    assert!(
        eventually_async(TIMEOUT, || renewals_of("redlock:after").len() >= 4).await,
        "rounds after the unlock are seen: {:?}",
        renewals_of("redlock:after")
    );
    let late: Vec<Vec<String>> = renewals_of("redlock:after")
        .into_iter()
        .filter(|keys| keys.iter().any(|k| k == "redlock:renewed"))
        .collect();
    assert!(
        late.is_empty(),
        "rounds that started after the unlock renewed the released lock: {late:#?}"
    );
    assert_eq!(cluster.count_keys("redlock:renewed"), 0, "never recreated");
    for held in [&other, &after, &fixed, &fixed] {
        held.unlock().await.expect("unlock");
    }
}

/// The lease of the 10,000 holds: three times the others'. Each node runs 20 batch scripts of
/// 500 keys back to back, encoded by a debug build, and a renewal request gets a quarter
/// interval: 750 ms here, where 3 s would give 250 ms, which two cores at load 16 were seen to
/// miss (thousands of holds lost before a renewal was confirmed).
const SCALE_TIMEOUT: Duration = Duration::from_secs(9);
/// The per-node timeout of the acquisitions there, a thirtieth of that lease, as elsewhere.
const SCALE_NODE_TIMEOUT: Duration = Duration::from_millis(300);
/// How many of the 10,000 locks the PTTL sampler reads: every 50th, about ten per batch.
const SAMPLED_EVERY: usize = 50;
/// How often the sampler reads them.
const SAMPLE_PERIOD: Duration = Duration::from_millis(100);

/// Reads the PTTL of `keys` on every node (one pipeline per node) every [`SAMPLE_PERIOD`] until
/// `stop`, in a thread of its own off the runtime; returns the lowest lease a majority of nodes
/// had on a key (`-2`: a key was gone from a majority). PTTL of known keys, pipelined, keeps
/// each server busy for a few hundred cheap commands, where a `KEYS` scan of 10,000 keys would
/// block it for the whole scan.
fn sample_lowest_pttl(
    cluster: &RedisCluster,
    keys: Vec<String>,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<i64> {
    let mut connections: Vec<redis::Connection> = cluster
        .nodes()
        .iter()
        .map(|node| node.connection())
        .collect();
    tokio::task::spawn_blocking(move || {
        let mut pipe = redis::pipe();
        for key in &keys {
            pipe.cmd("PTTL").arg(key);
        }
        let mut lowest = i64::MAX;
        while !stop.load(Ordering::Relaxed) {
            let per_node: Vec<Vec<i64>> = connections
                .iter_mut()
                .map(|connection| pipe.query(connection).expect("PTTL"))
                .collect();
            for key in 0..keys.len() {
                let ttls: Vec<i64> = per_node.iter().map(|ttls| ttls[key]).collect();
                lowest = lowest.min(majority_pttl(&ttls));
            }
            std::thread::sleep(SAMPLE_PERIOD);
        }
        lowest
    })
}

/// Stops the sampler when dropped, also when the test fails first.
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_holds_are_renewed_in_batches_on_time() {
    const HOLDS: usize = 10_000;
    let cluster = RedisCluster::start(3);
    let client = client_with_timeouts(&cluster, SCALE_TIMEOUT, SCALE_NODE_TIMEOUT).await;
    let batch = client.watchdog().config().batch_size;

    let started = Instant::now();
    let names: Vec<String> = (0..HOLDS).map(|i| format!("scale:{i}")).collect();
    let locks: Vec<_> = names.iter().map(|name| client.get_lock(name)).collect();
    stream::iter(&locks)
        .for_each_concurrent(64, |lock| async move { lock.lock().await.expect("lock") })
        .await;
    eprintln!("acquired {HOLDS} locks in {:?}", started.elapsed());
    assert_eq!(client.watchdog().registered(), HOLDS);

    // A round in flight now may have listed the holds before the last ones were registered;
    // the one after it started with every hold registered, and so does every later one.
    rounds_pass(client.watchdog(), 2).await;
    let before = settled_stats(client.watchdog()).await;
    let stop = Arc::new(AtomicBool::new(false));
    let sampled: Vec<String> = names
        .iter()
        .step_by(SAMPLED_EVERY)
        .map(|name| client.redlock().config().key_for(name))
        .collect();
    let sampler = sample_lowest_pttl(&cluster, sampled, Arc::clone(&stop));
    let stop_sampling = StopOnDrop(stop);
    rounds_pass(client.watchdog(), 3).await;
    drop(stop_sampling);
    let lowest = sampler.await.expect("the sampler");
    let after = settled_stats(client.watchdog()).await;

    let rounds = after.rounds - before.rounds;
    let calls = after.calls_per_node - before.calls_per_node;
    eprintln!(
        "{rounds} rounds, {calls} calls per node ({} per round, batch {batch}), lowest PTTL {lowest} ms of {} ms",
        calls / rounds,
        SCALE_TIMEOUT.as_millis()
    );
    assert_eq!(after.lost, 0, "no hold lost: {before:?} -> {after:?}");
    assert_eq!(
        calls,
        rounds * HOLDS.div_ceil(batch) as u64,
        "ceil(holds / batch) calls per node per round ({before:?} -> {after:?})"
    );
    // Renewed every third of the lease, a key's PTTL dips to two thirds just before its next
    // renewal. Half the lease leaves half an interval for a late round on a busy machine; a
    // skipped round, or renewal every half lease, falls below it.
    let half = i64::try_from((SCALE_TIMEOUT / 2).as_millis()).expect("small");
    assert!(
        lowest > half,
        "a PTTL fell to {lowest} ms (half the lease: {half} ms): renewals came late"
    );
    client.shutdown().await;
    released_everywhere(&cluster, "redlock:scale:*", SCALE_TIMEOUT / 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_fires_before_the_validity_ends_when_a_majority_stops_answering() {
    let cluster = RedisCluster::start(5);
    let client = client_with_timeouts(&cluster, TIMEOUT, NODE_TIMEOUT).await;
    let guard = client
        .get_lock("partitioned")
        .acquire()
        .await
        .expect("held");
    rounds_pass(client.watchdog(), 1).await;

    for node in 0..3 {
        cluster.stop(node);
    }
    let stopped = Instant::now();
    let reason = tokio::time::timeout(TIMEOUT * 2, guard.lost())
        .await
        .expect("LOST fires");
    let told_after = stopped.elapsed();
    let validity = TIMEOUT - client.redlock().config().drift_for(TIMEOUT);
    eprintln!("told after {told_after:?}; the last confirmed validity ended within {validity:?}");
    assert_eq!(reason, LostReason::QuorumLost);
    assert!(
        told_after < validity,
        "told after the validity ran out: {told_after:?}"
    );
    assert!(matches!(guard.unlock().await, Err(Error::LockLost { .. })));

    for node in 0..3 {
        cluster.resume(node);
    }
    let next = client.get_lock("partitioned");
    assert!(
        next.try_lock(TIMEOUT * 2, None).await.expect("try_lock"),
        "a new acquisition works once the nodes are back"
    );
    next.unlock().await.expect("unlock");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewal_goes_on_through_a_dead_minority() {
    let cluster = RedisCluster::start(5);
    let client = client_with_timeouts(&cluster, TIMEOUT, NODE_TIMEOUT).await;
    let guard = client.get_lock("degraded").acquire().await.expect("held");
    // The minority to kill: nodes the acquisition missed first (decided by a majority, a node
    // that timed out lately may have been skipped), so that the living three hold the lock.
    let key = "redlock:degraded";
    // Every grant that was sent has landed by then; a skipped node never gets one.
    let _on_every_node = eventually_async(TIMEOUT / 3, || cluster.count_keys(key) == 5).await;
    let (mut victims, holding): (Vec<usize>, Vec<usize>) =
        (0..5).partition(|&i| cluster.keys_on(i, key).is_empty());
    victims.extend(holding.into_iter().rev());
    victims.truncate(2);
    for &victim in &victims {
        cluster.kill(victim);
    }
    let renewed = client.watchdog().stats().renewed;
    rounds_pass(client.watchdog(), 3).await;
    let confirmed = client.watchdog().stats().renewed - renewed;
    eprintln!("{confirmed} renewals confirmed by the 3 live masters in 3 rounds");
    assert!(
        confirmed >= 1,
        "renewals are confirmed by the living majority"
    );
    assert!(!guard.is_lost());
    // The living three are the majority of five: each of them holds the renewed lease.
    for pttl in pttls(&cluster, key) {
        assert!(pttl > 1_500, "pttl {pttl}");
    }
    guard.unlock().await.expect("unlock");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_maximum_hold_time_stops_renewal_and_tells_the_holder() {
    let cluster = RedisCluster::start(3);
    let capped = LockClient::builder()
        .nodes(cluster.urls())
        .watchdog_timeout(TIMEOUT)
        .node_timeout(NODE_TIMEOUT)
        .max_hold(Duration::from_millis(1_500))
        .build()
        .await
        .expect("client");
    let other = client_with_timeouts(&cluster, TIMEOUT, NODE_TIMEOUT).await;
    let guard = capped.get_lock("stuck").acquire().await.expect("held");
    let taken = Instant::now();

    let reason = tokio::time::timeout(TIMEOUT * 3, guard.lost())
        .await
        .expect("LOST fires");
    assert_eq!(reason, LostReason::MaxHoldReached);
    let held_for = taken.elapsed();
    eprintln!("told after {held_for:?} (cap 1.5 s, lease 3 s)");
    assert!(
        held_for >= Duration::from_millis(1_500),
        "told before the cap: {held_for:?}"
    );
    let next = other.get_lock("stuck");
    assert!(
        next.try_lock(TIMEOUT * 2, None).await.expect("try_lock"),
        "the lock frees"
    );
    next.unlock().await.expect("unlock");
}
