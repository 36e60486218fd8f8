//! Percentiles of latency samples, and medians of figures over runs.

use std::collections::BTreeMap;
use std::time::Duration;

/// The figures of one run of one implementation in one workload, by name. Durations are in
/// microseconds (`_us`) or milliseconds (`_ms`), as their names say.
pub(crate) type Metrics = BTreeMap<String, f64>;

pub(crate) fn micros(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e6
}

pub(crate) fn millis(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

/// The `q`-quantile (0..=1) of sorted samples, nearest rank; zero for no samples.
pub(crate) fn quantile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    // Nearest rank: the smallest sample with at least q of the samples at or below it.
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Adds `{name}_p50_us`, `_p90_us`, `_p99_us` and `_max_us` of `samples` to `metrics`.
pub(crate) fn add_percentiles(metrics: &mut Metrics, name: &str, samples: &[Duration]) {
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    for (suffix, q) in [("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("max", 1.0)] {
        metrics.insert(format!("{name}_{suffix}_us"), micros(quantile(&sorted, q)));
    }
}

/// The median of some values (the mean of the middle two for an even count); NaN for none.
pub(crate) fn median(values: &[f64]) -> f64 {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| !v.is_nan()).collect();
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    if sorted.len() % 2 == 1 {
        sorted[mid]
    } else {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    }
}

/// Each figure's median over the runs.
pub(crate) fn median_metrics(runs: &[&Metrics]) -> Metrics {
    let mut values: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for run in runs {
        for (name, value) in *run {
            values.entry(name).or_default().push(*value);
        }
    }
    values
        .into_iter()
        .map(|(name, values)| (name.to_owned(), median(&values)))
        .collect()
}
