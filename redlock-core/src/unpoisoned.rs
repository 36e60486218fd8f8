//! Locking a standard mutex whose holder panicked.

use std::sync::LockResult;

/// The guard of a lock (or a condition variable's wait), whether or not a holder panicked:
/// every critical section of the library leaves its state whole before anything that can
/// panic, so a poisoned lock's state is as good as any.
///
/// # Examples
///
/// ```
/// use std::sync::Mutex;
/// use redlock_core::lock_kind::unpoisoned;
/// let count = Mutex::new(1);
/// *unpoisoned(count.lock()) += 1;
/// assert_eq!(*unpoisoned(count.lock()), 2);
/// ```
pub fn unpoisoned<G>(result: LockResult<G>) -> G {
    result.unwrap_or_else(std::sync::PoisonError::into_inner)
}
