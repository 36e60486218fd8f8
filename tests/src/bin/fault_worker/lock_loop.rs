//! One lock loop of the worker: take a lock (reentrant depth 1 to `--max-depth`), work under
//! it, release it, and record every step in the history.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use redlock_reentrant::{CancellationToken, Error, LockClient, LockGuard, RLock};
use redlock_testkit::history::{History, Op, Phase};
use redlock_testkit::{Access, FencedClient, WorkerMode, WorkerSpec};

/// One lock loop.
pub(crate) struct Worker {
    pub(crate) args: Arc<WorkerSpec>,
    pub(crate) history: Arc<History>,
    pub(crate) actor: String,
    pub(crate) client: LockClient,
    pub(crate) rng: fastrand::Rng,
    pub(crate) task: u32,
    /// Set by `quiesce`: finish the cycle, then end.
    pub(crate) stop: Arc<AtomicBool>,
}

impl Worker {
    pub(crate) async fn run(mut self) {
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
                self.hold().await;
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
        self.hold().await;
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

    /// The work under the lock: usually [`hold`](WorkerSpec::hold), one cycle in `N`
    /// [`long_hold`](WorkerSpec::long_hold).
    async fn hold(&mut self) {
        let (one_in, long) = self.args.long_hold;
        let range = if one_in > 0 && self.rng.u32(..one_in) == 0 {
            long
        } else {
            self.args.hold
        };
        self.sleep(range).await;
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

/// The error's variant name (`NoQuorum`, `LockLost`, ...).
fn kind(err: &Error) -> String {
    let debug = format!("{err:?}");
    debug
        .split(|c: char| !c.is_alphanumeric())
        .next()
        .unwrap_or("Error")
        .to_owned()
}
