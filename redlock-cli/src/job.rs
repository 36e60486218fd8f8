//! The job: the command run under the lock, in a process group of its own, dying with redlock.
//!
//! The command is started through redlock itself (`redlock __exec PARENT -- COMMAND...`, the
//! trampoline): that process asks the kernel for SIGKILL when its parent dies (Linux
//! `PR_SET_PDEATHSIG`, kept across `exec`), checks that its parent is still redlock, then
//! `exec`s the command. So a redlock killed with SIGKILL takes its job with it at once, long
//! before the lock's lease runs out and someone else's job can start. Doing this in the
//! trampoline rather than between `fork` and `exec` keeps the crate free of `unsafe`.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::process::ExitStatus;

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use tokio::process::{Child, Command};

use crate::exit::{self, Failure};
use crate::report::say;

/// The trampoline's argument: `redlock __exec PARENT_PID -- COMMAND [ARGS...]`.
pub(crate) const TRAMPOLINE: &str = "__exec";

/// A running job.
#[derive(Debug)]
pub(crate) struct Job {
    child: Child,
    group: Pid,
}

impl Job {
    /// Starts `command` in a new process group with `env` added to its environment.
    ///
    /// # Errors
    ///
    /// [`Failure::Job`] when redlock's own executable cannot be started. A command that
    /// cannot be found or run is reported by the trampoline, which exits 127 or 126.
    pub(crate) fn start(command: &[OsString], env: &[(&str, String)]) -> Result<Job, Failure> {
        let program = command.first().cloned().unwrap_or_default();
        let failed = |source| Failure::Job {
            program: program.clone(),
            source,
        };
        let redlock = std::env::current_exe().map_err(failed)?;
        let mut trampoline = Command::new(redlock);
        trampoline
            .arg(TRAMPOLINE)
            .arg(std::process::id().to_string())
            .arg("--")
            .args(command)
            .envs(env.iter().map(|(key, value)| (key, value)))
            .process_group(0)
            // A backstop: a job whose handle is dropped unwaited is not left running unlocked.
            .kill_on_drop(true);
        let child = trampoline.spawn().map_err(failed)?;
        let pid = child
            .id()
            .and_then(|pid| i32::try_from(pid).ok())
            .ok_or_else(|| failed(std::io::Error::other("the job has no process id")))?;
        Ok(Job {
            child,
            group: Pid::from_raw(pid),
        })
    }

    /// Waits for the job to exit.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the job keeps running, and a later call waits again.
    pub(crate) async fn wait(&mut self) -> std::io::Result<ExitStatus> {
        self.child.wait().await
    }

    /// Sends `signal` to the job's process group (the job and what it started). A group that
    /// is already gone is not an error.
    pub(crate) fn signal(&self, signal: Signal) {
        if let Err(err) = killpg(self.group, signal) {
            tracing::debug!(%err, ?signal, "the job's process group is gone");
        }
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

/// The trampoline (`redlock __exec PARENT -- COMMAND...`): dies with its parent, then becomes
/// the command. Returns only when it could not: the exit code to end with.
pub(crate) fn trampoline(args: &[OsString]) -> u8 {
    let (parent, command) = match args {
        [parent, separator, command @ ..] if separator == "--" && !command.is_empty() => {
            (parent, command)
        }
        _ => {
            say(format_args!(
                "{TRAMPOLINE} is redlock's own; use `redlock run`"
            ));
            return exit::USAGE;
        }
    };
    #[cfg(target_os = "linux")]
    if let Err(err) = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL) {
        say(format_args!("cannot tie the job to redlock's life: {err}"));
        return exit::SOFTWARE;
    }
    // The parent may have died before the request above: then nobody holds the lock for us.
    let expected = parent.to_str().and_then(|pid| pid.parse::<i32>().ok());
    if expected != Some(nix::unistd::getppid().as_raw()) {
        return exit::LOST;
    }
    // std's `exec` does what `spawn` does before its `execvp`: SIGPIPE back to its default
    // (Rust ignores it, and an ignored signal stays ignored across exec), the PATH lookup.
    let program = &command[0];
    let err = std::process::Command::new(program)
        .args(&command[1..])
        .exec();
    say(format_args!(
        "cannot run `{}`: {err}",
        program.to_string_lossy()
    ));
    match err.kind() {
        std::io::ErrorKind::NotFound => exit::NOT_FOUND,
        _ => exit::CANNOT_RUN,
    }
}
