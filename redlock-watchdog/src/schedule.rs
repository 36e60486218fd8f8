//! When the renewal task acts: the next round, the deadlines at which unconfirmed holds are
//! lost, and when a change to a hold must wake the task early. Every timing decision of the
//! watchdog is made here, on tokio's clock, so it can be tested with paused time.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use redlock_core::{LostReason, Timing};
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::record::{before, DeadlineRule, Held};
use crate::WatchdogConfig;
use redlock_core::lock_kind::unpoisoned;

/// The renewal task's timetable.
#[derive(Debug)]
pub(crate) struct Scheduler {
    /// The lease every renewal sets.
    timeout: Duration,
    /// The clock-drift allowance for that lease.
    drift: Duration,
    interval: Duration,
    retry_interval: Duration,
    /// When a hold is told lost.
    rule: DeadlineRule,
    /// How long the last round took per hold, in nanoseconds: the lead before the next.
    round_time_per_hold: AtomicU64,
    /// What the task last planned; a hold that makes it due sooner wakes it.
    plan: Mutex<Plan>,
    wake: Notify,
}

/// What the renewal task last planned.
#[derive(Debug, Default, Clone, Copy)]
struct Plan {
    /// When it will wake.
    wake: Option<Instant>,
    /// The earliest lease-set instant among renewed holds when it planned, or of those seen
    /// changing since.
    earliest_set_at: Option<Instant>,
    /// The paced retry it planned with, if the last round missed the majority.
    retry_at: Option<Instant>,
}

impl Scheduler {
    /// A timetable for `config`, with the quorum's timings for its lease.
    pub(crate) fn new(config: &WatchdogConfig, timing: Timing) -> Self {
        Self {
            timeout: config.timeout,
            drift: timing.drift,
            interval: config.renew_interval(),
            retry_interval: config.retry_interval(),
            rule: DeadlineRule {
                lost_margin: config.lost_margin(timing.node_timeout),
                max_hold: config.max_hold,
            },
            // A guess until the first round measures it.
            round_time_per_hold: AtomicU64::new(20_000),
            plan: Mutex::new(Plan::default()),
            wake: Notify::new(),
        }
    }

    /// When a hold is told lost, for every record this watchdog registers.
    pub(crate) fn rule(&self) -> DeadlineRule {
        self.rule
    }

    /// When a hold is lost if nothing confirms it first, and why (see
    /// [`Held::lost_deadline`]).
    pub(crate) fn lost_deadline(
        &self,
        held: Option<Held>,
    ) -> Option<(std::time::Instant, LostReason)> {
        held.map(|held| held.lost_deadline(&self.rule))
    }

    /// Plans the next wake-up from the holds' states, publishes it, and returns it: the next
    /// round, the next lost deadline, or an interval from `now`. `states` is read under the
    /// plan's lock, so a hold changed meanwhile is either read here or compared with the
    /// published plan in [`Scheduler::wake_if_sooner`].
    pub(crate) fn plan(
        &self,
        states: impl FnOnce() -> Vec<Option<Held>>,
        retry_at: Option<Instant>,
        now: Instant,
    ) -> Instant {
        let mut plan = unpoisoned(self.plan.lock());
        let states = states();
        let earliest = self.earliest_set_at(&states, now);
        let round = self.next_round(earliest, retry_at, states.len());
        let next_lost = states
            .iter()
            .filter_map(|state| self.lost_deadline(*state))
            .map(|(deadline, _)| Instant::from_std(deadline))
            .min();
        let wake = [round, next_lost]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(now + self.interval);
        *plan = Plan {
            wake: Some(wake),
            earliest_set_at: earliest,
            retry_at,
        };
        wake
    }

    /// Whether a renewal round is due at `now`.
    pub(crate) fn round_due(
        &self,
        states: &[Option<Held>],
        retry_at: Option<Instant>,
        now: Instant,
    ) -> bool {
        let earliest = self.earliest_set_at(states, now);
        self.next_round(earliest, retry_at, states.len())
            .is_some_and(|round| now >= round)
    }

    /// Sleeps until `wake_at`, or until a change to a hold asks for an earlier plan.
    pub(crate) async fn sleep_until(&self, wake_at: Instant) {
        tokio::select! {
            () = tokio::time::sleep_until(wake_at) => {}
            () = self.wake.notified() => {}
        }
    }

    /// After a round that missed the majority, when the next may start.
    pub(crate) fn retry_after(&self, round_started: Instant) -> Instant {
        round_started + self.retry_interval
    }

    /// A hold changed to `state` at `now`: wakes the task only if it must act before it
    /// planned to. That is when this hold's lost deadline comes sooner (a short fixed lease),
    /// or the round moved earlier by more than 1 % of the interval (each hold makes the round
    /// a little longer, so it starts a little earlier; the lead is twice the expected round,
    /// which absorbs that much). Holds taken by the thousand wake it a handful of times, not
    /// once each; a hold taken and released again and again, not at all.
    ///
    /// The plan keeps the earliest lease-set instant of the renewed holds it has seen since
    /// the task planned, so that each later hold is compared with the round the earliest one
    /// needs, not with its own (a hold that ended meanwhile only makes the round a little
    /// early: the task plans again when it wakes). The slack is for the lead only: a hold set
    /// earlier than any the plan knows wakes the task if its round comes before the planned
    /// wake at all (an acquisition that began before the plan and was confirmed after it).
    /// A paced retry holds rounds back as it did when the task planned.
    pub(crate) fn wake_if_sooner(&self, state: Option<Held>, holds: usize, now: Instant) {
        let mut plan = unpoisoned(self.plan.lock());
        let Some(wake) = plan.wake else {
            self.wake.notify_one();
            return;
        };
        let set_at = self.set_at(state, now);
        let sets_earliest =
            set_at.is_some_and(|set_at| plan.earliest_set_at.is_none_or(|known| set_at < known));
        let earliest = [plan.earliest_set_at, set_at].into_iter().flatten().min();
        plan.earliest_set_at = earliest;
        let slack = if sets_earliest {
            Duration::ZERO
        } else {
            self.interval / 100
        };
        let round_sooner = self
            .next_round(earliest, plan.retry_at, holds)
            .is_some_and(|round| round + slack < wake);
        let lost_sooner = self
            .lost_deadline(state)
            .is_some_and(|(deadline, _)| Instant::from_std(deadline) < wake);
        if round_sooner || lost_sooner {
            self.wake.notify_one();
        }
    }

    /// Remembers how long a round took per hold, for the next lead.
    pub(crate) fn learn_round_time(&self, took: Duration, renewed: usize) {
        if renewed > 0 {
            let per_hold = took / u32::try_from(renewed).unwrap_or(u32::MAX);
            let nanos = u64::try_from(per_hold.as_nanos()).unwrap_or(u64::MAX);
            self.round_time_per_hold.store(nanos, Ordering::Relaxed);
        }
    }

    /// When a renewed hold's lease was last set (its acquisition, or its last confirmed
    /// renewal). `None` for holds that are not renewed now.
    fn set_at(&self, state: Option<Held>, now: Instant) -> Option<Instant> {
        let held = state?;
        if !held.renewed_at(now.into_std()) {
            return None;
        }
        Some(Instant::from_std(before(
            held.valid_until,
            self.timeout - self.drift,
        )))
    }

    /// The earliest lease-set instant among renewed holds.
    fn earliest_set_at(&self, states: &[Option<Held>], now: Instant) -> Option<Instant> {
        states
            .iter()
            .filter_map(|state| self.set_at(*state, now))
            .min()
    }

    /// When the next round should start: one interval after the earliest hold's lease was set,
    /// less the lead a round over `holds` needs to reach every hold, and not before a paced
    /// retry. Every hold is renewed in that round. `None` when nothing is renewed.
    fn next_round(
        &self,
        earliest_set_at: Option<Instant>,
        retry_at: Option<Instant>,
        holds: usize,
    ) -> Option<Instant> {
        let due = Instant::from_std(before(
            (earliest_set_at? + self.interval).into_std(),
            self.round_lead(holds),
        ));
        Some(retry_at.map_or(due, |retry| due.max(retry)))
    }

    /// Twice the expected duration of a round over `holds`: a hold's renewal lands up to one
    /// round's duration after the round starts, and the round may be longer than the last one.
    fn round_lead(&self, holds: usize) -> Duration {
        let per_hold = Duration::from_nanos(self.round_time_per_hold.load(Ordering::Relaxed));
        per_hold.saturating_mul(u32::try_from(holds).unwrap_or(u32::MAX)) * 2
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::ReleasePhase;
    use futures_util::FutureExt as _;

    const SECOND: Duration = Duration::from_secs(1);

    /// A 30 s watchdog (renewed every 10 s) with a 20 ms per-node timeout and 302 ms drift.
    fn scheduler() -> Scheduler {
        let config = WatchdogConfig::default();
        Scheduler::new(
            &config,
            timing(
                config.timeout,
                Duration::from_millis(20),
                Duration::from_millis(302),
            ),
        )
    }

    fn timing(lease: Duration, node_timeout: Duration, drift: Duration) -> Timing {
        Timing {
            lease,
            node_timeout,
            drift,
        }
    }

    /// A hold whose lease was set at `set_at`, renewed or not.
    fn held(scheduler: &Scheduler, set_at: Instant, renew: bool) -> Option<Held> {
        Some(Held {
            valid_until: (set_at + (scheduler.timeout - scheduler.drift)).into_std(),
            lease: scheduler.timeout,
            renew,
            renew_until: None,
            release: ReleasePhase::None,
        })
    }

    #[tokio::test(start_paused = true)]
    async fn a_renewed_hold_is_renewed_one_interval_after_its_lease_was_set() {
        let scheduler = scheduler();
        let now = Instant::now();
        let hold = held(&scheduler, now, true);
        let wake = scheduler.plan(|| vec![hold], None, now);
        // The lead is twice the guessed 20 µs round: the round starts just before 10 s.
        assert!(wake <= now + 10 * SECOND && wake > now + 10 * SECOND - SECOND / 100);
        assert!(!scheduler.round_due(&[hold], None, now));
        tokio::time::advance(10 * SECOND).await;
        assert!(scheduler.round_due(&[hold], None, Instant::now()));
    }

    #[tokio::test(start_paused = true)]
    async fn a_retry_waits_a_quarter_interval_and_the_earliest_hold_sets_the_round() {
        let scheduler = scheduler();
        let now = Instant::now();
        let (early, late) = (
            held(&scheduler, now, true),
            held(&scheduler, now + SECOND, true),
        );
        let due = scheduler.plan(|| vec![late, early], None, now);
        assert!(due <= now + 10 * SECOND, "the earlier hold decides");
        let retry_at = scheduler.retry_after(due);
        assert_eq!(retry_at, due + SECOND * 10 / 4);
        let wake = scheduler.plan(|| vec![late, early], Some(retry_at), due);
        assert_eq!(wake, retry_at);
    }

    #[tokio::test(start_paused = true)]
    async fn a_hold_is_lost_a_margin_before_its_validity_ends_a_fixed_one_a_tenth_of_its_lease() {
        let scheduler = scheduler();
        let now = Instant::now();
        let (fixed, renewed) = (held(&scheduler, now, false), held(&scheduler, now, true));
        let valid_until = now + (scheduler.timeout - scheduler.drift);
        let config = WatchdogConfig::default();
        let margin = config.lost_margin(Duration::from_millis(20));
        // The 30 s lease: a tenth of it is 3 s, less than the renewed hold's 5 s margin.
        let fixed_margin = config.fixed_lost_margin(scheduler.timeout, Duration::from_millis(20));
        assert_eq!(fixed_margin, scheduler.timeout / 10);
        assert!(fixed_margin < margin);
        assert_eq!(
            scheduler.lost_deadline(fixed),
            Some((
                (valid_until - fixed_margin).into_std(),
                LostReason::LeaseExpired
            ))
        );
        assert_eq!(
            scheduler.lost_deadline(renewed),
            Some(((valid_until - margin).into_std(), LostReason::QuorumLost))
        );
        // A fixed hold alone: the task wakes at its deadline, not at a round.
        assert_eq!(
            scheduler.plan(|| vec![fixed], None, now),
            valid_until - fixed_margin
        );
    }

    #[tokio::test(start_paused = true)]
    async fn only_a_hold_that_needs_the_task_sooner_wakes_it() {
        let scheduler = scheduler();
        let now = Instant::now();
        let first = held(&scheduler, now, true);
        let woken = || scheduler.wake.notified().now_or_never().is_some();
        scheduler.plan(|| vec![first], None, now);
        // Another renewed hold set a little later: the planned round covers it.
        scheduler.wake_if_sooner(held(&scheduler, now + SECOND, true), 2, now + SECOND);
        assert!(!woken(), "a later hold does not wake the task");
        // A short fixed lease runs out before the planned round: the task must wake for it.
        let short = Some(Held {
            valid_until: (now + 2 * SECOND).into_std(),
            lease: 2 * SECOND,
            renew: false,
            renew_until: None,
            release: ReleasePhase::None,
        });
        scheduler.wake_if_sooner(short, 2, now + SECOND);
        assert!(woken(), "a deadline before the plan wakes the task");
        // With nothing planned, any change wakes it.
        let config = WatchdogConfig::default();
        let idle = Scheduler::new(&config, timing(config.timeout, SECOND / 50, SECOND / 3));
        idle.wake_if_sooner(None, 1, now);
        assert!(idle.wake.notified().now_or_never().is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn holds_taken_after_a_plan_for_none_wake_the_task_once_their_round_comes_sooner() {
        let scheduler = scheduler();
        let start = Instant::now();
        let woken = || scheduler.wake.notified().now_or_never().is_some();
        // Nothing renewed: the task plans to look again in an interval.
        assert_eq!(scheduler.plan(Vec::new, None, start), start + 10 * SECOND);
        // One hold, taken and released again and again: its round is after the planned wake.
        for taken in 1..=100 {
            let at = start + SECOND * taken / 1000;
            scheduler.wake_if_sooner(held(&scheduler, at, true), 1, at);
        }
        assert!(
            !woken(),
            "a lock + unlock loop never wakes the renewal task"
        );
        // A hold whose acquisition began before the plan and was confirmed after it: its
        // round comes 90 ms before the planned wake, within the slack, and must not be late.
        let before_plan = start - SECOND * 90 / 1000;
        scheduler.wake_if_sooner(held(&scheduler, before_plan, true), 1, start + SECOND / 100);
        assert!(
            woken(),
            "a hold set before any the plan knows moves the round earlier"
        );
        // Thousands taken since a new plan for none, the earliest seen 1 ms after it: a round
        // over them needs a 200 ms lead (twice 20 µs a hold), so it must start before the
        // planned wake. The latest hold alone would start it after (its own lease was set
        // 150 ms after the plan): the earliest one decides.
        assert_eq!(scheduler.plan(Vec::new, None, start), start + 10 * SECOND);
        let first = start + SECOND / 1000;
        scheduler.wake_if_sooner(held(&scheduler, first, true), 1, first);
        assert!(!woken());
        let late = start + SECOND * 150 / 1000;
        scheduler.wake_if_sooner(held(&scheduler, late, true), 5_000, late);
        assert!(
            woken(),
            "the round the earliest hold needs comes before the planned wake"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn while_a_retry_is_paced_a_change_to_a_hold_does_not_wake_the_task() {
        let scheduler = scheduler();
        let now = Instant::now();
        tokio::time::advance(20 * SECOND).await;
        let now_later = Instant::now();
        let hold = held(&scheduler, now, true);
        // The round for it is overdue, but the last one missed the majority: paced.
        let retry_at = now_later + SECOND;
        assert_eq!(
            scheduler.plan(|| vec![hold], Some(retry_at), now_later),
            retry_at
        );
        scheduler.wake_if_sooner(held(&scheduler, now, true), 2, now_later);
        assert!(
            scheduler.wake.notified().now_or_never().is_none(),
            "the paced retry is the round it would have started anyway"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_capped_hold_is_lost_for_its_cap() {
        let config = WatchdogConfig {
            max_hold: Some(5 * SECOND),
            ..WatchdogConfig::default()
        };
        let scheduler = Scheduler::new(&config, timing(config.timeout, SECOND / 50, SECOND / 3));
        let now = Instant::now();
        let cap = Some((now + 5 * SECOND).into_std());
        let state = Some(Held {
            valid_until: (now + 29 * SECOND).into_std(),
            lease: scheduler.timeout,
            renew: true,
            renew_until: cap,
            release: ReleasePhase::None,
        });
        assert!(matches!(
            scheduler.lost_deadline(state),
            Some((_, LostReason::MaxHoldReached))
        ));
        // Past the cap it is no longer renewed: no round is planned for it.
        tokio::time::advance(6 * SECOND).await;
        assert!(!scheduler.round_due(&[state], None, Instant::now()));
    }
}
