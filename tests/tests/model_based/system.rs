//! The system under test: two real `LockClient`s on three real masters, three owners, their
//! guards, and the faults; each step runs here and its outcome goes to the model.

use std::fmt::Write as _;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use redlock_reentrant::{
    is_cluster_url, Lease as CoreLease, LockClient, LockGuard, LockOwner, MultiLock, RLock,
    RenewedLease, RetryPolicy,
};
use redlock_testkit::{
    client_connections, cluster_ok, eventually, kill_pubsub_clients, pubsub_clients,
    shard_subscribers, subscribers, RedisCluster,
};
use tokio::runtime::Runtime;
use tokio::sync::{mpsc, oneshot};

use crate::core_lease::CORE;
use crate::model::{Model, Released, Took};
use crate::ops::{Api, Lease, Side, Step, ACTORS, CLIENTS, CLIENT_OF, LOCKS, NODES, SIDE};
use crate::plain::{Belief, PLAIN};

/// The watchdog lease: short, so fixed leases and pauses cross it within a few steps.
pub(crate) const WATCHDOG: Duration = Duration::from_millis(1500);
/// How long a master may take to answer. A running master answers in a millisecond; on a
/// two-core machine shared with builds and other suites its reply can still take tens of
/// milliseconds, which must not turn into a `NoQuorum` the model counts as a violation. A
/// paused master costs an operation no more than this (the majority decides), so the steps
/// stay short. Every fixed lease the sequences draw exceeds it by 100 ms or more
/// ([`crate::ops::SHORTEST_FIXED_LEASE_MS`]).
pub(crate) const NODE_TIMEOUT: Duration = Duration::from_millis(200);
/// How much earlier than a holder's believed deadline a master's key must run out before the
/// TTL check calls it a violation: a tenth of the watchdog lease. A correct lock's keys
/// outlive the belief by the drift allowance; the bugs this check is for (a TTL shortened by a
/// nested acquisition, a deadline pushed past a renewal that did not land) leave it hundreds
/// of milliseconds short.
const TTL_ROOM: Duration = Duration::from_millis(WATCHDOG.as_millis() as u64 / 10);
/// How long `lock()` and `acquire()` wait before the step drops them.
const PATIENCE: Duration = Duration::from_millis(400);
/// No step may take longer: a hang is a failure, not a stuck suite.
const STEP_LIMIT: Duration = Duration::from_secs(20);
const NAMES: [&str; LOCKS] = ["m0", "m1", "rw", "rw"];

type Job = Box<dyn FnOnce() -> Pin<Box<dyn Future<Output = ()> + Send>> + Send>;

/// One owner: a task of its own (its owner is that task), or an explicit owner used from a
/// new task every time.
struct Actor {
    task: Option<mpsc::UnboundedSender<Job>>,
    owner: Option<LockOwner>,
}

/// A guard the sequence keeps, with what the model needs to know of it.
struct Kept {
    actor: usize,
    lock: usize,
    lease: Lease,
    generation: u64,
    guard: LockGuard,
}

/// Where a sequence runs: three servers, reached as standalone masters or each as a Redis
/// Cluster member of one shard (`redis+cluster://`: hash-tagged keys, a fencing counter per
/// lock, shard channels, the cluster connection), with the same faults.
#[derive(Clone)]
pub(crate) struct Deployment {
    pub(crate) servers: Arc<RedisCluster>,
    pub(crate) members: Vec<String>,
}

pub(crate) struct System {
    runtime: Option<Runtime>,
    cluster: Arc<RedisCluster>,
    members: Vec<String>,
    clients: Vec<LockClient>,
    actors: Vec<Actor>,
    guards: Vec<Kept>,
    /// The plain lease each client's watchdog keeps, if any.
    plain: [Option<RenewedLease>; 2],
    /// The core lease each client keeps, if any.
    core: [Option<CoreLease>; 2],
    pub(crate) model: Model,
    paused: [bool; NODES],
    /// One connection per master for the TTL check, opened once and kept (a connection made
    /// inside the check would put its handshake between the belief and the TTL read), opened
    /// again after a failure (a restart).
    probes: Vec<Option<redis::Connection>>,
    baseline: Vec<usize>,
    log: Vec<String>,
}

impl System {
    pub(crate) fn start(deployment: Deployment) -> Self {
        let Deployment {
            servers: cluster,
            members,
        } = deployment;
        for node in cluster.nodes() {
            redis::cmd("FLUSHALL")
                .exec(&mut node.connection())
                .expect("FLUSHALL");
        }
        let baseline = cluster.nodes().iter().map(client_connections).collect();
        let shared_counter = !members.iter().any(|url| is_cluster_url(url));
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let clients: Vec<LockClient> = (0..CLIENTS)
            .map(|_| runtime.block_on(new_client(&members)))
            .collect();
        // Every member connected before the first step: `build` returns once a majority answers
        // and connects the others in the background, which a step must not wait on.
        for client in &clients {
            let readiness = runtime.block_on(client.readiness());
            let failures: Vec<String> = readiness.failures().map(ToString::to_string).collect();
            assert!(
                failures.is_empty(),
                "members not answering at the start: {failures:?}"
            );
        }
        let actors = (0..ACTORS)
            .map(|actor| {
                if actor == 1 {
                    Actor {
                        task: None,
                        owner: Some(clients[CLIENT_OF[actor]].new_owner()),
                    }
                } else {
                    Actor {
                        task: Some(spawn_task(&runtime)),
                        owner: None,
                    }
                }
            })
            .collect();
        Self {
            runtime: Some(runtime),
            cluster,
            members,
            clients,
            actors,
            guards: Vec::new(),
            plain: [None, None],
            core: [None, None],
            model: Model::new(WATCHDOG, shared_counter),
            paused: [false; NODES],
            probes: (0..NODES).map(|_| None).collect(),
            baseline,
            log: Vec::new(),
        }
    }

    /// The key of lock `name` on this deployment (hash-tagged on cluster members).
    fn key_of(&self, name: &str) -> String {
        self.clients
            .first()
            .map(|client| client.redlock().config().key_for(name))
            .unwrap_or_else(|| format!("redlock:{name}"))
    }

    fn runtime(&self) -> &Runtime {
        self.runtime.as_ref().expect("running")
    }

    /// The key a hold of `lock` is kept in (the read side: the readers hash).
    fn hold_key_of(&self, lock: usize) -> String {
        match SIDE[lock] {
            Side::Read => format!("{}:read", self.key_of(NAMES[lock])),
            Side::Exclusive | Side::Write => self.key_of(NAMES[lock]),
        }
    }

    fn rlock(&self, actor: usize, lock: usize) -> RLock {
        let client = &self.clients[CLIENT_OF[actor]];
        let rlock = match SIDE[lock] {
            Side::Exclusive => client.get_lock(NAMES[lock]),
            Side::Read => client.get_read_write_lock(NAMES[lock]).read_lock(),
            Side::Write => client.get_read_write_lock(NAMES[lock]).write_lock(),
        };
        match &self.actors[actor].owner {
            Some(owner) => rlock.with_owner(owner),
            None => rlock,
        }
    }

    /// Runs `work` as `actor`: in its task, or in a new task for an explicit owner.
    fn as_actor<T, F, Fut>(&self, actor: usize, lock: usize, work: F) -> Result<T, String>
    where
        T: Send + 'static,
        F: FnOnce(RLock) -> Fut + Send + 'static,
        Fut: Future<Output = T> + Send + 'static,
    {
        let rlock = self.rlock(actor, lock);
        let (done, result) = oneshot::channel();
        let job: Job = Box::new(move || {
            Box::pin(async move {
                let _ = done.send(work(rlock).await);
            })
        });
        match &self.actors[actor].task {
            Some(task) => task
                .send(job)
                .map_err(|_| "the actor's task is gone".to_owned())?,
            None => drop(self.runtime().spawn(job())),
        }
        self.runtime()
            .block_on(async { tokio::time::timeout(STEP_LIMIT, result).await })
            .map_err(|_| format!("a{actor}: the step hung for {STEP_LIMIT:?}"))?
            .map_err(|_| format!("a{actor}: the step panicked"))
    }

    /// The log of the steps so far and what they observed, for a failure's message.
    pub(crate) fn story(&self) -> String {
        let mut story = self.log.join("\n");
        story.push_str("\nmodel notes:\n");
        story.push_str(&self.model.notes.join("\n"));
        story
    }

    /// The nodes and the machine as they are now, for a failure's message.
    pub(crate) fn surroundings(&self) -> String {
        surroundings(&self.cluster, &self.paused)
    }

    /// The servers, which outlive the sequence.
    pub(crate) fn servers(&self) -> Arc<RedisCluster> {
        Arc::clone(&self.cluster)
    }

    /// Runs one step and hands its outcome to the model.
    pub(crate) fn apply(&mut self, step: &Step) -> Result<(), String> {
        let outcome = self.try_run(step);
        self.log.push(format!(
            "{step:?} -> {}",
            outcome.as_deref().unwrap_or("VIOLATION")
        ));
        outcome.map(|_| ())
    }

    fn try_run(&mut self, step: &Step) -> Result<String, String> {
        self.model.observe_all()?;
        match *step {
            Step::Acquire {
                actor,
                lock,
                lease,
                api,
            } => self.acquire(actor, lock, lease, api, None),
            Step::CancelAcquire {
                actor,
                lock,
                lease,
                after_us,
            } => self.acquire(
                actor,
                lock,
                lease,
                Api::TryLock { wait_ms: 100 },
                Some(Duration::from_micros(after_us)),
            ),
            Step::Unlock { actor, lock } => self.unlock(actor, lock, None),
            Step::CancelUnlock {
                actor,
                lock,
                after_us,
            } => self.unlock(actor, lock, Some(Duration::from_micros(after_us))),
            Step::GuardUnlock { actor, pick } => self.guard_unlock(actor, pick, None),
            Step::CancelGuardUnlock {
                actor,
                pick,
                after_us,
            } => self.guard_unlock(actor, pick, Some(Duration::from_micros(after_us))),
            Step::GuardDrop {
                actor,
                pick,
                outside_runtime,
            } => self.guard_drop(actor, pick, outside_runtime),
            Step::ReleaseTogether {
                actor,
                pick,
                after_us,
            } => self.release_together(actor, pick, Duration::from_micros(after_us)),
            Step::ForceUnlock { actor, lock } => {
                // Its own client's holders are told before anything is sent.
                self.model.forced(lock);
                let forced =
                    self.as_actor(
                        actor,
                        lock,
                        |rlock| async move { rlock.force_unlock().await },
                    )?;
                match forced {
                    Ok(deleted) => Ok(format!("forced, deleted on a majority: {deleted}")),
                    Err(redlock_reentrant::Error::NoQuorum { .. }) if self.model.disturbed() => {
                        Ok("no quorum".into())
                    }
                    Err(err) => Err(format!("force_unlock failed: {err:?}")),
                }
            }
            Step::Query { actor, lock } => {
                let (locked, count, ttl, status) =
                    self.as_actor(actor, lock, |rlock| async move {
                        (
                            rlock.is_locked().await,
                            rlock.hold_count().await,
                            rlock.remaining_ttl().await,
                            rlock.status().await,
                        )
                    })?;
                match (locked, count, ttl, status) {
                    (Ok(locked), Ok(count), Ok(ttl), Ok(status)) => {
                        self.model.queried(actor, lock, locked, count, ttl)?;
                        self.model.status_seen(lock, &status)?;
                        Ok(format!(
                            "locked {locked}, count {count}, ttl {ttl:?}, status {status:?}"
                        ))
                    }
                    _ if self.model.disturbed() => Ok("no quorum".into()),
                    other => Err(format!("a query failed: {other:?}")),
                }
            }
            Step::Sleep { ms } => {
                std::thread::sleep(Duration::from_millis(ms));
                Ok(String::new())
            }
            Step::Pause { node } => {
                self.pause(node);
                Ok(String::new())
            }
            Step::PauseMajority { spared } => {
                for node in (0..NODES).filter(|node| *node != spared) {
                    self.pause(node);
                }
                Ok(String::new())
            }
            Step::Resume { node } => {
                self.cluster.resume(node);
                self.paused[node] = false;
                self.model.fault_ends();
                Ok(String::new())
            }
            Step::KillPubSub => {
                let killed: i64 = self
                    .cluster
                    .nodes()
                    .iter()
                    .filter(|node| node.is_running())
                    .map(kill_pubsub_clients)
                    .sum();
                Ok(format!("{killed} pub/sub connections killed"))
            }
            Step::RestartEmpty { node } => self.restart_empty(node),
            Step::Shutdown { client } => self.shutdown(client),
            Step::DropClient { client } => self.drop_client(client),
            Step::PlainAcquire { client } => self.plain_acquire(client),
            Step::PlainRelease { client } => self.plain_release(client),
            Step::CoreAcquire { client, lease_ms } => {
                self.core_acquire(client, Duration::from_millis(lease_ms))
            }
            Step::CoreExtend {
                client,
                lease_ms,
                after_us,
            } => self.core_extend(
                client,
                Duration::from_millis(lease_ms),
                after_us.map(Duration::from_micros),
            ),
            Step::CoreRelease { client } => self.core_release(client),
            Step::MultiAcquire {
                actor,
                read,
                wait_ms,
            } => self.multi_acquire(actor, read, Duration::from_millis(wait_ms)),
        }
    }

    fn acquire(
        &mut self,
        actor: usize,
        lock: usize,
        lease: Lease,
        api: Api,
        cancel_after: Option<Duration>,
    ) -> Result<String, String> {
        let fixed = match lease {
            Lease::Watchdog => None,
            Lease::Fixed(ms) => Some(Duration::from_millis(ms)),
        };
        let started = Instant::now();
        let (took, guard) = self.as_actor(actor, lock, move |rlock| async move {
            let attempt = async {
                match api {
                    Api::Lock => {
                        let locked = match fixed {
                            Some(lease) => rlock.lock_with_lease(lease).await,
                            None => rlock.lock().await,
                        };
                        locked.map(|()| Some(None))
                    }
                    Api::TryLock { wait_ms } => rlock
                        .try_lock(Duration::from_millis(wait_ms), fixed)
                        .await
                        .map(|got| got.then_some(None)),
                    Api::Guard => {
                        let guard = match fixed {
                            Some(lease) => rlock.acquire_with_lease(lease).await,
                            None => rlock.acquire().await,
                        };
                        guard.map(|guard| Some(Some(guard)))
                    }
                    Api::TryGuard { wait_ms } => rlock
                        .try_acquire(Duration::from_millis(wait_ms), fixed)
                        .await
                        .map(|guard| guard.map(Some)),
                }
            };
            let patience = match api {
                Api::Lock | Api::Guard => PATIENCE,
                _ => STEP_LIMIT,
            };
            let outcome = tokio::time::timeout(cancel_after.unwrap_or(patience), attempt).await;
            match outcome {
                Err(_) => (Took::Dropped, None),
                Ok(Ok(None)) => (Took::Refused, None),
                Ok(Ok(Some(guard))) => {
                    let at = Instant::now();
                    let (token, signal) = match &guard {
                        Some(guard) => (Some(guard.fencing_token()), guard.lock().lost_signal()),
                        None => (rlock.fencing_token(), rlock.lost_signal()),
                    };
                    (Took::Granted { token, signal, at }, guard)
                }
                Ok(Err(err)) => (Took::Failed(err), None),
            }
        })?;
        let seen = describe(&took);
        let generation = self.model.acquired(actor, lock, lease, started, took)?;
        if let (Some(guard), Some(generation)) = (guard, generation) {
            self.guards.push(Kept {
                actor,
                lock,
                lease,
                generation,
                guard,
            });
        }
        Ok(seen)
    }

    /// A multi-lock of lock 0 and a side of the read-write lock, by an actor that holds none of
    /// them (a nested member, or an upgrade, is the single locks' business); its members are
    /// kept as guards, each judged by the model as a guard's acquisition.
    fn multi_acquire(
        &mut self,
        actor: usize,
        read: bool,
        wait: Duration,
    ) -> Result<String, String> {
        let side = (0..LOCKS)
            .find(|lock| SIDE[*lock] == if read { Side::Read } else { Side::Write })
            .expect("the read-write lock's sides");
        let members = [0, side];
        if (0..LOCKS).any(|lock| {
            (lock == 0 || SIDE[lock] != Side::Exclusive) && self.model.holds[actor][lock].count > 0
        }) {
            return Ok("skipped: the actor holds a member".into());
        }
        let locks = MultiLock::new(members.map(|lock| self.rlock(actor, lock)))
            .map_err(|err| format!("a{actor}: multi-lock refused its members: {err}"))?;
        let started = Instant::now();
        let (done, result) = oneshot::channel();
        let job: Job = Box::new(move || {
            Box::pin(async move {
                let outcome = tokio::time::timeout(STEP_LIMIT, locks.try_acquire(wait, None)).await;
                let _ = done.send((outcome, Instant::now()));
            })
        });
        match &self.actors[actor].task {
            Some(task) => task
                .send(job)
                .map_err(|_| "the actor's task is gone".to_owned())?,
            None => drop(self.runtime().spawn(job())),
        }
        let (outcome, at) = self
            .runtime()
            .block_on(async { tokio::time::timeout(STEP_LIMIT * 2, result).await })
            .map_err(|_| format!("a{actor}: the multi-lock step hung"))?
            .map_err(|_| format!("a{actor}: the multi-lock step panicked"))?;
        match outcome {
            Ok(Ok(Some(guard))) => {
                for guard in guard.into_guards() {
                    let lock = *members
                        .iter()
                        .find(|lock| NAMES[**lock] == guard.lock().name())
                        .ok_or_else(|| format!("a member named {}", guard.lock().name()))?;
                    let took = Took::Granted {
                        token: Some(guard.fencing_token()),
                        signal: guard.lock().lost_signal(),
                        at,
                    };
                    if let Some(generation) =
                        self.model
                            .acquired(actor, lock, Lease::Watchdog, started, took)?
                    {
                        self.guards.push(Kept {
                            actor,
                            lock,
                            lease: Lease::Watchdog,
                            generation,
                            guard,
                        });
                    }
                }
                Ok("granted both".into())
            }
            Ok(Ok(None)) => {
                self.model.multi_refused(actor, &members)?;
                self.absorb_released_members(actor, members.len())?;
                Ok("refused".into())
            }
            Ok(Err(err)) => {
                self.model.multi_failed(actor, &members, err)?;
                self.absorb_released_members(actor, members.len())?;
                Ok("failed".into())
            }
            Err(_) => {
                for lock in members {
                    self.model
                        .acquired(actor, lock, Lease::Watchdog, started, Took::Dropped)?;
                }
                self.absorb_released_members(actor, members.len())?;
                Ok("dropped".into())
            }
        }
    }

    /// A multi-lock that did not hand its members out may have taken any of them, as new holds
    /// of the client (`fencing_stats`), and released them (all of them, when one was lost
    /// before the set was handed out): the model counts what the client says, if it is within
    /// that.
    fn absorb_released_members(&mut self, actor: usize, members: usize) -> Result<(), String> {
        let client = CLIENT_OF[actor];
        let said = self.clients[client].fencing_stats().new_holds;
        let counted = self.model.new_holds[client];
        if said < counted || said > counted + members as u64 {
            return Err(format!(
                "client {client}: {said} new holds after a multi-lock that handed out none; the model counted {counted} before it"
            ));
        }
        self.model.new_holds[client] = said;
        Ok(())
    }

    fn unlock(
        &mut self,
        actor: usize,
        lock: usize,
        cancel_after: Option<Duration>,
    ) -> Result<String, String> {
        let outcome = self.as_actor(actor, lock, move |rlock| async move {
            release_within(cancel_after, rlock.unlock()).await
        })?;
        let seen = outcome.to_string();
        self.model.released(actor, lock, None, outcome)?;
        Ok(seen)
    }

    /// Where the `pick`-th of the actor's guards (modulo how many it has) is kept.
    fn guard_index(&self, actor: usize, pick: usize) -> Option<usize> {
        let mine: Vec<usize> = (0..self.guards.len())
            .filter(|i| self.guards[*i].actor == actor)
            .collect();
        (!mine.is_empty()).then(|| mine[pick % mine.len()])
    }

    fn guard_of(&self, actor: usize, pick: usize) -> Option<&Kept> {
        self.guard_index(actor, pick)
            .map(|index| &self.guards[index])
    }

    fn take_guard(&mut self, actor: usize, pick: usize) -> Option<Kept> {
        self.guard_index(actor, pick)
            .map(|index| self.guards.remove(index))
    }

    fn guard_unlock(
        &mut self,
        actor: usize,
        pick: usize,
        cancel_after: Option<Duration>,
    ) -> Result<String, String> {
        let Some(kept) = self.take_guard(actor, pick) else {
            return Ok("no guard".into());
        };
        let guard = kept.guard;
        let outcome = self
            .runtime()
            .block_on(async move {
                let unlocked = release_within(cancel_after, guard.unlock());
                tokio::time::timeout(STEP_LIMIT, tokio::spawn(unlocked)).await
            })
            .map_err(|_| "a guard's unlock hung".to_owned())?
            .map_err(|_| "a guard's unlock panicked".to_owned())?;
        let seen = outcome.to_string();
        self.model.released(
            kept.actor,
            kept.lock,
            Some((kept.generation, kept.lease)),
            outcome,
        )?;
        Ok(format!("l{}: {seen}", kept.lock))
    }

    /// Stops a node (SIGSTOP) until its `Resume`.
    fn pause(&mut self, node: usize) {
        self.model.fault_begins();
        self.cluster.stop(node);
        self.paused[node] = true;
    }

    /// A nested `lock()` on the lock of one of the actor's guards, then the actor's
    /// `RLock::unlock` and that guard's `unlock` started at once from the actor's task, each
    /// dropped after `after` if still unanswered: two handles of one hold, serialised by it.
    fn release_together(
        &mut self,
        actor: usize,
        pick: usize,
        after: Duration,
    ) -> Result<String, String> {
        let Some(lock) = self.guard_of(actor, pick).map(|kept| kept.lock) else {
            return Ok("no guard".into());
        };
        let nested = self.acquire(actor, lock, Lease::Watchdog, Api::Lock, None)?;
        let Some(kept) = self.take_guard(actor, pick) else {
            return Ok(format!("{nested}; the guard is gone"));
        };
        let guard = kept.guard;
        let (by_owner, by_guard) = self.as_actor(actor, lock, move |rlock| async move {
            let by_guard = tokio::spawn(release_within(Some(after), guard.unlock()));
            let by_owner = release_within(Some(after), rlock.unlock()).await;
            (by_owner, by_guard.await)
        })?;
        let by_guard = by_guard.map_err(|_| "a guard's unlock panicked".to_owned())?;
        self.model.released_together(
            actor,
            lock,
            (kept.generation, kept.lease),
            &by_owner,
            &by_guard,
        )?;
        Ok(format!(
            "{nested}; then at once: the owner's {by_owner}, the guard's {by_guard}"
        ))
    }

    fn guard_drop(
        &mut self,
        actor: usize,
        pick: usize,
        outside_runtime: bool,
    ) -> Result<String, String> {
        let Some(kept) = self.take_guard(actor, pick) else {
            return Ok("no guard".into());
        };
        let Kept {
            actor,
            lock,
            lease,
            generation,
            guard,
        } = kept;
        if outside_runtime {
            std::thread::spawn(move || drop(guard))
                .join()
                .map_err(|_| "dropping a guard panicked".to_owned())?;
            self.model.abandoned(actor, lock, generation);
            Ok(format!("l{lock}: dropped outside a runtime"))
        } else {
            let _entered = self.runtime().enter();
            drop(guard);
            self.model
                .released(actor, lock, Some((generation, lease)), Released::Dropped)?;
            Ok(format!("l{lock}: dropped"))
        }
    }

    /// `Watchdog::acquire` of the plain lock through `client`'s watchdog.
    fn plain_acquire(&mut self, client: usize) -> Result<String, String> {
        let watchdog = self.clients[client].watchdog().clone();
        let outcome = self
            .runtime()
            .block_on(async { tokio::time::timeout(STEP_LIMIT, watchdog.acquire(PLAIN)).await });
        let outcome = outcome.map_err(|_| format!("c{client}: plain acquire hung"))?;
        let disturbed = self.model.disturbed();
        let said = match &outcome {
            Ok(_) => "acquired".to_owned(),
            Err(err) => format!("refused: {err}"),
        };
        self.model.plain.acquired(
            client,
            outcome.as_ref().map(|lease| lease.lost_signal().clone()),
            disturbed,
            WATCHDOG,
        )?;
        if let Ok(lease) = outcome {
            let _entered = self.runtime().enter();
            drop(self.plain[client].replace(lease));
        }
        Ok(said)
    }

    /// `RenewedLease::release` of the lease `client` keeps.
    fn plain_release(&mut self, client: usize) -> Result<String, String> {
        let Some(lease) = self.plain[client].take() else {
            return Ok("no plain lease kept".into());
        };
        let outcome = self
            .runtime()
            .block_on(async { tokio::time::timeout(STEP_LIMIT, lease.release()).await });
        let outcome = outcome.map_err(|_| format!("c{client}: plain release hung"))?;
        let disturbed = self.model.disturbed();
        let said = match &outcome {
            Ok(()) => "released".to_owned(),
            Err(err) => format!("release failed: {err}"),
        };
        self.model
            .plain
            .released(client, outcome.as_ref().map(|_| ()), disturbed, WATCHDOG)?;
        Ok(said)
    }

    /// `Redlock::acquire` of the core lock through `client`'s quorum.
    fn core_acquire(&mut self, client: usize, lease: Duration) -> Result<String, String> {
        if self.core[client].is_some() {
            return Ok("a core lease kept already".into());
        }
        let redlock = self.clients[client].redlock().clone();
        let outcome = self.runtime().block_on(async {
            tokio::time::timeout(STEP_LIMIT, redlock.acquire(CORE, lease)).await
        });
        let outcome = outcome.map_err(|_| format!("c{client}: core acquire hung"))?;
        let disturbed = self.model.disturbed();
        self.model.core.acquired(
            client,
            outcome.as_ref().map(CoreLease::valid_until),
            disturbed,
        )?;
        Ok(match outcome {
            Ok(lease) => {
                let said = format!("acquired, valid {:?}", lease.remaining_validity());
                self.core[client] = Some(lease);
                said
            }
            Err(err) => format!("refused: {err}"),
        })
    }

    /// `Redlock::extend` of the core lease `client` keeps, dropped after `cancel_after` if it
    /// has not answered by then.
    fn core_extend(
        &mut self,
        client: usize,
        lease: Duration,
        cancel_after: Option<Duration>,
    ) -> Result<String, String> {
        let Some(kept) = self.core[client].clone() else {
            return Ok("no core lease kept".into());
        };
        let redlock = self.clients[client].redlock().clone();
        let outcome = self.runtime().block_on(async {
            let extend = redlock.extend(&kept, lease);
            match cancel_after {
                Some(after) => tokio::time::timeout(after, extend).await.ok(),
                None => tokio::time::timeout(STEP_LIMIT, extend).await.ok(),
            }
        });
        if outcome.is_none() && cancel_after.is_none() {
            return Err(format!("c{client}: core extend hung"));
        }
        let disturbed = self.model.disturbed();
        self.model.core.extended(
            client,
            outcome
                .as_ref()
                .map(|outcome| outcome.as_ref().map(CoreLease::valid_until)),
            disturbed,
        )?;
        Ok(match outcome {
            None => "dropped".into(),
            Some(Ok(extended)) => {
                let said = format!("extended, valid {:?}", extended.remaining_validity());
                self.core[client] = Some(extended);
                said
            }
            Some(Err(err)) => format!("extend failed: {err}"),
        })
    }

    /// `Redlock::release` of the core lease `client` keeps.
    fn core_release(&mut self, client: usize) -> Result<String, String> {
        let Some(lease) = self.core[client].take() else {
            return Ok("no core lease kept".into());
        };
        let redlock = self.clients[client].redlock().clone();
        let outcome = self
            .runtime()
            .block_on(async { tokio::time::timeout(STEP_LIMIT, redlock.release(&lease)).await });
        let outcome = outcome.map_err(|_| format!("c{client}: core release hung"))?;
        let disturbed = self.model.disturbed();
        self.model
            .core
            .released(client, outcome.as_ref().map(|_| ()), disturbed)?;
        Ok(match outcome {
            Ok(()) => "released".into(),
            Err(err) => format!("release failed: {err}"),
        })
    }

    /// Kills a node and restarts it empty once every validity a holder could still prove has
    /// run out: the delayed restart the safety argument asks for.
    fn restart_empty(&mut self, node: usize) -> Result<String, String> {
        self.model.fault_begins();
        self.cluster.kill(node);
        let now = Instant::now();
        let reentrant = self
            .model
            .believers()
            .into_iter()
            .map(|(_, _, signal)| Belief::Signal(signal));
        let plain = self
            .model
            .plain
            .believed()
            .into_iter()
            .map(|(_, signal)| signal);
        let core = self
            .model
            .core
            .believed()
            .into_iter()
            .map(|(_, signal)| signal);
        let wait = reentrant
            .chain(plain)
            .chain(core)
            .filter_map(|signal| signal.deadline())
            .map(|(deadline, _)| deadline.saturating_duration_since(now))
            .max()
            .unwrap_or_default()
            + Duration::from_millis(50);
        std::thread::sleep(wait);
        self.bring_back(node)?;
        self.model.fault_ends();
        Ok(format!("restarted after {wait:?}"))
    }

    /// Restarts a node (empty) and waits until it takes writes again.
    fn bring_back(&self, node: usize) -> Result<(), String> {
        let server = self.cluster.node(node);
        server
            .try_restart()
            .map_err(|err| format!("n{node}: the restart failed: {err}"))?;
        // A cluster-mode server answers `CLUSTERDOWN` for a moment after it starts (Redis
        // waits before a restarted master takes writes): it is back once its cluster is ok.
        if self.members.iter().any(|url| is_cluster_url(url))
            && !eventually(Duration::from_secs(10), || cluster_ok(server))
        {
            return Err(format!(
                "n{node}: its cluster is not ok 10 s after the restart"
            ));
        }
        Ok(())
    }

    fn shutdown(&mut self, client: usize) -> Result<String, String> {
        let old = self.clients[client].clone();
        self.runtime().block_on(old.shutdown());
        self.model.shut_down(client);
        self.model.plain.shut_down(client, WATCHDOG)?;
        if let Some(lease) = self.plain[client].take() {
            let _entered = self.runtime().enter();
            drop(lease);
        }
        // Its guards are over: dropping them sends nothing (the client is shut down).
        let (gone, kept): (Vec<Kept>, Vec<Kept>) = self
            .guards
            .drain(..)
            .partition(|kept| CLIENT_OF[kept.actor] == client);
        self.guards = kept;
        {
            let _entered = self.runtime().enter();
            drop(gone);
        }
        if old.watchdog().registered() != 0 {
            return Err(format!(
                "c{client}: {} holds still registered after shutdown",
                old.watchdog().registered()
            ));
        }
        let fresh = self.runtime().block_on(new_client(&self.members));
        // As at the start: every member the client can reach connected before the next step
        // (a paused one costs a per-node timeout and is connected when it resumes).
        let _ = self.runtime().block_on(fresh.readiness());
        for actor in (0..ACTORS).filter(|a| CLIENT_OF[*a] == client) {
            if self.actors[actor].owner.is_some() {
                self.actors[actor].owner = Some(fresh.new_owner());
            }
        }
        self.clients[client] = fresh;
        // A new client counts its fencing from zero.
        self.model.new_holds[client] = 0;
        Ok("shut down, replaced".into())
    }

    /// Drops `client` without `shutdown()`. Its plain lease is released and its guards dropped
    /// first (dropping each sends its release); the holds its actors' tasks took with `lock()`
    /// stay, renewed by nobody from now on, and the model keeps their signals: each must fire
    /// by its deadline (`Abandoned`), and no one else may get in before.
    fn drop_client(&mut self, client: usize) -> Result<String, String> {
        let mut said = Vec::new();
        if self.plain[client].is_some() {
            said.push(format!("plain: {}", self.plain_release(client)?));
        }
        let picks: Vec<(usize, usize)> = self
            .guards
            .iter()
            .filter(|kept| CLIENT_OF[kept.actor] == client)
            .map(|kept| (kept.actor, 0))
            .collect();
        for (actor, pick) in picks {
            said.push(self.guard_drop(actor, pick, false)?);
        }
        // The replacement first, so that the old client goes right after the model has seen
        // its holds' signals.
        let fresh = self.runtime().block_on(new_client(&self.members));
        let _ = self.runtime().block_on(fresh.readiness());
        for actor in (0..ACTORS).filter(|a| CLIENT_OF[*a] == client) {
            if self.actors[actor].owner.is_some() {
                self.actors[actor].owner = Some(fresh.new_owner());
            }
        }
        self.model.observe_all()?;
        self.model.client_dropped(client);
        {
            // Whatever of the old client is still running (the releases just sent) finishes on
            // the runtime, and the client with it.
            let _entered = self.runtime().enter();
            drop(std::mem::replace(&mut self.clients[client], fresh));
        }
        said.push("dropped, replaced".into());
        Ok(said.join("; "))
    }

    /// The checks after every step: never two owners believing at once; every belief backed
    /// by a majority's TTL; the watchdog renewing exactly the live holds.
    pub(crate) fn check(&mut self) -> Result<(), String> {
        self.model.observe_all()?;
        let disturbed = self.model.disturbed();
        self.model.plain.observe(disturbed, WATCHDOG)?;
        self.model.check_exclusion()?;
        self.model.plain.check_exclusion()?;
        self.model.core.check_exclusion()?;
        self.check_ttls()?;
        self.check_registrations()?;
        self.check_fencing_stats()
    }

    /// Each client's fencing counters count exactly the new holds it granted, and the
    /// write-backs among them.
    fn check_fencing_stats(&self) -> Result<(), String> {
        for (client, handle) in self.clients.iter().enumerate() {
            let stats = handle.fencing_stats();
            if stats.new_holds != self.model.new_holds[client]
                || stats.written_back > stats.new_holds
            {
                return Err(format!(
                    "client {client}: fencing_stats says {stats:?}, the model counted {} new holds",
                    self.model.new_holds[client]
                ));
            }
        }
        Ok(())
    }

    /// A holder's lost deadline never lies beyond what the nodes still grant it: while it
    /// believes, no majority of nodes could hand the lock to anyone else. A paused node keeps
    /// its keys and grants nobody; a running node whose key runs out before the belief does
    /// could.
    ///
    /// A PTTL read from a node is the key's time left when the node answered, which was before
    /// the reply arrived here: the key runs out no later than the reply's arrival plus the PTTL
    /// (plus the millisecond Redis rounds away). That bound, however slow the read, is compared
    /// with the deadline, with [`TTL_ROOM`] to spare.
    fn check_ttls(&mut self) -> Result<(), String> {
        let reentrant = self
            .model
            .believers()
            .into_iter()
            .map(|(actor, lock, signal)| {
                (
                    format!("a{actor} l{lock}"),
                    self.hold_key_of(lock),
                    Belief::Signal(signal),
                )
            });
        let plain = self
            .model
            .plain
            .believed()
            .into_iter()
            .map(|(client, signal)| (format!("c{client} plain"), self.key_of(PLAIN), signal));
        let core = self
            .model
            .core
            .believed()
            .into_iter()
            .map(|(client, signal)| (format!("c{client} core"), self.key_of(CORE), signal));
        for (who, key, signal) in reentrant.chain(plain).chain(core).collect::<Vec<_>>() {
            let Some((deadline, _)) = signal.deadline() else {
                // A belief nothing will end: whatever happens to the keys, the holder is
                // never told.
                if signal.is_lost() {
                    continue;
                }
                return Err(format!("{who}: believes, and its signal has no deadline"));
            };
            if signal.is_lost() || deadline <= Instant::now() {
                continue;
            }
            // Each running node's key runs out by then at the latest (`None`: unreadable, or a
            // key without expiry, which backs the belief whatever else is wrong with it).
            let running: Vec<usize> = (0..NODES)
                .filter(|node| self.cluster.node(*node).is_running())
                .collect();
            let runs_out: Vec<Option<Instant>> = running
                .into_iter()
                .map(|node| {
                    let ttl = self.pttl(node, &key).filter(|ttl| *ttl != -1)?;
                    // -2: no key, free now.
                    let left = Duration::from_millis(u64::try_from(ttl).unwrap_or(0));
                    Some(Instant::now() + left + Duration::from_millis(1))
                })
                .collect();
            let free = runs_out
                .iter()
                .flatten()
                .filter(|end| **end + TTL_ROOM < deadline)
                .count();
            let majority = NODES / 2 + 1;
            if free >= majority && !signal.is_lost() {
                let now = Instant::now();
                let believed = deadline.saturating_duration_since(now);
                let left: Vec<Option<Duration>> = runs_out
                    .iter()
                    .map(|end| end.map(|end| end.saturating_duration_since(now)))
                    .collect();
                return Err(format!(
                    "{who}: believes {believed:?} more, but {free} answering nodes would grant the lock sooner (their keys run out within {left:?})"
                ));
            }
        }
        Ok(())
    }

    /// `PTTL key` on a running node over its kept connection (opened again once if it fails:
    /// the node restarted since); `None` if the node cannot be read.
    fn pttl(&mut self, node: usize, key: &str) -> Option<i64> {
        for _ in 0..2 {
            let connection = match &mut self.probes[node] {
                Some(connection) => connection,
                slot => slot.insert(self.cluster.node(node).try_connection().ok()?),
            };
            match redis::cmd("PTTL").arg(key).query::<i64>(connection) {
                Ok(ttl) => return Some(ttl),
                Err(_) => self.probes[node] = None,
            }
        }
        None
    }

    /// Each client's watchdog has exactly the holds the model says are live.
    fn check_registrations(&mut self) -> Result<(), String> {
        for client in 0..2 {
            let registered = || self.clients[client].watchdog().registered();
            let deadline = Instant::now() + WATCHDOG * 2;
            loop {
                self.model.observe_all()?;
                let expected = self.model.registered(client) + self.model.plain.registered(client);
                if registered() == expected {
                    break;
                }
                if Instant::now() >= deadline {
                    return Err(format!(
                        "c{client}: {} holds registered with the watchdog, {expected} live",
                        registered()
                    ));
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        Ok(())
    }

    /// The end of a sequence: everything released, and then nothing left behind: no key, no
    /// registration, no subscription, no pub/sub connection, no connection at all once the
    /// clients are gone.
    pub(crate) fn quiesce(mut self) -> Result<(), String> {
        for node in 0..NODES {
            if self.paused[node] {
                self.cluster.resume(node);
                self.paused[node] = false;
                self.model.fault_ends();
            }
        }
        for kept in std::mem::take(&mut self.guards) {
            let _ = self.runtime().block_on(kept.guard.unlock());
        }
        for lease in std::mem::take(&mut self.plain).into_iter().flatten() {
            let _ = self.runtime().block_on(lease.release());
        }
        for lease in std::mem::take(&mut self.core).into_iter().flatten() {
            let redlock = self.clients[0].redlock().clone();
            let _ = self.runtime().block_on(redlock.release(&lease));
        }
        for (actor, lock, count) in self.model.counts() {
            for _ in 0..count {
                let _ = self.as_actor(actor, lock, |rlock| async move { rlock.unlock().await })?;
            }
        }
        let clients = self.clients.clone();
        let settled = eventually(Duration::from_secs(5), || {
            clients
                .iter()
                .all(|c| c.watchdog().registered() == 0 && c.watched_channels() == 0)
        });
        if !settled {
            return Err(format!(
                "after releasing everything: registered {:?}, watched channels {:?}",
                clients
                    .iter()
                    .map(|c| c.watchdog().registered())
                    .collect::<Vec<_>>(),
                clients
                    .iter()
                    .map(LockClient::watched_channels)
                    .collect::<Vec<_>>()
            ));
        }
        let cluster = Arc::clone(&self.cluster);
        let mut lock_keys: Vec<String> = NAMES.iter().map(|name| self.key_of(name)).collect();
        lock_keys.dedup();
        for lock in (0..LOCKS).filter(|lock| SIDE[*lock] == Side::Read) {
            lock_keys.push(self.hold_key_of(lock));
            lock_keys.push(format!("{}:write-waiting", self.key_of(NAMES[lock])));
        }
        let locks_left = || {
            lock_keys
                .iter()
                .map(|key| cluster.count_keys(key))
                .sum::<usize>()
        };
        let plain_key = self.key_of(PLAIN);
        let plain_left = || cluster.count_keys(&plain_key);
        let core_key = self.key_of(CORE);
        let core_left = || cluster.count_keys(&core_key);
        // A lost hold's key lasts until its lease runs out (3 s at most here).
        if !eventually(Duration::from_secs(5), || {
            locks_left() + plain_left() + core_left() == 0
        }) {
            return Err(format!(
                "{} lock keys, {} plain keys and {} core keys left",
                locks_left(),
                plain_left(),
                core_left()
            ));
        }
        let subscribed = |channel: &str| -> i64 {
            cluster
                .nodes()
                .iter()
                .map(|node| subscribers(node, channel) + shard_subscribers(node, channel))
                .sum()
        };
        if lock_keys
            .iter()
            .any(|key| subscribed(&format!("{key}:released")) != 0)
        {
            return Err("a lock channel is still subscribed".into());
        }
        for client in &clients {
            self.runtime().block_on(client.shutdown());
        }
        // The TTL check's connections are not the clients'.
        self.probes.clear();
        let pubsub = || {
            cluster
                .nodes()
                .iter()
                .map(pubsub_clients)
                .collect::<Vec<_>>()
        };
        if !eventually(Duration::from_secs(5), || pubsub().iter().all(|n| *n == 0)) {
            return Err(format!("pub/sub connections left: {:?}", pubsub()));
        }
        drop(clients);
        self.clients.clear();
        self.actors.clear();
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_timeout(Duration::from_secs(1));
        }
        let connections = || {
            cluster
                .nodes()
                .iter()
                .map(client_connections)
                .collect::<Vec<_>>()
        };
        // No more than before on any node: the baseline may count a connection of the test's
        // own that the server had not reaped yet when it was read (a busy machine), never one
        // of the clients'.
        let baseline = self.baseline.clone();
        let none_left = || {
            connections()
                .iter()
                .zip(&baseline)
                .all(|(now, before)| now <= before)
        };
        if !eventually(Duration::from_secs(5), none_left) {
            return Err(format!(
                "connections {:?} after the clients went, {baseline:?} before",
                connections()
            ));
        }
        Ok(())
    }
}

impl Drop for System {
    /// After a failure too: the shared masters are left running and answering (a node whose
    /// restart failed is started again, or the next sequence says it is down).
    fn drop(&mut self) {
        for node in 0..NODES {
            let server = self.cluster.node(node);
            if self.paused[node] {
                // Not `resume`: a panic while unwinding would abort, leaving every server running.
                let _ = server.try_resume();
            }
            if !server.is_running() {
                if let Err(err) = self.bring_back(node) {
                    let _ = std::io::Write::write_all(
                        &mut std::io::stderr(),
                        format!("model: left down: {err}\n").as_bytes(),
                    );
                }
            }
        }
        self.guards.clear();
        self.clients.clear();
        self.actors.clear();
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_timeout(Duration::from_secs(1));
        }
    }
}

/// The nodes and the machine as they are now, for a failure's message: a sequence failing for
/// a reason outside it (a node an earlier one left down or busy, a loaded machine) says so.
pub(crate) fn surroundings(cluster: &RedisCluster, paused: &[bool; NODES]) -> String {
    let mut story = String::from("nodes now:\n");
    for (index, node) in cluster.nodes().iter().enumerate() {
        let state = if paused[index] {
            "paused".to_owned()
        } else if !node.is_running() {
            "down".to_owned()
        } else {
            node_stats(node)
        };
        let _ = writeln!(story, "n{index}: {state}");
    }
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let _ = write!(story, "load average: {}", load.trim());
    story
}

/// A running node's client count, request rate and CPU time, from `INFO`.
fn node_stats(node: &redlock_testkit::RedisServer) -> String {
    let info = node
        .try_connection()
        .map_err(|err| err.to_string())
        .and_then(|mut connection| {
            redis::cmd("INFO")
                .arg("clients")
                .arg("stats")
                .arg("cpu")
                .query::<String>(&mut connection)
                .map_err(|err| err.to_string())
        });
    match info {
        Ok(info) => [
            "connected_clients",
            "instantaneous_ops_per_sec",
            "used_cpu_sys",
            "used_cpu_user",
        ]
        .iter()
        .filter_map(|field| {
            info.lines()
                .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
                .map(|value| format!("{field} {}", value.trim()))
        })
        .collect::<Vec<_>>()
        .join(", "),
        Err(err) => format!("not answering: {err}"),
    }
}

/// A client whose acquisitions retry once: an attempt that met a slow moment (two masters
/// silent for a whole per-node timeout) tries again, as a user's would, and a `NoQuorum` with
/// no fault to explain it stays a violation. One retry, not the default three: with a majority
/// paused every attempt waits a per-node timeout, and the sequences must stay short.
async fn new_client(members: &[String]) -> LockClient {
    LockClient::builder()
        .nodes(members.iter().cloned())
        .watchdog_timeout(WATCHDOG)
        .node_timeout(NODE_TIMEOUT)
        .retry(RetryPolicy {
            retries: 1,
            ..RetryPolicy::default()
        })
        .build()
        .await
        .expect("client")
}

fn spawn_task(runtime: &Runtime) -> mpsc::UnboundedSender<Job> {
    let (sender, mut jobs) = mpsc::unbounded_channel::<Job>();
    runtime.spawn(async move {
        while let Some(job) = jobs.recv().await {
            job().await;
        }
    });
    sender
}

fn describe(took: &Took) -> String {
    match took {
        Took::Granted { token, .. } => format!("granted, token {token:?}"),
        Took::Refused => "refused".into(),
        Took::Dropped => "dropped".into(),
        Took::Failed(err) => format!("{err}"),
    }
}

/// Runs a release, dropped after `cancel_after` if it has not answered by then.
async fn release_within(
    cancel_after: Option<Duration>,
    release: impl Future<Output = Result<(), redlock_reentrant::Error>>,
) -> Released {
    match cancel_after {
        Some(after) => match tokio::time::timeout(after, release).await {
            Ok(done) => Released::of(done),
            Err(_) => Released::Dropped,
        },
        None => Released::of(release.await),
    }
}
