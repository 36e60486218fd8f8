//! Clean-up that runs even when the future that needed it is dropped.

use std::future::Future;

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
/// use redlock_core::SpawnOnDrop;
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
/// its own) and says so in the log. Returns whether it was spawned.
pub fn spawn_cleanup<F>(cleanup: F) -> bool
where
    F: Future<Output = ()> + Send + 'static,
{
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => {
            runtime.spawn(cleanup);
            true
        }
        Err(_) => {
            tracing::warn!("dropped outside a tokio runtime: the lock is left to expire");
            false
        }
    }
}
