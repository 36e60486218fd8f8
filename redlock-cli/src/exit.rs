//! Exit codes, and the failures that lead to them.
//!
//! Like flock(1), `redlock run` exits with the job's own code when the job ran; its own codes
//! come from sysexits(3) where one fits, so that they are unlikely to be a job's own.

use std::ffi::OsString;

use redlock_reentrant::Error;

/// A bad flag, duration, URL or lock name (`EX_USAGE`, as flock(1)).
pub(crate) const USAGE: u8 = 64;
/// Too few Redis nodes answered to decide (`EX_UNAVAILABLE`).
pub(crate) const UNAVAILABLE: u8 = 69;
/// Anything unexpected (`EX_SOFTWARE`).
pub(crate) const SOFTWARE: u8 = 70;
/// The lock is busy (`EX_TEMPFAIL`: try again later); `--conflict-exit-code` changes it.
pub(crate) const BUSY: u8 = 75;
/// The lock was lost while the job ran. No sysexits(3) code means "ran, but not alone to the
/// end", so it is one past their range.
pub(crate) const LOST: u8 = 79;
/// The command was found but could not be run (as shells and env(1)).
pub(crate) const CANNOT_RUN: u8 = 126;
/// The command was not found (as shells and env(1)).
pub(crate) const NOT_FOUND: u8 = 127;

/// The exit code of a process killed by `signal` (as shells report it).
pub(crate) fn killed_by(signal: i32) -> u8 {
    u8::try_from(128 + signal).unwrap_or(SOFTWARE)
}

/// Why redlock stops without the job's own exit code.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Failure {
    /// The command line is wrong.
    #[error("{0}")]
    Usage(String),
    /// The lock library said no.
    #[error(transparent)]
    Lock(#[from] Error),
    /// The lock is busy.
    #[error("{message}")]
    Busy {
        /// What to say (only on a terminal or with -v).
        message: String,
        /// The exit code (`--conflict-exit-code`).
        code: u8,
    },
    /// Interrupted by a signal before the job started.
    #[error("interrupted by signal {0} before the job started; the lock was not taken")]
    Interrupted(i32),
    /// redlock could not set itself up (signal handlers, its runtime).
    #[error("cannot {what}: {source}")]
    System {
        /// What could not be done.
        what: &'static str,
        /// Why.
        source: std::io::Error,
    },
    /// The job could not be started or watched.
    #[error("cannot run `{}`: {source}", program.to_string_lossy())]
    Job {
        /// The program.
        program: OsString,
        /// Why.
        source: std::io::Error,
    },
}

impl Failure {
    /// The exit code this failure ends redlock with.
    pub(crate) fn exit_code(&self) -> u8 {
        match self {
            Failure::Usage(_) => USAGE,
            Failure::Busy { code, .. } => *code,
            Failure::Interrupted(signal) => killed_by(*signal),
            Failure::Job { .. } | Failure::System { .. } => SOFTWARE,
            Failure::Lock(err) => match err {
                Error::InvalidArgument(_) | Error::WrongType { .. } => USAGE,
                Error::NoQuorum { .. } | Error::ValidityExhausted { .. } => UNAVAILABLE,
                Error::Contended { .. } => BUSY,
                Error::LockLost { .. } | Error::NotOwner { .. } => LOST,
                _ => SOFTWARE,
            },
        }
    }

    /// The message on one line: the error and its causes, joined by `: `.
    pub(crate) fn one_line(&self) -> String {
        let mut line = self.to_string();
        let mut cause = std::error::Error::source(self);
        if matches!(self, Failure::Lock(_)) {
            // `transparent`: the first source is the library error itself, already printed.
            cause = cause.and_then(std::error::Error::source);
        }
        while let Some(err) = cause {
            let text = err.to_string();
            if !line.contains(&text) {
                line.push_str(": ");
                line.push_str(&text);
            }
            cause = err.source();
        }
        line.replace('\n', " ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use redlock_reentrant::{InvalidArgument, LostReason};

    #[test]
    fn library_errors_map_to_distinct_codes() {
        let usage = Failure::from(Error::from(InvalidArgument::EmptyName));
        assert_eq!(usage.exit_code(), USAGE);
        let lost = Failure::from(Error::lock_lost("job", LostReason::NotOwner));
        assert_eq!(lost.exit_code(), LOST);
        let busy = Failure::Busy {
            message: String::new(),
            code: 1,
        };
        assert_eq!(busy.exit_code(), 1);
        assert_eq!(Failure::Interrupted(15).exit_code(), 143);
        let codes = [
            USAGE,
            UNAVAILABLE,
            SOFTWARE,
            BUSY,
            LOST,
            CANNOT_RUN,
            NOT_FOUND,
        ];
        for (i, code) in codes.iter().enumerate() {
            assert!(!codes[i + 1..].contains(code), "{code} twice");
        }
    }

    #[test]
    fn messages_are_one_line() {
        let job = Failure::Job {
            program: "report.sh".into(),
            source: std::io::Error::other("line one\nline two"),
        };
        assert_eq!(job.one_line(), "cannot run `report.sh`: line one line two");
    }
}
