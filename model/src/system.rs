//! The whole system as one state machine: clients, masters, the links between them, real time,
//! and the faults. Every action is one atomic step: a client's call, a request run by a
//! master, a reply read, a timeout, a tick of time, a key expiring, or a fault.

use crate::client::{has, mask, Attempt, Client, Hold, Op, Renewal};
use crate::config::{Config, Tick, Variant};
use crate::history::History;
use crate::master::{Grant, Master};
use crate::network::{Link, Reply, Request};

/// The state of the system.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    /// Real time.
    pub now: Tick,
    /// A microsecond clock, kept only where masters restart empty (their counters then start
    /// from it); 0 elsewhere.
    pub micros: u64,
    /// The masters.
    pub masters: Vec<Master>,
    /// The clients.
    pub clients: Vec<Client>,
    /// Links, client-major: `links[client * masters + master]`.
    pub links: Vec<Link>,
    /// Faults used so far.
    pub faults: crate::config::Faults,
    /// The slow links (a bit per link).
    pub slow: u16,
    /// Ghost facts the properties read.
    pub history: History,
}

/// One step.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// A client calls `lock` (a new hold, or a nested one): with the watchdog lease, or fixed.
    Lock {
        /// The client.
        client: usize,
        /// Whether the lease is the renewed one (else the short fixed one).
        renewed: bool,
    },
    /// A client calls `unlock` (or retries one no majority answered).
    Unlock {
        /// The client.
        client: usize,
    },
    /// A master runs the oldest request on a link (and a running client reads the reply).
    Run {
        /// The client.
        client: usize,
        /// The master.
        master: usize,
    },
    /// A client reads the oldest reply waiting on a link (a slow link's, or one that arrived
    /// while the client was paused).
    Read {
        /// The client.
        client: usize,
        /// The master.
        master: usize,
    },
    /// A client stops waiting for its operation's missing answers. For a release: keep the
    /// hold for a retry (`RLock::unlock`), or give it up (a guard's release).
    Timeout {
        /// The client.
        client: usize,
        /// For a release: give the hold up.
        give_up: bool,
    },
    /// The watchdog starts a renewal round.
    Renew {
        /// The client.
        client: usize,
    },
    /// The watchdog stops waiting for a round's missing answers.
    RenewTimeout {
        /// The client.
        client: usize,
    },
    /// Time passes one tick.
    Tick,
    /// A master's key expires (its clock within the drift of real time).
    Expire {
        /// The master.
        master: usize,
    },
    /// A link turns slow for good.
    SlowDown {
        /// The client.
        client: usize,
        /// The master.
        master: usize,
    },
    /// The second request queued on a link overtakes the first (on a Redis Cluster member).
    Overtake {
        /// The client.
        client: usize,
        /// The master.
        master: usize,
    },
    /// A connection drops with everything in flight on it.
    LoseConnection {
        /// The client.
        client: usize,
        /// The master.
        master: usize,
    },
    /// A master crashes and restarts, with its data or empty.
    Restart {
        /// The master.
        master: usize,
        /// Whether its data survives.
        with_data: bool,
    },
    /// A client pauses.
    Pause {
        /// The client.
        client: usize,
    },
    /// A paused client resumes.
    Resume {
        /// The client.
        client: usize,
    },
    /// A client crashes.
    Crash {
        /// The client.
        client: usize,
    },
}

/// The model: a configuration.
#[derive(Clone, Debug)]
pub struct System {
    /// What is explored.
    pub config: Config,
    /// Whether states are explored up to renaming the masters (see [`System::canonical`]).
    pub symmetric: bool,
}

impl System {
    /// A model of `config`.
    ///
    /// # Panics
    ///
    /// If the bounds do not fit the model's encodings or leave no validity (a fixed lease no
    /// longer than the drift; more than 8 masters or 16 links).
    pub fn new(config: Config) -> Self {
        assert!(
            config.short_lease == 0 || config.short_lease > config.drift,
            "the fixed lease must be longer than the drift"
        );
        assert!(
            config.lease > config.drift,
            "the lease must be longer than the drift"
        );
        assert!(config.masters <= 8, "masters are a bit set of 8");
        assert!(
            config.clients() * config.masters <= 16,
            "slow links are a bit set of 16"
        );
        Self {
            config,
            symmetric: true,
        }
    }

    /// The state before anything happens.
    pub fn initial(&self) -> State {
        let config = &self.config;
        State {
            now: 0,
            micros: 0,
            masters: vec![Master::empty(config.clients()); config.masters],
            clients: config
                .locks
                .iter()
                .map(|&locks| Client::new(locks, config.release_retries))
                .collect(),
            links: vec![Link::default(); config.clients() * config.masters],
            faults: Default::default(),
            slow: 0,
            history: History::default(),
        }
    }

    fn link(&self, client: usize, master: usize) -> usize {
        client * self.config.masters + master
    }

    /// Every action enabled in `state`.
    pub fn enabled(&self, state: &State, actions: &mut Vec<Action>) {
        let config = &self.config;
        for (client, c) in state.clients.iter().enumerate() {
            for master in 0..config.masters {
                let link = &state.links[self.link(client, master)];
                if !link.requests.is_empty() {
                    actions.push(Action::Run { client, master });
                }
                if !link.replies.is_empty() && c.runs() {
                    actions.push(Action::Read { client, master });
                }
                if !link.is_idle()
                    && state.faults.connection_losses < config.faults.connection_losses
                {
                    actions.push(Action::LoseConnection { client, master });
                }
                if link.requests.len() >= 2 && state.faults.overtakes < config.faults.overtakes {
                    actions.push(Action::Overtake { client, master });
                }
                let index = self.link(client, master);
                if !link.requests.is_empty()
                    && state.slow & (1 << index) == 0
                    && state.faults.slow_links < config.faults.slow_links
                {
                    actions.push(Action::SlowDown { client, master });
                }
            }
            if !c.alive {
                continue;
            }
            if state.faults.crashes < config.faults.crashes {
                actions.push(Action::Crash { client });
            }
            if c.paused {
                actions.push(Action::Resume { client });
                continue;
            }
            if c.op == Op::Idle {
                self.calls(state, client, actions);
            } else if self.may_time_out(state, client, false) {
                actions.push(Action::Timeout {
                    client,
                    give_up: false,
                });
                if matches!(c.op, Op::Release { .. }) {
                    actions.push(Action::Timeout {
                        client,
                        give_up: true,
                    });
                }
            }
            match &c.renewal {
                None if c.orphan.is_some() && c.renewed_at != Some(state.now) => {
                    actions.push(Action::Renew { client })
                }
                None if c.hold.renewing && !c.hold.lost && self.renewal_due(state, client) => {
                    actions.push(Action::Renew { client })
                }
                Some(_) if self.may_time_out(state, client, true) => {
                    actions.push(Action::RenewTimeout { client })
                }
                _ => {}
            }
            if state.faults.pauses < config.faults.pauses && (c.hold.count > 0 || c.op != Op::Idle)
            {
                actions.push(Action::Pause { client });
            }
        }
        if state.now < config.max_time && self.time_may_pass(state) {
            actions.push(Action::Tick);
        }
        for (master, m) in state.masters.iter().enumerate() {
            if m.lock
                .as_ref()
                .is_some_and(|key| state.now + config.drift >= key.expires_at)
            {
                actions.push(Action::Expire { master });
            }
            if state.faults.restarts_with_data < config.faults.restarts_with_data {
                actions.push(Action::Restart {
                    master,
                    with_data: true,
                });
            }
            if state.faults.restarts_empty < config.faults.restarts_empty {
                actions.push(Action::Restart {
                    master,
                    with_data: false,
                });
            }
        }
    }

    /// The watchdog renews once a third of the lease has passed since the validity was last
    /// proven: here, once at most half the validity is left (at least a tick after the last
    /// round began).
    fn renewal_due(&self, state: &State, client: usize) -> bool {
        let config = &self.config;
        let c = &state.clients[client];
        let validity = config.lease - config.drift;
        c.renewed_at != Some(state.now)
            && c.hold.valid_until.saturating_sub(state.now) <= validity / 2
    }

    /// The calls an idle client may make.
    fn calls(&self, state: &State, client: usize, actions: &mut Vec<Action>) {
        let config = &self.config;
        let c = &state.clients[client];
        let hold = &c.hold;
        if hold.count > 0 && (hold.lost || !hold.pending || c.retries_left > 0) {
            actions.push(Action::Unlock { client });
        }
        let may_lock =
            c.locks_left > 0 && !hold.lost && !hold.pending && hold.count < config.max_depth;
        if may_lock {
            actions.push(Action::Lock {
                client,
                renewed: true,
            });
            if (hold.count > 0 || config.fixed_new_holds) && config.short_lease > 0 {
                actions.push(Action::Lock {
                    client,
                    renewed: false,
                });
            }
        }
    }

    /// Whether the client may stop waiting for its operation (or its renewal round): some
    /// answer is missing, and each missing one is on a slow link or was lost with its
    /// connection. An answer on a link that is not slow comes within the tick, before any
    /// timeout: a tick is longer than the per-node timeout.
    fn may_time_out(&self, state: &State, client: usize, renewal: bool) -> bool {
        let c = &state.clients[client];
        let missing: Vec<bool> = if renewal {
            match &c.renewal {
                Some(round) => round.answers.iter().map(Option::is_none).collect(),
                None => return false,
            }
        } else {
            match &c.op {
                Op::Idle => return false,
                Op::Acquire { answers, .. } => answers.iter().map(Option::is_none).collect(),
                Op::Fence { answers, .. } => answers.iter().map(Option::is_none).collect(),
                Op::Release { answers, .. } => answers.iter().map(Option::is_none).collect(),
            }
        };
        missing.iter().any(|m| *m)
            && missing.iter().enumerate().all(|(master, missing)| {
                let index = self.link(client, master);
                let awaited_here = state.links[index]
                    .requests
                    .iter()
                    .any(|request| request.is_awaited() && request.is_renewal() == renewal);
                !missing || state.slow & (1 << index) != 0 || !awaited_here
            })
    }

    /// Within the promise, a paused client resumes before its validity ends: time does not pass
    /// it while it sleeps.
    fn time_may_pass(&self, state: &State) -> bool {
        let stuck = state
            .links
            .iter()
            .enumerate()
            .any(|(index, link)| !link.requests.is_empty() && state.slow & (1 << index) == 0);
        if stuck {
            return false;
        }
        if !self.config.pauses_within_validity {
            return true;
        }
        state.clients.iter().all(|c| {
            !(c.alive && c.paused && c.hold.count > 0 && c.hold.watched)
                || state.now + 1 < c.hold.valid_until
        })
    }

    /// The representative of `state` among the states equal to it up to renaming the masters
    /// (which are interchangeable): the checker explores one of each class.
    pub fn canonical(&self, mut state: State) -> State {
        let masters = self.config.masters;
        let clients = self.config.clients();
        let mut order: Vec<usize> = (0..masters).collect();
        order.sort_by_cached_key(|&m| {
            let links: Vec<&Link> = (0..clients)
                .map(|c| &state.links[c * masters + m])
                .collect();
            let views: Vec<_> = state.clients.iter().map(|c| c.view_of(m)).collect();
            let slow: Vec<bool> = (0..clients)
                .map(|c| state.slow & (1 << (c * masters + m)) != 0)
                .collect();
            let links: Vec<Link> = links.into_iter().cloned().collect();
            (state.masters[m].clone(), links, views, slow)
        });
        if order.iter().enumerate().all(|(new, &old)| new == old) {
            return state;
        }
        state.masters = order
            .iter()
            .map(|&old| state.masters[old].clone())
            .collect();
        let old_links: Vec<usize> = (0..clients)
            .flat_map(|c| order.iter().map(move |&old| c * masters + old))
            .collect();
        state.links = old_links
            .iter()
            .map(|&old| state.links[old].clone())
            .collect();
        state.slow = old_links
            .iter()
            .enumerate()
            .filter(|(_, &old)| state.slow & (1 << old) != 0)
            .fold(0, |slow, (new, _)| slow | 1 << new);
        for client in &mut state.clients {
            client.permute(&order);
        }
        state
    }

    /// The state after `action`, or `None` when it changes nothing worth exploring.
    pub fn step(&self, state: &State, action: Action) -> Option<State> {
        let mut next = state.clone();
        match action {
            Action::Lock { client, renewed } => self.lock(&mut next, client, renewed),
            Action::Unlock { client } => self.unlock(&mut next, client),
            Action::Run { client, master } => self.run(&mut next, client, master),
            Action::Read { client, master } => self.read(&mut next, client, master),
            Action::Timeout { client, give_up } => self.decide(&mut next, client, true, give_up),
            Action::Renew { client } => self.renew(&mut next, client),
            Action::RenewTimeout { client } => self.decide_renewal(&mut next, client, true),
            Action::Tick => self.tick(&mut next),
            Action::Expire { master } => next.masters[master].lock = None,
            Action::SlowDown { client, master } => {
                next.faults.slow_links += 1;
                next.slow |= 1 << self.link(client, master);
            }
            Action::Overtake { client, master } => {
                next.faults.overtakes += 1;
                let link = self.link(client, master);
                next.links[link].overtake();
                // An undo that overtakes its attempt, or a release its hold's late grant, finds
                // nothing: that grant stays until its lease ends (liveness, not exclusion).
                next.clients[client].tainted |= 1 << master;
                next.clients[client].overtaken |= 1 << master;
            }
            Action::LoseConnection { client, master } => {
                next.faults.connection_losses += 1;
                let link = self.link(client, master);
                next.links[link].lose();
                next.clients[client].tainted |= 1 << master;
            }
            Action::Restart { master, with_data } => {
                if with_data {
                    next.faults.restarts_with_data += 1;
                } else {
                    next.faults.restarts_empty += 1;
                    next.masters[master].wipe();
                }
                for client in 0..self.config.clients() {
                    let link = self.link(client, master);
                    next.links[link].lose();
                    next.clients[client].tainted |= 1 << master;
                }
            }
            Action::Pause { client } => {
                next.faults.pauses += 1;
                next.clients[client].paused = true;
            }
            Action::Resume { client } => {
                let c = &mut next.clients[client];
                c.paused = false;
                c.check_deadline(next.now);
            }
            Action::Crash { client } => {
                next.faults.crashes += 1;
                let c = &mut next.clients[client];
                c.crashed_holding = c.believes();
                c.alive = false;
                c.crashed_at = Some(next.now);
                c.op = Op::Idle;
                c.renewal = None;
                // What it sent is on the wire and still runs; nothing reads the replies.
                for master in 0..self.config.masters {
                    let link = self.link(client, master);
                    next.links[link].settle(false);
                    next.links[link].settle(true);
                }
            }
        }
        Some(next)
    }

    fn send(&self, state: &mut State, client: usize, master: usize, request: Request) {
        let link = self.link(client, master);
        state.links[link].requests.push(request);
    }

    fn send_where(
        &self,
        state: &mut State,
        client: usize,
        masters: u8,
        request: impl Fn() -> Request,
    ) {
        for master in 0..self.config.masters {
            if has(masters, master) {
                self.send(state, client, master, request());
            }
        }
    }

    fn all_masters(&self) -> u8 {
        ((1u16 << self.config.masters) - 1) as u8
    }

    fn lock(&self, state: &mut State, client: usize, renewed: bool) {
        let config = &self.config;
        let floor = state.history.max_token;
        let now = state.now;
        let c = &mut state.clients[client];
        c.locks_left -= 1;
        let expected = c.hold.count;
        let hold = if expected == 0 {
            c.released_hold = None;
            c.failed_hold = None;
            c.tainted = 0;
            c.new_generation()
        } else {
            c.hold.generation
        };
        let lease = if renewed {
            config.lease
        } else {
            config.short_lease
        };
        let hint = if c.last_token > 0 {
            c.last_token + 1
        } else {
            0
        };
        c.op = Op::Acquire {
            attempt: Attempt {
                hold,
                expected,
                lease,
                renewed,
                started: now,
                floor,
            },
            answers: vec![None; config.masters],
        };
        self.send_where(state, client, self.all_masters(), || Request::Acquire {
            awaited: true,
            hold,
            expected,
            lease,
            hint,
        });
    }

    fn unlock(&self, state: &mut State, client: usize) {
        let c = &mut state.clients[client];
        if c.hold.lost {
            c.unwind_one();
            return;
        }
        if c.hold.pending {
            c.retries_left -= 1;
        } else {
            c.hold.maybe_applied = 0;
        }
        let hold = c.hold.generation;
        let expected = c.hold.count;
        if expected == 1 {
            c.hold.releasing_final = true;
            // A final release pauses renewal until it is decided.
            c.hold.renewing = false;
            if self.config.variant == Variant::UnwatchBeforeReleaseConfirmed {
                c.hold.watched = false;
            }
        }
        let asked = if self.config.variant == Variant::ReleaseOnlyBelievedLocked {
            c.hold.granted_by
        } else {
            self.all_masters()
        };
        c.op = Op::Release {
            expected,
            asked,
            answers: vec![None; self.config.masters],
        };
        self.send_where(state, client, asked, || Request::Unlock {
            awaited: true,
            hold,
            expected,
        });
    }

    /// The time a master reads with `TIME` as it runs an acquisition. Real time passes at
    /// least a microsecond between two grants (docs/fencing.md assumes no master grants more
    /// than one new hold per microsecond), so the clock advances with each acquisition run; it
    /// is kept only where a master restarts empty, the one case where a counter starts late.
    fn clock(&self, state: &mut State) -> u64 {
        let per_tick = self.config.micros_per_tick();
        let floor = u64::from(state.now) * per_tick + 1;
        if self.config.faults.restarts_empty == 0 {
            return floor;
        }
        state.micros = (state.micros + 1).max(floor);
        state.micros
    }

    fn run(&self, state: &mut State, client: usize, master: usize) {
        let link = self.link(client, master);
        let request = state.links[link].requests.remove(0);
        let config = &self.config;
        let owner = client as u8;
        let now = state.now;
        let reply = match request {
            Request::Acquire {
                awaited,
                hold,
                expected,
                lease,
                hint,
            } => {
                let clock = self.clock(state);
                let grant = state.masters[master]
                    .acquire(config, owner, hold, expected, lease, hint, now, clock);
                awaited.then_some(Reply::Acquire(grant))
            }
            Request::Fence {
                awaited,
                hold,
                token,
            } => {
                let written = state.masters[master].fence(config, owner, hold, token);
                awaited.then_some(Reply::Fence(written))
            }
            Request::Undo {
                hold,
                expected_after,
            } => {
                state.masters[master].undo(config, owner, hold, expected_after);
                None
            }
            Request::Unlock {
                awaited,
                hold,
                expected,
            } => {
                let left = state.masters[master].unlock(config, owner, hold, expected);
                awaited.then_some(Reply::Unlock(left))
            }
            Request::Renew { awaited, hold } => {
                let (renewed, after_release) =
                    state.masters[master].renew(config, owner, hold, config.lease, now);
                // A renewal that a release overtook runs after it, and renews nothing.
                let overtaken = state.clients[client].overtaken & (1 << master) != 0;
                state.history.renewal_after_release |= after_release && !overtaken;
                awaited.then_some(Reply::Renew(renewed))
            }
            Request::Abandon { hold } => {
                state.masters[master].abandon(config, owner, hold);
                None
            }
        };
        state.clients[client].last_run = now;
        let Some(reply) = reply.filter(|_| state.clients[client].alive) else {
            return;
        };
        state.links[link].replies.push(reply);
        // On a link that is not slow, a running client reads the reply within the tick, and
        // nothing it does depends on when in the tick: it reads it at once. A slow link's
        // replies wait (across ticks, or to be lost with the connection), and so do a paused
        // client's.
        let slow = state.slow & (1 << link) != 0;
        if state.clients[client].runs() && !slow {
            self.read(state, client, master);
        }
    }

    fn read(&self, state: &mut State, client: usize, master: usize) {
        let link = self.link(client, master);
        let reply = state.links[link].replies.remove(0);
        let c = &mut state.clients[client];
        match (reply, &mut c.op) {
            (Reply::Acquire(grant), Op::Acquire { answers, .. }) => {
                answers[master] = Some(grant);
            }
            (Reply::Fence(written), Op::Fence { answers, .. }) => {
                answers[master] = Some(written);
            }
            (Reply::Unlock(left), Op::Release { answers, .. }) => {
                answers[master] = Some(left);
            }
            (Reply::Renew(renewed), _) => {
                if let Some(round) = &mut c.renewal {
                    round.answers[master] = Some(renewed);
                }
                self.decide_renewal(state, client, false);
                return;
            }
            (reply, op) => {
                unreachable!("{reply:?} read during {op:?}: settled replies are dropped")
            }
        }
        self.decide(state, client, false, false);
    }

    /// Decides the client's operation if its answers allow (or `timed_out` forces it).
    fn decide(&self, state: &mut State, client: usize, timed_out: bool, give_up: bool) {
        match state.clients[client].op.clone() {
            Op::Idle => {}
            Op::Acquire { attempt, answers } => {
                self.decide_acquire(state, client, attempt, &answers, timed_out)
            }
            fence @ Op::Fence { .. } => self.decide_fence(state, client, fence, timed_out),
            Op::Release { asked, answers, .. } => {
                self.decide_release(state, client, asked, &answers, timed_out, give_up)
            }
        }
        if state.clients[client].op == Op::Idle {
            self.settle(state, client, false);
        }
    }

    /// The client decided its operation (or its renewal round): later answers are not awaited.
    fn settle(&self, state: &mut State, client: usize, renewal: bool) {
        for master in 0..self.config.masters {
            let link = self.link(client, master);
            state.links[link].settle(renewal);
        }
    }

    fn in_time(&self, attempt: &Attempt, now: Tick) -> bool {
        self.config.variant == Variant::NoValidityCheck
            || now - attempt.started + self.config.drift < attempt.lease
    }

    fn decide_acquire(
        &self,
        state: &mut State,
        client: usize,
        attempt: Attempt,
        answers: &[Option<Grant>],
        timed_out: bool,
    ) {
        let quorum = self.config.quorum();
        let granted = answers
            .iter()
            .filter(|a| a.is_some_and(Grant::granted))
            .count();
        let missing = answers.iter().filter(|a| a.is_none()).count();
        if granted < quorum && granted + missing >= quorum && !timed_out {
            return; // undecided: wait
        }
        // Where the attempt may have landed: granted, or not answered.
        let landed = if self.config.variant == Variant::UndoOnlySeenGrants {
            mask(answers.iter().map(|a| a.is_some_and(Grant::granted)))
        } else {
            mask(answers.iter().map(|a| a.is_none_or(Grant::granted)))
        };
        let now = state.now;
        let lost_meanwhile = attempt.expected > 0 && state.clients[client].hold.lost;
        if granted >= quorum && self.in_time(&attempt, now) && !lost_meanwhile {
            if attempt.expected > 0 {
                self.nested_granted(state, client, &attempt);
                return;
            }
            let candidates: Vec<u64> = answers
                .iter()
                .filter_map(|a| match a {
                    Some(Grant::New(candidate)) => Some(*candidate),
                    _ => None,
                })
                .collect();
            let token = candidates.iter().copied().max().unwrap_or_default();
            let at_token = candidates.iter().filter(|&&c| c == token).count();
            let granted_new = mask(answers.iter().map(|a| matches!(a, Some(Grant::New(_)))));
            let unanswered = mask(answers.iter().map(Option::is_none));
            if at_token >= quorum || self.config.variant == Variant::NoWriteBack {
                self.new_granted(state, client, &attempt, token, granted_new);
                return;
            }
            let hold = attempt.hold;
            self.settle(state, client, false);
            state.clients[client].op = Op::Fence {
                attempt,
                token,
                granted: granted_new,
                unanswered,
                answers: (0..self.config.masters)
                    .map(|m| (!has(granted_new, m)).then_some(false))
                    .collect(),
            };
            self.send_where(state, client, granted_new, || Request::Fence {
                awaited: true,
                hold,
                token,
            });
            return;
        }
        // Failed: undo wherever it may have landed.
        let expected_after = attempt.expected + 1;
        self.send_where(state, client, landed, || Request::Undo {
            hold: attempt.hold,
            expected_after,
        });
        let c = &mut state.clients[client];
        c.op = Op::Idle;
        if attempt.expected == 0 {
            c.failed_hold = Some(attempt.hold);
        }
        if attempt.expected > 0 && !lost_meanwhile {
            let unanswered = missing;
            if granted + unanswered < quorum {
                // A majority no longer knows this owner's hold: it is lost.
                c.lose();
            }
        }
    }

    /// Decides a write-back (`fence`, an `Op::Fence`).
    fn decide_fence(&self, state: &mut State, client: usize, fence: Op, timed_out: bool) {
        let Op::Fence {
            attempt,
            token,
            granted,
            unanswered,
            answers,
        } = fence
        else {
            unreachable!("called with a write-back");
        };
        let quorum = self.config.quorum();
        let written = answers.iter().filter(|a| **a == Some(true)).count();
        let missing = answers.iter().filter(|a| a.is_none()).count();
        if written < quorum && written + missing >= quorum && !timed_out {
            return;
        }
        if written >= quorum && self.in_time(&attempt, state.now) {
            self.new_granted(state, client, &attempt, token, granted);
            return;
        }
        let landed = if self.config.variant == Variant::UndoOnlySeenGrants {
            granted
        } else {
            granted | unanswered
        };
        self.send_where(state, client, landed, || Request::Undo {
            hold: attempt.hold,
            expected_after: 1,
        });
        let c = &mut state.clients[client];
        c.op = Op::Idle;
        c.failed_hold = Some(attempt.hold);
    }

    fn new_granted(
        &self,
        state: &mut State,
        client: usize,
        attempt: &Attempt,
        token: u64,
        granted_by: u8,
    ) {
        let now = state.now;
        let valid_until = self.valid_until(attempt, now);
        let history = &mut state.history;
        history.fencing_broken |= token <= attempt.floor;
        history.max_token = history.max_token.max(token);
        if state
            .clients
            .iter()
            .enumerate()
            .any(|(other, c)| other != client && c.crashed_holding)
        {
            history.taken_after_crash = true;
        }
        if history.holders & !(1 << client) != 0 {
            history.changed_hands = true;
        }
        history.holders |= 1 << client;
        let c = &mut state.clients[client];
        c.last_token = token;
        c.op = Op::Idle;
        c.hold = Hold {
            count: 1,
            generation: attempt.hold,
            token,
            valid_until,
            renewing: attempt.renewed,
            watched: true,
            lost: false,
            releasing_final: false,
            pending: false,
            maybe_applied: 0,
            granted_by,
        };
    }

    fn nested_granted(&self, state: &mut State, client: usize, attempt: &Attempt) {
        let valid_until = self.valid_until(attempt, state.now);
        state.history.nested = true;
        let c = &mut state.clients[client];
        c.op = Op::Idle;
        let hold = &mut c.hold;
        hold.count += 1;
        // The hold's lease only grows; a renewed acquisition turns renewal on.
        hold.valid_until = hold.valid_until.max(valid_until);
        hold.renewing |= attempt.renewed;
        hold.watched = true;
    }

    fn valid_until(&self, attempt: &Attempt, now: Tick) -> Tick {
        let from = if self.config.variant == Variant::NoValidityCheck {
            now // the lease counted from the reply
        } else {
            attempt.started
        };
        from + attempt.lease - self.config.drift
    }

    fn decide_release(
        &self,
        state: &mut State,
        client: usize,
        asked: u8,
        answers: &[Option<Option<u8>>],
        timed_out: bool,
        give_up: bool,
    ) {
        let quorum = self.config.quorum();
        let now = state.now;
        let hold = &state.clients[client].hold;
        let count = hold.count;
        // A final release's "not held" where an earlier try may have landed is that try, while
        // the hold is valid (`count` in redlock-reentrant's unlock.rs).
        let valid = !hold.lost && now < hold.valid_until;
        let landed = if count == 1 && valid && self.config.variant != Variant::NotHeldAlwaysRefuses
        {
            hold.maybe_applied
        } else {
            0
        };
        let released = (0..self.config.masters)
            .filter(|&m| match answers[m] {
                Some(Some(_)) => true,
                Some(None) => has(landed, m),
                None => false,
            })
            .count();
        let refused = (0..self.config.masters)
            .filter(|&m| answers[m] == Some(None) && !has(landed, m))
            .count();
        let missing = (0..self.config.masters)
            .filter(|&m| has(asked, m) && answers[m].is_none())
            .count();
        let lost = released + missing < quorum || refused >= quorum;
        // A final release is done once every reply is in or timed out and no majority can
        // still hold it for this owner: only the silent masters might (`decide` in
        // redlock-reentrant's unlock.rs).
        let final_done = count == 1
            && timed_out
            && missing < quorum
            && self.config.variant != Variant::FinalReleaseNeedsMajorityReleased;
        let decided = released >= quorum || lost || final_done;
        if timed_out && !decided && count == 1 && released + refused >= quorum {
            state.history.final_release_undecided = true;
        }
        let c = &mut state.clients[client];
        if released >= quorum || (!lost && final_done) {
            c.op = Op::Idle;
            c.hold.pending = false;
            if c.hold.lost {
                c.unwind_one();
                return;
            }
            c.hold.count -= 1;
            if c.hold.count == 0 {
                c.released_hold = Some(c.hold.generation);
                if self.config.variant == Variant::RenewalNotCancelled {
                    c.orphan = Some(c.hold.generation);
                }
                c.free();
            }
            return;
        }
        if lost {
            // A majority does not know the hold: it was lost before the release.
            state.history.valid_hold_refused |= valid;
            c.op = Op::Idle;
            c.hold.pending = false;
            c.lose();
            c.unwind_one();
            return;
        }
        if !timed_out {
            return;
        }
        c.op = Op::Idle;
        if give_up {
            let live = !c.hold.lost;
            let hold = c.hold.generation;
            c.hold.pending = false;
            c.lose();
            c.unwind_one();
            if live {
                self.send_where(state, client, self.all_masters(), || Request::Abandon {
                    hold,
                });
            }
            return;
        }
        // Kept for the owner's retry: a nested hold stays renewed; a final release stays
        // watched until its lost deadline. The retry counts where this try may have landed:
        // where it was applied, and where no answer came.
        c.hold.pending = true;
        c.hold.maybe_applied |= (0..self.config.masters)
            .filter(|&m| has(asked, m) && answers[m] != Some(None))
            .fold(0, |mask, m| mask | 1 << m);
    }

    fn renew(&self, state: &mut State, client: usize) {
        let now = state.now;
        let c = &mut state.clients[client];
        let hold = c.orphan.unwrap_or(c.hold.generation);
        c.renewed_at = Some(now);
        c.renewal = Some(Renewal {
            hold,
            started: now,
            answers: vec![None; self.config.masters],
        });
        self.send_where(state, client, self.all_masters(), || Request::Renew {
            awaited: true,
            hold,
        });
    }

    fn decide_renewal(&self, state: &mut State, client: usize, timed_out: bool) {
        let config = &self.config;
        let quorum = config.quorum();
        let c = &mut state.clients[client];
        let Some(round) = c.renewal.clone() else {
            return;
        };
        let renewed = round.answers.iter().filter(|a| **a == Some(true)).count();
        let missing = round.answers.iter().filter(|a| a.is_none()).count();
        let current = c.hold.generation == round.hold && c.hold.renewing && !c.hold.lost;
        if renewed >= quorum {
            c.renewal = None;
            if current {
                c.hold.valid_until = c
                    .hold
                    .valid_until
                    .max(round.started + config.lease - config.drift);
                state.history.renewed = true;
            }
        } else if renewed + missing < quorum {
            c.renewal = None;
            if current {
                c.lose();
            }
        } else if timed_out {
            c.renewal = None;
        }
        if state.clients[client].renewal.is_none() {
            self.settle(state, client, true);
        }
    }

    fn tick(&self, state: &mut State) {
        state.now += 1;
        let now = state.now;
        let drift = self.config.drift;
        for master in &mut state.masters {
            if master
                .lock
                .as_ref()
                .is_some_and(|key| now >= key.expires_at.saturating_add(drift))
            {
                master.lock = None;
            }
        }
        for client in &mut state.clients {
            client.check_deadline(now);
        }
    }
}

impl stateright::Model for System {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![self.initial()]
    }

    fn actions(&self, state: &State, actions: &mut Vec<Action>) {
        self.enabled(state, actions);
    }

    fn next_state(&self, state: &State, action: Action) -> Option<State> {
        let next = self.step(state, action)?;
        Some(if self.symmetric {
            self.canonical(next)
        } else {
            next
        })
    }

    fn properties(&self) -> Vec<stateright::Property<Self>> {
        crate::properties::for_config(&self.config)
    }
}
