//! Watchdog scale: one client holds many locks with the watchdog lease (a short timeout), and
//! renews them all. Renewal calls per node per round, the lowest PTTL any lock shows, and the
//! client's CPU time and memory per held lock.

use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use redlock_testkit::RedisCluster;
use serde_json::json;
use tokio::runtime::Runtime;

use crate::mode::Sizes;
use crate::ours::Ours;
use crate::pttl_sampler;
use crate::results::Results;
use crate::stats::{micros, millis, Metrics};

pub(crate) const WORKLOAD: &str = "watchdog";

/// The watchdog timeout: renewals every second, a PTTL that should stay above 2 s.
pub(crate) const TIMEOUT: Duration = Duration::from_secs(3);
/// How many masters the locks are held on.
pub(crate) const NODES: usize = 5;
/// How many tasks take the locks.
pub(crate) const TAKERS: usize = 64;

/// How long after `shutdown()` returned the lock keys are counted a second time.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(1);

/// Each run is a child process of its own (this program, re-run with [`CHILD_ARG`]), so its
/// memory and CPU time are the client's alone, on a fresh heap.
pub(crate) fn run_all(_runtime: &Runtime, sizes: &Sizes, results: &mut Results) {
    for run in 0..sizes.runs {
        match in_child(run) {
            Ok((metrics, problems)) => {
                results.problems.extend(problems);
                results.record(WORKLOAD, "ours", run, metrics);
            }
            Err(err) => results.problem(format!("{WORKLOAD} run {run}: {err}")),
        }
    }
}

/// The argument that makes this program run one watchdog run and print its figures.
const CHILD_ARG: &str = "--watchdog-child=";

/// The run number, when this process is a watchdog child.
pub(crate) fn child_run() -> Option<usize> {
    std::env::args().find_map(|arg| arg.strip_prefix(CHILD_ARG)?.parse().ok())
}

/// A watchdog child: one run, its figures and problems as one JSON line on standard output.
pub(crate) fn child_main(sizes: &Sizes, run: usize) -> ExitCode {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let mut results = Results::default();
    let metrics = one_run(&runtime, sizes, run, &mut results).unwrap_or_else(|err| {
        results.problem(format!("{WORKLOAD} run {run}: {err}"));
        Metrics::new()
    });
    println!(
        "{}",
        json!({ "metrics": metrics, "problems": results.problems })
    );
    ExitCode::SUCCESS
}

fn in_child(run: usize) -> Result<(Metrics, Vec<String>), String> {
    let program = std::env::current_exe().map_err(|e| e.to_string())?;
    let output = Command::new(program)
        .arg(format!("{CHILD_ARG}{run}"))
        .args(std::env::args().skip(1).filter(|arg| arg == "--bench"))
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| e.to_string())?;
    if !output.status.success() {
        return Err(format!("the child process failed: {}", output.status));
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout.lines().last().unwrap_or_default();
    let report: serde_json::Value = serde_json::from_str(line).map_err(|e| e.to_string())?;
    let metrics = report["metrics"]
        .as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(name, v)| Some((name.clone(), v.as_f64()?)))
                .collect()
        })
        .unwrap_or_default();
    let problems = report["problems"]
        .as_array()
        .map(|p| {
            p.iter()
                .filter_map(|v| Some(v.as_str()?.to_owned()))
                .collect()
        })
        .unwrap_or_default();
    Ok((metrics, problems))
}

fn one_run(
    runtime: &Runtime,
    sizes: &Sizes,
    run: usize,
    results: &mut Results,
) -> Result<Metrics, String> {
    let cluster = RedisCluster::try_start(NODES).map_err(|e| e.to_string())?;
    let urls = cluster.urls();
    let ours = runtime.block_on(Ours::connect(&urls, None, |b| {
        b.watchdog_timeout(TIMEOUT)
            .renew_batch_size(sizes.watchdog_batch)
    }))?;
    let locks = sizes.watchdog_locks;
    let mut metrics = Metrics::new();

    let (rss_before, cpu_before) = (crate::cpu::rss_bytes()?, crate::cpu::process_cpu()?);
    let taken_at = Instant::now();
    runtime
        .block_on(take_all(&ours, run, locks, sizes.op_timeout))
        .map_err(|e| format!("taking the locks: {e}"))?;
    let acquire = taken_at.elapsed();
    let (rss_held, cpu_taken) = (crate::cpu::rss_bytes()?, crate::cpu::process_cpu()?);
    metrics.insert("acquire_s".into(), acquire.as_secs_f64());
    metrics.insert(
        "acquire_cpu_us_per_lock".into(),
        micros(cpu_taken - cpu_before) / locks as f64,
    );
    metrics.insert(
        "rss_bytes_per_lock".into(),
        (rss_held as f64 - rss_before as f64) / locks as f64,
    );

    let before = ours.client.watchdog().stats();
    let prefix = format!("redlock:bench:wd:{run}:");
    let seen = pttl_sampler::sample(&urls, &prefix, locks, sizes.watchdog_hold)
        .map_err(|e| format!("sampling PTTLs: {e}"))?;
    let after = ours.client.watchdog().stats();
    // The client's CPU time while holding, the sampler's left out.
    let cpu_held = crate::cpu::process_cpu()? - seen.cpu;
    let rounds = after.rounds - before.rounds;
    metrics.insert("rounds".into(), rounds as f64);
    let per_round = |n: u64| {
        if rounds == 0 {
            f64::NAN
        } else {
            n as f64 / rounds as f64
        }
    };
    metrics.insert(
        "calls_per_node_per_round".into(),
        per_round(after.calls_per_node - before.calls_per_node),
    );
    metrics.insert(
        "calls_limit".into(),
        locks.div_ceil(sizes.watchdog_batch) as f64,
    );
    metrics.insert(
        "renewed_per_round".into(),
        per_round(after.renewed - before.renewed),
    );
    metrics.insert(
        "hold_cpu_us_per_lock_per_round".into(),
        per_round(1) * micros(cpu_held - cpu_taken) / locks as f64,
    );
    metrics.insert("lowest_pttl_ms".into(), seen.lowest as f64);
    metrics.insert("lowest_pttl_at_ms".into(), millis(seen.lowest_at));
    metrics.insert("pttl_floor_ms".into(), millis(TIMEOUT) * 2.0 / 3.0);
    metrics.insert("locks".into(), locks as f64);
    metrics.insert("batch".into(), sizes.watchdog_batch as f64);
    metrics.insert("lost".into(), after.lost as f64);
    if after.lost > 0 || seen.fewest < locks as i64 {
        results.problem(format!(
            "{WORKLOAD} run {run}: {} holds lost, as few as {} of {locks} keys seen",
            after.lost, seen.fewest
        ));
    }

    let shutdown_at = Instant::now();
    runtime.block_on(ours.shutdown());
    metrics.insert("shutdown_ms".into(), millis(shutdown_at.elapsed()));
    let pattern = format!("redlock:bench:wd:{run}:*");
    let left = cluster.count_keys(&pattern);
    metrics.insert("keys_left_after_shutdown".into(), left as f64);
    std::thread::sleep(SHUTDOWN_GRACE);
    let still = cluster.count_keys(&pattern);
    metrics.insert("keys_left_after_grace".into(), still as f64);
    if still > 0 {
        results.problem(format!(
            "{WORKLOAD} run {run}: {still} lock keys (over all nodes) still there \
             {SHUTDOWN_GRACE:?} after shutdown returned"
        ));
    }
    Ok(metrics)
}

/// `TAKERS` tasks take `locks` locks between them, and keep them (held by the watchdog).
async fn take_all(ours: &Ours, run: usize, locks: usize, limit: Duration) -> Result<(), String> {
    let tasks: Vec<_> = (0..TAKERS)
        .map(|taker| {
            let ours = ours.clone();
            tokio::spawn(async move {
                for i in (taker..locks).step_by(TAKERS) {
                    let key = format!("bench:wd:{run}:{i}");
                    let lock = crate::locker::within(limit, ours.lock(&key)).await?;
                    drop(lock); // held on: no guard, nothing releases it
                }
                Ok::<(), String>(())
            })
        })
        .collect();
    for task in tasks {
        task.await.map_err(|e| e.to_string())??;
    }
    Ok(())
}
