//! What every example shares: local Redis masters for the length of the run, and Ctrl-C.

pub(crate) mod servers;

use std::error::Error;
use std::future::Future;
use std::process::ExitCode;

use servers::Masters;

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
/// the exit code: 0, 1 when a step misbehaved, 130 on Ctrl-C.
///
/// The masters run in their own process group, so Ctrl-C reaches only the example, which then
/// drops them, and so kills them.
#[allow(dead_code)] // the demo handles its signals and its masters itself
pub(crate) async fn with_three_masters<F, Fut>(example: &str, scenario: F) -> ExitCode
where
    F: FnOnce(Vec<String>) -> Fut,
    Fut: Future<Output = Result>,
{
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
        _ = tokio::signal::ctrl_c() => {
            eprintln!("interrupted by Ctrl-C: stopping the servers");
            return ExitCode::from(130);
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
