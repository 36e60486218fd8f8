//! The job as redlock sees it: the command run under the lock, through its supervisor
//! (`supervisor.rs`), which ends only when the whole job has.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;
use tokio::process::{Child, Command};

use crate::exit::{self, Failure};
use crate::procfs;
use crate::report::say;
use crate::supervisor::{CONTINUE_JOB, STOP_JOB, SUPERVISOR};

/// How often redlock looks again for what a dead supervisor left behind.
const ORPHAN_CHECK: Duration = Duration::from_millis(20);
/// How long before redlock says that what the supervisor left does not end.
const ORPHAN_PATIENCE: Duration = Duration::from_secs(10);

/// A running job.
///
/// Dropping it leaves the job to its supervisor, which kills it when redlock exits.
#[derive(Debug)]
pub(crate) struct Job {
    supervisor: Child,
}

impl Job {
    /// Starts `command` under its supervisor, with `env` added to its environment.
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
            // Out of the terminal's foreground group: its signals reach redlock alone, which
            // passes them on once.
            .process_group(0);
        let supervisor = supervisor.spawn().map_err(failed)?;
        Ok(Job { supervisor })
    }

    /// Waits for the job to end: the command and every process of its group. If the
    /// supervisor died first (killed), what it left is killed and collected before this
    /// returns: when it does, no process of the job runs.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the job keeps running, and a later call waits again.
    pub(crate) async fn wait(&mut self) -> std::io::Result<ExitStatus> {
        use std::os::unix::process::ExitStatusExt;
        let status = self.supervisor.wait().await?;
        if status.signal().is_some() {
            kill_orphans_until_none_is_left().await;
        }
        Ok(status)
    }

    /// Passes `signal` on to the job (the supervisor follows it with SIGCONT).
    pub(crate) fn pass_on(&self, signal: Signal) {
        self.tell(signal);
    }

    /// Stops the job.
    pub(crate) fn stop(&self) {
        self.tell(STOP_JOB);
    }

    /// Continues the job.
    pub(crate) fn resume(&self) {
        self.tell(CONTINUE_JOB);
    }

    /// Kills every process of the job at once: the supervisor, then what it leaves (see
    /// [`Job::wait`]).
    pub(crate) fn kill(&self) {
        self.tell(Signal::SIGKILL);
    }

    /// Kills every process of the job and waits until none is left: for when the job cannot
    /// be waited for, before the lock is let go.
    pub(crate) async fn kill_all(&mut self) {
        self.kill();
        kill_orphans_until_none_is_left().await;
    }

    fn tell(&self, signal: Signal) {
        // No id once the supervisor was collected: its pid may be another process's by now.
        let Some(pid) = self.supervisor.id().and_then(|pid| i32::try_from(pid).ok()) else {
            return;
        };
        if let Err(err) = kill(Pid::from_raw(pid), signal) {
            tracing::debug!(%err, ?signal, "the job's supervisor is gone");
        }
    }
}

/// Kills, and collects, every descendant of redlock, until none is left. Once the supervisor
/// is dead and collected, redlock's descendants are what it left: the command and its
/// descendants, handed to redlock as their subreaper. Each is killed by its pid (a snapshot
/// misses what is forked after it: the next round gets those), never by a group that may hold
/// other processes.
async fn kill_orphans_until_none_is_left() {
    let started = std::time::Instant::now();
    let mut warned = Duration::ZERO;
    loop {
        for descendant in procfs::descendants() {
            let _ = kill(descendant.pid, Signal::SIGKILL);
        }
        loop {
            match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::StillAlive) => break,
                Ok(_) => {}
                // ECHILD: nothing is left.
                Err(_) => return,
            }
        }
        if started.elapsed() >= warned + ORPHAN_PATIENCE {
            warned = started.elapsed();
            say(format_args!(
                "the job's supervisor died and a process of the job does not end (one that \
                 changed its user, or stuck in the kernel?): the lock stays held meanwhile"
            ));
        }
        tokio::time::sleep(ORPHAN_CHECK).await;
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
