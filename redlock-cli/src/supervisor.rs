//! The job's supervisor: the first process of the job's process group, between redlock and
//! the command (`redlock __exec PARENT -- COMMAND...`).
//!
//! redlock starts itself again in a new process group for this. The supervisor:
//!
//! - asks the kernel for a signal when redlock dies (Linux `PR_SET_PDEATHSIG`), and checks
//!   every second besides; when redlock is gone, it SIGKILLs its whole group: the command and
//!   everything the command started that stayed in the group, setuid programs included (the
//!   kernel drops a parent-death signal set on a setuid program itself, not one set here);
//! - becomes the subreaper of the command's descendants (`PR_SET_CHILD_SUBREAPER`), starts the
//!   command as its child, in its group, and catches the signals redlock passes on to the group
//!   so that only the command and its processes act on them;
//! - exits, with the command's code (128 + N if a signal killed it), only once no other process
//!   of the group is alive: the lock is held as long as any process of the job runs, as
//!   flock(1)'s lock is while any process holds its file open. A process that leaves the group
//!   (`setsid`, a daemon) is not the job's any more.
//!
//! A separate process rather than code between `fork` and `exec` keeps the crate free of
//! `unsafe`.

use std::ffi::OsString;
use std::time::Duration;

use nix::sys::signal::{killpg, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::{getpgrp, getpid, getppid, Pid};

use crate::exit;
use crate::procfs;
use crate::report::say;
use crate::signals::{Caught, FORWARDED};

/// The supervisor's argument: `redlock __exec PARENT_PID -- COMMAND [ARGS...]`.
pub(crate) const SUPERVISOR: &str = "__exec";

/// How often the supervisor looks whether redlock is still there, besides the signal.
const PARENT_CHECK: Duration = Duration::from_secs(1);
/// How often it looks whether the processes the command left behind are done.
const LINGER_CHECK: Duration = Duration::from_millis(100);

/// Runs the supervisor; the exit code to end with.
pub(crate) fn supervise(args: &[OsString]) -> u8 {
    let (parent, command) = match args {
        [parent, separator, command @ ..] if separator == "--" && !command.is_empty() => (
            parent.to_str().and_then(|pid| pid.parse::<i32>().ok()),
            command,
        ),
        _ => {
            say(format_args!(
                "{SUPERVISOR} is redlock's own; use `redlock run`"
            ));
            return exit::USAGE;
        }
    };
    let Some(parent) = parent else {
        say("the job's supervisor was given no parent");
        return exit::USAGE;
    };
    // The parent-death signal is one the supervisor catches (and so survives).
    let death_signal = FORWARDED
        .into_iter()
        .find(|signal| !procfs::ignored(*signal));
    #[cfg(target_os = "linux")]
    {
        if let Err(err) = nix::sys::prctl::set_pdeathsig(death_signal) {
            say(format_args!("cannot tie the job to redlock's life: {err}"));
            return exit::SOFTWARE;
        }
        if let Err(err) = nix::sys::prctl::set_child_subreaper(true) {
            say(format_args!("cannot collect the job's processes: {err}"));
            return exit::SOFTWARE;
        }
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            say(format_args!("cannot start the job's supervisor: {err}"));
            return exit::SOFTWARE;
        }
    };
    runtime.block_on(watch(Pid::from_raw(parent), command))
}

async fn watch(parent: Pid, command: &[OsString]) -> u8 {
    // Handlers first: a signal passed on to the group must not end the supervisor.
    let mut caught = match Caught::catch(&FORWARDED) {
        Ok(caught) => caught,
        Err(err) => {
            say(format_args!("cannot catch signals for the job: {err}"));
            return exit::SOFTWARE;
        }
    };
    // redlock may have died before the parent-death signal was asked for.
    if getppid() != parent {
        return exit::LOST;
    }
    let program = &command[0];
    // std's `spawn` sets SIGPIPE back to its default for the command (Rust ignores it, and an
    // ignored signal stays ignored across exec) and looks the program up in PATH.
    let job = match std::process::Command::new(program)
        .args(&command[1..])
        .spawn()
    {
        Ok(job) => Pid::from_raw(i32::try_from(job.id()).unwrap_or(i32::MAX)),
        Err(err) => {
            say(format_args!(
                "cannot run `{}`: {err}",
                program.to_string_lossy()
            ));
            return match err.kind() {
                std::io::ErrorKind::NotFound => exit::NOT_FOUND,
                _ => exit::CANNOT_RUN,
            };
        }
    };
    let group = getpgrp();
    let me = getpid().as_raw();
    let mut code = None;
    let mut check = tokio::time::interval(PARENT_CHECK);
    loop {
        reap(job, &mut code);
        if getppid() != parent {
            // redlock is gone: nobody holds the lock for the job any more.
            let _ = killpg(group, Signal::SIGKILL);
        }
        if let Some(code) = code {
            if procfs::live_members(group.as_raw(), Some(me)) == 0 {
                return code;
            }
        }
        tokio::select! {
            // A child ended, or a signal redlock passed on to the whole group (the job's
            // processes act on it; the supervisor only looks at its parent again).
            _ = caught.next_or_child() => {}
            // The command is done but some of its processes are not (their ends are signalled
            // to their own parents, not here): look again shortly.
            () = tokio::time::sleep(LINGER_CHECK), if code.is_some() => {}
            _ = check.tick() => {}
        }
    }
}

/// Collects every exited child (the command, and its descendants that were handed to the
/// supervisor); the command's exit code goes to `code`.
fn reap(job: Pid, code: &mut Option<u8>) {
    loop {
        match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::Exited(pid, status)) if pid == job => {
                *code = Some(u8::try_from(status).unwrap_or(exit::SOFTWARE));
            }
            Ok(WaitStatus::Signaled(pid, signal, _)) if pid == job => {
                *code = Some(exit::killed_by(signal as i32));
            }
            Ok(WaitStatus::StillAlive) | Err(_) => return,
            Ok(_) => {}
        }
    }
}
