//! What one check explores: how many clients and masters, the lease and drift in ticks, how far
//! time runs, how many operations and faults, and which protocol (the real one, or a broken
//! variant the checker must catch).

/// One step of the model's real-time clock. Leases, drift and validity are whole ticks.
pub type Tick = u8;

/// The protocol the clients and masters run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Variant {
    /// The protocol as the library runs it.
    Real,
    /// A new hold's token is the largest candidate of the majority, never written back.
    NoWriteBack,
    /// Success is not checked against the validity; the lease is counted from the reply.
    NoValidityCheck,
    /// A release goes only to the nodes seen to grant the hold, not to every node.
    ReleaseOnlyBelievedLocked,
    /// A nested acquisition sets the TTL to its own lease, even when that is shorter.
    NestedShortensTtl,
    /// A final release stops watching the hold (renewal and lost deadline) as soon as it is sent.
    UnwatchBeforeReleaseConfirmed,
    /// The watchdog keeps renewing a hold after its final release was confirmed.
    RenewalNotCancelled,
    /// A new hold's key is written without an expiry.
    LockWithoutExpiry,
    /// A failed attempt is undone only on the masters seen to grant it, not on those that did
    /// not answer.
    UndoOnlySeenGrants,
    /// The scripts know a hold by its owner and count only: a late release or undo of an
    /// earlier hold deletes the next one, which took over the earlier one's field.
    HoldByOwnerOnly,
    /// A final release succeeds only once a majority released it: answers that prove no
    /// majority can still hold it (some released, the rest not held, one silent) leave it
    /// undecided, and `unlock` fails with a majority of masters up.
    FinalReleaseNeedsMajorityReleased,
    /// A retried final release counts every "not held" as refused, also where its earlier
    /// try landed: its owner is told a valid hold was lost.
    NotHeldAlwaysRefuses,
}

impl Variant {
    /// Every broken variant.
    pub const BROKEN: [Variant; 11] = [
        Variant::NoWriteBack,
        Variant::NoValidityCheck,
        Variant::ReleaseOnlyBelievedLocked,
        Variant::NestedShortensTtl,
        Variant::UnwatchBeforeReleaseConfirmed,
        Variant::RenewalNotCancelled,
        Variant::LockWithoutExpiry,
        Variant::UndoOnlySeenGrants,
        Variant::HoldByOwnerOnly,
        Variant::FinalReleaseNeedsMajorityReleased,
        Variant::NotHeldAlwaysRefuses,
    ];
}

/// How many faults of each kind one execution may suffer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Faults {
    /// A client–master link turns slow: its requests may wait across ticks. On the other links
    /// every request runs within the tick it was sent in (a tick is longer than the per-node
    /// timeout), though in any order.
    pub slow_links: u8,
    /// A client–master connection drops everything in flight on it, both ways.
    pub connection_losses: u8,
    /// A master crashes and restarts with its data (`appendfsync always`).
    pub restarts_with_data: u8,
    /// A master crashes and restarts empty (no persistence): outside the exclusion promise.
    pub restarts_empty: u8,
    /// A client pauses (GC, SIGSTOP): its beliefs freeze until it resumes.
    pub pauses: u8,
    /// A client crashes (SIGKILL): its connections close and it never comes back.
    pub crashes: u8,
    /// A request waiting to enter a Redis Cluster member's connection overtakes the one queued
    /// before it on the same link (redis-rs's cluster connection keeps order only below 100
    /// queued requests).
    pub overtakes: u8,
}

/// The bounds and parameters of one model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// One entry per client (each one owner): how many `lock` calls it may make.
    pub locks: Vec<u8>,
    /// How many independent masters.
    pub masters: usize,
    /// The watchdog lease, renewed while held.
    pub lease: Tick,
    /// A fixed lease for nested acquisitions, shorter than `lease` (0: none).
    pub short_lease: Tick,
    /// The drift allowance: a master's clock may expire a key this many ticks early or late, and
    /// a client's validity is the lease minus the time taken minus this.
    pub drift: Tick,
    /// Time stops here.
    pub max_time: Tick,
    /// How many times each client may retry a release no majority answered.
    pub release_retries: u8,
    /// Whether a new hold may take the fixed lease too (else only nested acquisitions do).
    pub fixed_new_holds: bool,
    /// The deepest nesting a client asks for.
    pub max_depth: u8,
    /// Faults allowed in one execution.
    pub faults: Faults,
    /// Whether a paused client always resumes before its validity ends (the promise's
    /// assumption), or may sleep through it.
    pub pauses_within_validity: bool,
    /// The protocol.
    pub variant: Variant,
}

impl Config {
    /// How many clients.
    pub fn clients(&self) -> usize {
        self.locks.len()
    }

    /// The size of a majority.
    pub fn quorum(&self) -> usize {
        self.masters / 2 + 1
    }

    /// Whether the exclusion promise applies: no master restarts empty and no pause outlives
    /// the validity.
    pub fn within_promise(&self) -> bool {
        self.faults.restarts_empty == 0 && (self.faults.pauses == 0 || self.pauses_within_validity)
    }

    /// A master's clock reading at `now` in microseconds (`TIME`), for counters that start
    /// from the clock: far more microseconds per tick than grants in any execution.
    pub fn micros_per_tick(&self) -> u64 {
        1_000
    }
}
