//! A service-style worker: several workers share a job list, and a cron job runs exactly once.
//!
//! Three workers run side by side. Each has its own [`LockClient`], as if it were a separate
//! process on another host. They show two everyday uses of a distributed lock:
//!
//! 1. **Each job processed once.** Jobs 1..=8 wait in a list every worker sees. For each job, a
//!    worker tries `job:{id}` without waiting (`try_acquire(Duration::ZERO, None)`): if another
//!    worker holds it, it moves on. Holding the lock, it checks that the job is not done yet,
//!    "processes" it, records it as done in Redis (`HSETNX jobs:done {id} {worker}`), and unlocks.
//! 2. **A cron job that must run once.** At "midnight" every worker tries `nightly-report`
//!    with `try_lock(Duration::ZERO, None)`; exactly one gets it and runs the report.
//!
//! Run it from the workspace root (it needs `redis-server` on `PATH`):
//!
//! ```text
//! cargo run -p redlock-examples --example worker
//! ```
//!
//! It starts three local Redis masters and stops them at the end (on Ctrl-C too), and exits
//! with status 1 if a job is processed twice, a job is left undone, or the report does not run
//! exactly once.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

#[macro_use]
mod support;
use support::Result;

use redlock_reentrant::redis::{self, AsyncTypedCommands as _};
use redlock_reentrant::LockClient;
use tokio::sync::Barrier;
use tokio::task::JoinSet;

const WORKERS: usize = 3;
const JOBS: u32 = 8;
/// Where workers record finished jobs: job id -> the worker that did it.
const DONE: &str = "jobs:done";

#[tokio::main]
async fn main() -> ExitCode {
    support::with_three_masters("worker", run).await
}

async fn run(urls: Vec<String>) -> Result {
    // "Midnight": every worker arrives at the cron job at the same moment.
    let midnight = Arc::new(Barrier::new(WORKERS));
    // Each worker is a task here; think of each as a process of its own.
    let mut workers = JoinSet::new();
    for n in 1..=WORKERS {
        let (urls, midnight) = (urls.clone(), Arc::clone(&midnight));
        workers.spawn(worker(format!("worker-{n}"), urls, midnight));
    }
    // The first error returns at once; dropping the `JoinSet` stops the other workers.
    let mut reports = 0;
    while let Some(ran_report) = workers.join_next().await {
        reports += usize::from(ran_report??);
    }

    // The job records live in Redis (on the first master here; in real life, your database).
    let mut db = redis::Client::open(urls[0].as_str())?
        .get_multiplexed_async_connection()
        .await?;
    let done = db.hgetall(DONE).await?;
    let mut by_job: Vec<_> = done.iter().collect();
    by_job.sort_by_key(|(job, _)| job.parse::<u32>().unwrap_or_default());
    say!("jobs done: {by_job:?}");
    if done.len() != JOBS as usize {
        return Err(format!("expected {JOBS} jobs done, found {}", done.len()).into());
    }
    if reports != 1 {
        return Err(format!("the nightly report ran {reports} times, not once").into());
    }
    say!("every job was processed exactly once, and the nightly report ran once");
    Ok(())
}

/// One worker: drains the job list, then races for the nightly report. Returns whether it ran
/// the report.
async fn worker(name: String, urls: Vec<String>, midnight: Arc<Barrier>) -> Result<bool> {
    let client = LockClient::connect(urls.clone()).await?;
    let mut db = redis::Client::open(urls[0].as_str())?
        .get_multiplexed_async_connection()
        .await?;

    // Keep going over the list until every job is done: a job skipped because another worker
    // held it is done by that worker, or is still there on the next pass.
    while db.hlen(DONE).await? < JOBS as usize {
        for id in 1..=JOBS {
            let lock = client.get_lock(format!("job:{id}"));
            // Zero wait: if someone holds the job, skip it instead of queueing behind them.
            let Some(guard) = lock.try_acquire(Duration::ZERO, None).await? else {
                say!("{name}: job {id} is locked by another worker, skipping it for now");
                continue;
            };
            // Check under the lock: the job may have been finished by the previous holder.
            if !db.hexists(DONE, id).await? {
                say!("{name}: processing job {id}");
                tokio::time::sleep(Duration::from_millis(150)).await;
                // HSETNX answers false if the job was already recorded: done twice.
                if !db.hset_nx(DONE, id, &name).await? {
                    return Err(format!("job {id} was processed twice").into());
                }
            }
            guard.unlock().await?;
        }
        // Jobs others hold may be left: look again shortly.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // The cron job: everyone tries at once, one wins, the others skip it. (With a zero wait, a
    // tie in which no worker wins a majority of the masters would leave nobody running it; a
    // real cron tries again on its next tick.)
    let report = client.get_lock("nightly-report");
    midnight.wait().await;
    let ran = report.try_lock(Duration::ZERO, None).await?;
    if ran {
        say!("{name}: got `nightly-report`, running it");
        tokio::time::sleep(Duration::from_millis(500)).await;
        report.unlock().await?;
        say!("{name}: nightly report done");
    } else {
        say!("{name}: `nightly-report` is taken by another worker, skipping");
    }
    client.shutdown().await;
    Ok(ran)
}
