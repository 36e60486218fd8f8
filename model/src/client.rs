//! A client (one owner, as `RLock` run by one task): its hold as the library counts it, the one
//! operation it has in flight, and its watchdog's renewal round.

use crate::config::Tick;
use crate::master::Grant;

/// The hold as the client counts it (`redlock-reentrant`'s `Hold`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Hold {
    /// Acquisitions not yet released (0: free).
    pub count: u8,
    /// This hold's generation: the id of the attempt that made it, which its field on the
    /// masters carries and every request for it names.
    pub generation: u8,
    /// The fencing token.
    pub token: u64,
    /// The end of the validity a majority confirmed: the lost signal's deadline.
    pub valid_until: Tick,
    /// Whether the watchdog renews it.
    pub renewing: bool,
    /// Whether it is watched at all: renewed, or its lost deadline armed.
    pub watched: bool,
    /// Whether its lost signal fired (the count is still to unwind, each `unlock` answering
    /// `LockLost`).
    pub lost: bool,
    /// Whether the owner called its final `unlock` (the belief ended there).
    pub releasing_final: bool,
    /// A release no majority answered, kept for the owner's retry.
    pub pending: bool,
    /// The masters where that release's tries so far may have landed: each applied it, or
    /// gave no answer.
    pub maybe_applied: u8,
    /// The masters that granted the new hold by the time a majority decided it.
    pub granted_by: u8,
}

/// The operation a client has in flight: its caller awaits it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// Nothing.
    Idle,
    /// An acquisition: each master's answer so far.
    Acquire {
        /// The attempt.
        attempt: Attempt,
        /// The answers.
        answers: Vec<Option<Grant>>,
    },
    /// A new hold's token being written back.
    Fence {
        /// The attempt the token is for.
        attempt: Attempt,
        /// The chosen token.
        token: u64,
        /// Masters that granted (asked to write back, and to undo on failure).
        granted: u8,
        /// Masters that may have granted without saying so (undone on failure too).
        unanswered: u8,
        /// The answers (`None` also for masters not asked).
        answers: Vec<Option<bool>>,
    },
    /// A release.
    Release {
        /// The count before the release.
        expected: u8,
        /// Which masters were asked.
        asked: u8,
        /// The answers.
        answers: Vec<Option<Option<u8>>>,
    },
}

/// What an acquisition carries from its first fan-out to its decision (and through the
/// write-back of a new hold's token).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Attempt {
    /// The hold this attempt is for.
    pub hold: u8,
    /// The count expected (0: a new hold).
    pub expected: u8,
    /// The lease asked for.
    pub lease: Tick,
    /// Whether the lease is renewed by the watchdog (else fixed).
    pub renewed: bool,
    /// When the attempt began.
    pub started: Tick,
    /// Ghost: the largest token handed out before the attempt began.
    pub floor: u64,
}

/// One round of the watchdog's renewal.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Renewal {
    /// The hold renewed.
    pub hold: u8,
    /// When the round began.
    pub started: Tick,
    /// The answers.
    pub answers: Vec<Option<bool>>,
}

/// A client.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Client {
    /// Not crashed.
    pub alive: bool,
    /// Paused: takes no step, and its beliefs are frozen.
    pub paused: bool,
    /// The hold.
    pub hold: Hold,
    /// The operation in flight.
    pub op: Op,
    /// The renewal round in flight.
    pub renewal: Option<Renewal>,
    /// `lock` calls left in this execution.
    pub locks_left: u8,
    /// Retries of a release no majority answered left in this execution.
    pub retries_left: u8,
    /// A released hold the watchdog still renews (only in [`Variant::RenewalNotCancelled`]).
    ///
    /// [`Variant::RenewalNotCancelled`]: crate::Variant::RenewalNotCancelled
    pub orphan: Option<u8>,
    /// When the watchdog last started a round (one a tick at most).
    pub renewed_at: Option<Tick>,
    /// The largest token this client handed out (its hint is one more).
    pub last_token: u64,
    /// The next hold's generation.
    pub next_hold: u8,
    /// Ghost: when it crashed.
    pub crashed_at: Option<Tick>,
    /// Ghost: when a master last ran a request of this client's.
    pub last_run: Tick,
    /// Ghost: a new hold's attempt that failed and was undone (cleared by the next attempt).
    pub failed_hold: Option<u8>,
    /// Ghost: whether it crashed believing it held the lock.
    pub crashed_holding: bool,
    /// Ghost: the last hold whose final release a majority confirmed (cleared by a new attempt).
    pub released_hold: Option<u8>,
    /// Ghost: masters whose connection or data failed, or where a request overtook another,
    /// since the current hold's attempt began.
    pub tainted: u8,
    /// Ghost: masters where one of its requests ever overtook another (a Redis Cluster member
    /// past redis-rs's queue): a renewal may run there after the release it was queued before,
    /// and finds nothing to renew.
    pub overtaken: u8,
}

impl Client {
    /// A client before its first call.
    pub fn new(locks: u8, retries: u8) -> Self {
        Self {
            alive: true,
            paused: false,
            hold: Hold::default(),
            op: Op::Idle,
            renewal: None,
            locks_left: locks,
            retries_left: retries,
            orphan: None,
            renewed_at: None,
            last_token: 0,
            next_hold: 1,
            crashed_at: None,
            last_run: 0,
            failed_hold: None,
            crashed_holding: false,
            released_hold: None,
            tainted: 0,
            overtaken: 0,
        }
    }

    /// Whether it believes it holds the lock: from `lock` returning until its final `unlock` or
    /// its lost signal (docs/safety.md).
    pub fn believes(&self) -> bool {
        self.alive && self.hold.count > 0 && !self.hold.lost && !self.hold.releasing_final
    }

    /// Whether it can take a step of its own.
    pub fn runs(&self) -> bool {
        self.alive && !self.paused
    }

    /// A new hold's generation.
    pub fn new_generation(&mut self) -> u8 {
        let generation = self.next_hold;
        self.next_hold += 1;
        generation
    }

    /// The lost signal fires: renewal stops, the count stays to unwind.
    pub fn lose(&mut self) {
        if self.hold.count > 0 && !self.hold.lost {
            self.hold.lost = true;
            self.hold.renewing = false;
            self.hold.watched = false;
        }
    }

    /// One acquisition unwound without asking anyone (a lost hold's `unlock`, or the caller's
    /// own acquisition of a hold given up).
    pub fn unwind_one(&mut self) {
        self.hold.count = self.hold.count.saturating_sub(1);
        if self.hold.count == 0 {
            self.free();
        }
    }

    /// The hold is over.
    pub fn free(&mut self) {
        self.hold = Hold {
            generation: self.hold.generation,
            ..Hold::default()
        };
    }

    /// The watchdog's deadline: past it, an unproven hold is lost; a final release still
    /// pending (and not being retried) is then over: its owner let go, and the lock has expired
    /// where it was held.
    pub fn check_deadline(&mut self, now: Tick) {
        if self.runs() && self.hold.count > 0 && self.hold.watched && now >= self.hold.valid_until {
            if self.hold.releasing_final && self.hold.pending {
                // Unless its retry is in flight, which decides it.
                if self.op == Op::Idle {
                    self.free();
                }
            } else {
                self.lose();
            }
        }
    }
}

/// What a client knows and awaits of one master: the masks it is in, and its answers to the
/// operation and to the renewal round in flight.
pub type MasterView = (
    u8,
    Option<Grant>,
    Option<bool>,
    Option<Option<u8>>,
    Option<bool>,
);

impl Client {
    /// What this client knows and awaits of master `master`, comparable across masters.
    pub fn view_of(&self, master: usize) -> MasterView {
        let bit = |mask: u8| u8::from(has(mask, master));
        let mut masks = bit(self.hold.granted_by)
            | bit(self.tainted) << 1
            | bit(self.overtaken) << 5
            | bit(self.hold.maybe_applied) << 6;
        let (mut grant, mut written, mut left) = (None, None, None);
        match &self.op {
            Op::Idle => {}
            Op::Acquire { answers, .. } => grant = answers[master],
            Op::Fence {
                granted,
                unanswered,
                answers,
                ..
            } => {
                masks |= bit(*granted) << 2 | bit(*unanswered) << 3;
                written = answers[master];
            }
            Op::Release { asked, answers, .. } => {
                masks |= bit(*asked) << 4;
                left = answers[master];
            }
        }
        let renewed = self
            .renewal
            .as_ref()
            .and_then(|round| round.answers[master]);
        (masks, grant, written, left, renewed)
    }

    /// Renumbers the masters: new master `i` is old master `order[i]`.
    pub fn permute(&mut self, order: &[usize]) {
        let remask = |mask: &mut u8| {
            *mask = self::mask(order.iter().map(|&old| has(*mask, old)));
        };
        remask(&mut self.hold.granted_by);
        remask(&mut self.hold.maybe_applied);
        remask(&mut self.tainted);
        remask(&mut self.overtaken);
        fn reorder<T: Clone>(values: &mut Vec<T>, order: &[usize]) {
            *values = order.iter().map(|&old| values[old].clone()).collect();
        }
        match &mut self.op {
            Op::Idle => {}
            Op::Acquire { answers, .. } => reorder(answers, order),
            Op::Fence {
                granted,
                unanswered,
                answers,
                ..
            } => {
                remask(granted);
                remask(unanswered);
                reorder(answers, order);
            }
            Op::Release { asked, answers, .. } => {
                remask(asked);
                reorder(answers, order);
            }
        }
        if let Some(round) = &mut self.renewal {
            reorder(&mut round.answers, order);
        }
    }
}

/// Masters as a bit set.
pub fn mask(bits: impl Iterator<Item = bool>) -> u8 {
    bits.enumerate()
        .filter(|(_, bit)| *bit)
        .fold(0, |mask, (master, _)| mask | 1 << master)
}

/// Whether `master` is in `mask`.
pub fn has(mask: u8, master: usize) -> bool {
    mask & (1 << master) != 0
}
