//! `RLock` for tokio: a reentrant distributed lock on N independent Redis masters.
//!
//! Use it when one holder at a time must do something across many processes and hosts: a
//! cron job that must run once, an order processed once, a migration that must not race.
//!
//! - **Reentrant**: one Redis hash per lock; the field names the hold (its owner, client UUID +
//!   tokio task, and the hold's number), the value the hold count. Nested `lock()` in the same
//!   task counts up.
//! - **Renewed while the holder lives**: `lock()` takes the watchdog lease (30 s) and one task
//!   per client renews it every 10 s; when the process dies, the lock frees within 30 s.
//! - **Told when lost**: every hold has a lost signal ([`LockGuard::lost`], a
//!   `CancellationToken`), and operations on a lost hold say [`Error::LockLost`].
//! - **Fencing tokens** that strictly increase from one holder to the next, also when a
//!   minority of nodes failed or restarted empty.
//! - **Survives a minority of dead nodes**: every operation runs on the Redlock quorum
//!   (`redlock-core`).
//! - **Waiters wake on release** (pub/sub); every wait is also bounded by what the nodes say
//!   (a holder's lease, a waiter's heartbeat), so a lost message costs latency, not the wait.
//!
//! ```no_run
//! use std::time::Duration;
//! use redlock_reentrant::{LockClient, RLock};
//!
//! # async fn run() -> Result<(), redlock_reentrant::Error> {
//! let client = LockClient::connect([
//!     "redis://10.0.0.1:6379",
//!     "redis://10.0.0.2:6379",
//!     "redis://10.0.0.3:6379",
//! ])
//! .await?;
//! let lock: RLock = client.get_lock("orders:42");
//!
//! // A guard: fencing token, lost signal, released when dropped (a panic or an early
//! // return included).
//! let guard = lock.acquire().await?;
//! let token = guard.fencing_token();
//! tokio::select! {
//!     reason = guard.lost() => eprintln!("lost the lock: {reason}"),
//!     () = process_order(42, token) => {}
//! }
//! guard.unlock().await?;
//!
//! // Redisson's verbs work too; the hold then belongs to the task until its `unlock()`, which
//! // a panic between the two skips (see `RLock::lock`).
//! if lock.try_lock(Duration::from_secs(5), None).await? {
//!     lock.unlock().await?;
//! }
//! # Ok(()) }
//! # async fn process_order(_id: u64, _token: u64) {}
//! ```
//!
//! This crate re-exports everything its users name from `redlock-core` and `redlock-watchdog`
//! (one [`Error`] type for every lock; the plain [`Redlock`] lock and its [`Lease`]; the
//! watchdog-renewed plain lock, [`Watchdog::acquire`]), and the `redis` and `deadpool_redis`
//! crates it speaks, so versions always match.

mod acquire;
mod client;
mod config;
mod consensus;
mod env;
mod fencing;
mod fencing_stats;
mod gate;
mod guard;
mod hold;
mod holds;
mod inner;
mod inspect;
mod kind;
mod latch;
mod lua;
mod multilock;
mod one_master;
mod owner;
mod rlock;
mod rwlock;
#[cfg(feature = "sabotage")]
#[doc(hidden)]
pub mod sabotage;
mod semaphore;
mod semaphore_compat;
#[cfg(test)]
mod test_support;
mod unlock;
mod wait;
mod wait_strategy;
mod wakeup;

pub use client::{LockClient, LockClientBuilder};
pub use config::{ConfigError, LockClientConfig, ReplicaAcksConfig, RetryConfig};
pub use fencing_stats::FencingStats;
pub use guard::LockGuard;
pub use inner::FENCE_COUNTER;
pub use inspect::LockStatus;
pub use latch::{RCountDownLatch, LATCH_TTL};
pub use multilock::{MultiGuard, MultiLock};
pub use owner::LockOwner;
pub use rlock::RLock;
pub use rwlock::RReadWriteLock;
pub use semaphore::{Permit, PermitId, RPermitExpirableSemaphore, SemaphoreStatus};
pub use semaphore_compat::{RSemaphore, UnownedSemaphore};
pub use wait_strategy::WaitStrategy;

/// The errors of every lock of the workspace: one type, defined by the quorum core.
pub use redlock_core::Error;
pub use redlock_core::{
    cleanups_settled, is_cluster_url, quorum, redis, telemetry, ConnectError, InvalidArgument,
    Lease, LostReason, NodeAddress, NodeError, NodeErrorKind, NodeStatus, OwnerToken, Readiness,
    Redlock, RedlockConfig, ReplicaAcks, RetryPolicy, Timing,
};
pub use redlock_watchdog::{
    LostSignal, RenewedLease, Watchdog, WatchdogConfig, WatchdogStats, RENEWING_TARGET,
};
pub use tokio_util::sync::CancellationToken;

/// The README's example compiles (checked by `cargo test --doc`).
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct ReadmeExample;

/// This crate's README example compiles (checked by `cargo test --doc`).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct CrateReadme;

/// Every public future can be spawned on a multi-threaded runtime: a change that kept
/// something not `Send` across an await (a lazy iterator's closure, a lock guard) fails to
/// compile here rather than in a user's `tokio::spawn`.
#[cfg(test)]
#[allow(dead_code, clippy::let_underscore_future)]
fn public_futures_are_send(client: &LockClient, lock: &RLock, guard: LockGuard) {
    fn send<T: Send>(_: T) {}
    send(client.shutdown());
    send(client.readiness());
    send(lock.lock());
    send(lock.lock_with_lease(std::time::Duration::from_secs(1)));
    send(lock.try_lock(std::time::Duration::ZERO, None));
    send(lock.acquire());
    send(lock.try_acquire(std::time::Duration::ZERO, None));
    send(lock.unlock());
    send(lock.force_unlock());
    send(lock.status());
    send(guard.unlock());
    send(cleanups_settled(std::time::Duration::ZERO));
    if let Ok(semaphore) = client.get_permit_expirable_semaphore("s") {
        send(semaphore.acquire(1));
        send(semaphore.try_acquire(1, std::time::Duration::ZERO, None));
        send(semaphore.release(&PermitId::new("x:1")));
        send(semaphore.status());
        send(semaphore.try_set_permits(1));
        send(semaphore.add_permits(1));
        send(semaphore.drain_permits());
        send(semaphore.delete());
    }
    if let Ok(latch) = client.get_count_down_latch("l") {
        send(latch.try_set_count(1));
        send(latch.count_down());
        send(latch.count());
        send(latch.wait(std::time::Duration::ZERO));
        send(latch.delete());
    }
    if let Ok(semaphore) = client.get_semaphore("s") {
        send(semaphore.acquire(1));
        send(semaphore.release(1));
    }
    if let Ok(semaphore) = client.get_unowned_semaphore("s") {
        send(semaphore.acquire(1));
        send(semaphore.release(1));
    }
    let multi = MultiLock::new([lock.clone()]).expect("one member");
    send(multi.acquire());
    send(multi.try_acquire(std::time::Duration::ZERO, None));
}
