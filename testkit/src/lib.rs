//! The redlock crates' test kit: real `redis-server` processes, no mocks, and no lock.
//!
//! It is lock-agnostic, as redis-rs's `redis-test` is: it depends on no redlock crate. It runs
//! servers that really crash ([`RedisServer::kill`]), pause ([`RedisServer::stop`], SIGSTOP),
//! and come back empty ([`RedisServer::restart`], as a master without persistence does), puts
//! fault-injecting TCP proxies in front of them, drives child processes, and checks the history
//! they record. The lock comes from the package that drives it: `redlock-tests` (`tests/`), with
//! the cross-crate scenarios, the fault-injection suite and its worker binaries.
//!
//! Each server listens on a free `127.0.0.1` port, below the kernel's ephemeral range when that
//! starts above 10000 (so no client's outgoing connection can hold it while the server
//! restarts), and kept from the process's other servers until it drops. It keeps nothing on
//! disk, logs to a temporary directory and is killed when dropped; a failing test prints the
//! server log's tail.
//!
//! It needs `redis-server` on `PATH`, or its path in `REDIS_SERVER_BIN`
//! (see [`HarnessError::RedisServerMissing`] for how to install it).
//!
//! ```no_run
//! use redlock_testkit::RedisCluster;
//!
//! // Five independent masters, as Redlock recommends.
//! let cluster = RedisCluster::start(5);
//! let urls: Vec<String> = cluster.urls();
//! // ... acquire a lock on `urls` ...
//! cluster.kill(0); // a crashed master
//! cluster.stop(1); // a frozen one: connections stay open, nothing answers
//! cluster.resume(1);
//! cluster.restart(2); // back on the same port, without its keys
//! assert_eq!(cluster.keys_on(2, "*"), Vec::<String>::new());
//! # let _ = urls;
//! ```
//!
//! # The fault-injection suite
//!
//! [`FaultRun`] drives the suite's scenarios (`redlock-tests`' `tests/fault_*.rs`): five masters,
//! a [`FencedResource`], worker processes (that package's `fault_worker` binary, configured by a
//! [`WorkerSpec`]) that reach each master through a [`ProxyGrid`] cell of their own, faults
//! injected by hand or by the seeded [`Nemesis`], and every event in one [`History`] on the
//! machine's monotonic clock. [`check_all`] runs the checkers over it; `docs/safety.md` says
//! what they prove.

mod captured_logs;
mod check;
mod child;
mod cluster;
mod error;
mod fault_run;
mod fenced;
mod fixtures;
pub mod history;
mod holder;
mod introspect;
mod monitor;
mod nemesis;
mod outcome;
mod probe;
mod process;
mod proxy;
mod server;
mod sharded;
mod worker_process;
mod worker_spec;

pub use captured_logs::CapturedLogs;
pub use check::{
    all_passed, beliefs, check_all, check_counter, check_fencing, check_overlap, check_quiescence,
    check_token_order, kill_to_reacquire, lost_after_resume, success_rate, Belief, BeliefEnd,
    CheckConfig, Report,
};
pub use cluster::RedisCluster;
pub use error::{HarnessError, INSTALL_HINT};
pub use fault_run::{actor, one_scenario_at_a_time, FaultRun, RunConfig};
pub use fenced::{Access, FencedClient, FencedResource};
pub use fixtures::{
    error_chain, eventually, eventually_async, hashes, pttls, rival_hold, seeded_rng, test_seed,
};
pub use history::History;
pub use holder::HolderProcess;
pub use introspect::{
    client_connections, command_calls, error_counts, kill_pubsub_clients, kill_resp3_clients,
    parse_commandstats, parse_errorstats, pubsub_clients, reset_command_stats, shard_subscribers,
    subscribers,
};
pub use monitor::{monitored_command, Monitor};
pub use nemesis::{FaultKind, Nemesis};
pub use outcome::Outcome;
pub use proxy::{Fault, FaultProxy, ProxyGrid};
pub use server::{RedisServer, RedisServerBuilder, REDIS_SERVER_BIN_ENV};
pub use sharded::{cluster_ok, ShardedCluster, CLUSTER_NODE_TIMEOUT};
pub use worker_process::WorkerProcess;
pub use worker_spec::{Sabotage, WorkerMode, WorkerSpec};
