//! A request of an earlier hold that reaches a node late (after a reconnect, or overtaken in a
//! Redis Cluster member's queue) never touches the same owner's next hold: every request names
//! its hold, not only its owner. Each test records the request as the node ran it (`MONITOR`),
//! lets the owner take the lock again, and sends the recorded bytes once more: what a late copy
//! would do. And since an owner's earlier hold is another hold to the nodes, a test checks that
//! the owner's next hold after its fixed lease ran out still takes what is left of it over.

use std::time::Duration;

use redlock_testkit::{eventually_async, rival_hold, Monitor, RedisCluster};
use redlock_tests::script_calls::{self, is_new_attempt, is_release, is_undo, Command};
use redlock_tests::{client, WATCHDOG};

const NAME: &str = "late-request";
const KEY: &str = "redlock:late-request";

/// The script calls on our key that `monitor` recorded and `wanted` picks.
fn script_calls(monitor: &Monitor, wanted: fn(&Command) -> bool) -> Vec<Command> {
    script_calls::on(monitor, KEY)
        .into_iter()
        .filter(wanted)
        .collect()
}

/// Waits until `monitor` recorded a script call that `wanted` picks, and returns the first.
async fn recorded(monitor: &Monitor, wanted: fn(&Command) -> bool) -> Command {
    assert!(
        eventually_async(WATCHDOG, || !script_calls(monitor, wanted).is_empty()).await,
        "the node never ran the script call expected"
    );
    script_calls(monitor, wanted).remove(0)
}

/// Sends `command` to node `node` again, as a late copy of it would arrive.
fn replay(cluster: &RedisCluster, node: usize, command: &Command) {
    let mut cmd = redis::cmd(std::str::from_utf8(&command[0]).expect("a command name"));
    for arg in &command[1..] {
        cmd.arg(arg.as_slice());
    }
    let _: redis::Value = cmd
        .query(&mut cluster.node(node).connection())
        .expect("the late copy runs");
}

/// The lock's fields and counts on node `node`.
fn fields(cluster: &RedisCluster, node: usize) -> Vec<(String, u32)> {
    redis::cmd("HGETALL")
        .arg(KEY)
        .query(&mut cluster.node(node).connection())
        .expect("HGETALL")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_release_of_an_earlier_hold_leaves_the_same_owners_next_hold_alone() {
    let cluster = RedisCluster::start(3);
    let holder = client(&cluster, WATCHDOG).await;
    let owner = holder.new_owner();
    let lock = holder.get_lock(NAME).with_owner(&owner);
    let monitors: Vec<Monitor> = (0..2)
        .map(|node| Monitor::start(cluster.node(node).port()).expect("MONITOR"))
        .collect();

    lock.lock().await.expect("the first hold");
    lock.unlock().await.expect("released");
    let mut releases = Vec::new();
    for monitor in &monitors {
        releases.push(recorded(monitor, is_release).await);
    }

    // The same owner's next hold, on every node; then the first hold's release arrives again
    // on two of the three.
    lock.lock().await.expect("the next hold");
    // Granted by a majority; the third grant may still be on its way.
    let everywhere = || (0..3).all(|node| fields(&cluster, node).len() == 1);
    assert!(eventually_async(WATCHDOG, everywhere).await);
    let before: Vec<_> = (0..3).map(|node| fields(&cluster, node)).collect();
    for (node, release) in releases.iter().enumerate() {
        replay(&cluster, node, release);
    }

    let after: Vec<_> = (0..3).map(|node| fields(&cluster, node)).collect();
    assert_eq!(
        after, before,
        "the late release touched the next hold's keys"
    );
    let rival = client(&cluster, WATCHDOG).await;
    assert!(
        !rival
            .get_lock(NAME)
            .try_lock(Duration::ZERO, None)
            .await
            .expect("try_lock"),
        "a rival took the lock while its holder still believes"
    );
    assert_eq!(lock.hold_count().await.expect("inspect"), 1);
    lock.unlock().await.expect("the next hold releases");
    rival.shutdown().await;
    holder.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_undo_of_an_earlier_attempt_leaves_the_same_owners_next_hold_alone() {
    let cluster = RedisCluster::start(3);
    // Another owner holds nodes 1 and 2: the attempt lands on node 0 only, and is undone there.
    for node in [1, 2] {
        rival_hold(&cluster, node, KEY, "rival");
    }
    let holder = client(&cluster, WATCHDOG).await;
    let owner = holder.new_owner();
    let lock = holder.get_lock(NAME).with_owner(&owner);
    let monitor = Monitor::start(cluster.node(0).port()).expect("MONITOR");
    let taken = lock.try_lock(Duration::ZERO, None).await.expect("try_lock");
    assert!(!taken, "a majority holds it for the rival");
    let undo = recorded(&monitor, is_undo).await;
    assert_eq!(fields(&cluster, 0), Vec::new(), "the attempt was undone");

    // The rival lets go; the same owner's next hold; the first attempt's undo arrives again.
    for node in [1, 2] {
        redis::cmd("DEL")
            .arg(KEY)
            .exec(&mut cluster.node(node).connection())
            .expect("the rival releases");
    }
    assert!(lock.try_lock(Duration::ZERO, None).await.expect("try_lock"));
    // Granted by a majority; node 0's grant may still be on its way.
    assert!(eventually_async(WATCHDOG, || fields(&cluster, 0).len() == 1).await);
    let before = fields(&cluster, 0);
    replay(&cluster, 0, &undo);

    assert_eq!(
        fields(&cluster, 0),
        before,
        "the late undo deleted the next hold on node 0"
    );
    lock.unlock().await.expect("released");
    holder.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_attempt_of_an_earlier_hold_never_takes_the_same_owners_next_hold_over() {
    let cluster = RedisCluster::start(3);
    let holder = client(&cluster, WATCHDOG).await;
    let owner = holder.new_owner();
    let lock = holder.get_lock(NAME).with_owner(&owner);
    let monitor = Monitor::start(cluster.node(0).port()).expect("MONITOR");

    lock.lock().await.expect("the first hold");
    let attempt = recorded(&monitor, is_new_attempt).await;
    lock.unlock().await.expect("released");
    lock.lock().await.expect("the next hold");
    assert!(eventually_async(WATCHDOG, || fields(&cluster, 0).len() == 1).await);
    let before = fields(&cluster, 0);
    // The first hold's attempt arrives again (overtaken, sent again while its slot moved).
    replay(&cluster, 0, &attempt);

    assert_eq!(
        fields(&cluster, 0),
        before,
        "the late attempt took the next hold over on node 0"
    );
    lock.unlock().await.expect("released");
    holder.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_owners_next_hold_after_its_fixed_lease_ran_out_is_taken_at_once() {
    // The lost signal of a fixed lease fires a tenth of it (400 ms) before the keys expire.
    const LEASE: Duration = Duration::from_secs(4);
    let cluster = RedisCluster::start(3);
    let holder = client(&cluster, WATCHDOG).await;
    let lock = holder.get_lock(NAME);
    assert!(lock
        .try_lock(Duration::ZERO, Some(LEASE))
        .await
        .expect("try_lock"));
    let signal = lock.lost_signal().expect("held");
    let reason = tokio::time::timeout(LEASE * 2, signal.lost())
        .await
        .expect("told before the lease ends");
    assert_eq!(reason, redlock_reentrant::LostReason::LeaseExpired);

    // The expired hold's keys name another hold: the owner's next one takes them over at once
    // (a machine slow enough to tell the holder after they expired makes this pass trivially).
    assert!(
        lock.try_lock(Duration::ZERO, Some(LEASE))
            .await
            .expect("try_lock"),
        "the owner's own expired hold kept it out"
    );
    assert_eq!(lock.hold_count().await.expect("inspect"), 1);
    lock.unlock().await.expect("released");
    holder.shutdown().await;
}
