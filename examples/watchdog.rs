//! The watchdog: a lock held longer than its lease, and the lost signal when the holder pauses.
//!
//! A lock taken without a lease (`lock()`, `acquire()`) gets the watchdog lease, here 3 s, and
//! the client renews it every 1 s for as long as the holder lives. If the holder stops running,
//! renewals stop, the lease runs out, and someone else may take the lock.
//!
//! 1. Client A holds `nightly-batch` and works for 7.5 s, more than twice its lease: its
//!    remaining TTL, printed every second, stays near 2.5 s because it is renewed.
//! 2. A holder is paused for 5 s, like a process in a long stop-the-world GC pause. It runs on
//!    its own single-threaded runtime in its own thread, and `std::thread::sleep` blocks that
//!    thread, watchdog included. Its lease runs out; client B, waiting with `try_lock(10 s)`,
//!    takes the lock. When the holder resumes, `guard.lost()` tells it why it lost the lock, and
//!    `guard.unlock()` answers `Error::LockLost`: it must not trust work done during the pause.
//!
//! Run it from the workspace root (it needs `redis-server` on `PATH`):
//!
//! ```text
//! cargo run -p redlock-examples --example watchdog
//! ```
//!
//! It starts three local Redis masters and stops them at the end (on Ctrl-C too), and exits
//! with status 1 if a step does not behave as described.

use std::process::ExitCode;
use std::time::{Duration, Instant};

#[macro_use]
mod support;
use support::Result;

use redlock_reentrant::{Error, LockClient};
use tokio::sync::oneshot;

const LOCK: &str = "nightly-batch";
/// The watchdog lease; it is renewed every third of it (1 s).
const LEASE: Duration = Duration::from_secs(3);
/// How long the paused holder is frozen: longer than the lease.
const PAUSE: Duration = Duration::from_secs(5);

#[tokio::main]
async fn main() -> ExitCode {
    support::with_three_masters("watchdog", run).await
}

/// A client whose locks get a 3 s lease, renewed every 1 s.
async fn client(urls: Vec<String>) -> Result<LockClient> {
    Ok(LockClient::builder()
        .nodes(urls)
        .watchdog_timeout(LEASE)
        .build()
        .await?)
}

async fn run(urls: Vec<String>) -> Result {
    say!("---- 1. working for 7.5 s under a 3 s lease ----");
    let a = client(urls.clone()).await?;
    let guard = a.get_lock(LOCK).acquire().await?;
    say!("client A took `{LOCK}` (lease {LEASE:?}, renewed every 1 s)");
    // Look half-way between two renewals, where the TTL is lowest: about 2.5 s. Without
    // renewal it would reach zero at 3 s and the lock would be gone.
    tokio::time::sleep(Duration::from_millis(500)).await;
    for _ in 0..7 {
        tokio::time::sleep(Duration::from_secs(1)).await; // "work"
        let ttl = guard.lock().remaining_ttl().await?.unwrap_or_default();
        say!(
            "client A still working: remaining TTL {} ms",
            ttl.as_millis()
        );
        check!(ttl > Duration::from_secs(1), "the lease was not renewed");
    }
    guard.unlock().await?;
    say!("client A done, unlocked");
    a.shutdown().await;

    say!("---- 2. the holder freezes for {PAUSE:?} ----");
    let (acquired_tx, acquired_rx) = oneshot::channel();
    let holder_urls = urls.clone();
    let holder = std::thread::spawn(move || paused_holder(holder_urls, acquired_tx));
    if acquired_rx.await.is_err() {
        return join(holder).await; // it ended before taking the lock: its error says why
    }

    let b = client(urls).await?;
    let lock_b = b.get_lock(LOCK);
    say!("client B: try_lock(10 s)...");
    let waiting = Instant::now();
    let taken = lock_b.try_lock(Duration::from_secs(10), None).await?;
    check!(taken, "client B did not get the lock within 10 s");
    say!(
        "client B took `{LOCK}` after {:.1?}: the frozen holder's lease ran out",
        waiting.elapsed()
    );

    join(holder).await?;
    lock_b.unlock().await?;
    say!("client B unlocked");
    b.shutdown().await;
    say!("done: every step behaved as described");
    Ok(())
}

/// The holder that freezes: its own thread and single-threaded runtime, so blocking the thread
/// stops everything of this client, its watchdog too, like a GC pause stops a whole process.
fn paused_holder(urls: Vec<String>, acquired: oneshot::Sender<()>) -> Result {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let client = client(urls).await?;
        let guard = client.get_lock(LOCK).acquire().await?;
        say!("holder took `{LOCK}`, then freezes for {PAUSE:?}: nothing renews its lease");
        let _ = acquired.send(());
        std::thread::sleep(PAUSE); // the pause: this thread, and so this runtime, stands still

        say!("holder resumes, unaware it was frozen");
        let lost = tokio::time::timeout(Duration::from_secs(5), guard.lost()).await;
        let reason = lost.map_err(|_| "the holder was not told it lost the lock")?;
        // From the inside, a pause looks like renewals that were not confirmed before the
        // lease ran out: the watchdog only knows that the lease ran out unconfirmed.
        say!("holder: lost signal fired: {reason}");
        match guard.unlock().await {
            Err(err @ Error::LockLost { .. }) => say!("holder: unlock -> Error::LockLost ({err})"),
            other => return Err(format!("expected Error::LockLost, got {other:?}").into()),
        }
        client.shutdown().await;
        Ok(())
    })
}

/// Waits for the holder's thread without blocking this runtime, and returns its outcome.
async fn join(holder: std::thread::JoinHandle<Result>) -> Result {
    let joined = tokio::task::spawn_blocking(move || holder.join()).await?;
    joined.map_err(|_| "the holder thread panicked")?
}
