//! Fault suite, negative controls: a checker that cannot fail proves nothing.
//!
//! Each test runs one scenario twice: with the real lock, which must pass every checker, and
//! with a deliberately broken twin (the `sabotage` feature, switched on in the worker
//! processes only), which a checker must catch. The scenario is the one the broken part exists
//! for, so the twin is caught every run, not by luck.

use std::time::Duration;

use redlock_testkit::history::{now_ns, Event, Op, Phase};
use redlock_testkit::{one_scenario_at_a_time, Fault, FaultRun, Outcome, RunConfig, Sabotage};

const WORKER: &str = env!("CARGO_BIN_EXE_fault_worker");

fn config(name: &str, sabotage: Option<Sabotage>) -> RunConfig {
    let twin = sabotage.map_or("real", Sabotage::name);
    let mut config = RunConfig::new(&format!("{name}-{twin}"), WORKER);
    config.worker.sabotage = sabotage;
    config
}

/// `ok` of an outer acquisition by `actor` after `after`.
fn outer_ok(actor: &str, after: u64) -> impl Fn(&Event) -> bool + '_ {
    move |e| e.actor == actor && e.t > after && e.is(Op::Acquire, Phase::Ok) && e.is_outer()
}

/// The real lock passes; the twin is caught by `checker`.
fn assert_control(real: Outcome, twin: Outcome, checker: &str) {
    real.print();
    twin.print();
    real.assert_passed();
    assert!(
        !twin.report(checker).passed(),
        "the broken twin went unnoticed by the {checker} checker\n{}",
        twin.replay_hint()
    );
    eprintln!(
        "control caught by {checker}: {} violations",
        twin.report(checker).violations.len()
    );
    real.discard();
    twin.discard();
}

/// Quorum of one, under an asymmetric partition: w0 reaches masters 0 and 1 only, w1 masters
/// 3 and 4 only. A majority lock refuses both (typed no-quorum failures); the twin grants both.
async fn partitioned(sabotage: Option<Sabotage>) -> Outcome {
    let mut config = config("partition", sabotage);
    config.worker.hold = (Duration::from_millis(100), Duration::from_millis(300));
    let mut run = FaultRun::start(config).await;
    for (worker, cut_off) in [(0, [2, 3, 4]), (1, [0, 1, 2])] {
        assert_eq!(run.prepare_worker().await, worker);
        for node in cut_off {
            run.proxy(Some(worker), Some(node), Fault::Blackhole);
        }
        run.spawn_worker(|_| {}).await;
    }
    tokio::time::sleep(run.lease()).await;
    run.finish().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quorum_of_one_is_caught() {
    let _serial = one_scenario_at_a_time().await;
    let real = partitioned(None).await;
    // Until the partition heals (the quiesce note), every attempt fails.
    let healed = real
        .events
        .iter()
        .find(|e| e.op == Op::Note && e.field("what") == Some("quiesce"))
        .map_or(u64::MAX, |e| e.t);
    let cut_off: Vec<Event> = real
        .events
        .iter()
        .filter(|e| e.t < healed)
        .cloned()
        .collect();
    let (ok, attempts) = redlock_testkit::success_rate(&cut_off);
    assert_eq!(ok, 0, "a minority granted the lock\n{}", real.replay_hint());
    assert!(attempts > 0, "nobody tried\n{}", real.replay_hint());
    let no_quorum = cut_off
        .iter()
        .filter(|e| e.is(Op::Acquire, Phase::Fail))
        .all(|e| e.field("err") == Some("NoQuorum"));
    assert!(
        no_quorum,
        "a failure other than NoQuorum\n{}",
        real.replay_hint()
    );
    let twin = partitioned(Some(Sabotage::QuorumOfOne)).await;
    assert_control(real, twin, "overlap");
}

/// No validity check (the lease counted from the reply): w0 reaches the masters through a
/// 0.8 s delay each way, so its acquisition (grant, then fencing write-back) completes about
/// 3.2 s after its grants landed, with a fixed 6 s lease. The real lock counts the lease from
/// the request and gives up its hold before the grants expire; the twin counts it from the
/// reply and still believes it holds when w1 takes the expired lock.
async fn late_replies(sabotage: Option<Sabotage>) -> Outcome {
    let mut config = config("late-replies", sabotage);
    let lease = Duration::from_secs(6);
    config.worker.lease = lease;
    config.worker.fixed_lease = Some(lease);
    config.worker.node_timeout = Some(Duration::from_millis(1900));
    config.worker.max_depth = 1;
    config.worker.hold = (Duration::from_secs(5), Duration::from_secs(5));
    let mut run = FaultRun::start(config).await;
    run.prepare_worker().await;
    run.proxy(Some(0), None, Fault::Delay(Duration::from_millis(800)));
    let start = now_ns();
    run.spawn_worker(|_| {}).await;
    run.wait_for_event(lease, |e| {
        e.actor == "w0" && e.t > start && e.is(Op::Acquire, Phase::Invoke)
    })
    .await
    .expect("w0 tries");
    // Once w0's grants have landed (its replies are still on their way), w1 finds the lock
    // held and waits for it.
    let landed = tokio::time::Instant::now() + lease;
    while run.lock_keys_left() < 3 && tokio::time::Instant::now() < landed {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(run.lock_keys_left() >= 3, "w0's grants never landed");
    run.spawn_worker(|spec| spec.hold = (Duration::from_secs(1), Duration::from_secs(1)))
        .await;
    run.wait_for_event(lease * 2, outer_ok("w1", start))
        .await
        .expect("w1 takes the lock once w0's grants expire");
    run.finish().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]

async fn a_missing_validity_check_is_caught() {
    let _serial = one_scenario_at_a_time().await;
    let real = late_replies(None).await;
    let twin = late_replies(Some(Sabotage::SkipValidity)).await;
    assert_control(real, twin, "overlap");
}

/// Release without compare: w0's release is delayed past its lease on every master. w1 takes
/// the lock once it expires; the late release then arrives. The real lock sees another owner
/// and does nothing; the twin deletes w1's lock, and w2 takes it while w1 still holds it.
async fn late_release(sabotage: Option<Sabotage>) -> Outcome {
    let mut config = config("late-release", sabotage);
    config.worker.max_depth = 1;
    config.worker.hold = (Duration::from_millis(2500), Duration::from_millis(3000));
    let lease = config.worker.lease;
    let mut run = FaultRun::start(config).await;
    let start = now_ns();
    run.spawn_worker(|spec| spec.hold = (Duration::from_millis(1000), Duration::from_millis(1000)))
        .await;
    run.wait_for_event(lease * 2, outer_ok("w0", start))
        .await
        .expect("w0 takes the lock");
    // w0's release (in about a second) reaches the masters a lease and a half later.
    run.proxy(Some(0), None, Fault::Delay(lease + lease / 6));
    run.spawn_workers(2, |_| {}).await;
    let w1_or_w2 = |e: &Event| {
        (e.actor == "w1" || e.actor == "w2") && e.is(Op::Acquire, Phase::Ok) && e.is_outer()
    };
    run.wait_for_event(lease * 3, w1_or_w2)
        .await
        .expect("another worker takes the lock after w0's lease");
    tokio::time::sleep(lease).await;
    run.finish().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_without_compare_is_caught() {
    let _serial = one_scenario_at_a_time().await;
    let real = late_release(None).await;
    let twin = late_release(Some(Sabotage::ReleaseWithoutCompare)).await;
    assert_control(real, twin, "overlap");
}

/// A watchdog whose registrations outlive their release: a new lock name each cycle, a short
/// lease renewed every 200 ms. The real watchdog never renews a released name; the twin does.
async fn churn(sabotage: Option<Sabotage>) -> Outcome {
    let mut config = config("churn", sabotage);
    config.worker.mode = redlock_testkit::WorkerMode::Cycles;
    config.worker.lease = Duration::from_millis(600);
    config.worker.hold = (Duration::ZERO, Duration::from_millis(400));
    config.worker.think = (Duration::ZERO, Duration::from_millis(300));
    config.pause_bound = config.worker.lease / 3;
    let lease = config.worker.lease;
    let mut run = FaultRun::start(config).await;
    run.spawn_workers(2, |_| {}).await;
    tokio::time::sleep(lease * 5).await;
    run.finish().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watchdog_that_outlives_its_release_is_caught() {
    let _serial = one_scenario_at_a_time().await;
    let real = churn(None).await;
    assert!(
        real.report("quiescence").figure("renewals") > Some(0),
        "the real run renewed nothing, so it proves nothing\n{}",
        real.replay_hint()
    );
    let twin = churn(Some(Sabotage::KeepRenewingReleased)).await;
    assert_control(real, twin, "quiescence");
}
