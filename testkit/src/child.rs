//! A child process whose output the harness reads line by line, and which it can kill, freeze
//! and resume: what the `holder` and `fault_worker` processes have in common.

use std::fmt::Write as _;
use std::io::{self, BufRead as _, BufReader, Read as _, Write as _};
use std::process::{ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, TryRecvError};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};

use crate::process::{self, kill_child, reap_if_exited, to_pid, State};

/// How long [`ChildProcess::stop`] waits for the stop to take effect.
const STOP_TIMEOUT: Duration = Duration::from_secs(2);

/// A running child with piped standard streams. Its standard output is read in a background
/// thread; every line is kept. It is SIGKILLed and reaped on drop; if the thread is panicking,
/// what it printed goes to standard error.
#[derive(Debug)]
pub(crate) struct ChildProcess {
    pid: u32,
    /// Names it in reports (`holder of "jobs"`, `worker w3`).
    label: String,
    state: Mutex<State>,
    stdin: Mutex<Option<ChildStdin>>,
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

impl ChildProcess {
    /// Runs `command` with piped standard input, output and error.
    ///
    /// # Panics
    ///
    /// If it cannot run.
    pub(crate) fn spawn(command: &mut Command, label: String) -> ChildProcess {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("could not run {label} ({command:?}): {e}"));
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("stdout is piped");
        let mut stderr = child.stderr.take().expect("stderr is piped");

        let (sender, lines) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        let collected = Arc::new(Mutex::new(String::new()));
        let sink = Arc::clone(&collected);
        thread::spawn(move || {
            let mut buf = [0_u8; 4096];
            while let Ok(n @ 1..) = stderr.read(&mut buf) {
                sink.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });

        ChildProcess {
            pid: child.id(),
            label,
            state: Mutex::new(State {
                child: Some(child),
                stopped: false,
            }),
            stdin: Mutex::new(stdin),
            output: Mutex::new(Output {
                lines,
                seen: Vec::new(),
                closed: false,
            }),
            stderr: collected,
        }
    }

    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    /// Writes one line to its standard input (ignored once it is gone).
    pub(crate) fn send_line(&self, line: &str) {
        if let Some(stdin) = self
            .stdin
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_mut()
        {
            let _ = writeln!(stdin, "{line}").and_then(|()| stdin.flush());
        }
    }

    /// The first line starting with `prefix` it printed, waiting up to `deadline` for it; `None`
    /// if none came in time or it closed its output first. Asking again finds the same line.
    pub(crate) fn wait_for_line(&self, prefix: &str, deadline: Duration) -> Option<String> {
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

    /// Every line it printed so far.
    pub(crate) fn lines(&self) -> Vec<String> {
        let mut output = self.output();
        output.drain();
        output.seen.clone()
    }

    /// What it wrote to standard error so far.
    pub(crate) fn stderr(&self) -> String {
        self.stderr
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Whether it is alive and not stopped.
    pub(crate) fn is_running(&self) -> bool {
        let mut state = self.state();
        reap_if_exited(&mut state);
        state.child.is_some() && !state.stopped
    }

    /// Whether it is alive but stopped by [`stop`](Self::stop).
    pub(crate) fn is_stopped(&self) -> bool {
        let mut state = self.state();
        reap_if_exited(&mut state);
        state.child.is_some() && state.stopped
    }

    /// SIGKILLs and reaps it; nothing if it is already dead.
    pub(crate) fn kill(&self) {
        kill_child(&mut self.state());
    }

    /// SIGSTOPs it and waits until it is stopped.
    ///
    /// # Panics
    ///
    /// If it is dead, dies meanwhile, or does not stop within 2 s.
    pub(crate) fn stop(&self) {
        let mut state = self.state();
        reap_if_exited(&mut state);
        if state.stopped {
            return;
        }
        assert!(
            state.child.is_some(),
            "cannot stop {}: it is not running\n{}",
            self.label,
            self.report()
        );
        self.signal(Signal::SIGSTOP);
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
                    panic!("{} died while being stopped\n{}", self.label, self.report());
                }
                Ok(_) => return,
            }
        }
        panic!(
            "{} did not stop within {STOP_TIMEOUT:?}\n{}",
            self.label,
            self.report()
        );
    }

    /// SIGCONTs it if it is stopped.
    ///
    /// # Panics
    ///
    /// If the signal fails.
    pub(crate) fn resume(&self) {
        let mut state = self.state();
        if state.stopped && state.child.is_some() {
            self.signal(Signal::SIGCONT);
        }
        state.stopped = false;
    }

    /// Its label, what it printed, and its standard error, for panic messages.
    pub(crate) fn report(&self) -> String {
        let mut out = format!("--- {}, pid {} ---\n", self.label, self.pid);
        for line in self.lines() {
            let _ = writeln!(out, "[{}] {line}", self.pid);
        }
        for line in self.stderr().lines() {
            let _ = writeln!(out, "[{} stderr] {line}", self.pid);
        }
        out
    }

    fn signal(&self, sig: Signal) {
        process::send(self.pid, sig)
            .unwrap_or_else(|e| panic!("could not send {sig} to {}: {e}", self.label));
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn output(&self) -> MutexGuard<'_, Output> {
        self.output.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for ChildProcess {
    fn drop(&mut self) {
        // Closing standard input first lets a child that reads it exit on its own.
        self.stdin
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        kill_child(&mut self.state());
        if thread::panicking() {
            // Not `eprint!`: with stderr closed it would panic again and abort.
            let _ = io::stderr().write_all(self.report().as_bytes());
        }
    }
}
