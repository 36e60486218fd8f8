//! A fault-suite worker running as a child process (the `fault_worker` binary of the
//! `redlock-tests` package), which the nemesis can SIGKILL, SIGSTOP and SIGCONT.

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::child::ChildProcess;
use crate::WorkerSpec;

/// A running worker. It is SIGKILLed on drop; closing its standard input (also on drop) tells
/// it to exit, so an aborted suite leaves none behind.
#[derive(Debug)]
pub struct WorkerProcess {
    id: u32,
    process: ChildProcess,
    /// Whether [`kill`](Self::kill) was called.
    killed: AtomicBool,
}

impl WorkerProcess {
    /// Starts `binary` (the `fault_worker` executable) with `spec`'s command line.
    ///
    /// # Panics
    ///
    /// The binary cannot be started.
    pub fn spawn(binary: &Path, spec: &WorkerSpec) -> WorkerProcess {
        let mut command = Command::new(binary);
        command.args(spec.to_args());
        WorkerProcess {
            id: spec.id,
            process: ChildProcess::spawn(&mut command, format!("worker w{}", spec.id)),
            killed: AtomicBool::new(false),
        }
    }

    /// The worker's number (its history actor is `w<id>`).
    pub fn id(&self) -> u32 {
        self.id
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// Whether it still runs, stopped or not (killed or exited: `false`).
    pub fn is_alive(&self) -> bool {
        self.process.is_running() || self.process.is_stopped()
    }

    /// Whether it is stopped.
    pub fn is_stopped(&self) -> bool {
        self.process.is_stopped()
    }

    /// SIGKILLs it and reaps it.
    pub fn kill(&self) {
        self.killed.store(true, Ordering::Relaxed);
        self.process.kill();
    }

    /// Whether it is gone without being killed (it crashed or gave up: see
    /// [`stderr`](Self::stderr)).
    pub fn exited_on_its_own(&self) -> bool {
        !self.is_alive() && !self.killed.load(Ordering::Relaxed)
    }

    /// SIGSTOPs it and waits until it is stopped.
    ///
    /// # Panics
    ///
    /// If it is dead or does not stop.
    pub fn stop(&self) {
        self.process.stop();
    }

    /// SIGCONTs it.
    pub fn resume(&self) {
        self.process.resume();
    }

    /// Sends one command line (`quiesce`, `stats`).
    pub fn send(&self, command: &str) {
        self.process.send_line(command);
    }

    /// Waits up to `timeout` for an output line starting with `prefix`; returns it.
    pub fn wait_for_line(&self, prefix: &str, timeout: Duration) -> Option<String> {
        self.process.wait_for_line(prefix, timeout)
    }

    /// What it wrote to standard error so far.
    pub fn stderr(&self) -> String {
        self.process.stderr()
    }
}
