//! The lowest PTTL of held locks, sampled while the watchdog renews them: every few
//! milliseconds on every node for a fixed random subset of the locks (the renewal batches are
//! hundreds of locks each, so the subset has locks of every batch), and now and then a full
//! scan of one node that also counts the lock keys. It runs on a thread of its own and reports
//! that thread's CPU time, so the client's CPU time can leave it out.

use std::time::{Duration, Instant};

use futures_util::future::join_all;

/// How often every node's subset is checked.
pub(crate) const EVERY: Duration = Duration::from_millis(5);
/// How many locks the subset has.
pub(crate) const SUBSET: usize = 256;
/// Every this many checks, one node (round robin) is scanned whole.
pub(crate) const FULL_SCAN_EVERY: u64 = 50;

/// How long one sample may take.
const PATIENCE: Duration = Duration::from_secs(5);
/// Full scans count keys from this long into the hold: an acquisition is decided at the first
/// majority, and its grants on the other masters may still be on their way when the hold
/// starts (on a busy machine, for a while).
const SETTLE: Duration = Duration::from_millis(500);

/// The lowest PTTL of the keys given (-2 for a key that is gone).
const LOWEST_OF: &str = r"
local lowest = nil
for _, key in ipairs(KEYS) do
  local ttl = redis.call('pttl', key)
  if lowest == nil or ttl < lowest then lowest = ttl end
end
return lowest or -2
";

/// The lowest PTTL of the keys matching `ARGV[1]`, and how many there are.
const SCAN: &str = r"
local keys = redis.call('keys', ARGV[1])
local lowest = -1
for _, key in ipairs(keys) do
  local ttl = redis.call('pttl', key)
  if lowest < 0 or ttl < lowest then lowest = ttl end
end
return {#keys, lowest}
";

/// What the sampler saw.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Seen {
    pub(crate) lowest: i64,
    /// When the lowest PTTL was seen, from the start.
    pub(crate) lowest_at: Duration,
    /// The fewest lock keys a full scan found on a node, from [`SETTLE`] into the hold.
    pub(crate) fewest: i64,
    /// The sampler thread's own CPU time.
    pub(crate) cpu: Duration,
}

impl Seen {
    fn note(&mut self, lowest: i64, at: Duration) {
        if lowest < self.lowest {
            self.lowest = lowest;
            self.lowest_at = at;
        }
    }
}

/// Samples the locks `{prefix}{0..locks}` on `urls` for `duration`, on a thread of its own.
pub(crate) fn sample(
    urls: &[String],
    prefix: &str,
    locks: usize,
    duration: Duration,
) -> Result<Seen, String> {
    let (urls, prefix) = (urls.to_vec(), prefix.to_owned());
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        let mut seen = runtime.block_on(run(&urls, &prefix, locks, duration))?;
        seen.cpu = crate::cpu::thread_cpu()?;
        Ok(seen)
    })
    .join()
    .map_err(|_| "the PTTL sampler panicked".to_owned())?
}

async fn run(
    urls: &[String],
    prefix: &str,
    locks: usize,
    duration: Duration,
) -> Result<Seen, String> {
    let mut connections = Vec::new();
    for url in urls {
        let client = redis::Client::open(url.as_str()).map_err(|e| e.to_string())?;
        // Not redis-rs's 500 ms default: a busy 2-core machine can stall a reply that long.
        let config = redis::AsyncConnectionConfig::new().set_response_timeout(Some(PATIENCE));
        let connection = client
            .get_multiplexed_async_connection_with_config(&config)
            .await;
        connections.push(connection.map_err(|e| e.to_string())?);
    }
    let subset: Vec<String> = (0..SUBSET.min(locks))
        .map(|_| format!("{prefix}{}", fastrand::usize(..locks)))
        .collect();
    let (lowest_of, scan) = (redis::Script::new(LOWEST_OF), redis::Script::new(SCAN));
    let pattern = format!("{prefix}*");
    let mut seen = Seen {
        lowest: i64::MAX,
        lowest_at: Duration::ZERO,
        fewest: i64::MAX,
        cpu: Duration::ZERO,
    };
    let started = Instant::now();
    let mut tick = tokio::time::interval(EVERY);
    let mut ticks = 0u64;
    while started.elapsed() < duration {
        tick.tick().await;
        let checks = connections.iter().map(|connection| {
            let mut invocation = lowest_of.prepare_invoke();
            for key in &subset {
                invocation.key(key);
            }
            let mut connection = connection.clone();
            async move { invocation.invoke_async::<i64>(&mut connection).await }
        });
        for (node, lowest) in join_all(checks).await.into_iter().enumerate() {
            let lowest = lowest.map_err(|e| format!("subset on node {node}: {e}"))?;
            seen.note(lowest, started.elapsed());
        }
        if ticks.is_multiple_of(FULL_SCAN_EVERY) {
            let node = (ticks / FULL_SCAN_EVERY) as usize % connections.len();
            let mut connection = connections[node].clone();
            let (count, lowest): (i64, i64) = scan
                .arg(&pattern)
                .invoke_async(&mut connection)
                .await
                .map_err(|e| format!("scan of node {node}: {e}"))?;
            seen.note(lowest, started.elapsed());
            if started.elapsed() >= SETTLE {
                seen.fewest = seen.fewest.min(count);
            }
        }
        ticks += 1;
    }
    Ok(seen)
}
