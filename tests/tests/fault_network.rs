//! Fault suite: the network between one worker and the masters holds, drops and delays bytes
//! (the per-worker proxies of `redlock_testkit::ProxyGrid`), and acquisitions are dropped half
//! way. Each scenario prints its figures.

use std::time::Duration;

use redlock_testkit::history::{now_ns, Op, Phase};
use redlock_testkit::{eventually_async, one_scenario_at_a_time, Fault, FaultRun, RunConfig};

const WORKER: &str = env!("CARGO_BIN_EXE_fault_worker");

/// Replies held past the lease during acquisition: the acquisition fails (its per-node requests
/// time out long before), and its release reaches every master, so no key is left even while
/// the replies are still held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replies_held_past_the_lease_fail_and_release_everywhere() {
    let _serial = one_scenario_at_a_time().await;
    let mut config = RunConfig::new("held-replies", WORKER);
    let lease = config.worker.lease;
    // Between one failure and the next attempt: half of it to see the undo land, on a busy
    // machine too.
    let think = lease / 3;
    config.worker.think = (think, think);
    config.worker.retries = Some(0);
    let mut run = FaultRun::start(config).await;
    run.spawn_worker(|_| {}).await;
    let first = run.next_acquisition_end("w0", 0, lease * 2).await;
    assert_eq!(first.phase, Phase::Ok, "w0 locks on a healthy cluster");
    let ok_at = first.t;
    run.proxy(Some(0), None, Fault::HoldReplies);
    let held_at = now_ns();
    let mut failed = 0;
    let mut keys_after_failures = Vec::new();
    let mut after = held_at.max(ok_at);
    while Duration::from_nanos(now_ns() - held_at) < lease + lease / 3 {
        // Acquisitions ending after the fault began: their replies are held.
        let ended = run.next_acquisition_end("w0", after, lease * 2).await;
        after = ended.t;
        assert_ne!(
            ended.phase,
            Phase::Ok,
            "an acquisition succeeded with every reply held"
        );
        failed += 1;
        // Its undo was queued behind it on every master before the failure was reported (its
        // reply, held like the others, is not awaited): the masters run it at once, within
        // half the worker's think time, before its next attempt.
        let gone = eventually_async(think / 2, || run.lock_keys_left() == 0).await;
        keys_after_failures.push(if gone { 0 } else { run.lock_keys_left() });
    }
    run.proxy(Some(0), None, Fault::Pass);
    let outcome = run.finish().await;
    outcome.print();
    eprintln!(
        "held-replies: {failed} acquisitions with replies held past the {lease:?} lease all failed; lock keys right after each failure: {keys_after_failures:?}"
    );
    outcome.assert_passed();
    assert!(failed > 0, "no acquisition ran while replies were held");
    assert!(
        keys_after_failures.iter().all(|&keys| keys == 0),
        "a failed acquisition left keys behind\n{}",
        outcome.replay_hint()
    );
    outcome.discard();
}

/// Forward-but-drop-the-reply on three masters: they run the acquisition but w0 never hears
/// back, so it fails, and its release (which the masters also run) leaves no key behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_replies_on_three_masters_leak_no_keys() {
    let _serial = one_scenario_at_a_time().await;
    let mut config = RunConfig::new("dropped-replies", WORKER);
    let lease = config.worker.lease;
    // Between one failure and the next attempt: half of it to see the release land.
    let think = lease / 3;
    config.worker.think = (think, think);
    config.worker.retries = Some(0);
    let mut run = FaultRun::start(config).await;
    run.spawn_worker(|_| {}).await;
    run.next_acquisition_end("w0", 0, lease * 2).await;
    let start = now_ns();
    for node in [0, 2, 4] {
        run.proxy(Some(0), Some(node), Fault::DropReplies);
    }
    let mut failed = 0;
    let mut keys_after_failures = Vec::new();
    let mut after = start;
    while failed < 5 {
        let ended = run.next_acquisition_end("w0", after, lease * 2).await;
        after = ended.t;
        assert_ne!(
            ended.phase,
            Phase::Ok,
            "an acquisition succeeded on two replies"
        );
        failed += 1;
        // The masters whose replies are dropped run the release too, a moment after the
        // worker gave up waiting for them: give them half the think time, before the next
        // attempt.
        let gone = eventually_async(think / 2, || run.lock_keys_left() == 0).await;
        keys_after_failures.push(if gone { 0 } else { run.lock_keys_left() });
    }
    for node in [0, 2, 4] {
        run.proxy(Some(0), Some(node), Fault::Pass);
    }
    let outcome = run.finish().await;
    outcome.print();
    eprintln!(
        "dropped-replies: {failed} acquisitions failed; lock keys right after each: {keys_after_failures:?}"
    );
    outcome.assert_passed();
    assert!(
        keys_after_failures.iter().all(|&keys| keys == 0),
        "a failed acquisition leaked keys\n{}",
        outcome.replay_hint()
    );
    outcome.discard();
}

/// Acquisitions dropped at random points (up to 40 ms in) while every request is delayed 2 to
/// 15 ms: no hold, registration or renewal outlives its dropped acquisition.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquisitions_dropped_under_latency_leak_nothing() {
    let _serial = one_scenario_at_a_time().await;
    let mut config = RunConfig::new("dropped-acquisitions", WORKER);
    config.worker.cancel_within = Some(Duration::from_millis(40));
    config.worker.hold = (Duration::from_millis(1), Duration::from_millis(5));
    let lease = config.worker.lease;
    let mut run = FaultRun::start(config).await;
    run.spawn_workers(5, |_| {}).await;
    for node in 0..5 {
        let delay = Duration::from_millis(run.rng().u64(2..=15));
        run.proxy(None, Some(node), Fault::Delay(delay));
    }
    tokio::time::sleep(lease * 2).await;
    let outcome = run.finish().await;
    outcome.print();
    let cancelled = outcome
        .events
        .iter()
        .filter(|e| e.is(Op::Acquire, Phase::Info))
        .count();
    eprintln!("dropped-acquisitions: {cancelled} acquisitions dropped part way; 0 leaks expected");
    outcome.assert_passed();
    assert!(
        cancelled > 10,
        "too few acquisitions were dropped\n{}",
        outcome.replay_hint()
    );
    outcome.discard();
}
