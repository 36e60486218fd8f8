//! Checkers for the fault suite's history: pure functions over the events (sorted by time, as
//! [`read_history`](crate::history::read_history) returns them) that report every violation of
//! a promise the locks make, with the figures a scenario report quotes.
//!
//! | checker | promise |
//! |---|---|
//! | [`check_fencing`] | the resource accepts no operation with a token older than one it accepted |
//! | [`check_overlap`] | no two workers believe they hold the same lock at once |
//! | [`check_token_order`] | a later acquisition gets a larger fencing token, never a used one |
//! | [`check_counter`] | the counter lost no increment and gained none from nowhere |
//! | [`check_quiescence`] | nothing is left behind: no keys, registrations, holds, stray renewals |
//!
//! Times in messages are milliseconds since the history's first event.

use std::fmt;
use std::time::Duration;

use crate::history::{Event, Op, Phase};

mod beliefs;
mod counter;
mod fencing;
mod figures;
mod overlap;
mod quiescence;
mod token_order;

pub use beliefs::{beliefs, Belief, BeliefEnd};
pub use counter::check_counter;
pub use fencing::check_fencing;
pub use figures::{kill_to_reacquire, lost_after_resume, success_rate};
pub use overlap::check_overlap;
pub use quiescence::check_quiescence;
pub use token_order::check_token_order;

/// What the checkers assume about the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckConfig {
    /// A worker SIGSTOPped for longer than this no longer counts as believing it holds its
    /// locks: its belief ends at the stop, since no lease lock survives a pause longer than the
    /// lease. Set it to the least validity a hold can have when a pause begins; with the
    /// watchdog that is about two thirds of its timeout (the last renewal may be a third old).
    /// Default 20 s (the default 30 s watchdog timeout).
    pub pause_bound: Duration,
}

impl Default for CheckConfig {
    fn default() -> Self {
        CheckConfig {
            pause_bound: Duration::from_secs(20),
        }
    }
}

/// What one checker found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// The checker's name (`fencing`, `overlap`, ...).
    pub checker: &'static str,
    /// Every violation, each naming the actors, times and tokens involved.
    pub violations: Vec<String>,
    /// Measured figures, e.g. `("stale_writes_rejected", 3)`.
    pub figures: Vec<(String, u64)>,
}

impl Report {
    fn new(checker: &'static str) -> Report {
        Report {
            checker,
            violations: Vec::new(),
            figures: Vec::new(),
        }
    }

    fn push_figure(&mut self, name: &str, value: impl TryInto<u64>) {
        self.figures
            .push((name.to_owned(), value.try_into().unwrap_or(u64::MAX)));
    }

    /// Whether the history kept the checker's promise (no violation).
    pub fn passed(&self) -> bool {
        self.violations.is_empty()
    }

    /// The figure `name`, if the checker measured it.
    pub fn figure(&self, name: &str) -> Option<u64> {
        self.figures
            .iter()
            .find(|(figure, _)| figure == name)
            .map(|&(_, value)| value)
    }
}

/// How many violations [`Report`]'s `Display` prints before it only counts the rest.
const PRINTED_VIOLATIONS: usize = 10;

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let verdict = if self.passed() { "PASS" } else { "FAIL" };
        write!(f, "{}: {verdict}", self.checker)?;
        for (name, value) in &self.figures {
            write!(f, "\n  {name} = {value}")?;
        }
        for violation in self.violations.iter().take(PRINTED_VIOLATIONS) {
            write!(f, "\n  VIOLATION {violation}")?;
        }
        if self.violations.len() > PRINTED_VIOLATIONS {
            let more = self.violations.len() - PRINTED_VIOLATIONS;
            write!(f, "\n  ... and {more} more violations")?;
        }
        Ok(())
    }
}

/// Runs every checker over `events` (sorted by time).
pub fn check_all(events: &[Event], config: &CheckConfig) -> Vec<Report> {
    vec![
        check_fencing(events),
        check_overlap(events, config),
        check_token_order(events),
        check_counter(events),
        check_quiescence(events),
    ]
}

/// Whether every report passed.
pub fn all_passed(reports: &[Report]) -> bool {
    reports.iter().all(Report::passed)
}

/// Renders times as milliseconds since the history's first event.
#[derive(Debug, Clone, Copy)]
struct Clock(u64);

impl Clock {
    fn of(events: &[Event]) -> Clock {
        Clock(events.first().map_or(0, |event| event.t))
    }

    /// `t` as e.g. `1234.5ms`.
    fn at(self, t: u64) -> String {
        format!("{:.1}ms", t.saturating_sub(self.0) as f64 / 1e6)
    }
}

/// Milliseconds between two clock readings, for messages.
fn span_ms(from: u64, to: u64) -> String {
    format!("{:.1}ms", to.saturating_sub(from) as f64 / 1e6)
}

/// Whether `actor` is a worker: `w<N>`, or `w<N>.<T>` for task T of a worker running several loops.
fn is_worker(actor: &str) -> bool {
    let numeric = |n: &str| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit());
    actor
        .strip_prefix('w')
        .is_some_and(|n| match n.split_once('.') {
            Some((worker, task)) => numeric(worker) && numeric(task),
            None => numeric(n),
        })
}

/// The event's `lock` field (`?` when missing, so a malformed event still shows up).
fn lock_of(event: &Event) -> &str {
    event.field("lock").unwrap_or("?")
}

/// The target of a nemesis event `op` (`fault` or `heal`, phase `ok`) of `kind`, if `event`
/// is one.
fn nemesis_target<'e>(event: &'e Event, op: Op, kind: &str) -> Option<&'e str> {
    let matches = event.actor == "nemesis"
        && event.op == op
        && event.phase == Phase::Ok
        && event.field("kind") == Some(kind);
    matches.then(|| event.field("target")).flatten()
}

/// A [`Duration`] in clock nanoseconds.
fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod test_support {
    use crate::history::Event;

    /// A history from text lines in the history format, with times in MILLISECONDS (turned
    /// into nanoseconds), sorted by time like `read_history`. Blank lines and `#` comments
    /// are skipped.
    pub(super) fn history(text: &str) -> Vec<Event> {
        let mut events: Vec<Event> = text
            .lines()
            .map(str::trim)
            .filter(|line| !line.is_empty() && !line.starts_with('#'))
            .map(|line| {
                let mut event = Event::parse(line).unwrap_or_else(|| panic!("bad line: {line}"));
                event.t *= 1_000_000;
                event
            })
            .collect();
        events.sort_by_key(|event| event.t);
        events
    }
}

#[cfg(test)]
mod tests {
    use super::test_support::history;
    use super::*;

    #[test]
    fn a_report_prints_figures_and_caps_violations() {
        let mut report = Report::new("demo");
        report.push_figure("things", 3_usize);
        assert!(report.passed());
        assert_eq!(report.figure("things"), Some(3));
        assert_eq!(report.to_string(), "demo: PASS\n  things = 3");
        report.violations = (0..12).map(|i| format!("v{i}")).collect();
        let text = report.to_string();
        assert!(!report.passed());
        assert!(text.starts_with("demo: FAIL\n  things = 3\n  VIOLATION v0"));
        assert!(text.contains("v9") && !text.contains("v10"));
        assert!(text.ends_with("... and 2 more violations"));
    }

    #[test]
    fn check_all_runs_every_checker_and_a_clean_run_passes() {
        let events = history(
            "
            0 w1 acquire invoke lock=L depth=1
            1 w1 acquire ok lock=L depth=1 token=5
            2 w1 renew info lock=L
            3 w1 write invoke lock=L token=5 value=1
            4 w1 write ok lock=L token=5 value=1 seq=1
            5 w1 release invoke lock=L depth=1
            6 w1 release ok lock=L depth=1
            7 test note info what=quiesce
            8 w1 stats info registered=0 holds=0 renewed=1
            9 test note info what=value lock=L value=1
            9 test note info what=final keys=0
            ",
        );
        let reports = check_all(&events, &CheckConfig::default());
        let names: Vec<_> = reports.iter().map(|report| report.checker).collect();
        assert_eq!(
            names,
            ["fencing", "overlap", "token_order", "counter", "quiescence"]
        );
        assert!(all_passed(&reports), "{reports:#?}");
    }

    #[test]
    fn times_are_relative_to_the_first_event() {
        let events = history("1000 w1 spawn ok\n1002 w2 spawn ok");
        assert_eq!(Clock::of(&events).at(events[1].t + 500_000), "2.5ms");
        assert!(is_worker("w12") && !is_worker("w") && !is_worker("nemesis"));
    }
}
