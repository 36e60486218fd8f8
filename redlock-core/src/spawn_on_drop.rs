//! Clean-up that runs even when the future that needed it is dropped.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

/// Holds a clean-up future and spawns it on the current tokio runtime if dropped while armed.
///
/// An acquisition arms one before sending anything (the clean-up releases what may have been
/// taken) and disarms it once the outcome is settled, so dropping the acquisition at any await
/// point leaves no lock behind. Outside a runtime nothing can be spawned: the clean-up is skipped
/// and the lease expires on its own.
///
/// # Examples
///
/// ```
/// use redlock_core::lock_kind::SpawnOnDrop;
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let (tx, rx) = tokio::sync::oneshot::channel();
/// let guard = SpawnOnDrop::new(async move { tx.send("cleaned up").ok(); });
/// drop(guard); // armed: the clean-up is spawned
/// assert_eq!(rx.await.unwrap(), "cleaned up");
///
/// let guard = SpawnOnDrop::new(async { unreachable!() });
/// guard.disarm(); // settled: nothing runs
/// # }
/// ```
#[must_use = "dropping the guard at once runs the clean-up at once"]
pub struct SpawnOnDrop<F>
where
    F: Future<Output = ()> + Send + 'static,
{
    cleanup: Option<F>,
}

impl<F> SpawnOnDrop<F>
where
    F: Future<Output = ()> + Send + 'static,
{
    /// Arms the guard with a clean-up (not started: futures are lazy).
    pub fn new(cleanup: F) -> Self {
        Self {
            cleanup: Some(cleanup),
        }
    }

    /// Settles: the clean-up will not run.
    pub fn disarm(mut self) {
        self.cleanup = None;
    }
}

impl<F> Drop for SpawnOnDrop<F>
where
    F: Future<Output = ()> + Send + 'static,
{
    fn drop(&mut self) {
        if let Some(cleanup) = self.cleanup.take() {
            spawn_cleanup(cleanup);
        }
    }
}

/// Spawns a clean-up on the current tokio runtime; outside one, skips it (the lease expires on
/// its own) and says so in the log. Returns whether it was spawned. [`cleanups_settled`] waits
/// for it.
pub fn spawn_cleanup<F>(cleanup: F) -> bool
where
    F: Future<Output = ()> + Send + 'static,
{
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => {
            let outstanding = Outstanding::new();
            runtime.spawn(async move {
                let _outstanding = outstanding;
                cleanup.await;
            });
            true
        }
        Err(_) => {
            tracing::warn!("dropped outside a tokio runtime: the lock is left to expire");
            false
        }
    }
}

/// Clean-ups spawned by this process and not finished (or dropped with their runtime) yet.
static OUTSTANDING: AtomicUsize = AtomicUsize::new(0);
/// Told when the last outstanding clean-up ends.
static SETTLED: Notify = Notify::const_new();

/// One spawned clean-up, counted from its spawning until its future is done or dropped.
struct Outstanding;

impl Outstanding {
    fn new() -> Self {
        OUTSTANDING.fetch_add(1, Ordering::SeqCst);
        Self
    }
}

impl Drop for Outstanding {
    fn drop(&mut self) {
        if OUTSTANDING.fetch_sub(1, Ordering::SeqCst) == 1 {
            SETTLED.notify_waiters();
        }
    }
}

/// Waits, at most `within`, until every clean-up this process spawned has finished: the
/// releases and undos still on their way to nodes a decision did not wait for (a node that is
/// reconnecting, or slow), and the replies they await. Returns whether they all did.
///
/// A process that is about to exit (a command-line tool, a job) calls it after its last
/// release or `shutdown()`: dropping the runtime drops what was not sent yet, and those nodes
/// keep the lock until its lease ends. A long-running service never needs it.
///
/// # Cancel safety
///
/// Cancel safe: it only waits.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let (done, finished) = tokio::sync::oneshot::channel::<()>();
/// redlock_core::lock_kind::spawn_cleanup(async move {
///     let _ = finished.await;
/// });
/// assert!(!redlock_core::cleanups_settled(Duration::from_millis(10)).await);
/// done.send(()).unwrap();
/// assert!(redlock_core::cleanups_settled(Duration::from_secs(5)).await);
/// # }
/// ```
pub async fn cleanups_settled(within: Duration) -> bool {
    let settled = async {
        loop {
            let notified = SETTLED.notified();
            tokio::pin!(notified);
            // Registered before the count is read: an end in between still wakes this.
            notified.as_mut().enable();
            if OUTSTANDING.load(Ordering::SeqCst) == 0 {
                return;
            }
            notified.await;
        }
    };
    tokio::time::timeout(within, settled).await.is_ok()
}
