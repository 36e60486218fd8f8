//! The `cluster` benchmark: one uncontended lock and unlock on a Redis Cluster member (3 masters,
//! 3 replicas, started here), against the raw floor on the same cluster (`SET NX PX`, then a
//! compare-and-delete script, through redis-rs's cluster connection), with and without replica
//! acknowledgements (`WAIT 1`).
//!
//! `cargo bench -p redlock-bench --bench cluster` is the full run (5 rounds of 2,000 cycles per
//! workload, interleaved); `cargo test -p redlock-bench --bench cluster` is the smoke run (20
//! cycles, no figures to keep). Figures go to docs/deployments.md.

use std::time::{Duration, Instant};

use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;
use redlock_reentrant::{LockClient, ReplicaAcks};
use redlock_testkit::ShardedCluster;

/// A compare-and-delete release: what any correct lock must do at least to release.
const RELEASE: &str = r#"
if redis.call("get", KEYS[1]) == ARGV[1] then
  return redis.call("del", KEYS[1])
end
return 0
"#;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let full = std::env::args().any(|arg| arg == "--bench");
    let (rounds, cycles) = if full { (5, 2_000) } else { (1, 20) };
    let cluster = ShardedCluster::start(3, 1);
    let seeds: Vec<String> = cluster.nodes().iter().map(|node| node.url()).collect();
    let mut raw = ClusterClientBuilder::new(seeds)
        .build()
        .expect("cluster client")
        .get_async_connection()
        .await
        .expect("cluster connection");
    let plain = client(&cluster, None).await;
    let confirmed = client(
        &cluster,
        Some(ReplicaAcks {
            replicas: 1,
            timeout: Duration::from_millis(250),
        }),
    )
    .await;

    let mut samples: [Vec<Duration>; 3] = Default::default();
    for round in 0..rounds {
        samples[0].extend(raw_cycles(&mut raw, round, cycles).await);
        samples[1].extend(our_cycles(&plain, "plain", round, cycles).await);
        samples[2].extend(our_cycles(&confirmed, "confirmed", round, cycles).await);
    }
    let floor = median(&mut samples[0]);
    println!("| workload | median | p99 | median / floor |");
    println!("| --- | --- | --- | --- |");
    for (name, times) in [
        "raw SET NX PX + compare-and-delete",
        "RLock lock + unlock",
        "RLock lock + unlock, `replica_acks` 1",
    ]
    .iter()
    .zip(samples.iter_mut())
    {
        let mid = median(times);
        let p99 = percentile(times, 99);
        let ratio = mid.as_secs_f64() / floor.as_secs_f64();
        println!("| {name} | {mid:.0?} | {p99:.0?} | {ratio:.2} |");
    }
    plain.shutdown().await;
    confirmed.shutdown().await;
    if !full {
        println!(
            "(smoke run: {cycles} cycles; `cargo bench -p redlock-bench --bench cluster` measures)"
        );
    }
}

async fn client(cluster: &ShardedCluster, acks: Option<ReplicaAcks>) -> LockClient {
    // Generous timeouts: the smoke run is a debug build on a busy machine.
    let mut builder = LockClient::builder()
        .nodes([cluster.url()])
        .node_timeout(Duration::from_secs(1));
    if let Some(acks) = acks {
        builder = builder.replica_acks(acks);
    }
    builder.build().await.expect("lock client")
}

/// Lock names spread over every shard, one per cycle.
fn name(kind: &str, round: usize, cycle: usize) -> String {
    format!("bench:{kind}:{round}:{cycle}")
}

async fn raw_cycles(
    connection: &mut ClusterConnection,
    round: usize,
    cycles: usize,
) -> Vec<Duration> {
    let release = redis::Script::new(RELEASE);
    let mut times = Vec::with_capacity(cycles);
    for cycle in 0..cycles {
        let key = name("raw", round, cycle);
        let token = format!("{:032x}", fastrand::u128(..));
        let started = Instant::now();
        let set: Option<String> = redis::cmd("SET")
            .arg(&key)
            .arg(&token)
            .arg("NX")
            .arg("PX")
            .arg(30_000)
            .query_async(connection)
            .await
            .expect("SET NX PX");
        assert!(set.is_some(), "uncontended");
        let deleted: i64 = release
            .key(&key)
            .arg(&token)
            .invoke_async(connection)
            .await
            .expect("release");
        assert_eq!(deleted, 1);
        times.push(started.elapsed());
    }
    times
}

async fn our_cycles(client: &LockClient, kind: &str, round: usize, cycles: usize) -> Vec<Duration> {
    let mut times = Vec::with_capacity(cycles);
    for cycle in 0..cycles {
        let lock = client.get_lock(name(kind, round, cycle));
        let started = Instant::now();
        lock.lock().await.expect("lock");
        lock.unlock().await.expect("unlock");
        times.push(started.elapsed());
    }
    times
}

fn median(times: &mut [Duration]) -> Duration {
    percentile(times, 50)
}

/// The `percent`th percentile (nearest rank below).
fn percentile(times: &mut [Duration], percent: usize) -> Duration {
    times.sort_unstable();
    let last = times.len().saturating_sub(1);
    times.get(last * percent / 100).copied().unwrap_or_default()
}
