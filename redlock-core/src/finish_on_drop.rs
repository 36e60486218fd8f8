//! Clean-up that runs even when the future that needed it is dropped.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

/// A clean-up, as [`FinishOnDrop`] runs one in the background.
pub type Cleanup = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// A value whose work must be finished if the future that holds it is dropped: the one drop
/// guard of the library.
///
/// Dropped while armed, it finishes the work in the background (`finish`, spawned on the
/// current tokio runtime) or does what can be done at once where nothing can be spawned
/// (`now`: outside a runtime, or when a runtime that is shutting down drops the task before it
/// starts). A guard made [`FinishOnDrop::now`] does it at once always. [`FinishOnDrop::disarm`]
/// settles it and hands the value back. An acquisition arms one before sending anything (its
/// clean-up undoes what may have been taken), so dropping it at any await point leaves no lock
/// behind.
///
/// # Examples
///
/// ```
/// use redlock_core::lock_kind::FinishOnDrop;
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let (tx, rx) = tokio::sync::oneshot::channel();
/// let guard = FinishOnDrop::spawning(async move { tx.send("cleaned up").ok(); });
/// drop(guard); // armed: the clean-up is spawned
/// assert_eq!(rx.await.unwrap(), "cleaned up");
///
/// let guard = FinishOnDrop::spawning(async { unreachable!() });
/// guard.disarm(); // settled: nothing runs
///
/// // No runtime on this thread: what can be done at once is.
/// let (tx, rx) = std::sync::mpsc::channel();
/// let guard = FinishOnDrop::new(tx, |tx| Box::pin(async move { tx.send("later").ok(); }), |tx| {
///     tx.send("at once").ok();
/// });
/// std::thread::spawn(move || drop(guard)).join().unwrap();
/// assert_eq!(rx.recv().unwrap(), "at once");
/// # }
/// ```
#[must_use = "dropping the guard at once runs the clean-up at once"]
pub struct FinishOnDrop<T: Send + 'static> {
    value: Option<T>,
    /// The work finished in the background; `None`: always done at once.
    finish: Option<fn(T) -> Cleanup>,
    now: fn(T),
}

impl<T: Send + 'static> FinishOnDrop<T> {
    /// Arms a guard over `value`: dropped armed, `finish(value)` runs in a spawned task, or
    /// `now(value)` at once where nothing can be spawned.
    pub fn new(value: T, finish: fn(T) -> Cleanup, now: fn(T)) -> Self {
        Self {
            value: Some(value),
            finish: Some(finish),
            now,
        }
    }

    /// Arms a guard that, dropped armed, does `now(value)` at once, whatever the runtime.
    pub fn now(value: T, now: fn(T)) -> Self {
        Self {
            value: Some(value),
            finish: None,
            now,
        }
    }

    /// Settles: nothing runs, and the value comes back.
    pub fn disarm(mut self) -> T {
        self.value.take().expect("armed until disarmed or dropped")
    }
}

impl<F> FinishOnDrop<F>
where
    F: Future<Output = ()> + Send + 'static,
{
    /// Arms a guard with a clean-up future (not started: futures are lazy), spawned if the
    /// guard is dropped armed. Outside a runtime it is skipped (the lease expires on its own)
    /// and the log says so.
    pub fn spawning(cleanup: F) -> Self {
        Self::new(cleanup, |cleanup| Box::pin(cleanup), left_to_expire)
    }
}

impl<T: Send + 'static> std::ops::Deref for FinishOnDrop<T> {
    type Target = T;

    fn deref(&self) -> &T {
        self.value
            .as_ref()
            .expect("armed until disarmed or dropped")
    }
}

impl<T: Send + 'static> std::ops::DerefMut for FinishOnDrop<T> {
    fn deref_mut(&mut self) -> &mut T {
        self.value
            .as_mut()
            .expect("armed until disarmed or dropped")
    }
}

impl<T: Send + 'static> std::fmt::Debug for FinishOnDrop<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FinishOnDrop")
            .field("armed", &self.value.is_some())
            .finish_non_exhaustive()
    }
}

impl<T: Send + 'static> Drop for FinishOnDrop<T> {
    fn drop(&mut self) {
        let Some(value) = self.value.take() else {
            return;
        };
        match self.finish {
            Some(finish) => finish_in_background(value, finish, self.now),
            None => (self.now)(value),
        }
    }
}

/// Runs `finish(value)` in a task of its own on the current runtime, or `now(value)` at once
/// where nothing can be spawned: outside a runtime, or when the runtime drops the task before
/// it starts (it is shutting down). [`cleanups_settled`] waits for the task.
pub(crate) fn finish_in_background<T: Send + 'static>(
    value: T,
    finish: fn(T) -> Cleanup,
    now: fn(T),
) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        now(value);
        return;
    };
    // Owned by the task: dropped unstarted (a runtime shutting down), it does `now`.
    let mut unstarted = Unstarted {
        value: Some(value),
        now,
    };
    let outstanding = Outstanding::new();
    runtime.spawn(async move {
        let _outstanding = outstanding;
        if let Some(value) = unstarted.value.take() {
            finish(value).await;
        }
    });
}

/// A value handed to a task that has not started yet.
struct Unstarted<T> {
    value: Option<T>,
    now: fn(T),
}

impl<T> Drop for Unstarted<T> {
    fn drop(&mut self) {
        if let Some(value) = self.value.take() {
            (self.now)(value);
        }
    }
}

/// Spawns a clean-up on the current tokio runtime; outside one (or on a runtime that drops it
/// unstarted), skips it (the lease expires on its own) and says so in the log.
/// [`cleanups_settled`] waits for it.
pub fn spawn_cleanup<F>(cleanup: F)
where
    F: Future<Output = ()> + Send + 'static,
{
    finish_in_background(cleanup, |cleanup| Box::pin(cleanup), left_to_expire);
}

/// What a clean-up that cannot run leaves: a lock that expires with its lease.
fn left_to_expire<T>(_: T) {
    tracing::warn!("dropped outside a tokio runtime: the lock is left to expire");
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    fn guard(tx: mpsc::Sender<&'static str>) -> FinishOnDrop<mpsc::Sender<&'static str>> {
        FinishOnDrop::new(
            tx,
            |tx| {
                Box::pin(async move {
                    tx.send("finished").ok();
                })
            },
            |tx| {
                tx.send("now").ok();
            },
        )
    }

    #[test]
    fn a_task_the_runtime_drops_unstarted_does_it_now() {
        let (tx, rx) = mpsc::channel();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        // Spawned on the runtime, which is dropped before it ever runs the task.
        runtime.block_on(async { drop(guard(tx)) });
        drop(runtime);
        assert_eq!(rx.try_recv(), Ok("now"));
    }

    #[tokio::test]
    async fn dropped_armed_on_a_runtime_it_finishes_in_a_task_and_disarmed_it_does_nothing() {
        let (tx, rx) = mpsc::channel();
        drop(guard(tx.clone()));
        assert!(cleanups_settled(Duration::from_secs(10)).await);
        assert_eq!(rx.try_recv(), Ok("finished"));
        drop(guard(tx.clone()).disarm());
        assert!(cleanups_settled(Duration::from_secs(10)).await);
        assert!(rx.try_recv().is_err(), "disarmed: nothing ran");
        let now = FinishOnDrop::now(tx, |tx| {
            tx.send("at once").ok();
        });
        drop(now);
        assert_eq!(rx.try_recv(), Ok("at once"), "a `now` guard never spawns");
    }
}
