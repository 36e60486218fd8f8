//! Metrics for Prometheus: the lock records through the `metrics` facade, and this service
//! installs `metrics-exporter-prometheus` to serve them on `/metrics`.
//!
//! Three workers share one lock for a few seconds: each takes it (waiting when another holds
//! it, woken by the release), works briefly, and releases it; one also tries without waiting
//! and counts as contended. A long job meanwhile holds another lock, renewed every second. Meanwhile the exporter serves `http://127.0.0.1:9898/metrics`
//! (`REDLOCK_METRICS_ADDR` to change it): `curl -s 127.0.0.1:9898/metrics` while it runs. At
//! the end it prints the scrape it serves.
//!
//! ```text
//! cargo run -p redlock-examples --example prometheus
//! ```
//!
//! It starts three local Redis masters and stops them at the end (on Ctrl-C too).

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

#[macro_use]
mod support;
use support::Result;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
use redlock_reentrant::LockClient;

const LOCK: &str = "report";
/// How long the workers run.
const RUN: Duration = Duration::from_secs(6);

#[tokio::main]
async fn main() -> ExitCode {
    support::with_three_masters("prometheus", run).await
}

async fn run(urls: Vec<String>) -> Result {
    let address: SocketAddr = std::env::var("REDLOCK_METRICS_ADDR")
        .unwrap_or_else(|_| "127.0.0.1:9898".to_owned())
        .parse()?;
    // Buckets make the wait and hold times Prometheus histograms (summaries without them).
    let buckets = [0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0];
    let handle = PrometheusBuilder::new()
        .with_http_listener(address)
        .set_buckets_for_metric(Matcher::Suffix("_seconds".to_owned()), &buckets)?
        .install_recorder()?;
    say!("serving metrics on http://{address}/metrics for {RUN:?}");

    let client = LockClient::builder()
        .nodes(urls)
        .watchdog_timeout(Duration::from_secs(3))
        .build()
        .await?;
    let workers: Vec<_> = (0..3)
        .map(|worker| {
            let lock = client.get_lock(LOCK);
            tokio::spawn(async move {
                let until = tokio::time::Instant::now() + RUN;
                let mut done = 0u32;
                while tokio::time::Instant::now() < until {
                    // Worker 0 first tries without waiting (counted as contended when it
                    // fails), then waits like the others.
                    let taken = worker == 0 && lock.try_lock(Duration::ZERO, None).await?;
                    if !taken {
                        lock.lock().await?;
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    lock.unlock().await?;
                    done += 1;
                }
                Ok::<_, redlock_reentrant::Error>(done)
            })
        })
        .collect();
    // A long job meanwhile: its lease (3 s) is renewed every second.
    let nightly = client.get_lock("nightly").acquire().await?;
    tokio::time::sleep(RUN).await;
    nightly.unlock().await?;
    for (worker, handle) in workers.into_iter().enumerate() {
        let holds = handle.await??;
        say!("worker {worker}: {holds} holds");
    }
    client.shutdown().await;
    let scrape = handle.render();
    say!("the scrape, redlock metrics only:");
    for line in scrape.lines().filter(|line| line.contains("redlock_")) {
        println!("{line}");
    }
    Ok(())
}
