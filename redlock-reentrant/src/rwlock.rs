//! `RReadWriteLock`: many readers at once, or one writer, on the quorum.

use std::sync::Arc;

use crate::kind::{Kind, LockKeys, RwKeys};
use crate::{LockClient, LockOwner, RLock};

/// A read-write lock, Redisson's `RReadWriteLock` for tokio: any number of readers hold it
/// together, or one writer alone. Its two sides are [`RLock`]s, with every verb of a reentrant
/// lock: `lock`, `try_lock(wait, lease)`, the guards, `unlock`, `force_unlock`, `is_locked`,
/// `hold_count`, `remaining_ttl`, `status`, fencing tokens and the lost signal.
///
/// - **Never a writer beside anyone else.** A new write hold needs no live reader and no other
///   writer on a majority of the nodes; a new read hold needs no other owner's writer. Each
///   node decides in one script, and any two majorities share a node, which refuses whichever
///   of two conflicting holds comes second: on N masters as on one.
/// - **Writers go first.** A writer that waits (any `lock`, or `try_lock` with a wait) is
///   registered on the nodes, and new readers wait behind it until it got the lock and let go.
///   Its registration lives on the server's clock: the writer refreshes it while it waits, takes
///   it back when it stops waiting, and if it crashes the registration runs out within a
///   heartbeat (a third of the watchdog's lease, 10 s by default). A one-shot `try_lock` with no
///   wait never holds readers up. Among writers, and on N masters, who goes first is
///   best-effort: a majority decides, not a queue.
/// - **Reentrant per owner, both sides.** An owner that holds either side takes the read side
///   again without waiting behind a waiting writer (it would wait for itself). A writer may
///   take the read side (a downgrade): releasing the write side then leaves it reading.
/// - **No upgrade deadlock.** An owner holding the read side that asks for the write side gets
///   [`InvalidArgument::UpgradeWouldDeadlock`](crate::InvalidArgument::UpgradeWouldDeadlock)
///   at once (Redisson's waits forever). Unlocking a side this owner does not hold is
///   [`Error::NotOwner`](crate::Error::NotOwner).
/// - **Every reader expires on its own.** Each read hold has its own deadline on the server's
///   clock, renewed by the watchdog for that reader alone: a crashed reader frees the lock
///   within its own lease, whatever the other readers do.
/// - **Wake-ups.** A writer's release wakes the waiting readers and writers; the last
///   reader's release wakes a writer. The writers of one client take turns in line as with
///   `RLock` (only the first asks the nodes); its readers do not queue, and ask side by side.
/// - **Fencing tokens** come from the same counter for both sides: every hold, read or write,
///   gets a token greater than every hold granted before it, so a writer's token is greater
///   than those of every reader and writer before it.
///
/// # Examples
///
/// ```no_run
/// # async fn run(client: redlock_reentrant::LockClient) -> Result<(), redlock_reentrant::Error> {
/// let prices = client.get_read_write_lock("prices");
///
/// // Many tasks, processes and hosts may read at once.
/// let reading = prices.read_lock().acquire().await?;
/// reading.unlock().await?;
///
/// // One writer, alone; new readers wait while it waits.
/// let writing = prices.write_lock().acquire().await?;
/// // A writer may read too, and keep reading after it lets the write side go.
/// let still_reading = prices.read_lock().acquire().await?;
/// writing.unlock().await?;
/// still_reading.unlock().await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct RReadWriteLock {
    read: RLock,
    write: RLock,
}

impl RReadWriteLock {
    pub(crate) fn new(client: LockClient, name: String) -> Self {
        let key = client.inner.redlock.config().key_for(&name);
        let name: Arc<str> = name.into();
        let rw = Arc::new(RwKeys::of(&key));
        Self {
            read: RLock::new(
                client.clone(),
                Arc::clone(&name),
                &key,
                Kind::Read,
                LockKeys::ReadWrite(Arc::clone(&rw)),
            ),
            write: RLock::new(client, name, &key, Kind::Write, LockKeys::ReadWrite(rw)),
        }
    }

    /// The lock's name.
    pub fn name(&self) -> &str {
        self.read.name()
    }

    /// The read side: shared with every other reader, never with a writer.
    pub fn read_lock(&self) -> RLock {
        self.read.clone()
    }

    /// The write side: exclusive.
    pub fn write_lock(&self) -> RLock {
        self.write.clone()
    }

    /// The same lock, both sides waiting with `strategy` (see [`RLock::with_wait_strategy`]).
    pub fn with_wait_strategy(&self, strategy: crate::WaitStrategy) -> RReadWriteLock {
        RReadWriteLock {
            read: self.read.with_wait_strategy(strategy),
            write: self.write.with_wait_strategy(strategy),
        }
    }

    /// The same lock, owned by `owner` from whatever task uses it (see [`RLock::with_owner`]).
    pub fn with_owner(&self, owner: &LockOwner) -> RReadWriteLock {
        RReadWriteLock {
            read: self.read.with_owner(owner),
            write: self.write.with_owner(owner),
        }
    }
}
