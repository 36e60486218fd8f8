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

/// One node's connection and the release script.
#[derive(Clone)]
pub(crate) struct Raw {
    connection: MultiplexedConnection,
    release: redis::Script,
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
