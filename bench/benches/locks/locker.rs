//! The implementations under test behind one small interface: `lock` (waiting until taken),
//! `acquire` (the implementation's own single call, for fault workloads), `unlock`.

use std::fmt;

use redlock_reentrant::RLock;

use crate::core::Core;
use crate::ours::{Ours, FIXED_LEASE};
use crate::raw::{self, Raw};
use crate::theirs::Rslock;

/// Which implementation, on how many nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Kind {
    /// `SET NX PX` + compare-and-delete, 1 ms polling: the floor.
    Raw,
    /// Ours with `lock()` (watchdog lease).
    Ours,
    /// Ours with `lock_with_lease(30 s)`.
    OursLease,
    /// `rslock` 0.10.
    Rslock,
    /// `redlock_core::Redlock` alone: our quorum without the reentrant layer.
    Core,
}

/// An implementation on a number of nodes, as named in every table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Spec {
    pub(crate) kind: Kind,
    pub(crate) nodes: usize,
}

impl Spec {
    pub(crate) const fn new(kind: Kind, nodes: usize) -> Self {
        Self { kind, nodes }
    }

    /// Every implementation the lock workloads compare, in table order.
    pub(crate) fn all() -> Vec<Spec> {
        vec![
            Spec::new(Kind::Raw, 1),
            Spec::new(Kind::Ours, 1),
            Spec::new(Kind::OursLease, 1),
            Spec::new(Kind::Rslock, 1),
            Spec::new(Kind::Core, 1),
            Spec::new(Kind::Ours, 5),
            Spec::new(Kind::OursLease, 5),
            Spec::new(Kind::Rslock, 5),
            Spec::new(Kind::Core, 5),
        ]
    }

    /// The raw floor, for the "x raw" column.
    pub(crate) fn floor() -> Spec {
        Spec::new(Kind::Raw, 1)
    }

    /// rslock on as many nodes, for the "x rslock" column.
    pub(crate) fn rslock_peer(self) -> Spec {
        Spec::new(Kind::Rslock, self.nodes)
    }
}

impl fmt::Display for Spec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self.kind {
            Kind::Raw => "raw",
            Kind::Ours | Kind::OursLease => "ours",
            Kind::Rslock => "rslock",
            Kind::Core => "core",
        };
        write!(f, "{name}-{}", self.nodes)?;
        if self.kind == Kind::OursLease {
            f.write_str("-lease")?;
        }
        Ok(())
    }
}

/// A connected implementation. Cheap to clone; clones share connections.
#[derive(Clone)]
pub(crate) enum Locker {
    Ours(Ours),
    Raw(Raw),
    Rslock(Rslock),
    Core(Core),
    /// No lock at all: only for the self-test of the overlap checker.
    NoLock,
}

/// A lock taken by a [`Locker`].
pub(crate) enum Handle {
    Ours(RLock),
    Raw(raw::Held),
    Rslock(rslock::Lock),
    Core(redlock_core::Lease),
    NoLock,
}

impl Locker {
    /// Connects `spec` with every default to `urls` (the first `spec.nodes` of them).
    pub(crate) async fn connect(spec: Spec, urls: &[String]) -> Result<Self, String> {
        let urls = &urls[..spec.nodes];
        Ok(match spec.kind {
            Kind::Raw => Locker::Raw(Raw::connect(&urls[0]).await?),
            Kind::Ours => Locker::Ours(Ours::connect(urls, None, |b| b).await?),
            Kind::OursLease => Locker::Ours(Ours::connect(urls, Some(FIXED_LEASE), |b| b).await?),
            Kind::Rslock => Locker::Rslock(Rslock::new(urls, false)),
            Kind::Core => Locker::Core(Core::connect(urls).await?),
        })
    }

    /// Takes the lock, waiting as long as someone else holds it.
    pub(crate) async fn lock(&self, key: &str) -> Result<Handle, String> {
        Ok(match self {
            Locker::Ours(ours) => Handle::Ours(ours.lock(key).await?),
            Locker::Raw(raw) => Handle::Raw(raw.lock(key).await?),
            Locker::Rslock(rslock) => Handle::Rslock(rslock.lock(key).await?),
            Locker::Core(core) => Handle::Core(core.lock(key).await?),
            Locker::NoLock => Handle::NoLock,
        })
    }

    /// The implementation's own acquisition call, once: it fails instead of waiting on
    /// failures (ours still waits out a holder; nothing else holds the keys it is used on).
    pub(crate) async fn acquire(&self, key: &str) -> Result<Handle, String> {
        Ok(match self {
            Locker::Ours(ours) => Handle::Ours(ours.lock(key).await?),
            Locker::Raw(raw) => match raw.try_lock(key).await? {
                Some(held) => Handle::Raw(held),
                None => return Err(format!("{key} is held")),
            },
            Locker::Rslock(rslock) => Handle::Rslock(rslock.acquire(key).await?),
            Locker::Core(core) => Handle::Core(core.acquire(key).await?),
            Locker::NoLock => Handle::NoLock,
        })
    }

    /// Releases a lock this locker took (from the task that took it).
    pub(crate) async fn unlock(&self, handle: Handle) -> Result<(), String> {
        match (self, handle) {
            (Locker::Ours(ours), Handle::Ours(lock)) => ours.unlock(lock).await,
            (Locker::Raw(raw), Handle::Raw(held)) => raw.unlock(held).await,
            (Locker::Rslock(rslock), Handle::Rslock(lock)) => {
                rslock.unlock(lock).await;
                Ok(())
            }
            (Locker::Core(core), Handle::Core(lease)) => core.unlock(lease).await,
            (Locker::NoLock, Handle::NoLock) => Ok(()),
            _ => Err("a handle from another implementation".to_owned()),
        }
    }

    /// Releases what the implementation keeps running (our client's watchdog and holds).
    pub(crate) async fn close(&self) {
        if let Locker::Ours(ours) = self {
            ours.shutdown().await;
        }
    }
}

/// `operation`, failing with a message if it takes longer than `limit`.
pub(crate) async fn within<T>(
    limit: std::time::Duration,
    operation: impl std::future::Future<Output = Result<T, String>>,
) -> Result<T, String> {
    tokio::time::timeout(limit, operation)
        .await
        .unwrap_or_else(|_| Err(format!("no answer within {limit:?}")))
}
