//! Quorum down: 5 nodes, 2 killed (locking must go on), then a 3rd killed (it must give up,
//! quickly, with no retries configured).

use std::time::{Duration, Instant};

use redlock_reentrant::RetryPolicy;
use redlock_testkit::RedisCluster;
use tokio::runtime::Runtime;

use crate::locker::{within, Locker};
use crate::mode::Sizes;
use crate::ours::Ours;
use crate::results::Results;
use crate::stats::{add_percentiles, millis, Metrics};
use crate::theirs::Rslock;

pub(crate) const WORKLOAD: &str = "quorum-down";

/// rslock has no per-node timeout: redis-rs's default response timeout bounds each request.
pub(crate) const RSLOCK_RESPONSE_TIMEOUT: Duration = Duration::from_millis(500);

pub(crate) fn run_all(runtime: &Runtime, sizes: &Sizes, results: &mut Results) {
    for run in 0..sizes.runs {
        if let Err(err) = one_run(runtime, sizes, run, results) {
            results.problem(format!("{WORKLOAD} run {run}: {err}"));
        }
    }
}

/// A locker with default retries and one that tries once, under one label.
struct Contender {
    label: &'static str,
    retrying: Locker,
    once: Locker,
    node_timeout: Duration,
}

fn one_run(
    runtime: &Runtime,
    sizes: &Sizes,
    run: usize,
    results: &mut Results,
) -> Result<(), String> {
    let cluster = RedisCluster::try_start(5).map_err(|e| e.to_string())?;
    let urls = cluster.urls();
    let ours = runtime.block_on(Ours::connect(&urls, None, |b| b))?;
    let ours_once =
        runtime.block_on(Ours::connect(&urls, None, |b| b.retry(RetryPolicy::none())))?;
    let node_timeout = ours
        .client
        .redlock()
        .config()
        .node_timeout_for(ours.client.watchdog().timeout());
    let contenders = [
        Contender {
            label: "ours-5",
            retrying: Locker::Ours(ours),
            once: Locker::Ours(ours_once),
            node_timeout,
        },
        Contender {
            label: "rslock-5",
            retrying: Locker::Rslock(Rslock::new(&urls, false)),
            once: Locker::Rslock(Rslock::new(&urls, true)),
            node_timeout: RSLOCK_RESPONSE_TIMEOUT,
        },
    ];
    for contender in &contenders {
        for locker in [&contender.retrying, &contender.once] {
            let key = format!("bench:qd:{run}:warm");
            let (done, _, errors) = runtime.block_on(attempts(locker, &key, sizes.warm_up, sizes));
            if done != sizes.warm_up {
                return Err(format!("{}: warm-up failed: {errors:?}", contender.label));
            }
        }
    }

    cluster.kill(3);
    cluster.kill(4);
    let mut metrics: Vec<Metrics> = Vec::new();
    for contender in &contenders {
        let key = format!("bench:qd:{run}:two-dead:{}", contender.label);
        let (done, pairs, errors) = runtime.block_on(attempts(
            &contender.retrying,
            &key,
            sizes.quorum_pairs,
            sizes,
        ));
        for err in errors.iter().take(3) {
            results.problem(format!(
                "{WORKLOAD} {} (2 of 5 dead): {err}",
                contender.label
            ));
        }
        let mut m = Metrics::new();
        m.insert(
            "success_rate".into(),
            done as f64 / sizes.quorum_pairs as f64,
        );
        add_percentiles(&mut m, "pair", &pairs);
        m.insert("node_timeout_ms".into(), millis(contender.node_timeout));
        metrics.push(m);
    }

    cluster.kill(2);
    for (contender, m) in contenders.iter().zip(&mut metrics) {
        let key = format!("bench:qd:{run}:three-dead:{}", contender.label);
        let (acquired, give_ups) = runtime.block_on(give_ups(
            &contender.once,
            &key,
            sizes.give_up_attempts,
            sizes,
        ));
        if acquired > 0 {
            results.problem(format!(
                "{WORKLOAD} {}: acquired {acquired} times with 3 of 5 nodes dead",
                contender.label
            ));
        }
        add_percentiles(m, "give_up", &give_ups);
        m.insert("acquired_with_3_dead".into(), acquired as f64);
    }
    for (contender, m) in contenders.iter().zip(metrics) {
        results.record(WORKLOAD, contender.label, run, m);
        runtime.block_on(contender.retrying.close());
        runtime.block_on(contender.once.close());
    }
    Ok(())
}

/// `count` acquire + unlock pairs in a task: how many succeeded, their latencies, the errors.
async fn attempts(
    locker: &Locker,
    key: &str,
    count: usize,
    sizes: &Sizes,
) -> (usize, Vec<Duration>, Vec<String>) {
    let (locker, key, limit) = (locker.clone(), key.to_owned(), sizes.op_timeout);
    let task = tokio::spawn(async move {
        let (mut done, mut pairs, mut errors) = (0, Vec::new(), Vec::new());
        for _ in 0..count {
            let started = Instant::now();
            let pair = async {
                let handle = within(limit, locker.acquire(&key)).await?;
                within(limit, locker.unlock(handle)).await
            };
            match pair.await {
                Ok(()) => {
                    done += 1;
                    pairs.push(started.elapsed());
                }
                Err(err) => errors.push(err),
            }
        }
        (done, pairs, errors)
    });
    task.await
        .unwrap_or_else(|e| (0, Vec::new(), vec![e.to_string()]))
}

/// `count` single attempts that should fail: how many acquired, and how long each took.
async fn give_ups(
    locker: &Locker,
    key: &str,
    count: usize,
    sizes: &Sizes,
) -> (usize, Vec<Duration>) {
    let (locker, key, limit) = (locker.clone(), key.to_owned(), sizes.op_timeout);
    let task = tokio::spawn(async move {
        let (mut acquired, mut took) = (0, Vec::new());
        for _ in 0..count {
            let started = Instant::now();
            let outcome = within(limit, locker.acquire(&key)).await;
            took.push(started.elapsed());
            if let Ok(handle) = outcome {
                acquired += 1;
                let _ = within(limit, locker.unlock(handle)).await;
            }
        }
        (acquired, took)
    });
    task.await.unwrap_or((0, Vec::new()))
}
