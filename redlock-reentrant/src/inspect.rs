//! Questions about a lock that change nothing: is it locked, how deep is this owner's hold, how
//! long is left, and the lock's status as anyone sees it.

use std::sync::Arc;
use std::time::Duration;

use redlock_core::lock_kind::FanOut;

use crate::consensus::reached_by_majority;
use crate::holds::Target;
use crate::inner::Inner;
use crate::lua::Inspected;
use crate::Error;

/// What a majority of nodes say about one lock, as seen by one owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Inspection {
    /// A majority holds the lock for someone.
    pub(crate) locked: bool,
    /// The owner's hold count that a majority reaches.
    pub(crate) hold_count: u32,
    /// The remaining lease that a majority reaches, if a majority holds it with an expiry.
    pub(crate) remaining_ttl: Option<Duration>,
    /// What anyone may know of the lock.
    pub(crate) status: LockStatus,
}

/// A lock's state as a majority of its nodes report it, whoever holds it: what
/// [`RLock::status`](crate::RLock::status) answers (and `redlock status` prints).
///
/// A snapshot: by the time it is read, the lock may have changed hands.
///
/// # Examples
///
/// ```no_run
/// # async fn run(lock: redlock_reentrant::RLock) -> Result<(), redlock_reentrant::Error> {
/// let status = lock.status().await?;
/// match status.remaining_ttl {
///     Some(ttl) if status.locked => println!("held {} deep, {ttl:?} left", status.holder_count),
///     _ => println!("free"),
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct LockStatus {
    /// A majority of all the nodes hold the lock for someone (during contention, not
    /// necessarily for one owner: then nobody can take it until the attempts are undone).
    pub locked: bool,
    /// The nodes that answered and hold the lock for someone.
    pub held_on: usize,
    /// The holder's hold count (nested acquisitions) that a majority reaches; 0 when free.
    pub holder_count: u32,
    /// The remaining lease that a majority reaches; `None` when free.
    pub remaining_ttl: Option<Duration>,
    /// The largest fencing counter among the nodes that answered (on standalone masters the
    /// counter is shared by every lock of the key prefix, on a Redis Cluster member each lock
    /// has its own; see docs/fencing.md): every token handed out so far is at most this. `None`
    /// when no node that answered has a counter.
    pub fencing_counter: Option<u64>,
    /// A majority of all the nodes hold the lock for one and the same hold (one owner's): it is
    /// held, not split between rival attempts (which are undone at once, or expire with their
    /// lease).
    pub held_by_one_owner: bool,
    /// The nodes that answered.
    pub answered: usize,
    /// The nodes configured.
    pub nodes: usize,
}

impl LockStatus {
    /// Whether the nodes that did not answer could make the lock held: it is not locked on a
    /// majority of those that answered, but would be if they all held it. Neither "locked"
    /// nor "free" can be said then.
    pub fn is_undecided(&self) -> bool {
        let quorum = redlock_core::quorum::majority(self.nodes);
        !self.locked && self.held_on + (self.nodes - self.answered) >= quorum
    }
}

pub(crate) async fn inspect(inner: &Arc<Inner>, target: &Target) -> Result<Inspection, Error> {
    inner.check_open()?;
    inner.check_request(&target.name, inner.watchdog.timeout())?;
    // The count asked for is this owner's current hold's; with none, no field has the bare
    // owner's name, and the count is 0.
    let generation = inner
        .holds
        .get(&target.hold)
        .and_then(|cell| cell.generation());
    let field = generation.map_or_else(|| target.hold.owner.clone(), |g| target.field(g));
    let call = target
        .kind()
        .inspect()
        .call()
        .key(target.key())
        .key(&*target.fence_key)
        .arg(field.as_str());
    let timeout = inner.node_timeout();
    let fan: FanOut<Inspected> = inner.redlock.nodes().run_script(&call, timeout).await;
    if let Some(found) = fan.wrong_type() {
        return Err(Error::WrongType {
            key: target.key().to_owned(),
            found,
        });
    }
    let quorum = fan.quorum();
    if fan.answered() < quorum {
        return Err(Error::no_quorum(&target.name, fan.answered(), fan));
    }
    let locked = fan.has_quorum(|node| node.exists);
    let majority = |value: fn(&Inspected) -> u32| {
        reached_by_majority(fan.values().map(value), quorum).unwrap_or(0)
    };
    let hold_count = majority(|node| node.count);
    let holder_count = majority(|node| node.holder_count);
    let remaining_ttl = reached_by_majority(fan.values().filter_map(|node| node.pttl), quorum);
    Ok(Inspection {
        locked,
        hold_count,
        remaining_ttl,
        status: LockStatus {
            locked,
            held_on: fan.count(|node| node.exists),
            holder_count: if locked { holder_count } else { 0 },
            remaining_ttl: remaining_ttl.filter(|_| locked),
            fencing_counter: fan.values().filter_map(|node| node.counter).max(),
            held_by_one_owner: one_owner_on(
                fan.values().map(|node| node.holder.as_deref()),
                quorum,
            ),
            answered: fan.answered(),
            nodes: fan.nodes(),
        },
    })
}

/// Whether `quorum` of the nodes' holder digests name one and the same owner.
fn one_owner_on<'a>(holders: impl Iterator<Item = Option<&'a str>>, quorum: usize) -> bool {
    let holders: Vec<&str> = holders.flatten().collect();
    holders
        .iter()
        .any(|holder| holders.iter().filter(|other| *other == holder).count() >= quorum)
}

#[cfg(test)]
mod tests {
    use super::one_owner_on;

    #[test]
    fn one_owner_needs_a_majority_of_its_own() {
        let one = |holders: &[Option<&str>]| one_owner_on(holders.iter().copied(), 2);
        assert!(one(&[Some("a"), Some("a"), None]));
        assert!(one(&[Some("a"), Some("b"), Some("a")]));
        // Held on a majority, but split between two owners: nobody holds it.
        assert!(!one(&[Some("a"), Some("b"), None]));
        assert!(!one(&[Some("a"), None, None]));
        assert!(!one(&[None, None, None]));
    }
}
