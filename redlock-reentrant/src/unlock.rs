//! Releasing holds: one acquisition (`unlock`, a guard), any holder's lock (`force_unlock`), or
//! every hold of a client at shutdown.
//!
//! A release, once asked for, always ends in a definite state of the hold: released, still held
//! and renewed (a release no majority answered, which its caller retries), or given up (its
//! signal fired, renewal stopped, the lock deleted where this owner holds it). A release whose
//! future is dropped is completed in a spawned task; where no runtime is left, the hold is given
//! up at once.

use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Waker};

use futures_util::StreamExt;
use redlock_core::lock_kind::{FanOut, FinishOnDrop, ScriptCall, Slot, BATCHES_IN_FLIGHT};
use redlock_core::{Error, LostReason};

use crate::hold::{Hold, LeaseMode, MaybeApplied, Refusal, ReleasePlan};
use crate::holds::{HoldGuard, HoldKey, Target};
use crate::inner::Inner;
use crate::kind::LockKeys;
use crate::lua::{Applied, UnlockReply, FORCE_UNLOCK};

/// What a release does when too few nodes answer it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OnNoQuorum {
    /// Keep the hold (counted; renewed only if nested) and its request id, for the caller to
    /// retry:
    /// `RLock::unlock`, whose caller can call again.
    KeepHold,
    /// Give the hold up: a guard's release, or one whose caller went away, which nobody can
    /// retry.
    GiveUp,
}

/// A release that is owed: by a guard until it is unlocked or dropped, by an `unlock` call
/// until it has the hold. Dropped while still owed, it is paid in a spawned task (or, with no
/// runtime left, the hold is given up at once).
pub(crate) type OwedRelease = FinishOnDrop<Owed>;

/// What an owed release needs.
#[derive(Debug)]
pub(crate) struct Owed {
    inner: Arc<Inner>,
    target: Target,
    /// The guard's hold, `None` for whatever this owner holds (`RLock::unlock`).
    generation: Option<u64>,
    /// The lease the guard's acquisition asked for, `None` for the latest acquisition.
    mode: Option<LeaseMode>,
}

impl Owed {
    pub(crate) fn new(
        inner: Arc<Inner>,
        target: Target,
        generation: Option<u64>,
        mode: Option<LeaseMode>,
    ) -> OwedRelease {
        FinishOnDrop::new(
            Self {
                inner,
                target,
                generation,
                mode,
            },
            |owed| {
                Box::pin(async move {
                    let name = Arc::clone(&owed.target.name);
                    if let Err(err) = pay(owed.arm(), OnNoQuorum::GiveUp).await {
                        tracing::debug!(lock = %name, error = %err, "release on drop failed");
                    }
                })
            },
            |owed| abandon_without_runtime(&owed.inner, &owed.target, owed.generation),
        )
    }

    /// Owed again (a dropped release, paid in its own task).
    fn arm(self) -> OwedRelease {
        Self::new(self.inner, self.target, self.generation, self.mode)
    }
}

/// Releases one acquisition; returns how many are left. Once it has the hold, the release is
/// its own: dropping this future then completes it in a spawned task.
#[tracing::instrument(name = "redlock.unlock", level = "debug", skip_all, fields(lock = %owed.target.name))]
pub(crate) async fn pay(owed: OwedRelease, on_no_quorum: OnNoQuorum) -> Result<u32, Error> {
    if let Err(err) = owed.inner.check_open() {
        // Shutdown released every hold already.
        drop(owed.disarm());
        return Err(err);
    }
    let mut hold = owed.inner.holds.lock(&owed.target.hold).await;
    if owed.generation.is_some() && hold.state().owes_release() {
        // A guard's release is not the retry of the owner's pending one: that comes first.
        // Still owed meanwhile: dropped here, the release is paid in a spawned task.
        // Boxed, as the rare paths below: every release's future would carry them otherwise.
        match Box::pin(finish_pending(&owed.inner, &owed.target, hold)).await {
            Ok(updated) => hold = updated,
            Err(err) => {
                // No majority again: nobody is left to retry this guard's release.
                let hold = owed.inner.holds.lock(&owed.target.hold).await;
                let owed = owed.disarm();
                let given_up = {
                    let mut state = hold.state();
                    state.generation() == owed.generation && state.give_up(LostReason::QuorumLost)
                };
                if let Some(generation) = owed.generation.filter(|_| given_up) {
                    Box::pin(abandon(&owed.inner, &owed.target, generation)).await;
                }
                return Err(err);
            }
        }
    }
    let owed = owed.disarm();
    let (hold, plan) = plan(&owed.target, hold, owed.generation, &owed.inner)?;
    let flight = Flight {
        inner: owed.inner,
        target: owed.target,
        hold,
        plan,
        mode: owed.mode,
        settled: false,
    };
    let (hold, outcome) = run(flight.arm(), on_no_quorum).await;
    drop(hold);
    outcome
}

/// Gives a hold up where nothing can be sent (no runtime): renewal stops and the signal fires
/// now; the lock expires with its lease. An operation in flight on the hold finds it given up.
fn abandon_without_runtime(inner: &Inner, target: &Target, generation: Option<u64>) {
    let Some(cell) = inner.holds.get(&target.hold) else {
        return;
    };
    tracing::warn!(lock = %target.name, "released outside a tokio runtime: the hold is given up and expires with its lease");
    cell.state().abandon(generation);
    drop(cell);
    inner.holds.forget_if_idle(&target.hold);
}

/// Plans one release of the hold, or says why there is nothing to release.
fn plan(
    target: &Target,
    hold: HoldGuard,
    generation: Option<u64>,
    inner: &Inner,
) -> Result<(HoldGuard, ReleasePlan), Error> {
    let (planned, unwound) = {
        let mut state = hold.state();
        let current = state.generation();
        let planned = state.plan_release(generation, || inner.request_id());
        (planned, current.filter(|_| matches!(*state, Hold::Free)))
    };
    match planned {
        Ok(plan) => Ok((hold, plan)),
        Err(Refusal::NotOwner) => Err(Error::NotOwner {
            name: target.name.to_string(),
        }),
        Err(Refusal::Lost(reason)) => {
            if let Some(lost) = unwound {
                // The lost hold's last acquisition is unwound: what is left of it on the nodes
                // (a fixed lease told early, renewals that reached a minority) goes now, not
                // when its lease ends. Sent while the hold is still locked.
                clear_leftovers(inner, target, lost);
            }
            Err(Error::lock_lost(&target.name, reason))
        }
    }
}

/// Deletes the lock on every node where this hold still has it (`ABANDON`), once: the
/// leftovers of a hold that was lost and is now unwound. Placed on every node's connection
/// before this returns, with the hold locked, so it usually reaches each node before the
/// owner's next acquisition (which would otherwise find the leftovers and take them over); the
/// replies are left to a spawned task. Where nothing answers, the keys expire with their lease,
/// as they would have.
fn clear_leftovers(inner: &Inner, target: &Target, generation: u64) {
    send_in_background(inner, abandon_call(inner, target, generation));
}

/// Places `call` on every node's connection now, and leaves its replies to a spawned task.
fn send_in_background(inner: &Inner, call: ScriptCall) {
    let redlock = inner.redlock.clone();
    let timeout = inner.node_timeout();
    let mut sending = Box::pin(async move {
        let _: FanOut<u64> = redlock
            .nodes()
            .run_script_until(&call, timeout, |fan| fan.answered() >= fan.quorum())
            .await;
    });
    // The first poll places the request on every node; the rest is only its replies.
    let placed = sending
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()));
    if placed.is_pending() {
        redlock_core::lock_kind::spawn_cleanup(sending);
    }
}

/// A waiting writer's registration taken back on every node (announced when it gave up, so
/// readers it held up look again), as `clear_leftovers` sends: placed on every node's connection before this
/// returns, the replies left to a spawned task. Where it does not arrive, the registration
/// runs out within its heartbeat.
pub(crate) fn withdraw_writer(inner: &Inner, target: &Target, announce: bool) {
    let call = crate::lua::WITHDRAW_WRITER.call();
    let call = match &target.keys {
        LockKeys::ReadWrite(rw) => call.key(&*rw.waiting),
        // A fair lock's waiter leaves the queue, and its heartbeat with it.
        LockKeys::Fair(fair) => call
            .key(&*fair.queue)
            .key(&*fair.heartbeats)
            .key(&*fair.tickets),
        LockKeys::Own | LockKeys::Permits(_) => return,
    };
    let call = call
        .arg(target.field_arg(None))
        .arg(if announce { target.channel() } else { "" })
        .arg(inner.new_request_arg())
        .by_source()
        .releasing();
    send_in_background(inner, call);
}

/// Finishes a release this owner left pending (no majority answered it) before its next
/// acquisition: the hold, updated, comes back unless the release again found no majority.
pub(crate) async fn finish_pending(
    inner: &Arc<Inner>,
    target: &Target,
    hold: HoldGuard,
) -> Result<HoldGuard, Error> {
    let (hold, plan) = plan(target, hold, None, inner)?;
    let flight = Flight {
        inner: Arc::clone(inner),
        target: target.clone(),
        hold,
        plan,
        mode: None,
        settled: false,
    };
    match run(flight.arm(), OnNoQuorum::KeepHold).await {
        (hold, Ok(_) | Err(Error::LockLost { .. })) => Ok(hold),
        (_, Err(err)) => Err(err),
    }
}

/// A release sent (or about to be) and not yet decided; it has the hold.
struct Flight {
    inner: Arc<Inner>,
    target: Target,
    hold: HoldGuard,
    plan: ReleasePlan,
    mode: Option<LeaseMode>,
    /// Its outcome was applied to the hold (a re-run after a drop applies none again).
    settled: bool,
}

/// A release in flight. Dropped before it is decided, it is finished in a spawned task,
/// retrying the same request id; where nothing can be sent, the hold is given up at once.
type InFlight = FinishOnDrop<Flight>;

/// Sends the release until a majority decides it or the retries are spent. A retry (here, or
/// in a later call after an error) is the same request: a nested release applied before
/// answers as before, and a final release's "not held" where an earlier try may have landed
/// counts as released (see [`count`]), not as a false "not owner".
async fn run(mut flight: InFlight, on_no_quorum: OnNoQuorum) -> (HoldGuard, Result<u32, Error>) {
    let outcome = flight.decide(on_no_quorum).await;
    (flight.disarm().hold, outcome)
}

impl Flight {
    fn arm(self) -> InFlight {
        FinishOnDrop::new(
            self,
            |flight| {
                Box::pin(async move {
                    let name = Arc::clone(&flight.target.name);
                    if let (_, Err(err)) = run(flight.arm(), OnNoQuorum::GiveUp).await {
                        tracing::debug!(lock = %name, error = %err, "a dropped release did not complete");
                    }
                })
            },
            Flight::abandon,
        )
    }

    fn hold(&self) -> std::sync::MutexGuard<'_, Hold> {
        self.hold.state()
    }

    /// Nothing can be sent any more (no runtime): the hold is given up at once, unless the
    /// release's outcome was applied already.
    fn abandon(self) {
        if !self.settled {
            self.hold.state().give_up(LostReason::Abandoned);
        }
    }

    async fn decide(&mut self, on_no_quorum: OnNoQuorum) -> Result<u32, Error> {
        let inner = Arc::clone(&self.inner);
        let target = self.target.clone();
        let config = inner.redlock.config();
        let timeout = inner.node_timeout();
        let last = self.plan.is_final();
        let live = matches!(*self.hold(), Hold::Held(_));
        let Some(generation) = self.hold().generation().filter(|_| live) else {
            // Given up before this release decided (a sibling guard dropped where nothing can
            // be sent, or this release's own give-up before it was dropped half-way): nothing
            // is left to send. The acquisition it was for is unwound, once.
            let reason = if self.settled {
                self.hold().lost_signal().and_then(|lost| lost.reason())
            } else {
                self.settled = true;
                Some(self.hold().release_abandoned(self.plan.generation))
            };
            return Err(Error::lock_lost(
                &target.name,
                reason.unwrap_or(LostReason::QuorumLost),
            ));
        };
        #[cfg(feature = "sabotage")]
        let unlock_script: &redlock_core::lock_kind::LockScript =
            if crate::sabotage::release_without_compare()
                && target.kind() == crate::kind::Kind::Reentrant
            {
                &crate::lua::UNLOCK_WITHOUT_COMPARE
            } else {
                target.kind().unlock()
            };
        #[cfg(not(feature = "sabotage"))]
        let unlock_script: &redlock_core::lock_kind::LockScript = target.kind().unlock();
        let call = unlock_script
            .call()
            .with_quorum(target.quorum())
            .key(target.key())
            .arg(target.field_arg(Some(generation)))
            .arg(target.channel())
            .arg(inner.request_arg(self.plan.request))
            .arg(self.plan.count)
            .releasing();
        let mut backoff = config.retry.backoff();
        let (fan, verdict) = loop {
            let earlier = self.plan.maybe_applied;
            // Dropped from here on, the try may have reached every node: the re-run counts so.
            self.plan.maybe_applied = MaybeApplied::ALL;
            let hold = &self.hold;
            let judge =
                |fan: &FanOut<UnlockReply>| verdict(fan, last, earlier, || hold.state().is_valid());
            let fan = inner
                .redlock
                .nodes()
                .run_script_until(&call, timeout, |fan| judge(fan) != Verdict::Undecided)
                .await;
            self.plan.maybe_applied = after_try(earlier, fan.slots());
            let verdict = judge(&fan);
            if verdict != Verdict::Undecided {
                break (fan, verdict);
            }
            match backoff.next_delay() {
                Some(pause) => tokio::time::sleep(pause).await,
                None => break (fan, verdict),
            }
        };
        match verdict {
            Verdict::Released => {
                let mode = self.mode;
                let was_lost = !matches!(*self.hold(), Hold::Held(_));
                let left = self.hold().released(generation, mode);
                self.settled = true;
                if was_lost && left == 0 {
                    // The hold had been given up meanwhile, and this was its last acquisition:
                    // what is left of it on the nodes goes now.
                    clear_leftovers(&inner, &target, generation);
                }
                let released = fan.count(|reply| matches!(reply, UnlockReply::Left(_)));
                tracing::debug!(lock = %target.name, left, released, "unlocked");
                Ok(left)
            }
            Verdict::Refused => {
                // A majority no longer knows of this hold: it was lost before the release.
                let reason = self.hold().release_refused();
                self.settled = true;
                Err(Error::lock_lost(&target.name, reason))
            }
            Verdict::Undecided => {
                let err = Error::no_quorum(&target.name, fan.answered(), fan);
                self.settled = true;
                match on_no_quorum {
                    OnNoQuorum::KeepHold => {
                        let maybe_applied = self.plan.maybe_applied;
                        self.hold().release_unanswered(maybe_applied);
                    }
                    OnNoQuorum::GiveUp => {
                        let live = self.hold().give_up(LostReason::QuorumLost);
                        if live {
                            Box::pin(abandon(&inner, &target, generation)).await;
                        }
                    }
                }
                Err(err)
            }
        }
    }
}

/// What the nodes' answers to a release decide.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    /// A majority released it.
    Released,
    /// A majority does not know of the hold (or too few could still release it): it was lost.
    Refused,
    /// The nodes that did not answer could still go either way.
    Undecided,
}

/// What one try of a release decides, as the answers stand.
fn verdict(
    fan: &FanOut<UnlockReply>,
    last: bool,
    maybe_applied: MaybeApplied,
    valid: impl Fn() -> bool,
) -> Verdict {
    let (released, refused) = count(fan.slots(), last, maybe_applied, valid);
    decide(Tally {
        released,
        refused,
        unanswered: fan.unanswered(),
        in_flight: fan.in_flight(),
        quorum: fan.quorum(),
        last,
    })
}

/// Counts the nodes that released and refused one try of a release. A final release finds no
/// hold on a node where an earlier try of it was applied (`maybe_applied`): there, while the
/// hold is `valid` (its signal has not fired), "not held" is that earlier try landing and
/// counts as released. Anywhere else, or once the hold is lost, it means what it says. `valid`
/// is asked only for such an answer (a healthy release reads no clock for it).
fn count(
    slots: &[Slot<UnlockReply>],
    last: bool,
    maybe_applied: MaybeApplied,
    valid: impl Fn() -> bool,
) -> (usize, usize) {
    slots
        .iter()
        .enumerate()
        .fold((0, 0), |(released, refused), (node, slot)| {
            match slot.reply() {
                Some(UnlockReply::Left(_)) => (released + 1, refused),
                Some(UnlockReply::NotHeld) if last && maybe_applied.contains(node) && valid() => {
                    (released + 1, refused)
                }
                Some(UnlockReply::NotHeld) => (released, refused + 1),
                None => (released, refused),
            }
        })
}

/// Where a release may have been applied after one more try: where earlier tries may have
/// been, where this one was, and where it got no answer (a timeout, a broken connection, a
/// reply not waited for). A "not held" is the one answer that says it was not.
fn after_try(earlier: MaybeApplied, slots: &[Slot<UnlockReply>]) -> MaybeApplied {
    slots
        .iter()
        .enumerate()
        .fold(earlier, |maybe, (node, slot)| match slot {
            Slot::Replied(UnlockReply::NotHeld) | Slot::NotAsked => maybe,
            Slot::Replied(UnlockReply::Left(_))
            | Slot::Failed(_)
            | Slot::Pending
            | Slot::Skipped => maybe.with(node),
        })
}

/// What came back from a release, counted.
#[derive(Debug, Clone, Copy)]
struct Tally {
    /// Nodes that applied it (or had applied it, for a retry).
    released: usize,
    /// Nodes where this owner does not hold the lock.
    refused: usize,
    /// Nodes with no usable answer (yet).
    unanswered: usize,
    /// Of those, the replies still awaited.
    in_flight: usize,
    quorum: usize,
    /// Whether this is the hold's final release (it deletes the lock where it is applied).
    last: bool,
}

/// The rule: a majority that applied it releases; a majority that does not know the hold
/// refuses (it was lost). A final release is also done once every reply is in (or failed) and
/// the answers prove that no majority can still hold the lock for this owner (only the nodes
/// that failed to answer might, and they are fewer than a majority): Redlock's promise that
/// with a majority of masters up, a holder can release. It counts as released when the answers
/// fit a hold that was still valid (the released nodes with the silent ones make a majority),
/// as lost otherwise. A reply still on its way is waited for: it may be the "not held" that
/// shows the hold was lost.
fn decide(tally: Tally) -> Verdict {
    let Tally {
        released,
        refused,
        unanswered,
        in_flight,
        quorum,
        last,
    } = tally;
    let could_have_held = released + unanswered >= quorum;
    if released >= quorum {
        Verdict::Released
    } else if !could_have_held || refused >= quorum {
        Verdict::Refused
    } else if last && in_flight == 0 && unanswered < quorum {
        Verdict::Released
    } else {
        Verdict::Undecided
    }
}

/// The deletion of the lock where this owner's hold of `generation` holds it (`ABANDON`,
/// announced to waiters).
fn abandon_call(inner: &Inner, target: &Target, generation: u64) -> ScriptCall {
    target
        .kind()
        .abandon()
        .call()
        .key(target.key())
        .arg(inner.new_request_arg())
        .arg(target.field_arg(Some(generation)))
        .arg(target.channel())
        .by_source()
        .releasing()
}

/// Deletes the lock where this hold has it (a hold given up), retried until a majority
/// answered; where that fails, it expires within its lease. It names the given-up hold, so a
/// copy that lands after the owner's next acquisition finds another hold and changes nothing.
async fn abandon(inner: &Inner, target: &Target, generation: u64) {
    let config = inner.redlock.config();
    let timeout = inner.node_timeout();
    let call = abandon_call(inner, target, generation);
    let fan: FanOut<u64> = config
        .retry
        .retry(
            || {
                inner
                    .redlock
                    .nodes()
                    .run_script_until(&call, timeout, |fan| fan.answered() >= fan.quorum())
            },
            |fan| fan.answered() < fan.quorum(),
        )
        .await;
    if fan.answered() < fan.quorum() {
        tracing::warn!(lock = %target.name, "gave up a hold no majority answered for; it expires with its lease");
    }
}

/// Deletes the lock whoever holds it; returns whether a majority held it. This client's own
/// holders are told first, so none still believes once another owner can take the lock.
pub(crate) async fn force_unlock(inner: &Arc<Inner>, target: &Target) -> Result<bool, Error> {
    inner.check_open()?;
    inner.check_request(&target.name, inner.watchdog.timeout())?;
    // From here until the deletion is decided, no acquisition of this client is granted; one
    // in flight waits to be told below (its operation is bounded by the node timeouts).
    let _forcing = inner.holds.begin_force();
    for hold in inner.holds.keys_of(target.key()) {
        inner.holds.lock(&hold).await.state().force_unlocked();
    }
    let call = FORCE_UNLOCK
        .call()
        .key(target.key())
        .arg(target.channel())
        .arg(inner.new_request_arg())
        .by_source()
        .releasing();
    let timeout = inner.node_timeout();
    let fan: FanOut<Applied> = inner
        .redlock
        .nodes()
        .run_script_until(&call, timeout, |fan| {
            let deleted = fan.count(|deleted| *deleted == Applied::Yes);
            fan.answered() >= fan.quorum()
                && (deleted >= fan.quorum() || deleted + fan.in_flight() < fan.quorum())
        })
        .await;
    if fan.answered() < fan.quorum() {
        return Err(Error::no_quorum(&target.name, fan.answered(), fan));
    }
    Ok(fan.has_quorum(|deleted| *deleted == Applied::Yes))
}

/// Releases every hold of this client (shutdown): each lock it holds is deleted whatever its
/// nesting depth, in batches per node like renewal. Every holder is told first.
pub(crate) async fn abandon_all(inner: &Arc<Inner>) {
    // Batches of hundreds of locks get the renewal batches' timeout, not one lock's.
    let node_timeout = inner.node_timeout();
    let timeout = inner.watchdog.config().renew_request_timeout(node_timeout);
    let mut held = Vec::new();
    for key in inner.holds.keys() {
        let hold = inner.holds.lock(&key).await;
        let generation = {
            let mut state = hold.state();
            let generation = state.generation();
            state.shut_down();
            generation
        };
        if let Some(generation) = generation {
            held.push((key.field(generation), key, hold));
        }
    }
    let batch_size = inner.watchdog.config().batch_size;
    let message = inner.new_request_arg();
    // A batch is of one kind's script, and keeps to one hash slot when a node is a Redis
    // Cluster member.
    let config = inner.redlock.config();
    let script = |key: &HoldKey| key.kind.abandon().sha();
    held.sort_by_key(|(_, key, _)| (script(key), config.slot_of(&key.key)));
    let calls: Vec<_> = held
        .chunk_by(|(_, a, _), (_, b, _)| {
            (script(a), config.slot_of(&a.key)) == (script(b), config.slot_of(&b.key))
        })
        .flat_map(|batch| batch.chunks(batch_size))
        .map(|batch| {
            // Every key first: a call is packed as it is built, and a key after an argument
            // packs it again (`EVALSHA` names the number of keys before them).
            let keys = batch[0].1.kind.abandon().call().by_source().releasing();
            let keys = batch
                .iter()
                .fold(keys, |call, (_, key, _)| call.key(&*key.key));
            batch
                .iter()
                .fold(keys.arg(message), |call, (field, key, _)| {
                    call.arg(field.as_str()).arg(key.channel())
                })
        })
        .collect();
    // As many out at once as renewal keeps, each started as soon as another is decided.
    let requests: Vec<_> = calls
        .iter()
        .map(|call| {
            inner
                .redlock
                .nodes()
                .run_script_until(call, timeout, |fan| fan.answered() >= fan.quorum())
        })
        .collect();
    let fans: Vec<FanOut<u64>> = futures_util::stream::iter(requests)
        .buffer_unordered(BATCHES_IN_FLIGHT)
        .collect()
        .await;
    if fans.iter().any(|fan| fan.answered() < fan.quorum()) {
        tracing::warn!(
            "shutdown could not reach a majority for some locks; they expire with their lease"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tally of five nodes once every reply is in or failed.
    fn tally(released: usize, refused: usize, unanswered: usize, last: bool) -> Verdict {
        decide(Tally {
            released,
            refused,
            unanswered,
            in_flight: 0,
            quorum: 3,
            last,
        })
    }

    #[test]
    fn a_majority_that_applied_it_releases_and_one_that_never_knew_it_refuses() {
        for last in [false, true] {
            assert_eq!(tally(3, 0, 2, last), Verdict::Released);
            assert_eq!(tally(0, 3, 2, last), Verdict::Refused);
            assert_eq!(tally(1, 4, 0, last), Verdict::Refused);
            assert_eq!(tally(0, 0, 5, last), Verdict::Undecided);
            assert_eq!(tally(2, 0, 3, last), Verdict::Undecided);
        }
    }

    #[test]
    fn a_final_release_is_done_once_no_majority_can_still_hold_it() {
        // Granted on exactly three of five; one of them stopped: two released, two never had
        // it, one silent. Nothing can hold it for this owner on a majority any more.
        assert_eq!(tally(2, 2, 1, true), Verdict::Released);
        assert_eq!(tally(1, 2, 2, true), Verdict::Released);
        // Fewer released than could ever have made the hold a majority: it had been lost.
        assert_eq!(tally(1, 3, 1, true), Verdict::Refused);
        // Three silent nodes could still hold it.
        assert_eq!(tally(1, 1, 3, true), Verdict::Undecided);
    }

    #[test]
    fn a_reply_still_on_its_way_is_waited_for() {
        // Three nodes: one released, one never had it, the third's reply is coming. It may
        // be "not held" (the hold was on one node only: lost), so nothing is decided yet.
        let early = Tally {
            released: 1,
            refused: 1,
            unanswered: 1,
            in_flight: 1,
            quorum: 2,
            last: true,
        };
        assert_eq!(decide(early), Verdict::Undecided);
        // Timed out instead: no majority can hold it any more.
        assert_eq!(
            decide(Tally {
                in_flight: 0,
                ..early
            }),
            Verdict::Released
        );
        assert_eq!(
            decide(Tally {
                refused: 2,
                unanswered: 0,
                in_flight: 0,
                ..early
            }),
            Verdict::Refused
        );
    }

    fn slots(replies: &[Option<UnlockReply>]) -> Vec<Slot<UnlockReply>> {
        replies
            .iter()
            .map(|reply| reply.map_or(Slot::Pending, Slot::Replied))
            .collect()
    }

    #[test]
    fn a_retried_final_release_counts_not_held_as_released_where_an_earlier_try_may_have_landed() {
        use UnlockReply::{Left, NotHeld};
        // First try: node 0 applied it, node 1's reply was lost, node 2 said "not held" (the
        // grant was on nodes 0 and 1 only), nodes 3 and 4 never answered.
        let first = slots(&[Some(Left(0)), None, Some(NotHeld), None, None]);
        let maybe = after_try(MaybeApplied::default(), &first);
        assert_eq!(
            (0..5).map(|node| maybe.contains(node)).collect::<Vec<_>>(),
            [true, true, false, true, true]
        );
        // The retry finds nothing anywhere: where the first try may have landed, that is it
        // landing; node 2 never held it.
        let retry = slots(&[Some(NotHeld); 5]);
        assert_eq!(count(&retry, true, maybe, || true), (4, 1));
        // A hold whose signal fired meanwhile: "not held" means what it says.
        assert_eq!(count(&retry, true, maybe, || false), (0, 5));
        // A nested release applied before answers with the count it left, so a "not held"
        // means the hold is gone.
        assert_eq!(count(&retry, false, maybe, || true), (0, 5));
        // A first try: nothing may have landed before it.
        assert_eq!(
            count(&retry, true, MaybeApplied::default(), || true),
            (0, 5)
        );
        // A try dropped half-way may have reached every node, past the 64th too.
        assert!((0..100).all(|node| MaybeApplied::ALL.contains(node)));
        // Past the 64th, the nodes count as one: none before any of them is in.
        assert!(!MaybeApplied::default().contains(70));
        assert!(MaybeApplied::default().with(70).contains(90));
        assert!(!MaybeApplied::default().with(3).contains(70));
        // "Not held" is the one answer that adds nothing.
        assert_eq!(
            after_try(maybe, &slots(&[Some(NotHeld); 5])),
            maybe,
            "a later \"not held\" does not take an earlier try back"
        );
    }

    #[test]
    fn a_nested_release_still_needs_a_majority_that_applied_it() {
        // The hold goes on: its count must have dropped on a majority.
        assert_eq!(tally(2, 2, 1, false), Verdict::Undecided);
        assert_eq!(tally(1, 2, 2, false), Verdict::Undecided);
    }

    #[test]
    fn every_tally_of_five_nodes_decides_safely() {
        for released in 0..=5 {
            for refused in 0..=5 - released {
                for last in [false, true] {
                    let unanswered = 5 - released - refused;
                    let verdict = tally(released, refused, unanswered, last);
                    if verdict == Verdict::Released {
                        // Never a majority left holding it after a final release, and a
                        // nested one changed a majority.
                        assert!(unanswered < 3, "{released}/{refused}/{unanswered}");
                        assert!(!last || released + unanswered >= 3);
                        assert!(last || released >= 3);
                    }
                    if verdict == Verdict::Undecided {
                        assert!(released < 3 && refused < 3);
                    }
                }
            }
        }
    }
}
