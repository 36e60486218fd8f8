//! Fault suite, mixed soak: every fault together (workers killed and frozen, masters killed,
//! frozen and partitioned, proxy faults, script flushes), chosen by the seeded nemesis, while
//! six workers contend for six fenced locks. 20 s by default; `SOAK_SECS=1800` for the long soak
//! (which should make at least 50,000 acquisitions with 0 violations).

use std::time::Duration;

use redlock_testkit::{
    one_scenario_at_a_time, success_rate, FaultKind, FaultRun, Nemesis, RunConfig,
};

const WORKER: &str = env!("CARGO_BIN_EXE_fault_worker");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_fault_at_once() {
    let _serial = one_scenario_at_a_time().await;
    let secs: u64 = std::env::var("SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    let mut config = RunConfig::new("soak", WORKER);
    config.worker.hold = (Duration::ZERO, Duration::from_millis(20));
    // Several locks: a frozen or killed holder blocks one of them for a lease, not the run.
    config.worker.locks = 6;
    // A worker gives up a lock held by a frozen holder soon and picks another.
    config.worker.wait = Duration::from_millis(500);
    let mut run = FaultRun::start(config).await;
    run.spawn_workers(6, |_| {}).await;
    let nemesis = Nemesis::new(&FaultKind::ALL);
    let faults = nemesis.run(&mut run, Duration::from_secs(secs)).await;
    let outcome = run.finish().await;
    outcome.print();
    let (ok, attempts) = success_rate(&outcome.events);
    eprintln!("soak: {secs} s, {faults} faults, {ok} of {attempts} acquisitions succeeded");
    outcome.assert_passed();
    assert!(faults > 0 && ok > 0, "{}", outcome.replay_hint());
    outcome.discard();
}
