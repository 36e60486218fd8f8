//! `rslock` 0.10 (crates.io), the Redlock crate we compare with, used as its README shows.

use std::time::Duration;

use rslock::{Lock, LockError, LockManager};

/// The lease given to every rslock lock.
const TTL: Duration = Duration::from_secs(30);

/// The Lua commands of rslock's own unlock script (`GET`, `DEL`), for `redis_stats`.
pub(crate) const SCRIPT_COMMANDS: [&str; 2] = ["get", "del"];

/// One `LockManager` over the nodes.
#[derive(Clone)]
pub(crate) struct Rslock {
    manager: LockManager,
}

impl Rslock {
    /// A manager with rslock's defaults (3 tries, 0..200 ms apart), or a single try.
    pub(crate) fn new(urls: &[String], single_try: bool) -> Self {
        let mut manager = LockManager::new(urls.to_vec());
        if single_try {
            manager.set_retry(1, Duration::from_millis(1));
        }
        Self { manager }
    }

    /// `LockManager::lock` once (with its own retries).
    pub(crate) async fn acquire(&self, key: &str) -> Result<Lock, String> {
        self.manager.lock(key, TTL).await.map_err(describe)
    }

    /// `LockManager::lock` until it succeeds, as rslock's `acquire` does.
    pub(crate) async fn lock(&self, key: &str) -> Result<Lock, String> {
        loop {
            match self.manager.lock(key, TTL).await {
                Ok(lock) => return Ok(lock),
                Err(LockError::TtlTooLarge) => return Err(describe(LockError::TtlTooLarge)),
                Err(_) => {}
            }
        }
    }

    /// `LockManager::unlock`: best effort, it reports nothing.
    pub(crate) async fn unlock(&self, lock: Lock) {
        self.manager.unlock(&lock).await;
    }
}

fn describe(err: LockError) -> String {
    format!("rslock: {err}")
}
