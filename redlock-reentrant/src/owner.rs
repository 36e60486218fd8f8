//! Who holds a lock: the client's UUID plus the current tokio task, or an explicit owner.

use std::fmt;
use std::sync::Arc;

/// An explicit lock owner, for work that moves between tasks.
///
/// By default a lock's owner is the current tokio task: a task that spawns another task to
/// finish the work cannot unlock from there. Create a `LockOwner` and bind locks to it with
/// [`RLock::with_owner`](crate::RLock::with_owner): every task using that `RLock` is then the
/// same owner. Owners are unique to their client (and so to their process).
///
/// # Examples
///
/// ```no_run
/// # async fn run(client: redlock_reentrant::LockClient) -> Result<(), redlock_reentrant::Error> {
/// let owner = client.new_owner();
/// let lock = client.get_lock("migration").with_owner(&owner);
/// lock.lock().await?;
/// let handle = tokio::spawn(async move {
///     // ... the work, in another task ...
///     lock.unlock().await // same owner: allowed
/// });
/// handle.await.expect("task")?;
/// # Ok(()) }
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct LockOwner(pub(crate) Arc<str>);

impl fmt::Debug for LockOwner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The id is the field written to Redis: it identifies, it does not authorise; still, keep
        // it out of casual logs.
        f.write_str("LockOwner(..)")
    }
}

/// How an `RLock` finds its owner.
#[derive(Debug, Clone)]
pub(crate) enum OwnerSource {
    /// The current tokio task, or the current thread outside a task.
    CurrentTask,
    /// A fixed owner (an explicit [`LockOwner`] or a guard's remembered owner).
    Fixed(Arc<str>),
}

impl OwnerSource {
    /// The owner field for this call.
    ///
    /// Inside a tokio task: `{client}:task-{id}`. Outside any task (`Runtime::block_on`, which
    /// drives its future on the calling thread and never moves it): `{client}:thread-{id}`.
    pub(crate) fn resolve(&self, client_id: &str) -> Arc<str> {
        match self {
            OwnerSource::Fixed(owner) => Arc::clone(owner),
            OwnerSource::CurrentTask => match tokio::task::try_id() {
                Some(task) => format!("{client_id}:task-{task}").into(),
                None => format!("{client_id}:thread-{:?}", std::thread::current().id()).into(),
            },
        }
    }
}
