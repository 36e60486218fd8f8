//! Releasing holds: one nested hold (`unlock`), any holder's lock (`force_unlock`), or every
//! hold of a client at shutdown.

use std::sync::Arc;

use futures_util::future::join_all;
use redlock_core::FanOut;
use redlock_watchdog::LostReason;

use crate::acquire::millis;
use crate::client::Inner;
use crate::holds::{HoldCell, HoldState, Target};
use crate::scripts::{ABANDON, FORCE_UNLOCK, UNLOCK};
use crate::Error;

/// What an unlock does when too few nodes answer it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OnNoQuorum {
    /// Keep the hold (counted and renewed) and its pending request, for the caller to retry:
    /// `RLock::unlock`, whose caller can call again.
    KeepHold,
    /// Give the whole hold up: a guard's release, which nobody can retry once the guard is
    /// gone. See [`give_up`].
    GiveUp,
}

/// Releases one nested hold; returns how many are left.
///
/// The last release drops the watchdog registration before anything is sent, so no renewal
/// follows it. Each request carries an id that every node remembers with its answer for a short
/// while: retrying after a lost reply (here, or in a later call after an error) gets the same
/// answers instead of a false "not owner".
pub(crate) async fn unlock(
    inner: &Arc<Inner>,
    target: &Target,
    on_no_quorum: OnNoQuorum,
) -> Result<u32, Error> {
    inner.check_open()?;
    let not_owner = || Error::NotOwner {
        name: target.name.to_string(),
    };
    let Some(cell) = inner.holds.get(&target.hold) else {
        return Err(not_owner());
    };
    let mut state = cell.state.lock().await;
    if let Some(reason) = state.lost_reason() {
        // Unwinding a lost hold: one unlock per acquisition, each told the hold was lost.
        state.count = state.count.saturating_sub(1);
        if state.count == 0 {
            state.clear(&cell);
        }
        drop(state);
        drop(cell);
        inner.holds.forget_if_idle(&target.hold);
        return Err(Error::LockLost {
            name: target.name.to_string(),
            reason,
        });
    }
    if state.count == 0 {
        drop(state);
        drop(cell);
        inner.holds.forget_if_idle(&target.hold);
        return Err(not_owner());
    }
    if state.count == 1 {
        // First thing: stop renewing.
        state.registration = None;
    }
    let request = state
        .pending_unlock
        .get_or_insert_with(|| inner.request_id())
        .clone();
    let config = inner.redlock.config();
    let timeout = config.node_timeout_for(inner.watchdog.timeout());
    let latch = format!("{}:unlock:{request}", target.key());
    #[cfg(feature = "sabotage")]
    let unlock_script: &redlock_core::LockScript = if crate::sabotage::release_without_compare() {
        &crate::scripts::UNLOCK_WITHOUT_COMPARE
    } else {
        &UNLOCK
    };
    #[cfg(not(feature = "sabotage"))]
    let unlock_script: &redlock_core::LockScript = &UNLOCK;
    let call = unlock_script
        .call()
        .key(target.key())
        .key(&latch)
        .arg(target.owner())
        .arg(target.channel())
        .arg(&request)
        .arg(millis(inner.latch_ttl()))
        .arg(state.count);
    let nodes = inner.redlock.nodes().len();
    let mut retry = 0;
    let outcome = loop {
        let mut fan: FanOut<i64> = inner.redlock.nodes().run_script(&call, timeout).await;
        let released = fan.count(|left| *left >= 0);
        let refused = fan.count(|left| *left < 0);
        if released >= fan.quorum() {
            state.count -= 1;
            state.pending_unlock = None;
            if state.count == 0 {
                state.clear(&cell);
            }
            tracing::debug!(lock = %target.name, left = state.count, released, "unlocked");
            break Ok(state.count);
        }
        if released + (nodes - fan.answered()) < fan.quorum() || refused >= fan.quorum() {
            // A majority no longer knows of this hold: it was lost before the unlock.
            let reason = state.lost_reason().unwrap_or(LostReason::NotOwner);
            if let Some(lost) = &state.lost {
                lost.fire(reason);
            }
            state.registration = None;
            state.pending_unlock = None;
            state.count -= 1;
            if state.count == 0 {
                state.clear(&cell);
            }
            break Err(Error::LockLost {
                name: target.name.to_string(),
                reason,
            });
        }
        if retry >= config.retry.retries {
            let answered = fan.answered();
            let err = Error::no_quorum(&target.name, answered, &mut fan);
            if on_no_quorum == OnNoQuorum::GiveUp {
                give_up(inner, target, &mut state, &cell).await;
            }
            break Err(err);
        }
        tokio::time::sleep(config.retry.delay(retry)).await;
        retry += 1;
    };
    drop(state);
    drop(cell);
    inner.holds.forget_if_idle(&target.hold);
    outcome
}

/// Gives up a hold whose release could not reach a majority and that nobody can release any
/// more. The client stops renewing it first and fires its lost signal
/// ([`LostReason::QuorumLost`]): nested holds still in use answer `LockLost` until they are
/// unwound, as for any lost hold. Then it deletes the lock where this owner holds it, retried
/// until a majority answered; where that fails, it expires within its lease. Runs with the
/// hold's state locked, so this owner's next acquisition of the lock is sent after the deletion
/// on every node's connection.
async fn give_up(inner: &Arc<Inner>, target: &Target, state: &mut HoldState, cell: &HoldCell) {
    if let Some(lost) = &state.lost {
        lost.fire(LostReason::QuorumLost);
    }
    state.registration = None;
    state.pending_unlock = None;
    state.count = state.count.saturating_sub(1);
    if state.count == 0 {
        state.clear(cell);
    }
    let config = inner.redlock.config();
    let timeout = config.node_timeout_for(inner.watchdog.timeout());
    let call = ABANDON
        .call()
        .arg(inner.request_id())
        .key(target.key())
        .arg(target.owner())
        .arg(target.channel())
        .by_source();
    for retry in 0..=config.retry.retries {
        let fan: FanOut<i64> = inner.redlock.nodes().run_script(&call, timeout).await;
        if fan.answered() >= fan.quorum() {
            return;
        }
        tokio::time::sleep(config.retry.delay(retry)).await;
    }
    tracing::warn!(lock = %target.name, "gave up a hold no majority answered for; it expires with its lease");
}

/// Deletes the lock whoever holds it; returns whether a majority held it.
pub(crate) async fn force_unlock(inner: &Arc<Inner>, target: &Target) -> Result<bool, Error> {
    inner.check_open()?;
    inner
        .redlock
        .config()
        .check_request(&target.name, inner.watchdog.timeout())?;
    let call = FORCE_UNLOCK
        .call()
        .key(target.key())
        .arg(target.channel())
        .arg(inner.request_id())
        .by_source();
    let timeout = inner
        .redlock
        .config()
        .node_timeout_for(inner.watchdog.timeout());
    let mut fan: FanOut<i64> = inner.redlock.nodes().run_script(&call, timeout).await;
    // This client's own holders hear of it now rather than at the next renewal.
    for (_, cell) in inner.holds.of_key(target.key()) {
        if let Ok(mut state) = cell.state.try_lock() {
            if let Some(lost) = &state.lost {
                lost.fire(LostReason::NotOwner);
            }
            state.registration = None;
        }
    }
    if fan.answered() < fan.quorum() {
        return Err(Error::no_quorum(&target.name, fan.answered(), &mut fan));
    }
    Ok(fan.has_quorum(|deleted| *deleted == 1))
}

/// Releases every hold of this client (shutdown): each lock it holds is deleted whatever its
/// nesting depth, in batches per node like renewal.
pub(crate) async fn abandon_all(inner: &Arc<Inner>) {
    // Batches of hundreds of locks get the renewal batches' timeout, not one lock's.
    let node_timeout = inner
        .redlock
        .config()
        .node_timeout_for(inner.watchdog.timeout());
    let timeout = inner.watchdog.config().renew_request_timeout(node_timeout);
    let mut held = Vec::new();
    for (hold, cell) in inner.holds.all() {
        let mut state = Arc::clone(&cell.state).lock_owned().await;
        if state.count > 0 {
            state.registration = None;
            held.push((hold, cell, state));
        }
    }
    let batch_size = inner.watchdog.config().batch_size;
    let message = inner.request_id();
    let channels: Vec<String> = held
        .iter()
        .map(|(hold, _, _)| format!("{}:released", hold.key))
        .collect();
    let calls: Vec<_> = held
        .chunks(batch_size)
        .zip(channels.chunks(batch_size))
        .map(|(batch, channels)| {
            batch.iter().zip(channels).fold(
                ABANDON.call().arg(&message).by_source(),
                |call, ((hold, _, _), channel)| call.key(&*hold.key).arg(&*hold.owner).arg(channel),
            )
        })
        .collect();
    let fans: Vec<FanOut<i64>> = join_all(
        calls
            .iter()
            .map(|call| inner.redlock.nodes().run_script(call, timeout)),
    )
    .await;
    if fans.iter().any(|fan| fan.answered() < fan.quorum()) {
        tracing::warn!(
            "shutdown could not reach a majority for some locks; they expire with their lease"
        );
    }
    for (_, cell, mut state) in held {
        if let Some(lost) = &state.lost {
            lost.fire(LostReason::Shutdown);
        }
        state.clear(&cell);
    }
}
