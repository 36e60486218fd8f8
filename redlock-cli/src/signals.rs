//! The signals redlock forwards to its job: SIGINT, SIGTERM and SIGHUP; and Ctrl-Z (SIGTSTP).
//!
//! Once these are caught they no longer end redlock: while waiting for the lock, one ends the
//! wait (nothing is left behind: the attempt is dropped); while the job runs, each is passed
//! on to the job's process group, and redlock releases the lock when the job has exited.
//!
//! The job runs in a process group of its own, so the terminal's SIGTSTP reaches redlock only.
//! redlock stops the job (SIGSTOP), then itself, as a shell expects of a foreground job. Its
//! renewal stops with it, so the lock may run out while it is stopped: once continued, it lets
//! the job go on only if it still holds the lock (see `run::supervise`).

use nix::sys::signal::Signal;
use tokio::signal::unix::{signal, SignalKind};

/// The caught signals.
#[derive(Debug)]
pub(crate) struct Forwarded {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
    hangup: tokio::signal::unix::Signal,
    stop: tokio::signal::unix::Signal,
}

impl Forwarded {
    /// Catches SIGINT, SIGTERM and SIGHUP from now on.
    ///
    /// # Errors
    ///
    /// The operating system's, if a handler cannot be installed.
    pub(crate) fn catch() -> std::io::Result<Self> {
        Ok(Self {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
            hangup: signal(SignalKind::hangup())?,
            stop: signal(SignalKind::from_raw(Signal::SIGTSTP as i32))?,
        })
    }

    /// The next signal that ends a wait: SIGINT, SIGTERM or SIGHUP. A SIGTSTP meanwhile stops
    /// redlock until it is continued.
    ///
    /// # Cancel safety
    ///
    /// As [`Forwarded::next`].
    pub(crate) async fn next_ending(&mut self) -> Signal {
        loop {
            match self.next().await {
                Signal::SIGTSTP => stop_self(),
                ending => return ending,
            }
        }
    }

    /// The next caught signal (SIGTSTP included).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a signal that arrives after the future is dropped is kept for the next call.
    pub(crate) async fn next(&mut self) -> Signal {
        tokio::select! {
            Some(()) = self.interrupt.recv() => Signal::SIGINT,
            Some(()) = self.terminate.recv() => Signal::SIGTERM,
            Some(()) = self.hangup.recv() => Signal::SIGHUP,
            Some(()) = self.stop.recv() => Signal::SIGTSTP,
            // Only if the runtime's signal driver went away: then no signal comes again.
            else => std::future::pending().await,
        }
    }
}

/// Stops redlock (SIGSTOP) until it is continued, as a stopped foreground job.
pub(crate) fn stop_self() {
    if let Err(err) = nix::sys::signal::raise(Signal::SIGSTOP) {
        tracing::warn!(%err, "cannot stop redlock");
    }
}
