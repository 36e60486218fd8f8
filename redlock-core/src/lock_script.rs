//! Lua scripts and their calls: by SHA (`EVALSHA`) only where the connection ran them, whole
//! (`EVAL`) everywhere else.

use std::sync::{Arc, OnceLock};

use smallvec::SmallVec;

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
            keys: Keys::default(),
            packed: None,
            by_source: false,
            releasing: false,
            replicated: false,
            quorum: None,
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
///
/// It is packed as it is built, as the `EVALSHA` the connection sends: the keys wait in a
/// buffer inside the call until the first argument (`EVALSHA` names how many keys come before
/// them), and from then on every argument is written straight into the command. Keys may
/// still be added after arguments (the command is then packed again); adding every key first
/// packs each byte once.
#[derive(Clone)]
pub struct ScriptCall {
    script: &'static LockScript,
    /// The keys, in order.
    keys: Keys,
    /// `EVALSHA`, the SHA, the number of keys, the keys, then the arguments so far: made at
    /// the first argument, shared (not copied) with the requests that send it.
    packed: Option<Arc<redis::Cmd>>,
    by_source: bool,
    releasing: bool,
    replicated: bool,
    /// How many nodes decide it; `None`: a majority.
    quorum: Option<usize>,
}

/// The keys of a call, in one inline buffer: a lock's keys fit without an allocation.
#[derive(Clone, Default)]
struct Keys {
    bytes: SmallVec<[u8; 96]>,
    /// Where each key ends in `bytes`.
    ends: SmallVec<[usize; 2]>,
}

impl Keys {
    fn iter(&self) -> impl Iterator<Item = &[u8]> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts
            .zip(self.ends.iter().copied())
            .map(|(start, end)| &self.bytes[start..end])
    }
}

impl redis::RedisWrite for Keys {
    fn write_arg(&mut self, arg: &[u8]) {
        self.bytes.extend_from_slice(arg);
        self.ends.push(self.bytes.len());
    }

    fn writer_for_next_arg(&mut self) -> impl std::io::Write + '_ {
        KeyWriter { keys: self }
    }
}

/// Writes one key into [`Keys`]; the key ends when the writer is dropped.
struct KeyWriter<'a> {
    keys: &'a mut Keys,
}

impl std::io::Write for KeyWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.keys.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for KeyWriter<'_> {
    fn drop(&mut self) {
        self.keys.ends.push(self.keys.bytes.len());
    }
}

impl std::fmt::Debug for ScriptCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Arguments may carry owner tokens: only their number is shown.
        f.debug_struct("ScriptCall")
            .field("sha", &self.script.sha())
            .field("keys", &self.keys.ends.len())
            .field("args", &self.args().count())
            .finish()
    }
}

impl ScriptCall {
    /// Adds a key (`KEYS[n]`). Add every key before the arguments: a key after an argument
    /// packs the whole command again (its arguments copied), which a batch built key,
    /// argument, key, argument would pay once per key.
    #[must_use]
    pub fn key(mut self, key: impl ToRedisArgs) -> Self {
        let before = self.keys.ends.len();
        key.write_redis_args(&mut self.keys);
        if let Some(packed) = self.packed.take() {
            // A key after an argument: the command names more keys, so it is packed again.
            let args = words(&packed).skip(3 + before);
            self.packed = Some(Arc::new(self.evalsha_with(self.script, args)));
        }
        self
    }

    /// Adds an argument (`ARGV[n]`).
    #[must_use]
    pub fn arg(mut self, arg: impl ToRedisArgs) -> Self {
        if self.packed.is_none() {
            self.packed = Some(Arc::new(self.command("EVALSHA", self.script.sha(), 96)));
        }
        if let Some(packed) = &mut self.packed {
            arg.write_redis_args(Arc::make_mut(packed));
        }
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

    /// Decided by `quorum` nodes rather than a majority ([`FanOut::quorum`](crate::lock_kind::FanOut::quorum)
    /// says it to the caller's decisions); `None` keeps the majority. For a lock kind whose
    /// promise needs more nodes than any two holders share: a semaphore of k permits needs
    /// [`ack_quorum`](crate::quorum::ack_quorum). At most every node.
    #[must_use]
    pub fn with_quorum(mut self, quorum: Option<usize>) -> Self {
        self.quorum = quorum;
        self
    }

    /// How many nodes decide the call (see [`ScriptCall::with_quorum`]); `None`: a majority.
    pub(crate) fn quorum(&self) -> Option<usize> {
        self.quorum
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
        self.keys.iter().next()
    }

    /// The arguments so far.
    fn args(&self) -> impl Iterator<Item = &[u8]> {
        let skip = 3 + self.keys.ends.len();
        self.packed
            .iter()
            .flat_map(move |packed| words(packed).skip(skip))
    }

    /// The call as `EVALSHA` of `script` (this call's script, or its cluster variant): the
    /// command packed as the call was built when it is this call's, shared, not copied.
    pub(crate) fn evalsha_of(&self, script: &'static LockScript) -> Arc<redis::Cmd> {
        match &self.packed {
            Some(packed) if std::ptr::eq(script, self.script) => Arc::clone(packed),
            _ => Arc::new(self.evalsha_with(script, self.args())),
        }
    }

    /// `EVALSHA` of `script` with this call's keys and `args`.
    fn evalsha_with<'a>(
        &self,
        script: &'static LockScript,
        args: impl Iterator<Item = &'a [u8]>,
    ) -> redis::Cmd {
        let mut cmd = self.command("EVALSHA", script.sha(), 0);
        for arg in args {
            cmd.arg(arg);
        }
        cmd
    }

    /// `verb body <number of keys> <keys>`, with room for `room` bytes of arguments more.
    fn command(&self, verb: &str, body: &str, room: usize) -> redis::Cmd {
        let keys = self.keys.ends.len();
        let mut cmd = redis::Cmd::with_capacity(
            3 + keys + 6,
            verb.len() + body.len() + 4 + self.keys.bytes.len() + room,
        );
        cmd.arg(verb).arg(body).arg(keys);
        for key in self.keys.iter() {
            cmd.arg(key);
        }
        cmd
    }
}

/// The words of a packed command.
pub(crate) fn words(cmd: &redis::Cmd) -> impl Iterator<Item = &[u8]> {
    cmd.args_iter().filter_map(|arg| match arg {
        redis::Arg::Simple(bytes) => Some(bytes),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;
    use std::sync::Arc;

    use redis::RedisWrite as _;

    use super::*;

    static SCRIPT: LockScript = LockScript::new("return KEYS[1]").on_cluster(&ON_CLUSTER);
    static ON_CLUSTER: LockScript = LockScript::new("return KEYS[2]");

    fn words_of(cmd: &redis::Cmd) -> Vec<String> {
        words(cmd)
            .map(|word| String::from_utf8_lossy(word).into_owned())
            .collect()
    }

    fn expected(sha: &str, rest: &[&str]) -> Vec<String> {
        ["EVALSHA", sha]
            .iter()
            .chain(rest)
            .map(|w| (*w).to_owned())
            .collect()
    }

    #[test]
    fn a_call_is_packed_as_the_evalsha_it_sends() {
        let call = SCRIPT.call().key("k1").key("k2").arg("a1").arg(7);
        let packed = call.evalsha_of(&SCRIPT);
        assert_eq!(
            words_of(&packed),
            expected(SCRIPT.sha(), &["2", "k1", "k2", "a1", "7"])
        );
        assert_eq!(call.first_key(), Some(&b"k1"[..]));
        assert!(
            Arc::ptr_eq(&packed, &call.evalsha_of(&SCRIPT)),
            "shared with each request, not copied"
        );
        // The cluster variant names its own script, with the same keys and arguments.
        assert_eq!(
            words_of(&call.evalsha_of(&ON_CLUSTER)),
            expected(ON_CLUSTER.sha(), &["2", "k1", "k2", "a1", "7"])
        );
    }

    #[test]
    fn keys_after_arguments_are_packed_before_them() {
        let late = SCRIPT.call().arg("a1").key("k1").arg("a2").key("k2");
        let first = SCRIPT.call().key("k1").key("k2").arg("a1").arg("a2");
        assert_eq!(
            words_of(&late.evalsha_of(&SCRIPT)),
            words_of(&first.evalsha_of(&SCRIPT))
        );
        assert_eq!(
            words_of(&first.evalsha_of(&SCRIPT)),
            expected(SCRIPT.sha(), &["2", "k1", "k2", "a1", "a2"])
        );
    }

    #[test]
    fn a_call_without_arguments_names_its_keys() {
        let call = SCRIPT.call().key("k1");
        assert_eq!(
            words_of(&call.evalsha_of(&SCRIPT)),
            expected(SCRIPT.sha(), &["1", "k1"])
        );
        assert_eq!(format!("{call:?}").matches("args: 0").count(), 1);
        let none = SCRIPT.call();
        assert_eq!(none.first_key(), None);
        assert_eq!(
            words_of(&none.evalsha_of(&SCRIPT)),
            expected(SCRIPT.sha(), &["0"])
        );
    }

    #[test]
    fn a_key_written_in_pieces_is_one_key() {
        let mut keys = Keys::default();
        {
            let mut writer = keys.writer_for_next_arg();
            write!(writer, "lock:").expect("in memory");
            write!(writer, "{}", 42).expect("in memory");
        }
        keys.write_arg(b"fence");
        let written: Vec<&[u8]> = keys.iter().collect();
        assert_eq!(written, [&b"lock:42"[..], &b"fence"[..]]);
    }

    #[test]
    fn debug_shows_no_argument() {
        let call = SCRIPT.call().key("k").arg("secret-owner");
        let shown = format!("{call:?}");
        assert!(!shown.contains("secret"), "{shown}");
        assert!(
            shown.contains("keys: 1") && shown.contains("args: 1"),
            "{shown}"
        );
    }
}
