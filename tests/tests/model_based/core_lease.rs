//! The model of the core lock (`Redlock::acquire`, `extend` and `release`: a `Lease` nothing
//! renews): one lock, `core`, of which each client keeps at most one lease. A holder believes
//! until its lease's validity ends. An extend that was granted moves that end later; one that
//! failed, or was dropped with its requests on their way, leaves the holder relying on the
//! lease it had, which the nodes must still back (`Redlock::extend`'s docs: an extend never
//! shortens a lease).

use std::time::{Duration, Instant};

use redlock_reentrant::Error;

use crate::plain::{believed, believers, Belief};

/// The core lock's name.
pub(crate) const CORE: &str = "core";

/// The longest lease drawn for the core lock: how long a key nobody believes in may stay.
pub(crate) const LONGEST_CORE_LEASE: Duration = Duration::from_secs(3);

/// What the model knows of the core lock.
#[derive(Debug, Clone)]
pub(crate) struct CoreLeases {
    /// Each client's belief, as a signal whose deadline is its lease's validity end: the
    /// checks that read reentrant holders' signals read these the same way.
    held: [Option<Belief>; 2],
    /// Until when a lease that ended without a confirmed release may still be on the nodes.
    lingering_until: Instant,
}

impl Default for CoreLeases {
    fn default() -> Self {
        Self {
            held: [None, None],
            lingering_until: Instant::now(),
        }
    }
}

/// A belief that ends at `valid_until`.
fn belief(valid_until: Instant) -> Belief {
    Belief::Until(valid_until)
}

impl CoreLeases {
    /// The clients whose lease is still valid.
    fn believers(&self) -> Vec<usize> {
        believers(&self.held)
    }

    /// The believed leases, with their signals.
    pub(crate) fn believed(&self) -> Vec<(usize, Belief)> {
        believed(&self.held)
    }

    fn linger(&mut self) {
        self.linger_until(Instant::now() + LONGEST_CORE_LEASE);
    }

    /// The keys may stay until `end`, with room for the drift allowance and a retry.
    fn linger_until(&mut self, end: Instant) {
        let until = end + Duration::from_millis(100);
        self.lingering_until = self.lingering_until.max(until);
    }

    /// A belief from now on, until `valid_until`; the keys behind it outlive it by the drift.
    fn believe(&mut self, client: usize, valid_until: Instant) {
        self.held[client] = Some(belief(valid_until));
        self.linger_until(valid_until);
    }

    /// Client `client` asked for the lock and got `outcome` (the lease's validity end).
    pub(crate) fn acquired(
        &mut self,
        client: usize,
        outcome: Result<Instant, &Error>,
        disturbed: bool,
    ) -> Result<(), String> {
        let believers = self.believers();
        match outcome {
            Ok(valid_until) => {
                if !believers.is_empty() {
                    return Err(format!(
                        "c{client} took the core lock while c{believers:?} believed they hold it"
                    ));
                }
                self.believe(client, valid_until);
                Ok(())
            }
            // Granted too slowly to be of use (a busy machine): undone, but it may linger.
            Err(Error::ValidityExhausted { .. }) => {
                self.linger();
                Ok(())
            }
            Err(Error::Contended { .. } | Error::NoQuorum { .. })
                if !believers.is_empty() || disturbed || Instant::now() < self.lingering_until =>
            {
                Ok(())
            }
            Err(err) => Err(format!(
                "c{client}: core acquire answered `{err}`; the model says it was free"
            )),
        }
    }

    /// Client `client` extended its lease and got `outcome` (the new validity end), or dropped
    /// the call before it answered (`None`).
    pub(crate) fn extended(
        &mut self,
        client: usize,
        outcome: Option<Result<Instant, &Error>>,
        disturbed: bool,
    ) -> Result<(), String> {
        let Some(kept) = self.held[client].clone() else {
            return Err(format!("c{client}: extended a core lease it does not keep"));
        };
        let old_end = kept.deadline().map(|(end, _)| end);
        if !matches!(outcome, Some(Ok(_))) {
            // Dropped or failed: the holder keeps relying on the lease it had, and the requests
            // that went out may have lengthened the keys on any node.
            self.linger();
        }
        match outcome {
            None => Ok(()),
            Some(Ok(valid_until)) => {
                if old_end.is_some_and(|old| valid_until < old) {
                    return Err(format!(
                        "c{client}: an extend granted a validity {:?} earlier than the lease it extended",
                        old_end.map(|old| old.saturating_duration_since(valid_until))
                    ));
                }
                self.believe(client, valid_until);
                Ok(())
            }
            // Extended too slowly to be of use (a busy machine): documented.
            Some(Err(Error::ValidityExhausted { .. })) => Ok(()),
            Some(Err(Error::NotOwner { .. })) if kept.is_lost() || disturbed => Ok(()),
            Some(Err(Error::NoQuorum { .. })) if disturbed => Ok(()),
            Some(Err(err)) => Err(format!(
                "c{client}: core extend answered `{err}`; valid: {}",
                !kept.is_lost()
            )),
        }
    }

    /// Client `client` released its lease and got `outcome`.
    pub(crate) fn released(
        &mut self,
        client: usize,
        outcome: Result<(), &Error>,
        disturbed: bool,
    ) -> Result<(), String> {
        let Some(kept) = self.held[client].take() else {
            return Err(format!("c{client}: released a core lease it does not keep"));
        };
        match outcome {
            Ok(()) => Ok(()),
            Err(Error::NotOwner { .. }) if kept.is_lost() || disturbed => {
                self.linger();
                Ok(())
            }
            Err(Error::NoQuorum { .. }) if disturbed => {
                self.linger();
                Ok(())
            }
            Err(err) => Err(format!(
                "c{client}: core release answered `{err}`; valid: {}",
                !kept.is_lost()
            )),
        }
    }

    /// Never two believers.
    pub(crate) fn check_exclusion(&self) -> Result<(), String> {
        let believers = self.believers();
        if believers.len() > 1 {
            return Err(format!(
                "core: clients {believers:?} all believe they hold it"
            ));
        }
        Ok(())
    }
}
