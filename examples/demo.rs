//! The quick-start demo: one Redlock lock on five local Redis masters, while they die one by one.
//!
//! It starts five independent `redis-server` masters on free loopback ports and prints a
//! timeline of what a lock does on them:
//!
//! 1. on five healthy masters, client A takes `invoice:1042` (granted by 5 of 5), client B is
//!    refused as contended, and A's release leaves no key behind;
//! 2. two masters are killed (SIGKILL) and A takes the lock again: 3 of 5 is still a majority;
//! 3. a third master is killed and taking the lock fails fast with a typed
//!    [`Error::NoQuorum`] (2 of 5 answered, 3 needed), leaving no key on the two survivors.
//!
//! Run it from the workspace root:
//!
//! ```text
//! cargo run -p redlock-examples --example demo
//! # with the library's tracing on standard error:
//! RUST_LOG=redlock_core=debug cargo run -p redlock-examples --example demo
//! ```
//!
//! It needs `redis-server` on `PATH` (or its path in `REDIS_SERVER_BIN`); the servers keep
//! nothing on disk and are killed when the demo ends, on Ctrl-C and SIGTERM too. The demo doubles
//! as a smoke test: if a step does not behave as described, it says which one and exits with
//! status 1.

use std::error::Error as StdError;
use std::fmt::Display;
use std::io::{self, Write as _};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use redlock_core::quorum::majority;
use redlock_core::{Error, Lease, Redlock, RedlockConfig};
use redlock_testkit::{HarnessError, RedisCluster, RedisServer};
use tokio::signal::unix::{signal, SignalKind};

/// How many masters the demo runs: the usual Redlock deployment.
const NODES: usize = 5;
/// How many of them must grant a lock: a majority, `5 / 2 + 1 = 3`.
const QUORUM: usize = majority(NODES);
/// The lock everyone wants.
const LOCK: &str = "invoice:1042";
/// How long Redis keeps the lock if its holder never releases it.
const LEASE: Duration = Duration::from_secs(10);
/// How soon a refusal for want of a quorum must come back to count as failing fast.
const FAIL_FAST: Duration = Duration::from_secs(2);

/// A step that did not behave as described, with the reason.
type DemoResult<T = ()> = Result<T, Box<dyn StdError>>;

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

    // Listen before any server starts: from here on, Ctrl-C and SIGTERM (`kill`, `timeout`)
    // end the demo through the code below instead of killing it with its servers still running.
    let (mut sigint, mut sigterm) = match (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) {
        (Ok(sigint), Ok(sigterm)) => (sigint, sigterm),
        (Err(err), _) | (_, Err(err)) => {
            timeline.fail(format!(
                "demo FAILED: cannot listen for Ctrl-C and SIGTERM: {err}"
            ));
            return ExitCode::FAILURE;
        }
    };
    let outcome = tokio::select! {
        _ = sigint.recv() => Err(("Ctrl-C", 130)),
        _ = sigterm.recv() => Err(("SIGTERM", 143)),
        result = run(timeline) => Ok(result),
    };
    // Whichever branch won, the scenario future is gone now, and with it the cluster it owned:
    // dropping a `RedisCluster` kills and reaps every redis-server it started.

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
        // 128 + the signal's number, as a shell reports a process the signal killed.
        Err((signal, status)) => {
            timeline.say(format!(
                "interrupted by {signal}; any redis-server the demo started has been killed"
            ));
            ExitCode::from(status)
        }
    }
}

/// The whole scenario. The cluster lives in this future, so dropping the future (on a signal)
/// stops the servers.
async fn run(timeline: Timeline) -> DemoResult {
    let cluster = start_masters(timeline)?;
    let config = RedlockConfig::with_nodes(cluster.urls());
    let key = config.key_for(LOCK);
    // Two clients, as in two processes: each has its own connections and owner tokens.
    let demo = Demo {
        client_a: Redlock::new(config.clone()).context("could not build client A")?,
        client_b: Redlock::new(config).context("could not build client B")?,
        cluster,
        key,
        timeline,
    };

    demo.healthy_masters().await?;
    demo.two_masters_down().await?;
    demo.three_masters_down().await
}

/// Step 0: five independent masters (not replicas of each other, not Redis Cluster).
fn start_masters(timeline: Timeline) -> DemoResult<RedisCluster> {
    timeline.say(format!(
        "starting {NODES} independent redis-server masters (loopback, no persistence)"
    ));
    // Its own process group: Ctrl-C reaches only the demo, which then drops (kills) them.
    let servers = RedisServer::builder().own_process_group(true);
    let cluster = match blocking(move || RedisCluster::try_start_with(NODES, &servers)) {
        Err(err @ HarnessError::RedisServerMissing { .. }) => {
            return Err(format!("this demo runs real Redis servers: {err}").into())
        }
        other => other.context("could not start the redis-server masters")?,
    };
    timeline.say(format!(
        "started {NODES} masters on ports {}",
        list(cluster.ports())
    ));
    timeline.explain(format!(
        "A Redlock client asks every master for the lock and holds it only if a majority\n\
         says yes: {NODES} / 2 + 1 = {QUORUM} masters. Up to {} may be down and locking still works.",
        NODES - QUORUM
    ));
    Ok(cluster)
}

/// The masters, the two clients, and the lock's Redis key.
struct Demo {
    cluster: RedisCluster,
    client_a: Redlock,
    client_b: Redlock,
    key: String,
    timeline: Timeline,
}

impl Demo {
    /// Step 1: the lock on five healthy masters, a contended second client, a clean release.
    async fn healthy_masters(&self) -> DemoResult {
        self.timeline.step("1/3  five healthy masters");
        let lease = self
            .acquire_as_a(
                NODES,
                "validity = lease - time spent acquiring - clock-drift allowance: how long\n\
                 A may rely on the lock (or extend it) before someone else could take it.",
            )
            .await?;

        // A second client, same lock: one attempt, no waiting.
        match self.client_b.try_acquire(LOCK, LEASE).await {
            Err(Error::Contended { ttl, .. }) => {
                let ttl = ttl.ok_or("client B was refused, but no holder TTL was reported")?;
                ensure!(
                    !ttl.is_zero() && ttl <= LEASE,
                    "the holder's TTL should be within the {LEASE:?} lease, got {ttl:?}"
                );
                self.timeline.say(format!(
                    "client B tried `{LOCK}`: refused, contended (A holds it for {} ms more)",
                    ttl.as_millis()
                ));
                self.timeline.explain(
                    "Contention is not a failure: B can retry later, or wait until A releases\n\
                     the lock or its lease runs out.",
                );
            }
            Ok(_) => return Err("client B took the lock while client A held it".into()),
            Err(err) => return Err(err).context("client B should have been refused as contended"),
        }

        self.release_as_a(&lease).await
    }

    /// Step 2: two masters crash; three of five is still a majority.
    async fn two_masters_down(&self) -> DemoResult {
        self.timeline.step("2/3  two of five masters crash");
        self.kill(&[0, 1]);
        let lease = self
            .acquire_as_a(
                QUORUM,
                "3 of 5 is a majority. Two majorities of the same 5 masters always share a master,\n\
                 and a master grants a lock to one owner at a time: nobody else can hold it now.",
            )
            .await?;
        self.release_as_a(&lease).await
    }

    /// Step 3: a third master crashes; two of five is not a majority, and the client says so.
    async fn three_masters_down(&self) -> DemoResult {
        self.timeline.step("3/3  a third master crashes");
        self.kill(&[2]);
        let started = Instant::now();
        let outcome = self.client_a.acquire(LOCK, LEASE).await;
        let took = started.elapsed();

        let err = match outcome {
            Err(err) => err,
            Ok(lease) => {
                let _ = self.client_a.release(&lease).await;
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
            "client A tried `{LOCK}` again: Error::NoQuorum after {}",
            millis(took)
        ));
        self.timeline.explain(format!("error:  {err}"));
        if let Some(cause) = err.source() {
            self.timeline.explain(format!("first failure:  {cause}"));
        }
        let config = self.client_a.config();
        self.timeline.explain(format!(
            "A dead master refuses the connection at once, so the client fails fast (1 attempt + {}\n\
             retries, each waiting at most {} for a master).\n\
             2 of 5 is not a majority: a client reaching the other 3 (say, across a network\n\
             partition) could hold the same lock, so A must not believe it has it.",
            config.retry.retries,
            millis(config.node_timeout_for(LEASE))
        ));

        self.expect_keys(0, "after the refusal")?;
        self.timeline.explain(
            "Whatever the 2 live masters granted, the client released before it returned the error.",
        );
        Ok(())
    }

    /// Client A takes the lock (with its default retries), checks that `expected` masters granted
    /// it and hold its key, and says `why` that matters.
    async fn acquire_as_a(&self, expected: usize, why: &str) -> DemoResult<Lease> {
        let started = Instant::now();
        let lease = self.client_a.acquire(LOCK, LEASE).await.context(&format!(
            "client A could not take the lock with {} of {NODES} masters alive",
            self.running()
        ))?;
        let granted = lease.granted_by();
        ensure!(
            granted == expected,
            "expected {expected} masters to grant the lock, got {granted}"
        );
        self.timeline.say(format!(
            "client A took `{LOCK}` for {LEASE:?}: granted by {granted} of {NODES} masters in {}, \
             valid for {:.3} s",
            millis(started.elapsed()),
            lease.validity().as_secs_f64(),
        ));
        self.timeline.explain(why);
        self.expect_keys(expected, "while A holds the lock")?;
        Ok(lease)
    }

    /// Client A releases the lock (compare-and-delete: only its own keys go); none is left.
    async fn release_as_a(&self, lease: &Lease) -> DemoResult {
        self.client_a
            .release(lease)
            .await
            .context("client A could not release the lock")?;
        self.timeline.say(format!("client A released `{LOCK}`"));
        self.expect_keys(0, "after the release")
    }

    /// Kills the masters at `indices` with SIGKILL: a crash, nothing flushed, sockets reset.
    fn kill(&self, indices: &[usize]) {
        blocking(|| indices.iter().for_each(|&i| self.cluster.kill(i)));
        let ports = indices.iter().map(|&i| self.cluster.node(i).port());
        let s = plural(indices.len());
        self.timeline.say(format!(
            "killed the master{s} on port{s} {} with SIGKILL (a crash): {} of {NODES} masters left",
            list(ports),
            self.running(),
        ));
    }

    /// How many masters are alive.
    fn running(&self) -> usize {
        let nodes = self.cluster.nodes();
        nodes.iter().filter(|node| node.is_running()).count()
    }

    /// Checks how many copies of the lock's key the running masters hold, and says so.
    fn expect_keys(&self, expected: usize, when: &str) -> DemoResult {
        let found = blocking(|| self.cluster.count_keys(&self.key));
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

/// Runs a call into the harness, which is synchronous (it spawns, signals and queries
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
