//! The permit semaphore on a real master: never more permits out than the count, releases that
//! never make permits (a second or unknown release is an error), a waiter for several permits
//! that gets in once they are free, a killed holder process whose permits come back within its
//! own lease whatever the other holders do, the count's verbs, bad input, and the refusal on
//! several masters.

use std::time::Duration;

use redlock_reentrant::{
    Error, InvalidArgument, LockClient, LostReason, PermitId, RPermitExpirableSemaphore,
};
use redlock_testkit::{HolderProcess, RedisCluster};
use redlock_tests::{client, released_everywhere, rounds_pass, WATCHDOG};

/// Long enough for anything that is awaited to happen on a busy machine; never a bound that a
/// test measures.
const PATIENCE: Duration = Duration::from_secs(30);

/// The watchdog lease of clients whose waiters must be woken by an announcement: a waiter also
/// looks again by the earliest lease out (or its own, before the count is set), which this puts
/// beyond the test's patience.
const LONG_LEASE: Duration = Duration::from_secs(90);

fn semaphore(client: &LockClient, name: &str) -> RPermitExpirableSemaphore {
    client
        .get_permit_expirable_semaphore(name)
        .expect("one master")
}

fn key(client: &LockClient, name: &str) -> String {
    client.redlock().config().key_for(name)
}

fn assert_unknown(answer: &Result<(), Error>) {
    assert!(
        matches!(
            answer,
            Err(Error::InvalidArgument(
                InvalidArgument::UnknownPermit { .. }
            ))
        ),
        "{answer:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_more_permits_out_than_the_count_and_a_release_never_makes_one() {
    let cluster = RedisCluster::start(1);
    let alice = client(&cluster, WATCHDOG).await;
    let bob = client(&cluster, WATCHDOG).await;
    let (a, b) = (semaphore(&alice, "provider"), semaphore(&bob, "provider"));
    assert_eq!(a.available_permits().await.expect("status"), 0, "unset");
    assert!(b
        .try_acquire(1, Duration::ZERO, None)
        .await
        .expect("try")
        .is_none());
    assert!(a.try_set_permits(3).await.expect("set"));
    assert!(!b.try_set_permits(5).await.expect("set"), "set already");
    assert_eq!(b.permits().await.expect("status"), 3);

    let two = a.acquire(2).await.expect("two permits");
    let one = b
        .try_acquire(1, Duration::ZERO, None)
        .await
        .expect("try")
        .expect("the third permit");
    assert_eq!(two.permits(), 2);
    assert!(one.fencing_token() > two.fencing_token());
    assert!(
        b.try_acquire(1, Duration::ZERO, None)
            .await
            .expect("try")
            .is_none(),
        "three of three out"
    );
    let status = a.status().await.expect("status");
    assert_eq!(
        (status.permits, status.acquired, status.available()),
        (3, 3, 0)
    );

    // Released by id from another client: once. Its holder is told.
    let id = PermitId::new(one.id().as_str());
    a.release(&id).await.expect("released by id");
    assert_unknown(&a.release(&id).await);
    assert_eq!(
        a.acquired_permits().await.expect("status"),
        2,
        "one came back, once"
    );
    let reason = tokio::time::timeout(PATIENCE, one.lost())
        .await
        .expect("renewal finds it gone");
    assert_eq!(reason, LostReason::NotOwner, "{reason}");
    assert!(
        matches!(one.release().await, Err(Error::LockLost { .. })),
        "its holder's release says it lost it"
    );
    // Ids no permit has, the hash's own fields included, change nothing.
    for bogus in ["~", "@x:1", "nobody:1", "", "no-number:", "x"] {
        assert_unknown(&b.release(&PermitId::new(bogus)).await);
    }
    let status = b.status().await.expect("status");
    assert_eq!((status.permits, status.acquired), (3, 2), "{status:?}");

    // The guard's release gives them back once; nothing is left.
    two.release().await.expect("release");
    assert_eq!(a.available_permits().await.expect("status"), 3);
    released_everywhere(
        &cluster,
        &format!("{}:permits", key(&alice, "provider")),
        WATCHDOG / 3,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_a_typed_error_and_leaves_nothing() {
    let cluster = RedisCluster::start(1);
    let alice = client(&cluster, WATCHDOG).await;
    let s = semaphore(&alice, "uploads");
    s.set_permits(2).await.expect("set");
    let zero = s.try_acquire(0, Duration::ZERO, None).await;
    assert!(
        matches!(
            zero,
            Err(Error::InvalidArgument(InvalidArgument::ZeroPermits { .. }))
        ),
        "{zero:?}"
    );
    crate::assert_too_many_permits(&s.try_acquire(3, PATIENCE, None).await, 3, 2);
    let below_zero = s.add_permits(-3).await;
    assert!(
        matches!(
            below_zero,
            Err(Error::InvalidArgument(InvalidArgument::PermitsOutOfRange {
                count: 2,
                ..
            }))
        ),
        "{below_zero:?}"
    );
    assert_eq!(s.permits().await.expect("status"), 2, "unchanged");
    s.set_permits(u32::MAX)
        .await
        .expect("as many as a count holds");
    let above = s.add_permits(1).await;
    assert!(
        matches!(
            above,
            Err(Error::InvalidArgument(InvalidArgument::PermitsOutOfRange {
                count: u32::MAX,
                ..
            }))
        ),
        "{above:?}"
    );
    assert_eq!(s.permits().await.expect("status"), u32::MAX, "unchanged");
    let empty = semaphore(&alice, "").status().await;
    assert!(
        matches!(
            empty,
            Err(Error::InvalidArgument(InvalidArgument::EmptyName))
        ),
        "{empty:?}"
    );
    // Keys of another type are refused, never changed.
    let mut redis = cluster.node(0).connection();
    let holders = format!("{}:permits", key(&alice, "wrong"));
    let _: () = redis::cmd("SET")
        .arg(&holders)
        .arg("x")
        .query(&mut redis)
        .expect("set");
    let wrong = semaphore(&alice, "wrong");
    for answer in [
        wrong.status().await.map(|_| ()),
        wrong.try_set_permits(1).await.map(|_| ()),
        wrong.try_acquire(1, Duration::ZERO, None).await.map(|_| ()),
    ] {
        assert!(matches!(answer, Err(Error::WrongType { .. })), "{answer:?}");
    }
    let count = format!("{}:permit-count", key(&alice, "garbled"));
    let _: () = redis::cmd("SET")
        .arg(&count)
        .arg("many")
        .query(&mut redis)
        .expect("set");
    let garbled = semaphore(&alice, "garbled")
        .try_acquire(1, Duration::ZERO, None)
        .await;
    assert!(
        matches!(garbled, Err(Error::WrongType { .. })),
        "{garbled:?}"
    );
    assert_eq!(
        cluster.count_keys(&format!("{}:permits", key(&alice, "*"))),
        1,
        "only the wrong-type key the test wrote"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_count_changes_what_is_granted_and_never_takes_permits_back() {
    let cluster = RedisCluster::start(1);
    let alice = client(&cluster, WATCHDOG).await;
    let s = semaphore(&alice, "exports");
    // A waiter on a semaphore nobody configured yet gets in once its count is set (announced:
    // its own look again would come only after its lease, beyond the test's patience).
    let patient = client(&cluster, LONG_LEASE).await;
    let early = tokio::spawn({
        let s = semaphore(&patient, "exports");
        async move { s.try_acquire(1, PATIENCE, None).await }
    });
    assert!(
        redlock_testkit::eventually_async(PATIENCE, || patient.watched_channels() == 1).await,
        "the early waiter waits"
    );
    s.set_permits(3).await.expect("set");
    let early = tokio::time::timeout(PATIENCE, early)
        .await
        .expect("setting the count wakes the waiter")
        .expect("task")
        .expect("try")
        .expect("granted");
    early.release().await.expect("release");
    // More than the count is an error when asked; a count lowered during the wait is waited
    // out (it may grow back).
    let one = s.acquire(1).await.expect("one");
    let all = tokio::spawn({
        let s = semaphore(&patient, "exports");
        async move { s.try_acquire(3, PATIENCE, None).await }
    });
    assert!(
        redlock_testkit::eventually_async(PATIENCE, || patient.watched_channels() == 1).await,
        "the waiter for three waits"
    );
    s.set_permits(2).await.expect("lowered below the wait");
    one.release().await.expect("release");
    assert!(!all.is_finished(), "two permits: not three");
    s.set_permits(3).await.expect("back to three");
    let all = tokio::time::timeout(PATIENCE, all)
        .await
        .expect("the waiter gets in once the count is back")
        .expect("task")
        .expect("try: a count lowered during the wait is no error")
        .expect("granted");
    all.release().await.expect("release");
    let held = s.acquire(3).await.expect("all three");
    s.set_permits(1).await.expect("lowered");
    let status = s.status().await.expect("status");
    assert_eq!(
        (status.permits, status.acquired, status.available()),
        (1, 3, 0)
    );
    assert!(!held.is_lost(), "lowering takes no permit back");
    assert_eq!(s.add_permits(3).await.expect("add"), 4);
    let fourth = s
        .try_acquire(1, Duration::ZERO, None)
        .await
        .expect("try")
        .expect("one free");
    assert_eq!(s.drain_permits().await.expect("drain"), 0, "none free");
    fourth.release().await.expect("release");
    assert_eq!(s.drain_permits().await.expect("drain"), 1);
    assert_eq!(
        s.permits().await.expect("status"),
        3,
        "lowered to the permits out"
    );
    assert!(s.delete().await.expect("delete"));
    tokio::time::timeout(PATIENCE, held.lost())
        .await
        .expect("a deleted semaphore's holders are told");
    assert!(!s.delete().await.expect("delete"), "nothing left");
    assert_eq!(
        cluster.count_keys(&format!("{}*", key(&alice, "exports"))),
        0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_for_several_permits_gets_in_once_they_are_free() {
    let cluster = RedisCluster::start(1);
    let alice = client(&cluster, LONG_LEASE).await;
    let bob = client(&cluster, LONG_LEASE).await;
    let s = semaphore(&alice, "batch");
    s.set_permits(3).await.expect("set");
    let first = s.acquire(1).await.expect("one");
    let second = s.acquire(1).await.expect("two");
    // Bob wants three; single releases wake him, and he asks again each time.
    let waiter = tokio::spawn({
        let s = semaphore(&bob, "batch");
        async move { s.try_acquire(3, PATIENCE, None).await }
    });
    let singles = tokio::spawn({
        let s = semaphore(&bob, "batch");
        async move { s.try_acquire(1, PATIENCE, None).await }
    });
    let third = tokio::time::timeout(PATIENCE, singles)
        .await
        .expect("a single permit was free")
        .expect("task")
        .expect("try")
        .expect("granted");
    first.release().await.expect("release");
    assert!(!waiter.is_finished(), "two of three out: not three free");
    second.release().await.expect("release");
    third.release().await.expect("release");
    let all = tokio::time::timeout(PATIENCE, waiter)
        .await
        .expect("the waiter for three gets in once three are free")
        .expect("task")
        .expect("try")
        .expect("granted");
    assert_eq!(all.permits(), 3);
    assert_eq!(s.available_permits().await.expect("status"), 0);
    all.release().await.expect("release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_holders_permits_come_back_within_its_own_lease_whatever_others_do() {
    let cluster = RedisCluster::start(1);
    let name = "payments";
    let bob = client(&cluster, WATCHDOG).await;
    let s = semaphore(&bob, name);
    s.set_permits(3).await.expect("set");
    let zombie = HolderProcess::spawn(
        env!("CARGO_BIN_EXE_holder"),
        &format!("permits:2:{name}"),
        WATCHDOG,
        &cluster.urls(),
    );
    let bob_holds = s
        .acquire(1)
        .await
        .expect("bob's permit beside the process's two");
    assert!(
        s.try_acquire(1, Duration::ZERO, None)
            .await
            .expect("try")
            .is_none(),
        "three of three out"
    );
    zombie.kill();
    // Bob's permit is renewed for longer than the killed holder's lease (3 s): each permit's
    // deadline is its own, so bob's renewals keep only bob's.
    rounds_pass(bob.watchdog(), 8).await;
    let status = s.status().await.expect("status");
    assert_eq!(
        (status.acquired, status.available()),
        (1, 2),
        "the dead holder's two permits came back, bob's is still out"
    );
    assert!(!bob_holds.is_lost());
    bob_holds.release().await.expect("release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_permit_and_a_dropped_waiter_leave_nothing() {
    let cluster = RedisCluster::start(1);
    let alice = client(&cluster, WATCHDOG).await;
    let s = semaphore(&alice, "drops");
    s.set_permits(1).await.expect("set");
    let held = s.acquire(1).await.expect("one");
    let waiter = tokio::spawn({
        let s = s.clone();
        async move { s.acquire(1).await }
    });
    assert!(
        redlock_testkit::eventually_async(PATIENCE, || alice.watched_channels() == 1).await,
        "the waiter subscribed"
    );
    waiter.abort();
    assert!(
        redlock_testkit::eventually_async(PATIENCE, || alice.watched_channels() == 0).await,
        "the dropped waiter's subscription went with it"
    );
    drop(held);
    released_everywhere(
        &cluster,
        &format!("{}:permits", key(&alice, "drops")),
        WATCHDOG / 3,
    )
    .await;
    assert_eq!(s.available_permits().await.expect("status"), 1);
    let reason = s.acquire(1).await.expect("free again");
    assert_eq!(reason.lost_reason(), None::<LostReason>);
    reason.release().await.expect("release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_several_masters_a_semaphore_is_refused_before_anything_is_sent() {
    crate::refused_on_three_masters(|client| client.get_permit_expirable_semaphore("pool")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redisson_verbs_release_only_what_the_handle_took() {
    let cluster = RedisCluster::start(1);
    let alice = client(&cluster, WATCHDOG).await;
    let bob = client(&cluster, WATCHDOG).await;
    let (a, b) = (
        alice.get_semaphore("workers").expect("one master"),
        bob.get_semaphore("workers").expect("one master"),
    );
    assert!(a.try_set_permits(3).await.expect("set"));
    a.acquire(2).await.expect("two");
    assert!(a.try_acquire(1, Duration::ZERO).await.expect("try"));
    assert!(
        !b.try_acquire(1, Duration::ZERO).await.expect("try"),
        "three out"
    );
    let foreign = b.release(1).await;
    assert!(
        matches!(
            foreign,
            Err(Error::InvalidArgument(InvalidArgument::PermitsNotHeld {
                asked: 1,
                held: 0,
                ..
            }))
        ),
        "{foreign:?}"
    );
    assert_eq!(
        a.available_permits().await.expect("status"),
        0,
        "nothing made"
    );
    a.release(2).await.expect("the two taken together");
    assert_eq!(
        (
            a.held_permits(),
            a.available_permits().await.expect("status")
        ),
        (1, 2)
    );
    let part = a.release(2).await;
    assert!(
        matches!(
            part,
            Err(Error::InvalidArgument(InvalidArgument::PermitsNotHeld {
                asked: 2,
                held: 1,
                ..
            }))
        ),
        "{part:?}"
    );
    assert_eq!(a.held_permits(), 1, "all or none");
    // The last handle dropped gives back what it holds.
    drop(a);
    assert!(
        b.try_acquire(3, PATIENCE).await.expect("try"),
        "the dropped handle's permit came back"
    );
    b.release(3).await.expect("release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_unowned_counter_is_redissons_and_says_so() {
    let cluster = RedisCluster::start(1);
    let alice = client(&cluster, WATCHDOG).await;
    let bob = client(&cluster, WATCHDOG).await;
    let (a, b) = (
        alice.get_unowned_semaphore("tickets").expect("one master"),
        bob.get_unowned_semaphore("tickets").expect("one master"),
    );
    // A release with no acquisition makes permits: the documented leak of this type.
    a.release(2).await.expect("release");
    assert_eq!(b.available_permits().await.expect("status"), 2);
    b.acquire(2).await.expect("two");
    assert!(
        !a.try_acquire(1, Duration::ZERO).await.expect("try"),
        "none left"
    );
    let waiter = tokio::spawn({
        let a = a.clone();
        async move { a.try_acquire(1, PATIENCE).await }
    });
    b.release(1).await.expect("anyone releases");
    assert!(
        tokio::time::timeout(PATIENCE, waiter)
            .await
            .expect("the waiter gets the released permit")
            .expect("task")
            .expect("try"),
        "the waiter took it"
    );
    assert_eq!(a.available_permits().await.expect("status"), 0);
}
