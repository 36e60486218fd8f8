//! The Redlock core on 1 and 5 healthy masters: acquire, contention, release, extend, expiry.

use std::time::{Duration, Instant};

use redlock_core::{Error, Redlock, RedlockConfig, RetryPolicy};
use redlock_testkit::{eventually, eventually_async, pttls, RedisCluster};
use redlock_tests::released_everywhere;

/// Far longer than a healthy node takes on a busy two-core machine, far shorter than the
/// leases: the tests below are about outcomes, not speed.
const NODE_TIMEOUT: Duration = Duration::from_millis(500);

/// A client with every node connected (a client connects lazily, and the first request would
/// otherwise connect and load its script within one per-node timeout) and the default retries:
/// the contention checks use `acquire_once`, which never retries.
async fn redlock(cluster: &RedisCluster) -> Redlock {
    let client = Redlock::new(RedlockConfig {
        node_timeout: Some(NODE_TIMEOUT),
        ..RedlockConfig::with_nodes(cluster.urls())
    })
    .expect("valid config");
    let readiness = client.readiness().await;
    assert_eq!(
        readiness.reachable(),
        cluster.len(),
        "every node answers: {:?}",
        readiness
            .failures()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
    );
    client
}

async fn lifecycle_on(nodes: usize) {
    let cluster = RedisCluster::start(nodes);
    let alice = redlock(&cluster).await;
    let bob = redlock(&cluster).await;
    let lease = Duration::from_secs(2);
    let extended_lease = Duration::from_secs(20);

    let held = alice
        .acquire("job", lease)
        .await
        .expect("free lock is granted");
    assert!(
        held.granted_by() > nodes / 2,
        "granted by {}",
        held.granted_by()
    );
    assert!(held.validity() < lease && !held.validity().is_zero());
    // The grants still out when a majority decided land right after.
    assert!(
        eventually_async(Duration::from_secs(5), || cluster.count_keys("redlock:job")
            == nodes)
        .await,
        "the key is on every node"
    );

    match bob.acquire_once("job", lease).await {
        Err(Error::Contended { ttl: Some(ttl), .. }) => {
            assert!(ttl <= lease && !ttl.is_zero(), "reported ttl {ttl:?}")
        }
        other => panic!("expected contention, got {other:?}"),
    }
    assert_eq!(
        cluster.count_keys("redlock:job"),
        nodes,
        "the loser removed nothing of ours"
    );

    let extended = alice
        .extend(&held, extended_lease)
        .await
        .expect("holder extends");
    assert!(extended.valid_until() > held.valid_until());
    // Decided by a majority; the other nodes' extensions land right after.
    assert!(
        eventually_async(Duration::from_secs(5), || pttls(&cluster, "redlock:job")
            .iter()
            .all(|pttl| *pttl > 2_000))
        .await,
        "extension reached every node: {:?}",
        pttls(&cluster, "redlock:job")
    );

    alice.release(&extended).await.expect("holder releases");
    // Decided by a majority: the other nodes' deletes land right after; a key left until its
    // 20 s lease runs out fails.
    released_everywhere(&cluster, "redlock:job", extended_lease / 3).await;
    assert!(matches!(
        alice.release(&extended).await,
        Err(Error::NotOwner { .. })
    ));
    assert!(
        matches!(
            alice.extend(&held, lease).await,
            Err(Error::NotOwner { .. })
        ),
        "extend never recreates a released lock"
    );
    // An extension that recreated the key on some node would keep it for its 2 s lease.
    released_everywhere(&cluster, "redlock:job", lease / 3).await;

    let bobs = bob.acquire_once("job", lease).await.expect("free again");
    assert!(
        matches!(alice.release(&held).await, Err(Error::NotOwner { .. })),
        "a stale lease cannot release the new holder's lock"
    );
    assert!(
        eventually_async(Duration::from_secs(5), || cluster.count_keys("redlock:job")
            == nodes)
        .await
    );
    bob.release(&bobs).await.expect("bob releases");
}

#[tokio::test]
async fn lifecycle_on_one_master() {
    lifecycle_on(1).await;
}

#[tokio::test]
async fn lifecycle_on_five_masters() {
    lifecycle_on(5).await;
}

async fn expiry_on(nodes: usize) {
    let cluster = RedisCluster::start(nodes);
    // A short lease, but a per-node timeout and retries that a busy test machine cannot trip.
    let client = Redlock::new(RedlockConfig {
        node_timeout: Some(Duration::from_millis(100)),
        ..RedlockConfig::with_nodes(cluster.urls())
    })
    .expect("valid config");
    assert_eq!(client.readiness().await.reachable(), nodes);
    let lease = Duration::from_millis(600);

    // Before the request left: every node's key lives a whole lease from a moment after this,
    // and the validity is shorter than the lease, so no margin is needed below.
    let requested_at = Instant::now();
    let held = client.acquire("expiring", lease).await.expect("granted");
    assert!(client.acquire_once("expiring", lease).await.is_err());
    assert!(
        eventually(Duration::from_secs(5), || cluster
            .count_keys("redlock:expiring")
            == 0),
        "the lease expires on its own"
    );
    assert!(
        requested_at.elapsed() >= held.validity(),
        "no node dropped the key before the validity ran out"
    );
    assert!(!held.is_valid(), "the lease's own clock agrees it ran out");
    let again = client
        .acquire_once("expiring", lease)
        .await
        .expect("free after expiry");
    client.release(&again).await.expect("released");
}

#[tokio::test]
async fn expiry_on_one_master() {
    expiry_on(1).await;
}

#[tokio::test]
async fn expiry_on_five_masters() {
    expiry_on(5).await;
}

#[tokio::test]
async fn acquire_retries_until_the_holder_lets_go() {
    let cluster = RedisCluster::start(3);
    let holder = redlock(&cluster).await;
    // Up to about 8 s of retries: the claim is that a retry takes the freed lock, not how soon.
    let patient = Redlock::new(RedlockConfig {
        node_timeout: Some(NODE_TIMEOUT),
        retry: RetryPolicy {
            retries: 200,
            base_delay: Duration::from_millis(10),
            max_delay: Duration::from_millis(40),
        },
        ..RedlockConfig::with_nodes(cluster.urls())
    })
    .expect("valid config");

    let held = holder
        .acquire("handover", Duration::from_secs(30))
        .await
        .expect("granted");
    let waiter = tokio::spawn({
        let patient = patient.clone();
        async move { patient.acquire("handover", Duration::from_secs(30)).await }
    });
    // The waiter cannot finish while the lock is held for 30 s; release hands it over.
    tokio::task::yield_now().await;
    assert!(!waiter.is_finished());
    holder.release(&held).await.expect("released");
    let taken = waiter
        .await
        .expect("task")
        .expect("retry takes the freed lock");
    patient.release(&taken).await.expect("released");
}
