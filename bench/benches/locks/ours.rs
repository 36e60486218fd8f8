//! Ours: `redlock_reentrant::LockClient`, `RLock::lock()` (the watchdog lease) or
//! `RLock::lock_with_lease()`, and `RLock::unlock()`.

use std::time::Duration;

use redlock_reentrant::{LockClient, LockClientBuilder, RLock};

/// The fixed lease of the `-lease` variants.
pub(crate) const FIXED_LEASE: Duration = Duration::from_secs(30);

/// A client and how its locks are taken.
#[derive(Clone)]
pub(crate) struct Ours {
    pub(crate) client: LockClient,
    /// `None`: `lock()` (renewed by the watchdog); `Some`: `lock_with_lease(lease)`.
    lease: Option<Duration>,
    /// Its locks are fair locks (`LockClient::get_fair_lock`).
    fair: bool,
}

impl Ours {
    /// A client on `urls`, with the builder's defaults changed by `configure`.
    pub(crate) async fn connect(
        urls: &[String],
        lease: Option<Duration>,
        configure: impl FnOnce(LockClientBuilder) -> LockClientBuilder,
    ) -> Result<Self, String> {
        let builder = configure(LockClient::builder().nodes(urls.iter().cloned()));
        let client = builder.build().await.map_err(|e| e.to_string())?;
        Ok(Self {
            client,
            lease,
            fair: false,
        })
    }

    /// The same client, taking fair locks.
    pub(crate) fn fair(&self) -> Self {
        Self {
            fair: true,
            ..self.clone()
        }
    }

    /// Takes the lock, waiting for its holder if there is one (the owner is the calling task).
    pub(crate) async fn lock(&self, key: &str) -> Result<RLock, String> {
        let lock = if self.fair {
            self.client.get_fair_lock(key).map_err(|e| e.to_string())?
        } else {
            self.client.get_lock(key)
        };
        let taken = match self.lease {
            None => lock.lock().await,
            Some(lease) => lock.lock_with_lease(lease).await,
        };
        taken.map(|()| lock).map_err(|e| e.to_string())
    }

    /// Releases it (from the task that took it).
    pub(crate) async fn unlock(&self, lock: RLock) -> Result<(), String> {
        lock.unlock().await.map_err(|e| e.to_string())
    }

    pub(crate) async fn shutdown(&self) {
        self.client.shutdown().await;
    }
}
