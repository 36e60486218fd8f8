//! The command line: what `redlock` accepts, parsed by clap.

use std::ffi::OsString;
use std::time::Duration;

use clap::{ArgAction, Args, Parser, Subcommand, ValueEnum};

use crate::exit;

/// The exit codes, as `redlock run --help` shows them.
const RUN_EXIT_CODES: &str = "\
Exit codes:
  the job's own   the job ran to the end holding the lock
  75              the lock is busy (--no-wait, or --wait ran out); --conflict-exit-code changes it
  69              no quorum: too few Redis nodes answered
  79              the lock was lost while the job ran (the job's own code is in the message)
  64              usage: a bad flag, duration, URL or lock name
  126, 127        the command could not be run, or was not found
  128 + N         the job was killed by signal N, or redlock was interrupted by it while waiting
  70              anything else (an unexpected reply from Redis)

The lock is released once every process of the job has exited. SIGHUP, SIGINT, SIGQUIT,
SIGTERM, SIGUSR1, SIGUSR2 and SIGALRM are passed on to the job; Ctrl-Z stops the job with
redlock. If redlock dies, the job is killed (Linux). See docs/cli.md.";

/// A distributed flock(1): run a command while holding a lock on a quorum of Redis masters.
#[derive(Debug, Parser)]
#[command(name = "redlock", version, about, long_about = None)]
pub(crate) struct Cli {
    #[command(flatten)]
    pub(crate) connection: Connection,
    #[command(flatten)]
    pub(crate) verbosity: Verbosity,
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// Which Redis masters hold the locks, and where.
#[derive(Debug, Args)]
pub(crate) struct Connection {
    /// The Redis masters, comma-separated (`redis://`, `rediss://` for TLS; a password goes in
    /// the URL and is never printed). One URL is plain single-instance locking; use an odd
    /// number of independent masters (3 or 5) to survive a minority failing. Default:
    /// REDLOCK_NODES.
    #[arg(long, value_delimiter = ',', global = true, value_name = "URL,...")]
    pub(crate) nodes: Vec<String>,
    /// The prefix of every key the locks use on the masters. Default: REDLOCK_KEY_PREFIX, else
    /// `redlock:`.
    #[arg(long, global = true)]
    pub(crate) key_prefix: Option<String>,
    /// How long one Redis request may take before its node counts as not answering. Default:
    /// REDLOCK_NODE_TIMEOUT, else derived from the lease, between 20 ms and 500 ms.
    #[arg(long, value_parser = positive_duration, global = true)]
    pub(crate) node_timeout: Option<Duration>,
}

/// How much redlock says on standard error (`RUST_LOG` overrides the log filter).
#[derive(Debug, Args)]
pub(crate) struct Verbosity {
    /// Say nothing but errors.
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub(crate) quiet: bool,
    /// Say what happens: waiting, acquired with which token, released (-vv: the library's debug log).
    #[arg(short, long, action = ArgAction::Count, global = true)]
    pub(crate) verbose: u8,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run a command while holding the lock NAME: wait for it, run the command, release the
    /// lock the moment the command (and what it started) is done, and exit with its code.
    #[command(after_help = RUN_EXIT_CODES)]
    Run(RunArgs),
    /// Show whether the lock NAME is held, for how long, how deep, and the fencing counter.
    Status(StatusArgs),
    /// Delete the lock NAME whoever holds it (the holder's job is told it lost the lock).
    Unlock(UnlockArgs),
}

#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// The lock's name: the same name on every host means one job at a time.
    pub(crate) name: String,
    /// Take the lock shared (the read side of the read-write lock NAME): any number of
    /// --shared runs at once, never beside a run without it (which takes it exclusively).
    /// Exclusive runs go first: while one waits, new --shared runs wait behind it.
    #[arg(short, long, conflicts_with = "permits")]
    pub(crate) shared: bool,
    /// Take one of N permits of the semaphore NAME instead of the lock: at most N runs of NAME
    /// at once, on every host. A run whose N differs from the count of the permits out (or the
    /// count set on one master) is refused (a usage error). Each permit has its own lease: a killed
    /// run's permit comes back within it. On several Redis masters each permit is granted by
    /// floor(N·M/(N+1)) + 1 of the M masters (a majority is not enough for N > 1), so it
    /// tolerates fewer masters down than the lock: 2 permits on 3 masters need all 3.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) permits: Option<u32>,
    /// Wait at most this long for the lock (`30s`, `5m`), then exit with the busy code.
    /// Without --wait or --no-wait, wait as long as it takes.
    #[arg(long, value_parser = positive_duration, conflicts_with = "no_wait")]
    pub(crate) wait: Option<Duration>,
    /// Do not wait for a holder: if the lock is held, exit at once with the busy code
    /// (silently, unless on a terminal or with -v: cron mails nothing). A split vote between
    /// runs started together is no holder: it is retried for up to half a second.
    #[arg(short, long)]
    pub(crate) no_wait: bool,
    /// A fixed lease instead of renewal: the lock frees this long after it was taken, and the
    /// job is treated as having lost it if it runs past nine tenths of it (the time left is
    /// for stopping it while the lock is still its own).
    #[arg(long, value_parser = positive_duration)]
    pub(crate) lease: Option<Duration>,
    /// Without --lease, the lease the watchdog keeps renewing (every third of it) while
    /// redlock lives: how long the lock outlives a redlock that was killed. Default:
    /// REDLOCK_WATCHDOG_TIMEOUT, else 30s.
    #[arg(long, value_parser = positive_duration)]
    pub(crate) watchdog_timeout: Option<Duration>,
    /// The exit code when the lock is busy.
    #[arg(short = 'E', long, default_value_t = exit::BUSY, value_name = "CODE")]
    pub(crate) conflict_exit_code: u8,
    /// What to do to the job when the lock is lost while it runs.
    #[arg(long, value_enum, default_value_t = OnLost::Term)]
    pub(crate) on_lost: OnLost,
    /// With --on-lost term: how long the job has to exit after SIGTERM before SIGKILL.
    #[arg(long, default_value = "5s", value_parser = positive_duration)]
    pub(crate) grace: Duration,
    /// The command to run, and its arguments (after `--`).
    #[arg(required = true, last = true, value_name = "COMMAND")]
    pub(crate) command: Vec<OsString>,
}

/// What to do to the job when the lock is lost while it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum OnLost {
    /// SIGTERM to the job's process group, then SIGKILL after --grace.
    Term,
    /// SIGKILL to the job's process group at once.
    Kill,
    /// Let the job finish (redlock still exits with the lost code).
    Ignore,
}

#[derive(Debug, Args)]
pub(crate) struct StatusArgs {
    /// The lock's name.
    pub(crate) name: String,
    /// The shared side (what `redlock run --shared` takes): whether any run holds it shared.
    #[arg(short, long, conflicts_with = "permits")]
    pub(crate) shared: bool,
    /// The semaphore NAME (what `redlock run --permits` takes): its count and the permits out.
    #[arg(long)]
    pub(crate) permits: bool,
    /// Print one JSON object instead of a line of text.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct UnlockArgs {
    /// The lock's name.
    pub(crate) name: String,
    /// The shared side: every `redlock run --shared` holding it loses it.
    #[arg(short, long, conflicts_with = "permits")]
    pub(crate) shared: bool,
    /// The semaphore NAME (`redlock run --permits`): its count and every permit out are
    /// deleted, and each run holding one loses it.
    #[arg(long)]
    pub(crate) permits: bool,
    /// Required: the lock is deleted whoever holds it.
    #[arg(long)]
    pub(crate) force: bool,
    /// Print one JSON object instead of a line of text.
    #[arg(long)]
    pub(crate) json: bool,
}

/// A duration as people write it (`30s`, `5m`, `1h 30m`, `500ms`), more than zero.
fn positive_duration(text: &str) -> Result<Duration, String> {
    let duration = humantime::parse_duration(text)
        .map_err(|err| format!("`{text}` is not a duration like 30s, 5m or 500ms ({err})"))?;
    if duration.is_zero() {
        return Err("must be more than zero".to_owned());
    }
    Ok(duration)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn durations_are_human_and_positive() {
        assert_eq!(positive_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(positive_duration("1m 30s"), Ok(Duration::from_secs(90)));
        assert_eq!(positive_duration("250ms"), Ok(Duration::from_millis(250)));
        assert!(positive_duration("0s").is_err());
        assert!(positive_duration("soon").is_err());
        assert!(positive_duration("30").is_err());
    }

    #[test]
    fn run_takes_the_command_after_the_separator() {
        let cli = Cli::try_parse_from(["redlock", "run", "job", "--no-wait", "--", "echo", "-n"])
            .expect("parses");
        let Command::Run(run) = cli.command else {
            panic!("not run: {cli:?}");
        };
        assert_eq!(run.name, "job");
        assert!(run.no_wait);
        assert_eq!(run.command, ["echo", "-n"]);
        assert!(Cli::try_parse_from(["redlock", "run", "job"]).is_err());
        assert!(Cli::try_parse_from([
            "redlock",
            "run",
            "job",
            "--wait",
            "1s",
            "--no-wait",
            "--",
            "x"
        ])
        .is_err());
    }
}
