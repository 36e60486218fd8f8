//! The lock benchmark: ours against a raw `SET NX` floor and `rslock`, in one run, on local
//! redis-server masters this program starts.
//!
//! `cargo bench -p redlock-bench --bench locks` is the full run: every workload three times,
//! medians and ratios, `docs/benchmarks.md`, `docs/bench-*.svg` and
//! `target/bench/results.jsonl`. `cargo test -p redlock-bench --bench locks` is the smoke run:
//! every workload and implementation with tiny counts, the report in a temporary directory, and
//! a non-zero exit on any error or overlap (the timed targets are not asserted).
//!
//! Workloads: uncontended pair latency, parallel throughput, one contended key (hand-over,
//! fairness, overlaps, commands per acquisition), the read-write lock (readers only and a 90 %
//! read mix, beside the reentrant lock on one key), a quorum down, stopped nodes, and the watchdog
//! renewing many locks.

mod allocs;
mod contended;
mod core;
mod cpu;
mod family;
mod lab;
mod locker;
mod machine;
mod mode;
mod ours;
mod parallel;
mod paths;
mod plots;
mod pttl_sampler;
mod quorum_down;
mod raw;
mod redis_stats;
mod report;
mod results;
mod rw;
mod self_test;
mod stats;
mod stopped;
mod targets;
mod theirs;
mod uncontended;
mod watchdog_scale;

use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use tokio::runtime::Runtime;

use crate::lab::Lab;
use crate::machine::Machine;
use crate::mode::{Mode, Selection, Sizes};
use crate::report::Report;
use crate::results::Results;

fn main() -> ExitCode {
    let mode = Mode::from_args();
    if let Some(run) = watchdog_scale::child_run() {
        return watchdog_scale::child_main(&mode.sizes(), run);
    }
    let selection = Selection::from_args();
    let sizes = mode.sizes();
    let started = Instant::now();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let mut results = Results::default();
    eprintln!(
        "locks benchmark: {mode:?} run, {} run(s) of each workload",
        sizes.runs
    );

    self_test::run(&runtime, &sizes, &mut results);
    run_workloads(&runtime, &selection, &sizes, &mut results, started);
    drop(runtime);

    let targets = targets::evaluate(&results);
    let machine = Machine::describe();
    // A partial run never overwrites the report of a whole one.
    let output = if selection.is_partial() {
        Mode::Smoke
    } else {
        mode
    };
    let written = write_outputs(output, &results, &targets, &machine, &sizes, started);
    if let Err(err) = &written {
        results.problem(format!("could not write the report: {err}"));
    }
    let report = Report {
        results: &results,
        targets: &targets,
        machine: &machine,
        sizes: &sizes,
        took: started.elapsed(),
        plots: Vec::new(),
    };
    println!("{}", report.summary());
    if let Ok(place) = written {
        println!("report: {place}");
    }
    if results.problems.is_empty() {
        ExitCode::SUCCESS
    } else {
        eprintln!("{} problem(s):", results.problems.len());
        for problem in &results.problems {
            eprintln!("  {problem}");
        }
        ExitCode::FAILURE
    }
}

type LabWorkload = fn(&Runtime, &Lab, &Sizes, &mut Results);
type Workload = fn(&Runtime, &Sizes, &mut Results);

/// The lock workloads on shared servers and clients, then the fault and watchdog workloads
/// with servers of their own.
fn run_workloads(
    runtime: &Runtime,
    selection: &Selection,
    sizes: &Sizes,
    results: &mut Results,
    started: Instant,
) {
    let on_lab: [(&str, LabWorkload); 5] = [
        (uncontended::WORKLOAD, uncontended::run_all),
        (parallel::WORKLOAD, parallel::run_all),
        (contended::WORKLOAD, contended::run_all),
        (rw::WORKLOAD, rw::run_all),
        (family::WORKLOAD, family::run_all),
    ];
    let on_lab: Vec<_> = on_lab
        .into_iter()
        .filter(|(w, _)| selection.wants(w))
        .collect();
    if !on_lab.is_empty() {
        match Lab::start(runtime, &selection.specs()) {
            Ok(lab) => {
                for (workload, run_all) in on_lab {
                    step(workload, started);
                    run_all(runtime, &lab, sizes, results);
                }
                lab.close(runtime);
            }
            Err(err) => results.problem(format!("could not set up: {err}")),
        }
    }
    let alone: [(&str, Workload); 3] = [
        (quorum_down::WORKLOAD, quorum_down::run_all),
        (stopped::WORKLOAD, stopped::run_all),
        (watchdog_scale::WORKLOAD, watchdog_scale::run_all),
    ];
    for (workload, run_all) in alone.into_iter().filter(|(w, _)| selection.wants(w)) {
        step(workload, started);
        run_all(runtime, sizes, results);
    }
}

fn step(name: &str, started: Instant) {
    eprintln!("[{:6.1} s] {name}", started.elapsed().as_secs_f64());
}

/// Writes the Markdown, the plots and the JSON lines: into the workspace for a full run, into a
/// temporary directory (removed at exit) for a smoke run. Returns where.
fn write_outputs(
    mode: Mode,
    results: &Results,
    targets: &[targets::Target],
    machine: &Machine,
    sizes: &Sizes,
    started: Instant,
) -> Result<String, String> {
    let scratch;
    let (docs, jsonl) = match mode {
        Mode::Full => (paths::docs(), paths::bench_target().join("results.jsonl")),
        Mode::Smoke => {
            scratch = tempfile::tempdir().map_err(|e| e.to_string())?;
            (
                scratch.path().to_owned(),
                scratch.path().join("results.jsonl"),
            )
        }
    };
    let mut plots = Vec::new();
    for (plot, caption, file, title) in [
        (
            uncontended::WORKLOAD,
            "uncontended",
            "bench-uncontended.svg",
            "Uncontended lock + unlock pair latency (CDF)",
        ),
        (
            contended::HANDOVER,
            "hand-over",
            "bench-handover.svg",
            "Contended hand-over latency, release to another task's acquisition (CDF)",
        ),
    ] {
        if plots::cdf(results, plot, title, &docs.join(file))? {
            plots.push((file.to_owned(), caption));
        }
    }
    let report = Report {
        results,
        targets,
        machine,
        sizes,
        took: started.elapsed(),
        plots,
    };
    write(&docs.join("benchmarks.md"), &report.markdown())?;
    write(&jsonl, &report.json_lines())?;
    Ok(match mode {
        Mode::Full => format!(
            "{} and {}",
            docs.join("benchmarks.md").display(),
            jsonl.display()
        ),
        Mode::Smoke => format!(
            "written to a temporary directory ({}), removed again",
            docs.display()
        ),
    })
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}
