//! Reentrancy: the same task locks a lock it already holds, and an owner that moves between tasks.
//!
//! An `RLock` is reentrant, like Java's `ReentrantLock` or Redisson's `RLock`: its owner is the
//! current tokio task (plus the client's id), and a task that already holds the lock can take it
//! again. Each `lock` counts up, each `unlock` counts down, and the lock frees at zero.
//!
//! 1. `transfer()` locks `account:42` and calls `debit()`, which locks it again: the hold count
//!    goes 1, 2, 1, 0, and both depths see the same fencing token. Meanwhile another task's
//!    `try_lock` fails: another task is another owner.
//! 2. An explicit owner (`client.new_owner()` + `lock.with_owner(&owner)`) takes the lock in one
//!    task and releases it in another, which a task-owned lock refuses (`Error::NotOwner`).
//!
//! Run it from the workspace root (it needs `redis-server` on `PATH`):
//!
//! ```text
//! cargo run -p redlock-examples --example nested
//! ```
//!
//! It starts three local Redis masters and stops them at the end (on Ctrl-C too), and exits
//! with status 1 if a step does not behave as described.

use std::process::ExitCode;
use std::time::Duration;

#[macro_use]
mod support;
use support::Result;

use redlock_reentrant::{Error, LockClient, RLock};

#[tokio::main]
async fn main() -> ExitCode {
    support::with_three_masters("nested", run).await
}

async fn run(urls: Vec<String>) -> Result {
    let client = LockClient::connect(urls).await?;

    println!("---- 1. the same task locks `account:42` twice ----");
    // Run it in a task, as service code does: the task is the lock's owner.
    let lock = client.get_lock("account:42");
    tokio::spawn(transfer(lock.clone())).await??;
    check!(!lock.is_locked().await?, "the lock is still held");
    println!("after transfer(): `account:42` is free");

    println!("---- 2. an explicit owner: lock in one task, unlock in another ----");
    let owner = client.new_owner();
    let owned = client.get_lock("account:42").with_owner(&owner);
    let locker = owned.clone();
    tokio::spawn(async move { locker.lock().await }).await??;
    // Task A has ended, but the hold belongs to `owner`, not to the task: still held.
    let count = owned.hold_count().await?;
    println!("task A locked it as the explicit owner and ended; hold_count = {count}");
    check!(count == 1, "expected hold count 1, got {count}");
    let (plain, unlocker) = (client.get_lock("account:42"), owned.clone());
    tokio::spawn(unlock_elsewhere(plain, unlocker)).await??;
    check!(!owned.is_locked().await?, "the lock is still held");

    client.shutdown().await;
    println!("done: every step behaved as described");
    Ok(())
}

/// Depth 1: takes the lock, then calls `debit`, which takes it again.
async fn transfer(lock: RLock) -> Result {
    let guard = lock.acquire().await?;
    // A fencing token grows with every new holder (the nodes derive it from their clock in
    // microseconds, so it is a big number); pass it along with writes to the account.
    let token = guard.fencing_token();
    let count = lock.hold_count().await?;
    println!("transfer(): locked,  hold_count = {count}, fencing token {token}");
    check!(count == 1, "expected hold count 1, got {count}");

    debit(&lock, token).await?;

    let count = lock.hold_count().await?;
    println!("transfer(): back,    hold_count = {count}");
    check!(count == 1, "expected hold count 1, got {count}");
    guard.unlock().await?;
    let count = lock.hold_count().await?;
    println!("transfer(): unlocked, hold_count = {count}");
    check!(count == 0, "expected hold count 0, got {count}");
    Ok(())
}

/// Depth 2: the same task locks again (reentrant), while another task is refused.
async fn debit(lock: &RLock, outer_token: u64) -> Result {
    let guard = lock.acquire().await?; // would deadlock with a non-reentrant lock
    let (token, count) = (guard.fencing_token(), lock.hold_count().await?);
    println!("  debit(): locked again, hold_count = {count}, fencing token {token}");
    check!(count == 2, "expected hold count 2, got {count}");
    check!(
        token == outer_token,
        "nested token {token} != {outer_token}"
    );

    // Another task is another owner: it cannot get in, even within the same client.
    let other = lock.clone();
    let taken = tokio::spawn(async move { other.try_lock(Duration::ZERO, None).await }).await??;
    println!("  debit(): another task's try_lock -> {taken}");
    check!(!taken, "another task took the lock while this task held it");

    guard.unlock().await?; // count 2 -> 1: still held
    Ok(())
}

/// Task B: the lock as this task is refused; the lock bound to the explicit owner unlocks.
async fn unlock_elsewhere(as_this_task: RLock, as_owner: RLock) -> Result {
    let refused = as_this_task.unlock().await;
    check!(
        matches!(refused, Err(Error::NotOwner { .. })),
        "{refused:?}"
    );
    println!("task B, as itself: unlock refused (not the owner)");
    as_owner.unlock().await?;
    println!("task B, as the explicit owner: unlocked");
    Ok(())
}
