//! The fault suite's fenced resource: one counter per lock in a redis-server of its own (never
//! faulted), each accepting a read or a write only with a fencing token at least as high as
//! any it has seen.
//!
//! Workers read the counter and write it back plus one while they hold the lock, each access
//! carrying their token. A stale holder (its lock expired while it was paused) is turned away
//! once a newer holder has touched the resource; two holders that overlap with increasing
//! tokens can still both read the same value, and the counter then ends below the number of
//! accepted writes: a lost update, which the counter checker reports.

use redis::aio::MultiplexedConnection;
use redis::Script;

use crate::RedisServer;

/// The resource's keys for `lock`: one counter per lock, each fenced on its own.
fn key(lock: &str, what: &str) -> String {
    format!("fenced:{{{lock}}}:{what}")
}

/// KEYS: highest, value, seq, the stale counter of this kind of access.
/// ARGV: the token; the value to write (empty for a read).
/// Returns `{1, value, seq}` when accepted, `{0, highest}` when the token is stale.
const ACCESS: &str = r"
local highest = redis.call('get', KEYS[1]) or '0'
if tonumber(ARGV[1]) < tonumber(highest) then
    redis.call('incr', KEYS[4])
    return {0, highest}
end
redis.call('set', KEYS[1], ARGV[1])
local seq = redis.call('incr', KEYS[3])
if ARGV[2] ~= '' then
    redis.call('set', KEYS[2], ARGV[2])
    return {1, ARGV[2], seq}
end
return {1, redis.call('get', KEYS[2]) or '0', seq}
";

/// The server side: a redis-server holding the resource.
#[derive(Debug)]
pub struct FencedResource {
    server: RedisServer,
}

impl FencedResource {
    /// Starts the resource's own server.
    pub fn start() -> FencedResource {
        FencedResource {
            server: RedisServer::start(),
        }
    }

    /// Where workers reach it.
    pub fn url(&self) -> String {
        self.server.url()
    }

    /// The counter of `lock` now.
    pub fn value(&self, lock: &str) -> u64 {
        self.get(&key(lock, "value"))
    }

    /// Reads and writes of `lock` turned away so far: `(reads, writes)`.
    pub fn stale(&self, lock: &str) -> (u64, u64) {
        (
            self.get(&key(lock, "stale-reads")),
            self.get(&key(lock, "stale-writes")),
        )
    }

    fn get(&self, key: &str) -> u64 {
        let value: Option<u64> = redis::cmd("GET")
            .arg(key)
            .query(&mut self.server.connection())
            .expect("the fenced resource's server answers");
        value.unwrap_or(0)
    }
}

/// What the resource said to one access.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Accepted: the counter's value (after a write, the value written) and the access's place
    /// in the order of accepted accesses.
    Accepted {
        /// The counter's value.
        value: u64,
        /// The access's sequence number.
        seq: u64,
    },
    /// Turned away: a higher token was seen before.
    Stale {
        /// The highest token seen.
        highest: u64,
    },
}

/// A worker's connection to the resource.
#[derive(Clone)]
pub struct FencedClient {
    connection: MultiplexedConnection,
    script: Script,
}

impl std::fmt::Debug for FencedClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FencedClient").finish_non_exhaustive()
    }
}

impl FencedClient {
    /// Connects to the resource at `url`.
    ///
    /// # Errors
    ///
    /// The server cannot be reached.
    pub async fn connect(url: &str) -> redis::RedisResult<FencedClient> {
        // The resource is never faulted: no timeouts, so a worker frozen mid-access (SIGSTOP)
        // gets its answer when it resumes instead of a timeout its own pause caused.
        let config = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(None)
            .set_response_timeout(None);
        let connection = redis::Client::open(url)?
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
        Ok(FencedClient {
            connection,
            script: Script::new(ACCESS),
        })
    }

    /// Reads the counter of `lock` with `token`.
    ///
    /// # Errors
    ///
    /// The server failed to answer.
    pub async fn read(&mut self, lock: &str, token: u64) -> redis::RedisResult<Access> {
        self.access(lock, token, None).await
    }

    /// Writes `value` to the counter of `lock` with `token`.
    ///
    /// # Errors
    ///
    /// The server failed to answer.
    pub async fn write(
        &mut self,
        lock: &str,
        token: u64,
        value: u64,
    ) -> redis::RedisResult<Access> {
        self.access(lock, token, Some(value)).await
    }

    async fn access(
        &mut self,
        lock: &str,
        token: u64,
        value: Option<u64>,
    ) -> redis::RedisResult<Access> {
        let stale = if value.is_some() {
            "stale-writes"
        } else {
            "stale-reads"
        };
        let reply: Vec<redis::Value> = self
            .script
            .key(key(lock, "highest"))
            .key(key(lock, "value"))
            .key(key(lock, "seq"))
            .key(key(lock, stale))
            .arg(token)
            .arg(value.map(|v| v.to_string()).unwrap_or_default())
            .invoke_async(&mut self.connection)
            .await?;
        let number = |i: usize| -> redis::RedisResult<u64> {
            let value = reply.get(i).cloned().unwrap_or(redis::Value::Nil);
            redis::FromRedisValue::from_redis_value(value).map_err(redis::RedisError::from)
        };
        Ok(if number(0)? == 1 {
            Access::Accepted {
                value: number(1)?,
                seq: number(2)?,
            }
        } else {
            Access::Stale {
                highest: number(1)?,
            }
        })
    }
}
