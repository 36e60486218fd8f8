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
use crate::supervisor::{self, SUPERVISOR};

/// A running job.
#[derive(Debug)]
pub(crate) struct Job {
    child: Child,
    group: Pid,
    /// Every process of the group has ended and been collected.
    done: bool,
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
            .process_group(0);
        let child = supervisor.spawn().map_err(failed)?;
        let pid = child
            .id()
            .and_then(|pid| i32::try_from(pid).ok())
            .ok_or_else(|| failed(std::io::Error::other("the supervisor has no process id")))?;
        Ok(Job {
            child,
            group: Pid::from_raw(pid),
            done: false,
        })
    }

    /// Waits for the job to end: the command and every process of its group. If the
    /// supervisor died before them (killed), the rest of the group is killed, and collected,
    /// first: when this returns, no process of the job runs.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the job keeps running, and a later call waits again.
    pub(crate) async fn wait(&mut self) -> std::io::Result<ExitStatus> {
        use std::os::unix::process::ExitStatusExt;
        let status = self.child.wait().await?;
        if status.signal().is_some() {
            self.signal(Signal::SIGKILL);
        }
        self.collect().await;
        Ok(status)
    }

    /// Kills every process of the job and waits until none is left: for when the job cannot
    /// be waited for, before the lock is let go.
    pub(crate) async fn kill_all(&mut self) {
        self.signal(Signal::SIGKILL);
        let _ = self.child.wait().await;
        self.collect().await;
    }

    /// Waits until no process of the group is left. Orphans of a dead supervisor are handed to
    /// redlock (a subreaper, see `run`), so they are its children and `waitid` sees them.
    async fn collect(&mut self) {
        while supervisor::collect_group(self.group, |_, _| {}) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        self.done = true;
    }

    /// Sends `signal` to the job's process group. A group that is already gone is not an
    /// error.
    pub(crate) fn signal(&self, signal: Signal) {
        if let Err(err) = killpg(self.group, signal) {
            tracing::debug!(%err, ?signal, "the job's process group is gone");
        }
    }
}

impl Drop for Job {
    /// A job dropped before it ended (redlock unwinding from a panic, say) is killed whole:
    /// it must not outlive the lock's holder.
    fn drop(&mut self) {
        if !self.done {
            self.signal(Signal::SIGKILL);
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
