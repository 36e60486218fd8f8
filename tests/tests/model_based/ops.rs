//! The operations the model-based test draws, and the small reference state that keeps each
//! drawn sequence valid (which nodes are paused) as proptest generates and shrinks it.

use proptest::prelude::*;
use proptest_state_machine::ReferenceStateMachine;

use crate::system::NODE_TIMEOUT;

/// Three actors: two owners in client 0 (a task, and an explicit owner used from fresh tasks
/// each time) and a task in client 1.
pub(crate) const ACTORS: usize = 3;
/// Four locks: two reentrant locks (contention on each, and holds of one owner on both), and
/// the read and write sides of one read-write lock.
pub(crate) const LOCKS: usize = 4;

/// What a lock of the sequences is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    /// A reentrant lock.
    Exclusive,
    /// The read side of the read-write lock.
    Read,
    /// Its write side.
    Write,
}

/// Each lock's side.
pub(crate) const SIDE: [Side; LOCKS] = [Side::Exclusive, Side::Exclusive, Side::Read, Side::Write];

/// Each lock's resource: the two sides of the read-write lock are one.
pub(crate) const RESOURCE: [usize; LOCKS] = [0, 1, 2, 2];

/// Whether holds of locks `a` and `b` by two owners exclude each other: on one resource, unless
/// both read.
pub(crate) fn conflicts(a: usize, b: usize) -> bool {
    RESOURCE[a] == RESOURCE[b] && !(SIDE[a] == Side::Read && SIDE[b] == Side::Read)
}

/// The read side of the read-write lock whose write side is `lock`, if it is one.
pub(crate) fn read_side_of(lock: usize) -> Option<usize> {
    (SIDE[lock] == Side::Write).then(|| {
        (0..LOCKS)
            .find(|other| RESOURCE[*other] == RESOURCE[lock] && SIDE[*other] == Side::Read)
            .expect("a write side has a read side")
    })
}
/// Three masters: one can be paused or restarted while a majority still answers.
pub(crate) const NODES: usize = 3;
/// The client each actor belongs to.
pub(crate) const CLIENT_OF: [usize; ACTORS] = [0, 0, 1];
/// How many clients the actors share.
pub(crate) const CLIENTS: usize = 2;

/// How an acquisition keeps its lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lease {
    /// The watchdog lease, renewed.
    Watchdog,
    /// A fixed lease, in milliseconds.
    Fixed(u64),
}

/// Which call takes the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Api {
    /// `lock()` / `lock_with_lease()`, given up (dropped) after a patience.
    Lock,
    /// `try_lock(wait, lease)`.
    TryLock { wait_ms: u64 },
    /// `acquire()` / `acquire_with_lease()`, dropped after a patience; keeps a guard.
    Guard,
    /// `try_acquire(wait, lease)`; keeps a guard.
    TryGuard { wait_ms: u64 },
}

/// One step of a sequence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Step {
    Acquire {
        actor: usize,
        lock: usize,
        lease: Lease,
        api: Api,
    },
    /// An acquisition dropped after `after_us` (at whatever await point it has reached).
    CancelAcquire {
        actor: usize,
        lock: usize,
        lease: Lease,
        after_us: u64,
    },
    Unlock {
        actor: usize,
        lock: usize,
    },
    CancelUnlock {
        actor: usize,
        lock: usize,
        after_us: u64,
    },
    /// The `pick`-th of the actor's guards (modulo how many it has).
    GuardUnlock {
        actor: usize,
        pick: usize,
    },
    CancelGuardUnlock {
        actor: usize,
        pick: usize,
        after_us: u64,
    },
    /// A nested `lock()` on the lock of the actor's `pick`-th guard, then the actor's
    /// `RLock::unlock` and that guard's `unlock` at once, each dropped after `after_us` if
    /// unanswered: two handles of one hold, serialised by the hold.
    ReleaseTogether {
        actor: usize,
        pick: usize,
        after_us: u64,
    },
    /// Drops a guard, on a runtime thread or on a thread with no runtime.
    GuardDrop {
        actor: usize,
        pick: usize,
        outside_runtime: bool,
    },
    ForceUnlock {
        actor: usize,
        lock: usize,
    },
    /// `is_locked`, `hold_count` and `remaining_ttl`, checked against the model.
    Query {
        actor: usize,
        lock: usize,
    },
    Sleep {
        ms: u64,
    },
    Pause {
        node: usize,
    },
    Resume {
        node: usize,
    },
    /// Pauses every node but `spared` at once: a majority gone, so that releases, renewals
    /// and acquisitions in the window miss it (each node comes back with its own `Resume`).
    PauseMajority {
        spared: usize,
    },
    /// `CLIENT KILL TYPE pubsub` on every node.
    KillPubSub,
    /// Kill a node and restart it empty once every lease it granted has run out (a delayed
    /// restart, within the promise).
    RestartEmpty {
        node: usize,
    },
    Shutdown {
        client: usize,
    },
    /// Drops `client` without `shutdown()`, its guards and plain lease first (each sends its
    /// release), keeping the signals of the holds its tasks still held; a new client replaces it.
    DropClient {
        client: usize,
    },
    /// `Watchdog::acquire` of the plain lock by `client`'s watchdog (kept as a `RenewedLease`).
    PlainAcquire {
        client: usize,
    },
    /// `RenewedLease::release` of the lease `client` keeps, if any.
    PlainRelease {
        client: usize,
    },
    /// `Redlock::acquire` of the core lock by `client`'s quorum, for `lease_ms`.
    CoreAcquire {
        client: usize,
        lease_ms: u64,
    },
    /// `Redlock::extend` of the core lease `client` keeps to `lease_ms` (often shorter than
    /// what it has left), dropped after `after_us` if that is given and it has not answered.
    CoreExtend {
        client: usize,
        lease_ms: u64,
        after_us: Option<u64>,
    },
    /// `Redlock::release` of the core lease `client` keeps, if any.
    CoreRelease {
        client: usize,
    },
    /// `MultiLock::try_acquire(wait)` by `actor` of the reentrant lock 0 and a side of the
    /// read-write lock (`read`: its read side), the members then kept as guards.
    MultiAcquire {
        actor: usize,
        read: bool,
        wait_ms: u64,
    },
}

/// What generation needs to know: which nodes are paused, and the hold the last steps were
/// about.
#[derive(Debug, Clone, Default)]
pub(crate) struct Drawn {
    pub(crate) paused: [bool; NODES],
    /// The actor and lock of the latest step that named them: the next steps often come back
    /// to the same hold, so that operations on one hold compose (an unlock behind a release
    /// still in flight, a nested acquisition after a failed unlock), which independent draws
    /// would rarely line up.
    pub(crate) focus: Option<(usize, usize)>,
    /// The last step dropped a release while a node was paused: it goes on in the background
    /// (a per-node timeout or more), holding its hold, and what comes next on that hold waits.
    pub(crate) release_lingers: bool,
}

impl Drawn {
    fn paused_count(&self) -> usize {
        self.paused.iter().filter(|p| **p).count()
    }
}

/// The reference state machine that draws sequences.
pub(crate) struct Sequences;

/// The shortest fixed lease drawn, in milliseconds: 100 ms above the per-node timeout, so that
/// an attempt that waited a whole per-node timeout still has validity left (the library
/// refuses a lease not above the per-node timeout plus the drift allowance).
pub(crate) const SHORTEST_FIXED_LEASE_MS: u64 = NODE_TIMEOUT.as_millis() as u64 + 100;

fn lease() -> impl Strategy<Value = Lease> {
    prop_oneof![
        3 => Just(Lease::Watchdog),
        // Shorter than the watchdog's: they run out within a few steps.
        1 => (SHORTEST_FIXED_LEASE_MS..SHORTEST_FIXED_LEASE_MS + 500).prop_map(Lease::Fixed),
        1 => (1_600u64..3_000).prop_map(Lease::Fixed),
    ]
}

fn api() -> impl Strategy<Value = Api> {
    prop_oneof![
        2 => Just(Api::Lock),
        3 => (0u64..250).prop_map(|wait_ms| Api::TryLock { wait_ms }),
        2 => Just(Api::Guard),
        2 => (0u64..250).prop_map(|wait_ms| Api::TryGuard { wait_ms }),
    ]
}

impl ReferenceStateMachine for Sequences {
    type State = Drawn;
    type Transition = Step;

    fn init_state() -> BoxedStrategy<Drawn> {
        Just(Drawn::default()).boxed()
    }

    fn transitions(state: &Drawn) -> BoxedStrategy<Step> {
        let actor = 0..ACTORS;
        let lock = 0..LOCKS;
        let pick = 0usize..4;
        let after_us = 0u64..120_000;
        let node = 0..NODES;
        let paused: Vec<usize> = (0..NODES).filter(|n| state.paused[*n]).collect();
        let can_pause = state.paused_count() < 2;
        let mut steps = vec![
            (
                30,
                (actor.clone(), lock.clone(), lease(), api())
                    .prop_map(|(actor, lock, lease, api)| Step::Acquire {
                        actor,
                        lock,
                        lease,
                        api,
                    })
                    .boxed(),
            ),
            (
                5,
                (actor.clone(), lock.clone(), lease(), after_us.clone())
                    .prop_map(|(actor, lock, lease, after_us)| Step::CancelAcquire {
                        actor,
                        lock,
                        lease,
                        after_us,
                    })
                    .boxed(),
            ),
            (
                14,
                (actor.clone(), lock.clone())
                    .prop_map(|(actor, lock)| Step::Unlock { actor, lock })
                    .boxed(),
            ),
            (
                3,
                (actor.clone(), lock.clone(), after_us.clone())
                    .prop_map(|(actor, lock, after_us)| Step::CancelUnlock {
                        actor,
                        lock,
                        after_us,
                    })
                    .boxed(),
            ),
            (
                8,
                (actor.clone(), pick.clone())
                    .prop_map(|(actor, pick)| Step::GuardUnlock { actor, pick })
                    .boxed(),
            ),
            (
                3,
                (actor.clone(), pick.clone(), after_us)
                    .prop_map(|(actor, pick, after_us)| Step::CancelGuardUnlock {
                        actor,
                        pick,
                        after_us,
                    })
                    .boxed(),
            ),
            (
                4,
                (actor.clone(), pick, any::<bool>())
                    .prop_map(|(actor, pick, no_runtime)| Step::GuardDrop {
                        actor,
                        pick,
                        outside_runtime: no_runtime,
                    })
                    .boxed(),
            ),
            (
                2,
                (actor.clone(), lock.clone())
                    .prop_map(|(actor, lock)| Step::ForceUnlock { actor, lock })
                    .boxed(),
            ),
            (
                6,
                (actor.clone(), lock)
                    .prop_map(|(actor, lock)| Step::Query { actor, lock })
                    .boxed(),
            ),
            (
                5,
                prop_oneof![3 => 50u64..400, 1 => 700u64..1_800]
                    .prop_map(|ms| Step::Sleep { ms })
                    .boxed(),
            ),
            (2, Just(Step::KillPubSub).boxed()),
            (
                3,
                (0..2usize)
                    .prop_map(|client| Step::PlainAcquire { client })
                    .boxed(),
            ),
            (
                2,
                (0..2usize)
                    .prop_map(|client| Step::PlainRelease { client })
                    .boxed(),
            ),
            (
                2,
                (0..2usize, 1_000u64..3_000)
                    .prop_map(|(client, lease_ms)| Step::CoreAcquire { client, lease_ms })
                    .boxed(),
            ),
            (
                3,
                (
                    0..2usize,
                    SHORTEST_FIXED_LEASE_MS..3_000,
                    // Dropped right after its requests went out, or while a paused node
                    // holds it up, or never.
                    prop_oneof![
                        Just(None),
                        (0u64..400).prop_map(Some),
                        (0u64..120_000).prop_map(Some)
                    ],
                )
                    .prop_map(|(client, lease_ms, after_us)| Step::CoreExtend {
                        client,
                        lease_ms,
                        after_us,
                    })
                    .boxed(),
            ),
            (
                1,
                (0..2usize)
                    .prop_map(|client| Step::CoreRelease { client })
                    .boxed(),
            ),
            (
                4,
                (actor.clone(), any::<bool>(), 0u64..250)
                    .prop_map(|(actor, read, wait_ms)| Step::MultiAcquire {
                        actor,
                        read,
                        wait_ms,
                    })
                    .boxed(),
            ),
            (
                1,
                (0..2usize)
                    .prop_map(|client| Step::Shutdown { client })
                    .boxed(),
            ),
            (
                1,
                (0..2usize)
                    .prop_map(|client| Step::DropClient { client })
                    .boxed(),
            ),
        ];
        if can_pause {
            steps.push((
                3,
                node.clone().prop_map(|node| Step::Pause { node }).boxed(),
            ));
        }
        if !paused.is_empty() {
            // Each paused node is resumed as likely as a lone one: a majority paused does not
            // last twice as long (every step in it waits a per-node timeout, and fails).
            let resume_weight = 6 * u32::try_from(paused.len()).unwrap_or(1);
            steps.push((
                resume_weight,
                proptest::sample::select(paused)
                    .prop_map(|node| Step::Resume { node })
                    .boxed(),
            ));
        } else {
            steps.push((
                2,
                node.clone()
                    .prop_map(|spared| Step::PauseMajority { spared })
                    .boxed(),
            ));
            steps.push((1, node.prop_map(|node| Step::RestartEmpty { node }).boxed()));
        }
        if let Some((actor, lock)) = state.focus {
            steps.extend(same_hold(actor, lock, state.release_lingers));
        }
        proptest::strategy::Union::new_weighted(steps).boxed()
    }

    fn preconditions(state: &Drawn, step: &Step) -> bool {
        match step {
            Step::Pause { node } => !state.paused[*node] && state.paused_count() < 2,
            Step::Resume { node } => state.paused[*node],
            Step::RestartEmpty { .. } | Step::PauseMajority { .. } => state.paused_count() == 0,
            _ => true,
        }
    }

    fn apply(mut state: Drawn, step: &Step) -> Drawn {
        match step {
            Step::Pause { node } => state.paused[*node] = true,
            Step::Resume { node } => state.paused[*node] = false,
            Step::PauseMajority { spared } => {
                for node in (0..NODES).filter(|node| node != spared) {
                    state.paused[node] = true;
                }
            }
            _ => {}
        }
        state.focus = focus_of(step, state.focus);
        state.release_lingers = state.paused_count() >= 1
            && matches!(
                step,
                Step::CancelUnlock { .. }
                    | Step::CancelGuardUnlock { .. }
                    | Step::ReleaseTogether { .. }
            );
        state
    }
}

/// The hold a step is about, if it names one (a guard's step names only its actor, and keeps
/// the lock in focus).
fn focus_of(step: &Step, focus: Option<(usize, usize)>) -> Option<(usize, usize)> {
    match *step {
        Step::Acquire { actor, lock, .. }
        | Step::CancelAcquire { actor, lock, .. }
        | Step::Unlock { actor, lock }
        | Step::CancelUnlock { actor, lock, .. }
        | Step::ForceUnlock { actor, lock }
        | Step::Query { actor, lock } => Some((actor, lock)),
        Step::GuardUnlock { actor, .. }
        | Step::CancelGuardUnlock { actor, .. }
        | Step::ReleaseTogether { actor, .. }
        | Step::GuardDrop { actor, .. } => Some((actor, focus.map_or(0, |(_, lock)| lock))),
        _ => focus,
    }
}

/// Steps that come back to the hold in focus, with their weights; behind a release that
/// lingers, often another release of the same owner, dropped while it waits.
fn same_hold(actor: usize, lock: usize, release_lingers: bool) -> Vec<(u32, BoxedStrategy<Step>)> {
    let after_us = 0u64..120_000;
    let behind = if release_lingers { 8 } else { 1 };
    vec![
        (
            8,
            (lease(), api())
                .prop_map(move |(lease, api)| Step::Acquire {
                    actor,
                    lock,
                    lease,
                    api,
                })
                .boxed(),
        ),
        (5, Just(Step::Unlock { actor, lock }).boxed()),
        (
            3 * behind,
            after_us
                .clone()
                .prop_map(move |after_us| Step::CancelUnlock {
                    actor,
                    lock,
                    after_us,
                })
                .boxed(),
        ),
        (
            3,
            (0usize..4)
                .prop_map(move |pick| Step::GuardUnlock { actor, pick })
                .boxed(),
        ),
        (
            3 * behind,
            (0usize..4, after_us)
                .prop_map(move |(pick, after_us)| Step::CancelGuardUnlock {
                    actor,
                    pick,
                    after_us,
                })
                .boxed(),
        ),
        (
            6,
            (0usize..4, prop_oneof![0u64..3_000, 0u64..120_000])
                .prop_map(move |(pick, after_us)| Step::ReleaseTogether {
                    actor,
                    pick,
                    after_us,
                })
                .boxed(),
        ),
    ]
}
