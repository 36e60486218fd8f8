//! Who holds a lock: the client's UUID plus the current tokio task, or an explicit owner.

use redlock_core::OwnerToken;

/// How an `RLock` finds its owner.
#[derive(Debug, Clone)]
pub(crate) enum OwnerSource {
    /// The current tokio task, or the current thread outside a task.
    CurrentTask,
    /// A fixed owner (an explicit one, or a guard's remembered owner).
    Fixed(OwnerToken),
}

impl OwnerSource {
    /// The owner field for this call.
    ///
    /// Inside a tokio task: `{client}:task-{id}`. Outside any task (`Runtime::block_on`, which
    /// drives its future on the calling thread and never moves it): `{client}:thread-{id}`.
    pub(crate) fn resolve(&self, client_id: &str) -> OwnerToken {
        match self {
            OwnerSource::Fixed(owner) => owner.clone(),
            OwnerSource::CurrentTask => OwnerToken::from_string(match tokio::task::try_id() {
                Some(task) => format!("{client_id}:task-{task}"),
                None => format!("{client_id}:thread-{:?}", std::thread::current().id()),
            }),
        }
    }
}
