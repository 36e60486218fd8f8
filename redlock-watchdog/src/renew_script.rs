//! What the watchdog needs to know of a kind of lock: the script that renews many of its holds
//! on one node in one call, and how its answers read.

use redlock_core::lock_kind::LockScript;
use redlock_core::redis::{FromRedisValue, ParsingError, Value};
use redlock_core::Redlock;

/// A lock kind's batch renewal script: all the watchdog knows of the lock's data.
///
/// The script's contract, which the watchdog relies on for exclusion:
/// - `KEYS[i]` is a lock key, `ARGV[1]` the lease in milliseconds, `ARGV[i + 1]` the owner of
///   `KEYS[i]`;
/// - it answers one integer per key: `1` when that owner holds `KEYS[i]` and its lease now runs
///   at least `ARGV[1]` more, `0` when that owner does not hold it;
/// - it never recreates a lock that is gone, never renews another owner's, and never shortens
///   a lease (a longer one may have been set on purpose).
///
/// [`RenewScript::plain`] renews `redlock-core`'s plain locks (a string key holding the owner
/// token); the reentrant lock supplies its own for its hashes.
///
/// # Examples
///
/// ```
/// use redlock_core::lock_kind::LockScript;
/// use redlock_watchdog::lock_kind::RenewScript;
/// static RENEW_MY_LOCKS: LockScript = LockScript::new(
///     "local r = {} for i, k in ipairs(KEYS) do \
///      if redis.call('get', k) == ARGV[i + 1] then \
///      if redis.call('pttl', k) < tonumber(ARGV[1]) then redis.call('pexpire', k, ARGV[1]) end \
///      r[i] = 1 else r[i] = 0 end end return r",
/// );
/// let script = RenewScript::new(&RENEW_MY_LOCKS);
/// assert_ne!(script.script().sha(), RenewScript::plain().script().sha());
/// ```
#[derive(Debug, Clone, Copy)]
pub struct RenewScript {
    script: &'static LockScript,
    /// How many nodes must confirm a renewal; `None`: a majority.
    quorum: Option<usize>,
}

impl RenewScript {
    /// A lock kind's renewal script, which must keep the contract above.
    pub const fn new(script: &'static LockScript) -> Self {
        Self {
            script,
            quorum: None,
        }
    }

    /// The same script, its renewals confirmed only by `quorum` nodes rather than a majority
    /// (`None`): for holds acquired on that many (see
    /// [`ScriptCall::with_quorum`](redlock_core::lock_kind::ScriptCall::with_quorum)). Holds
    /// with different quorums are renewed in separate calls.
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_watchdog::lock_kind::RenewScript;
    /// let script = RenewScript::plain().with_quorum(Some(4));
    /// assert_eq!(script.quorum(), Some(4));
    /// ```
    #[must_use]
    pub const fn with_quorum(mut self, quorum: Option<usize>) -> Self {
        self.quorum = quorum;
        self
    }

    /// How many nodes must confirm a renewal; `None`: a majority.
    pub const fn quorum(&self) -> Option<usize> {
        self.quorum
    }

    /// The renewal of `redlock-core`'s plain locks ([`Redlock::renew_script`]).
    pub fn plain() -> Self {
        Self::new(Redlock::renew_script())
    }

    /// The script.
    pub fn script(&self) -> &'static LockScript {
        self.script
    }
}

/// One hold's answer in a renewal script's reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Renewed {
    /// Held, and its lease runs at least the watchdog's timeout more.
    Yes,
    /// This owner does not hold it.
    NotHeld,
}

/// A renewal script's reply on one node: one answer per hold of the batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RenewReply(pub(crate) Vec<Renewed>);

impl FromRedisValue for RenewReply {
    fn from_redis_value(value: Value) -> Result<Self, ParsingError> {
        let answers: Vec<i64> = redlock_core::redis::from_redis_value(value)?;
        answers
            .into_iter()
            .map(|answer| match answer {
                1 => Ok(Renewed::Yes),
                0 => Ok(Renewed::NotHeld),
                other => Err(format!("unknown renewal answer {other}").into()),
            })
            .collect::<Result<_, ParsingError>>()
            .map(RenewReply)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_are_decoded_per_hold() {
        let reply = Value::Array(vec![Value::Int(1), Value::Int(0)]);
        assert_eq!(
            RenewReply::from_redis_value(reply),
            Ok(RenewReply(vec![Renewed::Yes, Renewed::NotHeld]))
        );
        let unknown = Value::Array(vec![Value::Int(2)]);
        assert!(RenewReply::from_redis_value(unknown).is_err());
    }
}
