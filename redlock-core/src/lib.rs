//! The Redlock quorum over N independent Redis masters.
//!
//! Use this crate directly when you want a plain, non-reentrant, fixed-lease lock with the
//! Redlock algorithm, or when you build another lock on top of its fan-out. Most services want
//! `redlock-reentrant`, which re-exports this crate and adds reentrancy, waiting by pub/sub and
//! lease renewal.
//!
//! How a lock is taken (see `docs/algorithm.md` for the whole argument):
//! 1. a fresh random [`OwnerToken`] is the lock's value;
//! 2. the acquire script runs on all N nodes in parallel, each bounded by a per-node timeout much
//!    smaller than the lease, timed with a monotonic clock;
//! 3. the lock is held iff a majority (`N / 2 + 1`) granted it and the validity
//!    `lease - elapsed - drift` is still positive, with `drift = lease * 1 % + 2 ms`;
//! 4. otherwise it is released on every node (a grant may have landed with its reply lost) and
//!    tried again after a jittered backoff.
//!
//! ```no_run
//! use std::time::Duration;
//! use redlock_core::{Error, Redlock, RedlockConfig};
//!
//! # async fn run() -> Result<(), Error> {
//! let redlock = Redlock::new(RedlockConfig::with_nodes([
//!     "redis://127.0.0.1:7001",
//!     "redis://127.0.0.1:7002",
//!     "redis://127.0.0.1:7003",
//!     "redis://127.0.0.1:7004",
//!     "redis://127.0.0.1:7005",
//! ]))?;
//!
//! match redlock.acquire("invoice:1042", Duration::from_secs(10)).await {
//!     Ok(lease) => {
//!         // Do the work while lease.is_valid(); extend if it takes longer.
//!         let lease = redlock.extend(&lease, Duration::from_secs(10)).await?;
//!         redlock.release(&lease).await?;
//!     }
//!     Err(err) if err.is_contended() => println!("someone else is on it"),
//!     Err(err) => return Err(err),
//! }
//! # Ok(()) }
//! ```
//!
//! Other lock kinds reuse the same fan-out through [`lock_kind`]: [`Redlock::nodes`] runs a
//! script on every node and returns every node's reply and the quorum verdict in a
//! [`lock_kind::FanOut`].

mod applied;
mod cluster;
mod config;
mod error;
mod finish_on_drop;
mod lease;
mod lock_script;
mod lost_reason;
mod lua;
mod members;
mod node;
mod node_address;
mod nodes;
mod owner;
pub mod quorum;
mod readiness;
mod redlock;
mod retry;
#[cfg(feature = "sabotage")]
#[doc(hidden)]
pub mod sabotage;
pub mod telemetry;
mod unpoisoned;

pub use cluster::is_cluster_url;
pub use config::{RedlockConfig, ReplicaAcks, Timing};
pub use error::{ConnectError, Error, InvalidArgument, NodeError, NodeErrorKind};
pub use finish_on_drop::cleanups_settled;
pub use lease::Lease;
pub use lost_reason::LostReason;
pub use node_address::NodeAddress;
pub use owner::OwnerToken;
pub use readiness::{NodeStatus, Readiness};
pub use redlock::Redlock;
pub use retry::{Backoff, RetryPolicy};

/// What a lock kind built on this quorum needs: scripts, the fan-out over every node and its
/// verdicts, and cleanups that finish in the background. Most users never name these.
pub mod lock_kind {
    pub use crate::applied::Applied;
    pub use crate::finish_on_drop::{spawn_cleanup, Cleanup, FinishOnDrop};
    pub use crate::lock_script::{LockScript, ScriptCall};
    pub use crate::node::{Endpoint, Node};
    pub use crate::nodes::{FanOut, NodeSet, Slot, BATCHES_IN_FLIGHT};
    pub use crate::unpoisoned::unpoisoned;
}
// Named from the crate's root inside the crate.
use lock_kind::{
    spawn_cleanup, Applied, FanOut, FinishOnDrop, LockScript, Node, NodeSet, ScriptCall,
};

/// The deadpool-redis crate behind the node pools.
pub use deadpool_redis;
/// The redis-rs crate this library speaks, so your versions always match.
pub use redis;

/// This crate's README example compiles (checked by `cargo test --doc`).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct CrateReadme;
