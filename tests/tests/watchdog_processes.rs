//! The watchdog across processes: a child process holding a lock keeps it renewed while it
//! runs, loses it when killed or frozen past its lease, never renews it back once lost, and a
//! waiting process takes over from a killed one.
//!
//! Every holder here is a real process (the `holder` binary, driven by `HolderProcess`) on five
//! masters, with a 3 s watchdog timeout renewed every 1 s: the ratio of the 30 s / 10 s default.
//! Timings are asserted against that lease with margins of half a lease or more, never tightly,
//! and no bound assumes a holder process renewed on schedule: a lock may not free before the
//! lease a majority was seen to have, and must free within a lease (plus room) of its holder's
//! end. The figures are printed (`--nocapture` shows them).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use redlock_reentrant::{LockClient, RLock};
use redlock_testkit::{eventually_async, hashes, pttls, HolderProcess, RedisCluster};
use redlock_tests::{client_with_timeouts, released_everywhere, rounds_pass};

const NODES: usize = 5;
/// The watchdog timeout of every client here, the holders' included; renewed every third.
const TIMEOUT: Duration = Duration::from_secs(3);
/// A renewed lease is reset every `TIMEOUT / 3`, so its PTTL stays near two thirds of the lease
/// or above; it must never fall below a third, which leaves a whole interval for a late renewal
/// on a loaded machine. An unrenewed lease runs out within the observation (the control shows
/// the sampling sees that).
const PTTL_FLOOR: Duration = Duration::from_millis(1000);
/// How long past its lease a lock may take to free and be taken: the waiter's wake-up, a round
/// trip, a loaded machine. Half a lease.
const LATE: Duration = Duration::from_millis(1500);
/// How much earlier than the PTTL a majority reported a lock may be taken: redis-server counts
/// in whole milliseconds and reads its clock once per command. A measurement's grain, not room
/// for lateness: a lock freed before its lease would be a broken exclusion.
const PTTL_GRAIN: Duration = Duration::from_millis(50);
/// How often the PTTL is sampled.
const SAMPLE: Duration = Duration::from_millis(100);
/// The per-node timeout of the in-test client, the observer and rival of the holder processes.
/// It is generous, so a loaded machine does not fail an inspection; the holders under test keep
/// the defaults.
const OBSERVER_NODE_TIMEOUT: Duration = Duration::from_millis(500);

fn spawn_holder(cluster: &RedisCluster, name: &str) -> HolderProcess {
    HolderProcess::spawn(env!("CARGO_BIN_EXE_holder"), name, TIMEOUT, &cluster.urls())
}

fn lock_key(client: &LockClient, name: &str) -> String {
    client.redlock().config().key_for(name)
}

/// How many times the in-test client asks again when too few nodes answered in time.
const OBSERVER_RETRIES: u32 = 3;

/// Whether `lock` can be taken at once (and then it is held). Asked again when too few nodes
/// answered in time (a loaded machine): a missing answer is not a "no".
async fn takes_at_once(lock: &RLock) -> bool {
    let mut retries = 0;
    loop {
        match lock.try_lock(Duration::ZERO, None).await {
            Ok(taken) => return taken,
            Err(err) if err.is_retryable() && retries < OBSERVER_RETRIES => retries += 1,
            Err(err) => panic!("try_lock failed: {err}"),
        }
    }
}

/// `lock`'s owner's hold count, asked again when too few nodes answered in time.
async fn hold_count(lock: &RLock) -> u32 {
    let mut retries = 0;
    loop {
        match lock.hold_count().await {
            Ok(count) => return count,
            Err(err) if err.is_retryable() && retries < OBSERVER_RETRIES => retries += 1,
            Err(err) => panic!("hold_count failed: {err}"),
        }
    }
}

/// The holder (hold field, hold count) of the lock hash on each running node, `None` where the
/// key is absent: a Redlock hold needs a majority of nodes, not all of them (a node that was
/// slow during the acquisition may have missed it). No node may have two owners.
fn owners(cluster: &RedisCluster, key: &str) -> Vec<Option<(String, String)>> {
    hashes::<BTreeMap<String, String>>(cluster, key)
        .into_iter()
        .map(|hash| {
            assert!(hash.len() <= 1, "two owners on one node: {hash:?}");
            hash.into_iter().next()
        })
        .collect()
}

/// The PTTL that a majority of nodes still has: a lock cannot be taken again before it runs
/// out, and a holder holds it as long as it runs. Absent keys count as zero.
fn majority_pttl(ttls: &[i64]) -> Duration {
    let mut ttls: Vec<u64> = ttls
        .iter()
        .map(|&ttl| u64::try_from(ttl).unwrap_or(0))
        .collect();
    ttls.sort_unstable();
    Duration::from_millis(ttls[ttls.len() / 2])
}

/// The lease a majority of nodes has on `key` now, and when it was read: the lock cannot be taken
/// before `read_at + lease` (renewals only extend it).
fn lease_seen(cluster: &RedisCluster, key: &str) -> (Instant, Duration, Vec<i64>) {
    let read_at = Instant::now();
    let ttls = pttls(cluster, key);
    (read_at, majority_pttl(&ttls), ttls)
}

/// Waits until a renewal of `key` is seen: on a majority of nodes its expiry moved later (a
/// PTTL read at one instant fixes when the key expires, until a renewal sets it again). An
/// event, where a sleep would guess when the holder process renews.
///
/// # Panics
///
/// If no renewal is seen within a lease.
async fn renewal_seen(cluster: &RedisCluster, key: &str) {
    // When each node's key expires at the latest, as of the first read...
    let first = pttls(cluster, key);
    let latest: Vec<Instant> = expiries(Instant::now(), &first);
    let renewed = eventually_async(TIMEOUT, || {
        // ... and at the earliest, as of a later one.
        let read_at = Instant::now();
        let earliest = expiries(read_at, &pttls(cluster, key));
        let moved = earliest.iter().zip(&latest);
        moved
            .filter(|(now, then)| **now > **then + PTTL_GRAIN)
            .count()
            > NODES / 2
    })
    .await;
    assert!(
        renewed,
        "no renewal of {key} seen within {TIMEOUT:?}: PTTLs {first:?} -> {:?}",
        pttls(cluster, key)
    );
}

/// When each key of `ttls` expires, for PTTLs read at `at` (an absent key: `at`).
fn expiries(at: Instant, ttls: &[i64]) -> Vec<Instant> {
    ttls.iter()
        .map(|&ttl| at + Duration::from_millis(u64::try_from(ttl).unwrap_or(0)))
        .collect()
}

/// Asserts the lock was not taken (at `taken_at` or before) sooner than the lease a majority
/// was seen to have: no two holders.
fn not_before_the_lease(seen: &(Instant, Duration, Vec<i64>), taken_at: Instant) {
    let (read_at, lease, ttls) = seen;
    let after = taken_at.duration_since(*read_at);
    assert!(
        after + PTTL_GRAIN >= *lease,
        "taken {after:?} after a majority was seen to hold {lease:?} more (PTTLs {ttls:?})"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_living_holder_keeps_its_lock_renewed_for_many_timeouts() {
    let cluster = RedisCluster::start(NODES);
    let holder = spawn_holder(&cluster, "renewed");
    let client = client_with_timeouts(&cluster, TIMEOUT, OBSERVER_NODE_TIMEOUT).await;
    let lock = client.get_lock("renewed");
    let key = lock_key(&client, "renewed");
    // The control: a lease of the same length that nothing renews. The same sampling must see
    // it free, or the checks below would prove nothing.
    let control = client.get_lock("control");
    assert!(control
        .try_lock(Duration::ZERO, Some(TIMEOUT))
        .await
        .expect("control lock"));
    let control_key = lock_key(&client, "control");

    let started = Instant::now();
    let mut min_pttl = Duration::MAX;
    let mut control_min = Duration::MAX;
    let mut control_freed = None;
    let mut samples = 0_u32;
    let mut rivals = 0_u32;
    while started.elapsed() < TIMEOUT * 3 {
        let ttls = pttls(&cluster, &key);
        let ttl = majority_pttl(&ttls);
        assert!(
            !ttl.is_zero(),
            "the holder's lock is gone or has no expiry on a majority after {:?}: PTTLs {ttls:?}",
            started.elapsed()
        );
        min_pttl = min_pttl.min(ttl);

        let control_ttl = majority_pttl(&pttls(&cluster, &control_key));
        if !control_ttl.is_zero() {
            control_min = control_min.min(control_ttl);
        } else if control_freed.is_none() {
            control_freed = Some(started.elapsed());
        }

        if samples.is_multiple_of(5) {
            assert!(
                !takes_at_once(&lock).await,
                "another client took the lock {:?} into a living holder's hold",
                started.elapsed()
            );
            rivals += 1;
        }
        samples += 1;
        tokio::time::sleep(SAMPLE).await;
    }
    let held_for = started.elapsed();
    println!(
        "held {held_for:?} (timeout {TIMEOUT:?}): min PTTL on a majority {min_pttl:?} over \
         {samples} samples, \
         {rivals} rival try_lock refused; unrenewed control: min PTTL while held {control_min:?}, \
         freed after {control_freed:?}"
    );

    assert!(
        min_pttl > PTTL_FLOOR,
        "a renewed lease fell to {min_pttl:?} (floor {PTTL_FLOOR:?})"
    );
    // Sampled like the holder's lock, the unrenewed one was seen gone, which fails that check.
    // Its lease began before the sampling; a sample may come late behind a rival's attempt
    // (up to OBSERVER_RETRIES + 1 node timeouts on a loaded machine): room of a whole lease.
    let control_freed = control_freed.expect("the sampling saw the unrenewed control lock free");
    assert!(
        control_freed < TIMEOUT * 2,
        "the control freed after {control_freed:?}"
    );

    // Still the holder's: one owner on a majority, the same everywhere, not this client, count 1.
    let owners: Vec<(String, String)> = owners(&cluster, &key).into_iter().flatten().collect();
    assert!(owners.len() > NODES / 2, "held on a majority: {owners:?}");
    assert!(owners.iter().all(|owner| *owner == owners[0]), "{owners:?}");
    assert!(!owners[0].0.starts_with(client.id()), "{owners:?}");
    assert_eq!(owners[0].1, "1");
    assert!(holder.is_running());
    assert_eq!(
        holder.wait_for_line("LOST", Duration::ZERO),
        None,
        "a living holder was told it lost the lock"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_holder_frees_the_lock_within_one_timeout() {
    let cluster = RedisCluster::start(NODES);
    let holder = spawn_holder(&cluster, "crashed");
    let client = client_with_timeouts(&cluster, TIMEOUT, OBSERVER_NODE_TIMEOUT).await;
    let lock = client.get_lock("crashed");
    let key = lock_key(&client, "crashed");
    // The kill lands just after a renewal, with most of a lease left to wait out.
    renewal_seen(&cluster, &key).await;

    let seen = lease_seen(&cluster, &key);
    assert!(!seen.1.is_zero(), "held before the kill: {:?}", seen.2);
    holder.kill();
    let killed = Instant::now();
    let guard = lock
        .try_acquire(TIMEOUT * 3, None)
        .await
        .expect("try_acquire answers")
        .expect("the lock frees once the killed holder's lease runs out");
    let taken_at = Instant::now();
    let took = taken_at - killed;
    println!(
        "kill -> acquired in {took:?} (timeout {TIMEOUT:?}; lease seen on a majority just before \
         the kill: {:?}, PTTLs {:?})",
        seen.1, seen.2
    );

    // A renewal sets at most a lease, and a dead holder sends none.
    assert!(
        took < TIMEOUT + LATE,
        "freed {took:?} after the kill, more than the timeout {TIMEOUT:?} + {LATE:?}"
    );
    not_before_the_lease(&seen, taken_at);
    assert!(guard.fencing_token() > holder.token());
    guard.unlock().await.expect("unlock");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_holder_loses_the_lock_and_never_renews_it_back() {
    let cluster = RedisCluster::start(NODES);
    let holder = spawn_holder(&cluster, "frozen");
    let client = client_with_timeouts(&cluster, TIMEOUT, OBSERVER_NODE_TIMEOUT).await;
    let lock = client.get_lock("frozen");
    let key = lock_key(&client, "frozen");

    holder.stop();
    let frozen = Instant::now();
    // Frozen, the holder sends nothing more: what a majority has now is all it has (a renewal
    // already on the wire could only lengthen it, and make the bound below looser).
    let seen = lease_seen(&cluster, &key);
    let guard = lock
        .try_acquire(TIMEOUT * 3, None)
        .await
        .expect("try_acquire answers")
        .expect("the frozen holder's lease runs out");
    let taken_at = Instant::now();
    let took = taken_at - frozen;
    assert!(holder.is_stopped(), "still frozen when taken over");
    assert!(
        took < TIMEOUT + LATE,
        "taken {took:?} after the freeze (timeout {TIMEOUT:?})"
    );
    not_before_the_lease(&seen, taken_at);
    assert!(guard.fencing_token() > holder.token());

    // Frozen past its lease (the lock was taken from it), it wakes up once the new holder's
    // watchdog has renewed the lock: its own watchdog then finds a lock that is not its own.
    rounds_pass(client.watchdog(), 1).await;
    let freeze = frozen.elapsed();
    holder.resume();
    let resumed = Instant::now();
    let lost = holder
        .wait_for_line("LOST", TIMEOUT)
        .unwrap_or_else(|| panic!("the resumed holder was not told: {:?}", holder.lines()));
    let told = resumed.elapsed();

    // Over several renewal intervals of both clients, the lock stays this client's.
    let mut min_pttl = Duration::MAX;
    let watch = Instant::now();
    while watch.elapsed() < TIMEOUT + TIMEOUT / 3 {
        assert_eq!(
            hold_count(guard.lock()).await,
            1,
            "{:?} after the resume",
            resumed.elapsed()
        );
        // On every node the only owner is this client, with count 1, on a majority at least:
        // the resumed holder's field is nowhere.
        let owners = owners(&cluster, &key);
        let ours = owners
            .iter()
            .flatten()
            .filter(|(owner, count)| owner.starts_with(client.id()) && count == "1")
            .count();
        assert!(
            ours == owners.iter().flatten().count() && ours > NODES / 2,
            "{:?} after the resume, the nodes have {owners:?}",
            resumed.elapsed()
        );
        min_pttl = min_pttl.min(majority_pttl(&pttls(&cluster, &key)));
        assert!(
            !guard.is_lost(),
            "the new holder was told it lost the lock: {:?}",
            guard.lock().lost_signal().and_then(|lost| lost.reason())
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    println!(
        "frozen {freeze:?}: taken over {took:?} after the freeze; resumed holder printed \
         {lost:?} {told:?} after the resume; new holder's min PTTL on a majority over the next {:?}: \
         {min_pttl:?}",
        watch.elapsed()
    );
    assert!(
        min_pttl > PTTL_FLOOR,
        "the new holder's lease fell to {min_pttl:?}"
    );
    assert!(holder.is_running(), "the lost holder keeps running");
    let acquired = holder
        .lines()
        .iter()
        .filter(|line| line.starts_with("ACQUIRED"))
        .count();
    assert_eq!(acquired, 1, "{:?}", holder.lines());

    guard
        .unlock()
        .await
        .expect("this client still holds the lock");
    released_everywhere(&cluster, &key, TIMEOUT / 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_process_takes_over_when_the_holder_is_killed() {
    let cluster = RedisCluster::start(NODES);
    let first = spawn_holder(&cluster, "handover");
    let second = HolderProcess::start(
        env!("CARGO_BIN_EXE_holder"),
        "handover",
        TIMEOUT,
        &cluster.urls(),
    );
    // Longer than a whole lease: only the first holder's renewals can keep the second out.
    let waited = TIMEOUT + TIMEOUT / 6;
    assert_eq!(
        second.wait_acquired(waited),
        None,
        "the second process took a lock the first still holds"
    );
    assert!(
        second.is_running(),
        "the second holder died: {}",
        second.stderr()
    );

    let client = client_with_timeouts(&cluster, TIMEOUT, OBSERVER_NODE_TIMEOUT).await;
    let key = lock_key(&client, "handover");
    let seen = lease_seen(&cluster, &key);
    first.kill();
    let killed = Instant::now();
    let token = second.wait_acquired(TIMEOUT + LATE).unwrap_or_else(|| {
        panic!(
            "the waiting process did not take over: {:?}",
            second.lines()
        )
    });
    // Seen after the second process printed it, so after its grant.
    let taken_at = Instant::now();
    let took = taken_at - killed;
    println!(
        "kill -> waiting process acquired in {took:?} (timeout {TIMEOUT:?}; lease seen on a \
         majority just before the kill: {:?}); tokens {} -> {token}",
        seen.1,
        first.token()
    );
    assert!(took < TIMEOUT + LATE, "taken over {took:?} after the kill");
    not_before_the_lease(&seen, taken_at);
    assert!(token > first.token(), "{token} after {}", first.token());

    assert!(
        !takes_at_once(&client.get_lock("handover")).await,
        "the second process holds the lock"
    );
}
