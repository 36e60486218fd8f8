//! One acquisition attempt of a reentrant lock on the quorum: new holds get a fencing token
//! (written back before success), nested ones count up, and an attempt that fails or is dropped
//! is undone on every node where it landed.

use std::sync::Arc;
use std::time::{Duration, Instant};

use redlock_core::quorum::validity;
use redlock_core::FanOut;
use redlock_watchdog::{LostReason, LostSignal, Registration};
use tokio::sync::OwnedMutexGuard;

use crate::client::Inner;
use crate::fencing::choose_token;
use crate::holds::{HoldCell, HoldState, Target};
use crate::scripts::{ACQUIRE, FENCE, UNDO};
use crate::Error;

/// How the lease of a hold is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LeaseMode {
    /// The watchdog lease, renewed while the holder lives.
    Watchdog,
    /// A fixed lease, never renewed.
    Fixed(Duration),
}

/// What one attempt achieved.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// The lock is held (or held once more).
    Acquired(Acquired),
    /// Another owner holds it, for up to `ttl` more.
    Held { ttl: Option<Duration> },
}

/// A successful acquisition.
#[derive(Debug, Clone)]
pub(crate) struct Acquired {
    pub(crate) token: u64,
    pub(crate) lost: LostSignal,
}

/// A node's answer to the acquire script.
const NEW_HOLD: i64 = 1;
const NESTED: i64 = 2;
const HELD_BY_OTHER: i64 = 0;

/// Makes one attempt. Holds this owner's cell for the whole attempt, and for its undo if the
/// attempt is dropped half-way.
pub(crate) async fn attempt(
    inner: &Arc<Inner>,
    target: &Target,
    mode: LeaseMode,
) -> Result<Outcome, Error> {
    inner.check_open()?;
    let lease = match mode {
        LeaseMode::Watchdog => inner.watchdog.timeout(),
        LeaseMode::Fixed(lease) => lease,
    };
    let config = inner.redlock.config();
    config.check_request(&target.name, lease)?;
    let cell = inner.holds.cell(&target.hold);
    let state = Arc::clone(&cell.state).lock_owned().await;
    let mut guard = AttemptGuard::arm(Arc::clone(inner), target.clone(), Arc::clone(&cell), state);
    if let Some(reason) = guard.state().lost_reason() {
        // A lost hold answers every operation with LockLost until it is unwound by unlocks;
        // a nested acquisition must not quietly become a new hold.
        let state = guard.disarm();
        drop(state);
        return Err(Error::LockLost {
            name: target.name.to_string(),
            reason,
        });
    }
    let expected = guard.state().count;
    guard.expected_after = expected + 1;
    // Registered before anything is sent, so the watchdog knows the hold the moment it exists;
    // dropped with the attempt if it does not complete.
    let registration =
        (expected == 0).then(|| inner.watchdog.register(target.key(), target.owner()));

    let timeout = config.node_timeout_for(lease);
    let drift = config.drift_for(lease);
    let call = ACQUIRE
        .call()
        .key(target.key())
        .key(&inner.fence_key)
        .arg(target.owner())
        .arg(millis(lease))
        .arg(expected);
    let fan: FanOut<(i64, i64)> = inner.redlock.nodes().run_script(&call, timeout).await;
    let granted = fan.count(|(status, _)| *status == NEW_HOLD || *status == NESTED);
    // Where the attempt may have applied: granted, or no answer to tell.
    let landed: Vec<bool> = fan
        .replies()
        .iter()
        .map(|reply| match reply {
            Ok((status, _)) => *status == NEW_HOLD || *status == NESTED,
            Err(_) => true,
        })
        .collect();
    let started = fan.started();
    let in_time = |elapsed: Duration| validity(lease, elapsed, drift).is_some();

    if granted >= fan.quorum() && in_time(fan.elapsed()) {
        let token = if expected == 0 {
            let candidates: Vec<u64> = fan
                .values()
                .filter(|(status, _)| *status == NEW_HOLD)
                .filter_map(|(_, candidate)| u64::try_from(*candidate).ok())
                .collect();
            let granted_new = |node: usize| matches!(fan.replies()[node], Ok((NEW_HOLD, _)));
            write_back_token(
                inner,
                target,
                &candidates,
                timeout,
                fan.quorum(),
                granted_new,
            )
            .await
        } else {
            // A hold being re-entered always has its token.
            Ok(cell.token().unwrap_or_default())
        };
        match token {
            Ok(token) if in_time(started.elapsed()) => {
                #[cfg(feature = "sabotage")]
                let started = if crate::sabotage::skip_validity() {
                    // The broken twin counts the lease from the reply, not the request.
                    std::time::Instant::now()
                } else {
                    started
                };
                let valid_until = started + (lease - drift);
                let mut state = guard.disarm();
                let lost = settle(&mut state, &cell, registration, mode, valid_until, token);
                tracing::debug!(lock = %target.name, count = state.count, granted, "acquired");
                return Ok(Outcome::Acquired(Acquired { token, lost }));
            }
            Ok(_) | Err(None) => {}
            Err(Some(mut written)) => {
                // The fencing write-back did not reach a majority: without it the token could
                // be smaller than a later holder's. Undo, and report the missing quorum.
                guard.undo_now(|node| landed[node]).await;
                let state = guard.disarm();
                drop(state);
                drop(cell);
                inner.holds.forget_if_idle(&target.hold);
                return Err(Error::no_quorum(
                    &target.name,
                    written.count(|done| *done == 1),
                    &mut written,
                ));
            }
        }
    }

    // Not acquired: undo wherever the attempt landed (a grant may have lost its reply). If this
    // await is dropped, the guard undoes instead.
    guard.undo_now(|node| landed[node]).await;
    let mut state = guard.disarm();
    let failure = failure(target, &mut state, expected, granted, lease, fan);
    drop(state);
    drop(cell);
    inner.holds.forget_if_idle(&target.hold);
    failure
}

/// Why an attempt that a majority did not grant in time failed, or who holds the lock.
fn failure(
    target: &Target,
    state: &mut HoldState,
    expected: u32,
    granted: usize,
    lease: Duration,
    mut fan: FanOut<(i64, i64)>,
) -> Result<Outcome, Error> {
    if let Some(found) = fan.wrong_type() {
        return Err(Error::WrongType {
            key: target.key().to_owned(),
            found,
        });
    }
    if fan.answered() < fan.quorum() {
        return Err(Error::no_quorum(&target.name, fan.answered(), &mut fan));
    }
    if granted >= fan.quorum() {
        return Err(redlock_core::Error::ValidityExhausted {
            name: target.name.to_string(),
            elapsed: fan.started().elapsed(),
            lease,
        }
        .into());
    }
    if expected > 0 {
        // A nested acquisition never waits for another holder: this owner's hold is there or
        // it is gone. Gone when even the nodes that did not answer could not make a majority.
        let unanswered = fan.replies().len() - fan.answered();
        if granted + unanswered >= fan.quorum() {
            return Err(Error::no_quorum(&target.name, granted, &mut fan));
        }
        let reason = state.lost_reason().unwrap_or(LostReason::NotOwner);
        if let Some(lost) = &state.lost {
            lost.fire(reason);
        }
        // Stays lost until its unlocks unwind it.
        state.registration = None;
        return Err(Error::LockLost {
            name: target.name.to_string(),
            reason,
        });
    }
    let ttl = fan
        .values()
        .filter(|(status, _)| *status == HELD_BY_OTHER)
        .filter_map(|(_, pttl)| u64::try_from(*pttl).ok())
        .max()
        .map(Duration::from_millis);
    Ok(Outcome::Held { ttl })
}

/// Picks the new hold's token and writes it back, on the nodes that granted the hold, until a
/// majority stands at it. On failure, the write-back's answers (`None` when there was no
/// candidate to choose from).
async fn write_back_token(
    inner: &Inner,
    target: &Target,
    candidates: &[u64],
    timeout: Duration,
    quorum: usize,
    granted_new: impl Fn(usize) -> bool,
) -> Result<u64, Option<FanOut<i64>>> {
    let choice = choose_token(candidates, quorum).ok_or(None)?;
    if !choice.needs_write_back {
        return Ok(choice.token);
    }
    let call = FENCE
        .call()
        .key(target.key())
        .key(&inner.fence_key)
        .arg(target.owner())
        .arg(choice.token);
    // Only the nodes that granted this hold can take the write-back: the others would answer
    // "not held here" at best, and a paused one would cost a whole per-node timeout.
    let written: FanOut<i64> = inner
        .redlock
        .nodes()
        .run_script_on(&call, timeout, granted_new)
        .await;
    if written.has_quorum(|done| *done == 1) {
        Ok(choice.token)
    } else {
        Err(Some(written))
    }
}

/// Records a successful acquisition in the hold and starts (or updates) its watchdog entry.
fn settle(
    state: &mut HoldState,
    cell: &HoldCell,
    registration: Option<Registration>,
    mode: LeaseMode,
    valid_until: Instant,
    token: u64,
) -> LostSignal {
    state.count += 1;
    if let Some(registration) = registration {
        state.lost = Some(registration.lost_signal().clone());
        cell.set_lost(state.lost.clone());
        state.registration = Some(registration);
        cell.set_token(Some(token));
    }
    if let Some(registration) = &state.registration {
        match mode {
            LeaseMode::Watchdog if state.count == 1 => registration.activate_renewed(valid_until),
            // A nested acquisition keeps the hold's renewal; a fixed lease moves its end.
            LeaseMode::Fixed(_) => registration.activate_fixed(valid_until),
            LeaseMode::Watchdog => {}
        }
    }
    state.lost.clone().unwrap_or_default()
}

/// Undoes the attempt on drop unless disarmed; holds the owner's cell until the undo ran.
struct AttemptGuard {
    inner: Arc<Inner>,
    target: Target,
    cell: Arc<HoldCell>,
    state: Option<OwnedMutexGuard<HoldState>>,
    expected_after: u32,
}

impl AttemptGuard {
    fn arm(
        inner: Arc<Inner>,
        target: Target,
        cell: Arc<HoldCell>,
        state: OwnedMutexGuard<HoldState>,
    ) -> Self {
        Self {
            inner,
            target,
            cell,
            state: Some(state),
            expected_after: 1,
        }
    }

    fn state(&mut self) -> &mut HoldState {
        self.state.as_mut().expect("armed guard holds the state")
    }

    fn disarm(mut self) -> OwnedMutexGuard<HoldState> {
        self.state.take().expect("armed guard holds the state")
    }

    async fn undo_now(&mut self, landed: impl Fn(usize) -> bool) {
        undo(&self.inner, &self.target, self.expected_after, landed).await;
    }
}

impl Drop for AttemptGuard {
    fn drop(&mut self) {
        let Some(state) = self.state.take() else {
            return;
        };
        let (inner, target, cell) = (
            Arc::clone(&self.inner),
            self.target.clone(),
            Arc::clone(&self.cell),
        );
        let expected_after = self.expected_after;
        let cleanup = async move {
            // Dropped before the answers came: it may have landed anywhere.
            undo(&inner, &target, expected_after, |_| true).await;
            drop(state);
            drop(cell);
            inner.holds.forget_if_idle(&target.hold);
        };
        redlock_core::spawn_cleanup(cleanup);
    }
}

/// Takes back one attempt's increment on every node where it landed (idempotent).
/// `landed(node)` says where the attempt may have applied: a node that answered "held by
/// another owner" or "not the expected count" applied nothing and is not asked.
async fn undo(inner: &Inner, target: &Target, expected_after: u32, landed: impl Fn(usize) -> bool) {
    let lease = inner.watchdog.timeout();
    let call = UNDO
        .call()
        .key(target.key())
        .arg(target.owner())
        .arg(expected_after)
        .arg(target.channel())
        .arg(inner.request_id())
        .by_source();
    let fan: FanOut<i64> = inner
        .redlock
        .nodes()
        .run_script_on(
            &call,
            inner.redlock.config().node_timeout_for(lease),
            landed,
        )
        .await;
    for err in fan.errors().filter(|err| !err.is_not_asked()) {
        tracing::debug!(node = %err.address, error = %err.kind, "undo failed on a node; the lease bounds it");
    }
}

pub(crate) fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos().div_ceil(1_000_000)).unwrap_or(u64::MAX)
}
