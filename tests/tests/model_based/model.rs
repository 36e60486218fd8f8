//! The reference model: what the documented semantics say each owner holds, and whether each
//! outcome the real library gave is one the documentation allows.
//!
//! The model follows the real outcomes where the documentation leaves a choice (a fault may
//! turn an acquisition into `NoQuorum`; a loss may come from a pause of the machine), and says
//! where it leaves none. It keeps, per owner and lock, the acquisitions the owner has not let
//! go of, their leases, the hold's fencing token and its lost signal.

use std::time::{Duration, Instant};

use redlock_reentrant::{Error, LockStatus, LostReason, LostSignal, WatchdogConfig};

use crate::core_lease::CoreLeases;
use crate::ops::{
    conflicts, read_side_of, Lease, Side, ACTORS, CLIENTS, CLIENT_OF, LOCKS, RESOURCE, SIDE,
};
use crate::plain::PlainLeases;

/// What an acquisition call came back with.
pub(crate) enum Took {
    Granted {
        token: Option<u64>,
        signal: Option<LostSignal>,
        /// When the call returned, in the caller's task.
        at: Instant,
    },
    /// `false` / `None`: held by someone else for the whole wait.
    Refused,
    /// Dropped (a patience ran out, or a cancellation).
    Dropped,
    Failed(Error),
}

/// How a release call ended: what the model needs of its answer, kept so that the outcomes
/// of two releases running at once can be tried in either order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Released {
    Ok,
    NoQuorum(String),
    LockLost(String),
    NotOwner(String),
    /// Any other answer, as the library put it.
    Other(String),
    /// Dropped before it answered: it completes in the background.
    Dropped,
}

impl Released {
    pub(crate) fn of(answer: Result<(), Error>) -> Self {
        match answer {
            Ok(()) => Self::Ok,
            Err(err @ Error::NoQuorum { .. }) => Self::NoQuorum(err.to_string()),
            Err(err @ Error::LockLost { .. }) => Self::LockLost(err.to_string()),
            Err(err @ Error::NotOwner { .. }) => Self::NotOwner(err.to_string()),
            Err(err) => Self::Other(format!("{err:?}")),
        }
    }
}

impl std::fmt::Display for Released {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Ok => f.write_str("released"),
            Self::Dropped => f.write_str("dropped"),
            Self::NoQuorum(text)
            | Self::LockLost(text)
            | Self::NotOwner(text)
            | Self::Other(text) => f.write_str(text),
        }
    }
}

/// One owner's hold of one lock, as the model sees it.
#[derive(Debug, Default, Clone)]
pub(crate) struct Hold {
    /// Acquisitions the owner has not let go of.
    pub(crate) count: u32,
    leases: Vec<Lease>,
    pub(crate) token: u64,
    /// Which hold: a guard of an earlier one releases nothing of a later one.
    pub(crate) generation: u64,
    pub(crate) signal: Option<LostSignal>,
    /// Whether a fault, a forced unlock or a release that may have been given up touched the
    /// hold: a loss needs no other explanation.
    disturbed: bool,
    /// Force-unlocked while held: beliefs outside the promise until it ends.
    exempt: bool,
    /// A release no majority answered, kept for its retry.
    pending_unlock: bool,
    /// That release was the final one when it went unanswered: its owner let go of the hold.
    /// (A nested one stays counted until it is retried, even once the guards beside it are
    /// gone.)
    let_go: bool,
    /// A guard's release behind a pending nested one answered `NoQuorum`: either the pending
    /// one's retry found no majority (the guard gave the hold up; the nested acquisition stays
    /// counted, lost) or it landed and the guard's own release then found none (the hold is
    /// over). The owner's next answer tells which.
    maybe_over: bool,
    /// When the longest fixed lease asked for runs out, at the earliest.
    fixed_end: Option<Instant>,
    /// The earliest the library may tell that lease lost: its end, less the margin a hold
    /// that is not renewed is told early by (`WatchdogConfig::fixed_lost_margin`), taken for
    /// the longest lease any of the hold's acquisitions asked for (the library's is never
    /// more: it takes the longest lease that moved the validity end).
    told_from: Option<Instant>,
    /// The longest lease any acquisition of the hold asked for.
    longest_lease: Duration,
    pub(crate) lost: Option<LostReason>,
    /// Which owner of its actor: 0 for the actor's current owner, the number of the client drop
    /// that abandoned it otherwise (the holds one owner had when its client was dropped share
    /// it: a writer's read hold beside its write hold is no conflict).
    owner_epoch: u64,
}

impl Hold {
    /// Believes it holds the lock: acquired, not let go, not told it is lost. An owner whose
    /// final release no majority answered has let go: the release may have landed anywhere.
    pub(crate) fn believes(&self) -> bool {
        self.count > 0
            && self.lost.is_none()
            && !self.exempt
            && !(self.pending_unlock && self.count == 1)
    }

    fn is_live(&self) -> bool {
        self.count > 0 && self.lost.is_none()
    }

    /// A hold whose final release was left pending is over once lost: its owner had let go.
    fn over_once_lost(&self) -> bool {
        self.lost.is_some() && self.pending_unlock && self.let_go && self.count == 1
    }
}

/// What a new acquisition by an owner must do, by the documentation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Plan {
    New,
    Nested,
    /// Lost and not unwound: `LockLost`.
    Lost(LostReason),
}

#[derive(Clone)]
pub(crate) struct Model {
    pub(crate) holds: [[Hold; LOCKS]; ACTORS],
    /// The plain renewed lock, beside the reentrant ones.
    pub(crate) plain: PlainLeases,
    /// The core lock (`Redlock` leases, extended), beside them.
    pub(crate) core: CoreLeases,
    last_token: [u64; LOCKS],
    /// Whether the nodes keep one fencing counter for every lock (standalone masters) or one
    /// per lock (with Redis Cluster members).
    shared_counter: bool,
    /// New holds granted to each client's actors: what `LockClient::fencing_stats` counts.
    pub(crate) new_holds: [u64; CLIENTS],
    next_generation: u64,
    /// Faults in force (paused or killed nodes).
    faults: usize,
    /// Until when outcomes may still feel a fault that ended (queued requests, renewals).
    settling_until: Instant,
    /// Until when a lock may still be held by a key nobody believes in (a lost hold, a
    /// dropped attempt or release, a forced unlock that missed nodes).
    lingering_until: [Instant; LOCKS],
    /// Until when a writer's registration may still hold new readers of each lock up: every
    /// write attempt may leave one (withdrawn in the background, or run out within its
    /// heartbeat).
    writer_waits_until: [Instant; LOCKS],
    watchdog: Duration,
    /// Holds whose client was dropped without `shutdown()` (actor, lock, hold): nobody can
    /// renew or release them any more, and whoever kept their signal still believes until it
    /// fires, by the deadline the hold had.
    abandoned: Vec<(usize, usize, Hold)>,
    pub(crate) notes: Vec<String>,
    /// Clients dropped so far (see [`Hold::owner_epoch`]).
    drops: u64,
}

impl Model {
    pub(crate) fn new(watchdog: Duration, shared_counter: bool) -> Self {
        let now = Instant::now();
        Self {
            holds: Default::default(),
            plain: PlainLeases::default(),
            core: CoreLeases::default(),
            last_token: [0; LOCKS],
            shared_counter,
            new_holds: [0; CLIENTS],
            next_generation: 1,
            faults: 0,
            settling_until: now,
            lingering_until: [now; LOCKS],
            writer_waits_until: [now; LOCKS],
            watchdog,
            abandoned: Vec::new(),
            notes: Vec::new(),
            drops: 0,
        }
    }

    /// Whether faults are in force or their effects may still show.
    pub(crate) fn disturbed(&self) -> bool {
        self.faults > 0 || Instant::now() < self.settling_until
    }

    fn lingering(&self, lock: usize) -> bool {
        Instant::now() < self.lingering_until[lock]
    }

    fn linger(&mut self, lock: usize, lease: Duration) {
        let until = Instant::now() + lease + Duration::from_millis(100);
        self.lingering_until[lock] = self.lingering_until[lock].max(until);
    }

    /// The longest lease a key of `lock` can have now.
    fn longest_lease(&self, lock: usize) -> Duration {
        let now = Instant::now();
        (0..ACTORS)
            .filter_map(|actor| self.holds[actor][lock].fixed_end)
            .map(|end| end.saturating_duration_since(now))
            .chain([self.watchdog, Duration::from_secs(3)])
            .max()
            .unwrap_or(self.watchdog)
    }

    pub(crate) fn fault_begins(&mut self) {
        self.faults += 1;
        self.plain.fault_begins();
        for hold in self.holds.iter_mut().flatten() {
            hold.disturbed |= hold.count > 0;
        }
    }

    pub(crate) fn fault_ends(&mut self) {
        self.faults = self.faults.saturating_sub(1);
        let settle = Instant::now() + self.watchdog * 2;
        self.settling_until = self.settling_until.max(settle);
        for lock in 0..LOCKS {
            let lease = self.longest_lease(lock);
            self.linger(lock, lease);
        }
    }

    /// Reads the hold's lost signal; a new loss must have a cause the documentation gives.
    pub(crate) fn observe(&mut self, actor: usize, lock: usize) -> Result<(), String> {
        let disturbed = self.disturbed();
        let hold = &mut self.holds[actor][lock];
        if hold.count == 0 || hold.lost.is_some() {
            return Ok(());
        }
        let Some(reason) = hold.signal.as_ref().and_then(LostSignal::reason) else {
            return Ok(());
        };
        hold.lost = Some(reason);
        let explained = hold.disturbed || hold.exempt || disturbed;
        let allowed = match reason {
            // A machine too busy to renew in time: the holder is told, as promised.
            LostReason::QuorumLost | LostReason::MaxHoldReached => true,
            LostReason::NotOwner | LostReason::Abandoned => explained,
            LostReason::LeaseExpired => {
                let fixed_only = hold.leases.iter().all(|lease| *lease != Lease::Watchdog);
                // The library's deadline counts from when its requests left, less the drift
                // allowance (1 % + 2 ms): up to 40 ms before the end measured here.
                let early = hold
                    .told_from
                    .is_some_and(|from| Instant::now() + Duration::from_millis(40) < from);
                explained || (fixed_only && !early)
            }
            _ => explained,
        };
        let note = format!("a{actor} l{lock}: lost ({reason:?}), {} held", hold.count);
        if hold.over_once_lost() {
            *hold = Hold::default();
        }
        self.notes.push(note.clone());
        let lease = self.longest_lease(lock);
        self.linger(lock, lease);
        if allowed {
            Ok(())
        } else {
            Err(format!("{note} with nothing to explain it"))
        }
    }

    pub(crate) fn observe_all(&mut self) -> Result<(), String> {
        for actor in 0..ACTORS {
            for lock in 0..LOCKS {
                self.observe(actor, lock)?;
            }
        }
        self.observe_abandoned()
    }

    /// Reads the signals of the holds whose client was dropped: each fires by its deadline,
    /// `Abandoned` (nothing renews the hold any more), or for a cause that came first.
    fn observe_abandoned(&mut self) -> Result<(), String> {
        let disturbed = self.disturbed();
        let mut result = Ok(());
        self.abandoned.retain(|(actor, lock, hold)| {
            let Some(signal) = hold.signal.as_ref() else {
                return false;
            };
            // Read before anything that could fire it: a read past the deadline fires the
            // signal itself, the token must have been cancelled by the timer thread already
            // (a second is room for a busy machine).
            if let Some((deadline, _)) = signal.deadline() {
                if Instant::now() > deadline + Duration::from_secs(1)
                    && !signal.token().is_cancelled()
                    && result.is_ok()
                {
                    result = Err(format!(
                        "a{actor} l{lock}: a hold of a dropped client: its token not cancelled a second after its deadline"
                    ));
                }
            }
            let Some(reason) = signal.reason() else {
                return true;
            };
            let allowed = match reason {
                LostReason::Abandoned | LostReason::QuorumLost | LostReason::MaxHoldReached => {
                    true
                }
                // Told while the client was being dropped: as for any fixed lease.
                LostReason::LeaseExpired => hold
                    .told_from
                    .is_none_or(|from| Instant::now() + Duration::from_millis(40) >= from),
                _ => hold.disturbed || hold.exempt || disturbed,
            };
            if !allowed && result.is_ok() {
                result = Err(format!(
                    "a{actor} l{lock}: a hold of a dropped client lost ({reason:?}) with nothing to explain it"
                ));
            }
            false
        });
        result
    }

    /// The client was dropped without `shutdown()`: its actors' holds are abandoned (their
    /// signals kept), and its actors are new owners of a new client from now on.
    pub(crate) fn client_dropped(&mut self, client: usize) {
        self.drops += 1;
        for actor in (0..ACTORS).filter(|a| CLIENT_OF[*a] == client) {
            for lock in 0..LOCKS {
                let mut hold = std::mem::take(&mut self.holds[actor][lock]);
                hold.owner_epoch = self.drops;
                if hold.count == 0 {
                    continue;
                }
                let lease = self.longest_lease(lock);
                self.linger(lock, lease);
                if hold.believes() && hold.signal.is_some() {
                    self.notes
                        .push(format!("a{actor} l{lock}: abandoned, {} held", hold.count));
                    self.abandoned.push((actor, lock, hold));
                }
            }
        }
        self.new_holds[client] = 0;
    }

    /// The abandoned holds of `lock` whose holders still believe.
    fn abandoned_believers(&self, lock: usize) -> impl Iterator<Item = (usize, &Hold)> {
        self.abandoned
            .iter()
            .filter(move |(_, of, hold)| *of == lock && hold.believes())
            .map(|(actor, _, hold)| (*actor, hold))
    }

    fn plan(&self, actor: usize, lock: usize) -> Plan {
        let hold = &self.holds[actor][lock];
        match hold.lost {
            _ if hold.count == 0 => Plan::New,
            Some(LostReason::LeaseExpired) => Plan::New,
            Some(reason) => Plan::Lost(reason),
            None if hold.pending_unlock && hold.count == 1 => Plan::New,
            None => Plan::Nested,
        }
    }

    /// Another owner that still believed it held `lock` at `at`: its signal neither fired
    /// nor past its deadline then.
    /// An abandoned hold (its client dropped) is another owner's, whoever its actor.
    fn believer_at(&self, actor: usize, lock: usize, at: Instant) -> Option<usize> {
        let believed_then = |hold: &Hold| {
            if !hold.believes() {
                return false;
            }
            let Some(signal) = &hold.signal else {
                return true;
            };
            let expired_by_then = signal
                .deadline()
                .is_some_and(|(deadline, _)| deadline <= at);
            // A signal fired by the watchdog (not by its deadline) cannot be timed from here:
            // it counts as told.
            !expired_by_then && signal.reason().is_none()
        };
        let conflicting = || (0..LOCKS).filter(move |other| conflicts(lock, *other));
        (0..ACTORS)
            .filter(|other| *other != actor)
            .find(|other| conflicting().any(|l| believed_then(&self.holds[*other][l])))
            .or_else(|| {
                conflicting().find_map(|l| {
                    self.abandoned_believers(l)
                        .find(|(_, hold)| believed_then(hold))
                        .map(|(other, _)| other)
                })
            })
    }

    /// Whether `lock` may be held by something the model does not count on (or, for a read
    /// side, a writer may be registered as waiting).
    fn may_be_held(&self, actor: usize, lock: usize) -> bool {
        let conflicting = || (0..LOCKS).filter(move |other| conflicts(lock, *other));
        self.disturbed()
            || (SIDE[lock] == Side::Read && Instant::now() < self.writer_waits_until[lock])
            || conflicting().any(|l| {
                self.lingering(l)
                    || self.abandoned_believers(l).next().is_some()
                    || (0..ACTORS).any(|other| other != actor && self.holds[other][l].count > 0)
            })
    }

    /// A write attempt on `lock` was made: until its registration is surely gone, readers may
    /// be held up (a heartbeat: a third of the watchdog's lease, at least four per-node
    /// timeouts, and room).
    fn writer_tried(&mut self, lock: usize) {
        if let Some(read) = read_side_of(lock) {
            let heartbeat = (self.watchdog / 3).max(crate::system::NODE_TIMEOUT * 4);
            let until = Instant::now() + heartbeat + Duration::from_millis(200);
            self.writer_waits_until[read] = self.writer_waits_until[read].max(until);
        }
    }

    /// A multi-lock of `locks` (none held by `actor`) answered "not within the wait": some
    /// member must have been held by someone else (or a writer waited, for a read side).
    pub(crate) fn multi_refused(&mut self, actor: usize, locks: &[usize]) -> Result<(), String> {
        for lock in locks {
            self.writer_tried(*lock);
        }
        if locks.iter().any(|lock| self.may_be_held(actor, *lock)) {
            Ok(())
        } else {
            Err(format!(
                "a{actor}: a multi-lock of {locks:?} refused while nobody held them"
            ))
        }
    }

    /// A multi-lock of `locks` failed with `err`: only a missing quorum, under a fault. The
    /// members it took were released before it answered, or linger where that missed.
    pub(crate) fn multi_failed(
        &mut self,
        actor: usize,
        locks: &[usize],
        err: Error,
    ) -> Result<(), String> {
        match err {
            Error::NoQuorum { .. } if self.disturbed() => {
                for lock in locks {
                    let lease = self.longest_lease(*lock);
                    self.linger(*lock, lease);
                }
                Ok(())
            }
            err => Err(format!(
                "a{actor}: a multi-lock of {locks:?} failed: {err:?}"
            )),
        }
    }

    /// The largest token handed out for `lock`'s resource (both sides of a read-write lock
    /// share its counter and its order).
    fn last_token_of(&self, lock: usize) -> u64 {
        (0..LOCKS)
            .filter(|other| RESOURCE[*other] == RESOURCE[lock])
            .map(|other| self.last_token[other])
            .max()
            .unwrap_or(0)
    }

    /// An acquisition by `actor` of `lock`, begun at `started`, came back with `took`. Returns
    /// the hold's generation when it was granted.
    pub(crate) fn acquired(
        &mut self,
        actor: usize,
        lock: usize,
        lease: Lease,
        started: Instant,
        took: Took,
    ) -> Result<Option<u64>, String> {
        self.writer_tried(lock);
        if let Some(read) = read_side_of(lock) {
            // An owner that holds the read side asks for the write side: refused at once.
            let reading = &self.holds[actor][read];
            let upgrade = reading.count > 0;
            let sure = upgrade && !reading.pending_unlock && !reading.maybe_over;
            match &took {
                Took::Failed(Error::InvalidArgument(
                    redlock_reentrant::InvalidArgument::UpgradeWouldDeadlock { .. },
                )) if upgrade => return Ok(None),
                Took::Failed(Error::InvalidArgument(
                    redlock_reentrant::InvalidArgument::UpgradeWouldDeadlock { .. },
                )) => {
                    return Err(format!(
                        "a{actor} l{lock}: an upgrade refused, but the owner holds no read"
                    ))
                }
                _ if sure => {
                    return Err(format!(
                        "a{actor} l{lock}: the owner holds the read side, and its write acquisition was not refused: {}",
                        match &took {
                            Took::Granted { .. } => "granted".to_owned(),
                            Took::Refused => "refused as held".to_owned(),
                            Took::Dropped => "dropped".to_owned(),
                            Took::Failed(err) => format!("{err:?}"),
                        }
                    ))
                }
                _ => {}
            }
        }
        let mut plan = self.plan(actor, lock);
        let hold = &mut self.holds[actor][lock];
        if matches!(plan, Plan::Lost(_))
            && hold.maybe_over
            && hold.count == 1
            && matches!(took, Took::Granted { .. } | Took::Refused)
        {
            // The pending release had landed: the hold was over (see `Hold::maybe_over`).
            *hold = Hold::default();
            plan = Plan::New;
        }
        match took {
            Took::Granted { token, signal, at } => {
                if let Plan::Lost(reason) = plan {
                    return Err(format!(
                        "a{actor} l{lock}: a hold lost ({reason:?}) and not unwound was re-entered"
                    ));
                }
                if let Some(other) = self.believer_at(actor, lock, at) {
                    return Err(format!(
                        "a{actor} l{lock}: acquired while a{other} believed it held the lock and was not told"
                    ));
                }
                self.observe_all()?;
                let token = token.ok_or_else(|| format!("a{actor} l{lock}: granted, no token"))?;
                let mut plan = plan;
                if plan == Plan::Nested && token != self.holds[actor][lock].token {
                    // Its fixed lease ran out during the call: the library began a new hold.
                    self.observe(actor, lock)?;
                    if self.holds[actor][lock].lost == Some(LostReason::LeaseExpired) {
                        plan = Plan::New;
                    }
                }
                let disturbed = self.disturbed();
                let last = self.last_token_of(lock);
                let hold = &mut self.holds[actor][lock];
                if plan == Plan::New {
                    if token <= last {
                        return Err(format!(
                            "a{actor} l{lock}: a new hold's token {token} is not above the last one, {last}"
                        ));
                    }
                    self.last_token[lock] = token;
                    self.new_holds[CLIENT_OF[actor]] += 1;
                    *hold = Hold {
                        generation: self.next_generation,
                        token,
                        signal,
                        disturbed,
                        ..Hold::default()
                    };
                    self.next_generation += 1;
                } else {
                    if token != hold.token {
                        return Err(format!(
                            "a{actor} l{lock}: a nested acquisition changed the token {} to {token}",
                            hold.token
                        ));
                    }
                    if hold.pending_unlock {
                        // The pending release was finished first.
                        hold.count -= 1;
                        hold.leases.pop();
                        hold.pending_unlock = false;
                        hold.let_go = false;
                    }
                    hold.disturbed |= disturbed;
                }
                hold.count += 1;
                hold.leases.push(lease);
                hold.longest_lease = hold.longest_lease.max(match lease {
                    Lease::Watchdog => self.watchdog,
                    Lease::Fixed(ms) => Duration::from_millis(ms),
                });
                if let Lease::Fixed(ms) = lease {
                    let end = started + Duration::from_millis(ms);
                    hold.fixed_end = Some(hold.fixed_end.map_or(end, |e| e.max(end)));
                }
                // `started` was taken before any wait: the end counted from it is early, which
                // only makes this earlier, never later than the library's deadline.
                hold.told_from = hold
                    .fixed_end
                    .map(|end| end - fixed_lost_margin(self.watchdog, hold.longest_lease));
                Ok(Some(hold.generation))
            }
            Took::Refused => {
                if let Plan::Lost(reason) = plan {
                    return Err(format!(
                        "a{actor} l{lock}: a hold lost ({reason:?}) answered as if another held it"
                    ));
                }
                if plan != Plan::New {
                    self.observe(actor, lock)?;
                    if self.holds[actor][lock].lost.is_none() {
                        return Err(format!(
                            "a{actor} l{lock}: a nested acquisition was refused as if another held it"
                        ));
                    }
                } else if !self.may_be_held(actor, lock) {
                    return Err(format!("a{actor} l{lock}: refused a lock nobody holds"));
                }
                Ok(None)
            }
            Took::Dropped => {
                // An acquisition retries the owner's pending release first, from its first poll
                // (a step's future is always polled once): dropped, that retry completes in the
                // background, released or given up where no majority answers, as a dropped
                // release does. The attempt itself is undone on every node it reached.
                // Both happen in the background, whenever a busy machine gets to them: until
                // then the keys may stay, for their lease at most.
                let disturbed = self.disturbed();
                let mut lingers = match lease {
                    Lease::Watchdog => self.watchdog,
                    Lease::Fixed(ms) => Duration::from_millis(ms),
                };
                let hold = &mut self.holds[actor][lock];
                if hold.pending_unlock && hold.lost.is_none() && hold.count > 0 {
                    hold.disturbed |= disturbed;
                    hold.leases.pop();
                    hold.count -= 1;
                    hold.pending_unlock = false;
                    hold.let_go = false;
                    if hold.count == 0 {
                        *hold = Hold::default();
                    }
                    lingers = lingers.max(self.longest_lease(lock));
                }
                self.linger(lock, lingers);
                Ok(None)
            }
            Took::Failed(Error::LockLost { reason, .. }) => {
                self.observe(actor, lock)?;
                let hold = &self.holds[actor][lock];
                match plan {
                    Plan::Lost(_) => Ok(None),
                    Plan::New if hold.count > 0 => Err(format!(
                        "a{actor} l{lock}: answered LockLost({reason:?}) where its expired fixed lease had ended the hold"
                    )),
                    _ if hold.lost.is_some() => Ok(None),
                    _ => Err(format!(
                        "a{actor} l{lock}: answered LockLost({reason:?}) while its signal had not fired"
                    )),
                }
            }
            Took::Failed(Error::NoQuorum { .. }) if self.disturbed() => Ok(None),
            Took::Failed(err) => Err(format!("a{actor} l{lock}: acquisition failed: {err:?}")),
        }
    }

    /// `RLock::unlock` by `actor` of `lock` (`guard`: the guard's generation and lease, for a
    /// guard's release) came back with `outcome`.
    pub(crate) fn released(
        &mut self,
        actor: usize,
        lock: usize,
        guard: Option<(u64, Lease)>,
        outcome: Released,
    ) -> Result<(), String> {
        // Judged by the hold as it was when the call began (the steps observe before each
        // call); a loss during the call is observed once the outcome is applied.
        let outcome_applied = self.release_outcome(actor, lock, guard, outcome);
        self.observe(actor, lock)?;
        outcome_applied
    }

    /// `RLock::unlock` and a guard's `unlock` (its generation and lease) of one owner's hold
    /// ran at once: the hold serialises them in some order, so the outcomes must fit one of
    /// the two.
    pub(crate) fn released_together(
        &mut self,
        actor: usize,
        lock: usize,
        guard: (u64, Lease),
        by_owner: &Released,
        by_guard: &Released,
    ) -> Result<(), String> {
        // A loss signalled before either answer is judged once, as the hold stood: the order
        // that ends the hold first would otherwise drop it unexamined. Each order then reads
        // the signal once both outcomes are applied, as one call's does after it: the signal
        // cannot say which of the two gave the hold up (the second one's retry of the first
        // one's unanswered release may be what fired it).
        self.clone().observe(actor, lock)?;
        let mut owner_first = self.clone();
        let first = owner_first
            .release_outcome(actor, lock, None, by_owner.clone())
            .and_then(|()| owner_first.release_outcome(actor, lock, Some(guard), by_guard.clone()))
            .and_then(|()| owner_first.observe(actor, lock));
        let Err(owner_first_violation) = first else {
            *self = owner_first;
            return Ok(());
        };
        self.release_outcome(actor, lock, Some(guard), by_guard.clone())
            .and_then(|()| self.release_outcome(actor, lock, None, by_owner.clone()))
            .and_then(|()| self.observe(actor, lock))
            .map_err(|guard_first_violation| {
                format!(
                    "fits neither order: the owner's first: {owner_first_violation}; \
                     the guard's first: {guard_first_violation}"
                )
            })
    }

    fn release_outcome(
        &mut self,
        actor: usize,
        lock: usize,
        guard: Option<(u64, Lease)>,
        outcome: Released,
    ) -> Result<(), String> {
        let disturbed = self.disturbed();
        let hold = &mut self.holds[actor][lock];
        let stale = guard.is_some_and(|(generation, _)| generation != hold.generation);
        if hold.count == 0 || stale {
            return match outcome {
                Released::NotOwner(_) | Released::LockLost(_) | Released::Dropped => Ok(()),
                other => Err(format!(
                    "a{actor} l{lock}: a release of nothing answered {other:?}"
                )),
            };
        }
        if let Some(reason) = hold.lost {
            if hold.maybe_over && hold.count == 1 && matches!(outcome, Released::NotOwner(_)) {
                // The pending release had landed: the hold was over (see `Hold::maybe_over`).
                *hold = Hold::default();
                return Ok(());
            }
            let unwound = match outcome {
                Released::LockLost(_) | Released::Dropped => true,
                other => {
                    return Err(format!(
                        "a{actor} l{lock}: a release of a hold lost ({reason:?}) answered {other:?}"
                    ))
                }
            };
            if unwound {
                hold.count -= 1;
                if hold.count == 0 {
                    *hold = Hold::default();
                }
            }
            return Ok(());
        }
        let finishes_pending = guard.is_some() && hold.pending_unlock;
        let let_go = |hold: &mut Hold| {
            let position = guard
                .and_then(|(_, lease)| hold.leases.iter().rposition(|l| *l == lease))
                .unwrap_or(hold.leases.len().saturating_sub(1));
            if position < hold.leases.len() {
                hold.leases.remove(position);
            }
            hold.count -= 1;
            if hold.count == 0 {
                *hold = Hold::default();
            }
        };
        match outcome {
            Released::Ok => {
                if finishes_pending {
                    let_go(hold);
                }
                if hold.count > 0 {
                    let_go(hold);
                }
                // The owner's own call was the pending release's retry (same request id), or
                // a guard's finished it first: either way it landed.
                hold.pending_unlock = false;
                hold.let_go = false;
                Ok(())
            }
            Released::NoQuorum(_) if disturbed => {
                if guard.is_some() {
                    // Given up: the rest of the hold is lost.
                    hold.disturbed = true;
                    hold.maybe_over |= finishes_pending && !hold.let_go;
                    let_go(hold);
                } else {
                    hold.pending_unlock = true;
                    hold.let_go |= hold.count == 1;
                }
                Ok(())
            }
            Released::LockLost(_) => {
                // Lost meanwhile: the signal must say so.
                self.observe(actor, lock)?;
                let hold = &mut self.holds[actor][lock];
                if hold.lost.is_none() {
                    return Err(format!(
                        "a{actor} l{lock}: a release answered LockLost while the signal had not fired"
                    ));
                }
                hold.count = hold.count.saturating_sub(1);
                if hold.count == 0 {
                    *hold = Hold::default();
                }
                Ok(())
            }
            Released::Dropped => {
                // Completed in the background (whenever a busy machine gets to it: the key may
                // stay until then, for its lease at most), or given up there if no majority
                // answers.
                hold.disturbed |= disturbed;
                if finishes_pending {
                    let_go(hold);
                }
                if hold.count > 0 {
                    let_go(hold);
                }
                let lease = self.longest_lease(lock);
                self.linger(lock, lease);
                Ok(())
            }
            Released::NotOwner(_) if finishes_pending && hold.let_go && hold.count == 1 => {
                // The owner's final release, left pending, was of this guard's acquisition: it
                // is retried first and ends the guard's hold, which was then released through
                // the lock (documented on `LockGuard::unlock`).
                *hold = Hold::default();
                Ok(())
            }
            other => Err(format!(
                "a{actor} l{lock}: a release of a live hold of {} answered {other:?}",
                hold.count
            )),
        }
    }

    /// A guard of `generation` was dropped where nothing can be sent: the hold is given up.
    pub(crate) fn abandoned(&mut self, actor: usize, lock: usize, generation: u64) {
        let hold = &mut self.holds[actor][lock];
        if hold.generation != generation || hold.count == 0 {
            return;
        }
        hold.disturbed = true;
        hold.count -= 1;
        if hold.count == 0 {
            *hold = Hold::default();
        }
        let lease = self.longest_lease(lock);
        self.linger(lock, lease);
    }

    /// The lock was force-unlocked (`deleted`: the call says it deleted it on a majority).
    pub(crate) fn forced(&mut self, lock: usize) {
        let abandoned = self
            .abandoned
            .iter_mut()
            .filter(|(_, of, _)| *of == lock)
            .map(|(_, _, hold)| hold);
        for hold in self
            .holds
            .iter_mut()
            .map(|holds| &mut holds[lock])
            .chain(abandoned)
        {
            if hold.count > 0 {
                hold.exempt = true;
                hold.disturbed = true;
            }
        }
        let lease = self.longest_lease(lock);
        self.linger(lock, lease);
    }

    /// The client shut down: its owners' holds are over, and its owners are replaced.
    pub(crate) fn shut_down(&mut self, client: usize) {
        for actor in (0..ACTORS).filter(|a| CLIENT_OF[*a] == client) {
            for lock in 0..LOCKS {
                if self.holds[actor][lock].count > 0 {
                    let lease = self.longest_lease(lock);
                    self.linger(lock, lease);
                }
                self.holds[actor][lock] = Hold::default();
            }
        }
    }

    /// Holds the watchdog of `client` must have registered: live ones.
    pub(crate) fn registered(&self, client: usize) -> usize {
        (0..ACTORS)
            .filter(|a| CLIENT_OF[*a] == client)
            .flat_map(|actor| self.holds[actor].iter())
            .filter(|hold| hold.is_live())
            .count()
    }

    /// Checks `is_locked`, `hold_count` and `remaining_ttl` where the model is sure of them.
    pub(crate) fn queried(
        &mut self,
        actor: usize,
        lock: usize,
        locked: bool,
        count: u32,
        ttl: Option<Duration>,
    ) -> Result<(), String> {
        self.observe_all()?;
        if self.disturbed() || self.lingering(lock) {
            return Ok(());
        }
        let hold = &self.holds[actor][lock];
        if hold.is_live() && !hold.pending_unlock && !hold.exempt && count != hold.count {
            return Err(format!(
                "a{actor} l{lock}: hold_count {count}, the model counts {}",
                hold.count
            ));
        }
        let anyone = (0..ACTORS).any(|a| self.holds[a][lock].is_live());
        if anyone != locked || anyone != ttl.is_some() {
            return Err(format!(
                "a{actor} l{lock}: is_locked {locked}, remaining_ttl {ttl:?}; the model says held: {anyone}"
            ));
        }
        Ok(())
    }

    /// Checks `status` (what anyone sees of the lock) where the model is sure of it: locked
    /// exactly while someone holds it, the holder's count, and a fencing counter that every
    /// token handed out so far stays within.
    pub(crate) fn status_seen(&mut self, lock: usize, status: &LockStatus) -> Result<(), String> {
        self.observe_all()?;
        if self.disturbed() || self.lingering(lock) {
            return Ok(());
        }
        let live: Vec<&Hold> = (0..ACTORS)
            .map(|actor| &self.holds[actor][lock])
            .filter(|hold| hold.is_live())
            .collect();
        let held = !live.is_empty();
        if status.locked != held || status.remaining_ttl.is_some() != held {
            return Err(format!(
                "l{lock}: status {status:?}; the model counts {} live holders",
                live.len()
            ));
        }
        if let [hold] = live[..] {
            if !hold.pending_unlock && !hold.exempt && status.holder_count != hold.count {
                return Err(format!(
                    "l{lock}: status counts {} for the holder, the model {}",
                    status.holder_count, hold.count
                ));
            }
        }
        let handed_out = if self.shared_counter {
            self.last_token.iter().copied().max().unwrap_or(0)
        } else {
            self.last_token_of(lock)
        };
        if status.fencing_counter.unwrap_or(0) < handed_out {
            return Err(format!(
                "l{lock}: status {status:?}; a token of {handed_out} was handed out"
            ));
        }
        Ok(())
    }

    /// Every owner that believes it holds a lock, with its lost signal.
    pub(crate) fn believers(&self) -> Vec<(usize, usize, LostSignal)> {
        let mut believers = Vec::new();
        for actor in 0..ACTORS {
            for lock in 0..LOCKS {
                let hold = &self.holds[actor][lock];
                if let (true, Some(signal)) = (hold.believes(), &hold.signal) {
                    believers.push((actor, lock, signal.clone()));
                }
            }
        }
        for (actor, lock, hold) in &self.abandoned {
            if let (true, Some(signal)) = (hold.believes(), &hold.signal) {
                believers.push((*actor, *lock, signal.clone()));
            }
        }
        believers
    }

    /// Never two owners believing at once in locks that conflict (readers together are fine).
    pub(crate) fn check_exclusion(&self) -> Result<(), String> {
        // Each belief with its owner: the actor, and which of its owners (an abandoned hold's
        // actor is another owner now).
        let believing: Vec<(usize, u64, usize)> = (0..LOCKS)
            .flat_map(|lock| {
                (0..ACTORS)
                    .filter(move |actor| self.holds[*actor][lock].believes())
                    .map(move |actor| (actor, 0, lock))
                    .chain(
                        self.abandoned_believers(lock)
                            .map(move |(actor, hold)| (actor, hold.owner_epoch, lock)),
                    )
            })
            .collect();
        for (i, (a, epoch_a, lock_a)) in believing.iter().enumerate() {
            for (b, epoch_b, lock_b) in &believing[i + 1..] {
                if conflicts(*lock_a, *lock_b) && (a, epoch_a) != (b, epoch_b) {
                    return Err(format!(
                        "a{a} l{lock_a} and a{b} l{lock_b} both believe they hold conflicting locks"
                    ));
                }
            }
        }
        Ok(())
    }

    /// What every owner still holds, for the release at the end of a sequence.
    pub(crate) fn counts(&self) -> Vec<(usize, usize, u32)> {
        let mut counts = Vec::new();
        for actor in 0..ACTORS {
            for lock in 0..LOCKS {
                let count = self.holds[actor][lock].count;
                if count > 0 {
                    counts.push((actor, lock, count));
                }
            }
        }
        counts
    }
}

/// How long before its end a fixed lease of `lease` is told lost, as the system's clients are
/// configured (a `watchdog` lease, the system's per-node timeout).
fn fixed_lost_margin(watchdog: Duration, lease: Duration) -> Duration {
    WatchdogConfig {
        timeout: watchdog,
        ..WatchdogConfig::default()
    }
    .fixed_lost_margin(lease, crate::system::NODE_TIMEOUT)
}
