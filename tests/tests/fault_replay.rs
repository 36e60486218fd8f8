//! Re-runs the checkers over a kept history and prints their reports:
//!
//! ```text
//! HISTORY=/tmp/redlock-fault-.../history.log cargo test -p redlock-tests --test fault_replay -- --ignored --nocapture
//! ```
//!
//! `PAUSE_BOUND_MS` sets the pause bound (default 1000, a third of the suite's 3 s lease).

use std::time::Duration;

use redlock_testkit::history::read_history;
use redlock_testkit::{check_all, CheckConfig};

#[test]
#[ignore = "a tool: needs HISTORY=<path of a kept history>"]
fn check_a_kept_history() {
    let path = std::env::var("HISTORY").expect("HISTORY=<path of a kept history>");
    let pause_bound = std::env::var("PAUSE_BOUND_MS")
        .ok()
        .and_then(|ms| ms.parse().ok())
        .map_or(Duration::from_secs(1), Duration::from_millis);
    let events = read_history(&path).expect("the history reads");
    let reports = check_all(&events, &CheckConfig { pause_bound });
    for report in &reports {
        println!("{report}");
    }
    assert!(reports.iter().all(|r| r.passed()), "violations in {path}");
}
