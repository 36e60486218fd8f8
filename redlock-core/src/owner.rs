//! The random value that proves who holds a lock.

use std::fmt;

/// A unique owner value (a random UUID v4) stored in the lock key.
///
/// Only the holder knows it, so only the holder can release or extend. Its `Debug` form hides it:
/// owner tokens never reach a log line.
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
pub struct OwnerToken(String);

impl OwnerToken {
    /// A fresh random token.
    #[allow(clippy::new_without_default)] // a default token would be a shared secret
    pub fn new() -> Self {
        Self(uuid::Uuid::new_v4().to_string())
    }

    /// A token built from a caller's own unique string (the reentrant lock's owner ids).
    pub fn from_string(value: String) -> Self {
        Self(value)
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
