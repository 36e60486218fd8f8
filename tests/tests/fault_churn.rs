//! Fault suite: many short lock cycles. Renewals must stop with the release, however the
//! renewal rounds and the releases interleave, and scripts flushed from the masters during the
//! load must never surface as errors. Each scenario prints its figures.

use std::time::Duration;

use redlock_testkit::history::{Event, Op, Phase};
use redlock_testkit::{one_scenario_at_a_time, FaultRun, Outcome, RunConfig, WorkerMode};

const WORKER: &str = env!("CARGO_BIN_EXE_fault_worker");

/// Lock cycles (outer acquisitions that succeeded) in the history.
fn cycles(outcome: &Outcome) -> usize {
    outer_acquisitions(&outcome.events)
}

/// Outer acquisitions that succeeded among `events`.
fn outer_acquisitions(events: &[Event]) -> usize {
    events
        .iter()
        .filter(|e| e.is(Op::Acquire, Phase::Ok) && e.is_outer())
        .count()
}

/// `CHURN_CYCLES` (default 100,000) lock/unlock cycles, each on a new lock name, by 4 workers
/// of 16 loops, with a 300 ms lease renewed every 100 ms; most holds last up to 12 ms, one in
/// ten 80-220 ms, so releases land both just before and just after renewals: not one renewal
/// of a lock after its release.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_short_cycles_renew_nothing_after_release() {
    let _serial = one_scenario_at_a_time().await;
    let target: usize = std::env::var("CHURN_CYCLES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(100_000);
    let mut config = RunConfig::new("churn", WORKER);
    config.worker.mode = WorkerMode::Cycles;
    config.worker.lease = Duration::from_millis(300);
    config.worker.tasks = 16;
    config.worker.max_depth = 2;
    // Most cycles are instant; one in ten lasts about as long as a renewal interval or two.
    config.worker.hold = (Duration::ZERO, Duration::from_millis(12));
    config.worker.long_hold = (10, (Duration::from_millis(80), Duration::from_millis(220)));
    config.worker.think = (Duration::ZERO, Duration::ZERO);
    config.pause_bound = config.worker.lease / 3;
    let mut run = FaultRun::start(config).await;
    run.spawn_workers(4, |_| {}).await;
    let started = std::time::Instant::now();
    loop {
        tokio::time::sleep(Duration::from_secs(2)).await;
        // Stops on what is asserted below: outer acquisitions, not the nested ones with them.
        let done = redlock_testkit::history::read_history(run.history().path())
            .map(|events| outer_acquisitions(&events))
            .unwrap_or(0);
        // The cap only guards against a hang: the cycles take about 3 minutes on a 2-core
        // machine running nothing else, and can take twice that on a busy one.
        if done >= target || started.elapsed() > Duration::from_secs(600) {
            break;
        }
    }
    let outcome = run.finish().await;
    outcome.print();
    let quiescence = outcome.report("quiescence");
    eprintln!(
        "churn: {} lock cycles in {:.0?}, {} renewals sent while held, {} after release",
        cycles(&outcome),
        started.elapsed(),
        quiescence.figure("renewals").unwrap_or(0),
        quiescence.figure("renewals_after_release").unwrap_or(0),
    );
    outcome.assert_passed();
    assert!(
        cycles(&outcome) >= target,
        "only {} cycles\n{}",
        cycles(&outcome),
        outcome.replay_hint()
    );
    assert!(
        quiescence.figure("renewals") > Some(0),
        "nothing was renewed, so nothing was tested\n{}",
        outcome.replay_hint()
    );
    outcome.discard();
}

/// `SCRIPT FLUSH` on every master every 200 ms while three workers lock and unlock: no
/// acquisition or release fails for it (a NOSCRIPT would surface as a `Redis` error).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flushed_scripts_never_surface() {
    let _serial = one_scenario_at_a_time().await;
    let mut run = FaultRun::start(RunConfig::new("script-flush", WORKER)).await;
    run.spawn_workers(3, |_| {}).await;
    let mut flushes = 0;
    for _ in 0..30 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        for node in 0..5 {
            run.flush_scripts(node);
        }
        flushes += 1;
    }
    let outcome = run.finish().await;
    outcome.print();
    let failures: Vec<String> = outcome
        .events
        .iter()
        .filter(|e| e.phase == Phase::Fail && matches!(e.op, Op::Acquire | Op::Release))
        .filter(|e| e.field("err") != Some("Busy"))
        .map(ToString::to_string)
        .collect();
    eprintln!(
        "script-flush: {flushes} flushes of all 5 masters, {} lock cycles, {} failures",
        cycles(&outcome),
        failures.len()
    );
    outcome.assert_passed();
    assert!(
        cycles(&outcome) > 50,
        "too little load\n{}",
        outcome.replay_hint()
    );
    assert!(
        failures.is_empty(),
        "failures under SCRIPT FLUSH: {failures:?}\n{}",
        outcome.replay_hint()
    );
    outcome.discard();
}
