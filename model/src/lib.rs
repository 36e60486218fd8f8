//! The reentrant Redlock protocol of `redlock-reentrant`, model-checked.
//!
//! The fault suite samples executions of the real library; this crate explores *every*
//! execution of a model of it up to a bound, with the [`stateright`] model checker ([`check`]
//! searches depth first for every state; [`find`] breadth first for a short counterexample).
//! The model mirrors the Lua scripts ([`master`]) and the client's hold lifecycle ([`client`],
//! [`system`]): per-master grants with the hold count and the fencing candidate, the majority,
//! the validity with drift, the token's write-back, renewal, releases (confirmed, kept for a
//! retry, or given up), undoing a failed attempt, and nested holds. Faults: messages delayed and reordered across links (each link
//! keeps TCP's order), a request overtaking another on its link (a Redis Cluster member),
//! connections lost with what is in flight, masters restarted with or without their data, keys
//! expiring early or late within the drift, clients paused and crashed.
//!
//! The promises of `docs/safety.md` are [`properties`]; the broken variants ([`Variant`]) are
//! bugs the checker must catch, each with its counterexample. The read-write lock has a model of
//! its own ([`rw`]), and so have the quorum designs of the semaphore and the latch
//! ([`quorum_family`]: the acknowledgement quorum and the grow-only set, against the plain
//! majority and the counter).
//!
//! ```
//! use redlock_model::{check, find, scenarios, Variant};
//!
//! // The real protocol keeps every promise in a scenario.
//! let report = check(&scenarios::lost_connection());
//! assert!(report.passed(), "{}", report.summary());
//!
//! // A broken variant is caught, with a path that shows how.
//! let (scenario, property) = scenarios::catching(Variant::NestedShortensTtl);
//! let (counterexample, _) = find(&scenario, property);
//! assert!(counterexample.expect("caught").steps > 0);
//! ```

pub mod bounded;
pub mod client;
pub mod config;
pub mod history;
pub mod master;
pub mod network;
pub mod properties;
pub mod quorum_family;
mod report;
pub mod rw;
pub mod scenarios;
pub mod system;

pub use config::{Config, Faults, Tick, Variant};
pub use report::{check, check_within, find, Counterexample, Report};
pub use system::{Action, State, System};
