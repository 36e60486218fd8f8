//! Parallel: many tasks, each on its own key, lock + unlock pairs as fast as they go.

use std::time::{Duration, Instant};

use redlock_testkit::RedisCluster;
use tokio::runtime::Runtime;

use crate::lab::Lab;
use crate::locker::{within, Locker, Spec};
use crate::mode::Sizes;
use crate::results::Results;
use crate::stats::{micros, Metrics};

pub(crate) const WORKLOAD: &str = "parallel";

pub(crate) fn run_all(runtime: &Runtime, lab: &Lab, sizes: &Sizes, results: &mut Results) {
    for run in 0..sizes.runs {
        for (spec, locker) in &lab.lockers {
            let cluster = lab.cluster(*spec);
            let fencing_before = fencing(locker);
            let before = cpu_now(cluster, spec.nodes);
            let (pairs, elapsed, errors) = runtime.block_on(one_run(*spec, locker, sizes, run));
            let after = cpu_now(cluster, spec.nodes);
            let fencing_after = fencing(locker);
            for err in errors.iter().take(3) {
                results.problem(format!("{WORKLOAD} {spec} run {run}: {err}"));
            }
            let mut metrics = Metrics::new();
            metrics.insert("ops_per_s".into(), pairs as f64 / elapsed.as_secs_f64());
            metrics.insert("pairs".into(), pairs as f64);
            metrics.insert("errors".into(), errors.len() as f64);
            if let (Some(before), Some(after)) = (fencing_before, fencing_after) {
                // Steady state: every task's key is held again and again by one client.
                let new_holds = after.new_holds - before.new_holds;
                let written_back = after.written_back - before.written_back;
                metrics.insert(
                    "write_back_fraction".into(),
                    written_back as f64 / new_holds.max(1) as f64,
                );
            }
            match (before, after) {
                (Ok((client0, servers0)), Ok((client1, servers1))) => {
                    let per_pair = |d: Duration| micros(d) / pairs.max(1) as f64;
                    metrics.insert("client_cpu_us_per_pair".into(), per_pair(client1 - client0));
                    metrics.insert(
                        "server_cpu_us_per_pair".into(),
                        per_pair(servers1 - servers0),
                    );
                }
                (Err(err), _) | (_, Err(err)) => {
                    results.problem(format!("{WORKLOAD} {spec}: {err}"));
                }
            }
            results.record(WORKLOAD, spec.to_string(), run, metrics);
        }
    }
}

/// Ours' fencing counters (`None` for the others).
fn fencing(locker: &Locker) -> Option<redlock_reentrant::FencingStats> {
    match locker {
        Locker::Ours(ours) => Some(ours.client.fencing_stats()),
        _ => None,
    }
}

/// This process's CPU time and the servers'.
fn cpu_now(cluster: &RedisCluster, nodes: usize) -> Result<(Duration, Duration), String> {
    Ok((
        crate::cpu::process_cpu()?,
        crate::cpu::servers_cpu(cluster, nodes)?,
    ))
}

/// Pairs done, the time until every task finished, and the errors.
async fn one_run(
    spec: Spec,
    locker: &Locker,
    sizes: &Sizes,
    run: usize,
) -> (u64, Duration, Vec<String>) {
    let started = Instant::now();
    let deadline = started + sizes.parallel_for;
    let tasks: Vec<_> = (0..sizes.parallel_tasks)
        .map(|task| {
            let locker = locker.clone();
            let limit = sizes.op_timeout;
            tokio::spawn(async move {
                let key = format!("bench:par:{spec}:{run}:{task}");
                let mut pairs = 0u64;
                while Instant::now() < deadline {
                    let pair = async {
                        let handle = within(limit, locker.lock(&key)).await?;
                        within(limit, locker.unlock(handle)).await
                    };
                    match pair.await {
                        Ok(()) => pairs += 1,
                        Err(err) => return (pairs, Some(err)),
                    }
                }
                (pairs, None)
            })
        })
        .collect();
    let mut pairs = 0;
    let mut errors = Vec::new();
    for task in tasks {
        match task.await {
            Ok((done, error)) => {
                pairs += done;
                errors.extend(error);
            }
            Err(err) => errors.push(err.to_string()),
        }
    }
    (pairs, started.elapsed(), errors)
}
