//! One run of the fault suite: five masters, a fenced resource, worker processes that reach
//! each master through a proxy of their own, the faults a scenario injects (each recorded in
//! the history), then quiescing and the checkers.
//!
//! ```no_run
//! # async fn run() {
//! use std::time::Duration;
//! use redlock_testkit::{FaultRun, RunConfig};
//!
//! // The fault suite (package `redlock-tests`) passes `env!("CARGO_BIN_EXE_fault_worker")`.
//! let mut run = FaultRun::start(RunConfig::new("demo", "target/debug/fault_worker")).await;
//! run.spawn_workers(3, |_| {}).await;
//! run.stop_node(0);
//! tokio::time::sleep(Duration::from_secs(5)).await;
//! let outcome = run.finish().await;
//! outcome.assert_passed();
//! # }
//! ```

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use redis::Commands as _;

use crate::check::{beliefs, check_all, BeliefEnd, CheckConfig};
use crate::history::{read_history, Event, History, Op, Phase};
use crate::outcome::{replay_hint, Outcome};
use crate::worker_process::WorkerProcess;
use crate::{Fault, FencedResource, ProxyGrid, RedisCluster, WorkerSpec};

/// A scenario's settings.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// Names the history directory and the report.
    pub name: String,
    /// The `fault_worker` executable (the `redlock-tests` package's; its integration tests have it
    /// at `env!("CARGO_BIN_EXE_fault_worker")`).
    pub worker_binary: PathBuf,
    /// Masters.
    pub nodes: usize,
    /// The template every worker starts from (its id, history, nodes and resource are set
    /// per worker).
    pub worker: WorkerSpec,
    /// Seeds every random choice; `TEST_SEED` overrides it.
    pub seed: u64,
    /// Stops shorter than this do not end a holder's belief (see [`CheckConfig`]).
    pub pause_bound: Duration,
    /// Masters that log every write to an append-only file, fsynced before replying
    /// (`appendfsync always`), so a restart keeps the locks: the mitigation for restarts.
    pub persistent_nodes: bool,
}

impl RunConfig {
    /// Five masters, workers with a 3 s lease, a random seed (or `TEST_SEED`).
    pub fn new(name: &str, worker_binary: impl Into<PathBuf>) -> RunConfig {
        let seed = crate::test_seed();
        let worker = WorkerSpec::new(0, PathBuf::new(), Vec::new());
        RunConfig {
            name: name.to_owned(),
            worker_binary: worker_binary.into(),
            nodes: 5,
            pause_bound: worker.lease / 3,
            worker,
            seed,
            persistent_nodes: false,
        }
    }
}

/// A run in progress.
#[derive(Debug)]
pub struct FaultRun {
    config: RunConfig,
    /// The masters (reached directly, not through the proxies).
    pub cluster: RedisCluster,
    /// The fenced resource.
    pub resource: FencedResource,
    /// Each worker's proxies to each master.
    pub proxies: ProxyGrid,
    workers: Vec<WorkerProcess>,
    history: Arc<History>,
    rng: fastrand::Rng,
}

impl FaultRun {
    /// Starts the masters, the resource and the history.
    /// The history goes to a directory of its own under the system's temporary directory,
    /// printed first thing (test output is shown when a test fails); it is removed only by
    /// [`Outcome::discard`], so a failure, panic included, leaves it to replay.
    pub async fn start(config: RunConfig) -> FaultRun {
        let dir = std::env::temp_dir().join(format!(
            "redlock-fault-{}-{}-{}",
            config.name,
            config.seed,
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).expect("a history directory");
        let history = Arc::new(History::open(dir.join("history.log")).expect("history"));
        eprintln!(
            "[{}] replay with TEST_SEED={}; history at {}",
            config.name,
            config.seed,
            history.path().display()
        );
        let mut builder = crate::RedisServer::builder();
        if config.persistent_nodes {
            builder = builder.args(["--appendonly", "yes", "--appendfsync", "always"]);
        }
        let cluster = RedisCluster::start_with(config.nodes, &builder);
        let resource = FencedResource::start();
        let upstreams: Vec<std::net::SocketAddr> = cluster
            .ports()
            .into_iter()
            .map(|port| std::net::SocketAddr::from(([127, 0, 0, 1], port)))
            .collect();
        let proxies = ProxyGrid::start(0, &upstreams)
            .await
            .expect("the proxies start");
        let rng = fastrand::Rng::with_seed(config.seed);
        FaultRun {
            config,
            cluster,
            resource,
            proxies,
            workers: Vec::new(),
            history,
            rng,
        }
    }

    /// The run's random source (seeded).
    pub fn rng(&mut self) -> &mut fastrand::Rng {
        &mut self.rng
    }

    /// The shared history.
    pub fn history(&self) -> &History {
        &self.history
    }

    /// Stops shorter than this do not end a holder's belief.
    pub fn pause_bound(&self) -> Duration {
        self.config.pause_bound
    }

    /// The configured lease.
    pub fn lease(&self) -> Duration {
        self.config.worker.lease
    }

    /// Starts a worker from the template, changed by `customize`; returns its index (its row in
    /// [`proxies`](Self::proxies) and its number in the history, `w<index>`).
    /// Uses the row [`prepare_worker`](Self::prepare_worker) made, if any.
    pub async fn spawn_worker(&mut self, customize: impl FnOnce(&mut WorkerSpec)) -> usize {
        let row = if self.proxies.workers() > self.workers.len() {
            self.workers.len()
        } else {
            self.proxies.add_worker().await.expect("a proxy row")
        };
        assert_eq!(row, self.workers.len(), "one proxy row per worker");
        let mut spec = self.config.worker.clone();
        spec.id = u32::try_from(row).expect("few workers");
        spec.history = self.history.path().to_path_buf();
        spec.nodes = self.proxies.urls(row);
        spec.resource = Some(self.resource.url());
        spec.seed = self.config.seed ^ (row as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        customize(&mut spec);
        let worker = WorkerProcess::spawn(&self.config.worker_binary, &spec);
        self.history.record(
            "test",
            Op::Spawn,
            Phase::Ok,
            &[("target", &actor(row)), ("pid", &worker.pid())],
        );
        self.workers.push(worker);
        row
    }

    /// Makes the proxies of the next worker before it starts, so a scenario can fault them
    /// first (with [`proxy`](Self::proxy)); returns its index.
    pub async fn prepare_worker(&mut self) -> usize {
        if self.proxies.workers() == self.workers.len() {
            self.proxies.add_worker().await.expect("a proxy row");
        }
        self.workers.len()
    }

    /// Starts `count` workers, each changed by `customize`.
    pub async fn spawn_workers(&mut self, count: usize, customize: impl Fn(&mut WorkerSpec)) {
        for _ in 0..count {
            self.spawn_worker(&customize).await;
        }
    }

    /// The worker at `index`.
    pub fn worker(&self, index: usize) -> &WorkerProcess {
        &self.workers[index]
    }

    /// How many workers were started (dead ones included).
    pub fn worker_count(&self) -> usize {
        self.workers.len()
    }

    /// Indexes of workers that still run and are not stopped.
    pub fn running_workers(&self) -> Vec<usize> {
        (0..self.workers.len())
            .filter(|&i| self.workers[i].is_alive() && !self.workers[i].is_stopped())
            .collect()
    }

    /// Records a fault (phase `ok` of `fault`) or its end (`heal`).
    pub fn record(&self, op: Op, kind: &str, target: &str) {
        self.history.record(
            "nemesis",
            op,
            Phase::Ok,
            &[("kind", &kind), ("target", &target)],
        );
    }

    /// Records a milestone of the scenario.
    pub fn note(&self, what: &str) {
        self.history
            .record("test", Op::Note, Phase::Info, &[("what", &what)]);
    }

    /// SIGKILLs a worker.
    pub fn kill_worker(&self, i: usize) {
        self.workers[i].kill();
        self.record(Op::Fault, "kill-worker", &actor(i));
    }

    /// SIGSTOPs a worker.
    pub fn stop_worker(&self, i: usize) {
        self.workers[i].stop();
        self.record(Op::Fault, "stop-worker", &actor(i));
    }

    /// SIGCONTs a worker.
    pub fn resume_worker(&self, i: usize) {
        self.record(Op::Heal, "stop-worker", &actor(i));
        self.workers[i].resume();
    }

    /// SIGKILLs a master (heal with [`restart_node`](Self::restart_node)).
    pub fn kill_node(&self, n: usize) {
        self.cluster.kill(n);
        self.record(Op::Fault, "kill-node", &node(n));
    }

    /// SIGSTOPs a master.
    pub fn stop_node(&self, n: usize) {
        self.cluster.stop(n);
        self.record(Op::Fault, "stop-node", &node(n));
    }

    /// SIGCONTs a master.
    pub fn resume_node(&self, n: usize) {
        self.cluster.resume(n);
        self.record(Op::Heal, "stop-node", &node(n));
    }

    /// Restarts a master empty on its port (after a kill, or in place).
    pub fn restart_node(&self, n: usize) {
        let was_running = self.cluster.node(n).is_running();
        self.cluster.restart(n);
        if was_running {
            self.record(Op::Fault, "restart-node", &node(n));
        } else {
            self.record(Op::Heal, "kill-node", &node(n));
        }
    }

    /// `SCRIPT FLUSH` on a master.
    pub fn flush_scripts(&self, n: usize) {
        let flushed: redis::RedisResult<()> = redis::cmd("SCRIPT")
            .arg("FLUSH")
            .query(&mut self.cluster.node(n).connection());
        flushed.expect("SCRIPT FLUSH");
        self.record(Op::Fault, "flush-scripts", &node(n));
    }

    /// Sets the proxy between worker `w` and master `n` (`None`: every worker, or every node).
    pub fn proxy(&self, w: Option<usize>, n: Option<usize>, fault: Fault) {
        let target = format!(
            "{}:{}",
            w.map_or("*".to_owned(), actor),
            n.map_or("*".to_owned(), node)
        );
        let workers: Vec<usize> =
            w.map_or_else(|| (0..self.proxies.workers()).collect(), |w| vec![w]);
        let nodes: Vec<usize> = n.map_or_else(|| (0..self.config.nodes).collect(), |n| vec![n]);
        for &w in &workers {
            for &n in &nodes {
                self.proxies.set(w, n, fault);
            }
        }
        let op = if fault == Fault::Pass {
            Op::Heal
        } else {
            Op::Fault
        };
        self.record(op, proxy_kind(fault), &target);
    }

    /// Waits until some event satisfies `found` (polling the history), up to `timeout`.
    pub async fn wait_for_event(
        &self,
        timeout: Duration,
        found: impl Fn(&Event) -> bool,
    ) -> Option<Event> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let events = read_history(self.history.path()).expect("the history reads");
            if let Some(event) = events.into_iter().find(|e| found(e)) {
                return Some(event);
            }
            if tokio::time::Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits up to `within` for the end (`ok`, `fail` or `info`) of an outer acquisition by
    /// `actor` recorded after `after`.
    ///
    /// # Panics
    ///
    /// If none comes in time.
    pub async fn next_acquisition_end(&self, actor: &str, after: u64, within: Duration) -> Event {
        self.wait_for_event(within, |e| {
            e.actor == actor
                && e.t > after
                && e.op == Op::Acquire
                && e.is_outer()
                && e.phase != Phase::Invoke
        })
        .await
        .unwrap_or_else(|| panic!("no acquisition of {actor} ended\n{}", self.replay_hint()))
    }

    /// The running worker that believes it holds `lock` now, per the history so far.
    pub fn current_holder(&self, lock: &str) -> Option<usize> {
        let events = read_history(self.history.path()).expect("the history reads");
        beliefs(&events, self.config.pause_bound)
            .into_iter()
            .filter(|belief| belief.lock == lock && belief.ended_by == BeliefEnd::HistoryEnd)
            .filter_map(|belief| belief.worker.strip_prefix('w')?.parse::<usize>().ok())
            .find(|&w| w < self.workers.len() && self.workers[w].is_alive())
    }

    /// Waits until a running worker believes it holds `lock`, up to `timeout`.
    pub async fn wait_for_holder(&self, lock: &str, timeout: Duration) -> Option<usize> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Some(holder) = self.current_holder(lock) {
                return Some(holder);
            }
            if tokio::time::Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Heals every fault, lets the workers finish their cycles, waits one lease, counts the lock
    /// keys left and the watchdogs' registrations, and runs the checkers.
    pub async fn finish(self) -> Outcome {
        let crashed: Vec<String> = self
            .workers
            .iter()
            .filter(|worker| worker.exited_on_its_own())
            .map(|worker| format!("w{}: {}", worker.id(), worker.stderr()))
            .collect();
        assert!(
            crashed.is_empty(),
            "workers exited on their own:\n{}\n{}",
            crashed.join("\n"),
            self.replay_hint()
        );
        self.proxies.heal();
        self.record(Op::Heal, proxy_kind(Fault::Pass), "*:*");
        for n in 0..self.config.nodes {
            let server = self.cluster.node(n);
            if server.is_stopped() {
                self.resume_node(n);
            } else if !server.is_running() {
                self.restart_node(n);
            }
        }
        for (i, worker) in self.workers.iter().enumerate() {
            if worker.is_stopped() {
                self.resume_worker(i);
            }
        }
        self.note("quiesce");
        let live: Vec<&WorkerProcess> = self.workers.iter().filter(|w| w.is_alive()).collect();
        let spec = &self.config.worker;
        let cycle = spec.wait * 2 + spec.hold.1 + spec.think.1 + Duration::from_secs(20);
        for worker in &live {
            worker.send("quiesce");
        }
        for worker in &live {
            let quiet = tokio::task::block_in_place(|| worker.wait_for_line("QUIET", cycle));
            assert!(
                quiet.is_some(),
                "worker w{} did not quiesce: {}\n{}",
                worker.id(),
                worker.stderr(),
                self.replay_hint()
            );
        }
        // Whatever a dead or lost holder left behind expires within one lease.
        let settle =
            spec.fixed_lease.unwrap_or(spec.lease).max(spec.lease) + Duration::from_millis(500);
        tokio::time::sleep(settle).await;
        let keys = self.lock_keys_left();
        for worker in &live {
            worker.send("stats");
            let stats = tokio::task::block_in_place(|| {
                worker.wait_for_line("STATS", Duration::from_secs(10))
            });
            assert!(
                stats.is_some(),
                "worker w{} gave no stats\n{}",
                worker.id(),
                self.replay_hint()
            );
        }
        if spec.mode == crate::WorkerMode::Fenced {
            for lock in spec.lock_names() {
                let value = self.resource.value(&lock);
                self.history.record(
                    "test",
                    Op::Note,
                    Phase::Info,
                    &[("what", &"value"), ("lock", &lock), ("value", &value)],
                );
            }
        }
        self.history.record(
            "test",
            Op::Note,
            Phase::Info,
            &[("what", &"final"), ("keys", &keys)],
        );
        let events = read_history(self.history.path()).expect("the history reads");
        let reports = check_all(
            &events,
            &CheckConfig {
                pause_bound: self.config.pause_bound,
            },
        );
        Outcome {
            name: self.config.name.clone(),
            seed: self.config.seed,
            reports,
            events,
            history: self.history.path().to_path_buf(),
        }
    }

    /// The seed and the history's path, for a failure message.
    pub fn replay_hint(&self) -> String {
        replay_hint(&self.config.name, self.config.seed, self.history.path())
    }

    /// Lock hashes on every master now (fencing counters are not locks; a node that is down
    /// counts none).
    pub fn lock_keys_left(&self) -> usize {
        self.lock_keys_on(0..self.cluster.len())
    }

    /// Lock hashes on the masters `nodes` now.
    pub fn lock_keys_on(&self, nodes: impl IntoIterator<Item = usize>) -> usize {
        let pattern = format!("{}*", self.config.worker.key_prefix);
        let mut count = 0;
        for n in nodes {
            let server = self.cluster.node(n);
            if !server.is_running() || server.is_stopped() {
                continue;
            }
            let mut connection = server.connection();
            let keys: Vec<String> = connection.keys(&pattern).expect("KEYS");
            for key in keys {
                let kind: String = redis::cmd("TYPE")
                    .arg(&key)
                    .query(&mut connection)
                    .expect("TYPE");
                count += usize::from(kind == "hash");
            }
        }
        count
    }
}

/// Fault scenarios run one at a time (each starts six servers and several workers; two at
/// once on a small machine would measure the machine). Hold the guard for the whole scenario.
pub async fn one_scenario_at_a_time() -> tokio::sync::MutexGuard<'static, ()> {
    static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    SERIAL.lock().await
}

/// `w<i>`.
pub fn actor(i: usize) -> String {
    format!("w{i}")
}

/// `n<i>`.
fn node(n: usize) -> String {
    format!("n{n}")
}

fn proxy_kind(fault: Fault) -> &'static str {
    match fault {
        Fault::Pass => "proxy",
        Fault::Delay(_) => "proxy-delay",
        Fault::HoldReplies => "proxy-hold",
        Fault::Blackhole => "proxy-blackhole",
        Fault::Reset => "proxy-reset",
        Fault::DropReplies => "proxy-drop",
    }
}
