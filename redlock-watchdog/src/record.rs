//! One hold's lease record: the one place its lease facts live. The lock kind's hold, its
//! handles, the lost signal and the renewal task all read and change this record, never a copy.
//!
//! ```text
//!                 confirmed (a grant)          confirmed (a renewal, a nested grant)
//!   Pending ─────────────────────────▶ Held ◀──┐
//!      │                                │  └───┘   facts: renew or not, release phase
//!      │ ended / dropped                ├── ended (release confirmed) ──▶ Ended
//!      ▼                                └── lost (refused, deadline passed, given up) ──▶ Lost
//!    Ended                                  dropped unended: abandoned, lost at its deadline
//! ```
//!
//! The rules it keeps: the validity end only moves later (renewals and grants only extend a
//! TTL); the first lost reason wins and cancels the token; an ended record never fires; the
//! deadline is computed from the record whenever it is read, and a timer thread fires it.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use redlock_core::{LostReason, OwnerToken};
use tokio_util::sync::CancellationToken;

use crate::config::fixed_lost_margin;
use crate::deadline_timer::Arming;
use crate::lock_kind::RenewScript;
use redlock_core::lock_kind::unpoisoned;

/// What the hold's owner says of its lease: derived from the owner's state after each of its
/// transitions, and set in one call ([`Registration::set`](crate::lock_kind::Registration::set)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LeaseFacts {
    /// Some live acquisition asked for the watchdog lease: renew it while the holder lives.
    /// Otherwise the hold keeps the longest validity confirmed and is lost a margin before it
    /// ends, as a fixed lease is.
    pub renew: bool,
    /// Where the hold's final release stands.
    pub release: ReleasePhase,
}

/// Where a hold's final release stands. While one is sent or unconfirmed, a renewal answered
/// "not held" by a majority is the release landing, not a loss: the hold is not declared lost
/// for it (it still is when its validity runs out unconfirmed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReleasePhase {
    /// None asked for.
    #[default]
    None,
    /// Being sent: renewal pauses, so no renewal races it.
    Sending,
    /// Sent, but no majority answered: it may have landed anywhere.
    Unconfirmed,
}

/// When a hold is told lost, by the watchdog's configuration: the margins before its validity
/// ends, and the cap on renewal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DeadlineRule {
    /// See [`WatchdogConfig::lost_margin`](crate::WatchdogConfig::lost_margin).
    pub(crate) lost_margin: Duration,
    /// See [`WatchdogConfig::max_hold`](crate::WatchdogConfig::max_hold).
    pub(crate) max_hold: Option<Duration>,
}

/// A held lease as the record keeps it: what the scheduler plans with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Held {
    /// The end of the longest validity a majority confirmed (an acquisition or a renewal).
    /// Only ever moves later: no node's TTL is ever shortened (the scripts extend only), so
    /// every validity once confirmed stays backed by its majority.
    pub(crate) valid_until: Instant,
    /// The longest lease that moved `valid_until`: a hold no longer renewed is declared lost
    /// a tenth of it (at most the lost margin) before its validity ends.
    pub(crate) lease: Duration,
    /// Renewed every interval rather than left to run out.
    pub(crate) renew: bool,
    /// The cap on renewal, from when renewal last turned on.
    pub(crate) renew_until: Option<Instant>,
    /// Where the hold's final release stands.
    pub(crate) release: ReleasePhase,
}

impl Held {
    /// Whether a round starting at `now` renews this hold.
    pub(crate) fn renewed_at(&self, now: Instant) -> bool {
        self.renew
            && self.release != ReleasePhase::Sending
            && self.renew_until.is_none_or(|cap| now < cap)
    }

    /// When this hold is lost if nothing confirms it first, and why: a margin before its
    /// validity ends, so its holder hears of it while the lock is still its own. A renewed
    /// hold's margin leaves room for the renewals that could still confirm it; a fixed one's is
    /// a tenth of its lease, at most that.
    pub(crate) fn lost_deadline(&self, rule: &DeadlineRule) -> (Instant, LostReason) {
        if !self.renew {
            let margin = fixed_lost_margin(rule.lost_margin, self.lease);
            return (before(self.valid_until, margin), LostReason::LeaseExpired);
        }
        let deadline = before(self.valid_until, rule.lost_margin);
        let capped = self.renew_until.is_some_and(|cap| deadline >= cap);
        let reason = if capped {
            LostReason::MaxHoldReached
        } else {
            LostReason::QuorumLost
        };
        (deadline, reason)
    }
}

/// `at - margin`, saturating at `at` itself for instants too early to subtract from.
pub(crate) fn before(at: Instant, margin: Duration) -> Instant {
    at.checked_sub(margin).unwrap_or(at)
}

/// One hold's lease record, shared by the hold's registration, its lost signals and the
/// watchdog.
#[derive(Debug)]
pub(crate) struct LeaseRecord {
    /// The lock's key, and the owner (or hold) the nodes know it by: what a renewal sends. The
    /// owner's `Debug` hides it.
    pub(crate) key: String,
    pub(crate) owner: OwnerToken,
    /// How this kind of lock is renewed.
    pub(crate) script: RenewScript,
    rule: DeadlineRule,
    state: Mutex<State>,
    token: CancellationToken,
}

#[derive(Debug, Default)]
struct State {
    facts: LeaseFacts,
    /// The longest validity confirmed, and the longest lease that moved it; `None` while
    /// pending.
    validity: Option<(Instant, Duration)>,
    /// The cap on renewal, from when renewal last turned on.
    renew_until: Option<Instant>,
    end: End,
    /// The deadline the timer thread will look at this record for, if armed.
    armed: Option<Arming>,
}

/// How a hold's record ends.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum End {
    /// Live: pending or held.
    #[default]
    Live,
    /// Its registration went without a release: nothing renews it, and it is lost
    /// ([`LostReason::Abandoned`]) at the deadline it had.
    Abandoned,
    /// Released, or never held: it is never lost.
    Ended,
    /// Lost, for the first reason given.
    Lost(LostReason),
}

impl LeaseRecord {
    pub(crate) fn new(
        key: String,
        owner: OwnerToken,
        script: RenewScript,
        rule: DeadlineRule,
    ) -> Self {
        Self {
            key,
            owner,
            script,
            rule,
            state: Mutex::default(),
            token: CancellationToken::new(),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        unpoisoned(self.state.lock())
    }

    /// The hold as the scheduler plans with it: `None` unless live and confirmed.
    pub(crate) fn held(&self) -> Option<Held> {
        self.state().held()
    }

    /// A majority confirmed the hold valid until `valid_until`, by a grant or renewal of
    /// `lease`. The validity end moves only later, and so does the margin it is told lost by
    /// (the longest lease that moved it). Returns the hold as it is now.
    pub(crate) fn confirmed(
        self: &Arc<Self>,
        valid_until: Instant,
        lease: Duration,
    ) -> Option<Held> {
        let mut state = self.state();
        if state.end != End::Live {
            return None;
        }
        state.validity = match state.validity {
            None => Some((valid_until, lease)),
            Some((until, longest)) if valid_until > until => {
                Some((valid_until, longest.max(lease)))
            }
            kept => kept,
        };
        self.arm(state)
    }

    /// The owner's facts after one of its transitions. Renewal turning on starts the cap.
    pub(crate) fn set(self: &Arc<Self>, facts: LeaseFacts, now: Instant) -> Option<Held> {
        let mut state = self.state();
        if state.end != End::Live {
            return None;
        }
        if facts.renew && !state.facts.renew {
            state.renew_until = self.rule.max_hold.and_then(|cap| now.checked_add(cap));
        } else if !facts.renew {
            state.renew_until = None;
        }
        state.facts = facts;
        self.arm(state)
    }

    /// Arms the timer thread for the deadline of the state just changed, if it comes before
    /// the one armed; returns the hold as it is now.
    fn arm(self: &Arc<Self>, state: MutexGuard<'_, State>) -> Option<Held> {
        let held = state.held();
        if let Some((at, _)) = state.deadline(&self.rule) {
            if state.armed.is_none_or(|armed| at < armed.at) {
                self.rearm(state, at);
            }
        }
        held
    }

    /// Arms the timer thread for `at` in place of the arming the state has, if any.
    fn rearm(self: &Arc<Self>, mut state: MutexGuard<'_, State>, at: Instant) {
        let arming = Arming::new(at);
        let replaced = state.armed.replace(arming);
        drop(state);
        self.arm_timer(arming, replaced);
    }

    /// Takes the state's arming back from the timer thread: the record is over.
    fn disarm(mut state: MutexGuard<'_, State>) {
        let armed = state.armed.take();
        drop(state);
        if let Some(armed) = armed {
            crate::deadline_timer::disarm(armed);
        }
    }

    /// Hands `arming` to the timer thread, taking back the one it replaces. Called without the
    /// state's lock (the thread takes it to look at a record); if the record ended, was lost
    /// or was armed again meanwhile (and so took back an arming not handed over yet), this one
    /// is taken back too.
    fn arm_timer(self: &Arc<Self>, arming: Arming, replaced: Option<Arming>) {
        if let Some(replaced) = replaced {
            crate::deadline_timer::disarm(replaced);
        }
        crate::deadline_timer::arm(Arc::downgrade(self), arming);
        if self.state().armed != Some(arming) {
            crate::deadline_timer::disarm(arming);
        }
    }

    /// The release was confirmed (or the hold never existed): the record is never lost, and
    /// the timer thread forgets it.
    pub(crate) fn end(&self) {
        let mut state = self.state();
        if state.end == End::Live {
            state.end = End::Ended;
            Self::disarm(state);
        }
    }

    /// Its registration went without a release: nothing renews it from now on, and it is lost
    /// for that at the deadline it has. A pending one simply ends.
    pub(crate) fn abandon(&self) {
        let mut state = self.state();
        if state.end == End::Live {
            state.end = if state.validity.is_some() {
                End::Abandoned
            } else {
                End::Ended
            };
        }
    }

    /// Declares the hold lost for `reason` now, unless it ended or was lost already (the first
    /// reason wins). Returns whether this call did it.
    pub(crate) fn lose(&self, reason: LostReason) -> bool {
        let mut state = self.state();
        if !matches!(state.end, End::Live | End::Abandoned) {
            return false;
        }
        state.end = End::Lost(reason);
        // Counted before the state is let go: whoever sees the loss (the holder's `lost()`,
        // another thread) finds it counted too.
        redlock_core::telemetry::lost(reason);
        Self::disarm(state);
        self.token.cancel();
        true
    }

    /// Why the hold is lost, as of `now`, without losing it: for a look that must change
    /// nothing (`Debug`).
    pub(crate) fn peek(&self, now: Instant) -> Option<LostReason> {
        let state = self.state();
        match state.end {
            End::Lost(reason) => Some(reason),
            End::Ended => None,
            End::Live | End::Abandoned => state
                .deadline(&self.rule)
                .filter(|(at, _)| now >= *at)
                .map(|(_, reason)| reason),
        }
    }

    /// Why the hold is lost, as of `now`: lost already, or past its deadline (which loses it
    /// here). `None` while live, and for an ended record.
    pub(crate) fn reason_at(&self, now: Instant) -> Option<LostReason> {
        let state = self.state();
        match state.end {
            End::Lost(reason) => return Some(reason),
            End::Ended => return None,
            End::Live | End::Abandoned => {}
        }
        let (at, reason) = state.deadline(&self.rule)?;
        if now < at {
            return None;
        }
        drop(state);
        self.lose(reason);
        self.reason_at(now)
    }

    /// When the hold is lost unless something confirms it first, and what it is lost to then;
    /// once lost, the instant it had. `None` before a grant is confirmed, and once ended.
    pub(crate) fn deadline(&self) -> Option<(Instant, LostReason)> {
        self.state().deadline(&self.rule)
    }

    /// The end of the longest validity confirmed so far, while the hold is live: once lost,
    /// what the nodes confirmed no longer says what its holder can prove.
    pub(crate) fn valid_until(&self) -> Option<Instant> {
        let state = self.state();
        let told = state
            .deadline(&self.rule)
            .is_some_and(|(at, _)| Instant::now() >= at);
        state
            .validity
            .filter(|_| state.end == End::Live && !told)
            .map(|(until, _)| until)
    }

    /// Whether the record ended (released, lost or abandoned): the watchdog has nothing more
    /// to do for it.
    pub(crate) fn is_over(&self) -> bool {
        self.state().end != End::Live
    }

    pub(crate) fn token(&self) -> &CancellationToken {
        &self.token
    }

    /// The timer thread's look, for the deadline it was armed with: loses the hold past its
    /// deadline, or arms it again at a deadline moved later. An older arming is ignored.
    pub(crate) fn look(self: &Arc<Self>, armed_for: Arming) {
        let mut state = self.state();
        if state.armed != Some(armed_for) {
            return;
        }
        state.armed = None;
        if matches!(state.end, End::Lost(_)) {
            return;
        }
        match state.deadline(&self.rule) {
            None => {}
            Some((at, reason)) if at <= Instant::now() => {
                drop(state);
                self.lose(reason);
            }
            Some((at, _)) => self.rearm(state, at),
        }
    }
}

impl State {
    /// The lease as confirmed and described, whatever the record's end.
    fn lease(&self) -> Option<Held> {
        let (valid_until, lease) = self.validity?;
        Some(Held {
            valid_until,
            lease,
            renew: self.facts.renew,
            renew_until: self.renew_until,
            release: self.facts.release,
        })
    }

    fn held(&self) -> Option<Held> {
        self.lease().filter(|_| self.end == End::Live)
    }

    /// The deadline of a live hold, from its facts now; an abandoned one keeps the instant it
    /// had and is lost then for having been left; a lost one keeps the instant it had. An ended
    /// one has none.
    fn deadline(&self, rule: &DeadlineRule) -> Option<(Instant, LostReason)> {
        let deadline = self.lease()?.lost_deadline(rule);
        match self.end {
            End::Live | End::Lost(_) => Some(deadline),
            End::Abandoned => Some((deadline.0, LostReason::Abandoned)),
            End::Ended => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    /// A record on a watchdog told lost 5 s before its validity ends (a tenth of a fixed lease,
    /// at most that), with renewal capped at `max_hold`.
    fn record(max_hold: Option<Duration>) -> Arc<LeaseRecord> {
        Arc::new(LeaseRecord::new(
            "redlock:k".into(),
            OwnerToken::new(),
            RenewScript::plain(),
            DeadlineRule {
                lost_margin: 5 * SECOND,
                max_hold,
            },
        ))
    }

    const RENEWED: LeaseFacts = LeaseFacts {
        renew: true,
        release: ReleasePhase::None,
    };

    /// Polls `done` on this thread for up to `within`: no runtime, nothing reads the record.
    fn within(within: Duration, done: impl Fn() -> bool) -> bool {
        let until = Instant::now() + within;
        while Instant::now() < until {
            if done() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        done()
    }

    #[test]
    fn a_pending_record_has_no_deadline_and_the_first_reason_wins() {
        let record = record(None);
        assert_eq!((record.deadline(), record.held()), (None, None));
        assert!(record.lose(LostReason::QuorumLost));
        assert!(!record.lose(LostReason::NotOwner));
        assert_eq!(
            record.reason_at(Instant::now()),
            Some(LostReason::QuorumLost)
        );
        assert!(record.token().is_cancelled());
        // A lost record is confirmed by nothing.
        assert_eq!(
            record.confirmed(Instant::now() + 60 * SECOND, 60 * SECOND),
            None
        );
    }

    #[test]
    fn the_validity_only_moves_later_and_the_margin_is_the_longest_lease_that_moved_it() {
        let record = record(None);
        let now = Instant::now();
        record.confirmed(now + 10 * SECOND, 10 * SECOND);
        // Fixed: a tenth of the lease before the end.
        assert_eq!(
            record.deadline(),
            Some((now + 9 * SECOND, LostReason::LeaseExpired))
        );
        // An earlier validity (a shorter nested lease) changes nothing.
        record.confirmed(now + 2 * SECOND, 2 * SECOND);
        assert_eq!(record.valid_until(), Some(now + 10 * SECOND));
        // A later one with a shorter lease moves the end, and keeps the longer margin.
        record.confirmed(now + 12 * SECOND, 4 * SECOND);
        assert_eq!(
            record.deadline(),
            Some((now + 11 * SECOND, LostReason::LeaseExpired))
        );
        // Renewed: the lost margin, whatever the lease.
        record.set(RENEWED, now);
        assert_eq!(
            record.deadline(),
            Some((now + 7 * SECOND, LostReason::QuorumLost))
        );
    }

    #[test]
    fn past_its_deadline_a_record_is_lost_when_read_and_an_ended_one_never() {
        let (lost, ended) = (record(None), record(None));
        let now = Instant::now();
        for record in [&lost, &ended] {
            record.confirmed(now + 10 * SECOND, 10 * SECOND);
        }
        ended.end();
        assert_eq!(lost.reason_at(now + 8 * SECOND), None);
        assert_eq!(
            lost.reason_at(now + 9 * SECOND),
            Some(LostReason::LeaseExpired)
        );
        assert!(lost.token().is_cancelled());
        assert_eq!(ended.reason_at(now + 60 * SECOND), None);
        assert_eq!(ended.deadline(), None, "released: nothing to tell");
        assert_eq!(
            lost.deadline(),
            Some((now + 9 * SECOND, LostReason::LeaseExpired)),
            "lost: when it was told"
        );
        assert!(
            !ended.lose(LostReason::NotOwner),
            "an ended record never fires"
        );
        assert!(!ended.token().is_cancelled());
        assert!(lost.is_over() && ended.is_over());
        // Once lost, what was confirmed no longer says what the holder can prove.
        assert_eq!((lost.valid_until(), ended.valid_until()), (None, None));
        // Reading it without losing it (`Debug`) changes nothing.
        let quiet = record(None);
        quiet.confirmed(now + 10 * SECOND, 10 * SECOND);
        assert_eq!(quiet.peek(now + 9 * SECOND), Some(LostReason::LeaseExpired));
        assert!(!quiet.token().is_cancelled() && !quiet.is_over());
    }

    #[test]
    fn renewal_turning_on_starts_the_cap_and_a_capped_hold_is_lost_for_it() {
        let record = record(Some(20 * SECOND));
        let now = Instant::now();
        record.set(RENEWED, now);
        let held = record
            .confirmed(now + 30 * SECOND, 30 * SECOND)
            .expect("held");
        assert_eq!(held.renew_until, Some(now + 20 * SECOND));
        assert!(held.renewed_at(now) && !held.renewed_at(now + 20 * SECOND));
        // Told lost 5 s before the end, after the cap: for the cap.
        assert_eq!(
            record.deadline(),
            Some((now + 25 * SECOND, LostReason::MaxHoldReached))
        );
        // Still renewed later: the cap stands. Off, then on again: a new cap.
        record.set(RENEWED, now + 5 * SECOND);
        assert_eq!(
            record.held().and_then(|h| h.renew_until),
            Some(now + 20 * SECOND)
        );
        record.set(LeaseFacts::default(), now + 6 * SECOND);
        assert_eq!(record.held().and_then(|h| h.renew_until), None);
        record.set(RENEWED, now + 7 * SECOND);
        assert_eq!(
            record.held().and_then(|h| h.renew_until),
            Some(now + 27 * SECOND)
        );
        // A release being sent pauses renewal.
        record.set(
            LeaseFacts {
                release: ReleasePhase::Sending,
                ..RENEWED
            },
            now + 8 * SECOND,
        );
        assert!(!record.held().expect("held").renewed_at(now + 8 * SECOND));
    }

    #[tokio::test]
    async fn lost_resolves_at_the_deadline_without_anyone_firing_it() {
        let record = record(None);
        // A one-second fixed lease: lost a tenth of it before the end.
        record.confirmed(Instant::now() + SECOND / 2 + SECOND / 10, SECOND);
        let signal = crate::LostSignal::of(Arc::clone(&record));
        let reason = tokio::time::timeout(10 * SECOND, signal.lost())
            .await
            .expect("resolves by the deadline");
        assert_eq!(reason, LostReason::LeaseExpired);
        assert!(signal.token().is_cancelled());
    }

    #[test]
    fn the_token_is_cancelled_at_the_deadline_with_no_runtime_and_no_reader() {
        let record = record(None);
        let token = record.token().clone();
        record.confirmed(Instant::now() + SECOND / 10, SECOND);
        assert!(
            within(10 * SECOND, || token.is_cancelled()),
            "the timer thread cancels the token"
        );
        assert_eq!(
            record.reason_at(Instant::now()),
            Some(LostReason::LeaseExpired)
        );
    }

    #[test]
    fn a_deadline_moved_later_or_ended_is_not_fired_at_the_old_one() {
        let (later, ended) = (record(None), record(None));
        // Far enough that the moves below happen before it, however busy the machine: a 10 s
        // lease is told lost 1 s before it ends.
        let soon = Instant::now() + 3 * SECOND;
        for record in [&later, &ended] {
            record.confirmed(soon, 10 * SECOND);
        }
        later.confirmed(soon + 3600 * SECOND, 10 * SECOND);
        ended.end();
        // A third record due after the old deadline: the timer looks in deadline order, so once
        // it fired this one it had looked at the other two at the old deadline.
        let witness = record(None);
        witness.confirmed(soon + SECOND / 20, 10 * SECOND);
        assert!(within(20 * SECOND, || witness.token().is_cancelled()));
        assert!(!later.token().is_cancelled());
        assert!(!ended.token().is_cancelled());
    }

    #[test]
    fn the_timer_thread_forgets_a_hold_that_ends_is_lost_or_is_armed_again_sooner() {
        let armed = |record: &LeaseRecord| record.state().armed.expect("armed");
        let (ended, lost, sooner) = (record(None), record(None), record(None));
        let later = Instant::now() + 3600 * SECOND;
        for record in [&ended, &lost, &sooner] {
            // A 10 s lease (told lost 1 s before its end unless renewed), valid for an hour.
            record.confirmed(later, 10 * SECOND);
        }
        let (of_ended, of_lost, of_sooner) = (armed(&ended), armed(&lost), armed(&sooner));
        for arming in [of_ended, of_lost, of_sooner] {
            assert!(crate::deadline_timer::is_armed(arming));
        }
        ended.end();
        lost.lose(LostReason::NotOwner);
        // A renewed hold is told lost 5 s before its end: renewal turning on moves the
        // deadline sooner.
        sooner.set(RENEWED, Instant::now());
        let now_armed = armed(&sooner);
        assert!(now_armed.at < of_sooner.at, "armed again, sooner");
        for arming in [of_ended, of_lost, of_sooner] {
            assert!(
                !crate::deadline_timer::is_armed(arming),
                "taken back, not left for the thread to wake for"
            );
        }
        assert!(crate::deadline_timer::is_armed(now_armed));
        assert_eq!(ended.state().armed, None);
        assert_eq!(lost.state().armed, None);
    }

    #[test]
    fn an_abandoned_hold_is_told_so_at_its_deadline_and_a_pending_one_simply_ends() {
        let (held, pending) = (record(None), record(None));
        held.set(RENEWED, Instant::now());
        held.confirmed(Instant::now() + 6 * SECOND, 30 * SECOND);
        held.abandon();
        pending.abandon();
        assert_eq!(held.held(), None, "nothing renews it");
        assert!(matches!(held.deadline(), Some((_, LostReason::Abandoned))));
        assert!(within(20 * SECOND, || held.token().is_cancelled()));
        assert_eq!(held.reason_at(Instant::now()), Some(LostReason::Abandoned));
        assert_eq!(pending.deadline(), None);
        assert!(pending.is_over() && !pending.token().is_cancelled());
    }
}
