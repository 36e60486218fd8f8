//! The semaphore and the count-down latch on N independent masters, model-checked: the designs
//! that would make them sound on a quorum, and the plain majority that does not.
//!
//! The library refuses both on several masters (`InvalidArgument::UnsoundOnQuorum`), because a
//! majority of answers keeps only *pairwise* promises (any two majorities share a master): "at
//! most k permits out" and "open after T count-downs" are about *all* holders and count-downs
//! at once, which no single master sees. This module checks the two ways out, before they are
//! built:
//!
//! - **A k-permit semaphore with an acknowledgement quorum** of `q = floor(k·N/(k+1)) + 1`
//!   masters: each master admits at most k holders, so k+1 holders would need `(k+1)·q`
//!   admissions from `k·N` places. Clients ask every master, in any order, with any delays; a
//!   client believes it holds once q masters granted, gives up (and takes its grants back) once
//!   too many refused. Promise ([`FamilyProperty::AtMostKPermits`]): never more than k clients
//!   believe they hold. The plain majority ([`FamilyVariant::SemaphoreOnAMajority`]) is caught:
//!   with 2 permits on 3 masters, three holders can each win two masters (madelson's A/B/C).
//! - **The latch as a grow-only set**: a count-down adds its id to a set on the masters (a
//!   retry adds it again: nothing changes) and is done once a majority has it; a waiter reads a
//!   majority and opens when the union of what it read has T ids. Promises:
//!   [`FamilyProperty::LatchNeverOpensEarly`] (a waiter opens only once T distinct count-downs
//!   were called: the union holds only ids that were counted down, so this one is kept by
//!   construction, and checked against the counter form, [`FamilyVariant::LatchAsACounter`]:
//!   each master keeps `T - count-downs` with `DECR`, a retried count-down decrements again
//!   where its first try landed, a waiter opens when a master of its majority read says 0);
//!   and [`FamilyProperty::LatchOpensOnceDone`] (a waiter that reads a majority after every
//!   count-down was done opens: any write majority and any read majority share a master),
//!   against a count-down done at its first acknowledgement
//!   ([`FamilyVariant::LatchDoneOnOneAck`]).
//!
//! What is checked is the counting (the pigeonhole and the intersections): holds never end,
//! and leases, clock drift and masters restarted empty are not modelled. A master that restarts
//! without its data forgets permits and count-downs and breaks both, as it breaks Redlock's
//! mutual exclusion (the delayed-restart rule of docs/deployments.md applies). And the quorum is
//! costly: 2 permits on 3 masters need all 3 (no master may fail); surviving one failure takes
//! at least k + 2 masters.

use std::collections::BTreeSet;

use stateright::{Model, Property};

/// A design the checker must find sound, or a broken one it must catch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FamilyVariant {
    /// The designs as described: the acknowledgement quorum, the grow-only set.
    Correct,
    /// The semaphore decided by a plain majority.
    SemaphoreOnAMajority,
    /// The latch as a counter per master (`DECR`), read from a majority.
    LatchAsACounter,
    /// The grow-only-set latch whose count-down is done at its first acknowledgement.
    LatchDoneOnOneAck,
}

impl FamilyVariant {
    /// Every broken variant.
    pub const BROKEN: [FamilyVariant; 3] = [
        FamilyVariant::SemaphoreOnAMajority,
        FamilyVariant::LatchAsACounter,
        FamilyVariant::LatchDoneOnOneAck,
    ];

    /// The promise this variant breaks.
    pub fn breaks(self) -> FamilyProperty {
        match self {
            FamilyVariant::Correct | FamilyVariant::SemaphoreOnAMajority => {
                FamilyProperty::AtMostKPermits
            }
            FamilyVariant::LatchAsACounter => FamilyProperty::LatchNeverOpensEarly,
            FamilyVariant::LatchDoneOnOneAck => FamilyProperty::LatchOpensOnceDone,
        }
    }
}

/// A promise.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FamilyProperty {
    /// Never more than k clients believe they hold a permit.
    AtMostKPermits,
    /// A waiter opens the latch only once T distinct count-downs were called.
    LatchNeverOpensEarly,
    /// A waiter that read a majority after every count-down was done opened.
    LatchOpensOnceDone,
}

impl FamilyProperty {
    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            FamilyProperty::AtMostKPermits => "never more than k permits out",
            FamilyProperty::LatchNeverOpensEarly => "the latch never opens early",
            FamilyProperty::LatchOpensOnceDone => "the latch opens once every count-down is done",
        }
    }
}

/// Which primitive a scenario checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Primitive {
    /// A semaphore of `permits` permits, one asked for by each client.
    Semaphore {
        /// k.
        permits: u8,
    },
    /// A latch of `count` count-downs, by `count_downs` callers (each its own id), and one
    /// waiter.
    Latch {
        /// T.
        count: u8,
        /// How many callers count down (fewer than T: the latch must never open).
        count_downs: u8,
    },
}

/// The bounds of one check.
#[derive(Clone, Debug)]
pub struct FamilyConfig {
    /// The scenario's name.
    pub name: &'static str,
    /// How many masters.
    pub masters: u8,
    /// How many clients (the semaphore's askers; ignored by the latch).
    pub clients: u8,
    /// What is checked.
    pub primitive: Primitive,
    /// The design, or a broken one.
    pub variant: FamilyVariant,
}

impl FamilyConfig {
    /// How many masters must grant a permit: `floor(k·N/(k+1)) + 1`, or a majority in the
    /// broken variant.
    pub fn permit_quorum(&self, permits: u8) -> u8 {
        let (k, n) = (u16::from(permits), u16::from(self.masters));
        match self.variant {
            FamilyVariant::SemaphoreOnAMajority => self.masters / 2 + 1,
            _ => u8::try_from(k * n / (k + 1) + 1).unwrap_or(u8::MAX),
        }
    }

    fn majority(&self) -> u8 {
        self.masters / 2 + 1
    }

    /// How many acknowledgements make a count-down done.
    fn count_down_acks(&self) -> u8 {
        match self.variant {
            FamilyVariant::LatchDoneOnOneAck => 1,
            _ => self.majority(),
        }
    }
}

/// One state of the whole system.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FamilyState {
    /// Per master: the semaphore's holders, or the latch's ids (the counter form: how many
    /// count-downs it applied, retries included).
    pub masters: Vec<BTreeSet<u8>>,
    /// The counter form's count-downs applied per master.
    pub decrements: Vec<u8>,
    /// Per client: how its request stands (see [`Asking`]).
    pub clients: Vec<Asking>,
    /// Requests in flight: (client, master); any may arrive next (no order is assumed).
    pub requests: BTreeSet<(u8, u8)>,
    /// The latch's waiter: the masters it read, the union of their ids (or the smallest counter
    /// left it read), and whether it opened.
    pub waiter: Waiter,
}

/// A client's request.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Asking {
    /// Not asked yet.
    Idle,
    /// Asked every master: who granted (the semaphore) or acknowledged (the latch), and who
    /// refused.
    Asked {
        /// The masters that granted or acknowledged.
        granted: BTreeSet<u8>,
        /// The masters that refused.
        refused: BTreeSet<u8>,
        /// How many times a latch count-down was sent again (the counter form's retry).
        retried: u8,
    },
    /// Believes it holds (the semaphore), or its count-down is done (the latch).
    Done,
    /// Gave up, its grants taken back.
    GaveUp,
}

/// The latch's waiter.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Waiter {
    /// The masters read.
    pub read: BTreeSet<u8>,
    /// The union of the ids read.
    pub union: BTreeSet<u8>,
    /// The smallest counter left read (the counter form).
    pub least_left: Option<u8>,
    /// It opened.
    pub opened: bool,
    /// Every read of this round came after every count-down was done.
    pub after_done: bool,
    /// A round read entirely after every count-down was done did not open.
    pub missed: bool,
}

/// A step.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum FamilyAction {
    /// A client asks (or counts down on) every master.
    Ask(u8),
    /// A request arrives and is applied; its answer reaches its client.
    Deliver(u8, u8),
    /// A client that cannot reach its quorum any more takes its grants back.
    GiveUp(u8),
    /// A count-down whose acknowledgements are late is sent again to every master.
    Retry(u8),
    /// The waiter reads a master.
    Read(u8),
}

/// The model.
#[derive(Clone, Debug)]
pub struct FamilySystem {
    /// Its bounds.
    pub config: FamilyConfig,
}

impl FamilySystem {
    fn askers(&self) -> u8 {
        match self.config.primitive {
            Primitive::Semaphore { .. } => self.config.clients,
            Primitive::Latch { count_downs, .. } => count_downs,
        }
    }

    /// How many masters a client's request must reach.
    fn needed(&self) -> u8 {
        match self.config.primitive {
            Primitive::Semaphore { permits } => self.config.permit_quorum(permits),
            Primitive::Latch { .. } => self.config.count_down_acks(),
        }
    }

    /// Whether `property` holds in `state`.
    pub fn holds(&self, property: FamilyProperty, state: &FamilyState) -> bool {
        match (property, self.config.primitive) {
            (FamilyProperty::AtMostKPermits, Primitive::Semaphore { permits }) => {
                state
                    .clients
                    .iter()
                    .filter(|client| **client == Asking::Done)
                    .count()
                    <= usize::from(permits)
            }
            (FamilyProperty::LatchNeverOpensEarly, Primitive::Latch { count, .. }) => {
                let called = state
                    .clients
                    .iter()
                    .filter(|client| **client != Asking::Idle)
                    .count();
                !state.waiter.opened || called >= usize::from(count)
            }
            (FamilyProperty::LatchOpensOnceDone, Primitive::Latch { .. }) => !state.waiter.missed,
            _ => true,
        }
    }

    fn counter_form(&self) -> bool {
        self.config.variant == FamilyVariant::LatchAsACounter
    }
}

impl Model for FamilySystem {
    type State = FamilyState;
    type Action = FamilyAction;

    fn init_states(&self) -> Vec<FamilyState> {
        let masters = usize::from(self.config.masters);
        vec![FamilyState {
            masters: vec![BTreeSet::new(); masters],
            decrements: vec![0; masters],
            clients: vec![Asking::Idle; usize::from(self.askers())],
            requests: BTreeSet::new(),
            waiter: Waiter::default(),
        }]
    }

    fn actions(&self, state: &FamilyState, actions: &mut Vec<FamilyAction>) {
        for (client, master) in &state.requests {
            actions.push(FamilyAction::Deliver(*client, *master));
        }
        let needed = usize::from(self.needed());
        let masters = usize::from(self.config.masters);
        for (index, asking) in state.clients.iter().enumerate() {
            let client = index as u8;
            match asking {
                Asking::Idle => actions.push(FamilyAction::Ask(client)),
                Asking::Asked {
                    refused, retried, ..
                } => {
                    if masters - refused.len() < needed {
                        actions.push(FamilyAction::GiveUp(client));
                    }
                    let latch = matches!(self.config.primitive, Primitive::Latch { .. });
                    if latch && *retried == 0 {
                        actions.push(FamilyAction::Retry(client));
                    }
                }
                Asking::Done | Asking::GaveUp => {}
            }
        }
        if let Primitive::Latch { .. } = self.config.primitive {
            if !state.waiter.opened {
                for master in 0..self.config.masters {
                    if !state.waiter.read.contains(&master) {
                        actions.push(FamilyAction::Read(master));
                    }
                }
            }
        }
    }

    fn next_state(&self, state: &FamilyState, action: FamilyAction) -> Option<FamilyState> {
        let mut next = state.clone();
        let needed = usize::from(self.needed());
        match action {
            FamilyAction::Ask(client) | FamilyAction::Retry(client) => {
                if action == FamilyAction::Ask(client) {
                    next.clients[usize::from(client)] = Asking::Asked {
                        granted: BTreeSet::new(),
                        refused: BTreeSet::new(),
                        retried: 0,
                    };
                } else if let Asking::Asked { retried, .. } = &mut next.clients[usize::from(client)]
                {
                    *retried += 1;
                }
                for master in 0..self.config.masters {
                    next.requests.insert((client, master));
                }
            }
            FamilyAction::Deliver(client, master) => {
                next.requests.remove(&(client, master));
                let on = usize::from(master);
                let granted = match self.config.primitive {
                    Primitive::Semaphore { permits } => {
                        let holders = &mut next.masters[on];
                        let still_asking =
                            matches!(next.clients[usize::from(client)], Asking::Asked { .. });
                        if holders.contains(&client) {
                            true
                        } else if holders.len() < usize::from(permits) && still_asking {
                            holders.insert(client);
                            true
                        } else {
                            false
                        }
                    }
                    Primitive::Latch { .. } => {
                        if self.counter_form() {
                            next.decrements[on] += 1;
                        }
                        next.masters[on].insert(client);
                        true
                    }
                };
                if let Asking::Asked {
                    granted: grants,
                    refused,
                    ..
                } = &mut next.clients[usize::from(client)]
                {
                    if granted {
                        grants.insert(master);
                    } else {
                        refused.insert(master);
                    }
                    if grants.len() >= needed {
                        next.clients[usize::from(client)] = Asking::Done;
                    }
                }
            }
            FamilyAction::GiveUp(client) => {
                next.clients[usize::from(client)] = Asking::GaveUp;
                for holders in &mut next.masters {
                    holders.remove(&client);
                }
            }
            FamilyAction::Read(master) => {
                let on = usize::from(master);
                let Primitive::Latch { count, count_downs } = self.config.primitive else {
                    return None;
                };
                let all_done = next.clients.iter().all(|client| *client == Asking::Done);
                if next.waiter.read.is_empty() {
                    next.waiter.after_done = all_done;
                }
                next.waiter.after_done &= all_done;
                next.waiter.read.insert(master);
                next.waiter.union.extend(next.masters[on].iter().copied());
                let left = count.saturating_sub(next.decrements[on]);
                next.waiter.least_left =
                    Some(next.waiter.least_left.map_or(left, |least| least.min(left)));
                if next.waiter.read.len() >= usize::from(self.config.majority()) {
                    next.waiter.opened = if self.counter_form() {
                        next.waiter.least_left == Some(0)
                    } else {
                        next.waiter.union.len() >= usize::from(count)
                    };
                    if !next.waiter.opened {
                        // Every count-down a latch of this many needs was done before this
                        // round of reads began, and it did not open.
                        let missed = next.waiter.after_done && count_downs >= count;
                        // Not open: the waiter reads afresh later.
                        next.waiter = Waiter {
                            missed: state.waiter.missed || missed,
                            ..Waiter::default()
                        };
                    }
                }
            }
        }
        Some(next)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let mut properties = vec![
            Property::always(
                FamilyProperty::AtMostKPermits.name(),
                |model: &FamilySystem, state| model.holds(FamilyProperty::AtMostKPermits, state),
            ),
            Property::always(
                FamilyProperty::LatchNeverOpensEarly.name(),
                |model: &FamilySystem, state| {
                    model.holds(FamilyProperty::LatchNeverOpensEarly, state)
                },
            ),
            Property::always(
                FamilyProperty::LatchOpensOnceDone.name(),
                |model: &FamilySystem, state| {
                    model.holds(FamilyProperty::LatchOpensOnceDone, state)
                },
            ),
        ];
        // The situations the bounds must reach, or the promises above would hold vacuously.
        if let Primitive::Semaphore { .. } = self.config.primitive {
            if self.config.variant == FamilyVariant::Correct {
                properties.push(Property::sometimes(
                    "k clients hold at once",
                    |model: &FamilySystem, state: &FamilyState| {
                        let Primitive::Semaphore { permits } = model.config.primitive else {
                            return false;
                        };
                        state
                            .clients
                            .iter()
                            .filter(|client| **client == Asking::Done)
                            .count()
                            == usize::from(permits)
                    },
                ));
            }
        }
        if let Primitive::Latch { count, count_downs } = self.config.primitive {
            properties.push(Property::sometimes(
                "every count-down is done",
                |_: &FamilySystem, state: &FamilyState| {
                    state.clients.iter().all(|client| *client == Asking::Done)
                },
            ));
            if count_downs >= count && self.config.variant == FamilyVariant::Correct {
                properties.push(Property::sometimes(
                    "the latch opens",
                    |_: &FamilySystem, state: &FamilyState| state.waiter.opened,
                ));
            }
        }
        properties
    }
}

/// What one run of the checker found.
pub type FamilyReport = crate::bounded::BoundedReport;

/// Explores every execution of `config` breadth first (a violation's path is a shortest one),
/// stopping early only at the first violation of `stop_at` if given.
pub fn check_family(config: &FamilyConfig, stop_at: Option<FamilyProperty>) -> FamilyReport {
    let system = FamilySystem {
        config: config.clone(),
    };
    crate::bounded::check_bounded(config.name, system, stop_at.map(FamilyProperty::name))
}

/// The bounded scenarios the designs must pass: three clients of a 2-permit semaphore on three
/// masters (q = 3), three of a 2-permit semaphore on five (q = 4), and a latch on three masters
/// whose two callers may each retry: of three count-downs (it must never open), and of two (it
/// must open once both are done).
pub fn family_scenarios(variant: FamilyVariant) -> Vec<FamilyConfig> {
    vec![
        FamilyConfig {
            name: "semaphore: 2 permits, 3 clients, 3 masters",
            masters: 3,
            clients: 3,
            primitive: Primitive::Semaphore { permits: 2 },
            variant,
        },
        FamilyConfig {
            name: "semaphore: 2 permits, 3 clients, 5 masters",
            masters: 5,
            clients: 3,
            primitive: Primitive::Semaphore { permits: 2 },
            variant,
        },
        FamilyConfig {
            name: "latch: 3 count-downs, 2 callers, 3 masters",
            masters: 3,
            clients: 0,
            primitive: Primitive::Latch {
                count: 3,
                count_downs: 2,
            },
            variant,
        },
        FamilyConfig {
            name: "latch: 2 count-downs, 2 callers, 3 masters",
            masters: 3,
            clients: 0,
            primitive: Primitive::Latch {
                count: 2,
                count_downs: 2,
            },
            variant,
        },
    ]
}

/// The scenario that catches `variant` breaking [`FamilyVariant::breaks`].
pub fn family_catching(variant: FamilyVariant) -> FamilyConfig {
    let scenarios = family_scenarios(variant);
    match variant.breaks() {
        FamilyProperty::AtMostKPermits => scenarios[0].clone(),
        FamilyProperty::LatchNeverOpensEarly => scenarios[2].clone(),
        FamilyProperty::LatchOpensOnceDone => scenarios[3].clone(),
    }
}
