//! The job as redlock sees it: the command run under the lock, in a process group of its own
//! led by its supervisor (`supervisor.rs`), which ends only when the whole job has.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::time::Duration;

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use tokio::process::{Child, Command};

use crate::exit::{self, Failure};
use crate::procfs;
use crate::supervisor::SUPERVISOR;

/// A running job.
#[derive(Debug)]
pub(crate) struct Job {
    child: Child,
    group: Pid,
}

impl Job {
    /// Starts `command` under its supervisor, in a new process group, with `env` added to its
    /// environment.
    ///
    /// # Errors
    ///
    /// [`Failure::System`] when redlock's own executable cannot be started. A command that
    /// cannot be found or run is reported by the supervisor, which exits 127 or 126.
    pub(crate) fn start(command: &[OsString], env: &[(&str, String)]) -> Result<Job, Failure> {
        let failed = |source| Failure::System {
            what: "start the job's supervisor (redlock's own executable)",
            source,
        };
        let mut supervisor = Command::new(own_executable().map_err(failed)?);
        supervisor
            .arg(SUPERVISOR)
            .arg(std::process::id().to_string())
            .arg("--")
            .args(command)
            .envs(env.iter().map(|(key, value)| (key, value)))
            .process_group(0)
            // A backstop: a supervisor whose handle is dropped unwaited is not left running.
            .kill_on_drop(true);
        let child = supervisor.spawn().map_err(failed)?;
        let pid = child
            .id()
            .and_then(|pid| i32::try_from(pid).ok())
            .ok_or_else(|| failed(std::io::Error::other("the supervisor has no process id")))?;
        Ok(Job {
            child,
            group: Pid::from_raw(pid),
        })
    }

    /// Waits for the job to end: the command and every process of its group.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the job keeps running, and a later call waits again.
    pub(crate) async fn wait(&mut self) -> std::io::Result<ExitStatus> {
        self.child.wait().await
    }

    /// Sends `signal` to the job's process group. A group that is already gone is not an
    /// error.
    pub(crate) fn signal(&self, signal: Signal) {
        if let Err(err) = killpg(self.group, signal) {
            tracing::debug!(%err, ?signal, "the job's process group is gone");
        }
    }

    /// Kills every process of the job and waits until none is alive: for when the job cannot
    /// be waited for, before the lock is let go.
    pub(crate) async fn kill_all(self) {
        self.signal(Signal::SIGKILL);
        drop(self.child);
        while procfs::live_members(self.group.as_raw(), None) > 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// redlock's own executable: `/proc/self/exe` on Linux, which still starts the running binary
/// after it was replaced on disk (an upgrade while a job waits for its lock).
fn own_executable() -> std::io::Result<PathBuf> {
    if cfg!(target_os = "linux") {
        Ok(PathBuf::from("/proc/self/exe"))
    } else {
        std::env::current_exe()
    }
}

/// The exit code that reports `status` (the job's code, or 128 + its signal).
pub(crate) fn exit_code(status: ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code).unwrap_or(exit::SOFTWARE),
        (None, Some(signal)) => exit::killed_by(signal),
        (None, None) => exit::SOFTWARE,
    }
}
