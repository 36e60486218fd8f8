//! A fault-suite worker running as a child process (the `fault_worker` binary), which the
//! nemesis can SIGKILL, SIGSTOP and SIGCONT.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::path::Path;
use std::process::{ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use crate::process::{self, kill_child, State};
use crate::WorkerSpec;

/// A running worker.
#[derive(Debug)]
pub struct WorkerProcess {
    id: u32,
    pid: u32,
    state: Mutex<State>,
    stdin: Mutex<Option<ChildStdin>>,
    lines: Mutex<Receiver<String>>,
    stderr: Arc<Mutex<String>>,
}

impl WorkerProcess {
    /// Starts `binary` (the `fault_worker` executable) with `spec`'s command line.
    ///
    /// # Panics
    ///
    /// The binary cannot be started.
    pub fn spawn(binary: &Path, spec: &WorkerSpec) -> WorkerProcess {
        let mut child = Command::new(binary)
            .args(spec.to_args())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|err| panic!("cannot start {}: {err}", binary.display()));
        let pid = child.id();
        let stdin = child.stdin.take();
        let (send, lines) = mpsc::channel();
        if let Some(stdout) = child.stdout.take() {
            thread::spawn(move || {
                for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                    if send.send(line).is_err() {
                        return;
                    }
                }
            });
        }
        let stderr = Arc::new(Mutex::new(String::new()));
        if let Some(mut err) = child.stderr.take() {
            let stderr = Arc::clone(&stderr);
            thread::spawn(move || {
                let mut text = String::new();
                let _ = err.read_to_string(&mut text);
                stderr
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push_str(&text);
            });
        }
        WorkerProcess {
            id: spec.id,
            pid,
            state: Mutex::new(State {
                child: Some(child),
                stopped: false,
            }),
            stdin: Mutex::new(stdin),
            lines: Mutex::new(lines),
            stderr,
        }
    }

    /// The worker's number (its history actor is `w<id>`).
    pub fn id(&self) -> u32 {
        self.id
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Whether it still runs (killed or exited: `false`).
    pub fn is_alive(&self) -> bool {
        let mut state = self.state();
        process::reap_if_exited(&mut state);
        state.child.is_some()
    }

    /// SIGKILLs it and reaps it.
    pub fn kill(&self) {
        kill_child(&mut self.state());
    }

    /// SIGSTOPs it.
    pub fn stop(&self) {
        let mut state = self.state();
        if state.child.is_some() && !state.stopped {
            let _ = process::send(self.pid, Signal::SIGSTOP);
            state.stopped = true;
        }
    }

    /// SIGCONTs it.
    pub fn resume(&self) {
        let mut state = self.state();
        if state.child.is_some() && state.stopped {
            let _ = process::send(self.pid, Signal::SIGCONT);
            state.stopped = false;
        }
    }

    /// Whether it is stopped.
    pub fn is_stopped(&self) -> bool {
        self.state().stopped
    }

    /// Sends one command line (`quiesce`, `stats`).
    pub fn send(&self, command: &str) {
        if let Some(stdin) = self
            .stdin
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_mut()
        {
            let _ = writeln!(stdin, "{command}").and_then(|()| stdin.flush());
        }
    }

    /// Waits up to `timeout` for an output line starting with `prefix`; returns it.
    pub fn wait_for_line(&self, prefix: &str, timeout: Duration) -> Option<String> {
        let deadline = Instant::now() + timeout;
        let lines = self.lines.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match lines.recv_timeout(left) {
                Ok(line) if line.starts_with(prefix) => return Some(line),
                Ok(_) => {}
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => return None,
            }
        }
    }

    /// What it wrote to standard error so far.
    pub fn stderr(&self) -> String {
        self.stderr
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        // Closing stdin tells a live worker to exit; the kill makes sure.
        self.stdin
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        self.kill();
    }
}
