//! The reentrant lock's Lua scripts (sources in `lua/*.lua`), each with its reply decoded into
//! a type beside it.

use std::time::Duration;

pub(crate) use redlock_core::lock_kind::Applied;
use redlock_core::lock_kind::LockScript;
use redlock_core::redis::{self, FromRedisValue, ParsingError, Value};

/// Declares a script that announces releases: standalone masters run it after
/// `lua/announce.lua` (`PUBLISH`), Redis Cluster members after `lua/announce_sharded.lua`
/// (`SPUBLISH`, falling back to `PUBLISH`).
macro_rules! announcing {
    ($(#[$doc:meta])* $vis:vis $name:ident, $on_cluster:ident, $($file:literal),+) => {
        $(#[$doc])*
        $vis static $name: LockScript = LockScript::new(concat!(
            include_str!("lua/announce.lua"),
            $(include_str!($file)),+
        ))
        .on_cluster(&$on_cluster);

        static $on_cluster: LockScript = LockScript::new(concat!(
            include_str!("lua/announce_sharded.lua"),
            $(include_str!($file)),+
        ));
    };
}

/// Declares a script that takes new holds, with its fencing candidate (`lua/fencing_candidate.lua`):
/// standalone masters take it from their counter (`lua/fencing_from_counter.lua`), Redis
/// Cluster members from the clock at every new hold (`lua/fencing_from_clock.lua`).
macro_rules! acquiring {
    ($on_cluster:ident, $($file:literal),+) => {{
        static $on_cluster: LockScript = LockScript::new(concat!(
            include_str!("lua/fencing_from_clock.lua"),
            include_str!("lua/fencing_candidate.lua"),
            $(include_str!($file)),+
        ));
        LockScript::new(concat!(
            include_str!("lua/fencing_from_counter.lua"),
            include_str!("lua/fencing_candidate.lua"),
            $(include_str!($file)),+
        ))
        .on_cluster(&$on_cluster)
    }};
}

/// A script argument (or key) written straight into the request from its `Display` form, with
/// no string of its own: the hold's field, a request id.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Shown<D>(pub(crate) D);

impl<D: std::fmt::Display> redis::ToRedisArgs for Shown<D> {
    fn write_redis_args<W>(&self, out: &mut W)
    where
        W: ?Sized + redis::RedisWrite,
    {
        use std::io::Write as _;
        // Writing into the request's buffer cannot fail.
        let _ = write!(out.writer_for_next_arg(), "{}", self.0);
    }
}

/// Takes or re-enters a lock on one node (`lua/acquire.lua`); on Redis Cluster members, with a
/// fencing candidate of at least the clock at every new hold (`lua/fencing_from_clock.lua`).
pub(crate) static ACQUIRE: LockScript = acquiring!(
    ACQUIRE_ON_CLUSTER,
    "lua/acquire_plain.lua",
    "lua/acquire.lua"
);

/// Takes or re-enters a read-write lock's write side on one node (`lua/acquire_write.lua`, then
/// `lua/acquire.lua`): a new write hold also needs no live reader. Answers [`AcquireReply`].
pub(crate) static ACQUIRE_WRITE: LockScript = acquiring!(
    ACQUIRE_WRITE_ON_CLUSTER,
    "lua/holders_read.lua",
    "lua/rw_common.lua",
    "lua/acquire_write.lua",
    "lua/acquire.lua"
);

/// Takes or re-enters a fair lock on one node (`lua/acquire_fair.lua`, then `lua/acquire.lua`):
/// a new hold also needs to be first among the live waiters. Answers [`AcquireReply`].
pub(crate) static ACQUIRE_FAIR: LockScript = acquiring!(
    ACQUIRE_FAIR_ON_CLUSTER,
    "lua/acquire_fair.lua",
    "lua/acquire.lua"
);

/// Takes or re-enters a read-write lock's read side on one node (`lua/acquire_read.lua`).
/// Answers [`AcquireReply`].
pub(crate) static ACQUIRE_READ: LockScript = acquiring!(
    ACQUIRE_READ_ON_CLUSTER,
    "lua/holders_read.lua",
    "lua/rw_common.lua",
    "lua/acquire_read.lua"
);

/// Takes permits of a semaphore on one node (`lua/acquire_permit.lua`). Answers
/// [`AcquireReply`].
pub(crate) static ACQUIRE_PERMIT: LockScript = acquiring!(
    ACQUIRE_PERMIT_ON_CLUSTER,
    "lua/holders_permit.lua",
    "lua/rw_common.lua",
    "lua/permits_common.lua",
    "lua/acquire_permit.lua"
);

/// A node's answer to [`ACQUIRE`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AcquireReply {
    /// A new hold, with this node's fencing-token candidate.
    NewHold { candidate: u64 },
    /// A reentrant acquisition.
    Nested,
    /// Held by another owner (`holder`, its field) for `pttl` more.
    HeldBy { pttl: Duration, holder: String },
    /// This owner's count here is not the one expected: its hold is gone here.
    CountMismatch,
    /// More permits were asked for than the semaphore has here (`count`).
    OverCount { count: u32 },
    /// The semaphore's count here (`count`) is not the one its client fixed.
    CountDiffers { count: u32 },
}

impl AcquireReply {
    /// Whether the node granted the acquisition.
    pub(crate) fn granted(&self) -> bool {
        matches!(self, AcquireReply::NewHold { .. } | AcquireReply::Nested)
    }
}

impl FromRedisValue for AcquireReply {
    fn from_redis_value(value: Value) -> Result<Self, ParsingError> {
        let (status, number, holder): (i64, i64, String) = redis::from_redis_value(value)?;
        let unsigned =
            || u64::try_from(number).map_err(|_| ParsingError::from(format!("negative {number}")));
        match status {
            1 => Ok(AcquireReply::NewHold {
                candidate: unsigned()?,
            }),
            2 => Ok(AcquireReply::Nested),
            0 => Ok(AcquireReply::HeldBy {
                pttl: Duration::from_millis(unsigned()?),
                holder,
            }),
            3 => Ok(AcquireReply::CountMismatch),
            4 | 5 => {
                let count = u32::try_from(number).map_err(|_| format!("permit count {number}"))?;
                Ok(if status == 4 {
                    AcquireReply::OverCount { count }
                } else {
                    AcquireReply::CountDiffers { count }
                })
            }
            other => Err(format!("unknown acquire status {other}").into()),
        }
    }
}

/// Writes a chosen fencing token back to one node (`lua/fence.lua`); answers [`Applied`].
pub(crate) static FENCE: LockScript = LockScript::new(include_str!("lua/fence.lua"));

announcing!(
    /// Undoes one acquisition attempt where it landed (`lua/undo.lua`); answers [`Applied`].
    pub(crate) UNDO, UNDO_ON_CLUSTER, "lua/undo.lua"
);

announcing!(
    /// [`UNDO`] of a read hold (`lua/undo_read.lua`).
    pub(crate) UNDO_READ, UNDO_READ_ON_CLUSTER, "lua/holders_read.lua", "lua/rw_common.lua", "lua/undo_read.lua"
);

announcing!(
    /// A writer or a fair lock's waiter that stopped waiting takes its registration back
    /// (`lua/withdraw_writer.lua`); answers [`Applied`].
    pub(crate) WITHDRAW_WRITER, WITHDRAW_WRITER_ON_CLUSTER, "lua/withdraw_writer.lua"
);

announcing!(
    /// Deletes a lock whoever holds it (`lua/force_unlock.lua`); answers [`Applied`].
    pub(crate) FORCE_UNLOCK, FORCE_UNLOCK_ON_CLUSTER, "lua/force_unlock.lua"
);

announcing!(
    /// Releases one acquisition on one node (`lua/unlock.lua`).
    pub(crate) UNLOCK, UNLOCK_ON_CLUSTER, "lua/unlock.lua"
);

announcing!(
    /// [`UNLOCK`] of a read hold (`lua/unlock_read.lua`).
    pub(crate) UNLOCK_READ, UNLOCK_READ_ON_CLUSTER, "lua/holders_read.lua", "lua/rw_common.lua", "lua/unlock_read.lua"
);

announcing!(
    /// [`UNDO`] of a permit (`lua/undo_read.lua` on a permits hash).
    pub(crate) UNDO_PERMIT, UNDO_PERMIT_ON_CLUSTER, "lua/holders_permit.lua", "lua/rw_common.lua", "lua/undo_read.lua"
);

announcing!(
    /// [`UNLOCK`] of a permit (`lua/unlock_read.lua` on a permits hash): every release is
    /// announced.
    pub(crate) UNLOCK_PERMIT, UNLOCK_PERMIT_ON_CLUSTER, "lua/holders_permit.lua", "lua/rw_common.lua", "lua/unlock_read.lua"
);

announcing!(
    /// Changes a semaphore's count of permits on one node (`lua/permits_set.lua`); answers
    /// [`PermitsChanged`].
    pub(crate) PERMITS_SET, PERMITS_SET_ON_CLUSTER, "lua/holders_permit.lua", "lua/rw_common.lua", "lua/permits_common.lua", "lua/permits_set.lua"
);

announcing!(
    /// Arms, reads, counts down or deletes a count-down latch on one node (`lua/latch.lua`);
    /// answers [`LatchReply`].
    pub(crate) LATCH, LATCH_ON_CLUSTER, "lua/latch.lua"
);

/// A node's answer to [`LATCH`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LatchReply {
    /// The arming, count-down or deletion applied here.
    pub(crate) done: bool,
    /// A round is armed (not open).
    pub(crate) armed: bool,
    /// How many count-downs the round still needs (0 when open).
    pub(crate) left: u32,
    /// The round's generation ('' when open).
    pub(crate) generation: String,
    /// A count-down of a latch whose count its client fixed found another round here (`left`
    /// is then that round's count).
    pub(crate) other_round: bool,
    /// The round's count-down ids (asked with 'ids' only: `left` is then the round's count).
    pub(crate) ids: Vec<String>,
}

impl FromRedisValue for LatchReply {
    fn from_redis_value(value: Value) -> Result<Self, ParsingError> {
        let mut fields: Vec<Value> = redis::from_redis_value(value)?;
        if fields.len() < 4 {
            return Err(format!("a latch reply of {} fields", fields.len()).into());
        }
        let ids = fields.split_off(4);
        let mut fields = fields.into_iter();
        let mut next = || fields.next().unwrap_or(Value::Nil);
        let done: i64 = redis::from_redis_value(next())?;
        let armed: i64 = redis::from_redis_value(next())?;
        let left: i64 = redis::from_redis_value(next())?;
        let generation: String = redis::from_redis_value(next())?;
        Ok(LatchReply {
            done: done == 1,
            armed: armed == 1,
            left: permits(left)?,
            generation,
            other_round: done == 2,
            ids: ids
                .into_iter()
                .map(redis::from_redis_value)
                .collect::<Result<_, _>>()?,
        })
    }
}

/// What one node knows of a semaphore (`lua/permits_status.lua`); answers [`PermitsStatus`].
pub(crate) static PERMITS_STATUS: LockScript = LockScript::new(concat!(
    include_str!("lua/holders_permit.lua"),
    include_str!("lua/rw_common.lua"),
    include_str!("lua/permits_common.lua"),
    include_str!("lua/permits_status.lua")
));

/// A node's answer to [`PERMITS_STATUS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PermitsStatus {
    /// Whether the count of permits is set.
    pub(crate) set: bool,
    /// How many permits the semaphore has (0 when unset).
    pub(crate) count: u32,
    /// How many are out (held, lease not run out).
    pub(crate) out: u32,
    /// The count the permits out were granted under, where their clients fixed it (0: none).
    pub(crate) fixed: u32,
}

impl FromRedisValue for PermitsStatus {
    fn from_redis_value(value: Value) -> Result<Self, ParsingError> {
        let (set, count, out, fixed): (i64, i64, i64, i64) = redis::from_redis_value(value)?;
        Ok(PermitsStatus {
            set: set == 1,
            count: permits(count)?,
            out: permits(out)?,
            fixed: permits(fixed)?,
        })
    }
}

/// A node's answer to [`PERMITS_SET`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PermitsChanged {
    /// Done (or refused: a count already set, one that would fall below zero, nothing to
    /// delete).
    pub(crate) done: bool,
    /// The count before and after.
    pub(crate) before: u32,
    pub(crate) after: u32,
    /// The permits out.
    pub(crate) out: u32,
}

impl FromRedisValue for PermitsChanged {
    fn from_redis_value(value: Value) -> Result<Self, ParsingError> {
        let (done, before, after, out): (i64, i64, i64, i64) = redis::from_redis_value(value)?;
        Ok(PermitsChanged {
            done: done == 1,
            before: permits(before)?,
            after: permits(after)?,
            out: permits(out)?,
        })
    }
}

/// A count of permits from a node's answer.
fn permits(number: i64) -> Result<u32, ParsingError> {
    u32::try_from(number).map_err(|_| ParsingError::from(format!("permit count {number}")))
}

#[cfg(feature = "sabotage")]
announcing!(
    /// The sabotaged twin of [`UNLOCK`] (`lua/unlock_without_compare.lua`), for the fault suite.
    pub(crate) UNLOCK_WITHOUT_COMPARE, UNLOCK_WITHOUT_COMPARE_ON_CLUSTER, "lua/unlock_without_compare.lua"
);

/// A node's answer to [`UNLOCK`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UnlockReply {
    /// Released (or a retry of a release applied here): this many acquisitions are left.
    Left(u32),
    /// This owner does not hold the lock here.
    NotHeld,
}

impl FromRedisValue for UnlockReply {
    fn from_redis_value(value: Value) -> Result<Self, ParsingError> {
        match redis::from_redis_value::<i64>(value)? {
            -1 => Ok(UnlockReply::NotHeld),
            left => u32::try_from(left)
                .map(UnlockReply::Left)
                .map_err(|_| format!("unknown unlock answer {left}").into()),
        }
    }
}

/// What one node knows of a lock (`lua/inspect.lua`).
pub(crate) static INSPECT: LockScript = LockScript::new(include_str!("lua/inspect.lua"));

/// [`INSPECT`] of a read-write lock's read side (`lua/inspect_read.lua`).
pub(crate) static INSPECT_READ: LockScript = LockScript::new(concat!(
    include_str!("lua/holders_read.lua"),
    include_str!("lua/rw_common.lua"),
    include_str!("lua/inspect_read.lua")
));

/// A node's answer to [`INSPECT`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Inspected {
    /// Someone holds the lock here.
    pub(crate) exists: bool,
    /// The asking owner's hold count here.
    pub(crate) count: u32,
    /// The lock's remaining lease here, when it exists.
    pub(crate) pttl: Option<Duration>,
    /// The holder's hold count here, whoever it is; 0 when the lock is free here.
    pub(crate) holder_count: u32,
    /// The node's fencing counter, when it has one.
    pub(crate) counter: Option<u64>,
    /// A digest of the holder's hold field when one hold has the lock here (never the field).
    pub(crate) holder: Option<String>,
}

impl FromRedisValue for Inspected {
    fn from_redis_value(value: Value) -> Result<Self, ParsingError> {
        let (exists, count, pttl, holder_count, counter, holder): (
            i64,
            i64,
            i64,
            i64,
            String,
            String,
        ) = redis::from_redis_value(value)?;
        let count_of = |count: i64| u32::try_from(count).map_err(|_| format!("hold count {count}"));
        Ok(Inspected {
            exists: exists == 1,
            count: count_of(count)?,
            pttl: u64::try_from(pttl)
                .ok()
                .filter(|_| exists == 1)
                .map(Duration::from_millis),
            holder_count: count_of(holder_count)?,
            counter: match counter.as_str() {
                "" => None,
                digits => Some(
                    digits
                        .parse()
                        .map_err(|_| format!("fencing counter {digits:?}"))?,
                ),
            },
            holder: Some(holder).filter(|digest| !digest.is_empty()),
        })
    }
}

announcing!(
    /// Gives up holds of many locks at once and announces each (`lua/abandon.lua`); answers
    /// how many were deleted.
    pub(crate) ABANDON, ABANDON_ON_CLUSTER, "lua/abandon.lua"
);

announcing!(
    /// [`ABANDON`] of read holds (`lua/abandon_read.lua`).
    pub(crate) ABANDON_READ, ABANDON_READ_ON_CLUSTER, "lua/holders_read.lua", "lua/rw_common.lua", "lua/abandon_read.lua"
);

announcing!(
    /// [`ABANDON`] of permits (`lua/abandon_read.lua` on a permits hash).
    pub(crate) ABANDON_PERMIT, ABANDON_PERMIT_ON_CLUSTER, "lua/holders_permit.lua", "lua/rw_common.lua", "lua/abandon_read.lua"
);

/// [`RENEW`] of permits (`lua/renew_read.lua` on a permits hash): each permit's own deadline.
pub(crate) static RENEW_PERMIT: LockScript = LockScript::new(concat!(
    include_str!("lua/holders_permit.lua"),
    include_str!("lua/rw_common.lua"),
    include_str!("lua/renew_read.lua")
));

/// [`INSPECT`] of one permit (`lua/inspect_read.lua` on a permits hash).
pub(crate) static INSPECT_PERMIT: LockScript = LockScript::new(concat!(
    include_str!("lua/holders_permit.lua"),
    include_str!("lua/rw_common.lua"),
    include_str!("lua/inspect_read.lua")
));

/// [`RENEW`] of read holds (`lua/renew_read.lua`): each reader's own deadline.
pub(crate) static RENEW_READ: LockScript = LockScript::new(concat!(
    include_str!("lua/holders_read.lua"),
    include_str!("lua/rw_common.lua"),
    include_str!("lua/renew_read.lua")
));

/// Renews many held locks on one node (`lua/renew.lua`): the watchdog's batch renewal of
/// reentrant holds (the contract of `redlock_watchdog::lock_kind::RenewScript`).
pub(crate) static RENEW: LockScript = LockScript::new(include_str!("lua/renew.lua"));

#[cfg(test)]
mod tests {
    use super::*;

    fn acquire_reply(status: i64, number: i64, holder: &str) -> Result<AcquireReply, ParsingError> {
        AcquireReply::from_redis_value(Value::Array(vec![
            Value::Int(status),
            Value::Int(number),
            Value::BulkString(holder.as_bytes().to_vec()),
        ]))
    }

    #[test]
    fn acquire_replies_are_decoded_by_status() {
        assert_eq!(
            acquire_reply(1, 42, ""),
            Ok(AcquireReply::NewHold { candidate: 42 })
        );
        assert_eq!(acquire_reply(2, 3, ""), Ok(AcquireReply::Nested));
        assert_eq!(
            acquire_reply(0, 1500, "client:task-1"),
            Ok(AcquireReply::HeldBy {
                pttl: Duration::from_millis(1500),
                holder: "client:task-1".into()
            })
        );
        assert_eq!(acquire_reply(3, 0, ""), Ok(AcquireReply::CountMismatch));
        assert!(acquire_reply(9, 0, "").is_err());
        assert!(
            acquire_reply(0, -1, "x").is_err(),
            "a lock always has an expiry"
        );
    }

    #[test]
    fn the_other_replies_are_decoded() {
        let int = |n| Value::Int(n);
        assert_eq!(
            UnlockReply::from_redis_value(int(0)),
            Ok(UnlockReply::Left(0))
        );
        assert_eq!(
            UnlockReply::from_redis_value(int(2)),
            Ok(UnlockReply::Left(2))
        );
        assert_eq!(
            UnlockReply::from_redis_value(int(-1)),
            Ok(UnlockReply::NotHeld)
        );
        assert!(UnlockReply::from_redis_value(int(-2)).is_err());
        let bulk = |text: &str| Value::BulkString(text.as_bytes().to_vec());
        let inspected = |e, c, p, h, counter: &str, holder: &str| {
            Inspected::from_redis_value(Value::Array(vec![
                int(e),
                int(c),
                int(p),
                int(h),
                bulk(counter),
                bulk(holder),
            ]))
        };
        assert_eq!(
            inspected(1, 2, 900, 2, "41", "5e1f"),
            Ok(Inspected {
                exists: true,
                count: 2,
                pttl: Some(Duration::from_millis(900)),
                holder_count: 2,
                counter: Some(41),
                holder: Some("5e1f".to_owned()),
            })
        );
        assert_eq!(
            inspected(0, 0, -2, 0, "", ""),
            Ok(Inspected {
                exists: false,
                count: 0,
                pttl: None,
                holder_count: 0,
                counter: None,
                holder: None,
            })
        );
        assert!(inspected(1, 0, 900, 1, "not a number", "").is_err());
    }
}
