//! The signals redlock passes on to its job: SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1,
//! SIGUSR2 and SIGALRM; and Ctrl-Z (SIGTSTP).
//!
//! Once these are caught they no longer end redlock: while waiting for the lock, one ends the
//! wait (nothing is left behind: the attempt is dropped); while the job runs, each is passed
//! on to the job's process group, followed by SIGCONT so that a stopped job acts on it, and
//! redlock releases the lock once the job has exited. A signal ignored when redlock started
//! (`nohup`, a background job of a script) is left ignored, and the job ignores it too.
//!
//! The job runs in a process group of its own, so the terminal's SIGTSTP reaches redlock only.
//! redlock stops the job (SIGSTOP), then itself, as a shell expects of a foreground job. Its
//! renewal stops with it, so the lock may run out while it is stopped: once continued, it lets
//! the job go on only if it still holds the lock (see `run::supervise`).

use std::future::poll_fn;
use std::task::{Context, Poll};

use nix::sys::signal::{SigSet, Signal};
use tokio::signal::unix::{signal, SignalKind};

use crate::procfs;

/// The signals passed on to the job.
pub(crate) const FORWARDED: [Signal; 7] = [
    Signal::SIGHUP,
    Signal::SIGINT,
    Signal::SIGQUIT,
    Signal::SIGTERM,
    Signal::SIGUSR1,
    Signal::SIGUSR2,
    Signal::SIGALRM,
];

/// Caught signals, as a stream.
#[derive(Debug)]
pub(crate) struct Caught {
    streams: Vec<(Signal, tokio::signal::unix::Signal)>,
    /// SIGCHLD, caught so that an inherited "ignore" cannot make the kernel reap the job
    /// before it is waited for.
    children: tokio::signal::unix::Signal,
}

impl Caught {
    /// Catches `signals` from now on, but those ignored when this process started; and
    /// SIGCHLD.
    ///
    /// # Errors
    ///
    /// The operating system's, if a handler cannot be installed.
    pub(crate) fn catch(signals: &[Signal]) -> std::io::Result<Self> {
        let mut streams = Vec::new();
        for &caught in signals.iter().filter(|signal| !procfs::ignored(**signal)) {
            streams.push((caught, signal(SignalKind::from_raw(caught as i32))?));
        }
        Ok(Self {
            streams,
            children: signal(SignalKind::child())?,
        })
    }

    /// What redlock catches: the forwarded signals and SIGTSTP.
    ///
    /// # Errors
    ///
    /// As [`Caught::catch`].
    pub(crate) fn for_redlock() -> std::io::Result<Self> {
        let mut signals = FORWARDED.to_vec();
        signals.push(Signal::SIGTSTP);
        Self::catch(&signals)
    }

    /// The next signal that ends a wait. A SIGTSTP meanwhile stops redlock until it is
    /// continued.
    ///
    /// # Cancel safety
    ///
    /// As [`Caught::next`].
    pub(crate) async fn next_ending(&mut self) -> Signal {
        loop {
            match self.next().await {
                Signal::SIGTSTP => stop_self(),
                ending => return ending,
            }
        }
    }

    /// The next caught signal, or SIGCHLD (a child of this process stopped or exited):
    /// `None` for SIGCHLD.
    ///
    /// # Cancel safety
    ///
    /// As [`Caught::next`].
    pub(crate) async fn next_or_child(&mut self) -> Option<Signal> {
        poll_fn(|cx| {
            if let Poll::Ready(Some(())) = self.children.poll_recv(cx) {
                return Poll::Ready(None);
            }
            self.poll_caught(cx).map(Some)
        })
        .await
    }

    /// The next caught signal. Never, if none is caught.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a signal that arrives after the future is dropped is kept for the next call.
    pub(crate) async fn next(&mut self) -> Signal {
        poll_fn(|cx| self.poll_caught(cx)).await
    }

    fn poll_caught(&mut self, cx: &mut Context<'_>) -> Poll<Signal> {
        for (caught, stream) in &mut self.streams {
            if let Poll::Ready(Some(())) = stream.poll_recv(cx) {
                return Poll::Ready(*caught);
            }
        }
        Poll::Pending
    }
}

/// Stops redlock (SIGSTOP) until it is continued, as a stopped foreground job.
pub(crate) fn stop_self() {
    if let Err(err) = nix::sys::signal::raise(Signal::SIGSTOP) {
        tracing::warn!(%err, "cannot stop redlock");
    }
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
