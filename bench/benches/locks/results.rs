//! Everything measured: one record per run, latency samples for the plots, and the problems
//! (errors, overlaps) that make a smoke run fail.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::stats::{median_metrics, Metrics};

/// One run of one implementation (or configuration) in one workload.
#[derive(Debug, Clone)]
pub(crate) struct RunRecord {
    pub(crate) workload: &'static str,
    pub(crate) label: String,
    pub(crate) run: usize,
    pub(crate) metrics: Metrics,
}

/// What the whole benchmark measured.
#[derive(Debug, Default)]
pub(crate) struct Results {
    pub(crate) records: Vec<RunRecord>,
    /// Latency samples pooled over runs, by (plot, label), in microseconds.
    pub(crate) samples: BTreeMap<(&'static str, String), Vec<f64>>,
    /// Errors where none were expected, overlaps, lost locks: a smoke run fails on any.
    pub(crate) problems: Vec<String>,
}

impl Results {
    pub(crate) fn record(
        &mut self,
        workload: &'static str,
        label: impl Into<String>,
        run: usize,
        metrics: Metrics,
    ) {
        self.records.push(RunRecord {
            workload,
            label: label.into(),
            run,
            metrics,
        });
    }

    pub(crate) fn add_samples(&mut self, plot: &'static str, label: &str, samples: &[Duration]) {
        self.samples
            .entry((plot, label.to_owned()))
            .or_default()
            .extend(samples.iter().map(|d| crate::stats::micros(*d)));
    }

    pub(crate) fn problem(&mut self, problem: impl Into<String>) {
        let problem = problem.into();
        eprintln!("PROBLEM: {problem}");
        self.problems.push(problem);
    }

    /// The labels measured in a workload, in the order they were first recorded.
    pub(crate) fn labels(&self, workload: &str) -> Vec<String> {
        let mut labels: Vec<String> = Vec::new();
        for record in self.records.iter().filter(|r| r.workload == workload) {
            if !labels.contains(&record.label) {
                labels.push(record.label.clone());
            }
        }
        labels
    }

    /// The median of each figure over the runs of `label` in `workload`.
    pub(crate) fn summary(&self, workload: &str, label: &str) -> Option<Metrics> {
        let runs: Vec<&Metrics> = self
            .records
            .iter()
            .filter(|r| r.workload == workload && r.label == label)
            .map(|r| &r.metrics)
            .collect();
        (!runs.is_empty()).then(|| median_metrics(&runs))
    }

    /// One median figure, NaN when it was not measured.
    pub(crate) fn figure(&self, workload: &str, label: &str, name: &str) -> f64 {
        self.summary(workload, label)
            .and_then(|m| m.get(name).copied())
            .unwrap_or(f64::NAN)
    }
}
