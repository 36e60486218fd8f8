//! `core-N`: `redlock_core::Redlock`, the quorum the reentrant lock is built on, used alone: a
//! plain `acquire(key, 30 s)` and `release`. The same nodes, connections, fan-out and quorum
//! decision as ours, without what the reentrant layer adds (the hold count, fencing, the
//! watchdog, the lost signal, the local line): the difference between the two rows is what
//! those cost.

use std::time::Duration;

use redlock_core::{Error, Lease, Redlock, RedlockConfig};

/// The lease of every plain lock.
const LEASE: Duration = Duration::from_secs(30);

/// A plain Redlock client over the nodes.
#[derive(Clone)]
pub(crate) struct Core {
    redlock: Redlock,
}

impl Core {
    /// A client with every default, connected.
    pub(crate) async fn connect(urls: &[String]) -> Result<Self, String> {
        let redlock = Redlock::new(RedlockConfig::with_nodes(urls.iter().cloned()))
            .map_err(|e| e.to_string())?;
        redlock.connect().await;
        Ok(Self { redlock })
    }

    /// `acquire` once (with the client's retries).
    pub(crate) async fn acquire(&self, key: &str) -> Result<Lease, String> {
        self.redlock.acquire(key, LEASE).await.map_err(describe)
    }

    /// `acquire` until it succeeds: a plain lock has no waiting of its own.
    pub(crate) async fn lock(&self, key: &str) -> Result<Lease, String> {
        loop {
            match self.redlock.acquire(key, LEASE).await {
                Ok(lease) => return Ok(lease),
                Err(err) if err.is_contended() => {}
                Err(err) => return Err(describe(err)),
            }
        }
    }

    pub(crate) async fn unlock(&self, lease: Lease) -> Result<(), String> {
        self.redlock.release(&lease).await.map_err(describe)
    }
}

fn describe(err: Error) -> String {
    format!("core: {err}")
}
