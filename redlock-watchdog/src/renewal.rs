//! The renewal task: one per watchdog, sleeping on the [`Scheduler`](crate::schedule::Scheduler)'s
//! timetable and renewing every renewed hold in batches per lock kind and node.

use std::collections::HashMap;
use std::sync::{Arc, Weak};

use futures_util::StreamExt;
use redlock_core::lock_kind::{FanOut, BATCHES_IN_FLIGHT};
use redlock_core::quorum::lease_millis;
use redlock_core::LostReason;
use tokio::time::Instant;

use crate::lock_kind::RenewScript;
use crate::record::{LeaseRecord, ReleasePhase};
use crate::renew_script::{RenewReply, Renewed};
use crate::shared::Shared;

/// What holds renewed in one call share: their script (its SHA), with a Redis Cluster member
/// their hash slot, and how many nodes must confirm them.
type BatchKind = (&'static str, Option<u16>, Option<usize>);

/// The target of the watchdog's renewal trace events: `round` as a round starts, before it
/// takes the holds to renew, then one event per hold it renews (field `key`), just before its
/// requests go out. The fault suite checks from them that no round that started after a
/// release renews the released lock.
pub const RENEWING_TARGET: &str = "redlock_watchdog::renewing";

/// Runs until the watchdog is shut down or dropped. Holds the registry weakly: dropping the
/// last handle drops it, which cancels the shutdown token and ends the task.
pub(crate) async fn run(shared: Weak<Shared>) {
    let Some((shutdown, scheduler)) = shared
        .upgrade()
        .map(|s| (s.shutdown.clone(), Arc::clone(&s.scheduler)))
    else {
        return;
    };
    // After a round that missed the majority, the next waits until then (retries are paced).
    let mut retry_at: Option<Instant> = None;
    loop {
        // Planned with the registry, which is let go before sleeping: only handles keep it.
        let wake_at = match shared.upgrade() {
            Some(shared) => scheduler.plan(|| shared.states(), retry_at, Instant::now()),
            None => return,
        };
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = scheduler.sleep_until(wake_at) => {}
        }
        let Some(shared) = shared.upgrade() else {
            return;
        };
        shared.declare_overdue_lost();
        let started = Instant::now();
        if shared
            .scheduler
            .round_due(&shared.states(), retry_at, started)
        {
            let (healthy, renewed) = {
                let _span = tracing::debug_span!("redlock.renew", held = shared.entries.len());
                renew_all(&shared).await
            };
            shared
                .scheduler
                .learn_round_time(started.elapsed(), renewed);
            retry_at = (!healthy).then(|| shared.scheduler.retry_after(started));
        }
        shared.declare_overdue_lost();
    }
}

/// One hold a round renews.
struct Due {
    id: u64,
    record: Arc<LeaseRecord>,
}

/// One renewal round over every renewed hold: one batch call per lock kind and batch size on
/// every node, all at once. Returns whether every renewal was confirmed, and how many holds it
/// sent.
async fn renew_all(shared: &Shared) -> (bool, usize) {
    // Before the snapshot: a hold released after this event may still be in this round.
    tracing::trace!(target: RENEWING_TARGET, "round");
    let now = std::time::Instant::now();
    // One batch holds keys of one script and quorum and, with a Redis Cluster member, of one
    // hash slot.
    let config = shared.redlock.config();
    let mut kinds: HashMap<BatchKind, (RenewScript, Vec<Due>)> = HashMap::new();
    for entry in shared.entries.iter() {
        let record = entry.value();
        let renewed = record.held().is_some_and(|held| held.renewed_at(now));
        if renewed && record.reason_at(now).is_none() {
            let script = record.script;
            kinds
                .entry((
                    script.script().sha(),
                    config.slot_of(&record.key),
                    script.quorum(),
                ))
                .or_insert_with(|| (script, Vec::new()))
                .1
                .push(Due {
                    id: *entry.key(),
                    record: Arc::clone(record),
                });
        }
    }
    let sent: usize = kinds.values().map(|(_, due)| due.len()).sum();
    if sent == 0 {
        return (true, 0);
    }
    if tracing::enabled!(target: RENEWING_TARGET, tracing::Level::TRACE) {
        for (_, due) in kinds.values() {
            for hold in due {
                tracing::trace!(target: RENEWING_TARGET, key = %hold.record.key, "renewing");
            }
        }
    }
    let timing = shared.timing;
    let lease = timing.lease;
    let timeout = shared.config.renew_request_timeout(timing.node_timeout);
    let batches: Vec<(RenewScript, &[Due])> = kinds
        .values()
        .flat_map(|(script, due)| {
            due.chunks(shared.config.batch_size)
                .map(move |batch| (*script, batch))
        })
        .collect();
    let calls: Vec<_> = batches
        .iter()
        .map(|(script, batch)| {
            // Every key first: a call is packed as it is built, and a key after an argument
            // packs it again (`EVALSHA` names the number of keys before them).
            let keys = script
                .script()
                .call()
                .replicated()
                .with_quorum(script.quorum());
            let keys = batch
                .iter()
                .fold(keys, |call, hold| call.key(&hold.record.key));
            batch
                .iter()
                .fold(keys.arg(lease_millis(lease)), |call, hold| {
                    call.arg(hold.record.owner.as_str())
                })
        })
        .collect();
    // A batch is decided once a majority answered and every hold in it was confirmed, or
    // denied, by a majority; otherwise every node is awaited. At most `BATCHES_IN_FLIGHT` are
    // out at once, a new one as soon as any is decided (not in waves: a stalled shard's batches
    // would hold up every wave), and each is applied as soon as it is decided, so holds on
    // healthy nodes or shards are confirmed while a stalled one's batches wait out their
    // timeout.
    // Collected first: a lazy `map` would keep a closure in the task's state, which the
    // compiler cannot prove `Send` for every lifetime.
    let requests: Vec<_> = calls
        .iter()
        .zip(&batches)
        .map(|(call, (_, batch))| async move {
            let fan: FanOut<RenewReply> = shared
                .redlock
                .nodes()
                .run_script_until(call, timeout, |fan: &FanOut<RenewReply>| {
                    fan.answered() >= fan.quorum()
                        && (0..batch.len()).all(|position| {
                            [Renewed::Yes, Renewed::NotHeld].iter().any(|answer| {
                                fan.count(|RenewReply(answers)| {
                                    answers.get(position) == Some(answer)
                                }) >= fan.quorum()
                            })
                        })
                })
                .await;
            (*batch, fan)
        })
        .collect();
    let mut decided = futures_util::stream::iter(requests).buffer_unordered(BATCHES_IN_FLIGHT);

    let mut healthy = true;
    let mut renewed = 0;
    while let Some((batch, fan)) = decided.next().await {
        let valid_until = timing
            .validity(fan.elapsed())
            .map(|_| timing.valid_until(fan.started()));
        for (position, hold) in batch.iter().enumerate() {
            let said = |answer: Renewed| {
                fan.count(|RenewReply(answers)| answers.get(position) == Some(&answer))
            };
            let (confirmed, denied) = (said(Renewed::Yes), said(Renewed::NotHeld));
            match valid_until {
                Some(valid_until) if confirmed >= fan.quorum() => {
                    renewed += 1;
                    // Every node that confirmed holds the lease at least this long (a renewal
                    // never shortens one), so the validity only moves later.
                    if let Some(held) = hold.record.confirmed(valid_until, lease) {
                        shared.changed(held);
                    }
                }
                _ if denied >= fan.quorum() => {
                    // A release in flight deletes the lock: "not held" is then its doing, not
                    // a loss.
                    let releasing = hold
                        .record
                        .held()
                        .is_some_and(|held| held.release != ReleasePhase::None);
                    if !releasing {
                        shared.declare_lost(hold.id, LostReason::NotOwner);
                    }
                }
                _ => {
                    healthy = false;
                    redlock_core::telemetry::renewal_failed();
                    tracing::debug!(key = %hold.record.key, confirmed, denied, "renewal not confirmed by a majority; retrying soon");
                }
            }
        }
    }
    shared.counters.round(batches.len(), renewed);
    redlock_core::telemetry::renewed(renewed);
    (healthy, sent)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use redlock_core::{OwnerToken, Redlock, RedlockConfig};
    use tokio::time::Instant;

    use crate::lock_kind::{LeaseFacts, RenewScript};
    use crate::{LostReason, Watchdog, WatchdogConfig};

    /// A watchdog whose only node refuses every connection (nothing listens on port 1).
    fn watchdog_without_nodes() -> Watchdog {
        let redlock = Redlock::new(RedlockConfig::with_nodes(["redis://127.0.0.1:1"]))
            .expect("a valid configuration");
        Watchdog::start(redlock, WatchdogConfig::default()).expect("a valid watchdog")
    }

    #[tokio::test(start_paused = true)]
    async fn the_task_declares_a_fixed_hold_lost_a_tenth_of_its_lease_before_it_ends() {
        let watchdog = watchdog_without_nodes();
        let registration = watchdog.register(RenewScript::plain(), "redlock:k", OwnerToken::new());
        let lease = Duration::from_secs(5);
        let valid_until = Instant::now() + lease;
        registration.confirmed(valid_until.into_std(), lease);
        let deadline = valid_until - lease / 10;
        let token = registration.lost_signal().token();
        tokio::time::sleep_until(deadline - Duration::from_millis(1)).await;
        assert!(!token.is_cancelled(), "not before its margin begins");
        token.cancelled().await;
        let late = Instant::now() - deadline;
        assert!(late < Duration::from_millis(10), "fired {late:?} late");
        assert_eq!(
            registration.lost_signal().reason(),
            Some(LostReason::LeaseExpired)
        );
        assert_eq!((watchdog.registered(), watchdog.stats().lost), (0, 1));
    }

    #[tokio::test(start_paused = true)]
    async fn renewals_no_majority_confirms_are_retried_until_the_hold_is_lost_in_time() {
        let watchdog = watchdog_without_nodes();
        let config = watchdog.config().clone();
        let registration = watchdog.register(RenewScript::plain(), "redlock:k", OwnerToken::new());
        let valid_until = Instant::now() + config.timeout;
        registration.set(LeaseFacts {
            renew: true,
            ..LeaseFacts::default()
        });
        registration.confirmed(valid_until.into_std(), config.timeout);
        let reason = registration.lost_signal().lost().await;
        assert_eq!(reason, LostReason::QuorumLost);
        let node_timeout = watchdog.redlock().config().node_timeout_for(config.timeout);
        let deadline = valid_until - config.lost_margin(node_timeout);
        assert!(
            Instant::now() >= deadline,
            "lost before its validity was in danger"
        );
        assert!(
            Instant::now() < valid_until,
            "the holder is told while the lock is its own"
        );
        // A round at one interval, then retries every quarter interval until the deadline.
        let rounds = watchdog.stats().rounds;
        assert!(rounds >= 3, "{rounds} rounds");
        assert_eq!(watchdog.stats().renewed, 0);
    }
}
