//! The model-based test of the family beside `RLock`, in two setups. On one master: random
//! sequences by four owners (each with a client of its own) of a permit semaphore's
//! acquisitions (several permits at once, fixed or renewed leases, one look or a short wait),
//! releases by guard and by id from another owner, holders that crash (a permit dropped where
//! nothing can be sent: it is never released, and renewal stops), a count-down latch armed,
//! counted down (ids repeated) and waited on, rounds of the fair lock with waiters queued in a
//! drawn order, and the master paused. On five masters: the same steps but the arming and the
//! fair lock, on the semaphore whose count (2) its client fixes, each permit granted by four
//! masters, and the latch whose count (3) its client fixes, with one or two masters paused at
//! once. Run against the real library on real masters and checked after every step against a
//! model:
//!
//! - never more permits believed held than the semaphore has (a permit released by id is no
//!   longer its holder's to count, whatever it believes until its renewal tells it);
//! - the permits out on a master lie between what the model knows is out and what may still
//!   be (on five masters: the most loaded master of a majority holds every permit held but
//!   those the quorum lets it miss): a crashed holder's permits are back within their lease;
//! - a one-look acquisition is granted when the model knows enough permits are free (unless a
//!   master was paused within a lease); granted or not, the permits believed held stay within
//!   the count;
//! - the latch's count is its count minus the distinct ids counted down (on five masters: the
//!   union of a majority's), and it is open exactly when that is none;
//! - the fair lock's waiters get it in the order they queued;
//! - at the end, once everything is released and every crashed permit's lease ran out: no key,
//!   no subscription.
//!
//! A request the masters do not answer in time (paused, or the machine is busy) is no
//! violation: the model takes what it may have done into account (an acquisition that may have
//! landed is out until its lease ends; a release or release by id that may not have: the
//! permit is dropped where nothing can be sent, and back within its lease; a latch that may
//! have been armed or counted down is deleted and starts afresh; a fair round with a waiter not
//! answered is not checked for its order).
//!
//! Seeded and replayable (`TEST_SEED`); `MODEL_FAMILY_CASES` (default 20) and `MODEL_STEPS`
//! (default 24) set the size.

use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redlock_reentrant::{
    Error, LockClient, Permit, RCountDownLatch, RLock, RPermitExpirableSemaphore,
};
use redlock_testkit::{eventually, test_seed, RedisCluster};
use tokio::runtime::Runtime;

/// The owners: each has a client of its own.
const OWNERS: usize = 4;
/// The one-master semaphore's count.
const COUNT: u32 = 3;
/// The fixed count of the semaphore on several masters, and how many masters it runs on: each
/// permit needs four of the five, so one may be down.
const QUORUM_COUNT: u32 = 2;
const QUORUM_NODES: usize = 5;
/// The fixed count of the latch on several masters.
const QUORUM_LATCH_COUNT: u32 = 3;
/// The watchdog lease: short, so crashed permits come back within a few steps.
const WATCHDOG: Duration = Duration::from_millis(1500);
/// The fair lock's clients' watchdog lease: their waiters' heartbeat is a third of it (2 s), so
/// a waiter that a busy machine keeps from looking for a while keeps its place, and the order
/// checked is the order queued.
const FAIR_WATCHDOG: Duration = Duration::from_secs(6);
/// How long the master may take to answer, on a busy two-core machine.
const NODE_TIMEOUT: Duration = Duration::from_millis(200);
/// Room for a busy machine around every bound the model derives from a lease.
const MARGIN: Duration = Duration::from_millis(400);
/// No step may take longer: a hang is a failure.
const STEP_LIMIT: Duration = Duration::from_secs(20);
const NAME: &str = "family";

/// One step of a sequence.
#[derive(Debug, Clone)]
enum Step {
    /// `try_acquire(permits, wait, lease)`: a fixed lease in milliseconds, or the watchdog's.
    Take {
        owner: usize,
        permits: u32,
        wait_ms: u64,
        lease_ms: Option<u64>,
    },
    /// The `pick`-th permit of `owner` released by its guard.
    Release { owner: usize, pick: usize },
    /// Released by id, by another owner's client.
    ReleaseById {
        owner: usize,
        pick: usize,
        by: usize,
    },
    /// Dropped where nothing can be sent: a crash, as the master sees it.
    Crash { owner: usize, pick: usize },
    /// The latch armed with `count` (refused while a round is armed).
    Arm { count: u32 },
    /// A count-down as `id`.
    CountDown { owner: usize, id: u32 },
    /// A round of the fair lock: `order[0]` holds it while the others queue in that order.
    FairRound { order: Vec<usize> },
    /// Master `node` (of the setup's) paused for this long; with `two`, the next one too.
    Pause { node: usize, two: bool, ms: u64 },
}

/// What a run exercises.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Setup {
    /// The whole family on one master.
    OneMaster,
    /// The semaphore whose count its client fixes, on five masters.
    Quorum,
}

impl Setup {
    fn nodes(self) -> usize {
        match self {
            Setup::OneMaster => 1,
            Setup::Quorum => QUORUM_NODES,
        }
    }

    fn count(self) -> u32 {
        match self {
            Setup::OneMaster => COUNT,
            Setup::Quorum => QUORUM_COUNT,
        }
    }

    /// Whether a step is one of this setup's (the fair lock is one master's; a latch whose
    /// count is fixed is not armed).
    fn has(self, step: &Step) -> bool {
        self == Setup::OneMaster || !matches!(step, Step::Arm { .. } | Step::FairRound { .. })
    }

    /// The count of the latch, where its client fixes it.
    fn fixed_latch(self) -> Option<u32> {
        match self {
            Setup::OneMaster => None,
            Setup::Quorum => Some(QUORUM_LATCH_COUNT),
        }
    }
}

fn draw(rng: &mut fastrand::Rng) -> Step {
    let owner = rng.usize(..OWNERS);
    match rng.u8(..100) {
        0..=29 => Step::Take {
            owner,
            permits: rng.u32(1..=2),
            wait_ms: if rng.bool() { 0 } else { 100 },
            lease_ms: rng.bool().then(|| rng.u64(600..=1500)),
        },
        30..=44 => Step::Release {
            owner,
            pick: rng.usize(..4),
        },
        45..=51 => Step::ReleaseById {
            owner,
            pick: rng.usize(..4),
            by: rng.usize(..OWNERS),
        },
        52..=59 => Step::Crash {
            owner,
            pick: rng.usize(..4),
        },
        60..=66 => Step::Arm {
            count: rng.u32(1..=3),
        },
        67..=81 => Step::CountDown {
            owner,
            id: rng.u32(..4),
        },
        82..=92 => {
            let mut order: Vec<usize> = (0..OWNERS).collect();
            rng.shuffle(&mut order);
            order.truncate(rng.usize(2..=OWNERS));
            Step::FairRound { order }
        }
        _ => Step::Pause {
            node: rng.usize(..QUORUM_NODES),
            two: rng.bool(),
            ms: rng.u64(100..=600),
        },
    }
}

/// A step of `setup`'s.
fn draw_for(setup: Setup, rng: &mut fastrand::Rng) -> Step {
    loop {
        let step = draw(rng);
        if setup.has(&step) {
            return step;
        }
    }
}

/// A permit the sequence keeps, and what the model knows of it.
struct Held {
    permit: Permit,
    /// When a fixed lease surely ended (`None`: renewed by the watchdog).
    ends_by: Option<Instant>,
}

/// Permits that may still be out on the master though nobody holds them: crashed, or released
/// with no answer; gone by their deadline.
struct Leftover {
    permits: u32,
    gone_by: Instant,
}

/// The latch as the model knows it: its count and the ids counted down, while armed; and the
/// count its client fixed (armed from the start, open once counted, never unarmed but by its
/// deletion).
#[derive(Default)]
struct LatchModel {
    armed: Option<(u32, std::collections::BTreeSet<u32>)>,
    fixed: Option<u32>,
}

impl LatchModel {
    fn new(fixed: Option<u32>) -> Self {
        Self {
            armed: fixed.map(|count| (count, Default::default())),
            fixed,
        }
    }
}

impl LatchModel {
    fn left(&self) -> u32 {
        self.armed.as_ref().map_or(0, |(count, ids)| {
            count.saturating_sub(u32::try_from(ids.len()).unwrap_or(u32::MAX))
        })
    }
}

struct Family {
    setup: Setup,
    /// How many masters must grant a permit.
    quorum: usize,
    runtime: Runtime,
    clients: Vec<LockClient>,
    semaphores: Vec<RPermitExpirableSemaphore>,
    latches: Vec<RCountDownLatch>,
    fair_clients: Vec<LockClient>,
    fair: Vec<RLock>,
    held: Vec<Vec<Held>>,
    leftovers: Vec<Leftover>,
    latch: LatchModel,
    paused_until: Option<Instant>,
    log: Vec<String>,
}

impl Family {
    fn start(setup: Setup, server: &RedisCluster) -> Self {
        for node in server.nodes() {
            redis::cmd("FLUSHALL")
                .exec(&mut node.connection())
                .expect("FLUSHALL");
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let connect = |watchdog: Duration| {
            runtime
                .block_on(
                    LockClient::builder()
                        .nodes(server.urls())
                        .watchdog_timeout(watchdog)
                        .node_timeout(NODE_TIMEOUT)
                        .build(),
                )
                .expect("client")
        };
        let clients: Vec<LockClient> = (0..OWNERS).map(|_| connect(WATCHDOG)).collect();
        let one_master = setup == Setup::OneMaster;
        let fair_clients: Vec<LockClient> = (0..OWNERS)
            .filter(|_| one_master)
            .map(|_| connect(FAIR_WATCHDOG))
            .collect();
        let semaphores: Vec<_> = clients
            .iter()
            .map(|client| match setup {
                Setup::OneMaster => client
                    .get_permit_expirable_semaphore(NAME)
                    .expect("one master"),
                Setup::Quorum => client
                    .get_quorum_semaphore(NAME, QUORUM_COUNT)
                    .expect("a count"),
            })
            .collect();
        if setup == Setup::OneMaster {
            runtime
                .block_on(semaphores[0].set_permits(COUNT))
                .expect("set the count");
        }
        Self {
            setup,
            quorum: semaphores[0].quorum(),
            latches: clients
                .iter()
                .map(|client| match setup.fixed_latch() {
                    None => client.get_count_down_latch(NAME).expect("one master"),
                    Some(count) => client
                        .get_quorum_count_down_latch(NAME, count)
                        .expect("a count"),
                })
                .collect(),
            fair: fair_clients
                .iter()
                .map(|client| client.get_fair_lock(NAME).expect("one master"))
                .collect(),
            fair_clients,
            semaphores,
            clients,
            runtime,
            held: (0..OWNERS).map(|_| Vec::new()).collect(),
            leftovers: Vec::new(),
            latch: LatchModel::new(setup.fixed_latch()),
            paused_until: None,
            log: Vec::new(),
        }
    }

    /// The permits the owners believe they hold (their lost signal has not fired).
    fn believed(&self) -> u32 {
        self.held
            .iter()
            .flatten()
            .filter(|held| !held.permit.is_lost())
            .map(|held| held.permit.permits())
            .sum()
    }

    /// What is surely out on the master, and what may be.
    fn out_bounds(&mut self) -> (u32, u32) {
        let now = Instant::now();
        self.leftovers.retain(|leftover| leftover.gone_by > now);
        let sure: u32 = self
            .held
            .iter()
            .flatten()
            .filter(|held| !held.permit.is_lost())
            .map(|held| held.permit.permits())
            .sum();
        // A lost permit may still be on the master until its lease ends; a fixed lease's end
        // is known, a renewed one's is a lease after its loss at most.
        let lost: u32 = self
            .held
            .iter()
            .flatten()
            .filter(|held| held.permit.is_lost())
            .map(|held| held.permit.permits())
            .sum();
        let leftover: u32 = self.leftovers.iter().map(|leftover| leftover.permits).sum();
        (sure.min(self.setup.count()), sure + lost + leftover)
    }

    fn recently_paused(&self) -> bool {
        self.paused_until
            .is_some_and(|until| Instant::now() < until + WATCHDOG + MARGIN)
    }

    fn apply(&mut self, server: &RedisCluster, step: &Step) -> Result<(), String> {
        self.log.push(format!("{step:?}"));
        match step.clone() {
            Step::Take {
                owner,
                permits,
                wait_ms,
                lease_ms,
            } => {
                let (_, may_be_out) = self.out_bounds();
                let count = self.setup.count();
                let sure_free = count.saturating_sub(may_be_out);
                let semaphore = self.semaphores[owner].clone();
                let lease = lease_ms.map(Duration::from_millis);
                let asked = Instant::now();
                let taken = self.block(async move {
                    semaphore
                        .try_acquire(permits, Duration::from_millis(wait_ms), lease)
                        .await
                })?;
                match taken {
                    Ok(Some(permit)) => {
                        self.note("granted");
                        let ends_by = lease.map(|lease| asked + lease);
                        self.held[owner].push(Held { permit, ends_by });
                        if self.believed() > count {
                            return Err(format!(
                                "{} permits believed held, of {count}",
                                self.believed()
                            ));
                        }
                    }
                    Ok(None) if sure_free >= permits && !self.recently_paused() => {
                        return Err(format!(
                            "refused {permits} permits though {sure_free} were surely free"
                        ));
                    }
                    Ok(None) => self.note("refused"),
                    // The master did not answer in time (paused, or a busy machine): the
                    // attempt is undone in the background; until then it may be out.
                    Err(err) if err.is_retryable() => {
                        self.note(&err.to_string());
                        self.leftovers.push(Leftover {
                            permits,
                            gone_by: Instant::now() + lease.unwrap_or(WATCHDOG) + MARGIN,
                        });
                    }
                    Err(err) => return Err(format!("take: {err}")),
                }
            }
            Step::Release { owner, pick } => {
                let Some(held) = self.pick(owner, pick) else {
                    return Ok(());
                };
                let permits = held.permit.permits();
                let gone_by = Instant::now() + WATCHDOG + MARGIN;
                let released = self.block(held.permit.release())?;
                self.note(&format!("{permits} permits: {released:?}"));
                match released {
                    Ok(()) => {}
                    // Lost (a fixed lease that ran out, a renewal refused): its holder is told a
                    // margin before the master's deadline, and what is left of it is deleted in
                    // the background, so it may be out until its lease ends. Not answered: the
                    // permits are given up, and come back with their lease.
                    Err(err) if matches!(err, Error::LockLost { .. }) || err.is_retryable() => {
                        self.leftovers.push(Leftover { permits, gone_by });
                    }
                    Err(err) => return Err(format!("release: {err}")),
                }
            }
            Step::ReleaseById { owner, pick, by } => {
                let count = self.held[owner].len();
                if count == 0 {
                    return Ok(());
                }
                let held = &self.held[owner][pick % count];
                let id = held.permit.id().clone();
                // Lost, or about to be (a fixed lease ending): the release may find it gone.
                let soon = Instant::now() + MARGIN;
                let live = !held.permit.is_lost() && held.ends_by.is_none_or(|end| end > soon);
                let permits = held.permit.permits();
                let semaphore = self.semaphores[by].clone();
                let released = self.block(async move { semaphore.release(&id).await })?;
                self.note(&format!("{permits} permits: {released:?}"));
                match released {
                    // Its holder is told at its next renewal; it is no longer its to count.
                    Ok(()) => {
                        let held = self.held[owner].remove(pick % count);
                        let _ = std::thread::spawn(move || drop(held)).join();
                    }
                    Err(Error::InvalidArgument(_)) if !live || self.recently_paused() => {}
                    // Not answered: released or not, the model cannot tell. Its holder drops
                    // it where nothing can be sent (renewal stops), and it is back within its
                    // lease either way.
                    Err(err) if err.is_retryable() => {
                        let held = self.held[owner].remove(pick % count);
                        let _ = std::thread::spawn(move || drop(held)).join();
                        self.leftovers.push(Leftover {
                            permits,
                            gone_by: Instant::now() + WATCHDOG + MARGIN,
                        });
                    }
                    Err(err) => return Err(format!("release by id of a live permit: {err}")),
                }
            }
            Step::Crash { owner, pick } => {
                let Some(held) = self.pick(owner, pick) else {
                    return Ok(());
                };
                let permits = held.permit.permits();
                self.note(&format!("{permits} permits"));
                let gone_by = Instant::now() + WATCHDOG + MARGIN;
                // Dropped on a thread with no runtime: nothing is sent, renewal stops.
                let _ = std::thread::spawn(move || drop(held)).join();
                self.leftovers.push(Leftover { permits, gone_by });
            }
            Step::Arm { count } => {
                let latch = self.latches[0].clone();
                match self.block(async move { latch.try_set_count(count).await })? {
                    Ok(armed) => {
                        if armed != self.latch.armed.is_none() {
                            return Err(format!(
                                "armed {armed} with the model at {:?}",
                                self.latch.left()
                            ));
                        }
                        if armed {
                            self.latch.armed = Some((count, Default::default()));
                        }
                    }
                    // May have armed: the model cannot tell; start the latch afresh.
                    Err(err) if err.is_retryable() => self.reset_latch()?,
                    Err(err) => return Err(format!("arm: {err}")),
                }
            }
            Step::CountDown { owner, id } => {
                let latch = self.latches[owner].clone();
                let counted =
                    self.block(async move { latch.count_down_as(&format!("id-{id}")).await })?;
                match counted {
                    Ok(()) => {
                        let fixed = self.latch.fixed.is_some();
                        if let Some((count, ids)) = &mut self.latch.armed {
                            ids.insert(id);
                            if ids.len() >= *count as usize && !fixed {
                                self.latch.armed = None;
                            }
                        }
                    }
                    // May have counted: the model cannot tell; start the latch afresh.
                    Err(err) if err.is_retryable() => self.reset_latch()?,
                    Err(err) => return Err(format!("count down: {err}")),
                }
            }
            Step::FairRound { order } => self.fair_round(server, &order)?,
            Step::Pause { node, two, ms } => {
                let nodes = self.setup.nodes();
                let paused: Vec<usize> = [node, node + 1]
                    .into_iter()
                    .take(if two && nodes > 1 { 2 } else { 1 })
                    .map(|node| node % nodes)
                    .collect();
                for node in &paused {
                    server.stop(*node);
                }
                std::thread::sleep(Duration::from_millis(ms));
                for node in &paused {
                    server.resume(*node);
                }
                self.paused_until = Some(Instant::now());
            }
        }
        Ok(())
    }

    /// Adds what a step came to, to its line of the story.
    fn note(&mut self, outcome: &str) {
        if let Some(line) = self.log.last_mut() {
            let _ = write!(line, " -> {outcome}");
        }
    }

    /// Deletes the latch (the model unarmed), looking again until the master answers.
    fn reset_latch(&mut self) -> Result<(), String> {
        let latch = self.latches[0].clone();
        let deleted = self.block(async move {
            loop {
                match latch.delete().await {
                    Err(err) if err.is_retryable() => {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    done => return done,
                }
            }
        })?;
        deleted.map_err(|err| format!("delete: {err}"))?;
        self.latch = LatchModel::new(self.latch.fixed);
        Ok(())
    }

    /// Takes the `pick`-th permit of `owner` out of the sequence, if it has any.
    fn pick(&mut self, owner: usize, pick: usize) -> Option<Held> {
        let count = self.held[owner].len();
        (count > 0).then(|| self.held[owner].remove(pick % count))
    }

    fn fair_round(&mut self, server: &RedisCluster, order: &[usize]) -> Result<(), String> {
        let first = self.fair[order[0]].clone();
        let held = match self.block(async move { first.acquire().await })? {
            Ok(held) => held,
            // Not answered in time: no round this step.
            Err(err) if err.is_retryable() => return Ok(()),
            Err(err) => return Err(format!("the fair lock's first owner: {err}")),
        };
        let got = Arc::new(Mutex::new(Vec::new()));
        let mut waiters = Vec::new();
        let queue = format!(
            "{}:fair-queue",
            self.clients[0].redlock().config().key_for(NAME)
        );
        for (place, owner) in order.iter().enumerate().skip(1) {
            let lock = self.fair[*owner].clone();
            let got = Arc::clone(&got);
            let owner = *owner;
            waiters.push(self.runtime.spawn(async move {
                let guard = lock.acquire().await?;
                got.lock().expect("order").push(owner);
                guard.unlock().await
            }));
            let queued = eventually(STEP_LIMIT, || {
                let length: usize = redis::cmd("ZCARD")
                    .arg(&queue)
                    .query(&mut server.node(0).connection())
                    .unwrap_or(0);
                length == place
            });
            if !queued {
                return Err(format!("waiter {place} never queued"));
            }
        }
        match self.block(held.unlock())? {
            // Not answered: the hold is given up and frees with its lease; the waiters wait it
            // out in their order all the same.
            Err(err) if !err.is_retryable() => return Err(format!("fair unlock: {err}")),
            _ => {}
        }
        let mut unanswered = false;
        for waiter in waiters {
            match self
                .block(waiter)?
                .map_err(|err| format!("fair task: {err}"))?
            {
                Ok(()) => {}
                // A waiter's look or release not answered in time: the order is not checked.
                Err(err) if err.is_retryable() => unanswered = true,
                Err(err) => return Err(format!("fair waiter: {err}")),
            }
        }
        let got = got.lock().expect("order").clone();
        if !unanswered && got != order[1..] {
            return Err(format!(
                "the fair lock went to {got:?}, queued {:?}",
                &order[1..]
            ));
        }
        Ok(())
    }

    /// Checks the master against the model.
    fn check(&mut self) -> Result<(), String> {
        // What may be out, before the status: permits only leave meanwhile.
        let (_, may_be) = self.out_bounds();
        let semaphore = self.semaphores[0].clone();
        let status = match self.block(async move { semaphore.status().await })? {
            Ok(status) => status,
            Err(err) if err.is_retryable() => return Ok(()),
            Err(err) => return Err(format!("status: {err}")),
        };
        // What is surely out, after it: a permit's lost signal fires before the master can drop
        // it (a margin before its validity ends, which ends before its key), so one the master
        // dropped by the time it answered is lost by now.
        let (sure, _) = self.out_bounds();
        // On several masters the status is the most out on any master of a majority that
        // answered: each holds a subset of the permits out, and a permit held is on all but
        // `nodes - quorum` of them, so on `majority + quorum - nodes` of any majority at least.
        let nodes = self.setup.nodes();
        let majority = nodes / 2 + 1;
        let present = u32::try_from((majority + self.quorum).saturating_sub(nodes)).unwrap_or(0);
        let at_least = (sure * present).div_ceil(u32::try_from(majority).unwrap_or(1));
        if status.acquired > may_be {
            return Err(format!(
                "{} permits out on a master, at most {may_be} may be",
                status.acquired
            ));
        }
        if status.acquired < at_least {
            return Err(format!(
                "{} permits out on the most loaded master, at least {at_least} are ({sure} held)",
                status.acquired
            ));
        }
        let latch = self.latches[1].clone();
        let (left, open) = match self.block(async move {
            let left = latch.count().await?;
            let open = latch.wait(Duration::ZERO).await?;
            Ok::<_, Error>((left, open))
        })? {
            Ok(seen) => seen,
            Err(err) if err.is_retryable() => return Ok(()),
            Err(err) => return Err(format!("latch: {err}")),
        };
        if left != self.latch.left() || open != (self.latch.left() == 0) {
            return Err(format!(
                "the latch has {left} left (open: {open}), the model {}",
                self.latch.left()
            ));
        }
        Ok(())
    }

    /// Releases everything, waits out the crashed permits, and checks that nothing is left.
    fn quiesce(mut self, server: &RedisCluster) -> Result<(), String> {
        for held in self.held.iter_mut().flat_map(std::mem::take) {
            let permits = held.permit.permits();
            let gone_by = Instant::now() + WATCHDOG + MARGIN;
            if self.runtime.block_on(held.permit.release()).is_err() {
                // Lost (its leftovers go in the background, or with its lease), or not
                // answered: out until its lease ends at most.
                self.leftovers.push(Leftover { permits, gone_by });
            }
        }
        // Every permit is gone by the last of their bounds: looked at until then.
        let last = self
            .leftovers
            .iter()
            .map(|leftover| leftover.gone_by)
            .max()
            .unwrap_or_else(Instant::now);
        loop {
            let semaphore = self.semaphores[0].clone();
            let status = self
                .runtime
                .block_on(async move { semaphore.status().await })
                .map_err(|err| format!("final status: {err}"))?;
            if status.acquired == 0 {
                break;
            }
            if Instant::now() > last {
                return Err(format!(
                    "{} permits still out at the end; the permits by master: {:?}",
                    status.acquired,
                    self.permits_by_master(server)
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let (semaphore, latch) = (self.semaphores[0].clone(), self.latches[0].clone());
        self.runtime
            .block_on(async move {
                semaphore.delete().await?;
                latch.delete().await
            })
            .map_err(|err| format!("delete: {err}"))?;
        for client in self.clients.iter().chain(&self.fair_clients) {
            self.runtime.block_on(client.shutdown());
            if client.watched_channels() != 0 {
                return Err("a subscription left".to_owned());
            }
        }
        // Every key of the family's (the node's fencing counter is the client's, and stays).
        // (A deletion that a master answered late lands there in the background.)
        let pattern = format!("{}*", self.clients[0].redlock().config().key_for(NAME));
        eventually(NODE_TIMEOUT + MARGIN, || server.count_keys(&pattern) == 0);
        let left = server.count_keys(&pattern);
        if left != 0 {
            let keys: Vec<Vec<String>> = (0..server.len())
                .map(|node| server.keys_on(node, &pattern))
                .collect();
            return Err(format!("{left} keys left, by master: {keys:?}"));
        }
        Ok(())
    }

    /// Every master's permits hash, for a violation's story.
    fn permits_by_master(&self, server: &RedisCluster) -> Vec<Vec<String>> {
        let holders = format!(
            "{}:permits",
            self.clients[0].redlock().config().key_for(NAME)
        );
        server
            .nodes()
            .iter()
            .map(|node| {
                redis::cmd("HGETALL")
                    .arg(&holders)
                    .query(&mut node.connection())
                    .unwrap_or_default()
            })
            .collect()
    }

    fn block<F: std::future::Future>(&self, future: F) -> Result<F::Output, String> {
        self.runtime
            .block_on(async { tokio::time::timeout(STEP_LIMIT, future).await })
            .map_err(|_| format!("a step took over {STEP_LIMIT:?}"))
    }

    fn story(&self) -> String {
        let mut story = String::new();
        for (i, step) in self.log.iter().enumerate() {
            let _ = writeln!(story, "{i:3}: {step}");
        }
        story
    }
}

#[test]
fn random_sequences_of_the_one_master_family_match_the_model() {
    run(Setup::OneMaster, "one-master family");
}

#[test]
fn random_sequences_of_the_fixed_count_semaphore_on_five_masters_match_the_model() {
    run(Setup::Quorum, "fixed-count semaphore on five masters");
}

fn run(setup: Setup, what: &str) {
    // One run at a time, as the other runs of this binary: each is timed against its leases.
    let _one_run = crate::ONE_RUN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let server = RedisCluster::start(setup.nodes());
    let seed = test_seed();
    let cases = crate::env_number("MODEL_FAMILY_CASES", 20);
    let steps = crate::env_number("MODEL_STEPS", 24);
    eprintln!("{what}: TEST_SEED={seed} cases {cases} MODEL_STEPS={steps}");
    let mut rng = fastrand::Rng::with_seed(seed);
    let started = Instant::now();
    for case in 0..cases {
        let mut family = Family::start(setup, &server);
        for _ in 0..steps {
            let step = draw_for(setup, &mut rng);
            if let Err(violation) = family.apply(&server, &step).and_then(|()| family.check()) {
                panic!(
                    "case {case}: {violation}\nsteps:\n{}\nreplay with TEST_SEED={seed}",
                    family.story()
                );
            }
        }
        let story = family.story();
        if let Err(violation) = family.quiesce(&server) {
            panic!("case {case}, at the end: {violation}\nsteps:\n{story}\nreplay with TEST_SEED={seed}");
        }
    }
    eprintln!(
        "model, {what}: {cases} sequences of up to {steps} steps in {:?}, no violation",
        started.elapsed()
    );
}
