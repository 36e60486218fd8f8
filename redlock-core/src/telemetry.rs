//! The metrics the lock records, through the [`metrics`](https://docs.rs/metrics) facade: no
//! exporter is forced on you. Install any recorder (Prometheus, StatsD, OpenTelemetry, ...) in
//! your service and these appear; without one, recording costs next to nothing.
//!
//! Every name and label is a constant here and documented in docs/observability.md. Node
//! labels are [`NodeAddress`]es: a password never reaches a metric.
//!
//! ```
//! use redlock_core::telemetry;
//! assert_eq!(telemetry::ACQUISITIONS, "redlock_acquisitions_total");
//! ```

use std::time::{Duration, Instant};

use crate::{LostReason, NodeAddress, NodeErrorKind};

/// Counter: lock acquisitions (each `lock`, `try_lock`, `acquire`... call that ended), by
/// `outcome`: `acquired`, `contended` (held by another owner until the wait ran out),
/// `no_quorum` (too few nodes answered), `lost` (a nested acquisition of a hold that was lost),
/// `error` (anything else: a key of another type, a client shut down).
pub const ACQUISITIONS: &str = "redlock_acquisitions_total";
/// Histogram, seconds: how long an acquisition call took, from the call to its outcome
/// (label `outcome`, as [`ACQUISITIONS`]).
pub const WAIT_SECONDS: &str = "redlock_wait_seconds";
/// Histogram, seconds: how long a hold lasted, from its first acquisition to its final release
/// or its loss.
pub const HOLD_SECONDS: &str = "redlock_hold_seconds";
/// Counter: holds whose lease a majority renewed (one per hold per renewal round).
pub const RENEWALS: &str = "redlock_renewals_total";
/// Counter: holds a renewal round could not get confirmed by a majority (retried until the
/// hold's validity is in danger, then the hold is lost with `quorum_lost`).
pub const RENEWAL_FAILURES: &str = "redlock_renewal_failures_total";
/// Counter: holds lost, by `reason`: `not_owner`, `quorum_lost`, `max_hold_reached`,
/// `lease_expired`, `shutdown`, `abandoned` (see [`LostReason`]).
pub const LOST: &str = "redlock_lost_total";
/// Counter: failed requests to one node, by `node` (its address, password hidden) and `kind`:
/// `timeout`, `connect`, `command` (an error reply or a broken connection), `not_replicated`
/// (too few replicas acknowledged a write).
pub const NODE_ERRORS: &str = "redlock_node_errors_total";
/// Gauge: tasks of this process waiting for a lock: in their client's line for it behind
/// another task, or subscribed to its release between attempts.
pub const WAITERS: &str = "redlock_waiters";
/// Gauge: lock channels this process is subscribed to (one per lock with local waiters, per
/// client).
pub const SUBSCRIPTIONS: &str = "redlock_subscriptions";

/// How an acquisition call ended (the `outcome` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum AcquisitionOutcome {
    /// The lock was taken.
    Acquired,
    /// Another owner held it until the wait ran out.
    Contended,
    /// Too few nodes answered.
    NoQuorum,
    /// A nested acquisition of a hold that was lost.
    Lost,
    /// Anything else.
    Error,
}

impl AcquisitionOutcome {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            AcquisitionOutcome::Acquired => "acquired",
            AcquisitionOutcome::Contended => "contended",
            AcquisitionOutcome::NoQuorum => "no_quorum",
            AcquisitionOutcome::Lost => "lost",
            AcquisitionOutcome::Error => "error",
        }
    }
}

/// Records an acquisition call that ended with `outcome` after `waited`.
pub fn acquisition(outcome: AcquisitionOutcome, waited: Duration) {
    // One call per label value, each a literal: the metrics' keys are then statics, and a call
    // allocates nothing (a label held in a variable would be built into a new key each time).
    macro_rules! record {
        ($outcome:literal) => {{
            metrics::counter!(ACQUISITIONS, "outcome" => $outcome).increment(1);
            metrics::histogram!(WAIT_SECONDS, "outcome" => $outcome)
                .record(waited.as_secs_f64());
        }};
    }
    match outcome {
        AcquisitionOutcome::Acquired => record!("acquired"),
        AcquisitionOutcome::Contended => record!("contended"),
        AcquisitionOutcome::NoQuorum => record!("no_quorum"),
        AcquisitionOutcome::Lost => record!("lost"),
        AcquisitionOutcome::Error => record!("error"),
    }
}

/// Records holds renewed by a majority in one round.
pub fn renewed(holds: usize) {
    if holds > 0 {
        metrics::counter!(RENEWALS).increment(u64::try_from(holds).unwrap_or(u64::MAX));
    }
}

/// Records a hold whose renewal no majority confirmed in one round.
pub fn renewal_failed() {
    metrics::counter!(RENEWAL_FAILURES).increment(1);
}

/// Records a hold lost for `reason`.
pub fn lost(reason: LostReason) {
    metrics::counter!(LOST, "reason" => lost_label(reason)).increment(1);
}

fn lost_label(reason: LostReason) -> &'static str {
    match reason {
        LostReason::NotOwner => "not_owner",
        LostReason::QuorumLost => "quorum_lost",
        LostReason::MaxHoldReached => "max_hold_reached",
        LostReason::LeaseExpired => "lease_expired",
        LostReason::Shutdown => "shutdown",
        LostReason::Abandoned => "abandoned",
    }
}

/// Records a failed request to `node`.
pub(crate) fn node_error(node: &NodeAddress, kind: &NodeErrorKind) {
    let kind = match kind {
        NodeErrorKind::Timeout(_) => "timeout",
        NodeErrorKind::Connect(_) => "connect",
        NodeErrorKind::Command(_) => "command",
        NodeErrorKind::NotReplicated { .. } => "not_replicated",
    };
    metrics::counter!(NODE_ERRORS, "node" => node.as_str().to_owned(), "kind" => kind).increment(1);
}

/// Times one hold: records [`HOLD_SECONDS`] when dropped, however the hold ends.
#[derive(Debug)]
pub struct HoldClock(Instant);

impl HoldClock {
    /// Starts timing a hold now.
    pub fn start() -> Self {
        Self(Instant::now())
    }
}

impl Drop for HoldClock {
    fn drop(&mut self) {
        metrics::histogram!(HOLD_SECONDS).record(self.0.elapsed().as_secs_f64());
    }
}

/// One unit of a gauge ([`WAITERS`] or [`SUBSCRIPTIONS`]) for as long as it lives.
#[derive(Debug)]
pub struct GaugeUnit(&'static str);

impl GaugeUnit {
    /// Adds one to the gauge `name` until the unit is dropped.
    pub fn new(name: &'static str) -> Self {
        metrics::gauge!(name).increment(1.0);
        Self(name)
    }
}

impl Drop for GaugeUnit {
    fn drop(&mut self) {
        metrics::gauge!(self.0).decrement(1.0);
    }
}
