//! The model of the plain renewed lock (`Watchdog::acquire`, a `RenewedLease`): one lock,
//! `plain`, which each client's watchdog may hold at most once. It is not reentrant: while any
//! lease of it is believed, every acquisition (by its own client too) is refused.

use std::time::{Duration, Instant};

use redlock_reentrant::{Error, LostReason, LostSignal};

/// What a holder believes, and until when: a lease's lost signal, or the validity end a plain
/// core lease (which has no signal) is believed until.
#[derive(Debug, Clone)]
pub(crate) enum Belief {
    Signal(LostSignal),
    Until(Instant),
}

impl Belief {
    /// When the belief ends, and why.
    pub(crate) fn deadline(&self) -> Option<(Instant, LostReason)> {
        match self {
            Belief::Signal(signal) => signal.deadline(),
            Belief::Until(at) => Some((*at, LostReason::LeaseExpired)),
        }
    }

    /// Why the belief ended, once it has.
    pub(crate) fn reason(&self) -> Option<LostReason> {
        match self {
            Belief::Signal(signal) => signal.reason(),
            Belief::Until(at) => (Instant::now() >= *at).then_some(LostReason::LeaseExpired),
        }
    }

    pub(crate) fn is_lost(&self) -> bool {
        self.reason().is_some()
    }
}

/// The plain lock's name.
pub(crate) const PLAIN: &str = "plain";

/// What the model knows of the plain lock.
#[derive(Debug, Clone)]
pub(crate) struct PlainLeases {
    /// Each client's lease's lost signal, while the sequence keeps a lease.
    held: [Option<Belief>; 2],
    /// Whether a fault began while the lease was kept (explains a loss).
    disturbed: [bool; 2],
    /// Whether the lease's loss was seen already.
    seen_lost: [bool; 2],
    /// Until when a lease that ended without a confirmed release may still be on the nodes.
    lingering_until: Instant,
}

impl Default for PlainLeases {
    fn default() -> Self {
        Self {
            held: [None, None],
            disturbed: [false; 2],
            seen_lost: [false; 2],
            lingering_until: Instant::now(),
        }
    }
}

impl PlainLeases {
    /// The clients whose lease is believed: kept, and its signal has not fired.
    fn believers(&self) -> Vec<usize> {
        believers(&self.held)
    }

    /// The believed leases, with their signals.
    pub(crate) fn believed(&self) -> Vec<(usize, Belief)> {
        believed(&self.held)
    }

    /// A fault begins: it explains the loss of every lease kept now.
    pub(crate) fn fault_begins(&mut self) {
        for client in 0..2 {
            self.disturbed[client] |= self.held[client].is_some();
        }
    }

    /// Reads the kept leases' signals; a new loss must have a cause the documentation gives (a
    /// machine too busy to renew in time is one: the holder is told, as promised), and its key
    /// may stay on the nodes for a lease.
    pub(crate) fn observe(&mut self, disturbed: bool, lease: Duration) -> Result<(), String> {
        for client in 0..2 {
            let Some(reason) = self.held[client].as_ref().and_then(Belief::reason) else {
                continue;
            };
            if std::mem::replace(&mut self.seen_lost[client], true) {
                continue;
            }
            self.linger(lease);
            let explained = disturbed || self.disturbed[client];
            if !(reason == LostReason::QuorumLost || explained) {
                return Err(format!(
                    "c{client}: plain lease lost ({reason:?}) with nothing to explain it"
                ));
            }
        }
        Ok(())
    }

    /// A lease kept from now on.
    fn keep(&mut self, client: usize, signal: LostSignal) -> Option<Belief> {
        self.disturbed[client] = false;
        self.seen_lost[client] = false;
        self.held[client].replace(Belief::Signal(signal))
    }

    fn linger(&mut self, lease: Duration) {
        let until = Instant::now() + lease + Duration::from_millis(100);
        self.lingering_until = self.lingering_until.max(until);
    }

    /// Client `client` asked for the lock and got `outcome` (the new lease's signal).
    /// `disturbed`: faults are in force or may still show.
    pub(crate) fn acquired(
        &mut self,
        client: usize,
        outcome: Result<LostSignal, &Error>,
        disturbed: bool,
        lease: Duration,
    ) -> Result<(), String> {
        let believers = self.believers();
        match outcome {
            Ok(signal) => {
                if !believers.is_empty() {
                    return Err(format!(
                        "c{client} took the plain lock while c{believers:?} believed they hold it"
                    ));
                }
                // A lease kept but lost is replaced: dropping it sends a compare-and-delete of
                // its own token, which cannot touch the new lease.
                if self.keep(client, signal).is_some() {
                    self.linger(lease);
                }
                Ok(())
            }
            Err(
                Error::Contended { .. } | Error::NoQuorum { .. } | Error::ValidityExhausted { .. },
            ) if !believers.is_empty() || disturbed || Instant::now() < self.lingering_until => {
                Ok(())
            }
            Err(err) => Err(format!(
                "c{client}: plain acquire answered `{err}`; the model says it was free"
            )),
        }
    }

    /// Client `client` released its lease and got `outcome`.
    pub(crate) fn released(
        &mut self,
        client: usize,
        outcome: Result<(), &Error>,
        disturbed: bool,
        lease: Duration,
    ) -> Result<(), String> {
        let Some(signal) = self.held[client].take() else {
            return Err(format!(
                "c{client}: released a plain lease it does not keep"
            ));
        };
        match outcome {
            Ok(()) => Ok(()),
            Err(Error::LockLost { .. }) if signal.is_lost() => {
                self.linger(lease);
                Ok(())
            }
            Err(Error::NoQuorum { .. }) if disturbed => {
                self.linger(lease);
                Ok(())
            }
            Err(err) => Err(format!(
                "c{client}: plain release answered `{err}`; lost: {:?}",
                signal.reason()
            )),
        }
    }

    /// Client `client` shut down: its lease's signal has fired, and the sequence drops it.
    pub(crate) fn shut_down(&mut self, client: usize, lease: Duration) -> Result<(), String> {
        if let Some(signal) = self.held[client].take() {
            if !signal.is_lost() {
                return Err(format!("c{client} shut down, its plain lease not told"));
            }
            self.linger(lease);
        }
        Ok(())
    }

    /// How many holds of `client`'s watchdog are plain leases it must still renew.
    pub(crate) fn registered(&self, client: usize) -> usize {
        usize::from(self.believers().contains(&client))
    }

    /// Never two believers.
    pub(crate) fn check_exclusion(&self) -> Result<(), String> {
        let believers = self.believers();
        if believers.len() > 1 {
            return Err(format!(
                "plain: clients {believers:?} all believe they hold it"
            ));
        }
        Ok(())
    }
}

/// The clients whose kept lease is not lost (of a two-client model's leases).
pub(crate) fn believers(held: &[Option<Belief>; 2]) -> Vec<usize> {
    (0..2)
        .filter(|client| held[*client].as_ref().is_some_and(|s| !s.is_lost()))
        .collect()
}

/// The believed leases, with their signals.
pub(crate) fn believed(held: &[Option<Belief>; 2]) -> Vec<(usize, Belief)> {
    believers(held)
        .into_iter()
        .filter_map(|client| Some((client, held[client].clone()?)))
        .collect()
}
