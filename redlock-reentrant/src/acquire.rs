//! One acquisition attempt of a reentrant lock on the quorum: new holds get a fencing token
//! (written back before success), nested ones count up, and an attempt that fails or is dropped
//! is undone on every node where it landed.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use redlock_core::quorum::{lease_millis, validity};
use redlock_core::{Error, FanOut, LostReason, NodeErrorKind, OwnerToken};

use crate::fencing::choose_token;
use crate::hold::{new_generation, AcquirePlan, Grant, LeaseMode};
use crate::holds::{HoldGuard, Target};
use crate::inner::Inner;
use crate::lua::{AcquireReply, Applied, ACQUIRE, FENCE, UNDO};

/// What one attempt achieved.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// The lock is held (or held once more).
    Acquired(Grant),
    /// Another owner holds it on a majority, for up to `ttl` more: wait for its release.
    Held { ttl: Option<Duration> },
    /// No owner holds a majority: rivals split the votes, or nodes that did not answer leave
    /// it open. Try again after a short, jittered pause.
    Contended,
    /// This owner's fixed lease had run out under the nested attempt: the hold is over, and
    /// the next attempt starts a new one at once.
    Expired,
}

/// Makes one attempt. Holds this owner's hold for the whole attempt, and for its undo if the
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
    inner.check_request(&target.name, lease)?;
    let mut hold = inner.holds.lock(&target.hold).await;
    let forced_epoch = inner.holds.force_epoch();
    hold.refresh();
    if hold.pending_unlock().is_some() {
        // A release this owner could not complete comes first: its caller has moved on.
        hold = crate::unlock::finish_pending(inner, target, hold).await?;
    }
    let plan = hold
        .plan_acquire()
        .map_err(|reason| Error::lock_lost(&target.name, reason))?;
    let (expected, generation) = match plan {
        AcquirePlan::New => (0, new_generation()),
        AcquirePlan::Nested { expected } => {
            let generation = hold.generation().expect("a nested acquisition has a hold");
            (expected, generation)
        }
    };
    let field = target.field(generation);
    // Registered before anything is sent, so the watchdog knows the hold the moment it exists;
    // dropped with the attempt if it does not complete.
    let registration = (plan == AcquirePlan::New).then(|| inner.register(target, &field));
    let mut guard = AttemptGuard::arm(
        Arc::clone(inner),
        target.clone(),
        field.clone(),
        hold,
        expected + 1,
    );

    let config = inner.redlock.config();
    let timeout = config.node_timeout_for(lease);
    let drift = config.drift_for(lease);
    let call = ACQUIRE
        .call()
        .replicated()
        .key(target.key())
        .key(&*inner.fence_key_of(target.key()))
        .arg(field.as_str())
        .arg(lease_millis(lease))
        .arg(expected)
        .arg(inner.token_hint())
        .arg(target.field_prefix());
    // Decided once a majority granted, or a majority answered and too few can still grant; the
    // replies still out may grant late, which the undo (queued behind them) takes back.
    let fan: FanOut<AcquireReply> = inner
        .redlock
        .nodes()
        .run_script_until(&call, timeout, |fan| {
            fan.decided_by(fan.count(AcquireReply::granted))
        })
        .await;
    let granted = fan.count(AcquireReply::granted);
    // Where the attempt may have applied: granted, or no answer to tell (a node skipped as
    // unresponsive was not sent it).
    let landed: Vec<bool> = fan
        .replies()
        .iter()
        .map(|reply| match reply {
            Ok(reply) => reply.granted(),
            #[cfg(feature = "sabotage")]
            Err(_) if crate::sabotage::undo_only_seen_grants() => false,
            Err(err) => !matches!(err.kind, NodeErrorKind::Unresponsive),
        })
        .collect();
    // Where it was seen to land: the undo waits for these nodes only.
    let seen: Vec<bool> = fan
        .replies()
        .iter()
        .map(|reply| reply.as_ref().is_ok_and(AcquireReply::granted))
        .collect();
    let started = fan.started();
    let in_time = |elapsed: Duration| validity(lease, elapsed, drift).is_some();

    if granted >= fan.quorum() && in_time(fan.elapsed()) {
        let token = match plan {
            AcquirePlan::New => {
                let candidates: Vec<u64> = fan
                    .values()
                    .filter_map(|reply| match reply {
                        AcquireReply::NewHold { candidate } => Some(*candidate),
                        _ => None,
                    })
                    .collect();
                let granted_new =
                    |node: usize| matches!(fan.replies()[node], Ok(AcquireReply::NewHold { .. }));
                write_back_token(inner, target, &field, &candidates, timeout, granted_new).await
            }
            // A hold being re-entered always has its token.
            AcquirePlan::Nested { .. } => Ok((guard.hold().token().unwrap_or_default(), false)),
        };
        match token {
            Ok(_) if inner.is_shut_down() => {
                // The client shut down while this attempt was in flight: it must not hand out
                // a hold that shutdown did not see.
                guard
                    .undo_now(|node| landed[node], |node| seen[node], true)
                    .await;
                drop(guard.disarm());
                return Err(Error::ShutDown);
            }
            Ok(_) if plan == AcquirePlan::New && inner.holds.forced_since(forced_epoch) => {
                // A forced unlock of this client overlapped the attempt: its deletion may land
                // after the grant, and nobody would tell this holder. Undo, and try again.
                guard
                    .undo_now(|node| landed[node], |node| seen[node], true)
                    .await;
                drop(guard.disarm());
                return Ok(Outcome::Contended);
            }
            Ok(_)
                if plan != AcquirePlan::New
                    && guard
                        .hold()
                        .lost_signal()
                        .is_some_and(|lost| lost.is_lost()) =>
            {
                // The hold was lost while this nested attempt was in flight (its fixed lease
                // ran out, say): no acquisition is granted on a lost hold. Undo it, and say so.
                guard
                    .undo_now(|node| landed[node], |node| seen[node], false)
                    .await;
                let mut hold = guard.disarm();
                return match hold.nested_refused() {
                    LostReason::LeaseExpired => Ok(Outcome::Expired),
                    reason => Err(Error::lock_lost(&target.name, reason)),
                };
            }
            Ok((token, written_back)) if in_time(started.elapsed()) => {
                #[cfg(feature = "sabotage")]
                let started = if crate::sabotage::skip_validity() {
                    // The broken twin counts the lease from the reply, not the request.
                    std::time::Instant::now()
                } else {
                    started
                };
                let valid_until = started + (lease - drift);
                let mut hold = guard.disarm();
                let grant = match registration {
                    Some(registration) => {
                        inner.counters.new_hold(written_back);
                        hold.acquired_new(
                            registration,
                            generation,
                            token,
                            mode,
                            (lease, valid_until),
                        )
                    }
                    None => hold.acquired_nested(mode, (lease, valid_until)),
                };
                tracing::debug!(lock = %target.name, count = hold.count(), granted, "acquired");
                return Ok(Outcome::Acquired(grant));
            }
            Ok(_) | Err(None) => {}
            Err(Some(mut written)) => {
                // The fencing write-back did not reach a majority: without it the token could
                // be smaller than a later holder's. Undo, and report the missing quorum.
                guard
                    .undo_now(|node| landed[node], |node| seen[node], true)
                    .await;
                drop(guard.disarm());
                return Err(Error::no_quorum(
                    &target.name,
                    written.count(|reply| *reply == Applied::Yes),
                    &mut written,
                ));
            }
        }
    }

    // Not acquired: undo wherever the attempt landed (a grant may have lost its reply). Only
    // an attempt that may have reached a majority could have looked like a holder to anyone,
    // so only its undo announces a release. If this await is dropped, the guard undoes.
    let could_have_held = landed.iter().filter(|landed| **landed).count() >= fan.quorum();
    guard
        .undo_now(|node| landed[node], |node| seen[node], could_have_held)
        .await;
    let mut hold = guard.disarm();
    drop(registration);
    failure(target, &mut hold, plan, granted, lease, fan)
}

/// Why an attempt that a majority did not grant in time failed, or who holds the lock.
fn failure(
    target: &Target,
    hold: &mut HoldGuard,
    plan: AcquirePlan,
    granted: usize,
    lease: Duration,
    mut fan: FanOut<AcquireReply>,
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
        return Err(Error::ValidityExhausted {
            name: target.name.to_string(),
            elapsed: fan.started().elapsed(),
            lease,
        });
    }
    let unanswered = fan.replies().len() - fan.answered();
    if let AcquirePlan::Nested { .. } = plan {
        // A nested acquisition never waits for another holder: this owner's hold is there or
        // it is gone. Gone when even the nodes that did not answer could not make a majority.
        if granted + unanswered >= fan.quorum() {
            return Err(Error::no_quorum(&target.name, granted, &mut fan));
        }
        return match hold.nested_refused() {
            LostReason::LeaseExpired => Ok(Outcome::Expired),
            reason => Err(Error::lock_lost(&target.name, reason)),
        };
    }
    // Only an owner that a majority names is waited for; anything less is a split vote or an
    // uncertain count, which a short jittered pause resolves.
    let mut holders: HashMap<&str, (usize, Duration)> = HashMap::new();
    for reply in fan.values() {
        if let AcquireReply::HeldBy { pttl, holder } = reply {
            let entry = holders.entry(holder.as_str()).or_default();
            entry.0 += 1;
            entry.1 = entry.1.max(*pttl);
        }
    }
    match holders.values().max_by_key(|(nodes, _)| *nodes) {
        Some(&(nodes, ttl)) if nodes >= fan.quorum() => Ok(Outcome::Held { ttl: Some(ttl) }),
        _ => Ok(Outcome::Contended),
    }
}

/// Picks the new hold's token and writes it back, on the nodes that granted the hold, until a
/// majority stands at it. On failure, the write-back's answers (`None` when there was no
/// candidate to choose from).
async fn write_back_token(
    inner: &Inner,
    target: &Target,
    field: &OwnerToken,
    candidates: &[u64],
    timeout: Duration,
    granted_new: impl Fn(usize) -> bool,
) -> Result<(u64, bool), Option<FanOut<Applied>>> {
    let choice = choose_token(candidates, inner.redlock.quorum()).ok_or(None)?;
    if !choice.needs_write_back {
        inner.handed_out(choice.token);
        return Ok((choice.token, false));
    }
    let call = FENCE
        .call()
        .replicated()
        .key(target.key())
        .key(&*inner.fence_key_of(target.key()))
        .arg(field.as_str())
        .arg(choice.token);
    // Only the nodes that granted this hold can take the write-back: the others would answer
    // "not held here" at best, and a paused one would cost a whole per-node timeout.
    let written: FanOut<Applied> = inner
        .redlock
        .nodes()
        .run_script_on(&call, timeout, granted_new, |fan| {
            let written = fan.count(|reply| *reply == Applied::Yes);
            written >= fan.quorum() || written + fan.in_flight() < fan.quorum()
        })
        .await;
    if written.has_quorum(|reply| *reply == Applied::Yes) {
        inner.handed_out(choice.token);
        Ok((choice.token, true))
    } else {
        Err(Some(written))
    }
}

/// Undoes the attempt on drop unless disarmed; keeps the owner's hold until the undo is queued
/// on every node (each node then runs it before anything this owner sends next).
struct AttemptGuard {
    inner: Arc<Inner>,
    target: Target,
    /// The attempt's hold field (see [`Target::field`]).
    field: OwnerToken,
    hold: Option<HoldGuard>,
    expected_after: u32,
}

impl AttemptGuard {
    fn arm(
        inner: Arc<Inner>,
        target: Target,
        field: OwnerToken,
        hold: HoldGuard,
        expected_after: u32,
    ) -> Self {
        Self {
            inner,
            target,
            field,
            hold: Some(hold),
            expected_after,
        }
    }

    fn hold(&self) -> &HoldGuard {
        self.hold.as_ref().expect("armed guard holds the hold")
    }

    fn disarm(mut self) -> HoldGuard {
        self.hold.take().expect("armed guard holds the hold")
    }

    async fn undo_now(
        &mut self,
        landed: impl Fn(usize) -> bool,
        seen: impl Fn(usize) -> bool,
        announce: bool,
    ) {
        undo(
            &self.inner,
            &self.target,
            &self.field,
            self.expected_after,
            landed,
            seen,
            announce,
        )
        .await;
    }
}

impl Drop for AttemptGuard {
    fn drop(&mut self) {
        let Some(hold) = self.hold.take() else {
            return;
        };
        let (inner, target) = (Arc::clone(&self.inner), self.target.clone());
        let (field, expected_after) = (self.field.clone(), self.expected_after);
        let cleanup = async move {
            // Dropped before the answers came: it may have landed anywhere, on a majority too.
            undo(
                &inner,
                &target,
                &field,
                expected_after,
                |_| true,
                |_| false,
                true,
            )
            .await;
            drop(hold);
        };
        redlock_core::spawn_cleanup(cleanup);
    }
}

/// Takes back one attempt's increment on every node where it landed (idempotent).
/// `landed(node)` says where the attempt may have applied: a node that answered "held by
/// another owner" or "not the expected count" applied nothing and is not asked. `seen(node)`:
/// the nodes seen to grant it, whose undo is awaited; the others' undo is queued behind the
/// attempt and finishes in the background (a node that has not answered the attempt would only
/// make the caller wait its timeout). `announce`: whether a lock deleted by the undo is
/// announced to waiters as a release.
async fn undo(
    inner: &Inner,
    target: &Target,
    field: &OwnerToken,
    expected_after: u32,
    landed: impl Fn(usize) -> bool,
    seen: impl Fn(usize) -> bool,
    announce: bool,
) {
    let lease = inner.watchdog.timeout();
    let call = UNDO
        .call()
        .key(target.key())
        .arg(field.as_str())
        .arg(expected_after)
        .arg(if announce { target.channel() } else { "" })
        .arg(inner.request_id())
        .by_source()
        .releasing();
    // Queued behind the attempt on every node where it may land, so it takes back a grant
    // that comes late too.
    let fan: FanOut<Applied> = inner
        .redlock
        .nodes()
        .run_script_on(
            &call,
            inner.redlock.config().node_timeout_for(lease),
            landed,
            |fan| fan.replied_on(&seen),
        )
        .await;
    for err in fan
        .errors()
        .filter(|err| !err.is_not_asked() && !err.is_not_awaited())
    {
        tracing::debug!(node = %err.address, error = %err.kind, "undo failed on a node; the lease bounds it");
    }
}
