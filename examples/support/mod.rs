//! What every example shares: local Redis masters for the length of the run, and the signals
//! that end it early without leaving them behind.

pub(crate) mod servers;

use std::error::Error;
use std::future::Future;
use std::process::ExitCode;

use servers::Masters;
use tokio::signal::unix::{signal, Signal, SignalKind};

/// Ctrl-C, SIGTERM (`kill`, `timeout`) and SIGHUP (the terminal closed), listened to before any
/// server starts. The masters run in their own process group, so these reach only the example,
/// which then drops them: dropping them kills them.
pub(crate) struct Interrupts {
    int: Signal,
    term: Signal,
    hup: Signal,
}

impl Interrupts {
    /// Starts listening.
    pub(crate) fn listen() -> std::io::Result<Self> {
        Ok(Self {
            int: signal(SignalKind::interrupt())?,
            term: signal(SignalKind::terminate())?,
            hup: signal(SignalKind::hangup())?,
        })
    }

    /// The next interrupt: its name, and the exit status a shell reports for a process it
    /// killed (128 + the signal's number).
    pub(crate) async fn recv(&mut self) -> (&'static str, u8) {
        tokio::select! {
            _ = self.int.recv() => ("Ctrl-C", 130),
            _ = self.term.recv() => ("SIGTERM", 143),
            _ = self.hup.recv() => ("SIGHUP", 129),
        }
    }
}

/// Fails the example's scenario with a message unless the condition holds.
#[allow(unused_macros)] // not every example checks with it
macro_rules! check {
    ($holds:expr, $($message:tt)+) => {
        if !$holds {
            return Err(format!($($message)+).into());
        }
    };
}

/// When the example started, for [`say!`]'s timeline.
#[allow(dead_code)] // not every example prints a timeline
pub(crate) static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();

/// Prints a line prefixed with the time since the example started.
#[allow(unused_macros)] // not every example prints a timeline
macro_rules! say {
    ($($arg:tt)*) => {{
        let t = $crate::support::START
            .get_or_init(std::time::Instant::now)
            .elapsed()
            .as_secs_f64();
        println!("[{t:>6.3}s] {}", format_args!($($arg)*));
    }};
}

/// The outcome of an example's scenario.
pub(crate) type Result<T = (), E = Box<dyn Error + Send + Sync>> = std::result::Result<T, E>;

/// Starts three independent masters, runs `scenario` on their URLs, and turns its outcome into
/// the exit code: 0, 1 when a step misbehaved, 128 + the signal's number on an [`Interrupts`]
/// signal (the masters are stopped then too).
#[allow(dead_code)] // the demo handles its signals and its masters itself
pub(crate) async fn with_three_masters<F, Fut>(example: &str, scenario: F) -> ExitCode
where
    F: FnOnce(Vec<String>) -> Fut,
    Fut: Future<Output = Result>,
{
    let mut interrupts = match Interrupts::listen() {
        Ok(interrupts) => interrupts,
        Err(err) => {
            eprintln!("cannot listen for Ctrl-C, SIGTERM and SIGHUP: {err}");
            return ExitCode::FAILURE;
        }
    };
    let masters = match Masters::start(3) {
        Ok(masters) => masters,
        Err(err) => {
            eprintln!("could not start redis-server: {err}");
            return ExitCode::FAILURE;
        }
    };
    println!("started 3 Redis masters on ports {:?}", masters.ports());
    let outcome = tokio::select! {
        outcome = scenario(masters.urls()) => outcome,
        (signal, status) = interrupts.recv() => {
            eprintln!("interrupted by {signal}: stopping the servers");
            return ExitCode::from(status);
        }
    };
    drop(masters);
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("{example} example FAILED: {err}");
            ExitCode::FAILURE
        }
    }
}
