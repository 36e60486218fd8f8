//! The value that says who holds a lock.

use std::fmt;
use std::sync::Arc;

/// Who holds a lock: a unique value stored in the lock (a plain lock's value; a reentrant
/// lock's hash field starts with it, followed by the hold's number). The owner value of every
/// lock of the workspace.
///
/// A plain lock's token is a fresh random UUID v4 per acquisition; only the holder knows it, so
/// only the holder can release or extend. The reentrant lock's owners are its client's UUID
/// plus the task, or an explicit `LockOwner` (a handle on one of these that only a client
/// makes). Cheap to clone. Its `Debug`
/// form hides it: owner values never reach a log line.
///
/// # Examples
///
/// ```
/// use redlock_core::OwnerToken;
/// let a = OwnerToken::new();
/// let b = OwnerToken::new();
/// assert_ne!(a, b);
/// assert_eq!(format!("{a:?}"), "OwnerToken(..)");
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct OwnerToken(Arc<str>);

impl OwnerToken {
    /// A fresh random token.
    #[allow(clippy::new_without_default)] // a default token would be a shared secret
    pub fn new() -> Self {
        Self(uuid::Uuid::new_v4().to_string().into())
    }

    /// A token built from a caller's own string (the reentrant lock's owner ids). It must be
    /// unique to one owner across every client of the lock: to the nodes, two owners with one
    /// value are one owner, and both hold the lock.
    pub fn from_string(value: String) -> Self {
        Self(value.into())
    }

    /// The value written to Redis.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for OwnerToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("OwnerToken(..)")
    }
}
