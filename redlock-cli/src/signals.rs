//! The signals redlock forwards to its job: SIGINT, SIGTERM and SIGHUP.
//!
//! Once these are caught they no longer end redlock: while waiting for the lock, one ends the
//! wait (nothing is left behind: the attempt is dropped); while the job runs, each is passed
//! on to the job's process group, and redlock releases the lock when the job has exited.

use nix::sys::signal::Signal;
use tokio::signal::unix::{signal, SignalKind};

/// The caught signals.
#[derive(Debug)]
pub(crate) struct Forwarded {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
    hangup: tokio::signal::unix::Signal,
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
        })
    }

    /// The next caught signal.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a signal that arrives after the future is dropped is kept for the next call.
    pub(crate) async fn next(&mut self) -> Signal {
        tokio::select! {
            Some(()) = self.interrupt.recv() => Signal::SIGINT,
            Some(()) = self.terminate.recv() => Signal::SIGTERM,
            Some(()) = self.hangup.recv() => Signal::SIGHUP,
            // Only if the runtime's signal driver went away: then no signal comes again.
            else => std::future::pending().await,
        }
    }
}
