//! What redlock says on standard error: a spinner while waiting on a terminal, plain
//! `redlock: ...` lines otherwise, and the log filter (`-q`, `-v`, `RUST_LOG`).
//!
//! Nothing here prints a node URL: nodes are named by their redacted address only.

use std::io::{IsTerminal, Write};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use redlock_reentrant::LockStatus;
use tracing_subscriber::EnvFilter;

use crate::args::Verbosity;
use crate::exit::Failure;

/// Where and how much to say.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Reporter {
    level: Level,
    terminal: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Level {
    Quiet,
    Normal,
    Verbose,
}

impl Reporter {
    /// A reporter for these flags, on standard error.
    pub(crate) fn new(verbosity: &Verbosity) -> Self {
        let level = match (verbosity.quiet, verbosity.verbose) {
            (true, _) => Level::Quiet,
            (false, 0) => Level::Normal,
            (false, _) => Level::Verbose,
        };
        Self {
            level,
            terminal: std::io::stderr().is_terminal(),
        }
    }

    /// Sends the library's tracing to standard error: `RUST_LOG` if set, else its errors only
    /// (nothing with `-q`, warnings and information with `-v`, debug with `-vv`). redlock says
    /// itself what went wrong, in one line: a cron job mails nothing more.
    pub(crate) fn install_log(&self, verbosity: &Verbosity) {
        let default = match (verbosity.quiet, verbosity.verbose) {
            (true, _) => "off",
            (false, 0) => "error",
            (false, 1) => "info",
            (false, _) => "debug",
        };
        let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
        tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .with_ansi(self.terminal)
            .with_target(false)
            // A broken standard error must not panic the subscriber (`eprintln!` of its own
            // write error) and leave the lock to its lease: lines that cannot be written are
            // dropped.
            .log_internal_errors(false)
            .init();
    }

    /// An error: always said.
    pub(crate) fn error(&self, message: &str) {
        say(message);
    }

    /// Something the user should know (a lost lock, a failed release): said unless `-q`.
    pub(crate) fn warn(&self, message: &str) {
        if self.level > Level::Quiet {
            say(message);
        }
    }

    /// What happens, step by step: said with `-v`.
    pub(crate) fn info(&self, message: &str) {
        if self.level >= Level::Verbose {
            say(message);
        }
    }

    /// An expected outcome a cron job should not mail (a busy lock): said on a terminal
    /// unless `-q`, and with `-v`.
    pub(crate) fn notice(&self, message: &str) {
        if self.shows_notices() {
            say(message);
        }
    }

    /// Whether [`Reporter::notice`] says anything.
    pub(crate) fn shows_notices(&self) -> bool {
        self.level >= Level::Verbose || (self.terminal && self.level > Level::Quiet)
    }

    /// Shows that the lock `name` is being waited for: a spinner on a terminal, one line with
    /// `-v` otherwise. The returned handle takes the lock's status as it is learnt.
    pub(crate) fn waiting(&self, name: &str) -> Waiting {
        let spinner = self.animates().then(|| {
            let spinner = ProgressBar::new_spinner();
            spinner.set_style(
                ProgressStyle::with_template("{spinner} {msg} ({elapsed})")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            spinner.enable_steady_tick(Duration::from_millis(100));
            spinner
        });
        let waiting = Waiting {
            name: name.to_owned(),
            spinner,
        };
        if waiting.spinner.is_none() {
            self.info(&format!("waiting for {name}"));
        }
        waiting.show(None);
        waiting
    }

    /// Whether a spinner would be shown (status updates are worth fetching).
    pub(crate) fn animates(&self) -> bool {
        self.terminal && self.level > Level::Quiet
    }
}

/// A wait being shown.
#[derive(Debug)]
pub(crate) struct Waiting {
    name: String,
    spinner: Option<ProgressBar>,
}

impl Waiting {
    /// Updates the spinner with what the nodes said of the lock.
    pub(crate) fn show(&self, status: Option<&LockStatus>) {
        if let Some(spinner) = &self.spinner {
            spinner.set_message(format!("waiting for {}: {}", self.name, describe(status)));
        }
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        if let Some(spinner) = self.spinner.take() {
            spinner.finish_and_clear();
        }
    }
}

/// Writes a `redlock: ` line on standard error. Nothing panics on a closed pipe: writing is
/// best effort (Rust ignores SIGPIPE, so a write to a closed pipe is an error, not a death).
pub(crate) fn say(message: impl std::fmt::Display) {
    let _ = writeln!(std::io::stderr().lock(), "redlock: {message}");
}

/// Writes a line of an answer (`status`, `unlock`) on standard output.
///
/// # Errors
///
/// [`Failure::System`] when standard output cannot be written (closed, a full disk): a script
/// reading the answer must not take silence for one.
pub(crate) fn answer(line: impl std::fmt::Display) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}")
        .and_then(|()| out.flush())
        .map_err(|source| Failure::System {
            what: "write the answer to standard output",
            source,
        })
}

/// A lock's status in a few words: `held, 12 s left`.
pub(crate) fn describe(status: Option<&LockStatus>) -> String {
    match status {
        None => "asking the nodes".to_owned(),
        Some(status) if status.is_undecided() => format!(
            "undecided: held on {} of {} nodes, {} did not answer",
            status.held_on,
            status.nodes,
            status.nodes - status.answered
        ),
        Some(status) if !status.locked => "free".to_owned(),
        Some(status) => match status.remaining_ttl {
            Some(ttl) => format!("held, {} left", seconds(ttl)),
            None => "held".to_owned(),
        },
    }
}

/// `12 s`, `1.5 s`, `250 ms`.
pub(crate) fn seconds(duration: Duration) -> String {
    if duration >= Duration::from_secs(10) {
        format!("{} s", duration.as_secs())
    } else if duration >= Duration::from_secs(1) {
        format!("{:.1} s", duration.as_secs_f64())
    } else {
        format!("{} ms", duration.as_millis())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_at_a_glance() {
        assert_eq!(seconds(Duration::from_millis(12_400)), "12 s");
        assert_eq!(seconds(Duration::from_millis(1_540)), "1.5 s");
        assert_eq!(seconds(Duration::from_millis(250)), "250 ms");
        assert_eq!(describe(None), "asking the nodes");
    }
}
