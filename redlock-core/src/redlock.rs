//! The Redlock client: acquire, release and extend a lock on a majority of N masters.

use std::sync::Arc;
use std::time::Duration;

use tracing::{field, Span};

use crate::lock_kind::Slot;
use crate::lua::{AcquireReply, ACQUIRE, EXTEND, RELEASE, RENEW};
use crate::quorum::lease_millis;
use crate::{
    Applied, Error, FanOut, FinishOnDrop, Lease, LockScript, NodeSet, NodeStatus, OwnerToken,
    Readiness, RedlockConfig,
};

/// A Redlock client over N independent Redis masters (N = 1 is single-instance locking).
///
/// Cheap to clone: clones share the node pools.
///
/// # Examples
///
/// ```no_run
/// use std::time::Duration;
/// use redlock_core::{Redlock, RedlockConfig};
/// # async fn run() -> Result<(), redlock_core::Error> {
/// let redlock = Redlock::new(RedlockConfig::with_nodes([
///     "redis://10.0.0.1:6379",
///     "redis://10.0.0.2:6379",
///     "redis://10.0.0.3:6379",
/// ]))?;
/// let lease = redlock.acquire("nightly-report", Duration::from_secs(30)).await?;
/// // ... work, finishing well before lease.valid_until() ...
/// redlock.release(&lease).await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Redlock {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    config: RedlockConfig,
    nodes: NodeSet,
}

impl Redlock {
    /// Builds a client. Nothing is connected yet, so a node that is down now does not stop a
    /// client from starting. Call [`Redlock::connect`] next to connect up front (as
    /// `LockClient::build` does): a request waits for a connection at most its per-node
    /// timeout, which a TLS handshake on a busy machine can outlast.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for no nodes, an unusable URL (shown without its password), a
    /// zero per-node timeout or a drift factor outside `[0, 1)`.
    pub fn new(config: RedlockConfig) -> Result<Self, Error> {
        config.check()?;
        let nodes = NodeSet::open(&config)?;
        Ok(Self {
            shared: Arc::new(Shared { config, nodes }),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &RedlockConfig {
        &self.shared.config
    }

    /// The nodes, for running other lock scripts through the same fan-out.
    pub fn nodes(&self) -> &NodeSet {
        &self.shared.nodes
    }

    /// How many nodes must agree.
    pub fn quorum(&self) -> usize {
        self.shared.nodes.quorum()
    }

    /// The script that renews many of this kind of lock on one node in one call, for a
    /// watchdog (`redlock-watchdog`'s `RenewScript`): `KEYS[i]` a lock key, `ARGV[1]` the lease
    /// in milliseconds, `ARGV[i + 1]` the owner token of `KEYS[i]`; one answer per key, 1 when
    /// the owner holds it and its lease now runs at least that long (never shortened), 0 when
    /// not (a lock that is gone is never recreated).
    pub fn renew_script() -> &'static LockScript {
        &RENEW
    }

    /// Connects to every node that is not connected yet and asks each for a `PING`, all in
    /// parallel: a readiness check a service can call (and what a client does when it is
    /// built, so the first lock does not pay for connecting). Each node gets the connect
    /// timeout to connect and to answer. A node that is down is only reported: it is connected
    /// to again whenever it comes back.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it changes nothing but which connections are open.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(redlock: redlock_core::Redlock) {
    /// let readiness = redlock.readiness().await;
    /// if !readiness.is_ready() {
    ///     eprintln!(
    ///         "only {} of {} nodes answer: locking will fail",
    ///         readiness.reachable(),
    ///         readiness.nodes.len()
    ///     );
    /// }
    /// # }
    /// ```
    pub async fn readiness(&self) -> Readiness {
        let nodes = futures_util::future::join_all(
            (0..self.nodes().len()).map(|index| self.node_status(index)),
        )
        .await;
        Readiness {
            nodes,
            quorum: self.quorum(),
        }
    }

    /// Connects to every node in parallel, and returns once a majority answers `PING` (or
    /// every node has answered or failed), with how many answered: a node that hangs does not
    /// hold up a service's start while a majority is there. Nodes still connecting go on in the
    /// background. Every node that does not answer is logged as a warning (password hidden)
    /// as soon as it fails, and so is a count below the majority.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it changes nothing but which connections are open.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(redlock: redlock_core::Redlock) {
    /// if redlock.connect().await < redlock.quorum() {
    ///     eprintln!("locking fails until more nodes answer");
    /// }
    /// # }
    /// ```
    pub async fn connect(&self) -> usize {
        use futures_util::stream::{FuturesUnordered, StreamExt};
        let mut pending: FuturesUnordered<_> = (0..self.nodes().len())
            .map(|index| {
                let redlock = self.clone();
                async move { redlock.node_status(index).await }
            })
            .collect();
        let (quorum, nodes) = (self.quorum(), self.nodes().len());
        let mut up = 0;
        while up < quorum {
            match pending.next().await {
                Some(status) => up += usize::from(report(&status)),
                None => break,
            }
        }
        if up < quorum {
            tracing::warn!(
                up,
                nodes,
                "fewer nodes answer than a quorum needs: locking fails until they do"
            );
        } else if !pending.is_empty() {
            // The rest is only reported: drained in the background.
            tokio::spawn(async move {
                while let Some(status) = pending.next().await {
                    report(&status);
                }
            });
        }
        up
    }

    /// One node's readiness: connected within the connect timeout, and its `PING` round trip.
    async fn node_status(&self, index: usize) -> NodeStatus {
        let node = self.nodes().iter().nth(index).expect("a node of this set");
        let timeout = self.config().connect_timeout();
        let result = async {
            node.connect().await?;
            let started = std::time::Instant::now();
            node.query::<String>(&redis::cmd("PING"), timeout).await?;
            Ok(started.elapsed())
        }
        .await;
        NodeStatus {
            address: node.address().clone(),
            result,
        }
    }

    /// Takes the lock `name` for `lease`, retrying by the configured [`RetryPolicy`](crate::RetryPolicy)
    /// while it is contended or a quorum is missing.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe in effect: dropping the future at any await point leaves no key behind. An
    /// attempt in flight is undone by a release spawned on the runtime when the future is
    /// dropped; between attempts nothing is held.
    ///
    /// # Errors
    ///
    /// - [`Error::InvalidArgument`]: an empty name or a lease that can never be valid.
    /// - [`Error::Contended`]: still held by someone else after the last retry.
    /// - [`Error::NoQuorum`]: too few nodes answered.
    /// - [`Error::ValidityExhausted`]: granted, but too late to be of use.
    /// - [`Error::WrongType`]: the key holds non-lock data.
    ///
    /// On every error, whatever was taken on any node has been released again.
    #[tracing::instrument(name = "redlock.acquire", skip_all, fields(lock = %name, nodes = self.nodes().len(), quorum = self.quorum(), granted = field::Empty, elapsed_ms = field::Empty, attempts = field::Empty), err(level = "debug", Display))]
    pub async fn acquire(&self, name: &str, lease: Duration) -> Result<Lease, Error> {
        self.config().check_request(name, lease)?;
        let mut attempts = 0;
        self.config()
            .retry
            .retry(
                || {
                    attempts += 1;
                    Span::current().record("attempts", attempts);
                    self.attempt(name, lease)
                },
                |outcome| outcome.as_ref().is_err_and(Error::is_retryable),
            )
            .await
    }

    /// Makes one attempt to take the lock `name` for `lease`, without retrying.
    ///
    /// # Cancel safety
    ///
    /// As [`Redlock::acquire`]: dropping the future leaves no key behind.
    ///
    /// # Errors
    ///
    /// As [`Redlock::acquire`], after a single attempt.
    #[tracing::instrument(name = "redlock.acquire_once", skip_all, fields(lock = %name, nodes = self.nodes().len(), quorum = self.quorum(), granted = field::Empty, elapsed_ms = field::Empty), err(level = "debug", Display))]
    pub async fn acquire_once(&self, name: &str, lease: Duration) -> Result<Lease, Error> {
        self.config().check_request(name, lease)?;
        self.attempt(name, lease).await
    }

    async fn attempt(&self, name: &str, lease: Duration) -> Result<Lease, Error> {
        let key = self.config().key_for(name);
        let owner = OwnerToken::new();
        let timing = self.config().timing(lease);
        let timeout = timing.node_timeout;
        let undo = FinishOnDrop::spawning(self.clone().release_quietly(
            key.clone(),
            owner.clone(),
            timeout,
            Vec::new(),
        ));
        let call = ACQUIRE
            .call()
            .replicated()
            .key(&key)
            .arg(owner.as_str())
            .arg(lease_millis(lease));
        // Decided once a majority granted, or a majority answered and too few can still grant.
        let fan: FanOut<AcquireReply> = self
            .nodes()
            .run_script_until(&call, timeout, |fan| {
                fan.decided_by(fan.count(|reply| *reply == AcquireReply::Taken))
            })
            .await;
        let granted = fan.count(|reply| *reply == AcquireReply::Taken);
        let span = Span::current();
        span.record("granted", granted);
        span.record("elapsed_ms", fan.elapsed().as_secs_f64() * 1e3);

        if granted >= fan.quorum() {
            if let Some(left) = timing.validity(fan.elapsed()) {
                drop(undo.disarm());
                return Ok(Lease {
                    name: name.to_owned(),
                    key,
                    owner,
                    lease,
                    validity: left,
                    valid_until: timing.valid_until(fan.started()),
                    granted_by: granted,
                });
            }
        }
        // Release on every node, those that said no or did not answer included: a grant may
        // have landed with its reply lost, or land later (its reply was not awaited): the
        // release is queued behind it on every node. If this await is dropped, `undo` releases
        // instead.
        let seen = fan
            .slots()
            .iter()
            .map(|slot| matches!(slot, Slot::Replied(AcquireReply::Taken)))
            .collect();
        self.clone()
            .release_quietly(key.clone(), owner, timeout, seen)
            .await;
        drop(undo.disarm());
        Err(self.acquisition_failure(name, &key, lease, granted, fan))
    }

    fn acquisition_failure(
        &self,
        name: &str,
        key: &str,
        lease: Duration,
        granted: usize,
        fan: FanOut<AcquireReply>,
    ) -> Error {
        if let Some(found) = fan.wrong_type() {
            return Error::WrongType {
                key: key.to_owned(),
                found,
            };
        }
        if fan.answered() < fan.quorum() {
            return self.no_quorum(name, fan);
        }
        if granted >= fan.quorum() {
            return Error::ValidityExhausted {
                name: name.to_owned(),
                elapsed: fan.elapsed(),
                lease,
            };
        }
        let ttl = fan
            .values()
            .filter_map(|reply| match reply {
                AcquireReply::Held { pttl } => *pttl,
                AcquireReply::Taken => None,
            })
            .max();
        Error::Contended {
            name: name.to_owned(),
            ttl,
        }
    }

    fn no_quorum<T>(&self, name: &str, fan: FanOut<T>) -> Error {
        tracing::warn!(
            lock = %name,
            answered = fan.answered(),
            needed = fan.quorum(),
            first_failure = fan.errors().next().map(tracing::field::display),
            "no quorum"
        );
        Error::no_quorum(name, fan.answered(), fan)
    }

    /// Releases the lock: compare-and-delete on every node, so only this lease's keys go.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future may leave the lock held on some nodes until its lease expires; it
    /// never deletes anyone else's lock. Calling `release` again is safe.
    ///
    /// # Errors
    ///
    /// - [`Error::NotOwner`]: the nodes that answered leave no majority that could still hold
    ///   this lease (it had expired or was taken over); whatever was still ours is deleted all
    ///   the same.
    /// - [`Error::NoQuorum`]: too few nodes answered to know, or those that did not answer
    ///   could still make a majority.
    #[tracing::instrument(name = "redlock.release", skip_all, fields(lock = %lease.name(), nodes = self.nodes().len(), quorum = self.quorum(), released = field::Empty, elapsed_ms = field::Empty), err(level = "debug", Display))]
    pub async fn release(&self, lease: &Lease) -> Result<(), Error> {
        let timeout = self.config().node_timeout_for(lease.lease());
        let fan = self.release_key(lease.key(), lease.owner(), timeout).await;
        let released = fan.count(|reply| *reply == Applied::Yes);
        let unanswered = fan.unanswered();
        let span = Span::current();
        span.record("released", released);
        span.record("elapsed_ms", fan.elapsed().as_secs_f64() * 1e3);
        if released >= fan.quorum() {
            Ok(())
        } else if fan.answered() < fan.quorum() || released + unanswered >= fan.quorum() {
            // The nodes that did not answer could still make it a majority: undecided.
            Err(self.no_quorum(lease.name(), fan))
        } else {
            Err(Error::NotOwner {
                name: lease.name().to_owned(),
            })
        }
    }

    /// Makes a lock still held last at least `new_lease` from now on a majority (compare-and-
    /// `PEXPIRE` on every node). A node where the key is gone is not given it back.
    ///
    /// **An extend never shortens a lease**: a node whose key already has more than `new_lease`
    /// left keeps it. So whatever the outcome (granted, an error, or the future dropped while
    /// its requests are still queued on the nodes), the old lease's validity stays true, and
    /// the returned lease is the later of the old one and the new one.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future may leave some nodes extended and others not; keep relying on the
    /// old lease, which no node shortens.
    ///
    /// # Errors
    ///
    /// - [`Error::InvalidArgument`]: a lease that can never be valid.
    /// - [`Error::NotOwner`]: the nodes that answered leave no majority that could still hold
    ///   this lease.
    /// - [`Error::NoQuorum`]: too few nodes answered, or those that did not answer could still
    ///   make a majority.
    /// - [`Error::ValidityExhausted`]: extended, but too slowly to be of use.
    #[tracing::instrument(name = "redlock.extend", skip_all, fields(lock = %lease.name(), nodes = self.nodes().len(), quorum = self.quorum(), extended = field::Empty, elapsed_ms = field::Empty), err(level = "debug", Display))]
    pub async fn extend(&self, lease: &Lease, new_lease: Duration) -> Result<Lease, Error> {
        self.config().check_request(lease.name(), new_lease)?;
        let timing = self.config().timing(new_lease);
        let timeout = timing.node_timeout;
        let call = EXTEND
            .call()
            .replicated()
            .key(lease.key())
            .arg(lease.owner().as_str())
            .arg(lease_millis(new_lease));
        let fan: FanOut<Applied> = self
            .nodes()
            .run_script_until(&call, timeout, decided_yes_or_no)
            .await;
        let extended = fan.count(|reply| *reply == Applied::Yes);
        let span = Span::current();
        span.record("extended", extended);
        span.record("elapsed_ms", fan.elapsed().as_secs_f64() * 1e3);
        if extended >= fan.quorum() {
            let valid_until = timing.valid_until(fan.started());
            return match timing.validity(fan.elapsed()) {
                // No node shortens a lease: the old one stands where it is the later.
                Some(_) if lease.valid_until >= valid_until => Ok(Lease {
                    granted_by: extended,
                    ..lease.clone()
                }),
                Some(left) => Ok(Lease {
                    lease: new_lease,
                    validity: left,
                    valid_until,
                    granted_by: extended,
                    ..lease.clone()
                }),
                None => Err(Error::ValidityExhausted {
                    name: lease.name().to_owned(),
                    elapsed: fan.elapsed(),
                    lease: new_lease,
                }),
            };
        }
        let unanswered = fan.unanswered();
        if fan.answered() < fan.quorum() || extended + unanswered >= fan.quorum() {
            // The nodes that did not answer could still make it a majority: undecided.
            return Err(self.no_quorum(lease.name(), fan));
        }
        Err(Error::NotOwner {
            name: lease.name().to_owned(),
        })
    }

    async fn release_key(
        &self,
        key: &str,
        owner: &OwnerToken,
        timeout: Duration,
    ) -> FanOut<Applied> {
        let call = RELEASE.call().key(key).arg(owner.as_str()).releasing();
        self.nodes()
            .run_script_until(&call, timeout, decided_yes_or_no)
            .await
    }

    /// The release after a failed or abandoned attempt, sent by source: its replies may never
    /// be awaited, and a paused node that forgot the script must still run it. Awaited on the
    /// nodes seen to grant (`seen[node]`); elsewhere it is queued behind the attempt and
    /// finishes in the background.
    async fn clean_up_key(
        &self,
        key: &str,
        owner: &OwnerToken,
        timeout: Duration,
        seen: &[bool],
    ) -> FanOut<Applied> {
        let call = RELEASE
            .call()
            .key(key)
            .arg(owner.as_str())
            .by_source()
            .releasing();
        self.nodes()
            .run_script_until(&call, timeout, |fan| {
                fan.replied_on(|node| seen.get(node).copied().unwrap_or(false))
            })
            .await
    }

    /// The clean-up after a failed or abandoned attempt; failures only reach the log (the lease
    /// bounds what a node that missed it keeps).
    async fn release_quietly(
        self,
        key: String,
        owner: OwnerToken,
        timeout: Duration,
        seen: Vec<bool>,
    ) {
        let fan = self.clean_up_key(&key, &owner, timeout, &seen).await;
        for err in fan.errors() {
            tracing::debug!(node = %err.address, error = %err.kind, "clean-up release failed; the key expires with its lease");
        }
    }
}

/// Whether a majority said yes, or a majority answered and too few can still say yes: a release
/// or an extension is decided.
fn decided_yes_or_no(fan: &FanOut<Applied>) -> bool {
    let yes = fan.count(|reply| *reply == Applied::Yes);
    yes >= fan.quorum() || (fan.answered() >= fan.quorum() && yes + fan.unanswered() < fan.quorum())
}

/// Logs a node that does not answer; returns whether it answered.
fn report(status: &NodeStatus) -> bool {
    match &status.result {
        Ok(_) => true,
        Err(err) => {
            tracing::warn!(node = %err.address, error = %err.kind, "a lock node does not answer");
            false
        }
    }
}
