//! A finished fault run: the checkers' reports over its history, and how to replay it.

use std::path::{Path, PathBuf};

use crate::check::Report;
use crate::history::Event;

/// A finished run: the checkers' reports over its history.
#[derive(Debug)]
pub struct Outcome {
    pub(crate) name: String,
    pub(crate) seed: u64,
    /// One report per checker.
    pub reports: Vec<Report>,
    /// The whole history, in time order.
    pub events: Vec<Event>,
    pub(crate) history: PathBuf,
}

impl Outcome {
    /// The report of `checker`.
    pub fn report(&self, checker: &str) -> &Report {
        self.reports
            .iter()
            .find(|r| r.checker == checker)
            .unwrap_or_else(|| panic!("no checker named {checker}"))
    }

    /// Whether every checker passed.
    pub fn passed(&self) -> bool {
        self.reports.iter().all(Report::passed)
    }

    /// The checkers that found violations.
    pub fn failed_checkers(&self) -> Vec<&'static str> {
        self.reports
            .iter()
            .filter(|r| !r.passed())
            .map(|r| r.checker)
            .collect()
    }

    /// The seed and the history's path, for a failure message.
    pub fn replay_hint(&self) -> String {
        replay_hint(&self.name, self.seed, &self.history)
    }

    /// Panics with every report, the seed and the history's path unless all checkers passed.
    pub fn assert_passed(&self) {
        if !self.passed() {
            let reports: Vec<String> = self.reports.iter().map(ToString::to_string).collect();
            panic!(
                "checkers found violations:\n{}\n{}",
                reports.join("\n"),
                self.replay_hint()
            );
        }
    }

    /// Removes the history (the scenario got what it expected), unless `KEEP_HISTORY` is set.
    pub fn discard(self) {
        if std::env::var_os("KEEP_HISTORY").is_some() {
            eprintln!("{}", self.replay_hint());
            return;
        }
        if let Some(dir) = self.history.parent() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }

    /// Prints every report (the scenario's figures).
    pub fn print(&self) {
        eprintln!("[{}] seed {}", self.name, self.seed);
        for report in &self.reports {
            eprintln!("{report}");
        }
    }
}

pub(crate) fn replay_hint(name: &str, seed: u64, history: &Path) -> String {
    format!(
        "scenario {name}: replay with TEST_SEED={seed}; history at {}",
        history.display()
    )
}
