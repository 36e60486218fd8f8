//! The job's supervisor: a process between redlock and the command (`redlock __exec PARENT --
//! COMMAND...`), in a process group of its own.
//!
//! redlock starts itself again for this. The supervisor:
//!
//! - starts the command as its child, leading a new process group, the job's group: the
//!   command and everything it starts. A command that puts itself in a group of its own
//!   (`timeout(1)` does) is already its leader, so it stays in it;
//! - passes on to the job's group the signals redlock sends it (each followed by SIGCONT, so
//!   that a stopped job acts on it), and stops or continues the group when redlock asks
//!   ([`STOP_JOB`], [`CONTINUE_JOB`]);
//! - asks the kernel for a signal when redlock dies (Linux `PR_SET_PDEATHSIG`), and checks
//!   every second besides; when redlock is gone, it SIGKILLs the job's group. That reaches
//!   setuid programs that keep the caller as their real user, which a parent-death signal set
//!   on the program itself would not (the kernel drops it at such an exec);
//! - is the subreaper of the command's descendants (`PR_SET_CHILD_SUBREAPER`), and collects
//!   them;
//! - exits, with the command's code (128 + N if a signal killed it), only once the job's group
//!   is empty (`kill(-group, 0)` answers "no such process": atomic, whoever the members'
//!   parents are, and whether or not `/proc` shows them): the lock is held as long as any
//!   process of the job runs, as flock(1)'s lock is while any process holds its file open. A
//!   process that leaves the group (`setsid`, a daemon) is not the job's any more.
//!
//! If the supervisor itself dies, its orphans are handed to redlock (a subreaper too), which
//! kills and collects them before it lets the lock go (`Job::wait`).
//!
//! A separate process rather than code between `fork` and `exec` keeps the crate free of
//! `unsafe`.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{killpg, SigSet, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::{getppid, Pid};

use crate::exit;
use crate::procfs;
use crate::report::say;
use crate::signals::{Caught, FORWARDED};

/// The supervisor's argument: `redlock __exec PARENT_PID -- COMMAND [ARGS...]`.
pub(crate) const SUPERVISOR: &str = "__exec";
/// redlock asks the supervisor to stop the job (SIGSTOP to its group) with this signal.
pub(crate) const STOP_JOB: Signal = Signal::SIGTSTP;
/// redlock asks the supervisor to continue the job (SIGCONT to its group) with this signal.
pub(crate) const CONTINUE_JOB: Signal = Signal::SIGCONT;

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
    block_terminal_stops();
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
    #[cfg(not(target_os = "linux"))]
    let _ = death_signal;
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

/// Blocks SIGTTIN and SIGTTOU in this thread (and those it starts): a process outside the
/// terminal's foreground group that writes to it with `tostop` set, or reads from it, would
/// otherwise be stopped, and nothing would continue it. A blocked SIGTTOU lets the write
/// through. Commands started with std's `spawn` get an empty mask again.
pub(crate) fn block_terminal_stops() {
    let mut stops = SigSet::empty();
    stops.add(Signal::SIGTTIN);
    stops.add(Signal::SIGTTOU);
    if let Err(err) = stops.thread_block() {
        tracing::warn!(%err, "cannot block SIGTTIN and SIGTTOU");
    }
}

async fn watch(parent: Pid, command: &[OsString]) -> u8 {
    // Handlers first: a signal redlock sends must not end the supervisor. One that arrives
    // before the command starts is passed on once it has (the loop below reads it then).
    let mut signals = FORWARDED.to_vec();
    signals.extend([STOP_JOB, CONTINUE_JOB]);
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
    // ignored signal stays ignored across exec), empties its signal mask, and looks the program
    // up in PATH.
    let job = match std::process::Command::new(program)
        .args(&command[1..])
        .process_group(0)
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
    // The command leads the job's group.
    let group = job;
    let mut code = None;
    let mut check = tokio::time::interval(PARENT_CHECK);
    loop {
        reap(job, &mut code);
        if getppid() != parent {
            // redlock is gone: nobody holds the lock for the job any more.
            let _ = killpg(group, Signal::SIGKILL);
        }
        if let Some(code) = code {
            if group_is_empty(group) {
                return code;
            }
        }
        tokio::select! {
            event = caught.next_or_child() => match event {
                // A child stopped or ended: collected at the top of the loop.
                None => {}
                Some(STOP_JOB) => signal_group(group, Signal::SIGSTOP),
                Some(CONTINUE_JOB) => signal_group(group, Signal::SIGCONT),
                // The parent-death signal is one of these: the top of the loop tells.
                Some(passed_on) if getppid() == parent => {
                    signal_group(group, passed_on);
                    signal_group(group, Signal::SIGCONT);
                }
                Some(_) => {}
            },
            // The command is done but some of its processes are not (their ends are signalled
            // to their own parents, not here): look again shortly.
            () = tokio::time::sleep(LINGER_CHECK), if code.is_some() => {}
            _ = check.tick() => {}
        }
    }
}

fn signal_group(group: Pid, signal: Signal) {
    if let Err(err) = killpg(group, signal) {
        tracing::debug!(%err, ?signal, "the job's group is gone");
    }
}

/// Whether no process is left in `group` (one we may not signal still counts).
fn group_is_empty(group: Pid) -> bool {
    matches!(killpg(group, None), Err(Errno::ESRCH))
}

/// Collects every exited child: the command (its exit code goes to `code`), and the
/// descendants handed to the supervisor as their parents died.
fn reap(job: Pid, code: &mut Option<u8>) {
    loop {
        let exited = match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::Exited(pid, status)) => {
                (pid, u8::try_from(status).unwrap_or(exit::SOFTWARE))
            }
            Ok(WaitStatus::Signaled(pid, signal, _)) => (pid, exit::killed_by(signal as i32)),
            Ok(WaitStatus::StillAlive) | Err(_) => return,
            Ok(_) => continue,
        };
        if exited.0 == job && code.is_none() {
            *code = Some(exited.1);
        }
    }
}
