//! Waiting for a lock: a turn in the client's line (see `gate`), then attempts until acquired,
//! sleeping between them until a release is announced (see `wakeup`), the holder's lease runs
//! out, or a paced retry is due.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use redlock_core::telemetry::{self, AcquisitionOutcome, GaugeUnit};
use redlock_core::Error;
use tokio::sync::futures::Notified;
use tokio::time::Instant;
use tracing::Instrument;

use crate::acquire::{attempt, Outcome};
use crate::gate::{Admission, Ticket};
use crate::hold::{Grant, LeaseMode};
use crate::holds::Target;
use crate::inner::Inner;
use crate::kind::LockKeys;
use crate::wakeup::Subscription;

/// Attempts until acquired, or until `wait` (if any) has passed while the lock is held by
/// someone else. A new hold waits for its turn in the client's line for the lock first (see
/// `gate`): while another task of this client holds or asks for the lock, it asks the nodes
/// nothing, and with no `wait` left it answers at once. Between attempts it sleeps until a release is announced or the holder's
/// lease runs out, whichever comes first; after a split vote, a short jittered pause; once
/// a release was heard and a majority still names a holder, a recheck that starts at a
/// per-node timeout and doubles, until the next release restarts it.
///
/// Records the call's outcome and duration (`telemetry::ACQUISITIONS`, `WAIT_SECONDS`) when it
/// ends; a call dropped before its end records nothing.
pub(crate) async fn acquire_waiting(
    inner: &Arc<Inner>,
    target: &Target,
    wait: Option<Duration>,
    mode: LeaseMode,
) -> Result<Option<Grant>, Error> {
    let started = Instant::now();
    let span = tracing::debug_span!("redlock.lock", lock = %target.name, wait = ?wait);
    let outcome = wait_for_grant(inner, target, wait, mode)
        .instrument(span)
        .await;
    let recorded = match &outcome {
        Ok(Some(_)) => AcquisitionOutcome::Acquired,
        Ok(None) | Err(Error::Contended { .. }) => AcquisitionOutcome::Contended,
        Err(Error::NoQuorum { .. }) => AcquisitionOutcome::NoQuorum,
        Err(Error::LockLost { .. }) => AcquisitionOutcome::Lost,
        Err(_) => AcquisitionOutcome::Error,
    };
    telemetry::acquisition(recorded, started.elapsed());
    outcome
}

async fn wait_for_grant(
    inner: &Arc<Inner>,
    target: &Target,
    wait: Option<Duration>,
    mode: LeaseMode,
) -> Result<Option<Grant>, Error> {
    // An upgrade is refused before this task queues behind anyone (it would wait for itself).
    crate::acquire::refuse_clash(inner, target)?;
    // A wait too long to represent is no deadline at all.
    let deadline = wait.map(|wait| Instant::now().checked_add(wait));
    let left = || match deadline {
        Some(Some(deadline)) => Some(deadline.saturating_duration_since(Instant::now())),
        _ => None,
    };
    // Retries of a failure (a missing quorum) are bounded by the policy; pauses after split
    // votes are not (contention is waited out, for as long as the caller waits).
    let policy = inner.redlock.config().retry;
    let (mut retries, mut splits) = (policy.backoff(), policy.backoff().unbounded());
    let mut waiting = Waiting::default();
    // Spinning: no subscription; looks again after these pauses (reset by nothing: a holder
    // that keeps the lock makes them grow).
    let mut spin = target.wait.spin_backoff();
    // Once a release was heard, how long to wait before looking again while a majority
    // still names a holder (the release may not have reached every master yet).
    let mut recheck: Option<Duration> = None;
    let mut previous_start: Option<Instant> = None;
    // The end of a pause after a failure that a wake-up cut short: a look it brought forward
    // and that failed again goes back to it rather than spending another retry, so the pauses
    // still add up to what the policy promises, however often waiters are woken.
    let mut interrupted_pause: Option<Instant> = None;
    // This task's place in the client's line for the lock, while it asks for a new hold.
    let mut ticket: Option<Ticket> = None;
    // An attempt found that a new hold is wanted though the look below saw a hold of this
    // owner's: the next pass takes its turn whatever it sees.
    let mut turn_wanted = false;
    // A writer that waits is registered on the nodes (new readers wait behind it): it takes
    // that back however this call ends without the lock.
    let mut registered = WaitingWriter::new(inner, target);
    // The caller's first look: see `attempt`.
    let mut first = true;
    loop {
        if std::mem::take(&mut turn_wanted) || needs_turn(inner, target) {
            if ticket.is_none()
                && left() == Some(Duration::ZERO)
                && inner.gates.is_busy(target.key())
            {
                // Another task of this client holds the lock or waits for it first.
                return Ok(None);
            }
            let place = ticket
                .get_or_insert_with(|| inner.gates.join(&target.hold.key, &target.hold.owner));
            let admitted = match deadline {
                Some(Some(deadline)) => tokio::time::timeout_at(deadline, place.admitted())
                    .await
                    .ok(),
                _ => Some(place.admitted().await),
            };
            match admitted {
                None => return Ok(None),
                Some(Admission::Turn) => {}
                // Its owner holds the lock now: a nested acquisition needs no turn.
                Some(Admission::Nested) => ticket = None,
            }
        } else {
            ticket = None;
        }
        // Listen before trying, so a release between the attempt and the sleep still wakes us.
        let mut notified = waiting
            .subscription
            .as_ref()
            .map(|s| Box::pin(s.notify().notified()));
        if let Some(notified) = notified.as_mut() {
            notified.as_mut().enable();
        }
        let started = Instant::now();
        // A release heard since the previous attempt started (by any waiter of this client)
        // may not have reached the masters that refuse this attempt yet.
        let since = previous_start.replace(started).unwrap_or(started);
        let resumable = interrupted_pause.take();
        let waits = left().is_none_or(|left| !left.is_zero());
        registered.sending(waits);
        let outcome = attempt(inner, target, mode, &mut ticket, waits, first).await;
        // The first look is the first the nodes answered.
        first &= !matches!(
            outcome,
            Ok(Outcome::Acquired { .. } | Outcome::Held { .. } | Outcome::Contended)
        );
        registered.answered(
            waits,
            match &outcome {
                Ok(Outcome::Acquired {
                    refused_somewhere, ..
                }) => *refused_somewhere,
                Ok(Outcome::Held { .. } | Outcome::Contended) => true,
                // Whatever failed may have come after some node registered it: the
                // withdrawal is harmless where it was not.
                Err(_) => true,
                Ok(Outcome::Expired | Outcome::NeedsTurn) => false,
            },
        );
        let (fallback, rechecking) = match outcome {
            Ok(Outcome::Acquired { grant, .. }) => {
                registered.granted();
                return Ok(Some(grant));
            }
            Ok(Outcome::Expired) => continue,
            Ok(Outcome::NeedsTurn) => {
                turn_wanted = true;
                continue;
            }
            Ok(Outcome::Held { ttl }) => {
                retries.reset();
                splits.reset();
                let heard = waiting
                    .subscription
                    .as_ref()
                    .and_then(Subscription::last_release_heard);
                if heard.is_some_and(|heard| heard >= since) {
                    recheck = Some(first_recheck(inner));
                }
                match (recheck, spin.as_mut().and_then(|spin| spin.next_delay())) {
                    (_, Some(pause)) => {
                        (ttl.map_or(Some(pause), |ttl| Some(ttl.min(pause))), false)
                    }
                    (Some(pause), None) if ttl.is_none_or(|ttl| pause < ttl) => (Some(pause), true),
                    _ => (ttl, false),
                }
            }
            Ok(Outcome::Contended) => {
                retries.reset();
                (registered.refreshed_by(splits.next_delay()), false)
            }
            Err(err) if err.is_retryable() => {
                let now = Instant::now();
                let until = match resumable.filter(|until| *until > now) {
                    Some(until) => until,
                    None => match registered.refreshed_by(retries.next_delay()) {
                        Some(pause) if left().is_none_or(|left| left > pause) => now + pause,
                        _ => return Err(err),
                    },
                };
                // A release, or the subscription confirmed again after an outage (a failover),
                // ends the pause early: the masters may be answering again.
                tokio::select! {
                    biased;
                    () = heard(notified) => interrupted_pause = Some(until),
                    () = tokio::time::sleep_until(until) => {}
                }
                continue;
            }
            Err(err) => return Err(err),
        };
        if left() == Some(Duration::ZERO) {
            return Ok(None);
        }
        if spin.is_some() && waiting.counted.is_none() {
            waiting.counted = Some(GaugeUnit::new(telemetry::WAITERS));
        }
        if waiting.subscription.is_none() && spin.is_none() {
            drop(notified);
            waiting.subscription = Some(
                inner
                    .wakeups
                    // Both sides of a read-write lock, and every waiter for permits, may go in
                    // on one release: it wakes them all.
                    .subscribe(target.channel(), target.keys.wakes_all())
                    .await,
            );
            waiting.counted = Some(GaugeUnit::new(telemetry::WAITERS));
            continue; // try again now that releases reach us
        }
        let fallback = [fallback, left()].into_iter().flatten().min();
        let sleep = async {
            match fallback {
                Some(fallback) => tokio::time::sleep(fallback).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            () = heard(notified) => {}
            () = sleep => {
                if rechecking {
                    recheck = recheck.map(|pause| pause.saturating_mul(2));
                }
            }
        }
    }
}

/// A waiter that may be registered on the nodes while it waits: a read-write lock's writer (new
/// readers wait behind it), or a fair lock's waiter (its ticket in the queue). Dropped while
/// registered, it takes the registration back on every node: after a grant silently (a node
/// that refused the grant keeps it otherwise), after giving up (the call ended without the
/// lock, or was dropped) with an announcement, so the waiters it held up look again. Where the
/// withdrawal does not arrive, the registration runs out within its heartbeat.
struct WaitingWriter {
    /// What the withdrawal needs, for a write side only; and its heartbeat.
    target: Option<(Arc<Inner>, Target, Duration)>,
    registered: bool,
    /// An attempt that would wait is out: dropped now, it may have registered anywhere.
    in_flight: bool,
    granted: bool,
}

impl WaitingWriter {
    fn new(inner: &Arc<Inner>, target: &Target) -> Self {
        // A read-write lock's writer, or a fair lock's waiter: registered while it waits.
        let write = match target.keys {
            LockKeys::ReadWrite(_) => target.kind() == crate::kind::Kind::Write,
            LockKeys::Fair(_) => true,
            LockKeys::Own | LockKeys::Permits(_) => false,
        };
        Self {
            target: write.then(|| (Arc::clone(inner), target.clone(), inner.writer_heartbeat())),
            registered: false,
            in_flight: false,
            granted: false,
        }
    }

    /// An attempt is about to be sent.
    fn sending(&mut self, waits: bool) {
        self.in_flight = waits && self.target.is_some();
    }

    /// An attempt answered: one that would wait may have registered where it was refused (or
    /// not answered).
    fn answered(&mut self, waits: bool, refused_somewhere: bool) {
        self.in_flight = false;
        self.registered |= waits && refused_somewhere && self.target.is_some();
    }

    /// The lock was granted.
    fn granted(&mut self) {
        self.granted = true;
    }

    /// A pause before the next look, no longer than a third of the heartbeat while registered:
    /// the look refreshes the registration before it runs out.
    fn refreshed_by(&self, pause: Option<Duration>) -> Option<Duration> {
        match &self.target {
            Some((_, _, heartbeat)) if self.registered => {
                pause.map(|pause| pause.min(*heartbeat / 3))
            }
            _ => pause,
        }
    }
}

impl Drop for WaitingWriter {
    fn drop(&mut self) {
        if let (true, Some((inner, target, _))) =
            (self.registered || self.in_flight, self.target.take())
        {
            crate::unlock::withdraw_writer(&inner, &target, !self.granted);
        }
    }
}

/// Whether this owner's next acquisition of the lock asks for a new hold, and so takes its turn
/// in the client's line: a nested one does not (its owner holds the lock already).
fn needs_turn(inner: &Inner, target: &Target) -> bool {
    crate::acquire::takes_turns(target)
        && inner
            .holds
            .get(&target.hold)
            .is_none_or(|cell| cell.state().needs_turn())
}

/// Resolves when the subscription wakes this waiter (a release, or the subscription confirmed
/// again); never without a subscription.
async fn heard(notified: Option<Pin<Box<Notified<'_>>>>) {
    match notified {
        Some(notified) => notified.await,
        None => std::future::pending().await,
    }
}

/// A waiter's subscription. A release wakes one waiter of this client: the task whose turn it
/// is in the client's line for the lock (see `gate`). If it then leaves without the lock (its
/// wait ran out, it failed, or it was dropped), its turn passes to the next task in line,
/// which asks the nodes at once: no wake-up is lost with it. The locks whose waiters do not
/// queue in the line (a read-write lock's, a semaphore's, a fair lock's) wake them all.
#[derive(Default)]
struct Waiting {
    subscription: Option<Subscription>,
    /// This task in the waiters gauge, from its subscription on.
    counted: Option<GaugeUnit>,
}

/// The first look again after a release that did not free the lock: 1 to 1.5 per-node
/// timeouts (about the time a release on a slower master may take to land), jittered so that
/// waiting clients do not look at once.
fn first_recheck(inner: &Inner) -> Duration {
    let node_timeout = inner.node_timeout();
    node_timeout + node_timeout.mul_f64(fastrand::f64() / 2.0)
}
