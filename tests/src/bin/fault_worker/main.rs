//! A lock worker of the fault-injection suite (`tests/tests/fault_*.rs`), run as a child
//! process so the suite can SIGKILL and SIGSTOP it.
//!
//! It builds a `LockClient` on the masters it is given (through the suite's fault proxies) and
//! runs `--tasks` loops. Each loop takes a lock with a reentrant depth of 1 to `--max-depth`,
//! works under it and releases it, again and again, and writes every step into the shared
//! history (`redlock_tests::History`, protocol in `redlock_tests::history`):
//!
//! - `--mode fenced`: the lock `fenced`; under it, a fenced read of the resource at
//!   `--resource`, `--hold-ms` of work, and a fenced write of the value read plus one.
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
use std::sync::Arc;
use std::time::Duration;

use std::sync::atomic::{AtomicBool, Ordering};

use redlock_reentrant::{CancellationToken, Error, LockClient, LockGuard, RLock, RetryPolicy};
use redlock_tests::history::{History, Op, Phase};
use redlock_tests::{Access, FencedClient, Sabotage, WorkerMode, WorkerSpec};
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::Layer as _;

mod renewals;

#[tokio::main]
async fn main() -> ExitCode {
    let args = match WorkerSpec::parse(std::env::args().skip(1)) {
        Ok(args) => Arc::new(args),
        Err(err) => {
            eprintln!("fault_worker: {err} (see redlock_tests::WorkerSpec)");
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

/// One lock loop.
struct Worker {
    args: Arc<WorkerSpec>,
    history: Arc<History>,
    actor: String,
    client: LockClient,
    rng: fastrand::Rng,
    task: u32,
    /// Set by `quiesce`: finish the cycle, then end.
    stop: Arc<AtomicBool>,
}

impl Worker {
    async fn run(mut self) {
        let mut resource = match (&self.args.mode, &self.args.resource) {
            (WorkerMode::Fenced, Some(url)) => match FencedClient::connect(url).await {
                Ok(resource) => Some(resource),
                Err(err) => {
                    eprintln!("fault_worker: cannot reach the resource: {err}");
                    std::process::exit(2);
                }
            },
            _ => None,
        };
        let mut cycle = 0u64;
        while !self.stop.load(Ordering::Relaxed) {
            let name = match self.args.mode {
                WorkerMode::Fenced => {
                    let mut names = self.args.lock_names();
                    let pick = self.rng.usize(..names.len());
                    names.swap_remove(pick)
                }
                WorkerMode::Cycles => format!("c{}-{}-{cycle}", self.args.id, self.task),
            };
            cycle += 1;
            let lock = self.client.get_lock(&name);
            let depth = self.rng.u32(1..=self.args.max_depth);
            let (guards, watching) = self.take(&lock, depth).await;
            if let (Some(outer), Some(resource)) = (guards.first(), resource.as_mut()) {
                self.work(&name, outer, resource).await;
            } else if !guards.is_empty() {
                self.sleep(self.args.hold).await;
            }
            self.release(&name, guards, watching).await;
            self.sleep(self.args.think).await;
        }
    }

    /// Takes `depth` holds of `lock` (fewer if one fails); records each step. With the outer
    /// hold comes the token that ends the watch on its lost signal.
    async fn take(&mut self, lock: &RLock, depth: u32) -> (Vec<LockGuard>, CancellationToken) {
        let mut guards: Vec<LockGuard> = Vec::new();
        let watching = CancellationToken::new();
        let name = lock.name();
        for level in 1..=depth {
            let record = |phase: Phase, extra: Option<(&str, &dyn std::fmt::Display)>| {
                let mut fields: Vec<(&str, &dyn std::fmt::Display)> =
                    vec![("lock", &name), ("depth", &level)];
                fields.extend(extra);
                self.history
                    .record(&self.actor, Op::Acquire, phase, &fields);
            };
            record(Phase::Invoke, None);
            let attempt = lock.try_acquire(self.args.wait, self.args.fixed_lease);
            let outcome = match self.args.cancel_within {
                Some(max) => {
                    let max = u64::try_from(max.as_micros()).unwrap_or(u64::MAX);
                    let after = Duration::from_micros(self.rng.u64(0..=max));
                    tokio::time::timeout(after, attempt).await.ok()
                }
                None => Some(attempt.await),
            };
            match outcome {
                Some(Ok(Some(guard))) => {
                    record(Phase::Ok, Some(("token", &guard.fencing_token())));
                    if level == 1 {
                        self.watch_lost(lock.name(), &guard, watching.clone());
                    }
                    guards.push(guard);
                }
                Some(Ok(None)) => {
                    record(Phase::Fail, Some(("err", &"Busy")));
                    break;
                }
                Some(Err(err)) => {
                    record(Phase::Fail, Some(("err", &kind(&err))));
                    break;
                }
                None => {
                    record(Phase::Info, Some(("err", &"cancelled")));
                    break;
                }
            }
        }
        (guards, watching)
    }

    /// Records the outer hold's lost signal if it fires before `released` is cancelled (when
    /// the final release starts).
    fn watch_lost(&self, name: &str, guard: &LockGuard, released: CancellationToken) {
        let lost = guard.lost();
        let history = Arc::clone(&self.history);
        let actor = self.actor.clone();
        let name = name.to_owned();
        tokio::spawn(async move {
            tokio::select! {
                biased;
                () = released.cancelled() => {}
                reason = lost => {
                    let reason = format!("{reason:?}");
                    history.record(&actor, Op::Lost, Phase::Info, &[("lock", &name), ("reason", &reason)]);
                }
            }
        });
    }

    /// The critical section: a fenced read, the work, a fenced write of the value read plus one.
    async fn work(&mut self, name: &str, outer: &LockGuard, resource: &mut FencedClient) {
        let token = outer.fencing_token();
        if outer.is_lost() {
            return;
        }
        self.history.record(
            &self.actor,
            Op::Read,
            Phase::Invoke,
            &[("lock", &name), ("token", &token)],
        );
        let value = match resource.read(name, token).await {
            Ok(Access::Accepted { value, seq }) => {
                self.history.record(
                    &self.actor,
                    Op::Read,
                    Phase::Ok,
                    &[
                        ("lock", &name),
                        ("token", &token),
                        ("value", &value),
                        ("seq", &seq),
                    ],
                );
                value
            }
            Ok(Access::Stale { highest }) => {
                self.history.record(
                    &self.actor,
                    Op::Read,
                    Phase::Fail,
                    &[("lock", &name), ("token", &token), ("highest", &highest)],
                );
                return;
            }
            Err(err) => {
                eprintln!("fault_worker: the resource failed: {err}");
                std::process::exit(2);
            }
        };
        self.sleep(self.args.hold).await;
        if outer.is_lost() {
            return;
        }
        let next = value + 1;
        self.history.record(
            &self.actor,
            Op::Write,
            Phase::Invoke,
            &[("lock", &name), ("token", &token), ("value", &next)],
        );
        match resource.write(name, token, next).await {
            Ok(Access::Accepted { seq, .. }) => {
                self.history.record(
                    &self.actor,
                    Op::Write,
                    Phase::Ok,
                    &[
                        ("lock", &name),
                        ("token", &token),
                        ("value", &next),
                        ("seq", &seq),
                    ],
                );
            }
            Ok(Access::Stale { highest }) => {
                self.history.record(
                    &self.actor,
                    Op::Write,
                    Phase::Fail,
                    &[
                        ("lock", &name),
                        ("token", &token),
                        ("value", &next),
                        ("highest", &highest),
                    ],
                );
            }
            Err(err) => {
                eprintln!("fault_worker: the resource failed: {err}");
                std::process::exit(2);
            }
        }
    }

    /// Releases the holds, innermost first; records each step.
    async fn release(
        &mut self,
        name: &str,
        mut guards: Vec<LockGuard>,
        watching: CancellationToken,
    ) {
        while let Some(guard) = guards.pop() {
            let level = guards.len() + 1;
            self.history.record(
                &self.actor,
                Op::Release,
                Phase::Invoke,
                &[("lock", &name), ("depth", &level)],
            );
            if level == 1 {
                watching.cancel();
            }
            match guard.unlock().await {
                Ok(()) => {
                    self.history.record(
                        &self.actor,
                        Op::Release,
                        Phase::Ok,
                        &[("lock", &name), ("depth", &level)],
                    );
                }
                Err(err) => {
                    self.history.record(
                        &self.actor,
                        Op::Release,
                        Phase::Fail,
                        &[("lock", &name), ("depth", &level), ("err", &kind(&err))],
                    );
                }
            }
        }
    }

    async fn sleep(&mut self, range: (Duration, Duration)) {
        let (low, high) = range;
        let micros = |d: Duration| u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        let pause =
            Duration::from_micros(self.rng.u64(micros(low)..=micros(high).max(micros(low))));
        if !pause.is_zero() {
            tokio::time::sleep(pause).await;
        }
    }
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

/// The error's variant name (`NoQuorum`, `LockLost`, ...).
fn kind(err: &Error) -> String {
    let debug = format!("{err:?}");
    debug
        .split(|c: char| !c.is_alphanumeric())
        .next()
        .unwrap_or("Error")
        .to_owned()
}

/// Writes one line to standard output and flushes it.
fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}").and_then(|()| out.flush());
}
