//! `RCountDownLatch`: wait until N count-downs happened, across processes and hosts, on one
//! master.

use std::sync::Arc;
use std::time::Duration;

use redlock_core::lock_kind::ScriptCall;
use redlock_core::quorum::lease_millis;
use redlock_core::InvalidArgument;
use tokio::time::Instant;

use crate::lua::{LatchReply, LATCH};
use crate::{Error, LockClient};

/// The generation of the one round of a latch whose count its client fixed (`lua/latch.lua`).
const FIXED: &str = "fixed";

/// How long a latch lives after its arming or its latest count-down, unless
/// [`RCountDownLatch::try_set_count_with_ttl`] says otherwise: one day.
pub const LATCH_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// A count-down latch: Redisson's `RCountDownLatch` for tokio, without its double counts.
/// Armed with a count ([`try_set_count`]), it opens once that many count-downs happened, and
/// every [`wait`](RCountDownLatch::wait)er returns.
///
/// - **A count-down counts once.** Each has an id: [`count_down`] makes one per call and keeps
///   it across its retries (a retried count-down is not a second one, where Redisson's may
///   count twice or not be retried at all); [`count_down_as`] takes the caller's, so the same
///   shard counting down twice (a restarted process) counts once.
/// - **Rounds do not mix.** Every arming starts a round with a new generation; a count-down
///   belongs to the round it saw, and one that arrives late (after its round opened and the
///   latch was armed again) never counts in the next round.
/// - **Nothing lives forever.** The latch's keys expire a [`LATCH_TTL`] (or the chosen ttl)
///   after its arming or latest count-down, and are deleted when it opens.
/// - **Redisson's semantics otherwise**: an unset latch is open (its count is 0, and waiting
///   on it returns at once); a count-down of an open latch does nothing; a latch can be armed
///   again once it opened or was deleted.
/// - **Waits are bounded and woken**: the opening is announced (pub/sub), and a waiter looks
///   again every second anyway.
/// - **On several masters, a count fixed by the client and a set of ids.** A counter on
///   several independent masters can open early or never (a count-down that reached a
///   minority), so [`LockClient::get_count_down_latch`] refuses a client of several
///   ([`InvalidArgument::UnsoundOnQuorum`]). [`LockClient::get_quorum_count_down_latch`] fixes
///   the count in the client and keeps each count-down as an id in a set on every master,
///   done once a majority has it; readers count the union of a majority's sets. It is armed
///   from the start, one round per name. A Redis Cluster member is one master.
///
/// [`try_set_count`]: RCountDownLatch::try_set_count
/// [`count_down`]: RCountDownLatch::count_down
/// [`count_down_as`]: RCountDownLatch::count_down_as
///
/// # Examples
///
/// ```no_run
/// # async fn run(client: redlock_reentrant::LockClient) -> Result<(), redlock_reentrant::Error> {
/// use std::time::Duration;
/// // Start when all five shards have loaded.
/// let loaded = client.get_count_down_latch("shards-loaded")?;
/// loaded.try_set_count(5).await?;
/// // ... in each shard, once it loaded:
/// loaded.count_down_as("shard-3").await?;
/// // ... in the coordinator:
/// if loaded.wait(Duration::from_secs(300)).await? {
///     println!("every shard loaded");
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct RCountDownLatch {
    client: LockClient,
    name: Arc<str>,
    /// The latch's hash (its count, round and ttl) and the round's count-down ids.
    latch: Arc<str>,
    done: Arc<str>,
    channel: Arc<str>,
    /// The count its client fixed (a latch on several masters); `None`: armed by
    /// [`RCountDownLatch::try_set_count`], on one master.
    fixed: Option<u32>,
}

impl RCountDownLatch {
    pub(crate) fn new(client: LockClient, name: String) -> Result<Self, Error> {
        crate::one_master::refuse_quorum(
            &client.inner,
            "a count-down latch",
            "a count-down that reached only some masters leaves them counting differently, and \
             a majority's answers can open the latch early or never; use one master, or \
             LockClient::get_quorum_count_down_latch (a count fixed by the client, count-downs \
             kept as a set of ids)",
        )?;
        Ok(Self::build(client, name, None))
    }

    /// The latch `name` of `count` count-downs fixed by this client, on all its masters.
    pub(crate) fn new_fixed(client: LockClient, name: String, count: u32) -> Result<Self, Error> {
        if count == 0 {
            return Err(InvalidArgument::ZeroCount { name }.into());
        }
        Ok(Self::build(client, name, Some(count)))
    }

    fn build(client: LockClient, name: String, fixed: Option<u32>) -> Self {
        let key = client.inner.redlock.config().key_for(&name);
        Self {
            latch: format!("{key}:latch").into(),
            done: format!("{key}:latch-done").into(),
            channel: crate::wakeup::channel_of(&key).into(),
            name: name.into(),
            client,
            fixed,
        }
    }

    /// The latch's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The count its client fixed ([`LockClient::get_quorum_count_down_latch`]), or `None`
    /// when [`RCountDownLatch::try_set_count`] arms it.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn run(client: redlock_reentrant::LockClient) -> Result<(), redlock_reentrant::Error> {
    /// let loaded = client.get_quorum_count_down_latch("shards-loaded", 5)?;
    /// assert_eq!(loaded.fixed_count(), Some(5));
    /// # Ok(()) }
    /// ```
    pub fn fixed_count(&self) -> Option<u32> {
        self.fixed
    }

    /// Arms the latch with `count` count-downs, to live a [`LATCH_TTL`] after its arming or
    /// latest count-down, unless a round is armed already; whether it did.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future may leave it armed or not; calling it again is harmless.
    ///
    /// # Errors
    ///
    /// [`InvalidArgument::ZeroCount`], [`InvalidArgument::EmptyName`], [`Error::WrongType`]
    /// (the latch's keys hold something else), [`Error::NoQuorum`] (the master did not answer),
    /// [`Error::Shutdown`]; [`InvalidArgument::CountFixed`] for a latch whose count its client
    /// fixed (its count-downs arm it).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(latch: redlock_reentrant::RCountDownLatch) -> Result<(), redlock_reentrant::Error> {
    /// if !latch.try_set_count(3).await? {
    ///     println!("a round is under way");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_set_count(&self, count: u32) -> Result<bool, Error> {
        self.try_set_count_with_ttl(count, LATCH_TTL).await
    }

    /// [`RCountDownLatch::try_set_count`], living `ttl` after its arming or latest count-down.
    ///
    /// # Cancel safety
    ///
    /// As [`RCountDownLatch::try_set_count`].
    ///
    /// # Errors
    ///
    /// As [`RCountDownLatch::try_set_count`], and [`InvalidArgument::ZeroLease`] for a zero
    /// `ttl` or [`InvalidArgument::LeaseTooLong`].
    pub async fn try_set_count_with_ttl(&self, count: u32, ttl: Duration) -> Result<bool, Error> {
        if let Some(fixed) = self.fixed {
            return Err(InvalidArgument::CountFixed {
                name: self.name.to_string(),
                count: fixed,
            }
            .into());
        }
        if count == 0 {
            return Err(InvalidArgument::ZeroCount {
                name: self.name.to_string(),
            }
            .into());
        }
        self.check(ttl)?;
        let generation = self.client.inner.new_request_arg().0.to_string();
        let reply = self
            .run("arm", &count.to_string(), &generation, lease_millis(ttl))
            .await?;
        Ok(reply.done)
    }

    /// Counts down once, under an id of its own that its own retries keep (the client's retry
    /// policy): they count once. Nothing when the latch is open (or unset); a latch whose count
    /// its client fixed is never unset: the count-down arms it where it is not. Calling it
    /// again after an error is another count-down, with another id: to retry from outside, use
    /// [`RCountDownLatch::count_down_as`] with an id of your own.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future may leave the count-down applied or not; it counts once at most.
    ///
    /// # Errors
    ///
    /// As [`RCountDownLatch::try_set_count`]; [`Error::NoQuorum`] once the client's retry
    /// policy is spent (the count-down may have been applied).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(latch: redlock_reentrant::RCountDownLatch) -> Result<(), redlock_reentrant::Error> {
    /// latch.count_down().await?;
    /// # Ok(()) }
    /// ```
    pub async fn count_down(&self) -> Result<(), Error> {
        let id = format!("{}", self.client.inner.new_request_arg().0);
        self.count_down_as(&id).await
    }

    /// Counts down once as `id`: every count-down of one round with the same id counts once
    /// (a shard that reports twice, a process restarted half-way). Nothing when the latch is
    /// open (or unset: as [`RCountDownLatch::count_down`]).
    ///
    /// # Cancel safety
    ///
    /// As [`RCountDownLatch::count_down`].
    ///
    /// # Errors
    ///
    /// As [`RCountDownLatch::count_down`], [`InvalidArgument::EmptyId`] for an empty id, and
    /// [`InvalidArgument::CountDiffers`] when a master has another round than the fixed one
    /// (it counted nothing there).
    pub async fn count_down_as(&self, id: &str) -> Result<(), Error> {
        if id.is_empty() {
            return Err(InvalidArgument::EmptyId.into());
        }
        self.check(LATCH_TTL)?;
        if let Some(fixed) = self.fixed {
            return self.count_down_fixed(id, fixed).await;
        }
        // The round this count-down belongs to: the one armed when it is called, read once
        // (retried until it answers). The count-down is then retried in that round only: a
        // retry after its round opened (its first try's reply lost) and the latch was armed
        // again changes nothing, rather than count in the next round.
        let status = self.retried(|| self.run("status", "", "", 0)).await?;
        if !status.armed {
            return Ok(());
        }
        self.retried(|| self.run("count-down", id, &status.generation, 0))
            .await
            .map(drop)
    }

    /// A count-down of the latch whose count is `fixed`: the ids a majority has (their union)
    /// and this one added to the round's set on every master (arming it there if it is not),
    /// retried as one until a majority has them. Each count-down so brings what a majority
    /// knows to the masters it reaches, with the latch's lifetime from now: a majority holds
    /// every count-down done until the ttl after the latest, whichever masters missed some.
    async fn count_down_fixed(&self, id: &str, fixed: u32) -> Result<(), Error> {
        let count = fixed.to_string();
        let replies = self
            .retried(|| async {
                let seen = self.run_fixed("ids", "", "", 0).await?;
                let known = self.counted(&seen, fixed)?;
                let call = known.iter().fold(
                    self.call("count-down-fixed", id, &count, lease_millis(LATCH_TTL)),
                    |call, known| call.arg(*known),
                );
                self.run_fixed_call(call).await
            })
            .await?;
        match replies.iter().find(|reply| reply.other_round) {
            Some(other) => Err(self.other_round(fixed, other.left)),
            None => Ok(()),
        }
    }

    /// The distinct ids counted down that `replies` (of 'ids', a majority's) hold, or
    /// [`InvalidArgument::CountDiffers`] when a master has another round than the fixed one.
    fn counted<'r>(
        &self,
        replies: &'r [LatchReply],
        fixed: u32,
    ) -> Result<std::collections::BTreeSet<&'r str>, Error> {
        // ('ids' answers a round's count in `left`.)
        if let Some(other) = replies
            .iter()
            .find(|reply| reply.armed && (reply.generation != FIXED || reply.left != fixed))
        {
            return Err(self.other_round(fixed, other.left));
        }
        Ok(replies
            .iter()
            .flat_map(|reply| reply.ids.iter().map(String::as_str))
            .collect())
    }

    fn other_round(&self, fixed: u32, found: u32) -> Error {
        InvalidArgument::CountDiffers {
            name: self.name.to_string(),
            fixed,
            found,
        }
        .into()
    }

    /// `request`, tried again as the client's retry policy says while it fails with a
    /// retryable error (each try is the same request: idempotent).
    async fn retried<F, T>(&self, request: impl Fn() -> F) -> Result<T, Error>
    where
        F: std::future::Future<Output = Result<T, Error>>,
    {
        let mut retries = self.client.inner.redlock.config().retry.backoff();
        loop {
            match request().await {
                Err(err) if err.is_retryable() => match retries.next_delay() {
                    Some(pause) => tokio::time::sleep(pause).await,
                    None => return Err(err),
                },
                done => return done,
            }
        }
    }

    /// How many count-downs the latch still needs: 0 when it is open (or unset). With a count
    /// its client fixed: the count less the distinct ids of the count-downs that a majority of
    /// the masters answered with (the count itself once its keys expired or were deleted).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    ///
    /// # Errors
    ///
    /// As [`RCountDownLatch::try_set_count`] (with a fixed count, [`Error::NoQuorum`] when no
    /// majority answered), and [`InvalidArgument::CountDiffers`] when a master has another
    /// round than the fixed one.
    pub async fn count(&self) -> Result<u32, Error> {
        self.check(LATCH_TTL)?;
        let Some(fixed) = self.fixed else {
            return Ok(self.run("status", "", "", 0).await?.left);
        };
        // Every master's ids are ids counted down: their union, read from a majority, holds
        // every count-down done (each is on a majority) and nothing else.
        let replies = self.run_fixed("ids", "", "", 0).await?;
        let counted = self.counted(&replies, fixed)?;
        Ok(fixed.saturating_sub(u32::try_from(counted.len()).unwrap_or(u32::MAX)))
    }

    /// Waits up to `wait` for the latch to open; whether it did. An unset latch is open (but
    /// one whose count its client fixed is never unset: see [`RCountDownLatch::count`]).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it changes nothing.
    ///
    /// # Errors
    ///
    /// As [`RCountDownLatch::count`]: a master that stops answering ends the wait with
    /// [`Error::NoQuorum`] once the client's retry policy is spent.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(latch: redlock_reentrant::RCountDownLatch) -> Result<(), redlock_reentrant::Error> {
    /// use std::time::Duration;
    /// let opened = latch.wait(Duration::from_secs(60)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn wait(&self, wait: Duration) -> Result<bool, Error> {
        let deadline = Instant::now().checked_add(wait);
        let inner = &self.client.inner;
        crate::one_master::wait_announced(inner, &self.channel, deadline, true, || async {
            Ok(self.count().await? == 0)
        })
        .await
    }

    /// Deletes the latch: it is open (its waiters return), and can be armed again. Whether
    /// there was a round to delete. With a count its client fixed, on every master (a majority
    /// must answer): clean-up after its round, whose name is not to be used again (a master
    /// that missed the deletion, down or cut off, would bring its ids back); waiters look
    /// again and find the full count.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future may leave it deleted or not; calling it again is harmless.
    ///
    /// # Errors
    ///
    /// As [`RCountDownLatch::try_set_count`].
    pub async fn delete(&self) -> Result<bool, Error> {
        self.check(LATCH_TTL)?;
        if self.fixed.is_some() {
            let replies = self.run_fixed("delete", "", "", 0).await?;
            return Ok(replies.iter().any(|reply| reply.done));
        }
        Ok(self.run("delete", "", "", 0).await?.done)
    }

    fn check(&self, ttl: Duration) -> Result<(), Error> {
        let inner = &self.client.inner;
        inner.check_open()?;
        if ttl.is_zero() {
            return Err(InvalidArgument::ZeroLease.into());
        }
        if lease_millis(ttl) > i64::MAX as u64 / 2 {
            return Err(InvalidArgument::LeaseTooLong { lease: ttl }.into());
        }
        inner.check_request(&self.name, inner.watchdog.timeout())
    }

    /// Runs `op` of `lua/latch.lua` on the master, once, with its arguments (`ARGV[2]` and
    /// `ARGV[3]`, `ARGV[6]`: the ttl in milliseconds, for an arming).
    async fn run(
        &self,
        op: &str,
        first: &str,
        second: &str,
        ttl_ms: u64,
    ) -> Result<LatchReply, Error> {
        let call = self.call(op, first, second, ttl_ms);
        crate::one_master::run_once(&self.client.inner, &self.name, &self.latch, call).await
    }

    /// Runs `op` as [`RCountDownLatch::run`] does, on every master, once: the answers of a
    /// majority at least (of every master that answered), or [`Error::NoQuorum`].
    async fn run_fixed(
        &self,
        op: &str,
        first: &str,
        second: &str,
        ttl_ms: u64,
    ) -> Result<Vec<LatchReply>, Error> {
        self.run_fixed_call(self.call(op, first, second, ttl_ms))
            .await
    }

    /// Runs `call` as [`RCountDownLatch::run_fixed`] does.
    async fn run_fixed_call(&self, call: ScriptCall) -> Result<Vec<LatchReply>, Error> {
        crate::one_master::run_on_a_majority(&self.client.inner, &self.name, &self.latch, call)
            .await
    }

    /// The call of `op` of `lua/latch.lua` with its arguments.
    fn call(&self, op: &str, first: &str, second: &str, ttl_ms: u64) -> ScriptCall {
        let inner = &self.client.inner;
        let call = LATCH.call();
        // A change must survive a failover where replicas are configured to acknowledge it; a
        // deletion goes to every master, also one that stopped answering lately.
        let call = match op {
            "status" | "ids" => call,
            "delete" => call.replicated().releasing(),
            _ => call.replicated(),
        };
        call.key(&*self.latch)
            .key(&*self.done)
            .arg(op)
            .arg(first)
            .arg(second)
            .arg(&*self.channel)
            .arg(inner.new_request_arg())
            .arg(ttl_ms)
    }
}
