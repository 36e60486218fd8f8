//! The lock client: node pools, the watchdog, the pub/sub wake-ups and this process's holds.

use std::sync::Arc;
use std::time::Duration;

use redlock_core::{Error, Readiness, Redlock, RedlockConfig, ReplicaAcks, RetryPolicy};
use redlock_watchdog::{Watchdog, WatchdogConfig};

use crate::config::{ConfigError, LockClientConfig};
use crate::inner::Inner;
use crate::kind::{FairKeys, Kind, LockKeys};
use crate::wakeup::Wakeups;
use crate::{
    LockOwner, RCountDownLatch, RLock, RPermitExpirableSemaphore, RReadWriteLock, RSemaphore,
    UnownedSemaphore, WaitStrategy,
};

/// A connection to N independent Redis masters that hands out [`RLock`]s.
///
/// Create one per process and share it (it is cheap to clone). It owns the node pools, one
/// watchdog task that renews every lock its tasks hold, and one pub/sub connection per node for
/// waiters.
///
/// # Shutdown
///
/// [`LockClient::shutdown`] releases every lock this client holds and stops renewing. Dropping
/// the last clone without it stops renewal too, and the locks it held expire within one
/// watchdog timeout (30 s by default), like a crashed process's.
///
/// # Examples
///
/// ```no_run
/// use std::time::Duration;
/// use redlock_reentrant::LockClient;
/// # async fn run() -> Result<(), redlock_reentrant::Error> {
/// let client = LockClient::builder()
///     .nodes(["redis://10.0.0.1:6379", "redis://10.0.0.2:6379", "redis://10.0.0.3:6379"])
///     .watchdog_timeout(Duration::from_secs(30))
///     .build()
///     .await?;
/// let lock = client.get_lock("orders:42");
/// lock.lock().await?;
/// // ... one holder at a time across every process ...
/// lock.unlock().await?;
/// client.shutdown().await;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct LockClient {
    pub(crate) inner: Arc<Inner>,
}

impl LockClient {
    /// A client for these node URLs with every default: a 30 s watchdog renewed every 10 s.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: nothing is connected yet when this returns, and nothing is left if dropped.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for no URL or an unusable one (shown without its password).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), redlock_reentrant::Error> {
    /// let client = redlock_reentrant::LockClient::connect(["redis://127.0.0.1:6379"]).await?;
    /// # Ok(()) }
    /// ```
    pub async fn connect<I, S>(nodes: I) -> Result<Self, Error>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self::builder().nodes(nodes).build().await
    }

    /// A builder for every setting.
    pub fn builder() -> LockClientBuilder {
        LockClientBuilder::default()
    }

    /// The lock `name` (its Redis key is the key prefix plus the name). Nothing is sent yet; an
    /// empty name is refused by the operations.
    pub fn get_lock(&self, name: impl Into<String>) -> RLock {
        let name: String = name.into();
        let key = self.inner.redlock.config().key_for(&name);
        RLock::new(
            self.clone(),
            name.into(),
            &key,
            Kind::Reentrant,
            LockKeys::Own,
        )
    }

    /// The read-write lock `name`: many readers at once, or one writer (see
    /// [`RReadWriteLock`]). The writer's hash is the reentrant lock `name`'s (the key prefix
    /// plus the name): held, that lock keeps writers and new readers out as a writer would,
    /// but it is granted beside readers, whom it does not look at; one owner cannot hold both
    /// ([`InvalidArgument::LockKindClash`](crate::InvalidArgument::LockKindClash)). The readers
    /// and the waiting writers are kept beside it, in `:read` and `:write-waiting`. Nothing is
    /// sent yet.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(client: redlock_reentrant::LockClient) -> Result<(), redlock_reentrant::Error> {
    /// let config = client.get_read_write_lock("config");
    /// let reading = config.read_lock().acquire().await?;
    /// reading.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub fn get_read_write_lock(&self, name: impl Into<String>) -> RReadWriteLock {
        RReadWriteLock::new(self.clone(), name.into())
    }

    /// The semaphore `name`: at most its count of permits out at once, each with a holder and
    /// a lease of its own (see [`RPermitExpirableSemaphore`]). Its permits and count are kept
    /// beside the key prefix plus the name, in `:permits` and `:permit-count`. Nothing is sent
    /// yet.
    ///
    /// # Errors
    ///
    /// [`InvalidArgument::UnsoundOnQuorum`](crate::InvalidArgument::UnsoundOnQuorum) when the
    /// client has several masters: a semaphore is sound on one only.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(client: redlock_reentrant::LockClient) -> Result<(), redlock_reentrant::Error> {
    /// let exports = client.get_permit_expirable_semaphore("exports")?;
    /// exports.try_set_permits(4).await?;
    /// let permit = exports.acquire(1).await?;
    /// permit.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn get_permit_expirable_semaphore(
        &self,
        name: impl Into<String>,
    ) -> Result<RPermitExpirableSemaphore, Error> {
        RPermitExpirableSemaphore::new(self.clone(), name.into())
    }

    /// The semaphore `name` of `permits` permits fixed by this client, sound on all its masters
    /// (see [`RPermitExpirableSemaphore`]): each acquisition is granted by
    /// `floor(k·N/(k+1)) + 1` of the N masters rather than a majority
    /// ([`RPermitExpirableSemaphore::quorum`]), so holders that each won a different set of
    /// masters can never hold more than k permits together (each master grants at most k).
    /// It tolerates `N - quorum` masters down: with one permit, a minority (it is the mutex);
    /// 2 permits on 3 masters need all 3, and surviving one master down takes at least k + 2
    /// masters. On one master it is that master's semaphore with its count fixed.
    ///
    /// A master records the count beside the permits it granted under it (it goes with them),
    /// and every client of the semaphore must fix the same: an acquisition that finds another
    /// (recorded, or set with `set_permits` on one master) is refused
    /// ([`InvalidArgument::PermitCountDiffers`](crate::InvalidArgument::PermitCountDiffers)),
    /// and the count verbs (`set_permits`, `add_permits`, `drain_permits`, `try_set_permits`)
    /// answer [`InvalidArgument::PermitsFixed`](crate::InvalidArgument::PermitsFixed). A
    /// permit granted while some masters were down is renewed only where it was granted: until
    /// its release, it survives fewer failures. Nothing is sent yet.
    ///
    /// As every Redlock primitive, it counts on the masters keeping what they granted: a
    /// master restarted without its data must stay out for a lease first (see the deployment
    /// notes).
    ///
    /// # Errors
    ///
    /// [`InvalidArgument::ZeroPermits`](crate::InvalidArgument::ZeroPermits) for `permits` 0.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(client: redlock_reentrant::LockClient) -> Result<(), redlock_reentrant::Error> {
    /// // At most three calls to the payment provider at once, on every master of the client.
    /// let calls = client.get_quorum_semaphore("payment-provider", 3)?;
    /// let permit = calls.acquire(1).await?;
    /// permit.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn get_quorum_semaphore(
        &self,
        name: impl Into<String>,
        permits: u32,
    ) -> Result<RPermitExpirableSemaphore, Error> {
        RPermitExpirableSemaphore::new_fixed(self.clone(), name.into(), permits)
    }

    /// The semaphore `name` with Redisson's `RSemaphore` verbs (`acquire(n)`, `release(n)`),
    /// whose permits come back when their holder dies (see [`RSemaphore`]): the same
    /// semaphore as [`LockClient::get_permit_expirable_semaphore`] of that name.
    ///
    /// # Errors
    ///
    /// As [`LockClient::get_permit_expirable_semaphore`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(client: redlock_reentrant::LockClient) -> Result<(), redlock_reentrant::Error> {
    /// let workers = client.get_semaphore("workers")?;
    /// if workers.try_acquire(1, std::time::Duration::from_secs(1)).await? {
    ///     workers.release(1).await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn get_semaphore(&self, name: impl Into<String>) -> Result<RSemaphore, Error> {
        Ok(RSemaphore::new(self.get_permit_expirable_semaphore(name)?))
    }

    /// The semaphore `name` as Redisson's plain counter, with no holders: **its permits leak
    /// on a crash** (see [`UnownedSemaphore`]). Its count is the permit semaphore's of that name.
    ///
    /// # Errors
    ///
    /// As [`LockClient::get_permit_expirable_semaphore`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(client: redlock_reentrant::LockClient) -> Result<(), redlock_reentrant::Error> {
    /// let tickets = client.get_unowned_semaphore("tickets")?;
    /// tickets.acquire(1).await?;
    /// tickets.release(1).await?;
    /// # Ok(()) }
    /// ```
    pub fn get_unowned_semaphore(
        &self,
        name: impl Into<String>,
    ) -> Result<UnownedSemaphore, Error> {
        Ok(UnownedSemaphore::new(
            self.get_permit_expirable_semaphore(name)?,
        ))
    }

    /// The count-down latch `name` (see [`RCountDownLatch`]), kept beside the key prefix plus
    /// the name, in `:latch` and `:latch-done`. Nothing is sent yet.
    ///
    /// # Errors
    ///
    /// [`InvalidArgument::UnsoundOnQuorum`](crate::InvalidArgument::UnsoundOnQuorum) when the
    /// client has several masters: the latch is sound on one only.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(client: redlock_reentrant::LockClient) -> Result<(), redlock_reentrant::Error> {
    /// let ready = client.get_count_down_latch("ready")?;
    /// ready.try_set_count(2).await?;
    /// ready.count_down().await?;
    /// # Ok(()) }
    /// ```
    pub fn get_count_down_latch(&self, name: impl Into<String>) -> Result<RCountDownLatch, Error> {
        RCountDownLatch::new(self.clone(), name.into())
    }

    /// The count-down latch `name` of `count` count-downs fixed by this client, sound on all
    /// its masters (see [`RCountDownLatch`]): a count-down adds its id to a set on every master
    /// and is done once a majority has it; [`RCountDownLatch::count`] and
    /// [`RCountDownLatch::wait`] read a majority and count the ids of the union. Every
    /// count-down done is on a majority, and any two majorities share a master, so a reader
    /// that asks after the last count-down sees it; and the union holds only ids counted down,
    /// so the latch never opens early. It tolerates a minority of masters down.
    ///
    /// It is armed from the start (no [`RCountDownLatch::try_set_count`]: that is
    /// [`InvalidArgument::CountFixed`](crate::InvalidArgument::CountFixed)), opens after
    /// `count` distinct count-downs, and stays open until its keys expire ([`LATCH_TTL`](crate::LATCH_TTL)
    /// after the latest count-down: each count-down copies what a majority holds to every
    /// master it reaches) or [`RCountDownLatch::delete`]. A round is the latch's name, used
    /// once: give each round a name of its own (a date, a deploy's id). A name used again
    /// after its deletion or expiry could count ids of the earlier round that a master cut off
    /// at the time still has, or a late count-down of it. Every client
    /// of it must fix the same count: a count-down that finds another is
    /// [`InvalidArgument::CountDiffers`](crate::InvalidArgument::CountDiffers). Nothing is
    /// sent yet.
    ///
    /// # Errors
    ///
    /// [`InvalidArgument::ZeroCount`](crate::InvalidArgument::ZeroCount) for `count` 0.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(client: redlock_reentrant::LockClient) -> Result<(), redlock_reentrant::Error> {
    /// use std::time::Duration;
    /// // Start when all five shards of today's load are in, on every master of the client.
    /// let loaded = client.get_quorum_count_down_latch("shards-loaded-2026-11-27", 5)?;
    /// loaded.count_down_as("shard-3").await?;
    /// let all_in = loaded.wait(Duration::from_secs(300)).await?;
    /// # Ok(()) }
    /// ```
    pub fn get_quorum_count_down_latch(
        &self,
        name: impl Into<String>,
        count: u32,
    ) -> Result<RCountDownLatch, Error> {
        RCountDownLatch::new_fixed(self.clone(), name.into(), count)
    }

    /// The fair lock `name`: an [`RLock`], with every verb, reentrancy, the watchdog and the
    /// lost signal, granted in the order its waiters came (see `docs/fair-lock.md`). Each task
    /// that waits takes a ticket in a queue on the server and keeps it alive with a heartbeat
    /// while it waits (a third of the watchdog's lease, 10 s by default, and at least four
    /// per-node timeouts): a waiter that crashed is dropped from the queue within its
    /// heartbeat wherever it stands, and a live one is never dropped however long it waits. A
    /// one-shot `try_lock` never goes before a waiter. Its keys are its own (`:fair`,
    /// `:fair-queue`, `:fair-heartbeats`, `:fair-tickets` beside the key prefix plus the name):
    /// it is not the reentrant lock `name`. Nothing is sent yet.
    ///
    /// # Errors
    ///
    /// [`InvalidArgument::UnsoundOnQuorum`](crate::InvalidArgument::UnsoundOnQuorum) when the
    /// client has several masters: their queues would order the waiters differently, and no
    /// order is kept across them without consensus.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(client: redlock_reentrant::LockClient) -> Result<(), redlock_reentrant::Error> {
    /// let orders = client.get_fair_lock("orders")?;
    /// let guard = orders.acquire().await?; // after every task that waited before this one
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub fn get_fair_lock(&self, name: impl Into<String>) -> Result<RLock, Error> {
        crate::one_master::refuse_quorum(
            &self.inner,
            "a fair lock",
            "each master would queue the waiters in the order it heard them, and no waiter may \
             be first on a majority; use one master, or RLock",
        )?;
        let name: String = name.into();
        let key = self.inner.redlock.config().key_for(&name);
        let fair = Arc::new(FairKeys::of(&key));
        Ok(RLock::new(
            self.clone(),
            name.into(),
            &key,
            Kind::Fair,
            LockKeys::Fair(fair),
        ))
    }

    /// A new explicit owner, for work that moves between tasks (see [`LockOwner`]).
    pub fn new_owner(&self) -> LockOwner {
        LockOwner::new(&self.inner.id)
    }

    /// This client's unique id, the first part of every owner it writes.
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// The quorum core, for plain Redlock locks on the same nodes.
    pub fn redlock(&self) -> &Redlock {
        &self.inner.redlock
    }

    /// The watchdog that renews this client's locks.
    pub fn watchdog(&self) -> &Watchdog {
        &self.inner.watchdog
    }

    /// How many new holds this client granted a fencing token, and how many of those needed
    /// the token written back first (see [`FencingStats`](crate::FencingStats)).
    pub fn fencing_stats(&self) -> crate::FencingStats {
        self.inner.counters.snapshot()
    }

    /// Connects to every node not connected yet and asks each for a `PING`: a readiness check
    /// for a service's health endpoint. [`Readiness::is_ready`] says whether a majority
    /// answers; [`Readiness::failures`] says which nodes do not and why (unreachable, a wrong
    /// password, a failed TLS handshake), without their passwords.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it changes nothing but which connections are open.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(client: redlock_reentrant::LockClient) {
    /// let readiness = client.readiness().await;
    /// println!("{} of {} nodes answer", readiness.reachable(), readiness.nodes.len());
    /// # }
    /// ```
    pub async fn readiness(&self) -> Readiness {
        self.inner.redlock.readiness().await
    }

    /// How many lock channels this client's waiters listen to right now.
    pub fn watched_channels(&self) -> usize {
        self.inner.wakeups.watched_channels()
    }

    /// Releases every lock this client holds (all nested holds at once), stops renewing, and
    /// refuses further operations with [`Error::Shutdown`]. Holds that could not be released
    /// (a node down) expire with their lease. It returns once a majority decided each release;
    /// the requests to the other nodes finish in the background, so a process about to exit
    /// waits for them with [`cleanups_settled`](crate::cleanups_settled) first (dropping the
    /// runtime drops what is not sent yet).
    ///
    /// # Cancel safety
    ///
    /// Dropping the future part-way leaves the client shut down; locks not yet released expire
    /// with their lease.
    pub async fn shutdown(&self) {
        self.inner.close();
        crate::unlock::abandon_all(&self.inner).await;
        self.inner.watchdog.shutdown();
        self.inner.wakeups.close();
    }
}

/// Builds a [`LockClient`].
#[derive(Debug, Clone, Default)]
#[must_use = "a builder does nothing until build() is awaited"]
pub struct LockClientBuilder {
    redlock: RedlockConfig,
    watchdog: WatchdogConfig,
    wait_strategy: WaitStrategy,
}

impl LockClientBuilder {
    /// The URLs of N independent Redis masters (1 for single-instance locking).
    pub fn nodes<I, S>(mut self, nodes: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.redlock.nodes = nodes.into_iter().map(Into::into).collect();
        self
    }

    /// How this client's locks wait for a holder's release, unless a lock says otherwise
    /// ([`RLock::with_wait_strategy`]): pub/sub (the default) or spinning
    /// ([`WaitStrategy::spin`], no subscription per lock).
    pub fn wait_strategy(mut self, strategy: WaitStrategy) -> Self {
        self.wait_strategy = strategy;
        self
    }

    /// The lease of locks taken without one, renewed every `timeout / 3`. Default 30 s.
    pub fn watchdog_timeout(mut self, timeout: Duration) -> Self {
        self.watchdog.timeout = timeout;
        self
    }

    /// Stop renewing a hold after this long; it then expires and its holder is told.
    pub fn max_hold(mut self, cap: Duration) -> Self {
        self.watchdog.max_hold = Some(cap);
        self
    }

    /// How many locks one renewal call carries. Default 500.
    pub fn renew_batch_size(mut self, batch: usize) -> Self {
        self.watchdog.batch_size = batch;
        self
    }

    /// The prefix of every key this client writes. Default `redlock:`.
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.redlock.key_prefix = prefix.into();
        self
    }

    /// How long one node may take to answer. Default: 1 % of the lease, within 20 ..= 500 ms.
    pub fn node_timeout(mut self, timeout: Duration) -> Self {
        self.redlock.node_timeout = Some(timeout);
        self
    }

    /// Retries when a quorum is missing (contention is waited out, not retried). A waiter
    /// whose retries are spent gets [`Error::NoQuorum`](crate::Error::NoQuorum) even if its
    /// wait has time left: where the quorum is one Redis Cluster, give the policy pauses that
    /// outlast a failover (docs/deployments.md).
    pub fn retry(mut self, policy: RetryPolicy) -> Self {
        self.redlock.retry = policy;
        self
    }

    /// The clock-drift allowance as a fraction of the lease. Default 0.01.
    pub fn clock_drift_factor(mut self, factor: f64) -> Self {
        self.redlock.clock_drift_factor = factor;
        self
    }

    /// Confirms acquisitions, renewals and fencing write-backs with `WAIT` on each node: a
    /// node counts one only once this many replicas acknowledged it (for Redis Cluster members
    /// and replicated masters; see docs/deployments.md). Default: no confirmation.
    pub fn replica_acks(mut self, acks: ReplicaAcks) -> Self {
        self.redlock.replica_acks = Some(acks);
        self
    }

    /// A builder configured from `REDLOCK_*` environment variables (see
    /// [`LockClientConfig::from_env`] for the list): `REDLOCK_NODES`,
    /// `REDLOCK_WATCHDOG_TIMEOUT`, `REDLOCK_KEY_PREFIX`, `REDLOCK_NODE_TIMEOUT`,
    /// `REDLOCK_RETRIES`... Methods called on it afterwards override what the environment said.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the variable that is missing (`REDLOCK_NODES`) or cannot work.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// // REDLOCK_NODES=redis://a:6379,redis://b:6379,redis://c:6379 REDLOCK_WATCHDOG_TIMEOUT=20s
    /// let client = redlock_reentrant::LockClientBuilder::from_env()?.build().await?;
    /// # let _ = client;
    /// # Ok(()) }
    /// ```
    pub fn from_env() -> Result<Self, ConfigError> {
        LockClientConfig::from_env()?.into_env_builder()
    }

    /// [`LockClientBuilder::from_env`] over any source of `REDLOCK_*` variables (a map, a
    /// secrets store); errors name the variables.
    ///
    /// # Errors
    ///
    /// As [`LockClientBuilder::from_env`].
    ///
    /// ```
    /// use redlock_reentrant::{ConfigError, LockClientBuilder};
    /// let err = LockClientBuilder::from_lookup(|_| None).unwrap_err();
    /// assert_eq!(err, ConfigError::Missing { setting: "REDLOCK_NODES".into() });
    /// ```
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        LockClientConfig::from_lookup(lookup)?.into_env_builder()
    }

    /// The quorum core's whole configuration at once.
    pub fn redlock_config(mut self, config: RedlockConfig) -> Self {
        self.redlock = config;
        self
    }

    /// The watchdog's whole configuration at once.
    pub fn watchdog_config(mut self, config: WatchdogConfig) -> Self {
        self.watchdog = config;
        self
    }

    /// Builds the client, starts its watchdog task on the current tokio runtime, and connects to
    /// every node ([`Redlock::connect`]: it returns once a majority answers, or every node has
    /// answered or failed; nodes that are down are logged as warnings and do not fail it).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping it leaves only pooled connections, closed with the pools.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for no node, an unusable URL, or a watchdog timeout too short
    /// for the per-node timeout and clock drift, a spinning wait strategy with a zero or
    /// inverted pause.
    pub async fn build(self) -> Result<LockClient, Error> {
        let wait_strategy = self.wait_strategy.validate()?;
        let redlock = Redlock::new(self.redlock)?;
        let watchdog = Watchdog::start(redlock.clone(), self.watchdog)?;
        let timeout = redlock.config().timing(watchdog.timeout()).node_timeout;
        // Connect now, so the first lock does not pay for it (a TLS handshake on a busy machine
        // can outlast a per-node timeout); nodes that are down are reported, not fatal: a
        // minority may be, and a node that hangs does not hold up the build once a majority
        // answered.
        redlock.connect().await;
        let wakeups = Wakeups::start(
            redlock.nodes(),
            redlock.quorum(),
            redlock.config().connect_timeout(),
            timeout,
        );
        Ok(LockClient {
            inner: Arc::new(Inner::new(redlock, watchdog, wakeups, wait_strategy)),
        })
    }
}
