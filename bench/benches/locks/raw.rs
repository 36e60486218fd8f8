//! The raw floor: what any lock on one Redis node must do at least. `SET key token NX PX`, a
//! compare-and-delete script to release, and a 1 ms retry loop to wait.

use std::time::Duration;

use redis::aio::MultiplexedConnection;

/// The compare-and-delete release (its `redis.call` names are read by `redis_stats`).
pub(crate) const RELEASE_SCRIPT: &str = r#"
if redis.call("get", KEYS[1]) == ARGV[1] then
  return redis.call("del", KEYS[1])
end
return 0
"#;

/// How long a raw lock lives if it is never released.
const LEASE_MS: u64 = 30_000;
/// The waiting loop's pause between two `SET NX`.
const POLL: Duration = Duration::from_millis(1);

/// Takes a counted permit if fewer than `ARGV[1]` are out (the semaphore floor).
const COUNTER_SCRIPT: &str = r#"
if tonumber(redis.call("get", KEYS[1]) or "0") < tonumber(ARGV[1]) then
  redis.call("incr", KEYS[1])
  return 1
end
return 0
"#;

/// One node's connection and the scripts.
#[derive(Clone)]
pub(crate) struct Raw {
    connection: MultiplexedConnection,
    release: redis::Script,
    counter: redis::Script,
}

/// A raw lock this process holds.
#[derive(Debug)]
pub(crate) struct Held {
    key: String,
    token: String,
}

impl Raw {
    pub(crate) async fn connect(url: &str) -> Result<Self, String> {
        let client = redis::Client::open(url).map_err(|e| e.to_string())?;
        let connection = client
            .get_multiplexed_async_connection()
            .await
            .map_err(|e| e.to_string())?;
        Ok(Self {
            connection,
            release: redis::Script::new(RELEASE_SCRIPT),
            counter: redis::Script::new(COUNTER_SCRIPT),
        })
    }

    /// One `SET NX`: `None` when someone else holds the key.
    pub(crate) async fn try_lock(&self, key: &str) -> Result<Option<Held>, String> {
        let token = format!("{:032x}", fastrand::u128(..));
        let set: Option<String> = redis::cmd("SET")
            .arg(key)
            .arg(&token)
            .arg("NX")
            .arg("PX")
            .arg(LEASE_MS)
            .query_async(&mut self.connection.clone())
            .await
            .map_err(|e| e.to_string())?;
        Ok(set.map(|_| Held {
            key: key.to_owned(),
            token,
        }))
    }

    /// `SET NX` every millisecond until it succeeds.
    pub(crate) async fn lock(&self, key: &str) -> Result<Held, String> {
        loop {
            if let Some(held) = self.try_lock(key).await? {
                return Ok(held);
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// The counter floor of a semaphore, Redisson's `RSemaphore` without its pub/sub: one
    /// script takes a permit if the counter is below `permits` (`INCR`), else takes nothing (no
    /// holder, no lease: the least a counted semaphore does). Whether it took one.
    pub(crate) async fn counter_take(&self, key: &str, permits: u32) -> Result<bool, String> {
        let taken: i64 = self
            .counter
            .key(key)
            .arg(permits)
            .invoke_async(&mut self.connection.clone())
            .await
            .map_err(|e| e.to_string())?;
        Ok(taken == 1)
    }

    /// Gives a counted permit back (`DECR`).
    pub(crate) async fn counter_release(&self, key: &str) -> Result<(), String> {
        redis::cmd("DECR")
            .arg(key)
            .query_async::<i64>(&mut self.connection.clone())
            .await
            .map(drop)
            .map_err(|e| e.to_string())
    }

    /// Waits for a counted permit, looking every millisecond (as [`Raw::lock`]).
    pub(crate) async fn counter_acquire(&self, key: &str, permits: u32) -> Result<(), String> {
        while !self.counter_take(key, permits).await? {
            tokio::time::sleep(POLL).await;
        }
        Ok(())
    }

    pub(crate) async fn unlock(&self, held: Held) -> Result<(), String> {
        let deleted: i64 = self
            .release
            .key(&held.key)
            .arg(&held.token)
            .invoke_async(&mut self.connection.clone())
            .await
            .map_err(|e| e.to_string())?;
        if deleted == 1 {
            Ok(())
        } else {
            Err(format!("raw lock {} was no longer ours", held.key))
        }
    }
}
