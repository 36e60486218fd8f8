//! A lock holder in a child process (the `holder` binary), which a test can kill, freeze and
//! resume: the faults a process holding a renewed lock meets in production.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::child::ChildProcess;

/// How long [`HolderProcess::spawn`] waits for the `ACQUIRED` line.
const SPAWN_TIMEOUT: Duration = Duration::from_secs(10);
/// The line prefix the holder prints once it holds the lock, before the fencing token.
const ACQUIRED: &str = "ACQUIRED ";

/// A child process running the `holder` binary: it takes one lock with the watchdog, prints
/// `ACQUIRED <fencing token>`, and holds the lock (renewed) until it is killed; when its lost
/// signal fires it prints `LOST <reason>` and keeps running.
///
/// Its standard output is read line by line in a background thread; [`wait_for_line`] finds a
/// line by prefix, among those already printed or those to come. The child is SIGKILLed and
/// reaped on drop; if the thread is panicking, what it printed goes to standard error.
///
/// The binary is the `redlock-tests` package's (`tests/src/bin/holder.rs`); its integration tests
/// find it at `env!("CARGO_BIN_EXE_holder")`.
///
/// ```no_run
/// use std::time::Duration;
/// use redlock_testkit::{HolderProcess, RedisCluster};
///
/// let cluster = RedisCluster::start(5);
/// let holder = HolderProcess::spawn(
///     "target/debug/holder",
///     "jobs:nightly",
///     Duration::from_secs(3),
///     &cluster.urls(),
/// );
/// println!("held with token {}", holder.token());
/// holder.stop(); // a frozen process: nothing renews
/// holder.resume();
/// let lost = holder.wait_for_line("LOST", Duration::from_secs(5));
/// holder.kill(); // a crashed one: the lease runs out
/// # let _ = lost;
/// ```
///
/// [`wait_for_line`]: HolderProcess::wait_for_line
#[derive(Debug)]
pub struct HolderProcess {
    process: ChildProcess,
}

impl HolderProcess {
    /// Starts a holder of lock `name` (watchdog timeout `timeout`) on the masters `urls` and
    /// waits until it holds the lock.
    ///
    /// # Panics
    ///
    /// If the binary cannot run, or no `ACQUIRED` line comes within 10 s; the message shows what
    /// the holder printed.
    pub fn spawn(binary: impl AsRef<Path>, name: &str, timeout: Duration, urls: &[String]) -> Self {
        let holder = Self::start(binary, name, timeout, urls);
        if holder.wait_acquired(SPAWN_TIMEOUT).is_none() {
            panic!(
                "holder of {name:?} did not acquire within {SPAWN_TIMEOUT:?}\n{}",
                holder.process.report()
            );
        }
        holder
    }

    /// Starts a holder without waiting: it may be waiting for the lock behind another holder.
    /// See [`HolderProcess::wait_acquired`].
    ///
    /// # Panics
    ///
    /// If the binary cannot run.
    pub fn start(binary: impl AsRef<Path>, name: &str, timeout: Duration, urls: &[String]) -> Self {
        let mut command = Command::new(binary.as_ref());
        command
            .arg(name)
            .arg(timeout.as_millis().to_string())
            .args(urls);
        Self {
            process: ChildProcess::spawn(&mut command, format!("holder of {name:?}")),
        }
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// The fencing token of its hold, from its `ACQUIRED` line.
    ///
    /// # Panics
    ///
    /// If it has not printed `ACQUIRED` yet (see [`HolderProcess::wait_acquired`]).
    pub fn token(&self) -> u64 {
        let line = self
            .wait_for_line(ACQUIRED, Duration::ZERO)
            .unwrap_or_else(|| {
                panic!("the holder has not acquired yet\n{}", self.process.report())
            });
        parse_token(&line)
    }

    /// Waits up to `deadline` for the `ACQUIRED` line and returns its fencing token; `None` if
    /// it did not come (or the holder exited first).
    ///
    /// # Panics
    ///
    /// If the line's token is not a number.
    pub fn wait_acquired(&self, deadline: Duration) -> Option<u64> {
        self.wait_for_line(ACQUIRED, deadline)
            .map(|line| parse_token(&line))
    }

    /// The first line starting with `prefix` the holder printed, waiting up to `deadline` for
    /// it; `None` if none came in time or the holder closed its output first. Lines are kept:
    /// asking again finds the same line.
    pub fn wait_for_line(&self, prefix: &str, deadline: Duration) -> Option<String> {
        self.process.wait_for_line(prefix, deadline)
    }

    /// Every line the holder printed so far.
    pub fn lines(&self) -> Vec<String> {
        self.process.lines()
    }

    /// What the holder wrote to standard error so far.
    pub fn stderr(&self) -> String {
        self.process.stderr()
    }

    /// Whether the process is alive and not stopped.
    pub fn is_running(&self) -> bool {
        self.process.is_running()
    }

    /// Whether the process is alive but stopped by [`HolderProcess::stop`].
    pub fn is_stopped(&self) -> bool {
        self.process.is_stopped()
    }

    /// Kills the process with SIGKILL (a crash: nothing is released) and reaps it. Does nothing
    /// if it is already dead.
    pub fn kill(&self) {
        self.process.kill();
    }

    /// Freezes the process with SIGSTOP (a long GC pause, a frozen VM) and waits until it is
    /// stopped: its watchdog renews nothing until [`HolderProcess::resume`].
    ///
    /// # Panics
    ///
    /// If the process is dead or the signal fails.
    pub fn stop(&self) {
        self.process.stop();
    }

    /// Resumes a process frozen by [`HolderProcess::stop`] with SIGCONT. Does nothing if it is
    /// not stopped.
    ///
    /// # Panics
    ///
    /// If the signal fails.
    pub fn resume(&self) {
        self.process.resume();
    }
}

fn parse_token(line: &str) -> u64 {
    line[ACQUIRED.len()..]
        .trim()
        .parse()
        .unwrap_or_else(|e| panic!("bad ACQUIRED line {line:?}: {e}"))
}
