//! `redlock`: a distributed flock(1) for cron jobs and shell scripts.
//!
//! ```text
//! */5 * * * * redlock run nightly-report --no-wait -- /usr/local/bin/report.sh
//! ```
//!
//! The same crontab on every host: the job runs on one of them at a time. `redlock run` takes
//! the lock `NAME` on the Redlock quorum of `--nodes` (or `REDLOCK_NODES`), runs the command
//! while the watchdog renews the lease, releases the lock the moment the command exits, and
//! exits with the command's code. See docs/cli.md for every flag, exit code and signal.

mod args;
mod connect;
mod exit;
mod job;
mod procfs;
mod redact;
mod report;
mod run;
mod signals;
mod status;
mod supervisor;

use std::ffi::OsString;
use std::process::ExitCode;

use clap::error::ErrorKind;
use clap::Parser;

use crate::args::{Cli, Command};
use crate::exit::Failure;
use crate::report::Reporter;

fn main() -> ExitCode {
    keep_the_environment_from_the_job();
    let args: Vec<OsString> = std::env::args_os().collect();
    if args.get(1).is_some_and(|arg| arg == supervisor::SUPERVISOR) {
        return ExitCode::from(supervisor::supervise(&args[2..]));
    }
    // A redlock in the background writing to its terminal (with `tostop`) must not be stopped,
    // renewal and all, while its job runs on.
    signals::block_terminal_stops();
    let cli = match Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(err) => return ExitCode::from(usage_error(&err)),
    };
    let out = Reporter::new(&cli.verbosity);
    out.install_log(&cli.verbosity);
    let outcome = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|source| Failure::System {
            what: "start the runtime",
            source,
        })
        .and_then(|runtime| runtime.block_on(dispatch(&cli, &out)));
    ExitCode::from(match outcome {
        Ok(code) => code,
        Err(failure) => {
            match &failure {
                Failure::Busy { message, .. } => out.notice(message),
                Failure::Interrupted(_) => out.warn(&failure.one_line()),
                _ => out.error(&failure.one_line()),
            }
            failure.exit_code()
        }
    })
}

/// Makes this process not dumpable (Linux): its `/proc/PID/environ`, where `REDLOCK_NODES` and
/// its passwords are, is then readable by root only, not by the job running as the same user
/// (a job started with `env -u REDLOCK_NODES` could otherwise read it from its supervisor, or
/// from redlock, through `/proc/$PPID/environ`). The job itself is dumpable again once it is
/// executed: only redlock and the supervisor are closed.
fn keep_the_environment_from_the_job() {
    #[cfg(target_os = "linux")]
    if let Err(err) = nix::sys::prctl::set_dumpable(false) {
        report::say(format_args!(
            "cannot keep the environment from the job ({err}): /proc/PID/environ stays readable"
        ));
    }
}

async fn dispatch(cli: &Cli, out: &Reporter) -> Result<u8, Failure> {
    match &cli.command {
        Command::Run(args) => run::run(args, &cli.connection, out).await,
        Command::Status(args) => status::status(args, &cli.connection, out).await,
        Command::Unlock(args) => status::unlock(args, &cli.connection, out).await,
    }
}

/// Prints help or the version (exit 0), or a usage error on one line (exit 64).
fn usage_error(err: &clap::Error) -> u8 {
    if matches!(
        err.kind(),
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion
    ) {
        // Printing to a closed pipe is no reason to fail.
        let _ = err.print();
        return 0;
    }
    let text = err.to_string();
    let mut line = Vec::new();
    for part in text.lines().map(str::trim) {
        if part.starts_with("Usage:") || part.starts_with("For more information") {
            break;
        }
        if !part.is_empty() {
            line.push(part);
        }
    }
    let line = line.join(" ");
    let line = redact::credentials(&line);
    let line = line.strip_prefix("error: ").unwrap_or(&line);
    report::say(format_args!("{line} (see redlock --help)"));
    exit::USAGE
}
