//! A child process the harness kills, stops and resumes: what redis-servers and holder
//! processes have in common.

use std::process::Child;

use nix::sys::signal::{self, Signal};
use nix::unistd::Pid;

use crate::HarnessError;

/// A child process and whether the harness stopped it.
#[derive(Debug)]
pub(crate) struct State {
    /// `None` once killed and reaped (or found dead).
    pub(crate) child: Option<Child>,
    /// Whether SIGSTOP was sent without a SIGCONT since.
    pub(crate) stopped: bool,
}

/// SIGKILLs the child (SIGCONT first if stopped) and reaps it.
pub(crate) fn kill_child(state: &mut State) {
    if let Some(mut child) = state.child.take() {
        if state.stopped {
            let _ = send(child.id(), Signal::SIGCONT);
        }
        // Errors mean it is already gone; `wait` reaps it either way.
        let _ = send(child.id(), Signal::SIGKILL);
        let _ = child.wait();
    }
    state.stopped = false;
}

/// Forgets the child if it exited on its own (a crash, or a `SHUTDOWN` command).
pub(crate) fn reap_if_exited(state: &mut State) {
    if let Some(child) = state.child.as_mut() {
        if !matches!(child.try_wait(), Ok(None)) {
            state.child = None;
            state.stopped = false;
        }
    }
}

/// Sends `sig` to `pid`.
pub(crate) fn send(pid: u32, sig: Signal) -> Result<(), HarnessError> {
    signal::kill(to_pid(pid), sig).map_err(|source| HarnessError::Signal {
        signal: sig.as_str(),
        pid,
        source,
    })
}

pub(crate) fn to_pid(pid: u32) -> Pid {
    Pid::from_raw(i32::try_from(pid).expect("a process id fits in pid_t"))
}
