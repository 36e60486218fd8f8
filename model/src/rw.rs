//! The read-write lock of `redlock-reentrant` (`RReadWriteLock`) on a quorum, model-checked.
//!
//! A model of its own, smaller than the reentrant lock's ([`crate::system`]): what it adds is
//! which holds conflict, and each party's expiry, not the hold lifecycle both kinds share. Each
//! master runs the read-write scripts as one atomic step (`lua/rw_common.lua`,
//! `lua/acquire_read.lua`, `lua/acquire_write.lua` before `lua/acquire.lua`,
//! `lua/renew_read.lua`, `lua/unlock_read.lua`, `lua/withdraw_writer.lua`): a writer's hash, one
//! entry per reader with its own deadline, and waiting writers' registrations with theirs, all
//! on the server's clock. Clients are readers or writers. Each sends an acquisition to every
//! master, decides once a majority granted (believing it holds until its lease, counted from
//! the request, ends) or once a majority refused or it gave up (a timeout, at any moment), and
//! then undoes its grants; a holder renews its own entries or releases; anyone may crash.
//! Requests are delivered late or never, in any order across links (each link keeps its order,
//! as TCP does), their replies with them; time advances in ticks. A refused writer stays
//! registered while it tries again, and takes its registration back once it got the lock or gave
//! up, as the client does.
//!
//! The promises ([`RwProperty`]): never a writer beside another holder; a master admits no new
//! reader while another writer's registration is live there (writers first, per master); and a
//! reader counts as live on a master only within a lease of its own last grant or renewal there
//! (a crashed reader frees within its own lease whatever the other readers do). The broken
//! variants ([`RwVariant`]) are the bugs each promise is there to catch.

use std::collections::BTreeMap;

use stateright::{Model, Property};

/// A bug the checker must catch, or none.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RwVariant {
    /// The scripts as shipped.
    Correct,
    /// A read acquisition that ignores a holding writer.
    ReadIgnoresWriter,
    /// A read acquisition that ignores a waiting writer.
    ReadIgnoresWaitingWriter,
    /// A write acquisition that ignores live readers.
    WriteIgnoresReaders,
    /// Renewal that moves every reader's deadline, not only the caller's (Redisson before its
    /// PR #7098).
    RenewalRenewsOtherReaders,
    /// A reader is live while the readers hash lives: its expiry is the latest of all readers'
    /// deadlines (Redisson's one TTL on the lock hash).
    ReaderKeptByTheHashTtl,
}

impl RwVariant {
    /// Every broken variant.
    pub const BROKEN: [RwVariant; 5] = [
        RwVariant::ReadIgnoresWriter,
        RwVariant::ReadIgnoresWaitingWriter,
        RwVariant::WriteIgnoresReaders,
        RwVariant::RenewalRenewsOtherReaders,
        RwVariant::ReaderKeptByTheHashTtl,
    ];

    /// The promise this variant breaks.
    pub fn breaks(self) -> RwProperty {
        match self {
            RwVariant::Correct | RwVariant::ReadIgnoresWriter | RwVariant::WriteIgnoresReaders => {
                RwProperty::WriterAlone
            }
            RwVariant::ReadIgnoresWaitingWriter => RwProperty::WritersFirst,
            RwVariant::RenewalRenewsOtherReaders | RwVariant::ReaderKeptByTheHashTtl => {
                RwProperty::ReaderExpiresOnItsOwn
            }
        }
    }
}

/// A promise of the read-write lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RwProperty {
    /// No instant where a client believes it writes and another believes it holds either side.
    WriterAlone,
    /// No master admits a new reader while another owner's writer registration is live there.
    WritersFirst,
    /// A reader is live on a master only within a lease of its own last grant or renewal there.
    ReaderExpiresOnItsOwn,
}

impl RwProperty {
    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            RwProperty::WriterAlone => "never a writer beside another holder",
            RwProperty::WritersFirst => "no new reader while a writer waits (per master)",
            RwProperty::ReaderExpiresOnItsOwn => "a reader expires on its own",
        }
    }
}

/// What each client does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    /// Takes the read side.
    Reader,
    /// Takes the write side (and waits: a refused writer registers).
    Writer,
}

/// The bounds of one check.
#[derive(Clone, Debug)]
pub struct RwConfig {
    /// The scenario's name.
    pub name: &'static str,
    /// How many masters.
    pub masters: usize,
    /// One role per client.
    pub roles: Vec<Role>,
    /// The lease, in ticks; a belief ends a tick before it (the drift allowance).
    pub lease: u8,
    /// A waiting writer's registration, in ticks.
    pub heartbeat: u8,
    /// Time stops here.
    pub max_time: u8,
    /// Acquisition attempts per client.
    pub attempts: u8,
    /// Renewals per hold.
    pub renewals: u8,
    /// Whether clients may crash.
    pub crashes: bool,
    /// The scripts' variant.
    pub variant: RwVariant,
}

/// A master's data for one lock.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RwMaster {
    /// The writer: (client, attempt, expires at).
    pub writer: Option<(u8, u8, u8)>,
    /// Readers: client -> (attempt, deadline, ghost: its own last grant or renewal here).
    pub readers: BTreeMap<u8, (u8, u8, u8)>,
    /// Waiting writers: client -> heartbeat deadline.
    pub waiting: BTreeMap<u8, u8>,
    /// Ghost: a new reader was admitted while another writer's registration was live.
    pub admitted_past_a_waiting_writer: bool,
}

/// A request to one master.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Request {
    /// A new hold of the client's side (`acquire_read.lua` / `acquire_write.lua`).
    Acquire {
        /// The client's attempt, naming the hold.
        attempt: u8,
    },
    /// The renewal of the client's own entry (`renew_read.lua` / `renew.lua`).
    Renew {
        /// The hold it renews.
        attempt: u8,
    },
    /// A release, or an undo of a failed attempt (`unlock*.lua`, `undo*.lua`).
    Release {
        /// The hold (or attempt) it takes back.
        attempt: u8,
    },
    /// A writer's registration taken back (`withdraw_writer.lua`): it gave up, or got the lock
    /// (where its grant did not remove it).
    Withdraw,
}

/// A client's state.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Phase {
    /// Holds nothing, asks nothing.
    Idle,
    /// Waiting for the masters' answers: granted or refused, per master.
    Asking {
        /// When the request went out: the lease counts from here.
        sent_at: u8,
        /// Each master's answer so far.
        answers: Vec<Option<bool>>,
    },
    /// Believes it holds until `valid_until` (exclusive).
    Holding {
        /// The end of the validity a majority confirmed.
        valid_until: u8,
        /// Renewals so far.
        renewals: u8,
    },
    /// Holding, with a renewal out.
    Renewing {
        /// When the renewal went out.
        sent_at: u8,
        /// The validity it has until the renewal is confirmed.
        valid_until: u8,
        /// Renewals so far, this one included.
        renewals: u8,
        /// Each master's answer so far.
        answers: Vec<Option<bool>>,
    },
    /// Crashed: does nothing more, believes nothing.
    Crashed,
}

/// One client.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RwClient {
    /// What it is doing.
    pub phase: Phase,
    /// The current (or last) attempt's number.
    pub attempt: u8,
}

/// One state of the whole system.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RwState {
    /// The time, in ticks (one clock: the scripts read the server's, clients add durations).
    pub now: u8,
    /// The masters' data.
    pub masters: Vec<RwMaster>,
    /// The clients.
    pub clients: Vec<RwClient>,
    /// Requests in flight, by link, each link in the order sent: (client, master, request). A
    /// request's reply reaches its client as it is applied: a late reply is a late request,
    /// and a client that stops waiting gives up (a timeout) whatever is in flight.
    pub requests: Vec<(u8, u8, Request)>,
}

/// A step.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum RwAction {
    /// Time passes.
    Tick,
    /// A client asks every master for its side.
    Ask(u8),
    /// The request at this index arrives and is applied (its reply comes back with it).
    Deliver(usize),
    /// A client stops waiting and takes its attempt back.
    GiveUp(u8),
    /// A holder renews its own entries.
    Renew(u8),
    /// A holder releases.
    Release(u8),
    /// A client crashes.
    Crash(u8),
}

/// The model.
#[derive(Clone, Debug)]
pub struct RwSystem {
    /// Its bounds.
    pub config: RwConfig,
}

impl RwSystem {
    fn quorum(&self) -> usize {
        self.config.masters / 2 + 1
    }

    fn role(&self, client: u8) -> Role {
        self.config.roles[usize::from(client)]
    }

    /// Whether a reader entry is live at `now`, as the variant's scripts judge it.
    fn reader_live(&self, master: &RwMaster, deadline: u8, now: u8) -> bool {
        match self.config.variant {
            RwVariant::ReaderKeptByTheHashTtl => {
                master.readers.values().any(|(_, until, _)| *until > now)
            }
            _ => deadline > now,
        }
    }

    /// `lua/acquire_read.lua` or `lua/acquire_write.lua` + `lua/acquire.lua` on one master,
    /// for a new hold (the model's clients never nest).
    fn acquire(&self, master: &mut RwMaster, client: u8, attempt: u8, now: u8) -> bool {
        let variant = self.config.variant;
        let lease = self.config.lease;
        let writer_live = master
            .writer
            .filter(|(_, _, expires)| *expires > now)
            .map(|(owner, _, _)| owner);
        let waiting_other = master
            .waiting
            .iter()
            .any(|(owner, until)| *owner != client && *until > now);
        let live_readers: Vec<u8> = master
            .readers
            .iter()
            .filter(|(_, (_, deadline, _))| self.reader_live(master, *deadline, now))
            .map(|(owner, _)| *owner)
            .collect();
        match self.role(client) {
            Role::Reader => {
                if writer_live.is_some_and(|owner| owner != client)
                    && variant != RwVariant::ReadIgnoresWriter
                {
                    return false;
                }
                if waiting_other && variant != RwVariant::ReadIgnoresWaitingWriter {
                    return false;
                }
                // This owner's other read hold here: an earlier one (given up) is taken over; a
                // later one means this request is a late one of an earlier attempt.
                if let Some(&(held, deadline, _)) = master.readers.get(&client) {
                    if held >= attempt && self.reader_live(master, deadline, now) {
                        return false;
                    }
                }
                master.readers.insert(client, (attempt, now + lease, now));
                true
            }
            Role::Writer => {
                let own_later = master.writer.is_some_and(|(owner, held, expires)| {
                    owner == client && held >= attempt && expires > now
                });
                let blocked = own_later
                    || writer_live.is_some_and(|owner| owner != client)
                    || (!live_readers.is_empty() && variant != RwVariant::WriteIgnoresReaders);
                if blocked {
                    // A writer that waits registers (the model's writers always wait), never
                    // behind a later hold of its own.
                    if !own_later {
                        master.waiting.insert(client, now + self.config.heartbeat);
                    }
                    return false;
                }
                master.writer = Some((client, attempt, now + lease));
                master.waiting.remove(&client);
                true
            }
        }
    }

    /// `lua/renew_read.lua` (readers) or `lua/renew.lua` (the writer's hash).
    fn renew(&self, master: &mut RwMaster, client: u8, attempt: u8, now: u8) -> bool {
        let lease = self.config.lease;
        match self.role(client) {
            Role::Reader => {
                let Some(&(held, deadline, _)) = master.readers.get(&client) else {
                    return false;
                };
                if held != attempt || !self.reader_live(master, deadline, now) {
                    return false;
                }
                let until = deadline.max(now + lease);
                master.readers.insert(client, (held, until, now));
                if self.config.variant == RwVariant::RenewalRenewsOtherReaders {
                    for (_, entry) in master.readers.iter_mut() {
                        entry.1 = entry.1.max(until);
                    }
                }
                true
            }
            Role::Writer => match master.writer {
                Some((owner, held, expires))
                    if owner == client && held == attempt && expires > now =>
                {
                    master.writer = Some((owner, held, expires.max(now + lease)));
                    true
                }
                _ => false,
            },
        }
    }

    /// `lua/unlock_read.lua` / `lua/unlock.lua` / the undo scripts: this attempt's grant here
    /// goes.
    fn release(master: &mut RwMaster, client: u8, attempt: u8) {
        if master
            .readers
            .get(&client)
            .is_some_and(|entry| entry.0 == attempt)
        {
            master.readers.remove(&client);
        }
        if master
            .writer
            .is_some_and(|(owner, held, _)| owner == client && held == attempt)
        {
            master.writer = None;
        }
    }

    fn initial(&self) -> RwState {
        RwState {
            now: 0,
            masters: vec![
                RwMaster {
                    writer: None,
                    readers: BTreeMap::new(),
                    waiting: BTreeMap::new(),
                    admitted_past_a_waiting_writer: false,
                };
                self.config.masters
            ],
            clients: vec![
                RwClient {
                    phase: Phase::Idle,
                    attempt: 0,
                };
                self.config.roles.len()
            ],
            requests: Vec::new(),
        }
    }

    fn send_all(&self, state: &mut RwState, client: u8, request: Request) {
        for master in 0..self.config.masters {
            state.requests.push((client, master as u8, request));
        }
        // One state per set of links' queues, whatever order the clients sent in: a stable
        // sort by link keeps each link's order.
        state
            .requests
            .sort_by_key(|(client, master, _)| (*client, *master));
    }

    /// A master's answer reaches its client.
    fn receive(
        &self,
        state: &mut RwState,
        client: u8,
        master: u8,
        attempt: u8,
        renewal: bool,
        granted: bool,
    ) {
        let lease = self.config.lease;
        let quorum = self.quorum();
        let now = state.now;
        let entry = &mut state.clients[usize::from(client)];
        if entry.attempt != attempt {
            return;
        }
        let mut release = false;
        // A writer's registration goes once it stops waiting: granted (where the grant did
        // not remove it), or refused with no attempt left.
        let mut withdraw = false;
        let attempts_left = entry.attempt < self.config.attempts;
        match (&mut entry.phase, renewal) {
            (Phase::Asking { sent_at, answers }, false) => {
                answers[usize::from(master)] = Some(granted);
                let yes = answers.iter().filter(|a| **a == Some(true)).count();
                let no = answers.iter().filter(|a| **a == Some(false)).count();
                if yes >= quorum {
                    let valid_until = *sent_at + lease - 1;
                    entry.phase = Phase::Holding {
                        valid_until,
                        renewals: 0,
                    };
                    withdraw = true;
                    if now >= valid_until {
                        entry.phase = Phase::Idle;
                        release = true;
                    }
                } else if no > self.config.masters - quorum {
                    entry.phase = Phase::Idle;
                    release = true;
                    withdraw = !attempts_left;
                }
            }
            (
                Phase::Renewing {
                    sent_at,
                    valid_until,
                    renewals,
                    answers,
                },
                true,
            ) => {
                answers[usize::from(master)] = Some(granted);
                let yes = answers.iter().filter(|a| **a == Some(true)).count();
                let no = answers.iter().filter(|a| **a == Some(false)).count();
                if yes >= quorum {
                    entry.phase = Phase::Holding {
                        valid_until: (*sent_at + lease - 1).max(*valid_until),
                        renewals: *renewals,
                    };
                } else if no > self.config.masters - quorum {
                    // Lost: the holder is told and lets go.
                    entry.phase = Phase::Idle;
                    release = true;
                }
            }
            _ => {}
        }
        if release {
            self.send_all(state, client, Request::Release { attempt });
        }
        if withdraw && self.role(client) == Role::Writer {
            self.send_all(state, client, Request::Withdraw);
        }
    }

    /// Whether a property holds in `state`.
    pub fn holds(&self, property: RwProperty, state: &RwState) -> bool {
        match property {
            RwProperty::WriterAlone => {
                let believers: Vec<u8> = (0..state.clients.len() as u8)
                    .filter(|client| believes(&state.clients[usize::from(*client)], state.now))
                    .collect();
                !believers
                    .iter()
                    .any(|a| self.role(*a) == Role::Writer && believers.iter().any(|b| b != a))
            }
            RwProperty::WritersFirst => state
                .masters
                .iter()
                .all(|master| !master.admitted_past_a_waiting_writer),
            RwProperty::ReaderExpiresOnItsOwn => state.masters.iter().all(|master| {
                master.readers.values().all(|(_, deadline, own)| {
                    !self.reader_live(master, *deadline, state.now)
                        || state.now < own + self.config.lease
                })
            }),
        }
    }
}

/// Whether a client believes it holds at `now`.
fn believes(client: &RwClient, now: u8) -> bool {
    match client.phase {
        Phase::Holding { valid_until, .. } | Phase::Renewing { valid_until, .. } => {
            now < valid_until
        }
        _ => false,
    }
}

impl Model for RwSystem {
    type State = RwState;
    type Action = RwAction;

    fn init_states(&self) -> Vec<RwState> {
        vec![self.initial()]
    }

    fn actions(&self, state: &RwState, actions: &mut Vec<RwAction>) {
        if state.now < self.config.max_time {
            actions.push(RwAction::Tick);
        }
        // Each link keeps its order (TCP): only the oldest request on a link can arrive.
        for (at, (client, master, _)) in state.requests.iter().enumerate() {
            let first = !state.requests[..at]
                .iter()
                .any(|(c, m, _)| c == client && m == master);
            if first {
                actions.push(RwAction::Deliver(at));
            }
        }
        for (index, client) in state.clients.iter().enumerate() {
            let id = index as u8;
            match &client.phase {
                Phase::Idle if client.attempt < self.config.attempts => {
                    actions.push(RwAction::Ask(id));
                }
                Phase::Asking { .. } => actions.push(RwAction::GiveUp(id)),
                Phase::Holding { renewals, .. } => {
                    if *renewals < self.config.renewals {
                        actions.push(RwAction::Renew(id));
                    }
                    actions.push(RwAction::Release(id));
                }
                _ => {}
            }
            if self.config.crashes && client.phase != Phase::Crashed {
                actions.push(RwAction::Crash(id));
            }
        }
    }

    fn next_state(&self, state: &RwState, action: RwAction) -> Option<RwState> {
        let mut next = state.clone();
        match action {
            RwAction::Tick => next.now += 1,
            RwAction::Ask(client) => {
                let entry = &mut next.clients[usize::from(client)];
                entry.attempt += 1;
                let attempt = entry.attempt;
                entry.phase = Phase::Asking {
                    sent_at: state.now,
                    answers: vec![None; self.config.masters],
                };
                self.send_all(&mut next, client, Request::Acquire { attempt });
            }
            RwAction::Deliver(at) => {
                let (client, master, request) = next.requests.remove(at);
                let now = next.now;
                let data = &mut next.masters[usize::from(master)];
                let reply = match request {
                    Request::Acquire { attempt } => {
                        // The promise, stated on the master's data whatever the script checks.
                        let writer_waits = data
                            .waiting
                            .iter()
                            .any(|(owner, until)| *owner != client && *until > now);
                        let granted = self.acquire(data, client, attempt, now);
                        if granted && writer_waits && self.role(client) == Role::Reader {
                            data.admitted_past_a_waiting_writer = true;
                        }
                        Some((client, master, attempt, false, granted))
                    }
                    Request::Renew { attempt } => {
                        let renewed = self.renew(data, client, attempt, now);
                        Some((client, master, attempt, true, renewed))
                    }
                    Request::Release { attempt } => {
                        Self::release(data, client, attempt);
                        None
                    }
                    Request::Withdraw => {
                        data.waiting.remove(&client);
                        None
                    }
                };
                if let Some((client, master, attempt, renewal, granted)) = reply {
                    self.receive(&mut next, client, master, attempt, renewal, granted);
                }
            }
            RwAction::GiveUp(client) => {
                let attempt = next.clients[usize::from(client)].attempt;
                next.clients[usize::from(client)].phase = Phase::Idle;
                self.send_all(&mut next, client, Request::Release { attempt });
                if self.role(client) == Role::Writer {
                    self.send_all(&mut next, client, Request::Withdraw);
                }
            }
            RwAction::Renew(client) => {
                let entry = &mut next.clients[usize::from(client)];
                let Phase::Holding {
                    valid_until,
                    renewals,
                } = entry.phase
                else {
                    return None;
                };
                let attempt = entry.attempt;
                entry.phase = Phase::Renewing {
                    sent_at: state.now,
                    valid_until,
                    renewals: renewals + 1,
                    answers: vec![None; self.config.masters],
                };
                self.send_all(&mut next, client, Request::Renew { attempt });
            }
            RwAction::Release(client) => {
                let attempt = next.clients[usize::from(client)].attempt;
                next.clients[usize::from(client)].phase = Phase::Idle;
                self.send_all(&mut next, client, Request::Release { attempt });
            }
            RwAction::Crash(client) => {
                next.clients[usize::from(client)].phase = Phase::Crashed;
            }
        }
        Some(next)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let mut properties = vec![
            Property::always(RwProperty::WriterAlone.name(), |model: &RwSystem, state| {
                model.holds(RwProperty::WriterAlone, state)
            }),
            Property::always(
                RwProperty::WritersFirst.name(),
                |model: &RwSystem, state| model.holds(RwProperty::WritersFirst, state),
            ),
            Property::always(
                RwProperty::ReaderExpiresOnItsOwn.name(),
                |model: &RwSystem, state| model.holds(RwProperty::ReaderExpiresOnItsOwn, state),
            ),
        ];
        // The situations the bounds must reach, or the promises above would hold vacuously.
        let readers = self
            .config
            .roles
            .iter()
            .filter(|role| **role == Role::Reader)
            .count();
        let writers = self.config.roles.len() - readers;
        if readers >= 2 {
            properties.push(Property::sometimes(
                "two readers hold together",
                |model: &RwSystem, state: &RwState| {
                    (0..state.clients.len() as u8)
                        .filter(|c| {
                            model.role(*c) == Role::Reader
                                && believes(&state.clients[usize::from(*c)], state.now)
                        })
                        .count()
                        >= 2
                },
            ));
        }
        if writers > 0 {
            properties.push(Property::sometimes(
                "a writer holds",
                |model: &RwSystem, state: &RwState| {
                    (0..state.clients.len() as u8).any(|c| {
                        model.role(c) == Role::Writer
                            && believes(&state.clients[usize::from(c)], state.now)
                    })
                },
            ));
        }
        properties
    }

    fn within_boundary(&self, _: &RwState) -> bool {
        true
    }
}

/// What one run of the checker found.
pub type RwReport = crate::bounded::BoundedReport;

/// Explores every execution of `config` breadth first (a violation's path is a shortest one),
/// stopping early only at the first violation of `stop_at` if given.
pub fn check_rw(config: &RwConfig, stop_at: Option<RwProperty>) -> RwReport {
    let system = RwSystem {
        config: config.clone(),
    };
    crate::bounded::check_bounded(config.name, system, stop_at.map(RwProperty::name))
}

/// The bounded scenarios the real scripts must pass, each with the clients one promise needs:
/// a reader and a writer on three masters, either of which may crash with its releases and
/// withdrawals in flight (exclusion across majorities); two readers and a writer that waits, is
/// refused and tries again (writers first, a per-master promise); two readers that renew, one of
/// which stops or crashes (each reader's own expiry, per master).
pub fn rw_scenarios(variant: RwVariant) -> Vec<RwConfig> {
    vec![
        RwConfig {
            name: "rw: a reader and a writer on three masters, crashes",
            masters: 3,
            roles: vec![Role::Reader, Role::Writer],
            lease: 3,
            heartbeat: 2,
            max_time: 2,
            attempts: 1,
            renewals: 0,
            crashes: true,
            variant,
        },
        RwConfig {
            name: "rw: two readers and a waiting writer",
            masters: 1,
            roles: vec![Role::Reader, Role::Writer, Role::Reader],
            lease: 3,
            heartbeat: 2,
            max_time: 3,
            attempts: 2,
            renewals: 0,
            crashes: false,
            variant,
        },
        RwConfig {
            name: "rw: two renewed readers, one stops or crashes",
            masters: 1,
            roles: vec![Role::Reader, Role::Reader],
            lease: 2,
            heartbeat: 2,
            max_time: 4,
            attempts: 1,
            renewals: 2,
            crashes: true,
            variant,
        },
    ]
}

/// Deeper bounds (`redlock-model -- --deep`): renewals beside the writer, and the readers'
/// expiry on three masters.
pub fn rw_deep_scenarios() -> Vec<RwConfig> {
    let mut scenarios = rw_scenarios(RwVariant::Correct);
    scenarios[0].name = "rw: a reader and a writer on three masters, renewals and crashes";
    scenarios[0].renewals = 1;
    scenarios[0].max_time = 3;
    scenarios[2].name = "rw: two renewed readers on three masters, one stops or crashes";
    scenarios[2].masters = 3;
    scenarios[2].max_time = 3;
    scenarios[2].renewals = 1;
    scenarios
}

/// The scenario that catches `variant` breaking [`RwVariant::breaks`].
pub fn rw_catching(variant: RwVariant) -> RwConfig {
    let scenarios = rw_scenarios(variant);
    let index = match variant.breaks() {
        RwProperty::WriterAlone => 0,
        RwProperty::WritersFirst => 1,
        RwProperty::ReaderExpiresOnItsOwn => 2,
    };
    scenarios[index].clone()
}
