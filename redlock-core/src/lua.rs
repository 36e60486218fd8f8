//! The plain Redlock lock's Lua scripts (sources in `lua/*.lua`), each with its reply decoded
//! into a type beside it.

use std::time::Duration;

use redis::{FromRedisValue, ParsingError, Value};

use crate::LockScript;

/// Takes a lock on one node (`lua/acquire.lua`).
pub(crate) static ACQUIRE: LockScript = LockScript::new(include_str!("lua/acquire.lua"));

/// A node's answer to [`ACQUIRE`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AcquireReply {
    /// The lock was taken here.
    Taken,
    /// Someone holds it here, for `pttl` more (`None`: a key without an expiry).
    Held { pttl: Option<Duration> },
}

impl FromRedisValue for AcquireReply {
    fn from_redis_value(value: Value) -> Result<Self, ParsingError> {
        let pttl: Option<i64> = redis::from_redis_value(value)?;
        Ok(match pttl {
            None => AcquireReply::Taken,
            Some(ms) => AcquireReply::Held {
                pttl: u64::try_from(ms).ok().map(Duration::from_millis),
            },
        })
    }
}

/// Compare-and-delete on one node (`lua/release.lua`); answers an [`Applied`](crate::Applied).
pub(crate) static RELEASE: LockScript = LockScript::new(include_str!("lua/release.lua"));

/// Compare-and-extend, never shorten, on one node (`lua/extend.lua`); answers an [`Applied`](crate::Applied).
pub(crate) static EXTEND: LockScript = LockScript::new(include_str!("lua/extend.lua"));

/// Renews many plain locks on one node (`lua/renew.lua`), for a watchdog.
pub(crate) static RENEW: LockScript = LockScript::new(include_str!("lua/renew.lua"));

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_are_decoded() {
        assert_eq!(
            AcquireReply::from_redis_value(Value::Nil),
            Ok(AcquireReply::Taken)
        );
        assert_eq!(
            AcquireReply::from_redis_value(Value::Int(1500)),
            Ok(AcquireReply::Held {
                pttl: Some(Duration::from_millis(1500))
            })
        );
        assert_eq!(
            AcquireReply::from_redis_value(Value::Int(-1)),
            Ok(AcquireReply::Held { pttl: None })
        );
    }
}
