//! The one error type of the harness.

use std::io;
use std::path::PathBuf;
use std::time::Duration;

/// How to install redis-server; part of [`HarnessError::RedisServerMissing`]'s message.
pub const INSTALL_HINT: &str =
    "redis-server was not found on PATH (set REDIS_SERVER_BIN to override). \
Install it: Debian/Ubuntu `sudo apt-get install -y redis-server`; macOS `brew install redis`; \
elsewhere see https://redis.io/docs/latest/operate/oss_and_stack/install/";

/// Why the harness could not start, signal or query a redis-server.
///
/// Startup failures carry the tail of the server log, so a failing test shows why.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HarnessError {
    /// The redis-server binary does not exist (not on `PATH`, or the configured path is wrong).
    #[error("{hint} (looked for `{}`)", binary.display(), hint = INSTALL_HINT)]
    RedisServerMissing {
        /// The binary that was looked for.
        binary: PathBuf,
    },

    /// The binary exists but could not be run.
    #[error("could not run `{}`", binary.display())]
    Spawn {
        /// The binary that was run.
        binary: PathBuf,
        /// What the operating system said.
        #[source]
        source: io::Error,
    },

    /// A file-system or socket operation of the harness failed.
    #[error("{context}")]
    Io {
        /// What the harness was doing.
        context: String,
        /// What the operating system said.
        #[source]
        source: io::Error,
    },

    /// redis-server exited while starting (bad argument, port taken, ...).
    #[error("redis-server on port {port} exited during startup ({status}); log tail:\n{log_tail}")]
    Exited {
        /// The port it was started on.
        port: u16,
        /// Its exit status.
        status: String,
        /// The last lines of its log and standard error.
        log_tail: String,
    },

    /// No free port could be bound after several attempts: other processes took each one first.
    #[error(
        "redis-server could not bind a port after {attempts} attempts; last log tail:\n{log_tail}"
    )]
    PortUnavailable {
        /// How many ports were tried.
        attempts: u32,
        /// The last lines of the last attempt's log.
        log_tail: String,
    },

    /// redis-server did not answer PING in time.
    #[error(
        "redis-server on port {port} did not answer PING within {waited:?}; log tail:\n{log_tail}"
    )]
    NotReady {
        /// The port it was started on.
        port: u16,
        /// How long the harness waited.
        waited: Duration,
        /// The last lines of its log and standard error.
        log_tail: String,
    },

    /// Sending a signal to the server process failed.
    #[error("could not send {signal} to redis-server pid {pid}")]
    Signal {
        /// The signal's name.
        signal: &'static str,
        /// The process id.
        pid: u32,
        /// What the operating system said.
        #[source]
        source: nix::errno::Errno,
    },

    /// The operation needs a live server, and this one was killed.
    #[error("redis-server on port {port} is not running")]
    NotRunning {
        /// The server's port.
        port: u16,
    },

    /// A command sent to the server for an assertion failed.
    #[error("redis command failed")]
    Redis(#[from] redis::RedisError),

    /// A Redis Cluster did not form or settle (see [`crate::ShardedCluster`]).
    #[error("redis cluster: {0}")]
    Cluster(String),
}

/// `error` and its causes on one line, `a: b: c`, for panic messages.
pub(crate) fn report(error: &HarnessError) -> String {
    let mut out = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        out.push_str(": ");
        out.push_str(&cause.to_string());
        source = cause.source();
    }
    out
}
