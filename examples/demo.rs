//! The quick-start demo: one `RLock` on five local Redis masters, while they die one by one.
//!
//! It starts five independent `redis-server` masters on free loopback ports and prints a
//! timeline of what a lock does on them, through two [`LockClient`]s, A and B, as two processes
//! would have:
//!
//! 1. on five healthy masters, A takes `invoice:1042` with `acquire()` (a fencing token, a
//!    lease the watchdog renews), takes it again in the same task (`hold_count` 2), and B's
//!    `try_lock(0 s)` answers `false`; B then waits with `try_acquire(10 s)`, is woken by A's
//!    unlock (pub/sub), and gets a larger fencing token;
//! 2. two masters are killed (SIGKILL) and A takes and releases the lock again: 3 of 5 is still
//!    a majority;
//! 3. a third master is killed and taking the lock fails fast with a typed
//!    [`Error::NoQuorum`] (2 of 5 answered, 3 needed), leaving no key on the two survivors.
//!
//! Run it from the workspace root:
//!
//! ```text
//! cargo run -p redlock-examples --example demo
//! # with the library's tracing on standard error:
//! RUST_LOG=redlock_reentrant=debug,redlock_core=debug cargo run -p redlock-examples --example demo
//! ```
//!
//! It needs `redis-server` on `PATH` (or its path in `REDIS_SERVER_BIN`); the servers keep
//! nothing on disk and are killed when the demo ends, on Ctrl-C, SIGTERM and SIGHUP too. The demo doubles
//! as a smoke test: if a step does not behave as described, it says which one and exits with
//! status 1.

use std::error::Error as StdError;
use std::fmt::Display;
use std::io::{self, Write as _};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use redlock_reentrant::redis::{self, AsyncTypedCommands as _};
use redlock_reentrant::{Error, LockClient, LockGuard};

mod support;
use support::servers::Masters;
use support::Interrupts;

/// How many masters the demo runs: the usual Redlock deployment.
const NODES: usize = 5;
/// How many of them must grant a lock: a majority, `5 / 2 + 1 = 3`.
const QUORUM: usize = NODES / 2 + 1;
/// The lock everyone wants.
const LOCK: &str = "invoice:1042";
/// The lease of a lock taken without one, renewed every third of it while its holder lives
/// (30 s by default; short here, as nothing in the demo waits for one to run out).
const WATCHDOG: Duration = Duration::from_secs(6);
/// How long client B is prepared to wait for the lock.
const WAIT: Duration = Duration::from_secs(10);
/// How soon after A's unlock B must have the lock to count as woken by the release.
const HANDOVER: Duration = Duration::from_secs(1);
/// How soon a refusal for want of a quorum must come back to count as failing fast.
const FAIL_FAST: Duration = Duration::from_secs(2);

/// A step that did not behave as described, with the reason.
type DemoResult<T = ()> = Result<T, Box<dyn StdError + Send + Sync>>;

/// Fails the step with a `format!` message unless the condition holds.
macro_rules! ensure {
    ($holds:expr, $($message:tt)+) => {
        if !$holds {
            return Err(format!($($message)+).into());
        }
    };
}

#[tokio::main]
async fn main() -> ExitCode {
    init_tracing();
    let timeline = Timeline::start();

    // Listen before any server starts: from here on, Ctrl-C, SIGTERM and SIGHUP end the demo
    // through the code below instead of killing it with its servers still running.
    let mut interrupts = match Interrupts::listen() {
        Ok(interrupts) => interrupts,
        Err(err) => {
            timeline.fail(format!(
                "demo FAILED: cannot listen for Ctrl-C, SIGTERM and SIGHUP: {err}"
            ));
            return ExitCode::FAILURE;
        }
    };
    // The scenario runs in a task, as service code does: a task is a lock owner of its own.
    let mut scenario = tokio::spawn(run(timeline));
    let outcome = tokio::select! {
        interrupt = interrupts.recv() => Err(interrupt),
        joined = &mut scenario => Ok(joined.unwrap_or_else(|err| Err(err.into()))),
    };
    if outcome.is_err() {
        // Aborting the task drops the scenario and with it the masters it owns: dropping them
        // kills and reaps every redis-server the demo started.
        scenario.abort();
        let _ = scenario.await;
    }

    match outcome {
        Ok(Ok(())) => {
            timeline.say("done: every step behaved as described; the 5 servers were stopped");
            ExitCode::SUCCESS
        }
        Ok(Err(err)) => {
            timeline.fail(format!("demo FAILED: {err}"));
            timeline.fail("any redis-server the demo started has been killed");
            ExitCode::FAILURE
        }
        Err((signal, status)) => {
            timeline.say(format!(
                "interrupted by {signal}; any redis-server the demo started has been killed"
            ));
            ExitCode::from(status)
        }
    }
}

/// The whole scenario. The masters live in this future, so dropping the future (on a signal)
/// stops the servers. Its task is client A's owner: its holds are this task's.
async fn run(timeline: Timeline) -> DemoResult {
    let masters = start_masters(timeline)?;
    // Two clients, as in two processes: each has its own id (half of every owner's identity),
    // connections, watchdog and pub/sub listeners.
    let client = || {
        LockClient::builder()
            .nodes(masters.urls())
            .watchdog_timeout(WATCHDOG)
            .build()
    };
    let a = client().await.context("could not build client A")?;
    let b = client().await.context("could not build client B")?;
    let key = a.redlock().config().key_for(LOCK);
    let mut demo = Demo {
        masters,
        a,
        b,
        key,
        timeline,
    };

    demo.healthy_masters().await?;
    demo.two_masters_down().await?;
    demo.three_masters_down().await?;
    demo.a.shutdown().await;
    demo.b.shutdown().await;
    Ok(())
}

/// Step 0: five independent masters (not replicas of each other, not Redis Cluster).
fn start_masters(timeline: Timeline) -> DemoResult<Masters> {
    timeline.say(format!(
        "starting {NODES} independent redis-server masters (loopback, no persistence)"
    ));
    let masters = blocking(|| Masters::start(NODES))
        .map_err(|err| format!("this demo runs real Redis servers: {err}"))?;
    timeline.say(format!(
        "started {NODES} masters on ports {}",
        list(masters.ports())
    ));
    timeline.explain(format!(
        "Every lock operation asks all masters and counts only when a majority agrees:\n\
         {NODES} / 2 + 1 = {QUORUM} masters. Up to {} may be down and locking still works.",
        NODES - QUORUM
    ));
    Ok(masters)
}

/// The masters, the two clients, and the lock's Redis key.
struct Demo {
    masters: Masters,
    a: LockClient,
    b: LockClient,
    key: String,
    timeline: Timeline,
}

impl Demo {
    /// Step 1: reentrancy, contention, and a waiter woken by the release.
    async fn healthy_masters(&mut self) -> DemoResult {
        self.timeline.step("1/3  five healthy masters");
        let (lock_a, lock_b) = (self.a.get_lock(LOCK), self.b.get_lock(LOCK));
        let why = format!(
            "No lease was given: the watchdog renews A's {} s lease every {} s for as long as A\n\
             holds the lock; if A's process dies, the lock frees within {} s. The fencing token\n\
             (from the masters' clocks, in microseconds) grows with every new holder.",
            WATCHDOG.as_secs(),
            WATCHDOG.as_secs() / 3,
            WATCHDOG.as_secs()
        );
        let guard = self.acquire_as_a(NODES, &why).await?;
        let token = guard.fencing_token();

        // The same task again: reentrant, it counts up instead of waiting for itself.
        let nested = lock_a.acquire().await.context("A's nested acquire")?;
        let count = lock_a.hold_count().await.context("hold_count")?;
        ensure!(count == 2, "expected hold_count 2, got {count}");
        let nested_token = nested.fencing_token();
        ensure!(
            nested_token == token,
            "the nested hold has token {nested_token}, the outer one {token}"
        );
        self.timeline.say(format!(
            "client A, same task, acquire() again: hold_count = {count}, same fencing token"
        ));
        nested.unlock().await.context("A's nested unlock")?;
        let count = lock_a.hold_count().await.context("hold_count")?;
        ensure!(count == 1, "expected hold_count 1, got {count}");
        self.timeline.say(format!(
            "client A, inner unlock(): hold_count = {count}, still held"
        ));

        // Another client is another owner: one attempt, no waiting.
        let taken = lock_b
            .try_lock(Duration::ZERO, None)
            .await
            .context("B's try_lock")?;
        ensure!(!taken, "client B took the lock while client A held it");
        self.timeline
            .say(format!("client B: try_lock(0 s) on `{LOCK}` -> false"));
        self.timeline
            .explain("Contention is not an error: B can move on, or wait for A's release.");

        // B waits; A's unlock publishes the release and wakes it.
        let waiter = tokio::spawn(async move {
            let outcome = lock_b.try_acquire(WAIT, None).await;
            (outcome, Instant::now())
        });
        let listening = Instant::now();
        while self.b.watched_channels() == 0 {
            ensure!(
                listening.elapsed() < WAIT,
                "client B never started listening for the release"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        self.timeline.say(format!(
            "client B: try_acquire({} s) is waiting, subscribed to the lock's release channel",
            WAIT.as_secs()
        ));
        let unlocked = Instant::now();
        guard.unlock().await.context("A's unlock")?;
        self.timeline.say(format!(
            "client A: unlock(), its last hold: `{LOCK}` is free"
        ));
        let (outcome, taken_at) = waiter.await?;
        let guard_b = outcome
            .context("B's try_acquire")?
            .ok_or_else(|| format!("client B did not get the lock within {WAIT:?}"))?;
        let handover = taken_at.saturating_duration_since(unlocked);
        ensure!(
            handover < HANDOVER,
            "client B got the lock {} after A's unlock, not within {HANDOVER:?}",
            millis(handover)
        );
        let token_b = guard_b.fencing_token();
        ensure!(
            token_b > token,
            "B's fencing token {token_b} is not larger than A's {token}"
        );
        self.timeline.say(format!(
            "client B woke and took `{LOCK}` {} after A's unlock: fencing token {token_b}",
            millis(handover)
        ));
        self.timeline.explain(
            "The release was published (pub/sub) and woke B at once: no polling, no waiting for\n\
             a lease. B's token is larger than A's: a resource that checks fencing tokens refuses\n\
             a late write from A.",
        );
        guard_b.unlock().await.context("B's unlock")?;
        self.timeline.say("client B: unlock()");
        self.expect_keys(0, "after both unlocked").await
    }

    /// Step 2: two masters crash; three of five is still a majority.
    async fn two_masters_down(&mut self) -> DemoResult {
        self.timeline.step("2/3  two of five masters crash");
        self.kill(&[0, 1]);
        let why =
            "3 of 5 is a majority. Two majorities of the same 5 masters always share a master,\n\
                   and a master grants a lock to one owner at a time: nobody else can hold it now.";
        let guard = self.acquire_as_a(QUORUM, why).await?;
        let taken = self
            .b
            .get_lock(LOCK)
            .try_lock(Duration::ZERO, None)
            .await
            .context("B's try_lock")?;
        ensure!(!taken, "client B took the lock while client A held it");
        self.timeline.say("client B: try_lock(0 s) -> false");
        guard.unlock().await.context("A's unlock")?;
        self.timeline.say("client A: unlock()");
        self.expect_keys(0, "after the unlock").await
    }

    /// Step 3: a third master crashes; two of five is not a majority, and the client says so.
    async fn three_masters_down(&mut self) -> DemoResult {
        self.timeline.step("3/3  a third master crashes");
        self.kill(&[2]);
        let started = Instant::now();
        let outcome = self.a.get_lock(LOCK).acquire().await;
        let took = started.elapsed();

        let err = match outcome {
            Err(err) => err,
            Ok(guard) => {
                let _ = guard.unlock().await;
                return Err("client A took the lock with only 2 of 5 masters alive".into());
            }
        };
        let Error::NoQuorum {
            answered,
            nodes,
            needed,
            ..
        } = err
        else {
            return Err(err).context("expected a NoQuorum error with 2 of 5 masters alive");
        };
        let expected = (QUORUM - 1, NODES, QUORUM);
        ensure!(
            (answered, nodes, needed) == expected,
            "expected (answered, nodes, needed) = {expected:?}, got ({answered}, {nodes}, {needed})"
        );
        ensure!(
            took < FAIL_FAST,
            "the NoQuorum error took {}, more than {FAIL_FAST:?}",
            millis(took)
        );

        self.timeline.say(format!(
            "client A: acquire() -> Error::NoQuorum after {}",
            millis(took)
        ));
        self.timeline.explain(format!("error:  {err}"));
        if let Some(cause) = err.source() {
            self.timeline.explain(format!("first failure:  {cause}"));
        }
        let config = self.a.redlock().config();
        self.timeline.explain(format!(
            "A dead master refuses the connection at once, so the client fails fast (1 attempt + {}\n\
             retries, each waiting at most {} for a master).\n\
             2 of 5 is not a majority: a client reaching the other 3 (say, across a network\n\
             partition) could hold the same lock, so A must not believe it has it.",
            config.retry.retries,
            millis(config.node_timeout_for(WATCHDOG))
        ));

        self.expect_keys(0, "after the refusal").await?;
        self.timeline.explain(
            "Whatever the 2 live masters granted, the client took back before it returned the error.",
        );
        Ok(())
    }

    /// Client A takes the lock with `acquire()`, says `why` that matters, and checks that
    /// `expected` masters hold its key.
    async fn acquire_as_a(&self, expected: usize, why: &str) -> DemoResult<LockGuard> {
        let started = Instant::now();
        let alive = self.masters.urls().len();
        let guard = self.a.get_lock(LOCK).acquire().await.context(&format!(
            "client A could not take the lock with {alive} of {NODES} masters alive"
        ))?;
        self.timeline.say(format!(
            "client A: acquire() took `{LOCK}` in {}: fencing token {}",
            millis(started.elapsed()),
            guard.fencing_token()
        ));
        self.timeline.explain(why);
        self.expect_keys(expected, "while A holds it").await?;
        Ok(guard)
    }

    /// Kills the masters at `indices` with SIGKILL: a crash, nothing flushed, sockets reset.
    fn kill(&mut self, indices: &[usize]) {
        blocking(|| indices.iter().for_each(|&i| self.masters.kill(i)));
        let ports = indices.iter().map(|&i| self.masters.ports()[i]);
        let s = plural(indices.len());
        self.timeline.say(format!(
            "killed the master{s} on port{s} {} with SIGKILL (a crash): {} of {NODES} masters left",
            list(ports),
            self.masters.urls().len(),
        ));
    }

    /// Checks how many of the running masters hold the lock's key, and says so.
    async fn expect_keys(&self, expected: usize, when: &str) -> DemoResult {
        let mut found = 0;
        for url in self.masters.urls() {
            // A plain connection, as an operator's redis-cli would have.
            let mut db = redis::Client::open(url.as_str())?
                .get_multiplexed_async_connection()
                .await?;
            found += usize::from(db.exists(&self.key).await?);
        }
        let key = &self.key;
        ensure!(
            found == expected,
            "expected {expected} key(s) `{key}` {when}, found {found}"
        );
        self.timeline.say(format!(
            "the key `{key}` is on {found} master{} {when}",
            plural(found)
        ));
        Ok(())
    }
}

/// Prints lines prefixed with the time since the demo started.
///
/// Write errors are ignored: with stdout closed (`demo | head`) the demo still runs to its end
/// and stops its servers.
#[derive(Debug, Clone, Copy)]
struct Timeline {
    started: Instant,
}

impl Timeline {
    /// Width of the `[  0.012s] ` prefix, for the explanation lines under an event.
    const PREFIX: usize = 11;

    fn start() -> Self {
        Self {
            started: Instant::now(),
        }
    }

    /// An event.
    fn say(&self, line: impl Display) {
        let _ = writeln!(io::stdout(), "{} {line}", self.stamp());
    }

    /// The start of a step.
    fn step(&self, title: impl Display) {
        self.say(format!("---- {title} ----"));
    }

    /// Why the event above happened, each line indented under it.
    fn explain(&self, text: impl Display) {
        for line in text.to_string().lines() {
            let _ = writeln!(io::stdout(), "{:width$}  {line}", "", width = Self::PREFIX);
        }
    }

    /// A failure, on standard error.
    fn fail(&self, line: impl Display) {
        let _ = writeln!(io::stderr(), "{} {line}", self.stamp());
    }

    /// `[  0.012s]`: the time since the demo started.
    fn stamp(&self) -> String {
        format!("[{:>7.3}s]", self.started.elapsed().as_secs_f64())
    }
}

/// Logs to standard error only when `RUST_LOG` is set, so the timeline stays tidy by default.
fn init_tracing() {
    if std::env::var_os("RUST_LOG").is_none() {
        return;
    }
    match tracing_subscriber::EnvFilter::try_from_default_env() {
        Ok(filter) => tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(io::stderr)
            // Its own report of a failed write would panic on a closed stderr.
            .log_internal_errors(false)
            .init(),
        Err(err) => {
            let _ = writeln!(io::stderr(), "ignoring RUST_LOG: {err}");
        }
    }
}

/// Runs a call into the launcher, which is synchronous (it spawns, signals and waits for
/// processes): the calls are short, but tokio is told, so no worker thread is held up.
fn blocking<R>(call: impl FnOnce() -> R) -> R {
    tokio::task::block_in_place(call)
}

/// `.context("what went wrong")` turns an unexpected error into a step failure that shows the
/// error's whole chain of causes on one line.
trait Context<T> {
    fn context(self, what: &str) -> DemoResult<T>;
}

impl<T, E: StdError> Context<T> for Result<T, E> {
    fn context(self, what: &str) -> DemoResult<T> {
        self.map_err(|err| {
            let mut message = format!("{what}: {err}");
            let mut source = err.source();
            while let Some(cause) = source {
                message.push_str(&format!(": {cause}"));
                source = cause.source();
            }
            message.into()
        })
    }
}

fn list<T: Display>(items: impl IntoIterator<Item = T>) -> String {
    let items: Vec<String> = items.into_iter().map(|item| item.to_string()).collect();
    items.join(", ")
}

/// The plural ending for `count` things.
fn plural(count: usize) -> &'static str {
    if count == 1 {
        ""
    } else {
        "s"
    }
}

fn millis(duration: Duration) -> String {
    format!("{:.1} ms", duration.as_secs_f64() * 1e3)
}
