//! The renewal loop: one task per watchdog, batched renewals on every node, and the deadlines at
//! which unconfirmed holds are declared lost.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use futures_util::future::join_all;
use redlock_core::quorum::validity;
use redlock_core::FanOut;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::registry::{EntryState, Held, Release};
use crate::scripts::RENEW;
use crate::watchdog::Shared;
use crate::LostReason;

/// The target of the watchdog's renewal trace events: `round` as a round starts, before it
/// takes the holds to renew, then one event per hold it renews (field `key`), just before its
/// requests go out. The fault suite checks from them that no round that started after a
/// release renews the released lock.
pub const RENEWING_TARGET: &str = "redlock_watchdog::renewing";

/// Runs until the watchdog is shut down or dropped.
pub(crate) async fn run(
    shared: Weak<Shared>,
    reschedule: Arc<Notify>,
    shutdown: CancellationToken,
) {
    let Some(interval) = shared.upgrade().map(|s| s.config.renew_interval()) else {
        return;
    };
    // After a round that missed the majority, the next waits until then (retries are paced).
    let mut retry_at: Option<Instant> = None;
    loop {
        let wake_at = match shared.upgrade() {
            Some(shared) => {
                // Computed and published under one lock, so a hold activated meanwhile is either
                // seen by the scan or compared with the published wake-up (`Shared::update_state`).
                let mut scheduled = shared
                    .schedule
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                let earliest = shared.earliest_set_at();
                let round = shared.next_round(earliest, retry_at);
                let wake_at = [round, shared.next_lost_deadline()]
                    .into_iter()
                    .flatten()
                    .min()
                    .unwrap_or_else(|| Instant::now() + interval);
                *scheduled = crate::watchdog::Schedule {
                    wake: Some(wake_at),
                    earliest_set_at: earliest,
                };
                wake_at
            }
            None => return,
        };
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep_until(wake_at) => {}
            () = reschedule.notified() => {}
        }
        let Some(shared) = shared.upgrade() else {
            return;
        };
        shared.declare_overdue_lost();
        if shared
            .next_round(shared.earliest_set_at(), retry_at)
            .is_some_and(|round| Instant::now() >= round)
        {
            let started = Instant::now();
            let (healthy, renewed) = {
                let _span = tracing::debug_span!("redlock.renew", held = shared.entries.len());
                shared.renew_all().await
            };
            shared.learn_round_time(started.elapsed(), renewed);
            retry_at = (!healthy).then(|| started + shared.config.retry_interval());
        }
        shared.declare_overdue_lost();
    }
}

struct Due {
    id: u64,
    key: String,
    owner: String,
}

impl Shared {
    fn node_timeout(&self) -> Duration {
        self.redlock.config().node_timeout_for(self.config.timeout)
    }

    /// See [`WatchdogConfig::lost_margin`](crate::WatchdogConfig::lost_margin).
    fn lost_margin(&self) -> Duration {
        self.config.lost_margin(self.node_timeout())
    }

    /// When a hold in this state is lost if nothing confirms it first, and why. A renewed hold
    /// is declared lost a margin before its validity ends, so its holder hears of it while the
    /// lock is still its own; a fixed one when its validity ends.
    pub(crate) fn lost_deadline(
        &self,
        state: EntryState,
    ) -> Option<(std::time::Instant, LostReason)> {
        let EntryState::Held(held) = state else {
            return None;
        };
        if !held.renew {
            return Some((held.valid_until, LostReason::LeaseExpired));
        }
        let deadline = held
            .valid_until
            .checked_sub(self.lost_margin())
            .unwrap_or(held.valid_until);
        let reason = if held.capped_at(deadline) {
            LostReason::MaxHoldReached
        } else {
            LostReason::QuorumLost
        };
        Some((deadline, reason))
    }

    /// When a renewed hold's lease was last set (its acquisition, or its last confirmed
    /// renewal). `None` for holds that are not renewed now.
    pub(crate) fn set_at(&self, state: EntryState, now: std::time::Instant) -> Option<Instant> {
        let EntryState::Held(held) = state else {
            return None;
        };
        if !held.renewed_at(now) {
            return None;
        }
        let timeout = self.config.timeout;
        Some(before(
            held.valid_until,
            timeout - self.redlock.config().drift_for(timeout),
        ))
    }

    /// The earliest lease-set instant among renewed holds.
    fn earliest_set_at(&self) -> Option<Instant> {
        let now = std::time::Instant::now();
        self.entries
            .iter()
            .filter_map(|entry| self.set_at(entry.state, now))
            .min()
    }

    /// When the next round should start: one interval after the earliest hold's lease was set,
    /// less the lead a round needs to reach every hold, and not before a paced retry. Every hold
    /// is renewed in that round. `None` when nothing is renewed.
    pub(crate) fn next_round(
        &self,
        earliest_set_at: Option<Instant>,
        retry_at: Option<Instant>,
    ) -> Option<Instant> {
        let due = before(
            (earliest_set_at? + self.config.renew_interval()).into_std(),
            self.round_lead(),
        );
        Some(retry_at.map_or(due, |retry| due.max(retry)))
    }

    /// When the next hold's validity runs out, if any.
    fn next_lost_deadline(&self) -> Option<Instant> {
        self.entries
            .iter()
            .filter_map(|entry| self.lost_deadline(entry.state))
            .map(|(deadline, _)| Instant::from_std(deadline))
            .min()
    }

    /// Twice the expected duration of a round over the holds there are now: a hold's renewal
    /// lands up to one round's duration after the round starts, and the round may be longer
    /// than the last one.
    fn round_lead(&self) -> Duration {
        let per_hold = Duration::from_nanos(self.round_time_per_hold.load(Ordering::Relaxed));
        per_hold.saturating_mul(u32::try_from(self.entries.len()).unwrap_or(u32::MAX)) * 2
    }

    /// Remembers how long a round took per hold, for the next lead.
    fn learn_round_time(&self, took: Duration, renewed: usize) {
        if renewed > 0 {
            let per_hold = took / u32::try_from(renewed).unwrap_or(u32::MAX);
            let nanos = u64::try_from(per_hold.as_nanos()).unwrap_or(u64::MAX);
            self.round_time_per_hold.store(nanos, Ordering::Relaxed);
        }
    }

    /// Removes every hold that is lost: past its deadline (declared now), or whose signal was
    /// fired elsewhere (a holder gave it up). A lost hold is never renewed.
    fn declare_overdue_lost(&self) {
        let now = std::time::Instant::now();
        let overdue: Vec<(u64, LostReason)> = self
            .entries
            .iter()
            .filter_map(|entry| {
                if let Some(reason) = entry.lost.reason() {
                    return Some((*entry.key(), reason));
                }
                let (deadline, reason) = self.lost_deadline(entry.state)?;
                (now >= deadline).then_some((*entry.key(), reason))
            })
            .collect();
        for (id, reason) in overdue {
            self.declare_lost(id, reason);
        }
    }

    /// One renewal round over every renewed hold. Returns whether every renewal was confirmed,
    /// and how many holds it sent.
    async fn renew_all(&self) -> (bool, usize) {
        // Before the snapshot: a hold released after this event may still be in this round.
        tracing::trace!(target: RENEWING_TARGET, "round");
        let now = std::time::Instant::now();
        let due: Vec<Due> = self
            .entries
            .iter()
            .filter(|entry| {
                matches!(entry.state, EntryState::Held(held) if held.renewed_at(now))
                    && !entry.lost.is_lost()
            })
            .map(|entry| Due {
                id: *entry.key(),
                key: entry.key.clone(),
                owner: entry.owner.clone(),
            })
            .collect();
        if due.is_empty() {
            return (true, 0);
        }
        if tracing::enabled!(target: RENEWING_TARGET, tracing::Level::TRACE) {
            for hold in &due {
                tracing::trace!(target: RENEWING_TARGET, key = %hold.key, "renewing");
            }
        }
        let lease = self.config.timeout;
        let lease_ms = u64::try_from(lease.as_millis()).unwrap_or(u64::MAX);
        let timeout = self.config.renew_request_timeout(self.node_timeout());
        let batches: Vec<&[Due]> = due.chunks(self.config.batch_size).collect();
        let calls: Vec<_> = batches
            .iter()
            .map(|batch| {
                batch.iter().fold(RENEW.call().arg(lease_ms), |call, hold| {
                    call.key(&hold.key).arg(&hold.owner)
                })
            })
            .collect();
        let fans: Vec<FanOut<Vec<i64>>> = join_all(
            calls
                .iter()
                .map(|call| self.redlock.nodes().run_script(call, timeout)),
        )
        .await;

        let drift = self.redlock.config().drift_for(lease);
        let mut healthy = true;
        let mut renewed = 0;
        for (batch, fan) in batches.iter().zip(&fans) {
            let valid_until =
                validity(lease, fan.elapsed(), drift).map(|_| fan.started() + (lease - drift));
            for (position, hold) in batch.iter().enumerate() {
                let said =
                    |answer: i64| fan.count(|replies| replies.get(position) == Some(&answer));
                let (confirmed, denied) = (said(1), said(0));
                match valid_until {
                    Some(valid_until) if confirmed >= fan.quorum() => {
                        renewed += 1;
                        // Every node that confirmed holds the lease at least this long (a
                        // renewal never shortens one), so the validity only moves later.
                        self.update_state(hold.id, |state| match state {
                            EntryState::Held(held) => EntryState::Held(Held {
                                valid_until: held.valid_until.max(valid_until),
                                ..held
                            }),
                            pending => pending,
                        });
                    }
                    _ if denied >= fan.quorum() => {
                        // A release in flight deletes the lock: "not held" is then its doing,
                        // not a loss.
                        let releasing = self.entries.get(&hold.id).is_some_and(|entry| {
                            matches!(entry.state, EntryState::Held(held) if held.release != Release::None)
                        });
                        if !releasing {
                            self.declare_lost(hold.id, LostReason::NotOwner);
                        }
                    }
                    _ => {
                        healthy = false;
                        tracing::debug!(key = %hold.key, confirmed, denied, "renewal not confirmed by a majority; retrying soon");
                    }
                }
            }
        }
        self.counters.round(batches.len(), renewed);
        (healthy, due.len())
    }
}

/// `at - margin`, saturating at `at` itself for instants too early to subtract from.
fn before(at: std::time::Instant, margin: Duration) -> Instant {
    let at = Instant::from_std(at);
    at.checked_sub(margin).unwrap_or(at)
}
