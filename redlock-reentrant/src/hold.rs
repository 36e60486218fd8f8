//! The life of one owner's hold of one lock in this process: one state machine, every change of
//! it a method here. Acquisition, unlock, guards, force-unlock and shutdown all go through it.
//!
//! ```text
//!         acquire                      unlock (count - 1; the last one frees the lock)
//!  Free ───────────▶ Held ◀──────┐  ──────────────────────────────────────────────▶ Free
//!                     │ nested   │
//!                     │ acquire ─┘   a release no majority answered: still Held, renewed,
//!                     │              its request kept for the retry (or given up: below)
//!                     │
//!                     └── lost (signal fired: renewal refused or unconfirmed, fixed lease
//!                         ran out, force-unlocked, given up) ──▶ Lost ──unlock × count──▶ Free
//!                                                                 │
//!                           LeaseExpired: the owner's next acquisition starts a new hold
//! ```
//!
//! The rules it keeps:
//! - a hold is `Held` with a watchdog registration (renewed, or watched until its fixed lease
//!   ends), or `Lost` with its signal fired and no registration, or `Free`; never counted and
//!   unwatched (a fixed lease is told lost a margin before it ends, see
//!   `WatchdogConfig::fixed_lost_margin`). A `Held` hold whose signal fired meanwhile turns
//!   `Lost` at the next transition that plans (`refresh`); until then its readers answer from
//!   the signal, and the outcome of a request already sent is applied to it;
//! - what the lease record knows of the hold (renewed or not, where its final release stands)
//!   is one pure function of the state, [`Held::facts`], set after every transition of a live
//!   hold ([`Hold::change`]); the record's validity is what a majority confirmed;
//! - its lease is the longest any live acquisition asked for: a nested acquisition never
//!   shortens it, and renewal runs while some live acquisition asked for the watchdog;
//! - every acquisition has a generation, so a guard of an earlier hold never releases a later
//!   one.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use redlock_core::telemetry::HoldClock;
use smallvec::SmallVec;

use crate::gate::{Holding, Ticket};
use crate::inner::RequestId;

use redlock_watchdog::lock_kind::{GiveUp, LeaseFacts, Registration, ReleasePhase};
use redlock_watchdog::{LostReason, LostSignal};

/// How the lease of one acquisition is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LeaseMode {
    /// The watchdog lease, renewed while the holder lives.
    Watchdog,
    /// A fixed lease, never renewed.
    Fixed(Duration),
}

/// One owner's hold of one lock, as this process knows it.
#[derive(Debug, Default)]
pub(crate) enum Hold {
    /// No hold.
    #[default]
    Free,
    /// Held on a majority as far as this process can prove.
    Held(Held),
    /// Lost: its signal fired. Answers `LockLost` until its acquisitions are unwound.
    Lost(Lost),
}

/// A live hold.
#[derive(Debug)]
pub(crate) struct Held {
    generation: u64,
    token: u64,
    /// One entry per live acquisition, oldest first: how many there are is the hold count.
    leases: SmallVec<[LeaseMode; 2]>,
    registration: Registration,
    /// A release planned and not applied yet: sent, or sent and not answered by a majority.
    pending_unlock: Option<PendingRelease>,
    /// Records how long the hold lasted when it ends (released, lost or shut down).
    _clock: HoldClock,
    /// Its turn in the client's line for the lock: dropped with the hold, it lets the next
    /// task of the client through. `None` for a hold granted outside the line.
    turn: Option<Holding>,
}

/// A release of a live hold that is not applied yet.
#[derive(Debug)]
struct PendingRelease {
    /// Its request id (the release's announcement): a retry is the same request.
    request: RequestId,
    /// Sent, and too few nodes answered: it may have landed anywhere.
    unanswered: bool,
    /// The nodes where an earlier try may have been applied, for the retry's count.
    maybe_applied: MaybeApplied,
    /// A final release went unanswered: its owner let go, and the hold is not renewed again
    /// while this release stands (retries included).
    let_go: bool,
}

/// A hold that was lost and is not unwound yet.
#[derive(Debug)]
pub(crate) struct Lost {
    generation: u64,
    count: u32,
    record: GiveUp,
}

impl Lost {
    fn reason(&self) -> LostReason {
        self.record
            .lost_signal()
            .reason()
            .unwrap_or(LostReason::NotOwner)
    }
}

/// What an acquisition by this owner must do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AcquirePlan {
    /// Take the lock afresh (count 1, a new fencing token).
    New,
    /// Count up the hold of `generation`, which this owner has `expected` acquisitions of.
    Nested { expected: u32, generation: u64 },
}

/// A granted acquisition: what its caller (and a guard) keeps.
#[derive(Debug, Clone)]
pub(crate) struct Grant {
    pub(crate) generation: u64,
    pub(crate) token: u64,
    pub(crate) lost: LostSignal,
}

/// Why a release was refused before anything was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// This owner holds nothing here (or the caller's hold is over).
    NotOwner,
    /// The hold was lost; one acquisition of it is unwound by this call.
    Lost(LostReason),
}

/// A release to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ReleasePlan {
    /// The hold it releases.
    pub(crate) generation: u64,
    /// The request id (the pending one when this retries a release).
    pub(crate) request: RequestId,
    /// The hold count before the release.
    pub(crate) count: u32,
    /// The nodes where an earlier try of this release may have been applied.
    pub(crate) maybe_applied: MaybeApplied,
}

impl ReleasePlan {
    /// Whether this release frees the lock.
    pub(crate) fn is_final(&self) -> bool {
        self.count == 1
    }
}

/// The nodes, by index, where earlier tries of one release may have been applied: each answered
/// that it was, or gave no answer (a timeout, a broken connection, a reply not waited for). A
/// retried final release finds no hold on such a node, and that "not held" is the release
/// landing there, not the hold lost. The nodes past the 64th count as one: any of them in, all
/// of them in (a "not held" counted as released where the release did not land is no more than
/// a loss outside the promise left unreported: nothing of the hold is left there either way).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct MaybeApplied {
    first: u64,
    rest: bool,
}

impl MaybeApplied {
    /// Every node: a try that may have reached them all (one dropped half-way).
    pub(crate) const ALL: Self = Self {
        first: u64::MAX,
        rest: true,
    };

    /// Whether the release may have been applied on `node`.
    pub(crate) fn contains(self, node: usize) -> bool {
        match 1u64.checked_shl(u32::try_from(node).unwrap_or(u32::MAX)) {
            Some(bit) => self.first & bit != 0,
            None => self.rest,
        }
    }

    /// These nodes and `node`.
    #[must_use]
    pub(crate) fn with(self, node: usize) -> Self {
        match 1u64.checked_shl(u32::try_from(node).unwrap_or(u32::MAX)) {
            Some(bit) => Self {
                first: self.first | bit,
                ..self
            },
            None => Self { rest: true, ..self },
        }
    }
}

static NEXT_GENERATION: AtomicU64 = AtomicU64::new(1);

/// A generation no attempt of this process had: one per attempt at a new hold. It names the
/// hold on the nodes too (its field, see `Target::field`), so a request of an earlier hold
/// that arrives late never counts for, or deletes, a later one.
pub(crate) fn new_generation() -> u64 {
    NEXT_GENERATION.fetch_add(1, Ordering::Relaxed)
}

impl Hold {
    /// How many acquisitions of the hold are not released (or unwound) yet.
    pub(crate) fn count(&self) -> u32 {
        match self {
            Hold::Free => 0,
            Hold::Held(held) => held.count(),
            Hold::Lost(lost) => lost.count,
        }
    }

    /// The generation of the current hold, if there is one.
    pub(crate) fn generation(&self) -> Option<u64> {
        match self {
            Hold::Free => None,
            Hold::Held(held) => Some(held.generation),
            Hold::Lost(lost) => Some(lost.generation),
        }
    }

    /// The fencing token of a live hold.
    pub(crate) fn token(&self) -> Option<u64> {
        match self {
            Hold::Held(held) if !held.is_lost() => Some(held.token),
            _ => None,
        }
    }

    /// The lost signal of the current hold, live or lost.
    pub(crate) fn lost_signal(&self) -> Option<LostSignal> {
        self.giver().map(|record| record.lost_signal())
    }

    /// A handle that gives the current hold up from anywhere, live or lost.
    pub(crate) fn giver(&self) -> Option<GiveUp> {
        match self {
            Hold::Free => None,
            Hold::Held(held) => Some(held.registration.giver()),
            Hold::Lost(lost) => Some(lost.record.clone()),
        }
    }

    /// Whether a release of this owner's that no majority answered is still owed (retried
    /// first by its next operation); a hold lost meanwhile owes none.
    pub(crate) fn owes_release(&mut self) -> bool {
        self.refresh();
        self.pending_unlock().is_some()
    }

    /// A release planned for the hold of `generation` was not applied (its flight found the
    /// hold given up before it could decide): the acquisition it was for is unwound all the
    /// same, as the give-up left it counted. Returns why the hold was lost.
    pub(crate) fn release_abandoned(&mut self, generation: u64) -> LostReason {
        self.refresh();
        match self {
            Hold::Lost(lost) if lost.generation == generation => self.unwind_one(),
            Hold::Lost(lost) => lost.reason(),
            _ => LostReason::QuorumLost,
        }
    }

    /// The request id of a release that did not reach a majority, if one is pending.
    pub(crate) fn pending_unlock(&self) -> Option<RequestId> {
        match self {
            Hold::Held(held) => held.pending_unlock.as_ref().map(|pending| pending.request),
            _ => None,
        }
    }

    /// Changes a live hold, then sets what its lease record knows of it from the state it is
    /// left in: the one place a transition reaches the record's facts.
    fn change<T>(&mut self, change: impl FnOnce(&mut Held) -> T) -> Option<T> {
        let Hold::Held(held) = self else {
            return None;
        };
        let out = change(held);
        held.registration.set(held.facts());
        Some(out)
    }

    /// Whether the hold is a live one whose signal fired (by the watchdog, a deadline, or
    /// another handle): it becomes `Lost`, and its registration goes. A hold whose final
    /// release was left unconfirmed is simply over: its owner had let go. Run where a
    /// transition plans; the outcome of a request already sent is applied to the state it was
    /// planned on.
    fn refresh(&mut self) {
        let Hold::Held(held) = self else {
            return;
        };
        if !held.is_lost() {
            return;
        }
        let Hold::Held(held) = std::mem::take(self) else {
            unreachable!("checked above");
        };
        if held.pending_unlock.is_none() || held.count() > 1 {
            *self = held.into_lost();
        }
    }

    /// What an acquisition by this owner does now; `Err` with the reason when the hold was
    /// lost and is still being unwound. A fixed lease that ran out ended the hold: the next
    /// acquisition is a new one.
    pub(crate) fn plan_acquire(&mut self) -> Result<AcquirePlan, LostReason> {
        self.refresh();
        match self {
            Hold::Free => Ok(AcquirePlan::New),
            // Until a new hold is granted, the expired one still answers its unlocks.
            Hold::Lost(lost) if lost.reason() == LostReason::LeaseExpired => Ok(AcquirePlan::New),
            Hold::Lost(lost) => Err(lost.reason()),
            Hold::Held(held) => Ok(AcquirePlan::Nested {
                expected: held.count(),
                generation: held.generation,
            }),
        }
    }

    /// A new hold, the attempt of `generation`, was granted by a majority for `lease` (the
    /// watchdog's, or the fixed one), valid until `valid_until`.
    pub(crate) fn acquired_new(
        &mut self,
        registration: Registration,
        generation: u64,
        token: u64,
        mode: LeaseMode,
        (lease, valid_until): (Duration, Instant),
        turn: Option<Ticket>,
    ) -> Grant {
        let signal = turn.as_ref().map(|_| registration.lost_signal());
        let held = Held {
            generation,
            token,
            leases: smallvec::smallvec![mode],
            registration,
            pending_unlock: None,
            _clock: HoldClock::start(),
            turn: turn.zip(signal).map(|(turn, signal)| turn.holding(signal)),
        };
        held.registration.set(held.facts());
        held.registration.confirmed(valid_until, lease);
        let grant = held.grant();
        *self = Hold::Held(held);
        grant
    }

    /// A nested acquisition was granted by a majority for `lease`, valid until `valid_until`.
    /// The hold's lease only grows: a fixed one keeps any renewal, a watchdog one turns renewal
    /// on. `None` when the hold is no longer live (lost, or given up meanwhile): nothing is
    /// granted on it.
    pub(crate) fn acquired_nested(
        &mut self,
        mode: LeaseMode,
        (lease, valid_until): (Duration, Instant),
    ) -> Option<Grant> {
        self.refresh();
        self.change(|held| {
            held.leases.push(mode);
            held.registration.confirmed(valid_until, lease);
            held.grant()
        })
    }

    /// Whether this owner's next acquisition asks for a new hold: nothing is held, or what is
    /// held is over (a hold lost, or a fixed lease run out). A look that changes nothing.
    pub(crate) fn needs_turn(&self) -> bool {
        match self {
            Hold::Free => true,
            Hold::Held(held) => held.is_lost(),
            Hold::Lost(lost) => lost.reason() == LostReason::LeaseExpired,
        }
    }

    /// Whether the hold is held and its signal has not fired, as a look that leaves the hold
    /// as it is (in the middle of an operation on it; past its deadline, the read fires the
    /// signal, as any read of it does).
    pub(crate) fn is_valid(&self) -> bool {
        matches!(self, Hold::Held(held) if !held.is_lost())
    }

    /// Whether the hold is live (held, its signal not fired).
    pub(crate) fn is_live(&mut self) -> bool {
        self.refresh();
        matches!(self, Hold::Held(_))
    }

    /// A nested acquisition found the hold gone from a majority: the hold is lost. Returns
    /// why: its fixed lease ran out (its deadline passed: the caller may start a new hold), or
    /// it is no longer this owner's.
    pub(crate) fn nested_refused(&mut self) -> LostReason {
        self.refresh();
        self.lose(LostReason::NotOwner);
        match self {
            Hold::Lost(lost) => lost.reason(),
            _ => LostReason::NotOwner,
        }
    }

    /// Plans one release by this owner (`generation`: the guard's hold, `None` for whatever the
    /// owner holds). A lost hold is unwound here, one acquisition per call. A final release
    /// pauses renewal until it is decided.
    pub(crate) fn plan_release(
        &mut self,
        generation: Option<u64>,
        new_request: impl FnOnce() -> RequestId,
    ) -> Result<ReleasePlan, Refusal> {
        self.refresh();
        if generation.is_some() && generation != self.generation() {
            // The guard's hold is over (released through the lock, or lost and replaced).
            return Err(Refusal::NotOwner);
        }
        match self {
            Hold::Free => Err(Refusal::NotOwner),
            Hold::Lost(lost) => {
                let reason = lost.reason();
                lost.count = lost.count.saturating_sub(1);
                if lost.count == 0 {
                    *self = Hold::Free;
                }
                Err(Refusal::Lost(reason))
            }
            Hold::Held(_) => Ok(self
                .change(|held| {
                    let pending = held.pending_unlock.get_or_insert_with(|| PendingRelease {
                        request: new_request(),
                        unanswered: false,
                        maybe_applied: MaybeApplied::default(),
                        let_go: false,
                    });
                    pending.unanswered = false;
                    let (request, maybe_applied) = (pending.request, pending.maybe_applied);
                    ReleasePlan {
                        generation: held.generation,
                        request,
                        count: held.count(),
                        maybe_applied,
                    }
                })
                .expect("live")),
        }
    }

    /// A majority applied the release of the hold of `generation`: one acquisition fewer
    /// (`mode`: the one a guard took, else the latest). Returns how many are left. Renewal
    /// stops once no live acquisition asked for it; the hold then keeps the longest validity
    /// confirmed so far. A hold lost (or given up) while the release was in flight has the
    /// acquisition unwound all the same.
    pub(crate) fn released(&mut self, generation: u64, mode: Option<LeaseMode>) -> u32 {
        if self.generation() != Some(generation) {
            return 0;
        }
        let Hold::Held(held) = self else {
            self.unwind_one();
            return self.count();
        };
        if held.count() <= 1 {
            if let Hold::Held(held) = std::mem::take(self) {
                held.registration.ended();
            }
            return 0;
        }
        self.change(|held| {
            held.pending_unlock = None;
            let position = mode
                .and_then(|mode| held.leases.iter().rposition(|m| *m == mode))
                .unwrap_or(held.leases.len() - 1);
            held.leases.remove(position);
            held.count()
        })
        .unwrap_or(0)
    }

    /// A majority no longer knows this hold: it was lost before the release. One acquisition
    /// is unwound; returns why it was lost.
    pub(crate) fn release_refused(&mut self) -> LostReason {
        self.lose(LostReason::NotOwner);
        self.unwind_one()
    }

    /// Too few nodes answered a release whose caller may retry it: the hold stays counted and
    /// keeps the request id for the retry. A nested release leaves the hold renewed (its owner
    /// still holds it). A final one does not: its owner let go, so the hold is no longer
    /// renewed and ends with the validity it has (nobody may be left to retry, and the lock must
    /// not stay taken while the process lives); "not held" answers meanwhile are the release
    /// landing, not a loss; the hold gives up its turn in the client's line. `maybe_applied`:
    /// where its tries so far may have been applied.
    pub(crate) fn release_unanswered(&mut self, maybe_applied: MaybeApplied) {
        self.change(|held| {
            let last = held.count() == 1;
            if let Some(pending) = &mut held.pending_unlock {
                pending.unanswered = true;
                pending.maybe_applied = maybe_applied;
                pending.let_go |= last;
            }
            if last {
                // Its owner let go: the client's other tasks may ask the nodes (the release
                // may well have landed) rather than wait for this hold's deadline.
                held.turn = None;
            }
        });
    }

    /// Gives the hold up: no handle can release it any more (a guard whose release no majority
    /// answered, an unlock that could not complete, a guard dropped where nothing can be sent).
    /// Renewal stops and the signal fires at once, so nested acquisitions still in use answer
    /// `LockLost`; the caller's own acquisition is unwound. Returns whether the hold was live
    /// (the lock should then be deleted where this owner holds it).
    pub(crate) fn give_up(&mut self, reason: LostReason) -> bool {
        self.refresh();
        let live = matches!(self, Hold::Held(_));
        self.lose(reason);
        self.unwind_one();
        live
    }

    /// Another client force-unlocked the lock (or this one did): lost at once.
    pub(crate) fn force_unlocked(&mut self) {
        self.refresh();
        self.lose(LostReason::NotOwner);
    }

    /// The client shuts down: the hold is released whatever its depth.
    pub(crate) fn shut_down(&mut self) {
        self.lose(LostReason::Shutdown);
        *self = Hold::Free;
    }

    /// A live hold is lost for `reason` (its signal fires; the first reason wins). A hold that
    /// is free or lost already stays as it is, its count to unwind included.
    fn lose(&mut self, reason: LostReason) {
        if matches!(self, Hold::Held(_)) {
            let Hold::Held(held) = std::mem::take(self) else {
                unreachable!("checked above");
            };
            *self = held.declare_lost(reason);
        }
    }

    /// A guard of `generation` (`None`: whatever this owner holds) was dropped where nothing
    /// can be sent (no runtime): the hold is given up if it is still that one.
    pub(crate) fn abandon(&mut self, generation: Option<u64>) {
        self.refresh();
        if generation.is_none_or(|generation| self.generation() == Some(generation)) {
            self.give_up(LostReason::Abandoned);
        }
    }

    fn unwind_one(&mut self) -> LostReason {
        match self {
            Hold::Lost(lost) => {
                lost.count = lost.count.saturating_sub(1);
                let reason = lost.reason();
                if lost.count == 0 {
                    *self = Hold::Free;
                }
                reason
            }
            _ => LostReason::NotOwner,
        }
    }
}

impl Held {
    fn count(&self) -> u32 {
        u32::try_from(self.leases.len()).unwrap_or(u32::MAX)
    }

    /// What the lease record knows of this hold: renewed while some live acquisition asked
    /// for the watchdog, unless its owner let go (a final release no majority answered, which
    /// ends with the validity it has); where its final release stands, which pauses renewal
    /// while it is sent.
    fn facts(&self) -> LeaseFacts {
        let last = self.pending_unlock.as_ref().filter(|_| self.count() == 1);
        let release = match last {
            Some(pending) if pending.unanswered => ReleasePhase::Unconfirmed,
            Some(_) => ReleasePhase::Sending,
            None => ReleasePhase::None,
        };
        LeaseFacts {
            renew: self.leases.contains(&LeaseMode::Watchdog)
                && !last.is_some_and(|pending| pending.let_go),
            release,
        }
    }

    /// Whether the hold's lease record was lost (its signal fired, or its deadline passed).
    fn is_lost(&self) -> bool {
        self.registration.lost_signal().reason().is_some()
    }

    fn grant(&self) -> Grant {
        Grant {
            generation: self.generation,
            token: self.token,
            lost: self.registration.lost_signal(),
        }
    }

    /// The signal already fired: the hold is lost, its registration goes.
    fn into_lost(self) -> Hold {
        Hold::Lost(Lost {
            generation: self.generation,
            count: self.count(),
            record: self.registration.giver(),
        })
    }

    /// Fires the signal (the first reason wins) and stops the watchdog for the hold.
    fn declare_lost(self, reason: LostReason) -> Hold {
        let lost = Lost {
            generation: self.generation,
            count: self.count(),
            record: self.registration.giver(),
        };
        self.registration.declare_lost(reason);
        Hold::Lost(lost)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{registration, watchdog};
    use redlock_watchdog::Watchdog;

    fn later(secs: u64) -> Instant {
        Instant::now() + Duration::from_secs(secs)
    }

    /// Confirmed valid for `secs`, by a grant of that lease.
    fn valid(secs: u64) -> (Duration, Instant) {
        (Duration::from_secs(secs), later(secs))
    }

    fn held(watchdog: &Watchdog, mode: LeaseMode, secs: u64) -> (Hold, Grant) {
        let mut hold = Hold::Free;
        assert_eq!(hold.plan_acquire(), Ok(AcquirePlan::New));
        let grant = hold.acquired_new(
            registration(watchdog),
            new_generation(),
            7,
            mode,
            valid(secs),
            None,
        );
        (hold, grant)
    }

    /// The release of the current hold was applied by a majority.
    fn released(hold: &mut Hold, mode: Option<LeaseMode>) -> u32 {
        let generation = hold.generation().expect("a hold");
        hold.released(generation, mode)
    }

    /// Gives the current hold up from outside, as the watchdog or a deadline would.
    fn lose_elsewhere(hold: &Hold, reason: LostReason) {
        hold.giver().expect("a hold").give_up(reason);
    }

    fn renewing(grant: &Grant) -> bool {
        // The deadline reason tells the watchdog's plan: renewed holds end unconfirmed
        // (QuorumLost), fixed ones when their lease runs out.
        grant
            .lost
            .deadline()
            .is_some_and(|(_, reason)| reason != LostReason::LeaseExpired)
    }

    #[tokio::test]
    async fn nested_acquisitions_count_up_and_releases_count_down_to_free() {
        let watchdog = watchdog();
        let (mut hold, grant) = held(&watchdog, LeaseMode::Watchdog, 30);
        assert_eq!(
            hold.plan_acquire(),
            Ok(AcquirePlan::Nested {
                expected: 1,
                generation: grant.generation
            })
        );
        let nested = hold
            .acquired_nested(LeaseMode::Watchdog, valid(30))
            .expect("live");
        assert_eq!(nested.generation, grant.generation);
        assert_eq!(nested.token, 7);
        assert_eq!(hold.count(), 2);
        assert_eq!(watchdog.registered(), 1);

        let plan = hold.plan_release(None, || RequestId(1)).expect("held");
        assert!(!plan.is_final());
        assert_eq!(released(&mut hold, None), 1);
        let plan = hold
            .plan_release(Some(grant.generation), || RequestId(2))
            .expect("held");
        assert!(plan.is_final());
        assert_eq!(released(&mut hold, None), 0);
        assert!(matches!(hold, Hold::Free));
        assert_eq!(watchdog.registered(), 0, "released: no longer watched");
        assert!(!grant.lost.is_lost(), "a release is not a loss");
        assert_eq!(
            hold.plan_release(None, || RequestId(3)),
            Err(Refusal::NotOwner)
        );
    }

    #[tokio::test]
    async fn a_nested_watchdog_acquisition_renews_a_fixed_hold_until_it_is_released() {
        let watchdog = watchdog();
        let (mut hold, grant) = held(&watchdog, LeaseMode::Fixed(Duration::from_secs(20)), 20);
        assert!(!renewing(&grant));
        let end = grant.lost.deadline().expect("fixed").0;

        hold.acquired_nested(LeaseMode::Watchdog, valid(3));
        assert!(renewing(&grant), "the nested lock() turns renewal on");

        hold.plan_release(None, || RequestId(4)).expect("held");
        assert_eq!(released(&mut hold, None), 1);
        assert!(!renewing(&grant), "released: the hold is fixed again");
        assert_eq!(
            grant.lost.deadline().expect("fixed").0,
            end,
            "with its longest validity, here the fixed lease's"
        );
    }

    #[tokio::test]
    async fn a_nested_fixed_acquisition_never_shortens_a_renewed_hold() {
        let watchdog = watchdog();
        let (mut hold, grant) = held(&watchdog, LeaseMode::Watchdog, 30);
        let before = grant.lost.deadline().expect("renewed").0;
        hold.acquired_nested(LeaseMode::Fixed(Duration::from_secs(1)), valid(1));
        assert!(renewing(&grant), "still renewed");
        assert_eq!(grant.lost.deadline().expect("renewed").0, before);
        hold.plan_release(None, || RequestId(4)).expect("held");
        released(&mut hold, None);
        assert!(renewing(&grant), "the outer acquisition asked for renewal");
    }

    #[tokio::test]
    async fn a_guard_releases_its_own_acquisition_whatever_the_order() {
        let watchdog = watchdog();
        let (mut hold, grant) = held(&watchdog, LeaseMode::Fixed(Duration::from_secs(20)), 20);
        hold.acquired_nested(LeaseMode::Watchdog, valid(30));
        // The outer (fixed) guard is released first: the nested lock() still renews.
        hold.plan_release(Some(grant.generation), || RequestId(4))
            .expect("held");
        released(&mut hold, Some(LeaseMode::Fixed(Duration::from_secs(20))));
        assert!(renewing(&grant));
    }

    #[tokio::test]
    async fn a_final_release_pauses_renewal_and_an_unanswered_one_ends_it() {
        let watchdog = watchdog();
        let (mut hold, grant) = held(&watchdog, LeaseMode::Watchdog, 30);
        let plan = hold.plan_release(None, || RequestId(5)).expect("held");
        assert!(plan.is_final());
        assert_eq!(
            watchdog.registered(),
            1,
            "still watched while the release is in flight"
        );
        hold.release_unanswered(MaybeApplied::default());
        assert!(
            matches!(&hold, Hold::Held(held) if !held.registration.is_renewed()),
            "its owner let go: no longer renewed, it ends with its validity"
        );
        assert_eq!(watchdog.registered(), 1, "still watched until then");
        assert_eq!(hold.count(), 1, "stays counted");
        assert_eq!(hold.pending_unlock(), Some(RequestId(5)));
        assert!(!grant.lost.is_lost());
        let retry = hold.plan_release(None, || RequestId(6)).expect("held");
        assert_eq!(
            retry.request,
            RequestId(5),
            "the retry reuses the request id"
        );

        // Its owner let go: once its signal fires (here, its lease ran out unconfirmed), the
        // hold is over rather than lost-until-unwound.
        hold.release_unanswered(MaybeApplied::default());
        lose_elsewhere(&hold, LostReason::QuorumLost);
        assert_eq!(hold.plan_acquire(), Ok(AcquirePlan::New));
    }

    fn facts(hold: &Hold) -> LeaseFacts {
        match hold {
            Hold::Held(held) => held.facts(),
            _ => panic!("not live"),
        }
    }

    #[tokio::test]
    async fn the_record_facts_follow_the_state_after_every_transition() {
        let watchdog = watchdog();
        let renewed = |release| LeaseFacts {
            renew: true,
            release,
        };
        let (mut hold, _) = held(&watchdog, LeaseMode::Fixed(Duration::from_secs(20)), 20);
        assert_eq!(
            facts(&hold),
            LeaseFacts::default(),
            "a fixed lease: not renewed"
        );
        hold.acquired_nested(LeaseMode::Watchdog, valid(30));
        assert_eq!(facts(&hold), renewed(ReleasePhase::None));
        // A nested release in flight, then unanswered: the owner still holds, renewal goes on.
        hold.plan_release(None, || RequestId(7)).expect("held");
        assert_eq!(facts(&hold), renewed(ReleasePhase::None));
        hold.release_unanswered(MaybeApplied::default());
        assert_eq!(facts(&hold), renewed(ReleasePhase::None));
        hold.plan_release(None, || RequestId(8)).expect("held");
        assert_eq!(
            released(&mut hold, Some(LeaseMode::Fixed(Duration::from_secs(20)))),
            1
        );
        // The final release: sent pauses renewal (still renewed), unanswered ends it.
        hold.plan_release(None, || RequestId(9)).expect("held");
        assert_eq!(facts(&hold), renewed(ReleasePhase::Sending));
        hold.release_unanswered(MaybeApplied::default());
        assert_eq!(
            facts(&hold),
            LeaseFacts {
                renew: false,
                release: ReleasePhase::Unconfirmed
            }
        );
        // And the record says so: the registration is what the facts say.
        let Hold::Held(held) = &hold else {
            panic!("still counted");
        };
        assert!(!held.registration.is_renewed());
        // Its retry is sent: still not renewed (its owner let go), the release paused for.
        hold.plan_release(None, || RequestId(10)).expect("held");
        assert_eq!(
            facts(&hold),
            LeaseFacts {
                renew: false,
                release: ReleasePhase::Sending
            }
        );
    }

    #[tokio::test]
    async fn a_release_applied_after_the_hold_was_lost_still_unwinds_its_acquisition() {
        // Found by review: a nested release in flight when the hold's signal fired (its cap,
        // renewals that failed) was applied by a majority, yet counted nothing, so the hold
        // stayed lost with one acquisition nobody would unwind.
        let watchdog = watchdog();
        let (mut hold, grant) = held(&watchdog, LeaseMode::Watchdog, 30);
        hold.acquired_nested(LeaseMode::Watchdog, valid(30));
        hold.plan_release(None, || RequestId(7)).expect("held");
        lose_elsewhere(&hold, LostReason::MaxHoldReached);
        assert_eq!(released(&mut hold, None), 1, "one acquisition unwound");
        assert_eq!(
            hold.plan_release(Some(grant.generation), || RequestId(11)),
            Err(Refusal::Lost(LostReason::MaxHoldReached))
        );
        assert!(matches!(hold, Hold::Free), "the owner can lock afresh");
        assert_eq!(hold.plan_acquire(), Ok(AcquirePlan::New));

        // Given up (a sibling guard dropped where nothing can be sent) while it was in flight.
        let (mut hold, grant) = held(&watchdog, LeaseMode::Watchdog, 30);
        hold.acquired_nested(LeaseMode::Watchdog, valid(30));
        hold.plan_release(None, || RequestId(7)).expect("held");
        hold.abandon(Some(grant.generation));
        assert_eq!(released(&mut hold, None), 0);
        assert!(matches!(hold, Hold::Free));
        // A release of an earlier hold counts nothing on a later one.
        let (mut hold, _) = held(&watchdog, LeaseMode::Watchdog, 30);
        assert_eq!(hold.released(grant.generation, None), 0);
        assert_eq!(hold.count(), 1);
    }

    #[tokio::test]
    async fn an_unanswered_final_release_of_a_hold_lost_meanwhile_is_owed_no_more() {
        // Found by review: the owner's next lock() retried the release of a hold whose lease
        // had run out, and answered NotOwner rather than starting a new hold.
        let watchdog = watchdog();
        let (mut hold, _) = held(&watchdog, LeaseMode::Watchdog, 30);
        hold.plan_release(None, || RequestId(9)).expect("held");
        hold.release_unanswered(MaybeApplied::default());
        assert!(hold.owes_release());
        lose_elsewhere(&hold, LostReason::LeaseExpired);
        assert!(
            !hold.owes_release(),
            "its owner let go, and the hold is over"
        );
        assert_eq!(hold.plan_acquire(), Ok(AcquirePlan::New));
    }

    #[tokio::test]
    async fn a_release_a_give_up_overtook_still_unwinds_its_acquisition_once() {
        let watchdog = watchdog();
        let (mut hold, grant) = held(&watchdog, LeaseMode::Watchdog, 30);
        hold.acquired_nested(LeaseMode::Watchdog, valid(30));
        let plan = hold.plan_release(None, || RequestId(7)).expect("held");
        assert_eq!(plan.generation, grant.generation);
        // A sibling guard is dropped where nothing can be sent: one acquisition unwound.
        hold.abandon(Some(grant.generation));
        assert_eq!(hold.count(), 1);
        // The release finds the hold given up before it decided: its own acquisition goes too.
        assert_eq!(
            hold.release_abandoned(plan.generation),
            LostReason::Abandoned
        );
        assert!(matches!(hold, Hold::Free));
        // Of another hold, nothing.
        let (mut hold, _) = held(&watchdog, LeaseMode::Watchdog, 30);
        hold.force_unlocked();
        hold.release_abandoned(plan.generation);
        assert_eq!(hold.count(), 1);
    }

    #[tokio::test]
    async fn a_lost_hold_answers_lock_lost_until_unwound() {
        let watchdog = watchdog();
        let (mut hold, grant) = held(&watchdog, LeaseMode::Watchdog, 30);
        hold.acquired_nested(LeaseMode::Watchdog, valid(30));
        hold.force_unlocked();
        assert_eq!(watchdog.registered(), 0, "a lost hold is not renewed");
        assert_eq!(grant.lost.reason(), Some(LostReason::NotOwner));
        assert_eq!(hold.plan_acquire(), Err(LostReason::NotOwner));
        for _ in 0..2 {
            assert_eq!(
                hold.plan_release(None, || RequestId(4)),
                Err(Refusal::Lost(LostReason::NotOwner))
            );
        }
        assert!(matches!(hold, Hold::Free));
        assert_eq!(hold.plan_acquire(), Ok(AcquirePlan::New));
    }

    #[tokio::test]
    async fn a_fixed_lease_that_ran_out_ends_the_hold() {
        let watchdog = watchdog();
        let mut hold = Hold::Free;
        let grant = hold.acquired_new(
            registration(&watchdog),
            new_generation(),
            7,
            LeaseMode::Fixed(Duration::from_millis(1)),
            (Duration::from_millis(1), Instant::now()),
            None,
        );
        assert_eq!(grant.lost.reason(), Some(LostReason::LeaseExpired));
        let mut unlocked = Hold::Free;
        std::mem::swap(&mut unlocked, &mut hold);
        // Its unlock answers LockLost...
        assert_eq!(
            unlocked.plan_release(None, || RequestId(4)),
            Err(Refusal::Lost(LostReason::LeaseExpired))
        );
        // ...and without one, the next acquisition is a new hold all the same.
        let mut again = Hold::Free;
        again.acquired_new(
            registration(&watchdog),
            new_generation(),
            8,
            LeaseMode::Fixed(Duration::from_millis(1)),
            (Duration::from_millis(1), Instant::now()),
            None,
        );
        assert_eq!(again.plan_acquire(), Ok(AcquirePlan::New));
    }

    #[tokio::test]
    async fn giving_up_fires_the_signal_for_nested_holds_still_in_use() {
        let watchdog = watchdog();
        let (mut hold, grant) = held(&watchdog, LeaseMode::Watchdog, 30);
        hold.acquired_nested(LeaseMode::Watchdog, valid(30));
        assert!(hold.give_up(LostReason::QuorumLost), "it was live");
        assert_eq!(grant.lost.reason(), Some(LostReason::QuorumLost));
        assert_eq!(watchdog.registered(), 0);
        assert_eq!(hold.count(), 1, "the outer acquisition is left to unwind");
        assert_eq!(hold.plan_acquire(), Err(LostReason::QuorumLost));
    }

    #[tokio::test]
    async fn a_guard_of_an_earlier_hold_never_releases_a_later_one() {
        let watchdog = watchdog();
        let (mut hold, first) = held(&watchdog, LeaseMode::Watchdog, 30);
        hold.plan_release(None, || RequestId(4)).expect("held");
        released(&mut hold, None);
        let (mut hold, second) = {
            let mut hold = hold;
            let grant = hold.acquired_new(
                registration(&watchdog),
                new_generation(),
                8,
                LeaseMode::Watchdog,
                valid(30),
                None,
            );
            (hold, grant)
        };
        assert_ne!(first.generation, second.generation);
        assert_eq!(
            hold.plan_release(Some(first.generation), || RequestId(4)),
            Err(Refusal::NotOwner)
        );
        assert_eq!(hold.count(), 1, "the later hold is untouched");
        hold.abandon(Some(first.generation));
        assert_eq!(hold.count(), 1, "nor given up for the earlier guard");
        hold.abandon(Some(second.generation));
        assert_eq!(second.lost.reason(), Some(LostReason::Abandoned));
    }

    #[tokio::test]
    async fn a_signal_fired_elsewhere_is_seen_by_the_next_operation() {
        let watchdog = watchdog();
        let (mut hold, _) = held(&watchdog, LeaseMode::Watchdog, 30);
        lose_elsewhere(&hold, LostReason::QuorumLost);
        assert_eq!(hold.plan_acquire(), Err(LostReason::QuorumLost));
        assert_eq!(watchdog.registered(), 0);
    }

    #[tokio::test]
    async fn losing_a_lost_hold_again_keeps_its_count_to_unwind() {
        // Found by the model-based test: a second force_unlock (or a give-up, a refused
        // release) of a hold already lost turned it free, so its unlock answered NotOwner.
        let watchdog = watchdog();
        let (mut hold, _) = held(&watchdog, LeaseMode::Watchdog, 30);
        hold.acquired_nested(LeaseMode::Watchdog, valid(30));
        hold.force_unlocked();
        hold.force_unlocked();
        assert_eq!(hold.count(), 2);
        assert!(!hold.give_up(LostReason::QuorumLost), "not live");
        assert_eq!(hold.count(), 1, "one acquisition unwound");
        assert_eq!(hold.nested_refused(), LostReason::NotOwner);
        assert_eq!(
            hold.plan_release(None, || RequestId(4)),
            Err(Refusal::Lost(LostReason::NotOwner))
        );
        assert!(matches!(hold, Hold::Free));
    }

    #[tokio::test]
    async fn shutdown_frees_the_hold_whatever_its_depth() {
        let watchdog = watchdog();
        let (mut hold, grant) = held(&watchdog, LeaseMode::Watchdog, 30);
        hold.acquired_nested(LeaseMode::Watchdog, valid(30));
        hold.shut_down();
        assert!(matches!(hold, Hold::Free));
        assert_eq!(grant.lost.reason(), Some(LostReason::Shutdown));
    }
}
