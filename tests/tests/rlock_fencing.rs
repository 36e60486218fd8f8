//! Fencing tokens of `RLock` on real servers: they strictly increase from one holder to the
//! next, across clients, while a master dies and comes back empty, with two masters of five
//! down, and when a holder's lease simply runs out; nested holds reuse their hold's token.
//!
//! Every critical section appends its token to one shared list while it holds the lock, so the
//! list is in real-time order of the holds. The checker that finds a non-increasing step is
//! itself run on a deliberately broken copy of each list, to show it can fail.
//!
//! Faults are injected between holds: the workers keep running, but the injector waits for the
//! hold in progress to end and keeps new ones out while it kills or restarts a node. A kill in
//! the middle of a hold granted by a bare majority that includes the killed node is a different
//! scenario (the holder then loses its majority); the last two tests pin down what a nested
//! `lock()` must do once its hold is lost (both failed at commit ac1cf47: see their docs).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use redlock_reentrant::{Error, LockClient, LostReason, RLock, FENCE_COUNTER};
use redlock_testkit::RedisCluster;
use redlock_tests::released_everywhere;
use tokio::sync::{watch, RwLock};
use tokio::task::JoinSet;

const NODES: usize = 5;
const CLIENTS: usize = 3;
/// Concurrent tasks per client, so hand-overs happen within a client as well as between clients.
const TASKS: usize = 2;
/// Every this many hand-overs, the holder also takes the lock again (nested) and checks that
/// the nested hold carries the same token.
const NESTED_EVERY: usize = 20;
/// Hand-overs still required after the last fault, so it is followed by real work.
const AFTER_LAST_FAULT: usize = 100;
/// A bound on a whole run, so a hang fails the test instead of stalling it.
const RUN_LIMIT: Duration = Duration::from_secs(120);
const LOCK_NAME: &str = "fenced";
/// The watchdog lease of the library's default configuration, which `hand_overs` uses.
const DEFAULT_LEASE: Duration = Duration::from_secs(30);

/// A fault applied to the lock nodes while the workers run.
#[derive(Debug, Clone, Copy)]
enum Fault {
    /// SIGKILL node `i`.
    Kill(usize),
    /// Start node `i` again, empty, on its port.
    Restart(usize),
}

impl Fault {
    fn apply(self, cluster: &RedisCluster) {
        match self {
            Fault::Kill(node) => cluster.kill(node),
            Fault::Restart(node) => cluster.restart(node),
        }
    }
}

/// The first index `i` where `tokens[i] <= tokens[i - 1]`, if any.
fn first_non_increase(tokens: &[u64]) -> Option<usize> {
    tokens
        .windows(2)
        .position(|pair| pair[1] <= pair[0])
        .map(|i| i + 1)
}

/// Asserts that `tokens` strictly increase, and that the checker catches a broken copy of them.
fn assert_strictly_increasing(tokens: &[u64]) {
    if let Some(i) = first_non_increase(tokens) {
        panic!(
            "fencing token went backwards at hold {i}: {} then {} (around: {:?})",
            tokens[i - 1],
            tokens[i],
            &tokens[i.saturating_sub(3)..(i + 3).min(tokens.len())]
        );
    }
    // The deliberately broken variants: two neighbours swapped, one token handed out twice.
    assert!(tokens.len() >= 3, "too few holds to check: {tokens:?}");
    let middle = tokens.len() / 2;
    let mut swapped = tokens.to_vec();
    swapped.swap(middle - 1, middle);
    assert_eq!(
        first_non_increase(&swapped),
        Some(middle),
        "swap not caught"
    );
    let mut repeated = tokens.to_vec();
    repeated[middle] = repeated[middle - 1];
    assert_eq!(
        first_non_increase(&repeated),
        Some(middle),
        "repeat not caught"
    );
}

/// What the workers share.
#[derive(Debug)]
struct Shared {
    /// Every hold's token, appended while holding: real-time order.
    tokens: Mutex<Vec<u64>>,
    /// How many tokens were appended, for the fault task to wait on.
    progress: watch::Sender<usize>,
    /// Workers stop once this many holds were recorded.
    target: AtomicUsize,
    /// How many nested holds were checked.
    nested: AtomicUsize,
    /// Read by each worker for one hold; written by the fault injector, so that a fault lands
    /// between holds.
    gate: RwLock<()>,
}

impl Shared {
    /// Appends a token; returns how many there are now.
    fn record(&self, token: u64) -> usize {
        let mut tokens = self.tokens.lock().unwrap_or_else(PoisonError::into_inner);
        tokens.push(token);
        let len = tokens.len();
        self.progress.send_replace(len);
        len
    }

    fn recorded(&self) -> usize {
        *self.progress.borrow()
    }
}

/// One critical section: take the lock (as a guard, or with Redisson's verbs), record the
/// token, sometimes check a nested hold, release, and check the token is gone.
async fn hold_once(lock: &RLock, shared: &Shared, guard_form: bool) {
    let guard = if guard_form {
        Some(lock.acquire().await.expect("acquire"))
    } else {
        lock.lock().await.expect("lock");
        None
    };
    let token = match &guard {
        Some(guard) => guard.fencing_token(),
        None => lock.fencing_token().expect("a holder has a token"),
    };
    assert_eq!(
        lock.fencing_token(),
        Some(token),
        "the lock and its guard agree"
    );
    let recorded = shared.record(token);

    if recorded.is_multiple_of(NESTED_EVERY) {
        lock.lock().await.expect("nested lock in the same task");
        assert_eq!(
            lock.hold_count().await.expect("hold_count"),
            2,
            "the second lock() nested"
        );
        assert_eq!(
            lock.fencing_token(),
            Some(token),
            "a nested hold reuses the token"
        );
        lock.unlock().await.expect("nested unlock");
        assert_eq!(
            lock.fencing_token(),
            Some(token),
            "still held once, same token"
        );
        shared.nested.fetch_add(1, Ordering::Relaxed);
    }

    match guard {
        Some(guard) => guard.unlock().await.expect("unlock the guard"),
        None => lock.unlock().await.expect("unlock"),
    }
    assert_eq!(lock.fencing_token(), None, "no token after the last unlock");
}

/// At least `total` hand-overs of one lock among `CLIENTS × TASKS` workers on `cluster`, with
/// `faults` applied once the given number of hand-overs were recorded. Returns the tokens in
/// hold order and how many nested holds were checked.
async fn hand_overs(
    cluster: Arc<RedisCluster>,
    total: usize,
    faults: Vec<(usize, Fault)>,
) -> (Vec<u64>, usize) {
    let shared = Arc::new(Shared {
        tokens: Mutex::new(Vec::with_capacity(total + AFTER_LAST_FAULT)),
        progress: watch::channel(0).0,
        target: AtomicUsize::new(if faults.is_empty() { total } else { usize::MAX }),
        nested: AtomicUsize::new(0),
        gate: RwLock::new(()),
    });

    let mut clients = Vec::new();
    let mut workers = JoinSet::new();
    for c in 0..CLIENTS {
        let client = LockClient::builder()
            .nodes(cluster.urls())
            .build()
            .await
            .expect("lock client");
        for t in 0..TASKS {
            let lock = client.get_lock(LOCK_NAME);
            let shared = Arc::clone(&shared);
            let guard_form = (c + t) % 2 == 0;
            workers.spawn(async move {
                while shared.recorded() < shared.target.load(Ordering::Acquire) {
                    let _between_faults = shared.gate.read().await;
                    hold_once(&lock, &shared, guard_form).await;
                }
            });
        }
        clients.push(client);
    }

    let injector = tokio::spawn({
        let shared = Arc::clone(&shared);
        let cluster = Arc::clone(&cluster);
        async move {
            let mut progress = shared.progress.subscribe();
            let mut applied = Vec::new();
            for (at, fault) in faults {
                progress
                    .wait_for(|&recorded| recorded >= at)
                    .await
                    .expect("the workers' progress");
                let paused = shared.gate.write().await;
                let cluster = Arc::clone(&cluster);
                let started = Instant::now();
                let during = shared.recorded();
                tokio::task::spawn_blocking(move || fault.apply(&cluster))
                    .await
                    .expect("fault applied");
                drop(paused);
                applied.push((fault, during, started.elapsed()));
            }
            if !applied.is_empty() {
                let target = total.max(shared.recorded() + AFTER_LAST_FAULT);
                shared.target.store(target, Ordering::Release);
            }
            applied
        }
    });

    let run = async {
        // The first worker to fail ends the run at once (a stuck lock would stall the others).
        while let Some(done) = workers.join_next().await {
            done.expect("worker");
        }
        injector.await.expect("fault injector")
    };
    let applied = tokio::time::timeout(RUN_LIMIT, run)
        .await
        .expect("the hand-overs finish");
    for (fault, during, took) in &applied {
        eprintln!("{fault:?} after hand-over {during}, took {took:?}");
    }

    for client in &clients {
        client.shutdown().await;
    }
    let tokens = std::mem::take(&mut *shared.tokens.lock().unwrap_or_else(PoisonError::into_inner));
    (tokens, shared.nested.load(Ordering::Relaxed))
}

/// At least `total` hand-overs, tokens strictly increasing, and every `NESTED_EVERY`th hold
/// nested (and checked to keep its token).
fn assert_hand_overs(tokens: &[u64], nested: usize, total: usize) {
    assert!(tokens.len() >= total, "only {} hand-overs", tokens.len());
    assert_strictly_increasing(tokens);
    assert_eq!(
        nested,
        tokens.len() / NESTED_EVERY,
        "every {NESTED_EVERY}th hold nested"
    );
}

fn report(setup: &str, tokens: &[u64], nested: usize) {
    eprintln!(
        "{setup}: {} hand-overs ({nested} with a nested hold), tokens {} .. {}",
        tokens.len(),
        tokens.first().copied().unwrap_or_default(),
        tokens.last().copied().unwrap_or_default(),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_increase_over_a_thousand_hand_overs_while_a_master_dies_and_restarts_empty() {
    const TOTAL: usize = 1_000;
    let cluster = Arc::new(RedisCluster::start(NODES));
    let started = Instant::now();
    let (tokens, nested) = hand_overs(
        Arc::clone(&cluster),
        TOTAL,
        vec![(300, Fault::Kill(2)), (600, Fault::Restart(2))],
    )
    .await;
    report("5 masters, node 2 killed and restarted", &tokens, nested);
    eprintln!("took {:?}", started.elapsed());

    assert_hand_overs(&tokens, nested, TOTAL);
    assert!(cluster.node(2).is_running(), "node 2 came back");
    // The last release was decided by a majority; the other nodes follow.
    released_everywhere(&cluster, &format!("redlock:{LOCK_NAME}"), DEFAULT_LEASE / 3).await;
}

/// On one host every node's clock is the same, so after an empty restart the clock floor alone
/// keeps tokens increasing. Here node 2's counter starts an hour ahead of the clock (as after a
/// clock jump on that node), so the tokens come from the counters, and only the write-back to a
/// majority keeps them increasing once node 2 dies and comes back empty.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_increase_when_a_master_ahead_of_the_clock_restarts_empty() {
    const TOTAL: usize = 300;
    const AHEAD_US: u64 = 3_600 * 1_000_000;
    let cluster = Arc::new(RedisCluster::start(NODES));
    let mut node2 = cluster.node(2).connection();
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query(&mut node2).expect("TIME");
    let ahead = secs * 1_000_000 + micros + AHEAD_US;
    redis::cmd("SET")
        .arg(format!("redlock:{FENCE_COUNTER}"))
        .arg(ahead)
        .exec(&mut node2)
        .expect("SET the fencing counter");

    let (tokens, nested) = hand_overs(
        Arc::clone(&cluster),
        TOTAL,
        vec![(100, Fault::Kill(2)), (200, Fault::Restart(2))],
    )
    .await;
    report(
        "5 masters, node 2 ahead, killed and restarted",
        &tokens,
        nested,
    );

    assert!(tokens.len() >= TOTAL, "only {} hand-overs", tokens.len());
    // Node 2 granted some hold before it died, so from then on the tokens come from its counter.
    assert!(
        tokens[99] > ahead,
        "the 100th token {} is not from node 2's counter ({ahead})",
        tokens[99]
    );
    assert_strictly_increasing(&tokens);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_increase_with_two_masters_of_five_down() {
    const TOTAL: usize = 200;
    let cluster = Arc::new(RedisCluster::start(NODES));
    cluster.kill(0);
    cluster.kill(3);
    let (tokens, nested) = hand_overs(Arc::clone(&cluster), TOTAL, Vec::new()).await;
    report("5 masters, 2 down", &tokens, nested);

    assert_hand_overs(&tokens, nested, TOTAL);
}

/// Holders that never unlock: each next holder gets the lock only once the previous lease ran
/// out, and gets a larger token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_increase_when_a_lease_simply_expires() {
    // Long enough beside a busy machine's stalls, with nodes given a tenth of it to answer
    // (the default for so short a lease would be 20 ms).
    const LEASE: Duration = Duration::from_secs(2);
    const HOLDERS: usize = 4;
    let cluster = RedisCluster::start(NODES);
    let alice = LockClient::builder()
        .nodes(cluster.urls())
        .node_timeout(LEASE / 10)
        .build()
        .await
        .expect("client");
    let bob = LockClient::builder()
        .nodes(cluster.urls())
        .node_timeout(LEASE / 10)
        .build()
        .await
        .expect("client");

    let mut holders: Vec<RLock> = Vec::new();
    let mut tokens = Vec::new();
    for i in 0..HOLDERS {
        let client = if i % 2 == 0 { &alice } else { &bob };
        // An explicit owner, so the test can still speak for this holder later.
        let holder = client.get_lock(LOCK_NAME).with_owner(&client.new_owner());
        holder
            .lock_with_lease(LEASE)
            .await
            .expect("lock_with_lease");
        let token = holder.fencing_token().expect("a holder has a token");
        tokens.push(token);
        if let Some(previous) = holders.last() {
            // The previous holder never unlocked: its lease must have run out for us to get in.
            let outcome = previous.unlock().await;
            assert!(
                matches!(outcome, Err(Error::LockLost { .. })),
                "the expired holder's unlock says it lost the lock: {outcome:?}"
            );
            assert_eq!(
                previous.fencing_token(),
                None,
                "an expired hold has no token"
            );
        }
        holders.push(holder);
    }
    report("5 masters, leases expiring", &tokens, 0);
    assert_strictly_increasing(&tokens);

    alice.shutdown().await;
    bob.shutdown().await;
}

/// A hold taken away from its owner (force-unlocked elsewhere) answers `LockLost` to a nested
/// `lock()` until it is unwound, and keeps no token. Found at commit ac1cf47: once the watchdog
/// had declared the hold lost, a nested `lock()` by the owner that still held it (it never
/// unlocked) silently took a brand-new hold instead: `Ok(())`, hold count 1 rather than 2, a
/// new fencing token (`attempt` cleared a lost hold and "started afresh" whatever its count).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nested_lock_of_a_hold_taken_away_says_lock_lost() {
    let cluster = RedisCluster::start(NODES);
    let client = LockClient::builder()
        .nodes(cluster.urls())
        .watchdog_timeout(Duration::from_secs(3))
        .build()
        .await
        .expect("client");
    let admin = LockClient::connect(cluster.urls()).await.expect("admin");
    let lock = client.get_lock("nested-after-loss");

    lock.lock().await.expect("lock");
    let lost = lock.lost_signal().expect("a holder has a lost signal");
    assert!(admin
        .get_lock("nested-after-loss")
        .force_unlock()
        .await
        .expect("forced"));
    // The watchdog hears "not owner" at its next renewal (a second).
    let reason = tokio::time::timeout(Duration::from_secs(10), lost.lost())
        .await
        .expect("told");
    assert_eq!(reason, LostReason::NotOwner);

    // The owner never unlocked: to it, this is a nested acquisition of a lost hold.
    let nested = lock.lock().await;
    assert!(
        matches!(
            nested,
            Err(Error::LockLost {
                reason: LostReason::NotOwner,
                ..
            })
        ),
        "a nested lock() of a lost hold answered {nested:?}"
    );
    assert_eq!(lock.fencing_token(), None, "a lost hold has no token");
    // One unlock unwinds it; then the owner locks afresh.
    assert!(matches!(lock.unlock().await, Err(Error::LockLost { .. })));
    lock.lock().await.expect("a new hold");
    assert_eq!(lock.hold_count().await.expect("count"), 1);
    lock.unlock().await.expect("unlock");
    client.shutdown().await;
    admin.shutdown().await;
}

/// The holder was granted by exactly three of five masters (two others still carried another
/// owner's entry, as in-flight attempts leave), those two entries then go, and one of the
/// holder's three masters dies. A nested `lock()` gets "granted" from two nodes and "not held
/// here" (script status 3) from two: no majority either way. Found at commit ac1cf47: `failure`
/// answered `Held { ttl: None }` and `acquire_waiting` slept, with no fallback timer, until a
/// release was published for the lock; nobody else held it, so none ever was, and the call
/// never returned, not even after the watchdog had declared the hold lost.
///
/// Required: an error (`LockLost`, or `NoQuorum` for "cannot decide"), not an endless wait. The
/// bound is three watchdog leases, long after the library itself knows the hold is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nested_lock_of_a_hold_that_lost_its_majority_to_a_dead_master_returns() {
    const WATCHDOG: Duration = Duration::from_secs(2);
    const KEY: &str = "redlock:nested-minority";
    let cluster = RedisCluster::start(NODES);
    for node in [3, 4] {
        redis::pipe()
            .cmd("HSET")
            .arg(KEY)
            .arg("another-client:task-1")
            .arg(1)
            .cmd("PEXPIRE")
            .arg(KEY)
            .arg(30_000)
            .exec(&mut cluster.node(node).connection())
            .expect("another owner's entry");
    }
    let client = LockClient::builder()
        .nodes(cluster.urls())
        .watchdog_timeout(WATCHDOG)
        .build()
        .await
        .expect("client");
    let lock = client.get_lock("nested-minority");
    lock.lock().await.expect("granted by nodes 0, 1 and 2");
    for node in [3, 4] {
        redis::cmd("DEL")
            .arg(KEY)
            .exec(&mut cluster.node(node).connection())
            .expect("the other owner's entry goes");
    }
    cluster.kill(2);
    let lost = lock.lost_signal().expect("a holder has a lost signal");

    let nested = tokio::time::timeout(WATCHDOG * 3, lock.lock()).await;
    let reason = lost.reason();
    client.shutdown().await;
    assert!(
        matches!(
            nested,
            Ok(Err(Error::LockLost { .. } | Error::NoQuorum { .. }))
        ),
        "nested lock() answered {nested:?} (Err(Elapsed): still waiting after {:?}); \
         the watchdog's verdict on the hold meanwhile: {reason:?}",
        WATCHDOG * 3
    );
}

/// The nodes' counters start apart (each from its own clock) and a new hold's token is the
/// largest candidate of the nodes that decided it. Asked for a candidate above the client's
/// last token, the nodes converge: a lone client's new holds need the write-back round trip a
/// few times at first (each time a node ahead of the others first decides a hold), then never.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_clients_new_holds_stop_needing_the_write_back() {
    const HOLDS: u64 = 100;
    let cluster = RedisCluster::start(NODES);
    let client = LockClient::builder()
        .nodes(cluster.urls())
        .build()
        .await
        .expect("client");
    let mut last = 0;
    for round in 0..HOLDS {
        let lock = client.get_lock(format!("converge:{round}"));
        lock.lock().await.expect("lock");
        let token = lock.fencing_token().expect("a token");
        assert!(token > last, "tokens increase: {token} after {last}");
        last = token;
        lock.unlock().await.expect("unlock");
    }
    let stats = client.fencing_stats();
    eprintln!(
        "write-backs: {} of {} new holds",
        stats.written_back, stats.new_holds
    );
    assert_eq!(stats.new_holds, HOLDS);
    // The first hold needs one (every node starts from its own clock); each node that was
    // ahead needs at most one more, the first time it is among the deciding majority.
    assert!(stats.written_back <= NODES as u64, "{stats:?}");
    client.shutdown().await;
}
