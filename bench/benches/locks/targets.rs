//! The targets, each reached (PASS) or not (MISS), with the measured figure. Figures
//! are medians over runs, except where a target says "never" or "0": those take every run.

use crate::locker::{Kind, Spec};
use crate::results::Results;
use crate::{contended, parallel, quorum_down, stopped, uncontended, watchdog_scale};

/// One target and how it went.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    pub(crate) name: String,
    pub(crate) measured: String,
    pub(crate) pass: bool,
}

impl Target {
    fn new(name: impl Into<String>, pass: bool, measured: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            measured: measured.into(),
            pass,
        }
    }

    pub(crate) fn verdict(&self) -> &'static str {
        if self.pass {
            "PASS"
        } else {
            "MISS"
        }
    }
}

/// A target on the ratio of one figure of ours to the same figure of another implementation.
struct Ratio {
    workload: &'static str,
    figure: &'static str,
    /// What the figure is called in the target, and its unit.
    shown: (&'static str, &'static str),
    /// Whether ours must be at most (latency) or at least (throughput) `limit` times theirs.
    at_most: bool,
}

impl Ratio {
    fn target(&self, results: &Results, ours: Spec, peer: Spec, limit: f64) -> Target {
        let mine = results.figure(self.workload, &ours.to_string(), self.figure);
        let theirs = results.figure(self.workload, &peer.to_string(), self.figure);
        let ratio = mine / theirs;
        let (pass, relation) = if self.at_most {
            (ratio <= limit, "<=")
        } else {
            (ratio >= limit, ">=")
        };
        let (name, unit) = self.shown;
        Target::new(
            format!("{name}: {ours} {relation} {limit:.2}x {peer}"),
            pass,
            format!("{ratio:.2}x ({mine:.0} {unit} vs {theirs:.0} {unit})"),
        )
    }
}

const OURS_1: Spec = Spec::new(Kind::Ours, 1);
const OURS_5: Spec = Spec::new(Kind::Ours, 5);

pub(crate) fn evaluate(results: &Results) -> Vec<Target> {
    let mut targets = Vec::new();
    let fig =
        |workload: &str, spec: Spec, name: &str| results.figure(workload, &spec.to_string(), name);

    // Latency and throughput against the floor and against rslock.
    let floor = Spec::floor();
    let latency = Ratio {
        workload: uncontended::WORKLOAD,
        figure: "pair_p50_us",
        shown: ("uncontended lock + unlock p50", "µs"),
        at_most: true,
    };
    let throughput = Ratio {
        workload: parallel::WORKLOAD,
        figure: "ops_per_s",
        shown: ("parallel pairs/s", "/s"),
        at_most: false,
    };
    targets.push(latency.target(results, OURS_1, floor, 1.10));
    targets.push(latency.target(results, OURS_5, OURS_5.rslock_peer(), 1.0));
    targets.push(throughput.target(results, OURS_1, floor, 0.75));
    targets.push(throughput.target(results, OURS_1, OURS_1.rslock_peer(), 1.0));
    targets.push(throughput.target(results, OURS_5, OURS_5.rslock_peer(), 1.0));

    // Where a pair's cost goes, one master: the client's CPU, the servers' CPU, wake-ups.
    let client_cpu = Ratio {
        workload: parallel::WORKLOAD,
        figure: "client_cpu_us_per_pair",
        shown: ("parallel client CPU per pair", "µs"),
        at_most: true,
    };
    let server_cpu = Ratio {
        workload: parallel::WORKLOAD,
        figure: "server_cpu_us_per_pair",
        shown: ("parallel servers' CPU per pair", "µs"),
        at_most: true,
    };
    targets.push(client_cpu.target(results, OURS_1, OURS_1.rslock_peer(), 1.0));
    targets.push(server_cpu.target(results, OURS_1, floor, 2.0));
    let switches = |spec: Spec| fig(uncontended::WORKLOAD, spec, "context_switches_per_pair");
    let (mine, raw) = (switches(OURS_1), switches(floor));
    targets.push(Target::new(
        format!("uncontended context switches per pair: {OURS_1} <= {floor} + 1"),
        mine <= raw + 1.0,
        format!("{mine:.1} vs {raw:.1}"),
    ));

    // Contention.
    for ours in [OURS_1, OURS_5] {
        let p99 = fig(contended::WORKLOAD, ours, "handover_p99_us");
        targets.push(Target::new(
            format!("contended hand-over p99 <= 1 ms, {ours}"),
            p99 <= 1_000.0,
            format!("{:.3} ms", p99 / 1e3),
        ));
        let wait = fig(contended::WORKLOAD, ours, "wait_max_incl_unfinished_ms");
        targets.push(Target::new(
            format!("contended wait max <= 50 ms, {ours}"),
            wait <= 50.0,
            format!("{wait:.1} ms"),
        ));
        let fairness = fig(contended::WORKLOAD, ours, "fairness");
        targets.push(Target::new(
            format!("contended fairness (min/max per task) >= 0.8, {ours}"),
            fairness >= 0.8,
            format!("{fairness:.2}"),
        ));
        // The least a hand-over can cost: one acquisition and one release on every master.
        let minimum = 2.0 * ours.nodes as f64;
        let requests = fig(contended::WORKLOAD, ours, "requests_per_acq");
        targets.push(Target::new(
            format!(
                "contended Redis requests per acquisition <= 1.2x the minimum ({minimum:.0}), {ours}"
            ),
            requests <= 1.2 * minimum,
            format!("{requests:.1} ({:.2}x)", requests / minimum),
        ));
    }
    let overlaps: f64 = results
        .records
        .iter()
        .filter(|r| r.workload == contended::WORKLOAD)
        .filter_map(|r| r.metrics.get("overlaps"))
        .sum();
    targets.push(Target::new(
        "contended: 0 overlaps, every implementation, every run",
        overlaps == 0.0,
        format!("{overlaps:.0}"),
    ));

    // Faults.
    let give_up = results.figure(quorum_down::WORKLOAD, "ours-5", "give_up_max_us") / 1e3;
    let node_timeout = results.figure(quorum_down::WORKLOAD, "ours-5", "node_timeout_ms");
    targets.push(Target::new(
        "3 of 5 dead, no retries: ours-5 gives up within per-node timeout + 5 ms",
        give_up <= node_timeout + 5.0,
        format!("{give_up:.2} ms (limit {:.0} ms)", node_timeout + 5.0),
    ));

    // A stopped minority: against the same run's healthy phase.
    for stopped in [1, 2] {
        let label = stopped::label("ours-5", stopped);
        for (quantile, limit) in [("p50", 1.5), ("p99", 3.0)] {
            let ratio = results.figure(
                stopped::WORKLOAD,
                &label,
                &format!("pair_{quantile}_x_healthy"),
            );
            targets.push(Target::new(
                format!("{stopped} of 5 stopped, node timeout {} ms: ours-5 lock + unlock pair {quantile} <= {limit:.1}x healthy", stopped::OUR_TIMEOUT.as_millis()),
                ratio <= limit,
                format!("{ratio:.2}x"),
            ));
        }
    }
    let label = stopped::label("ours-5", 1);
    let kept = results.figure(stopped::CONTENDED, &label, "acq_per_s_x_healthy");
    targets.push(Target::new(
        format!(
            "1 of 5 stopped: {} tasks contending keep >= 0.70x the healthy acquisitions/s, ours-5",
            stopped::CONTENDING_TASKS
        ),
        kept >= 0.7,
        format!("{kept:.2}x"),
    ));

    // Watchdog.
    let wd = |name: &str| results.figure(watchdog_scale::WORKLOAD, "ours", name);
    let (calls, limit, locks) = (
        wd("calls_per_node_per_round"),
        wd("calls_limit"),
        wd("locks"),
    );
    targets.push(Target::new(
        format!("watchdog: {locks:.0} locks renewed with <= ceil(locks / batch) = {limit:.0} calls per node per round"),
        calls <= limit,
        format!("{calls:.1}"),
    ));
    let lowest = results
        .records
        .iter()
        .filter(|r| r.workload == watchdog_scale::WORKLOAD)
        .filter_map(|r| r.metrics.get("lowest_pttl_ms").copied())
        .fold(f64::NAN, f64::min);
    let floor_ms = wd("pttl_floor_ms");
    targets.push(Target::new(
        format!("watchdog: PTTL never below 2/3 of the timeout ({floor_ms:.0} ms), every run"),
        lowest >= floor_ms,
        format!("lowest {lowest:.0} ms"),
    ));
    targets
}
