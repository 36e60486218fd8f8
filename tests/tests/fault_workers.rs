//! Fault suite: lock holders that die (SIGKILL) or freeze (SIGSTOP) while they hold the lock.
//!
//! Five masters, workers in child processes contending for one fenced lock (3 s lease renewed
//! every second, reentrant depth 1-3), every event in one history checked by the five checkers
//! of `redlock_testkit::check`. Each scenario prints its figures.

use std::time::Duration;

use redlock_testkit::{kill_to_reacquire, lost_after_resume};
use redlock_testkit::{one_scenario_at_a_time, FaultRun, RunConfig};

const WORKER: &str = env!("CARGO_BIN_EXE_fault_worker");

/// Holders SIGKILLed at random: every lock is freed within the lease (plus drift), and nothing
/// is left once the run quiesces.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_holders_free_the_lock_within_the_lease() {
    let _serial = one_scenario_at_a_time().await;
    let config = RunConfig::new("killed-holders", WORKER);
    let lease = config.worker.lease;
    let mut run = FaultRun::start(config).await;
    run.spawn_workers(4, |_| {}).await;
    let mut kills = 0;
    while kills < 4 {
        let holder = run
            .wait_for_holder("fenced", lease * 3)
            .await
            .expect("someone holds the lock");
        // Kill at a random point of its hold, if it still holds by then.
        let jitter = Duration::from_millis(run.rng().u64(0..20));
        tokio::time::sleep(jitter).await;
        if run.current_holder("fenced") != Some(holder) {
            continue;
        }
        run.kill_worker(holder);
        kills += 1;
        run.spawn_worker(|_| {}).await;
    }
    let outcome = run.finish().await;
    outcome.print();
    let freed = kill_to_reacquire(&outcome.events, lease / 3);
    let max = freed.iter().max().copied().unwrap_or_default();
    eprintln!(
        "killed-holders: {kills} holders killed, {} re-acquisitions measured, kill to next holder max {max:?} (lease {lease:?})",
        freed.len()
    );
    outcome.assert_passed();
    assert!(
        !freed.is_empty(),
        "no kill of a holder was followed by a new holder\n{}",
        outcome.replay_hint()
    );
    // Each lock was renewed at most a lease before the kill; a waiter takes it once it expires.
    // The margin covers the waiter's wake-up and attempt, not a second lease.
    let bound = lease + lease / 4;
    assert!(
        max <= bound,
        "a killed holder's lock took {max:?} to change hands (bound {bound:?})\n{}",
        outcome.replay_hint()
    );
    outcome.discard();
}

/// Holders SIGSTOPped for 1.5 to 5 leases, then resumed: the lost signal fires on resume, no
/// stale write is accepted, and no renewal brings a lock back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frozen_holders_learn_they_lost_and_write_nothing_stale() {
    let _serial = one_scenario_at_a_time().await;
    let mut config = RunConfig::new("frozen-holders", WORKER);
    // Long holds, so a freeze often lands between the read and the write.
    config.worker.hold = (Duration::from_millis(50), Duration::from_millis(400));
    let lease = config.worker.lease;
    let pause_bound = config.pause_bound;
    let mut run = FaultRun::start(config).await;
    run.spawn_workers(3, |_| {}).await;
    let mut freezes = 0;
    while freezes < 3 {
        let holder = run
            .wait_for_holder("fenced", lease * 3)
            .await
            .expect("someone holds the lock");
        let jitter = Duration::from_millis(run.rng().u64(0..200));
        tokio::time::sleep(jitter).await;
        // Freeze at a random point of its hold, if it still holds by then.
        if run.current_holder("fenced") != Some(holder) {
            continue;
        }
        freezes += 1;
        run.stop_worker(holder);
        let frozen = lease.mul_f64(1.5 + 3.5 * run.rng().f64());
        tokio::time::sleep(frozen).await;
        run.resume_worker(holder);
    }
    let outcome = run.finish().await;
    outcome.print();
    let learned = lost_after_resume(&outcome.events, pause_bound);
    eprintln!("frozen-holders: lost signal after resume: {learned:?}");
    outcome.assert_passed();
    assert!(
        !learned.is_empty(),
        "no freeze caught a holder\n{}",
        outcome.replay_hint()
    );
    for (worker, after) in &learned {
        assert!(
            after.is_some(),
            "{worker} was frozen past its lease while holding and never learned it lost\n{}",
            outcome.replay_hint()
        );
    }
    outcome.discard();
}
