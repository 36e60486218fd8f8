//! The semaphore whose count its client fixes, on several real masters: each permit granted by
//! `floor(k·N/(k+1)) + 1` of the N masters, so that no more than k are ever out; a master down
//! within what that quorum tolerates changes nothing, one more refuses new permits and tells the
//! holders whose renewals too few masters confirm; a killed holder process's permit comes back
//! within its lease; and the count is the same for every client, never changed by the count
//! verbs, typed errors before anything is sent.

use std::time::Duration;

use redlock_reentrant::{
    Error, InvalidArgument, LockClient, LostReason, RPermitExpirableSemaphore,
};
use redlock_testkit::{HolderProcess, RedisCluster};
use redlock_tests::{client, released_everywhere, WATCHDOG};

/// Long enough for anything that is awaited to happen on a busy machine; never a bound that a
/// test measures.
const PATIENCE: Duration = Duration::from_secs(30);

fn fixed(client: &LockClient, name: &str, permits: u32) -> RPermitExpirableSemaphore {
    client
        .get_quorum_semaphore(name, permits)
        .expect("a count of at least one")
}

/// The semaphore's permits hash.
fn holders_key(client: &LockClient, name: &str) -> String {
    format!("{}:permits", client.redlock().config().key_for(name))
}

/// How many permits master `node` has out in `holders` (the hash's own fields left out).
fn permits_on(cluster: &RedisCluster, node: usize, holders: &str) -> usize {
    let fields: Vec<String> = redis::cmd("HKEYS")
        .arg(holders)
        .query(&mut cluster.node(node).connection())
        .expect("HKEYS");
    fields
        .iter()
        .filter(|field| !field.starts_with(['~', '@']))
        .count()
}

/// Whether master `node` has the permit `id` out in `holders`.
fn has_permit(cluster: &RedisCluster, node: usize, holders: &str, id: &str) -> bool {
    redis::cmd("HEXISTS")
        .arg(holders)
        .arg(id)
        .query(&mut cluster.node(node).connection())
        .expect("HEXISTS")
}

fn is_no_quorum<T: std::fmt::Debug>(answer: &Result<T, Error>) -> bool {
    matches!(answer, Err(Error::NoQuorum { .. }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_permits_on_five_masters_need_four_and_survive_one_down() {
    let cluster = RedisCluster::start(5);
    let mut clients = Vec::new();
    for _ in 0..3 {
        clients.push(client(&cluster, WATCHDOG).await);
    }
    let s: Vec<_> = clients
        .iter()
        .map(|client| fixed(client, "provider", 2))
        .collect();
    let holders = holders_key(&clients[0], "provider");
    assert_eq!(s[0].quorum(), 4, "floor(2·5/3) + 1");
    assert_eq!(s[0].fixed_permits(), Some(2));

    let a = s[0].acquire(1).await.expect("a");
    let b = s[1]
        .try_acquire(1, Duration::ZERO, None)
        .await
        .expect("try")
        .expect("b");
    assert!(
        s[2].try_acquire(1, Duration::ZERO, None)
            .await
            .expect("try")
            .is_none(),
        "two of two out"
    );
    for permit in [&a, &b] {
        let on = (0..5)
            .filter(|node| has_permit(&cluster, *node, &holders, permit.id().as_str()))
            .count();
        assert!(on >= 4, "each permit is on four masters at least: {on}");
    }
    let status = s[2].status().await.expect("status");
    assert_eq!(
        (status.permits, status.acquired, status.available()),
        (2, 2, 0)
    );

    // One master down: what the quorum tolerates. A release and a new permit go on the four.
    cluster.stop(0);
    a.release().await.expect("released on the four that answer");
    let c = s[2]
        .try_acquire(1, PATIENCE, None)
        .await
        .expect("try")
        .expect("granted by the four that answer");

    // A second one down: three masters cannot make four. No new permit though one is free, and
    // the holders whose renewals three masters confirm are told before their lease ends.
    cluster.stop(1);
    c.release().await.expect("released where it was");
    let refused = s[0].try_acquire(1, Duration::ZERO, None).await;
    assert!(
        is_no_quorum(&refused) || matches!(refused, Ok(None)),
        "{refused:?}"
    );
    let reason = tokio::time::timeout(PATIENCE, b.lost())
        .await
        .expect("renewal confirmed by three of the four needed: told");
    assert!(
        matches!(reason, LostReason::QuorumLost | LostReason::LeaseExpired),
        "{reason}"
    );
    drop(b);

    // Back: the semaphore's two permits are free again once b's lease ran out everywhere.
    cluster.resume(0);
    cluster.resume(1);
    let both = tokio::time::timeout(PATIENCE, s[1].acquire(2))
        .await
        .expect("free within b's lease")
        .expect("both permits");
    assert_eq!(both.permits(), 2);
    both.release().await.expect("release");
    // A master that granted nothing of it keeps b's expired entries until their deadline.
    released_everywhere(&cluster, &holders, WATCHDOG).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_holders_permits_come_back_with_a_master_down() {
    let cluster = RedisCluster::start(5);
    let name = "reports";
    let bob = client(&cluster, WATCHDOG).await;
    let s = fixed(&bob, name, 2);
    assert_eq!(s.quorum(), 4);
    let zombie = HolderProcess::spawn(
        env!("CARGO_BIN_EXE_holder"),
        &format!("quorum-permits:2:2:{name}"),
        WATCHDOG,
        &cluster.urls(),
    );
    assert!(
        s.try_acquire(1, Duration::ZERO, None)
            .await
            .expect("try")
            .is_none(),
        "the process holds both permits"
    );
    zombie.kill();
    cluster.stop(4);
    let permit = tokio::time::timeout(PATIENCE, s.acquire(2))
        .await
        .expect("back within the dead holder's lease")
        .expect("granted by the four masters that answer");
    assert!(!permit.is_lost());
    permit.release().await.expect("release");
    cluster.resume(4);
    released_everywhere(&cluster, &holders_key(&bob, name), WATCHDOG).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fixed_count_is_every_clients_and_never_changed() {
    let cluster = RedisCluster::start(3);
    let alice = client(&cluster, WATCHDOG).await;
    let bob = client(&cluster, WATCHDOG).await;
    let zero = alice.get_quorum_semaphore("pool", 0);
    assert!(
        matches!(
            zero,
            Err(Error::InvalidArgument(InvalidArgument::ZeroPermits { .. }))
        ),
        "{zero:?}"
    );
    let two = fixed(&alice, "pool", 2);
    assert_eq!(
        two.quorum(),
        3,
        "two permits on three masters need all three"
    );

    // Refused before anything is sent.
    crate::assert_too_many_permits(&two.try_acquire(3, Duration::ZERO, None).await, 3, 2);
    let fixed_error = |answer: Result<(), Error>| {
        assert!(
            matches!(
                answer,
                Err(Error::InvalidArgument(InvalidArgument::PermitsFixed {
                    permits: 2,
                    ..
                }))
            ),
            "{answer:?}"
        );
    };
    fixed_error(two.set_permits(5).await);
    fixed_error(two.add_permits(1).await.map(|_| ()));
    fixed_error(two.drain_permits().await.map(|_| ()));
    fixed_error(two.try_set_permits(1).await.map(|_| ()));
    assert_eq!(cluster.count_keys("*"), 0, "nothing was sent");

    // Each master records the count beside the permits; another client that fixed another
    // count is refused, and takes nothing.
    let held = two.acquire(2).await.expect("both");
    let three = fixed(&bob, "pool", 3);
    let differs = three.try_acquire(1, Duration::ZERO, None).await;
    assert!(
        matches!(
            differs,
            Err(Error::InvalidArgument(
                InvalidArgument::PermitCountDiffers {
                    fixed: 3,
                    found: 2,
                    ..
                }
            ))
        ),
        "{differs:?}"
    );
    let holders = holders_key(&alice, "pool");
    for node in 0..3 {
        assert_eq!(permits_on(&cluster, node, &holders), 1, "only alice's");
    }
    // The fixed count lives with the permits: deleted with them, and gone once none is out.
    assert!(
        two.delete().await.expect("delete"),
        "the permits were there"
    );
    let released = held.release().await;
    assert!(
        matches!(released, Err(Error::LockLost { .. })),
        "{released:?}"
    );
    let semaphore_keys = format!("{}:permit*", alice.redlock().config().key_for("pool"));
    assert_eq!(
        cluster.count_keys(&semaphore_keys),
        0,
        "nothing of the semaphore left on any master"
    );
    let status = bob
        .get_quorum_semaphore("pool", 3)
        .expect("three")
        .status()
        .await;
    assert!(
        matches!(status, Ok(status) if !status.set && status.permits == 3),
        "a fixed count with none out is the client's: {status:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_one_master_a_fixed_count_meets_the_count_set_there() {
    let cluster = RedisCluster::start(1);
    let alice = client(&cluster, WATCHDOG).await;
    let set = alice
        .get_permit_expirable_semaphore("jobs")
        .expect("one master");
    set.set_permits(5).await.expect("set");
    let differs = fixed(&alice, "jobs", 2).acquire(1).await;
    assert!(
        matches!(
            differs,
            Err(Error::InvalidArgument(
                InvalidArgument::PermitCountDiffers {
                    fixed: 2,
                    found: 5,
                    ..
                }
            ))
        ),
        "{differs:?}"
    );
    let same = fixed(&alice, "jobs", 5);
    assert_eq!(same.quorum(), 1);
    let permit = same.acquire(5).await.expect("the same count");
    assert_eq!(set.acquired_permits().await.expect("status"), 5);
    permit.release().await.expect("release");
    assert!(set.delete().await.expect("delete"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn masters_with_another_count_refuse_and_keep_nothing() {
    // One permit on three masters, two grants needed: two masters have another count's permit
    // out (recorded beside it). The third's grant is undone, and the answer says why.
    let cluster = RedisCluster::start(3);
    let alice = client(&cluster, WATCHDOG).await;
    let one = fixed(&alice, "jobs", 1);
    let holders = holders_key(&alice, "jobs");
    for node in [0, 1] {
        let (seconds, _): (u64, u64) = redis::cmd("TIME")
            .query(&mut cluster.node(node).connection())
            .expect("TIME");
        let deadline = (seconds + 600) * 1000;
        let _: () = redis::cmd("HSET")
            .arg(&holders)
            .arg("~")
            .arg("permits")
            .arg("~count")
            .arg(2)
            .arg("other:1")
            .arg(format!("1 {deadline} 1"))
            .query(&mut cluster.node(node).connection())
            .expect("HSET");
        let _: () = redis::cmd("PEXPIREAT")
            .arg(&holders)
            .arg(deadline)
            .query(&mut cluster.node(node).connection())
            .expect("PEXPIREAT");
    }
    let refused = one.try_acquire(1, Duration::ZERO, None).await;
    assert!(
        matches!(
            refused,
            Err(Error::InvalidArgument(
                InvalidArgument::PermitCountDiffers {
                    fixed: 1,
                    found: 2,
                    ..
                }
            ))
        ),
        "{refused:?}"
    );
    // What the third granted was undone (awaited before the answer, unless a busy machine
    // made it time out: then it lands in the background).
    assert!(
        redlock_testkit::eventually_async(PATIENCE, || permits_on(&cluster, 2, &holders) == 0)
            .await,
        "the third master's grant undone"
    );
    for node in [0, 1] {
        assert_eq!(
            permits_on(&cluster, node, &holders),
            1,
            "the other count's, untouched"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn once_no_permit_is_out_another_count_may_be_fixed() {
    let cluster = RedisCluster::start(3);
    let alice = client(&cluster, WATCHDOG).await;
    let two = fixed(&alice, "batch", 2);
    two.acquire(2)
        .await
        .expect("both")
        .release()
        .await
        .expect("release");
    let three = fixed(&alice, "batch", 3);
    let permit = three
        .try_acquire(3, Duration::ZERO, None)
        .await
        .expect("the record of two went with its permits")
        .expect("three free");
    permit.release().await.expect("release");
    released_everywhere(&cluster, &holders_key(&alice, "batch"), WATCHDOG / 3).await;
}
