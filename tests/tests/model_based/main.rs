//! The model-based test: random sequences of operations by several owners in two clients
//! on two reentrant locks and both sides of a read-write lock (lock, lock_with_lease, try_lock
//! with waits and leases, nested acquisitions, reads together, a writer's downgrade, the
//! upgrade refused, guards unlocked or dropped, on a runtime or off one, unlock, force_unlock,
//! shutdown, multi-locks of a reentrant lock and a side kept as guards, futures dropped at
//! random points, clients dropped without shutdown, the watchdog-renewed plain lock and the
//! core lock's acquire, extend (dropped at random points too) and release beside them),
//! interleaved with faults (a master paused, two paused one after
//! the other or at once, one restarted empty after a delay, every pub/sub connection killed),
//! run against the real library on three real masters and checked after every step against a
//! model of the documented semantics (`model_based/model.rs`):
//!
//! - never two owners believing they hold a lock at once (belief as in `docs/safety.md`), nor a
//!   writer beside anyone else (readers together are fine);
//! - the lost signal fires before another owner can acquire: every belief is backed by a
//!   majority's TTL, and an acquisition by another owner finds nobody believing;
//! - the watchdog has exactly the live holds registered: a hold is renewed while some handle
//!   of it exists and it is not lost, never after;
//! - outcomes, hold counts, tokens, `is_locked`, `hold_count` and `remaining_ttl` agree with
//!   the model; every loss has a cause the documentation gives;
//! - at the end of each sequence, after releasing everything: no key, no registration, no
//!   subscription, no pub/sub connection, and no connection once the clients are gone.
//!
//! The family beside it (the permit semaphore, the count-down latch, the fair lock on one master;
//! the semaphore whose count its client fixes on five masters) has a model of its own
//! (`model_based/family.rs`).
//!
//! Seeded and replayable: the seed is printed (`TEST_SEED=<seed>` replays the same
//! sequences), and proptest shrinks a failing sequence for up to `MODEL_SHRINK_SECONDS`
//! (default 120). `MODEL_CASES` (default 200) and `MODEL_STEPS` (default 24) set the size; the
//! long run:
//! `MODEL_CASES=2000 cargo test -p redlock-tests --test model_based -- --nocapture`.

mod core_lease;
mod family;
mod model;
mod ops;
mod plain;
mod system;

use std::cell::RefCell;
use std::sync::{Arc, Mutex, PoisonError};

use proptest::test_runner::{Config, RngSeed, TestRunner};
use proptest_state_machine::{ReferenceStateMachine, StateMachineTest};
use redlock_testkit::{test_seed, RedisCluster};

use ops::{Drawn, Sequences, Step, NODES};
use system::{Deployment, System};

thread_local! {
    /// The servers every sequence of this test thread runs on, started once for its run.
    static DEPLOYMENT: RefCell<Option<Deployment>> = const { RefCell::new(None) };
}

/// One run at a time: each is timed against its own leases, on two cores.
static ONE_RUN: Mutex<()> = Mutex::new(());

struct LockModel;

impl StateMachineTest for LockModel {
    type SystemUnderTest = System;
    type Reference = Sequences;

    fn init_test(_: &Drawn) -> System {
        let deployment = DEPLOYMENT
            .with(|deployment| deployment.borrow().clone())
            .expect("the run started the servers");
        System::start(deployment)
    }

    /// Runs the step, then checks every invariant (they need the system mutably: reading a
    /// lost signal may record a loss in the model).
    fn apply(mut system: System, _: &Drawn, step: Step) -> System {
        if let Err(violation) = system.apply(&step).and_then(|()| system.check()) {
            panic!(
                "{violation}\nsteps so far:\n{}\n{}",
                system.story(),
                system.surroundings()
            );
        }
        system
    }

    fn teardown(system: System, _: Drawn) {
        let (story, servers) = (system.story(), system.servers());
        if let Err(violation) = system.quiesce() {
            let surroundings = system::surroundings(&servers, &[false; NODES]);
            panic!("at quiescence: {violation}\nsteps:\n{story}\n{surroundings}");
        }
    }
}

fn env_number(name: &str, default: u32) -> u32 {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

/// How long proptest may shrink a failing sequence: `MODEL_SHRINK_SECONDS`, by default two
/// minutes. Each try replays a sequence against the servers (seconds each), so the bound is
/// in time; the first failure is printed before shrinking begins, and the shortest sequence
/// found by then is reported.
fn shrink_seconds() -> u32 {
    env_number("MODEL_SHRINK_SECONDS", 120)
}

type PanicHook = dyn Fn(&std::panic::PanicHookInfo<'_>) + Sync + Send + 'static;

/// Keeps the panics of failing cases quiet on this thread while proptest shrinks the failure
/// (each would print its backtrace; the runner reports the minimal one at the end), and says
/// once that shrinking began. Panics on other threads print as usual. Returns the hook to
/// restore.
fn quiet_failing_cases() -> Arc<PanicHook> {
    let default_hook: Arc<PanicHook> = Arc::from(std::panic::take_hook());
    let test_thread = std::thread::current().id();
    let announced = std::sync::atomic::AtomicBool::new(false);
    let hook = Arc::clone(&default_hook);
    std::panic::set_hook(Box::new(move |info| {
        if std::thread::current().id() != test_thread {
            hook(info);
        } else if !announced.swap(true, std::sync::atomic::Ordering::Relaxed) {
            // The first failure as it happened: shrinking may end on a smaller one that fails
            // for another reason (a server the first left broken, say).
            eprintln!(
                "model: a sequence failed; shrinking it (up to {} s, MODEL_SHRINK_SECONDS). The first failure:\n{}",
                shrink_seconds(),
                info.payload()
                    .downcast_ref::<String>()
                    .map(String::as_str)
                    .or_else(|| info.payload().downcast_ref::<&str>().copied())
                    .unwrap_or("(not a string)")
            );
        }
    }));
    default_hook
}

#[test]
fn random_sequences_match_the_model() {
    let servers = Arc::new(RedisCluster::start(NODES));
    let members = servers.urls();
    run(
        "standalone masters",
        Deployment { servers, members },
        env_number("MODEL_CASES", 200),
    );
}

/// The same sequences with every master a Redis Cluster member (a cluster of one shard each):
/// hash-tagged keys, a fencing counter per lock, shard-channel wake-ups and the cluster
/// connection, under the same faults. Fewer cases: the standalone run covers the protocol.
#[test]
fn random_sequences_on_cluster_members_match_the_model() {
    let servers = Arc::new(RedisCluster::start_single_shard_clusters(NODES));
    let members = servers.cluster_urls();
    let cases = env_number("MODEL_CLUSTER_CASES", 60);
    run(
        "Redis Cluster members",
        Deployment { servers, members },
        cases,
    );
}

fn run(what: &str, deployment: Deployment, cases: u32) {
    let _one_run = ONE_RUN.lock().unwrap_or_else(PoisonError::into_inner);
    let seed = test_seed();
    let steps = env_number("MODEL_STEPS", 24) as usize;
    eprintln!("{what}: TEST_SEED={seed} cases {cases} MODEL_STEPS={steps}");
    DEPLOYMENT.with(|slot| *slot.borrow_mut() = Some(deployment));
    let config = Config {
        cases,
        rng_seed: RngSeed::Fixed(seed),
        failure_persistence: None,
        // Each try takes seconds: time bounds the shrinking first.
        max_shrink_iters: 100,
        // Milliseconds.
        max_shrink_time: shrink_seconds().saturating_mul(1000),
        ..Config::default()
    };
    let started = std::time::Instant::now();
    let default_hook = quiet_failing_cases();
    let mut runner = TestRunner::new(config.clone());
    let outcome = runner.run(
        &Sequences::sequential_strategy(1..=steps),
        |(initial, transitions, seen)| {
            LockModel::test_sequential(config.clone(), initial, transitions, seen);
            Ok(())
        },
    );
    DEPLOYMENT.with(|slot| slot.borrow_mut().take());
    drop(std::panic::take_hook());
    std::panic::set_hook(Box::new(move |info| default_hook(info)));
    if let Err(failure) = outcome {
        panic!("{failure}\nreplay with TEST_SEED={seed}");
    }
    eprintln!(
        "model, {what}: {cases} sequences of up to {steps} steps in {:?}, no violation",
        started.elapsed()
    );
}
