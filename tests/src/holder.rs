//! A lock holder in a child process (the `holder` binary), which a test can kill, freeze and
//! resume: the faults a process holding a renewed lock meets in production.

use std::fmt::Write as _;
use std::io::{self, BufRead as _, BufReader, Read as _, Write as _};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, TryRecvError};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};

use crate::process::{self, kill_child, reap_if_exited, to_pid, State};

/// How long [`HolderProcess::spawn`] waits for the `ACQUIRED` line.
const SPAWN_TIMEOUT: Duration = Duration::from_secs(10);
/// How long [`HolderProcess::stop`] waits for the stop to take effect.
const STOP_TIMEOUT: Duration = Duration::from_secs(2);
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
/// Integration tests of this package find the binary at `env!("CARGO_BIN_EXE_holder")`.
///
/// ```no_run
/// use std::time::Duration;
/// use redlock_tests::{HolderProcess, RedisCluster};
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
    pid: u32,
    name: String,
    state: Mutex<State>,
    output: Mutex<Output>,
    stderr: Arc<Mutex<String>>,
}

#[derive(Debug)]
struct Output {
    /// Lines from the reader thread; disconnected once the child's stdout closes.
    lines: Receiver<String>,
    /// Every line received so far, in order.
    seen: Vec<String>,
    /// Whether the reader thread is done (the child closed its stdout).
    closed: bool,
}

impl Output {
    /// Moves every line already received into `seen`.
    fn drain(&mut self) {
        loop {
            match self.lines.try_recv() {
                Ok(line) => self.seen.push(line),
                Err(TryRecvError::Empty) => return,
                Err(TryRecvError::Disconnected) => {
                    self.closed = true;
                    return;
                }
            }
        }
    }

    fn find(&self, prefix: &str) -> Option<String> {
        self.seen
            .iter()
            .find(|line| line.starts_with(prefix))
            .cloned()
    }
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
                holder.report()
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
        let binary = binary.as_ref();
        let mut child = Command::new(binary)
            .arg(name)
            .arg(timeout.as_millis().to_string())
            .args(urls)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("could not run the holder `{}`: {e}", binary.display()));
        let stdout = child.stdout.take().expect("stdout is piped");
        let stderr = child.stderr.take().expect("stderr is piped");

        let (sender, lines) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        let collected = Arc::new(Mutex::new(String::new()));
        let sink = Arc::clone(&collected);
        thread::spawn(move || {
            let mut stderr = stderr;
            let mut buf = [0_u8; 4096];
            while let Ok(n @ 1..) = stderr.read(&mut buf) {
                sink.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });

        Self {
            pid: child.id(),
            name: name.to_owned(),
            state: Mutex::new(State {
                child: Some(child),
                stopped: false,
            }),
            output: Mutex::new(Output {
                lines,
                seen: Vec::new(),
                closed: false,
            }),
            stderr: collected,
        }
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The fencing token of its hold, from its `ACQUIRED` line.
    ///
    /// # Panics
    ///
    /// If it has not printed `ACQUIRED` yet (see [`HolderProcess::wait_acquired`]).
    pub fn token(&self) -> u64 {
        let line = self
            .output()
            .find(ACQUIRED)
            .unwrap_or_else(|| panic!("the holder has not acquired yet\n{}", self.report()));
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
        let until = Instant::now() + deadline;
        let mut output = self.output();
        output.drain();
        loop {
            if let Some(line) = output.find(prefix) {
                return Some(line);
            }
            if output.closed {
                return None;
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            match output.lines.recv_timeout(left) {
                Ok(line) => output.seen.push(line),
                Err(RecvTimeoutError::Timeout) => return None,
                Err(RecvTimeoutError::Disconnected) => output.closed = true,
            }
        }
    }

    /// Every line the holder printed so far.
    pub fn lines(&self) -> Vec<String> {
        let mut output = self.output();
        output.drain();
        output.seen.clone()
    }

    /// What the holder wrote to standard error so far.
    pub fn stderr(&self) -> String {
        self.stderr
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Whether the process is alive and not stopped.
    pub fn is_running(&self) -> bool {
        let mut state = self.state();
        reap_if_exited(&mut state);
        state.child.is_some() && !state.stopped
    }

    /// Whether the process is alive but stopped by [`HolderProcess::stop`].
    pub fn is_stopped(&self) -> bool {
        let mut state = self.state();
        reap_if_exited(&mut state);
        state.child.is_some() && state.stopped
    }

    /// Kills the process with SIGKILL (a crash: nothing is released) and reaps it. Does nothing
    /// if it is already dead.
    pub fn kill(&self) {
        kill_child(&mut self.state());
    }

    /// Freezes the process with SIGSTOP (a long GC pause, a frozen VM) and waits until it is
    /// stopped: its watchdog renews nothing until [`HolderProcess::resume`].
    ///
    /// # Panics
    ///
    /// If the process is dead or the signal fails.
    pub fn stop(&self) {
        let mut state = self.state();
        reap_if_exited(&mut state);
        if state.stopped {
            return;
        }
        assert!(
            state.child.is_some(),
            "cannot stop the holder: it is not running\n{}",
            self.report()
        );
        send(self.pid, Signal::SIGSTOP);
        state.stopped = true;
        let until = Instant::now() + STOP_TIMEOUT;
        while Instant::now() < until {
            match waitpid(
                to_pid(self.pid),
                Some(WaitPidFlag::WUNTRACED | WaitPidFlag::WNOHANG),
            ) {
                Ok(WaitStatus::StillAlive) => thread::sleep(Duration::from_millis(1)),
                Ok(WaitStatus::Stopped(..)) => return,
                Ok(WaitStatus::Exited(..) | WaitStatus::Signaled(..)) | Err(_) => {
                    // Reaped by `waitpid`: forget the child.
                    state.child = None;
                    state.stopped = false;
                    panic!("the holder died while being stopped\n{}", self.report());
                }
                Ok(_) => return,
            }
        }
        panic!(
            "the holder did not stop within {STOP_TIMEOUT:?}\n{}",
            self.report()
        );
    }

    /// Resumes a process frozen by [`HolderProcess::stop`] with SIGCONT. Does nothing if it is
    /// not stopped.
    ///
    /// # Panics
    ///
    /// If the signal fails.
    pub fn resume(&self) {
        let mut state = self.state();
        if state.stopped && state.child.is_some() {
            send(self.pid, Signal::SIGCONT);
        }
        state.stopped = false;
    }

    /// The lock name, what it printed, and its standard error, for panic messages.
    fn report(&self) -> String {
        let mut out = format!("--- holder of {:?}, pid {} ---\n", self.name, self.pid);
        for line in self.lines() {
            let _ = writeln!(out, "[holder:{}] {line}", self.pid);
        }
        for line in self.stderr().lines() {
            let _ = writeln!(out, "[holder:{} stderr] {line}", self.pid);
        }
        out
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn output(&self) -> MutexGuard<'_, Output> {
        self.output.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for HolderProcess {
    fn drop(&mut self) {
        kill_child(&mut self.state());
        if thread::panicking() {
            // Not `eprint!`: with stderr closed it would panic again and abort.
            let _ = io::stderr().write_all(self.report().as_bytes());
        }
    }
}

fn parse_token(line: &str) -> u64 {
    line[ACQUIRED.len()..]
        .trim()
        .parse()
        .unwrap_or_else(|e| panic!("bad ACQUIRED line {line:?}: {e}"))
}

fn send(pid: u32, sig: Signal) {
    process::send(pid, sig)
        .unwrap_or_else(|e| panic!("could not send {sig} to the holder, pid {pid}: {e}"));
}
