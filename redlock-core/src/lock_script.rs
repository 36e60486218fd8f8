//! Lua scripts and their calls: by SHA (`EVALSHA`) only where the connection ran them, whole
//! (`EVAL`) everywhere else.

use std::sync::OnceLock;

use redis::ToRedisArgs;

/// A Lua script run on every node.
///
/// A standalone master is sent `EVALSHA` once the script ran on its current connection, and the
/// whole source (`EVAL`, which caches it) until then; a Redis Cluster member always gets `EVAL`
/// (its shards cache scripts each on their own). A `NOSCRIPT` (after `SCRIPT FLUSH`, a restart or a
/// failover) makes the node forget what it knew: the call is sent again as `EVAL` only if
/// nothing was queued on that node after it; otherwise that node failed the request, which did
/// not run. A `NOSCRIPT` is never read as an answer about the lock (see `docs/algorithm.md`).
///
/// # Examples
///
/// Every lock crate declares its scripts the same way, as statics beside their Lua files:
///
/// ```
/// use redlock_core::lock_kind::LockScript;
/// static ECHO: LockScript = LockScript::new("return ARGV[1]");
/// let call = ECHO.call().key("redlock:a").arg("token");
/// assert_eq!(call.sha(), ECHO.sha());
/// assert_eq!(ECHO.sha().len(), 40);
/// ```
#[derive(Clone)]
pub struct LockScript {
    source: &'static str,
    /// Computed on first use: a `const` constructor cannot hash.
    sha: OnceLock<String>,
    /// The script cluster members run instead (see [`LockScript::on_cluster`]).
    on_cluster: Option<&'static LockScript>,
}

impl LockScript {
    /// A script from its Lua source (user data goes in `KEYS`/`ARGV`, never in the source).
    pub const fn new(source: &'static str) -> Self {
        Self {
            source,
            sha: OnceLock::new(),
            on_cluster: None,
        }
    }

    /// The same script with a variant that Redis Cluster members run instead: the same keys,
    /// arguments and reply, announcing on shard channels (`SPUBLISH`) where this one publishes
    /// to every node (`PUBLISH`).
    ///
    /// ```
    /// use redlock_core::lock_kind::LockScript;
    /// static SHARDED: LockScript = LockScript::new("return redis.call('spublish', KEYS[1], ARGV[1])");
    /// static ANNOUNCE: LockScript =
    ///     LockScript::new("return redis.call('publish', KEYS[1], ARGV[1])").on_cluster(&SHARDED);
    /// assert_ne!(ANNOUNCE.sha(), SHARDED.sha());
    /// ```
    pub const fn on_cluster(mut self, variant: &'static LockScript) -> Self {
        self.on_cluster = Some(variant);
        self
    }

    /// Starts a call of this script (scripts are statics: a call may finish in the
    /// background after its caller decided).
    pub fn call(&'static self) -> ScriptCall {
        ScriptCall {
            script: self,
            keys: redis::Cmd::with_capacity(2, 64),
            args: redis::Cmd::with_capacity(6, 128),
            by_source: false,
            releasing: false,
            replicated: false,
        }
    }

    pub(crate) fn source(&self) -> &'static str {
        self.source
    }

    /// The script's SHA1, as `EVALSHA` names it.
    pub fn sha(&self) -> &str {
        self.sha
            .get_or_init(|| redis::Script::new(self.source).get_hash().to_owned())
    }
}

impl std::fmt::Debug for LockScript {
    /// The SHA1 names the script; its source would fill a log line.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("LockScript").field(&self.sha()).finish()
    }
}

/// One call of a [`LockScript`] with its keys and arguments, ready to send to every node.
#[derive(Clone)]
pub struct ScriptCall {
    script: &'static LockScript,
    /// The keys and the arguments, each packed in one buffer (a `Cmd` used as an argument
    /// list): no allocation per key or argument.
    keys: redis::Cmd,
    args: redis::Cmd,
    by_source: bool,
    releasing: bool,
    replicated: bool,
}

impl std::fmt::Debug for ScriptCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Arguments may carry owner tokens: only their number is shown.
        f.debug_struct("ScriptCall")
            .field("sha", &self.script.sha())
            .field("keys", &self.keys.args_iter().len())
            .field("args", &self.args.args_iter().len())
            .finish()
    }
}

impl ScriptCall {
    /// Adds a key (`KEYS[n]`).
    #[must_use]
    pub fn key(mut self, key: impl ToRedisArgs) -> Self {
        key.write_redis_args(&mut self.keys);
        self
    }

    /// Adds an argument (`ARGV[n]`).
    #[must_use]
    pub fn arg(mut self, arg: impl ToRedisArgs) -> Self {
        arg.write_redis_args(&mut self.args);
        self
    }

    /// Sends the script's source (`EVAL`) rather than its SHA.
    ///
    /// For requests whose replies may never be awaited: clean-ups after a failed or dropped
    /// acquisition. A node that is paused or slow receives such a request after its caller has
    /// stopped listening; had it forgotten the script, its `NOSCRIPT` would reach nobody and the
    /// clean-up would never run. Sent whole, the node runs it whenever it gets to it.
    #[must_use]
    pub fn by_source(mut self) -> Self {
        self.by_source = true;
        self
    }

    /// Marks the call as releasing what earlier calls may have taken (a release, an undo): it
    /// is sent to every node, also one that stopped answering lately, whose earlier requests
    /// may still land. Other calls skip such a node while a majority answers.
    #[must_use]
    pub fn releasing(mut self) -> Self {
        self.releasing = true;
        self
    }

    /// Marks the call as a write that must survive a failover (an acquisition, a renewal, a
    /// fencing write-back): where [`RedlockConfig::replica_acks`](crate::RedlockConfig::replica_acks)
    /// is set, a node counts it as done only once `WAIT` says enough replicas have it.
    #[must_use]
    pub fn replicated(mut self) -> Self {
        self.replicated = true;
        self
    }

    /// Whether the call must reach replicas (see [`ScriptCall::replicated`]).
    pub(crate) fn is_replicated(&self) -> bool {
        self.replicated
    }

    /// Whether the call releases (see [`ScriptCall::releasing`]).
    pub(crate) fn is_releasing(&self) -> bool {
        self.releasing
    }

    /// Whether the call is sent by source (see [`ScriptCall::by_source`]).
    pub(crate) fn is_by_source(&self) -> bool {
        self.by_source
    }

    /// The script's SHA1.
    pub fn sha(&self) -> &'static str {
        self.script.sha()
    }

    /// The script a standalone master runs (`false`) or a cluster member runs (`true`).
    pub(crate) fn script_for(&self, cluster: bool) -> &'static LockScript {
        match self.script.on_cluster {
            Some(variant) if cluster => variant,
            _ => self.script,
        }
    }

    /// Whether cluster members run another script than standalone masters.
    pub(crate) fn has_cluster_variant(&self) -> bool {
        self.script.on_cluster.is_some()
    }

    /// The first key, which routes the call on a cluster (all its keys share one slot).
    pub(crate) fn first_key(&self) -> Option<&[u8]> {
        self.keys.args_iter().find_map(|arg| match arg {
            redis::Arg::Simple(bytes) => Some(bytes),
            _ => None,
        })
    }

    pub(crate) fn evalsha_of(&self, script: &'static LockScript) -> redis::Cmd {
        self.command("EVALSHA", script.sha())
    }

    fn command(&self, verb: &str, body: &str) -> redis::Cmd {
        let keys = self.keys.args_iter();
        let args = self.args.args_iter();
        let bytes = |list: &redis::Cmd| {
            list.args_iter()
                .map(|arg| match arg {
                    redis::Arg::Simple(bytes) => bytes.len(),
                    _ => 0,
                })
                .sum::<usize>()
        };
        let mut cmd = redis::Cmd::with_capacity(
            3 + keys.len() + args.len(),
            verb.len() + body.len() + 4 + bytes(&self.keys) + bytes(&self.args),
        );
        cmd.arg(verb).arg(body).arg(keys.len());
        for arg in keys.chain(args) {
            if let redis::Arg::Simple(bytes) = arg {
                cmd.arg(bytes);
            }
        }
        cmd
    }
}
