//! A lock worker of the fault-injection suite (`tests/tests/fault_*.rs`), run as a child
//! process so the suite can SIGKILL and SIGSTOP it.
//!
//! It builds a `LockClient` on the masters it is given (through the suite's fault proxies) and
//! runs `--tasks` loops. Each loop takes a lock with a reentrant depth of 1 to `--max-depth`,
//! works under it and releases it, again and again, and writes every step into the shared
//! history (`redlock_testkit::History`, protocol in `redlock_testkit::history`):
//!
//! - `--mode fenced`: the lock `fenced` (or one of `--locks` such locks); under it, a fenced
//!   read of that lock's counter at `--resource`, `--hold-ms` of work (one cycle in `N`
//!   `--long-hold N:LOW-HIGH` instead), and a fenced write of the value read plus one.
//! - `--mode cycles`: a new lock name every cycle and no resource (short leases, many cycles:
//!   each name is renewed only while held, which the history shows).
//!
//! The watchdog's per-lock renewals are recorded too (`renew info lock=L`). `--sabotage NAME`
//! turns on one of the lock's deliberately broken behaviours (`redlock_reentrant::sabotage`),
//! for the suite's negative controls.
//!
//! Standard input drives it: `quiesce` lets every loop finish its cycle and stop, then prints
//! `QUIET`; `stats` records and prints the watchdog's registrations left; end of input (the
//! suite is gone) exits.

use std::io::Write as _;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use redlock_reentrant::{LockClient, RetryPolicy};
use redlock_testkit::history::{History, Op, Phase};
use redlock_testkit::{Sabotage, WorkerMode, WorkerSpec};
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::Layer as _;

mod lock_loop;
mod renewals;

use lock_loop::Worker;

#[tokio::main]
async fn main() -> ExitCode {
    let args = match WorkerSpec::parse(std::env::args().skip(1)) {
        Ok(args) => Arc::new(args),
        Err(err) => {
            eprintln!("fault_worker: {err} (see redlock_testkit::WorkerSpec)");
            return ExitCode::from(2);
        }
    };
    let history = match History::open(&args.history) {
        Ok(history) => Arc::new(history),
        Err(err) => {
            eprintln!("fault_worker: cannot open the history: {err}");
            return ExitCode::from(2);
        }
    };
    if let Some(sabotage) = args.sabotage {
        sabotage_on(sabotage);
    }
    // `WORKER_LOG=<filter>` (e.g. `redlock_core=debug`) also writes the library's tracing to
    // `w<id>.log` next to the history, to see why an operation failed.
    let log = std::env::var("WORKER_LOG").ok().and_then(|filter| {
        let path = args.history.with_file_name(format!("w{}.log", args.id));
        let file = std::fs::File::create(path).ok()?;
        Some(
            tracing_subscriber::fmt::layer()
                .with_writer(std::sync::Mutex::new(file))
                .with_ansi(false)
                .with_filter(tracing_subscriber::EnvFilter::new(filter)),
        )
    });
    let subscriber = tracing_subscriber::registry()
        .with(renewals::layer(Arc::clone(&history), Arc::clone(&args)))
        .with(log);
    if tracing::subscriber::set_global_default(subscriber).is_err() {
        eprintln!("fault_worker: a tracing subscriber was already set");
        return ExitCode::from(2);
    }

    let mut builder = LockClient::builder()
        .nodes(args.nodes.clone())
        .watchdog_timeout(args.lease)
        .key_prefix(args.key_prefix.clone());
    if let Some(timeout) = args.node_timeout {
        builder = builder.node_timeout(timeout);
    }
    if let Some(retries) = args.retries {
        builder = builder.retry(RetryPolicy {
            retries,
            ..RetryPolicy::default()
        });
    }
    // Built lazily: a worker may start while a majority is down.
    let client = match builder.build().await {
        Ok(client) => client,
        Err(err) => {
            eprintln!("fault_worker: could not build the client: {err}");
            return ExitCode::from(2);
        }
    };

    let stop = Arc::new(AtomicBool::new(false));
    let mut loops = Vec::new();
    for task in 0..args.tasks {
        let worker = Worker {
            args: Arc::clone(&args),
            history: Arc::clone(&history),
            actor: task_actor(&args, task),
            client: client.clone(),
            rng: fastrand::Rng::with_seed(args.seed ^ (u64::from(task) << 32)),
            task,
            stop: Arc::clone(&stop),
        };
        loops.push(tokio::spawn(worker.run()));
    }

    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        match line.trim() {
            "quiesce" => {
                stop.store(true, Ordering::Relaxed);
                for task in loops.drain(..) {
                    let _ = task.await;
                }
                say("QUIET");
            }
            "stats" => {
                let registered = client.watchdog().registered();
                let renewed = client.watchdog().stats().renewed;
                for task in 0..args.tasks {
                    history.record(
                        &task_actor(&args, task),
                        Op::Stats,
                        Phase::Info,
                        &[("registered", &registered), ("renewed", &renewed)],
                    );
                }
                say(&format!("STATS registered={registered} renewed={renewed}"));
            }
            other => eprintln!("fault_worker: unknown command {other:?}"),
        }
    }
    ExitCode::SUCCESS
}

/// The history actor of loop `task`: `w<id>`, or `w<id>.<task>` when the worker runs several
/// loops (the checkers then follow each loop on its own).
fn task_actor(args: &WorkerSpec, task: u32) -> String {
    if args.tasks > 1 {
        format!("w{}.{task}", args.id)
    } else {
        format!("w{}", args.id)
    }
}

/// The loop that holds `lock`: in cycles mode its name says (`c<id>-<task>-<cycle>`); a shared
/// lock is the one loop's when there is one.
fn lock_actor(args: &WorkerSpec, lock: &str) -> String {
    let task = lock
        .strip_prefix('c')
        .and_then(|rest| rest.split('-').nth(1))
        .and_then(|task| task.parse().ok())
        .filter(|_| args.mode == WorkerMode::Cycles);
    task_actor(args, task.unwrap_or(0))
}

/// Turns on one of the lock's broken behaviours, for this whole process.
fn sabotage_on(sabotage: Sabotage) {
    use redlock_reentrant::sabotage as switch;
    let flag = match sabotage {
        Sabotage::QuorumOfOne => &switch::QUORUM_OF_ONE,
        Sabotage::SkipValidity => &switch::SKIP_VALIDITY,
        Sabotage::ReleaseWithoutCompare => &switch::RELEASE_WITHOUT_COMPARE,
        Sabotage::KeepRenewingReleased => &switch::KEEP_RENEWING_RELEASED,
    };
    flag.store(true, Ordering::Relaxed);
}

/// Writes one line to standard output and flushes it.
fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}").and_then(|()| out.flush());
}
