//! One acquisition attempt of a reentrant lock on the quorum: new holds get a fencing token
//! (written back before success), nested ones count up, and an attempt that fails or is dropped
//! is undone on every node where it landed.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use redlock_core::lock_kind::{FanOut, FinishOnDrop, Slot};
use redlock_core::quorum::lease_millis;
use redlock_core::{Error, InvalidArgument, LostReason, OwnerToken};
use redlock_watchdog::lock_kind::GiveUp;

use crate::fencing::choose_token;
use crate::gate::Ticket;
use crate::hold::{new_generation, AcquirePlan, Grant, Hold, LeaseMode};
use crate::holds::{HoldGuard, HoldKey, Target};
use crate::inner::Inner;
use crate::kind::{Kind, LockKeys};
use crate::lua::{AcquireReply, Applied, FENCE};

/// What one attempt achieved.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// The lock is held (or held once more). `refused_somewhere`: some node refused the
    /// attempt or did not answer (a writer that waits may be registered there).
    Acquired {
        grant: Grant,
        refused_somewhere: bool,
    },
    /// Another owner holds it on a majority, for up to `ttl` more: wait for its release.
    Held { ttl: Option<Duration> },
    /// No owner holds a majority: rivals split the votes, or nodes that did not answer leave
    /// it open. Try again after a short, jittered pause.
    Contended,
    /// This owner's fixed lease had run out under the nested attempt: the hold is over, and
    /// the next attempt starts a new one at once.
    Expired,
    /// A new hold is wanted (this owner's hold ended since the caller looked) and the caller
    /// has no turn in the client's line: nothing was sent; it takes its turn first.
    NeedsTurn,
}

/// Makes one attempt. Holds this owner's hold for the whole attempt, and for its undo if the
/// attempt is dropped half-way. A new hold granted takes the task's `turn` in the client's
/// line with it (see `gate`), except a read hold: readers do not exclude each other, so the
/// next task in line goes at once. `waits`: the caller will wait if refused (a writer that
/// will wait registers, so that new readers wait behind it). `first`: the caller's first look
/// (only there is a request for more permits than the semaphore has an error; later, a count
/// lowered meanwhile is waited out).
pub(crate) async fn attempt(
    inner: &Arc<Inner>,
    target: &Target,
    mode: LeaseMode,
    turn: &mut Option<Ticket>,
    waits: bool,
    first: bool,
) -> Result<Outcome, Error> {
    inner.check_open()?;
    let timing = match mode {
        LeaseMode::Watchdog => inner.timing,
        LeaseMode::Fixed(lease) => inner.redlock.config().timing(lease),
    };
    let (lease, timeout) = (timing.lease, timing.node_timeout);
    inner.check_request(&target.name, lease)?;
    let mut hold = inner.holds.lock(&target.hold).await;
    let forced_epoch = inner.holds.force_epoch();
    if hold.state().owes_release() {
        // A release this owner could not complete comes first: its caller has moved on.
        // Boxed: a whole release, rarely needed, would otherwise grow every attempt's future.
        hold = Box::pin(crate::unlock::finish_pending(inner, target, hold)).await?;
    }
    let plan = hold
        .state()
        .plan_acquire()
        .map_err(|reason| Error::lock_lost(&target.name, reason))?;
    if plan == AcquirePlan::New {
        refuse_clash(inner, target)?;
    }
    let (expected, generation) = match plan {
        AcquirePlan::New if turn.is_none() && takes_turns(target) => return Ok(Outcome::NeedsTurn),
        AcquirePlan::New => (0, new_generation()),
        AcquirePlan::Nested {
            expected,
            generation,
        } => (expected, generation),
    };
    let field = target.field(generation);
    // Registered before anything is sent, so the watchdog knows the hold the moment it exists;
    // dropped with the attempt if it does not complete.
    let mut registration = (plan == AcquirePlan::New).then(|| inner.register(target, &field));
    // The hold a nested attempt counts up, to tell why it went if it goes meanwhile.
    let nested = hold.state().giver().filter(|_| plan != AcquirePlan::New);
    let guard = Attempt {
        inner: Arc::clone(inner),
        target: target.clone(),
        field: field.clone(),
        hold,
        expected_after: expected + 1,
    }
    .arm();

    let call = target
        .kind()
        .acquire()
        .call()
        .replicated()
        .with_quorum(target.quorum())
        .key(target.key())
        .key(&*target.fence_key);
    // A read-write lock's side also reads the other side and the waiting writers.
    let call = match (&target.keys, target.kind()) {
        (LockKeys::ReadWrite(rw), Kind::Read) => call.key(&*rw.writer).key(&*rw.waiting),
        (LockKeys::ReadWrite(rw), _) => call.key(&*rw.readers).key(&*rw.waiting),
        // A semaphore's permits also read its count.
        (LockKeys::Permits(permits), _) => call.key(&*permits.count_key),
        (LockKeys::Fair(fair), _) => call
            .key(&*fair.queue)
            .key(&*fair.heartbeats)
            .key(&*fair.tickets),
        (LockKeys::Own, _) => call,
    };
    let call = call
        .arg(field.as_str())
        .arg(lease_millis(lease))
        .arg(expected)
        .arg(inner.token_hint())
        .arg(target.field_arg(None));
    let call = match &target.keys {
        // A writer or a fair lock's waiter that will wait registers, with its heartbeat.
        LockKeys::ReadWrite(_) | LockKeys::Fair(_) if target.kind() != Kind::Read => call
            .arg(u8::from(waits))
            .arg(lease_millis(inner.writer_heartbeat())),
        LockKeys::Permits(permits) => call
            .arg(permits.weight)
            .arg(permits.fixed.map_or(0, |fixed| fixed.permits)),
        _ => call,
    };
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
    // Where the attempt may have applied: granted, or sent with no answer to tell (a node
    // skipped as unresponsive was not sent it).
    // Read off the fan-out where they are needed, not collected.
    let landed = |node: usize| match &fan.slots()[node] {
        Slot::Replied(reply) => reply.granted(),
        Slot::NotAsked | Slot::Skipped => false,
        #[cfg(feature = "sabotage")]
        _ if crate::sabotage::undo_only_seen_grants() => false,
        Slot::Failed(_) | Slot::Pending => true,
    };
    // Where it was seen to land: the undo waits for these nodes only.
    let seen = |node: usize| fan.slots()[node].reply().is_some_and(AcquireReply::granted);
    let started = fan.started();
    let in_time = |elapsed: Duration| timing.validity(elapsed).is_some();
    // A master with another count than the one fixed: not granted, even by enough others (its
    // grants do not keep the fixed count); the failure says why.
    let count_differs = fan
        .values()
        .any(|reply| matches!(reply, AcquireReply::CountDiffers { .. }));
    let granted_in_time = granted >= fan.quorum() && !count_differs && in_time(fan.elapsed());

    let token = if granted_in_time {
        Some(match plan {
            AcquirePlan::New => {
                let candidates: Vec<u64> = fan
                    .values()
                    .filter_map(|reply| match reply {
                        AcquireReply::NewHold { candidate } => Some(*candidate),
                        _ => None,
                    })
                    .collect();
                let granted_new = |node: usize| {
                    matches!(
                        fan.slots()[node],
                        Slot::Replied(AcquireReply::NewHold { .. })
                    )
                };
                // Boxed, as the undo below: rare paths, which would otherwise make every
                // attempt's future (and its callers') larger, and every move of it slower.
                Box::pin(write_back_token(
                    inner,
                    target,
                    &field,
                    &candidates,
                    timeout,
                    granted_new,
                ))
                .await
            }
            // A hold being re-entered always has its token.
            AcquirePlan::Nested { .. } => {
                Ok((guard.hold().state().token().unwrap_or_default(), false))
            }
        })
    } else {
        None
    };
    let decision = decide(Facts {
        token,
        shut_down: inner.is_shut_down(),
        forced: plan == AcquirePlan::New && inner.holds.forced_since(forced_epoch),
        lost: plan != AcquirePlan::New && !guard.hold().state().is_live(),
        in_time: in_time(started.elapsed()),
        could_have_held: (0..fan.nodes()).filter(|node| landed(*node)).count() >= fan.quorum(),
    });
    let (announce, then) = match decision {
        Decision::Grant {
            token,
            written_back,
        } => {
            #[cfg(feature = "sabotage")]
            let started = if crate::sabotage::skip_validity() {
                // The broken twin counts the lease from the reply, not the request.
                std::time::Instant::now()
            } else {
                started
            };
            let valid = (lease, timing.valid_until(started));
            let grant = {
                let mut state = guard.hold().state();
                match registration.take() {
                    Some(registration) => {
                        inner.counters.new_hold(written_back);
                        // A reader lets the next task of the line through at once.
                        let turn = turn.take().filter(|_| takes_turns(target));
                        Some(state.acquired_new(registration, generation, token, mode, valid, turn))
                    }
                    // Nested: `None` when the hold was given up just now, where nothing could
                    // be sent.
                    None => state.acquired_nested(mode, valid),
                }
            };
            match grant {
                Some(grant) => {
                    let count = guard.disarm().hold.state().count();
                    tracing::debug!(lock = %target.name, count, granted, "acquired");
                    let refused_somewhere = fan.answered() < fan.nodes()
                        || fan
                            .values()
                            .any(|reply| matches!(reply, AcquireReply::HeldBy { .. }));
                    return Ok(Outcome::Acquired {
                        grant,
                        refused_somewhere,
                    });
                }
                None => (false, Then::NestedLost),
            }
        }
        Decision::Undo { announce, then } => (announce, then),
    };
    // Undo wherever the attempt landed (a grant may have lost its reply). If this await is
    // dropped, the guard undoes.
    Box::pin(guard.undo(landed, seen, announce)).await;
    let hold = guard.disarm().hold;
    drop(registration);
    match then {
        Then::Shutdown => Err(Error::Shutdown),
        Then::Contended => Ok(Outcome::Contended),
        Then::NestedLost => nested_lost(target, &hold, nested.as_ref()),
        Then::WriteBackFailed(written) => Err(Error::no_quorum(
            &target.name,
            written.count(|reply| *reply == Applied::Yes),
            written,
        )),
        Then::NotGranted => failure(target, &hold, nested.as_ref(), granted, lease, first, fan),
    }
}

/// Refuses, before anything is sent or queued, what this owner's own holds make impossible: a
/// write acquisition by an owner that holds the read side of the same lock would wait for
/// itself (Redisson's `RReadWriteLock` deadlocks there; a hold of the read side that was lost
/// and not unwound yet counts: its owner has to unlock it first); and the reentrant lock and a
/// read-write lock's write side of one name share their key, which one owner cannot hold twice.
pub(crate) fn refuse_clash(inner: &Inner, target: &Target) -> Result<(), Error> {
    let name = || target.name.to_string();
    match target.kind() {
        Kind::Write if holds(inner, target, Kind::Read) => {
            Err(InvalidArgument::UpgradeWouldDeadlock { name: name() }.into())
        }
        Kind::Write if holds(inner, target, Kind::Reentrant) => {
            Err(InvalidArgument::LockKindClash { name: name() }.into())
        }
        Kind::Reentrant if holds(inner, target, Kind::Write) => {
            Err(InvalidArgument::LockKindClash { name: name() }.into())
        }
        _ => Ok(()),
    }
}

/// Whether a new hold of `target` takes a turn in the client's line for it. A reader does not:
/// readers do not exclude each other, so the client's readers ask the nodes at once, side by
/// side (and a writer's new read hold, a downgrade, could otherwise wait behind a reader that
/// waits for it). Nor does a permit: permits are many, and each has an owner of its own. Nor
/// does a fair lock's waiter: its place is its ticket in the queue on the nodes, which every
/// waiting task takes for itself.
pub(crate) fn takes_turns(target: &Target) -> bool {
    !matches!(target.kind(), Kind::Read | Kind::Permit | Kind::Fair)
}

/// Whether `target`'s owner holds a hold of kind `kind` of the lock `target` is of (live, or
/// lost and not unwound): the read side beside a write side, or the reentrant lock and the write
/// side that share a key.
fn holds(inner: &Inner, target: &Target, kind: Kind) -> bool {
    let key = match (kind, target.keys.read_write()) {
        (Kind::Read, Some(rw)) => Arc::clone(&rw.readers),
        (Kind::Read, None) | (Kind::Permit | Kind::Fair, _) => return false,
        (Kind::Reentrant | Kind::Write, _) => Arc::clone(&target.hold.key),
    };
    let hold = HoldKey {
        key,
        kind,
        owner: target.hold.owner.clone(),
    };
    inner
        .holds
        .get(&hold)
        .is_some_and(|cell| !matches!(*cell.state(), Hold::Free))
}

/// What an attempt saw, once its fan-out (and a new hold's token write-back, whose answers are
/// a `W`) is in.
struct Facts<W> {
    /// The token and whether it was written back, when a majority granted in time; the
    /// write-back's answers when it missed a majority (`Err(None)`: no candidate to choose).
    token: Option<Result<(u64, bool), Option<W>>>,
    /// The client shut down meanwhile.
    shut_down: bool,
    /// A forced unlock of this client overlapped a new hold's attempt.
    forced: bool,
    /// The hold a nested attempt counts up was lost meanwhile.
    lost: bool,
    /// The grant's validity is still left now.
    in_time: bool,
    /// The attempt may have landed on a majority.
    could_have_held: bool,
}

/// What an attempt does with what it saw.
#[derive(Debug, PartialEq)]
enum Decision<W> {
    /// Hand the grant out, with its token.
    Grant { token: u64, written_back: bool },
    /// Undo it wherever it landed (announcing a release to waiters when `announce`), then
    /// answer as `then` says.
    Undo { announce: bool, then: Then<W> },
}

/// What an undone attempt answers.
#[derive(Debug, PartialEq)]
enum Then<W> {
    /// The client shut down while the attempt was in flight: it must not hand out a hold
    /// that shutdown did not see.
    Shutdown,
    /// A forced unlock overlapped: its deletion may land after the grant, and nobody would
    /// tell this holder. Try again.
    Contended,
    /// The hold was lost while this nested attempt was in flight (its fixed lease ran out,
    /// say): no acquisition is granted on a lost hold.
    NestedLost,
    /// The fencing write-back missed a majority: without it the token could be smaller than
    /// a later holder's.
    WriteBackFailed(W),
    /// Not granted in time: why, or who holds the lock ([`failure`]).
    NotGranted,
}

/// The attempt's decision. Only an attempt that may have reached a majority could have looked
/// like a holder to anyone, so an undo announces a release when it could have, and always once
/// a majority granted; a nested attempt's undo leaves the hold in place, so it never does.
fn decide<W>(facts: Facts<W>) -> Decision<W> {
    let undo = |announce, then| Decision::Undo { announce, then };
    match facts.token {
        Some(Ok(_)) if facts.shut_down => undo(true, Then::Shutdown),
        Some(Ok(_)) if facts.forced => undo(true, Then::Contended),
        Some(Ok(_)) if facts.lost => undo(false, Then::NestedLost),
        Some(Ok((token, written_back))) if facts.in_time => Decision::Grant {
            token,
            written_back,
        },
        Some(Err(Some(written))) => undo(true, Then::WriteBackFailed(written)),
        Some(Ok(_) | Err(None)) | None => undo(facts.could_have_held, Then::NotGranted),
    }
}

/// A nested attempt found its hold lost while it was in flight (and undid it): the hold is
/// over if its fixed lease ran out, or lost.
fn nested_lost(
    target: &Target,
    hold: &HoldGuard,
    nested: Option<&GiveUp>,
) -> Result<Outcome, Error> {
    let reason = match hold.state().nested_refused() {
        // Unwound to nothing (given up meanwhile): the hold's own record tells why.
        LostReason::NotOwner => nested
            .and_then(|record| record.lost_signal().reason())
            .unwrap_or(LostReason::NotOwner),
        reason => reason,
    };
    match reason {
        LostReason::LeaseExpired => Ok(Outcome::Expired),
        reason => Err(Error::lock_lost(&target.name, reason)),
    }
}

/// Why an attempt that a majority did not grant in time failed, or who holds the lock.
/// `nested`: the hold a nested attempt counts up. `first`: the caller's first look.
fn failure(
    target: &Target,
    hold: &HoldGuard,
    nested: Option<&GiveUp>,
    granted: usize,
    lease: Duration,
    first: bool,
    fan: FanOut<AcquireReply>,
) -> Result<Outcome, Error> {
    if let Some(found) = fan.wrong_type() {
        return Err(Error::WrongType {
            key: target.key().to_owned(),
            found,
        });
    }
    if fan.answered() < fan.quorum() {
        return Err(Error::no_quorum(&target.name, fan.answered(), fan));
    }
    let differs = fan.values().find_map(|reply| match reply {
        AcquireReply::CountDiffers { count } => Some(*count),
        _ => None,
    });
    if let (Some(found), LockKeys::Permits(permits)) = (differs, &target.keys) {
        // Another count than the one fixed: more permits could go out than either allows.
        return Err(InvalidArgument::PermitCountDiffers {
            name: target.name.to_string(),
            fixed: permits.fixed.map_or(0, |fixed| fixed.permits),
            found,
        }
        .into());
    }
    let over_count = fan.values().find_map(|reply| match reply {
        AcquireReply::OverCount { count } => Some(*count),
        _ => None,
    });
    if let (Some(count), LockKeys::Permits(permits)) = (over_count, &target.keys) {
        // More than the semaphore has: a mistake when asked, waited out when the count was
        // lowered during the wait (it may grow back; the lease bounds the pause).
        if first {
            return Err(InvalidArgument::TooManyPermits {
                name: target.name.to_string(),
                asked: permits.weight,
                count,
            }
            .into());
        }
        return Ok(Outcome::Held { ttl: Some(lease) });
    }
    if granted >= fan.quorum() {
        return Err(Error::ValidityExhausted {
            name: target.name.to_string(),
            elapsed: fan.started().elapsed(),
            lease,
        });
    }
    let unanswered = fan.nodes() - fan.answered();
    if nested.is_some() {
        // A nested acquisition never waits for another holder: this owner's hold is there or
        // it is gone. Gone when even the nodes that did not answer could not make a majority.
        if granted + unanswered >= fan.quorum() {
            return Err(Error::no_quorum(&target.name, granted, fan));
        }
        return nested_lost(target, hold, nested);
    }
    // Only an owner that a majority names is waited for; anything less is a split vote or an
    // uncertain count, which a short jittered pause resolves. Permits are waited for once too
    // many masters have none free for a quorum to grant (with one permit, or one master: a
    // majority), and none granted: a grant somewhere may be a rival's attempt meeting this
    // one, undone at once, which a short jittered pause resolves too.
    let waited_for = match &target.keys {
        LockKeys::Permits(_) if granted > 0 => usize::MAX,
        LockKeys::Permits(_) => fan.nodes() + 1 - fan.quorum(),
        _ => fan.quorum(),
    };
    let mut holders: HashMap<&str, (usize, Duration)> = HashMap::new();
    for reply in fan.values() {
        if let AcquireReply::HeldBy { pttl, holder } = reply {
            let entry = holders.entry(holder.as_str()).or_default();
            entry.0 += 1;
            entry.1 = entry.1.max(*pttl);
        }
    }
    match holders.values().max_by_key(|(nodes, _)| *nodes) {
        Some(&(nodes, ttl)) if nodes >= waited_for => Ok(Outcome::Held { ttl: Some(ttl) }),
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
        .key(&*target.fence_key)
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

/// An attempt in flight: what its undo needs, and the owner's hold, kept until the undo is
/// queued on every node (each node then runs it before anything this owner sends next).
struct Attempt {
    inner: Arc<Inner>,
    target: Target,
    /// The attempt's hold field (see [`Target::field`]).
    field: OwnerToken,
    hold: HoldGuard,
    expected_after: u32,
}

/// Undoes the attempt if dropped before it is settled: dropped before the answers came, it
/// may have landed anywhere, on a majority too.
type AttemptGuard = FinishOnDrop<Attempt>;

impl Attempt {
    fn arm(self) -> AttemptGuard {
        FinishOnDrop::new(
            self,
            |attempt| {
                Box::pin(async move {
                    attempt.undo(|_| true, |_| false, true).await;
                    drop(attempt.hold);
                })
            },
            // Nothing can be sent: the lease bounds what the attempt left.
            drop,
        )
    }

    fn hold(&self) -> &HoldGuard {
        &self.hold
    }

    async fn undo(
        &self,
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
    let call = target
        .kind()
        .undo()
        .call()
        .key(target.key())
        .arg(field.as_str())
        .arg(expected_after)
        .arg(if announce { target.channel() } else { "" })
        .arg(inner.new_request_arg())
        .by_source()
        .releasing();
    // Queued behind the attempt on every node where it may land, so it takes back a grant
    // that comes late too.
    let fan: FanOut<Applied> = inner
        .redlock
        .nodes()
        .run_script_on(&call, inner.node_timeout(), landed, |fan| {
            fan.replied_on(&seen)
        })
        .await;
    for err in fan.errors() {
        tracing::debug!(node = %err.address, error = %err.kind, "undo failed on a node; the lease bounds it");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An attempt a majority granted in time, token 7 written back, nothing else happening.
    fn granted() -> Facts<&'static str> {
        Facts {
            token: Some(Ok((7, true))),
            shut_down: false,
            forced: false,
            lost: false,
            in_time: true,
            could_have_held: true,
        }
    }

    fn undo(announce: bool, then: Then<&'static str>) -> Decision<&'static str> {
        Decision::Undo { announce, then }
    }

    #[test]
    fn a_grant_in_time_is_handed_out_with_its_token() {
        assert_eq!(
            decide(granted()),
            Decision::Grant {
                token: 7,
                written_back: true
            }
        );
    }

    #[test]
    fn what_happened_meanwhile_undoes_a_grant_in_this_order() {
        let all = Facts {
            shut_down: true,
            forced: true,
            lost: true,
            in_time: false,
            ..granted()
        };
        assert_eq!(decide(all), undo(true, Then::Shutdown));
        let forced = Facts {
            forced: true,
            lost: true,
            ..granted()
        };
        assert_eq!(decide(forced), undo(true, Then::Contended));
        // A nested attempt's undo leaves the hold on the nodes: nothing to announce.
        let lost = Facts {
            lost: true,
            in_time: false,
            ..granted()
        };
        assert_eq!(decide(lost), undo(false, Then::NestedLost));
        // Granted, but the validity ran out while the token was written back.
        let late = Facts {
            in_time: false,
            could_have_held: true,
            ..granted()
        };
        assert_eq!(decide(late), undo(true, Then::NotGranted));
    }

    #[test]
    fn a_write_back_that_missed_a_majority_is_undone_and_reported() {
        let missed = Facts {
            token: Some(Err(Some("answers"))),
            ..granted()
        };
        assert_eq!(decide(missed), undo(true, Then::WriteBackFailed("answers")));
        let no_candidate = Facts {
            token: Some(Err(None)),
            could_have_held: true,
            ..granted()
        };
        assert_eq!(decide(no_candidate), undo(true, Then::NotGranted));
    }

    #[test]
    fn an_attempt_not_granted_announces_only_if_it_could_have_held() {
        for could_have_held in [false, true] {
            let refused = Facts {
                token: None,
                could_have_held,
                ..granted()
            };
            assert_eq!(decide(refused), undo(could_have_held, Then::NotGranted));
        }
    }
}
