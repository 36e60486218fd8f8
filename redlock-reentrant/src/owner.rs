//! Who holds a lock: the client's UUID plus the current tokio task, or an explicit owner.

use std::fmt;

use redlock_core::{InvalidArgument, OwnerToken};

/// An explicit lock owner, for work that moves between tasks.
///
/// By default a lock's owner is the current tokio task: a task that spawns another task to
/// finish the work cannot unlock from there. Create a `LockOwner` with
/// [`LockClient::new_owner`](crate::LockClient::new_owner) and bind locks to it with
/// [`RLock::with_owner`](crate::RLock::with_owner): every task using that `RLock` is then the
/// same owner. Only a client makes its owners, so they are unique to it (and to its process):
/// a handle on an [`OwnerToken`], which cannot be forged from a string.
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
pub struct LockOwner(OwnerToken);

impl LockOwner {
    /// A new owner of the client `client_id`.
    pub(crate) fn new(client_id: &str) -> Self {
        Self(OwnerToken::from_string(format!(
            "{client_id}:owner-{}",
            uuid::Uuid::new_v4()
        )))
    }

    /// Whether the client `client_id` made this owner.
    pub(crate) fn belongs_to(&self, client_id: &str) -> bool {
        self.0
            .as_str()
            .strip_prefix(client_id)
            .is_some_and(|rest| rest.starts_with(":owner-"))
    }

    /// The value written to the nodes.
    pub(crate) fn token(&self) -> &OwnerToken {
        &self.0
    }
}

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
    /// A fixed owner (an explicit [`LockOwner`], or a guard's remembered owner).
    Fixed(OwnerToken),
    /// A [`LockOwner`] of another client: refused.
    Foreign,
}

impl OwnerSource {
    /// The owner for this call (the fields of its holds start with it, see `HoldKey::field`).
    ///
    /// Inside a tokio task: `{client}:task-{id}`. Outside any task (`Runtime::block_on`, which
    /// drives its future on the calling thread and never moves it): `{client}:thread-{id}`.
    pub(crate) fn resolve(&self, client_id: &str) -> Result<OwnerToken, InvalidArgument> {
        Ok(match self {
            OwnerSource::Fixed(owner) => owner.clone(),
            OwnerSource::CurrentTask => match tokio::task::try_id() {
                Some(task) => task_owner(client_id, task),
                None => OwnerToken::from_string(format!(
                    "{client_id}:thread-{:?}",
                    std::thread::current().id()
                )),
            },
            OwnerSource::Foreign => return Err(InvalidArgument::ForeignOwner),
        })
    }
}

/// How many tasks' owners each thread remembers: a busy service's worker thread runs many
/// tasks in turn, each of which resolves its owner on every lock operation.
const REMEMBERED: usize = 64;

/// `{client}:task-{id}`, built once per task and client on each thread: a task's operations
/// resolve their owner on every call. Each thread keeps the owners it built in a small table,
/// one per slot, the slot chosen by the task id's hash (two tasks of one slot take turns in
/// it): a slot answers only for the task and the client it was filled for, and the owner is
/// built from those two alone, so the table gives what building it again would.
fn task_owner(client_id: &str, task: tokio::task::Id) -> OwnerToken {
    use std::hash::{BuildHasher as _, BuildHasherDefault, DefaultHasher};

    type Slots = [Option<(tokio::task::Id, OwnerToken)>; REMEMBERED];
    thread_local! {
        static OWNERS: std::cell::RefCell<Slots> = const { std::cell::RefCell::new([const { None }; REMEMBERED]) };
    }
    let slot = BuildHasherDefault::<DefaultHasher>::default().hash_one(task) as usize % REMEMBERED;
    OWNERS.with(|owners| {
        let mut owners = owners.borrow_mut();
        if let Some((id, owner)) = &owners[slot] {
            // Exactly `{client_id}:task-{digits}`: no other client's owner, whatever its id.
            let belongs = owner
                .as_str()
                .strip_prefix(client_id)
                .and_then(|rest| rest.strip_prefix(":task-"))
                .is_some_and(|id| !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()));
            if *id == task && belongs {
                return owner.clone();
            }
        }
        let owner = OwnerToken::from_string(format!("{client_id}:task-{task}"));
        owners[slot] = Some((task, owner.clone()));
        owner
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_owner_belongs_to_the_client_that_made_it_only() {
        let owner = LockOwner::new("client-a");
        assert!(owner.belongs_to("client-a"));
        assert!(!owner.belongs_to("client-b"));
        assert!(
            !owner.belongs_to("client"),
            "a prefix of the id is another client"
        );
        assert_eq!(
            OwnerSource::Foreign.resolve("client-a").err(),
            Some(InvalidArgument::ForeignOwner)
        );
    }

    #[tokio::test]
    async fn each_task_of_many_is_its_own_owner_and_keeps_it() {
        // More tasks than a thread remembers, resolved in turns: every task keeps one owner,
        // and no two tasks share one (a cache keyed wrongly would hand a task another's).
        let tasks: Vec<_> = (0..REMEMBERED * 3)
            .map(|_| {
                tokio::spawn(async {
                    let first = OwnerSource::CurrentTask.resolve("client-a").expect("owner");
                    tokio::task::yield_now().await;
                    let again = OwnerSource::CurrentTask.resolve("client-a").expect("owner");
                    let other = OwnerSource::CurrentTask.resolve("client-b").expect("owner");
                    assert_eq!(first, again, "a task keeps its owner");
                    assert!(other.as_str().starts_with("client-b:task-"), "per client");
                    first
                })
            })
            .collect();
        let mut owners = std::collections::HashSet::new();
        for task in tasks {
            assert!(
                owners.insert(task.await.expect("task")),
                "two tasks, one owner"
            );
        }
    }
}
