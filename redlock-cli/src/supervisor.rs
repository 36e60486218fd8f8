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
//! If the supervisor itself dies, redlock (a subreaper too) kills and collects the group before
//! it lets the lock go (`Job::wait`).
//!
//! A separate process rather than code between `fork` and `exec` keeps the crate free of
//! `unsafe`.

use std::ffi::OsString;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{killpg, Signal};
use nix::sys::wait::{waitid, waitpid, Id, WaitPidFlag, WaitStatus};
use nix::unistd::{getpgrp, getppid, Pid};

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
    // The terminal's stops are caught too (doing nothing): a job that stops its own group
    // (`kill -TSTP 0`, a write to a terminal with `tostop`) must not stop its supervisor,
    // which would then notice nothing. The command gets them at their default, as handlers
    // do not survive exec.
    let mut signals = FORWARDED.to_vec();
    signals.extend([Signal::SIGTSTP, Signal::SIGTTIN, Signal::SIGTTOU]);
    let mut caught = match Caught::catch(&signals) {
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
    let mut code = None;
    let mut check = tokio::time::interval(PARENT_CHECK);
    loop {
        let members_left = reap(group, job, &mut code);
        if getppid() != parent {
            // redlock is gone: nobody holds the lock for the job any more.
            let _ = killpg(group, Signal::SIGKILL);
        }
        if let (Some(code), false) = (code, members_left) {
            return code;
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

/// Collects every exited child: the command (its exit code goes to `code`), and the
/// descendants handed to the supervisor as their parents died. Answers whether a process of
/// `group` other than the supervisor is left.
fn reap(group: Pid, job: Pid, code: &mut Option<u8>) -> bool {
    let mut record = |pid: Pid, exit: u8| {
        if pid == job && code.is_none() {
            *code = Some(exit);
        }
    };
    let members_left = collect_group(group, &mut record);
    // Children outside the group (a daemon the job started that left it) are reaped too.
    loop {
        match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::Exited(pid, status)) => {
                record(pid, u8::try_from(status).unwrap_or(exit::SOFTWARE));
            }
            Ok(WaitStatus::Signaled(pid, signal, _)) => {
                record(pid, exit::killed_by(signal as i32));
            }
            Ok(WaitStatus::StillAlive) | Err(_) => return members_left,
            Ok(_) => {}
        }
    }
}

/// Collects the exited children of this process in `group`, telling `exited` of each (its
/// pid and exit code), and answers whether a child in `group` is still alive.
///
/// A child in the group is the test, not a scan of the group: a live member is a child of
/// this process (the command, or an orphan handed to it as subreaper) or descends from one
/// through live members. `waitid` answers that atomically, sees processes `/proc` may hide
/// (another user's, under `hidepid`), and does not report a process whose main thread exited
/// while others run.
pub(crate) fn collect_group(group: Pid, mut exited: impl FnMut(Pid, u8)) -> bool {
    loop {
        match waitid(Id::PGid(group), WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG) {
            Ok(WaitStatus::StillAlive) => return true,
            Ok(WaitStatus::Exited(pid, status)) => {
                exited(pid, u8::try_from(status).unwrap_or(exit::SOFTWARE));
            }
            Ok(WaitStatus::Signaled(pid, signal, _)) => {
                exited(pid, exit::killed_by(signal as i32));
            }
            Ok(_) | Err(Errno::EINTR) => {}
            // ECHILD: none left.
            Err(_) => return false,
        }
    }
}
