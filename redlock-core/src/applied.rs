//! The answer of a lock script that acts on a node only when its condition holds there.

use redis::{FromRedisValue, ParsingError, Value};

/// A node's `1` or `0` from a script that acts only when its condition holds there (a release
/// or extension by the owner, a token written back, an attempt undone): the one decoding of
/// such answers, for every lock kind's scripts.
///
/// # Examples
///
/// ```
/// use redlock_core::redis::{FromRedisValue, Value};
/// use redlock_core::lock_kind::Applied;
/// assert_eq!(Applied::from_redis_value(Value::Int(1)), Ok(Applied::Yes));
/// assert_eq!(Applied::from_redis_value(Value::Int(0)), Ok(Applied::No));
/// assert!(Applied::from_redis_value(Value::Int(2)).is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// It acted.
    Yes,
    /// Nothing to do on this node.
    No,
}

impl FromRedisValue for Applied {
    fn from_redis_value(value: Value) -> Result<Self, ParsingError> {
        match redis::from_redis_value::<i64>(value)? {
            1 => Ok(Applied::Yes),
            0 => Ok(Applied::No),
            other => Err(format!("unknown answer {other}").into()),
        }
    }
}
