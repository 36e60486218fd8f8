//! Fixed leases expire by themselves and `remaining_ttl` follows them; `force_unlock` frees a
//! lock held elsewhere; bad input gets typed errors.

use std::time::{Duration, Instant};

use redlock_reentrant::{Error, InvalidArgument, LockClient, LostReason};
use redlock_testkit::{pttls, RedisCluster};
use redlock_tests::{client, client_with_timeouts, released_everywhere, WATCHDOG};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fixed_lease_expires_by_itself_and_remaining_ttl_follows_it() {
    // A lease long enough that a busy machine's stalls are small beside it (and beside the
    // tenth of it the holder is told early), and nodes given a tenth of it to answer (the
    // default would be 1 %, 80 ms).
    let lease = Duration::from_secs(8);
    let cluster = RedisCluster::start(5);
    let holder = client_with_timeouts(&cluster, WATCHDOG, lease / 10).await;
    let lock = holder.get_lock("fixed");
    let margin = holder
        .watchdog()
        .config()
        .fixed_lost_margin(lease, lease / 10);
    assert_eq!(margin, lease / 10);

    // Taken before the request goes out: the holder's deadline is counted from a later
    // instant, so the lease cannot seem to end before `lease - drift - margin` from here.
    let requested = Instant::now();
    let guard = lock.acquire_with_lease(lease).await.expect("held");
    let first = lock.remaining_ttl().await.expect("ttl").expect("held");
    assert!(
        first <= lease && first > lease / 2,
        "ttl {first:?} of {lease:?}"
    );
    assert!(lock.is_locked().await.expect("is_locked"));

    // Never renewed: the lease runs out, and the holder is told a tenth of the lease before
    // its validity ends, so it can stop while the lock is still its own: not before that,
    // and with most of the margin still on a majority's keys when it is told.
    let reason = tokio::time::timeout(lease * 2, guard.lost())
        .await
        .expect("the lost signal fires before the fixed lease ends");
    let ttls = pttls(&cluster, "redlock:fixed");
    let told = requested.elapsed();
    assert_eq!(reason, LostReason::LeaseExpired);
    let earliest = lease - holder.redlock().config().drift_for(lease) - margin;
    assert!(
        told >= earliest,
        "told {told:?} after the request, before {earliest:?}"
    );
    // Told at the validity's end, the keys would have the drift allowance (82 ms) left.
    let still_held = ttls
        .iter()
        .filter(|&&ttl| u128::try_from(ttl).unwrap_or(0) > (margin / 2).as_millis())
        .count();
    assert!(
        still_held > cluster.len() / 2,
        "told when a majority's keys had less than half the margin left: PTTLs {ttls:?}"
    );
    // The nodes' keys outlive the holder's deadline by at most the drift and the request's
    // time on the way: gone well within a third of the lease.
    released_everywhere(&cluster, "redlock:fixed", lease / 3).await;
    assert_eq!(lock.remaining_ttl().await.expect("ttl"), None);
    assert!(!lock.is_locked().await.expect("is_locked"));
    let unlocked = guard.unlock().await;
    assert!(
        matches!(
            unlocked,
            Err(Error::LockLost {
                reason: LostReason::LeaseExpired,
                ..
            })
        ),
        "{unlocked:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_unlock_frees_a_lock_held_elsewhere_and_tells_local_holders() {
    let cluster = RedisCluster::start(3);
    let holder = client(&cluster, WATCHDOG).await;
    let admin = client(&cluster, WATCHDOG).await;

    let guard = holder.get_lock("stuck").acquire().await.expect("held");
    assert!(admin
        .get_lock("stuck")
        .force_unlock()
        .await
        .expect("forced"));
    // Decided by a majority: the other masters' deletes may still be on their way.
    released_everywhere(&cluster, "redlock:stuck", WATCHDOG / 3).await;
    assert!(!admin
        .get_lock("stuck")
        .force_unlock()
        .await
        .expect("nothing left"));

    // The holder is in another client: its watchdog learns at the next renewal (a third of
    // the lease); two leases are room for a busy machine.
    let reason = tokio::time::timeout(WATCHDOG * 2, guard.lost())
        .await
        .expect("the holder hears of it");
    assert_eq!(reason, LostReason::NotOwner);
    assert!(matches!(guard.unlock().await, Err(Error::LockLost { .. })));

    // A holder in the same client hears at once.
    let guard = admin.get_lock("stuck").acquire().await.expect("held");
    assert!(admin
        .get_lock("stuck")
        .force_unlock()
        .await
        .expect("forced"));
    assert!(guard.is_lost());
    drop(guard);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_a_typed_error_and_leaves_nothing() {
    let cluster = RedisCluster::start(3);
    let client = client(&cluster, WATCHDOG).await;

    let empty = client.get_lock("");
    assert!(matches!(
        empty.lock().await,
        Err(Error::InvalidArgument(InvalidArgument::EmptyName))
    ));
    assert!(matches!(
        empty.try_lock(Duration::ZERO, None).await,
        Err(Error::InvalidArgument(InvalidArgument::EmptyName))
    ));
    assert!(matches!(
        client.get_lock("a").lock_with_lease(Duration::ZERO).await,
        Err(Error::InvalidArgument(InvalidArgument::ZeroLease))
    ));
    assert!(matches!(
        client
            .get_lock("a")
            .lock_with_lease(Duration::from_millis(5))
            .await,
        Err(Error::InvalidArgument(
            InvalidArgument::LeaseTooShort { .. }
        ))
    ));
    assert!(matches!(
        client.get_lock("a").unlock().await,
        Err(Error::NotOwner { .. })
    ));

    for node in cluster.nodes() {
        redis::cmd("SET")
            .arg("redlock:config")
            .arg("not a lock")
            .exec(&mut node.connection())
            .expect("seed a string");
    }
    let collision = client.get_lock("config");
    let err = collision.lock().await.expect_err("a string is not a lock");
    assert!(
        matches!(&err, Error::WrongType { found, .. } if found == "string"),
        "{err:?}"
    );
    assert!(matches!(
        collision.is_locked().await,
        Err(Error::WrongType { .. })
    ));
    assert!(!collision
        .force_unlock()
        .await
        .expect("force_unlock leaves other data alone"));
    for node in cluster.nodes() {
        let value: String = redis::cmd("GET")
            .arg("redlock:config")
            .query(&mut node.connection())
            .expect("GET");
        assert_eq!(value, "not a lock");
    }
    assert_eq!(
        cluster.count_keys("redlock:*"),
        3,
        "only the seeded strings"
    );

    let watchdog = LockClient::builder()
        .nodes(cluster.urls())
        .watchdog_timeout(Duration::from_millis(10))
        .build()
        .await;
    assert!(matches!(
        watchdog,
        Err(Error::InvalidArgument(
            InvalidArgument::LeaseTooShort { .. }
        ))
    ));
    assert!(matches!(
        LockClient::connect(Vec::<String>::new()).await,
        Err(Error::InvalidArgument(InvalidArgument::NoNodes))
    ));

    client.shutdown().await;
    assert!(matches!(
        client.get_lock("a").lock().await,
        Err(Error::Shutdown)
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_releases_every_hold_at_once() {
    let cluster = RedisCluster::start(3);
    let holder = client(&cluster, WATCHDOG).await;
    let waiting = client(&cluster, WATCHDOG).await;
    let lock = holder.get_lock("service");
    lock.lock().await.expect("lock");
    lock.lock().await.expect("nested");
    let signal = lock.lost_signal().expect("held");
    holder.get_lock("other").lock().await.expect("lock");

    holder.shutdown().await;
    // Shutdown returns once a majority deleted each lock; the rest follow.
    released_everywhere(&cluster, "redlock:service", WATCHDOG / 3).await;
    released_everywhere(&cluster, "redlock:other", WATCHDOG / 3).await;
    assert_eq!(signal.reason(), Some(LostReason::Shutdown));
    let next = waiting.get_lock("service");
    assert!(next.try_lock(Duration::ZERO, None).await.expect("free"));
    next.unlock().await.expect("unlock");
}
