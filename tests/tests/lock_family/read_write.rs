//! The read-write lock on real masters: readers together, never a writer beside anyone, writers
//! first, no upgrade deadlock, per-reader expiry (a killed reader process frees the lock within
//! its own lease whatever the other readers do), and a killed waiting writer that stops holding
//! readers up within its heartbeat.

use std::time::Duration;

use redlock_reentrant::{Error, InvalidArgument, LockClient};
use redlock_testkit::{eventually_async, HolderProcess, RedisCluster};
use redlock_tests::{client, released_everywhere, rounds_pass, WATCHDOG};

/// Long enough for anything that is awaited to happen on a busy machine; never a bound that a
/// test measures.
const PATIENCE: Duration = Duration::from_secs(30);

/// The watchdog lease of waiting writers whose registration a test relies on: their heartbeat
/// (a third of it, 4 s) leaves a busy machine seconds to refresh it.
const WRITER_WATCHDOG: Duration = Duration::from_secs(12);

fn key(client: &LockClient, name: &str, side: &str) -> String {
    format!("{}:{side}", client.redlock().config().key_for(name))
}

/// Whether `side` (a one-shot `try_lock`) of `lock` can be taken now; if so, it is held.
async fn takes(lock: &redlock_reentrant::RLock) -> bool {
    lock.try_lock(Duration::ZERO, None).await.expect("try_lock")
}

async fn readers_share_and_a_writer_is_alone(cluster: RedisCluster, down: &[usize]) {
    let alice = client(&cluster, WATCHDOG).await;
    let bob = client(&cluster, WATCHDOG).await;
    // The waiting writer's registration (a heartbeat of a third of its lease, 4 s) must stay
    // live while the test looks, on a busy machine too.
    let carol = client(&cluster, WRITER_WATCHDOG).await;
    for node in down {
        cluster.kill(*node);
    }
    let name = "catalogue";
    let (a, b, c) = (
        alice.get_read_write_lock(name),
        bob.get_read_write_lock(name),
        carol.get_read_write_lock(name),
    );

    // Two readers together; a one-shot writer is refused and holds nobody up.
    let alice_reads = a.read_lock().acquire().await.expect("alice reads");
    let bob_reads = b
        .read_lock()
        .acquire()
        .await
        .expect("bob reads beside alice");
    assert!(a.read_lock().is_locked().await.expect("status"));
    assert!(!a.write_lock().is_locked().await.expect("status"));
    assert!(!takes(&c.write_lock()).await, "no writer beside readers");

    // A writer that waits is registered: a new reader waits behind it, a reader re-enters.
    let writer = tokio::spawn({
        let write = c.write_lock();
        async move {
            let guard = write.acquire().await.expect("carol writes");
            let token = guard.fencing_token();
            (guard, token)
        }
    });
    let waiting = key(&carol, name, "write-waiting");
    let quorum = cluster.len() / 2 + 1;
    assert!(
        eventually_async(PATIENCE, || cluster.nodes_with(&waiting).len() >= quorum).await,
        "the waiting writer registers on a majority"
    );
    let dave = client(&cluster, WATCHDOG).await;
    let d = dave.get_read_write_lock(name);
    assert!(
        !takes(&d.read_lock()).await,
        "a new reader waits behind a waiting writer"
    );
    assert!(
        takes(&a.read_lock()).await,
        "a reader re-enters past a waiting writer"
    );
    assert_eq!(a.read_lock().hold_count().await.expect("count"), 2);
    a.read_lock().unlock().await.expect("nested read unlock");
    assert!(!writer.is_finished(), "bob and alice still read");
    alice_reads.unlock().await.expect("alice stops reading");
    assert!(!writer.is_finished(), "bob still reads");
    let read_token = bob_reads.fencing_token();
    bob_reads.unlock().await.expect("bob stops reading");

    // The last reader's release lets the writer in, alone.
    let (carol_writes, write_token) = tokio::time::timeout(PATIENCE, writer)
        .await
        .expect("the writer gets in once the readers left")
        .expect("task");
    assert!(
        write_token > read_token,
        "a writer's token follows the readers'"
    );
    assert!(!takes(&d.read_lock()).await, "no reader beside a writer");
    assert!(!takes(&d.write_lock()).await, "no second writer");
    assert!(
        matches!(d.write_lock().unlock().await, Err(Error::NotOwner { .. })),
        "only the writer unlocks"
    );
    assert_eq!(
        cluster.nodes_with(&waiting).len(),
        0,
        "the grant took the registration back"
    );
    carol_writes.unlock().await.expect("carol stops writing");
    assert!(
        d.read_lock()
            .try_lock(PATIENCE, None)
            .await
            .expect("try_lock"),
        "a reader gets in after the writer"
    );
    d.read_lock().unlock().await.expect("unlock");
    for lock in [&a, &b, &c, &d] {
        assert!(!lock.read_lock().is_locked().await.expect("status"));
        assert!(!lock.write_lock().is_locked().await.expect("status"));
    }
    released_everywhere(
        &cluster,
        &format!("{}*", alice.redlock().config().key_for(name)),
        WATCHDOG / 3,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_share_and_a_writer_is_alone_on_one_master() {
    readers_share_and_a_writer_is_alone(RedisCluster::start(1), &[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_share_and_a_writer_is_alone_on_five_masters_with_two_dead() {
    readers_share_and_a_writer_is_alone(RedisCluster::start(5), &[1, 3]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgrade_is_refused_at_once_and_a_writer_may_downgrade() {
    let cluster = RedisCluster::start(3);
    let alice = client(&cluster, WATCHDOG).await;
    let bob = client(&cluster, WATCHDOG).await;
    let a = alice.get_read_write_lock("settings");
    let b = bob.get_read_write_lock("settings");

    let reading = a.read_lock().acquire().await.expect("read");
    let upgrade = tokio::time::timeout(PATIENCE, a.write_lock().lock())
        .await
        .expect("refused at once, never a wait");
    assert!(
        matches!(
            upgrade,
            Err(Error::InvalidArgument(InvalidArgument::UpgradeWouldDeadlock { ref name })) if name == "settings"
        ),
        "{upgrade:?}"
    );
    assert!(
        matches!(a.write_lock().unlock().await, Err(Error::NotOwner { .. })),
        "unlocking the side this owner does not hold"
    );
    reading.unlock().await.expect("unlock read");

    // Write, then read too (a downgrade), then let the write side go: still reading.
    let writing = a.write_lock().acquire().await.expect("write");
    let reading = tokio::time::timeout(PATIENCE, a.read_lock().acquire())
        .await
        .expect("a writer's read waits for nobody")
        .expect("a writer may read");
    assert!(reading.fencing_token() > writing.fencing_token());
    writing.unlock().await.expect("unlock write");
    assert_eq!(a.read_lock().hold_count().await.expect("count"), 1);
    assert!(!takes(&b.write_lock()).await, "alice still reads");
    assert!(takes(&b.read_lock()).await, "readers together again");
    b.read_lock().unlock().await.expect("unlock");
    reading.unlock().await.expect("unlock read");
    assert!(takes(&b.write_lock()).await, "free");
    b.write_lock().unlock().await.expect("unlock");
}

/// The tasks of one client that wait for a side take turns; an owner that holds the other side
/// must not queue behind a task that waits for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_never_queues_behind_a_task_of_its_client_that_waits_for_it() {
    let cluster = RedisCluster::start(3);
    let alice = client(&cluster, WRITER_WATCHDOG).await;
    let rw = alice.get_read_write_lock("layout");

    // A writer takes the read side while another task of its client waits to read.
    let writing = rw.write_lock().acquire().await.expect("write");
    let other_reader = tokio::spawn({
        let read = rw.read_lock();
        async move { read.acquire().await.expect("read").unlock().await }
    });
    assert!(
        eventually_async(PATIENCE, || alice.watched_channels() > 0).await,
        "the other task waits"
    );
    let reading = tokio::time::timeout(PATIENCE, rw.read_lock().acquire())
        .await
        .expect("the downgrade does not queue behind the waiting reader")
        .expect("read");
    writing.unlock().await.expect("unlock write");
    tokio::time::timeout(PATIENCE, other_reader)
        .await
        .expect("the other reader gets in beside the downgraded one")
        .expect("task")
        .expect("unlock");

    // A reader asking for the write side while another task of its client waits to write: the
    // error, at once, not a place in line behind the waiting writer.
    let other_writer = tokio::spawn({
        let write = rw.write_lock();
        async move { write.acquire().await.expect("write").unlock().await }
    });
    let waiting = key(&alice, "layout", "write-waiting");
    assert!(eventually_async(PATIENCE, || cluster.nodes_with(&waiting).len() >= 2).await);
    for wait in [Duration::ZERO, PATIENCE] {
        let upgrade = tokio::time::timeout(PATIENCE, rw.write_lock().try_lock(wait, None))
            .await
            .expect("refused at once");
        assert!(
            matches!(
                upgrade,
                Err(Error::InvalidArgument(
                    InvalidArgument::UpgradeWouldDeadlock { .. }
                ))
            ),
            "{upgrade:?}"
        );
    }
    reading.unlock().await.expect("unlock read");
    tokio::time::timeout(PATIENCE, other_writer)
        .await
        .expect("the other writer gets in")
        .expect("task")
        .expect("unlock");
}

fn assert_kind_clash(answer: &Result<(), Error>) {
    assert!(
        matches!(
            answer,
            Err(Error::InvalidArgument(
                InvalidArgument::LockKindClash { .. }
            ))
        ),
        "{answer:?}"
    );
}

/// The reentrant lock `n` and the write side of the read-write lock `n` share their key: two
/// owners exclude each other through it, and one owner asking for both gets a typed error at
/// once (not a wait for itself).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reentrant_lock_of_a_name_and_its_write_side_exclude_each_other() {
    let cluster = RedisCluster::start(3);
    let alice = client(&cluster, WATCHDOG).await;
    let bob = client(&cluster, WATCHDOG).await;
    let plain = alice.get_lock("cfg");
    plain.lock().await.expect("the reentrant lock");
    let clash = tokio::time::timeout(
        PATIENCE,
        alice.get_read_write_lock("cfg").write_lock().lock(),
    )
    .await
    .expect("at once");
    assert_kind_clash(&clash);
    let bobs = bob.get_read_write_lock("cfg");
    assert!(
        !takes(&bobs.write_lock()).await,
        "another owner's writer waits"
    );
    assert!(!takes(&bobs.read_lock()).await, "and so does a reader");
    plain.unlock().await.expect("unlock");
    let writing = alice
        .get_read_write_lock("cfg")
        .write_lock()
        .acquire()
        .await
        .expect("write");
    let clash = tokio::time::timeout(PATIENCE, alice.get_lock("cfg").lock())
        .await
        .expect("at once");
    assert_kind_clash(&clash);
    assert!(
        !takes(&bob.get_lock("cfg")).await,
        "the writer keeps the reentrant lock out"
    );
    writing.unlock().await.expect("unlock");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reentrant_lock_sharing_a_key_with_a_side_is_a_wrong_type_never_a_second_holder() {
    let cluster = RedisCluster::start(1);
    let alice = client(&cluster, WATCHDOG).await;
    let collider = alice.get_lock("shared:read");
    collider.lock().await.expect("the reentrant lock");
    let bob = client(&cluster, WATCHDOG).await;
    let read = bob.get_read_write_lock("shared").read_lock();
    let refused = read.try_lock(Duration::ZERO, None).await;
    assert!(
        matches!(refused, Err(Error::WrongType { .. })),
        "{refused:?}"
    );
    assert_eq!(
        collider.hold_count().await.expect("count"),
        1,
        "left as it was"
    );
    collider.unlock().await.expect("unlock");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_that_gives_up_takes_its_registration_back() {
    let cluster = RedisCluster::start(3);
    let alice = client(&cluster, WATCHDOG).await;
    // A registration left behind would last a heartbeat (4 s here), past the wait below.
    let carol = client(&cluster, WATCHDOG * 4).await;
    let name = "reports";
    let reading = alice
        .get_read_write_lock(name)
        .read_lock()
        .acquire()
        .await
        .expect("read");
    let write = carol.get_read_write_lock(name).write_lock();
    let waiting = key(&carol, name, "write-waiting");

    assert!(!takes(&write).await);
    assert_eq!(
        cluster.count_keys(&waiting),
        0,
        "a one-shot writer never registers"
    );
    assert!(
        !write.try_lock(WATCHDOG / 3, None).await.expect("try_lock"),
        "the reader keeps it"
    );
    released_everywhere(&cluster, &waiting, WATCHDOG / 3).await;

    // Dropped while it waits: the same.
    let dropped = tokio::spawn({
        let write = write.clone();
        async move { write.lock().await }
    });
    assert!(eventually_async(PATIENCE, || cluster.count_keys(&waiting) > 0).await);
    dropped.abort();
    released_everywhere(&cluster, &waiting, WATCHDOG / 3).await;
    reading.unlock().await.expect("unlock");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_reader_frees_the_lock_within_its_own_lease_whatever_other_readers_do() {
    let cluster = RedisCluster::start(3);
    let name = "inventory";
    let zombie = HolderProcess::spawn(
        env!("CARGO_BIN_EXE_holder"),
        &format!("read:{name}"),
        WATCHDOG,
        &cluster.urls(),
    );
    let bob = client(&cluster, WATCHDOG).await;
    let carol = client(&cluster, WATCHDOG).await;
    let bob_reads = bob
        .get_read_write_lock(name)
        .read_lock()
        .acquire()
        .await
        .expect("bob reads beside the holder process");
    let writer = tokio::spawn({
        let write = carol.get_read_write_lock(name).write_lock();
        async move { write.acquire().await }
    });
    zombie.kill();
    // Bob's reader is renewed for longer than the killed reader's lease: the two readers'
    // deadlines are their own, so bob's renewals keep only bob.
    // Eight rounds (8 s): the dead reader's lease (3 s) runs out well before bob lets go, and
    // the waiting writer looks again every third of a second meanwhile.
    rounds_pass(bob.watchdog(), 8).await;
    assert!(!writer.is_finished(), "bob still reads");
    bob_reads.unlock().await.expect("bob stops reading");
    // The killed reader's entry ran out on its own (the waiting writer's looks purged it): bob's
    // release was the last reader's, and it deleted the readers hash on the majority that
    // answered it. Renewals that kept every reader would have kept the dead one.
    let readers = key(&bob, name, "read");
    assert!(
        cluster.nodes_with(&readers).len() < 2,
        "a dead reader is not kept by a live one's renewals: {:?}",
        cluster.nodes_with(&readers)
    );
    let carol_writes = tokio::time::timeout(PATIENCE, writer)
        .await
        .expect("the writer gets in")
        .expect("task")
        .expect("carol writes");
    carol_writes.unlock().await.expect("unlock");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_waiting_writer_stops_holding_readers_up_within_its_heartbeat() {
    let cluster = RedisCluster::start(3);
    let name = "ledger";
    let alice = client(&cluster, WATCHDOG).await;
    let dave = client(&cluster, WATCHDOG).await;
    let reading = alice
        .get_read_write_lock(name)
        .read_lock()
        .acquire()
        .await
        .expect("alice reads");
    let writer = HolderProcess::start(
        env!("CARGO_BIN_EXE_holder"),
        &format!("write:{name}"),
        WRITER_WATCHDOG,
        &cluster.urls(),
    );
    let waiting = key(&alice, name, "write-waiting");
    assert!(
        eventually_async(PATIENCE, || cluster.nodes_with(&waiting).len() >= 2).await,
        "the writer process registers while it waits"
    );
    let read = dave.get_read_write_lock(name).read_lock();
    assert!(!takes(&read).await, "writers first, across processes");
    writer.kill();
    // Its registration runs out on the server's clock, within its heartbeat; nothing takes
    // it back.
    assert!(
        read.try_lock(PATIENCE, None).await.expect("try_lock"),
        "a reader gets in once the dead writer's heartbeat ran out"
    );
    read.unlock().await.expect("unlock");
    reading.unlock().await.expect("unlock");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_waiting_reader_gets_in_when_the_writer_leaves_and_they_read_together() {
    let cluster = RedisCluster::start(3);
    let name = "feed";
    // The writer's lease outlasts the test's patience: a reader that missed the release would
    // look again only when that lease ran out, and fail the test.
    let writer = client(&cluster, Duration::from_secs(90)).await;
    let writing = writer
        .get_read_write_lock(name)
        .write_lock()
        .acquire()
        .await
        .expect("write");
    const PER_CLIENT: usize = 4;
    let readers = [
        client(&cluster, WATCHDOG).await,
        client(&cluster, WATCHDOG).await,
    ];
    // Each reader holds until every reader holds: only readers that share the lock get past.
    let together = std::sync::Arc::new(tokio::sync::Barrier::new(readers.len() * PER_CLIENT));
    let mut tasks = Vec::new();
    for reader in &readers {
        for _ in 0..PER_CLIENT {
            let read = reader.get_read_write_lock(name).read_lock();
            let together = std::sync::Arc::clone(&together);
            tasks.push(tokio::spawn(async move {
                let guard = read.acquire().await.expect("read");
                together.wait().await;
                guard.unlock().await.expect("unlock");
            }));
        }
    }
    for reader in &readers {
        assert!(
            eventually_async(PATIENCE, || reader.watched_channels() > 0).await,
            "each client's first reader waits for the release"
        );
    }
    let outsider = client(&cluster, WATCHDOG).await;
    assert!(
        !takes(&outsider.get_read_write_lock(name).read_lock()).await,
        "the writer still writes"
    );
    writing.unlock().await.expect("unlock");
    for task in tasks {
        tokio::time::timeout(PATIENCE, task)
            .await
            .expect("every reader gets in, and they read together")
            .expect("task");
    }
    released_everywhere(
        &cluster,
        &format!("{}*", writer.redlock().config().key_for(name)),
        WATCHDOG / 3,
    )
    .await;
}
