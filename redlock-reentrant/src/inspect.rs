//! Questions about a lock that change nothing: is it locked, how deep is this owner's hold, how
//! long is left.

use std::sync::Arc;
use std::time::Duration;

use redlock_core::FanOut;

use crate::consensus::reached_by_majority;
use crate::holds::Target;
use crate::inner::Inner;
use crate::lua::{Inspected, INSPECT};
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
}

pub(crate) async fn inspect(inner: &Arc<Inner>, target: &Target) -> Result<Inspection, Error> {
    inner.check_open()?;
    inner.check_request(&target.name, inner.watchdog.timeout())?;
    let call = INSPECT.call().key(target.key()).arg(target.owner());
    let timeout = inner.node_timeout();
    let mut fan: FanOut<Inspected> = inner.redlock.nodes().run_script(&call, timeout).await;
    if let Some(found) = fan.wrong_type() {
        return Err(Error::WrongType {
            key: target.key().to_owned(),
            found,
        });
    }
    let quorum = fan.quorum();
    if fan.answered() < quorum {
        return Err(Error::no_quorum(&target.name, fan.answered(), &mut fan));
    }
    let locked = fan.has_quorum(|node| node.exists);
    let hold_count = reached_by_majority(fan.values().map(|node| node.count), quorum).unwrap_or(0);
    let remaining_ttl = reached_by_majority(fan.values().filter_map(|node| node.pttl), quorum);
    Ok(Inspection {
        locked,
        hold_count,
        remaining_ttl,
    })
}
