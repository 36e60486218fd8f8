//! One Redis master: its pool, its shared multiplexed connection, requests queued on it in the
//! order they were made, and whether it answers lately.

use std::collections::{HashSet, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use deadpool_redis::{Connection, Manager, Pool, Runtime};
use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::cluster::{ClusterClient, ClusterClientBuilder};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
use redis::{AsyncConnectionConfig, Cmd, ErrorKind, FromRedisValue, RedisError, ServerErrorKind};
use redis::{RedisResult, Value};
use tokio::sync::oneshot;

use crate::cluster::{hash_slot, is_cluster_url, seeds};
use crate::{
    ConnectError, InvalidArgument, LockScript, NodeAddress, NodeError, NodeErrorKind, ReplicaAcks,
    RetryPolicy, ScriptCall,
};

/// One independent Redis master.
///
/// Requests share one multiplexed connection checked out of the node's deadpool pool and kept
/// until it breaks. Checking out per request would cost deadpool's `UNWATCH` + `PING` health
/// check, a second round trip, on every lock operation; a multiplexed connection already
/// carries concurrent requests, pipelined.
///
/// **Requests reach the node in the order they were made.** A request is queued on the
/// connection when it is made, not when its reply is first awaited, and requests made while
/// the node is connecting wait in a queue of their own, in order. So a release always reaches
/// a node after the acquisition it undoes, even when that acquisition's reply is still
/// outstanding (the caller decided without it) or the node is paused.
///
/// **A node that does not answer is not waited on again and again.** A request that times
/// out, or a connection that fails, marks the node unresponsive; a fan-out that has a majority
/// of responsive nodes then skips it (releases are still sent, not awaited) and probes it with
/// a `PING` at most one at a time. The first answer from it, to the probe or to anything else,
/// makes it responsive again.
///
/// Connecting (TCP, TLS handshake, `AUTH`) has a bound of its own, the connect timeout, and
/// runs in a task of its own: a request waits for it at most its per-node timeout, and a
/// connection that takes longer is still there for the next request.
///
/// **A Redis Cluster member** (`redis+cluster://`) is one vote like a standalone master. Its
/// requests go through one redis-rs cluster connection, which routes each by its first key's
/// slot (every key of a lock shares the lock's hash tag) and follows the cluster's topology.
/// redis-rs never sends a request twice (no retries: a script whose reply was lost may have
/// run, and running it again would count a hold twice); the client sends one again itself only
/// when its slot moves (`TRYAGAIN`, `ASK`, `MOVED`: it ran none of it, see `until_run`). Requests
/// to one shard keep their order while fewer than redis-rs's 100 wait to enter the connection
/// and no slot moves; past that, their order is up to the scheduler. The lock scripts name the
/// hold in every request, so a late release or undo of an earlier hold never touches the next
/// one, and a late attempt never takes over a later hold; what reordering costs is a grant no
/// one holds, until its lease ends (docs/deployments.md).
pub struct Node {
    index: usize,
    endpoint: Endpoint,
    link: Arc<Link>,
}

/// How a node is reached: one server, or a Redis Cluster through its seed nodes.
#[derive(Clone)]
#[non_exhaustive]
pub enum Endpoint {
    /// A standalone master (or a single server of any kind).
    Server(Arc<redis::Client>),
    /// A Redis Cluster member: the URLs of its seed nodes, credentials included (never log
    /// them; [`Node::address`] is the printable form).
    Cluster(Arc<[String]>),
}

/// Where a node's connections come from.
enum Connector {
    Pool(Pool),
    Cluster(Box<ClusterClient>),
}

/// A node's live connection: checked out of its pool, or a cluster connection.
enum Wire {
    Pooled(Connection),
    Cluster(ClusterConnection),
}

/// A handle on the live connection that a request is sent through.
enum Sender {
    Multiplexed(MultiplexedConnection),
    Cluster(ClusterConnection),
}

impl Wire {
    fn sender(&self) -> Sender {
        match self {
            Wire::Pooled(connection) => {
                Sender::Multiplexed(MultiplexedConnection::clone(connection))
            }
            Wire::Cluster(connection) => Sender::Cluster(connection.clone()),
        }
    }
}

impl Sender {
    /// Sends `cmd`; on a cluster, to the master of `slot` when given (commands without a key,
    /// like `WAIT`), else wherever its first key routes it.
    async fn send(self, cmd: &Cmd, slot: Option<u16>, budget: Duration) -> RedisResult<Value> {
        match self {
            Sender::Multiplexed(mut connection) => connection.send_packed_command(cmd).await,
            Sender::Cluster(connection) => {
                until_run(budget, || {
                    let mut connection = connection.clone();
                    async move {
                        match slot {
                            Some(slot) => {
                                let route = Route::new(slot, SlotAddr::Master);
                                let routing = RoutingInfo::SingleNode(
                                    SingleNodeRoutingInfo::SpecificNode(route),
                                );
                                connection.route_command(cmd.clone(), routing).await
                            }
                            // A probe asks one node, not every one: a shard without a master
                            // (during a failover) must not keep the member's healthy shards
                            // from being asked.
                            None if is_ping(cmd) => {
                                let routing =
                                    RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random);
                                connection.route_command(cmd.clone(), routing).await
                            }
                            None => connection.req_packed_command(cmd).await,
                        }
                    }
                })
                .await
            }
        }
    }

    /// Sends `pipeline` as one request: on a cluster, to the master of `slot` (else wherever
    /// its first key routes it), every command of it on that one connection, in order.
    async fn send_pipeline(
        self,
        pipeline: redis::Pipeline,
        count: usize,
        slot: Option<u16>,
        budget: Duration,
    ) -> RedisResult<Vec<Value>> {
        match self {
            Sender::Multiplexed(mut connection) => {
                connection.send_packed_commands(&pipeline, 0, count).await
            }
            Sender::Cluster(mut connection) => {
                let sent = until_run(budget, || {
                    let (mut connection, pipeline) = (connection.clone(), pipeline.clone());
                    async move {
                        match slot {
                            Some(slot) => {
                                let route = Route::new(slot, SlotAddr::Master);
                                let route = SingleNodeRoutingInfo::SpecificNode(route);
                                connection.route_pipeline(pipeline, 0, count, route).await
                            }
                            None => connection.req_packed_commands(&pipeline, 0, count).await,
                        }
                    }
                })
                .await;
                match sent {
                    // A pipeline's "task gone" is a bare broken pipe, which a shard's dropped
                    // connection can give too: a single command tells the two apart (its
                    // error names the task), and only then is the connection replaced.
                    Err(err) if err.is_io_error() => {
                        let ping = RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random);
                        match connection.route_command(redis::cmd("PING"), ping).await {
                            Err(gone) if cluster_task_gone(&gone) => Err(gone),
                            _ => Err(err),
                        }
                    }
                    sent => sent,
                }
            }
        }
    }
}

/// Sends a request to a Redis Cluster member (`send`, once per try) until the member runs it:
/// a request refused because its slot moves never ran, and is sent again after a short pause,
/// within `budget` (its per-node timeout); past it, the refusal is the answer (a slot left
/// migrating by an aborted resharding fails its locks as before, not as a silent member).
/// docs/deployments.md says why an `ASK` is not followed and what resending costs in order.
async fn until_run<T, F>(budget: Duration, mut send: impl FnMut() -> F) -> RedisResult<T>
where
    F: Future<Output = RedisResult<T>>,
{
    let started = tokio::time::Instant::now();
    let mut pauses = RetryPolicy {
        retries: 0,
        base_delay: Duration::from_millis(10),
        max_delay: Duration::from_millis(100),
    }
    .backoff()
    .unbounded();
    loop {
        match send().await {
            Err(err) if not_run_for_now(&err) => {
                let pause = pauses.next_delay().unwrap_or(Duration::from_millis(100));
                if started.elapsed() + pause >= budget {
                    return Err(err);
                }
                tokio::time::sleep(pause).await;
            }
            sent => return sent,
        }
    }
}

/// Whether a cluster member refused a request because its slot moves: it ran none of it.
fn not_run_for_now(err: &RedisError) -> bool {
    matches!(
        err.kind(),
        ErrorKind::Server(
            ServerErrorKind::Moved | ServerErrorKind::Ask | ServerErrorKind::TryAgain
        )
    )
}

/// Whether a server refused a command as one its user may not run or it does not have.
fn refused_command(err: &RedisError) -> bool {
    err.code() == Some("NOPERM")
        || err
            .to_string()
            .to_ascii_lowercase()
            .contains("unknown command")
}

/// Whether redis-rs's cluster connection answered that its task no longer takes requests. It
/// says so only in the error's text: `deploy_cluster_stall.rs` ends a connection's runtime to
/// pin that text to the redis-rs version the workspace builds.
fn cluster_task_gone(err: &RedisError) -> bool {
    err.is_io_error() && err.to_string().contains("redis_cluster: Unable to")
}

fn is_ping(cmd: &Cmd) -> bool {
    matches!(cmd.args_iter().next(), Some(redis::Arg::Simple(verb)) if verb.eq_ignore_ascii_case(b"PING"))
}

/// What requests to the node share, also from tasks that outlive the caller.
struct Link {
    index: usize,
    address: NodeAddress,
    connector: Connector,
    /// Whether it is a cluster member: scripts with a cluster variant run that one.
    cluster: bool,
    /// Writes marked replicated are confirmed with `WAIT` when set.
    replica_acks: Option<ReplicaAcks>,
    connect_timeout: Duration,
    state: Mutex<State>,
    /// A request timed out or connecting failed, and nothing was heard from the node since.
    /// Outside the lock: every fan-out reads it for every node.
    unresponsive: AtomicBool,
    /// The servers the set's nodes reached, to find one reached twice.
    identities: Arc<Identities>,
}

/// The servers a set's standalone nodes turned out to be, by run id (`INFO server`): one server
/// reached under two names (a DNS alias, a second address of it) must not vote twice. The node
/// that reaches a server first keeps it; another that reaches the same server never connects.
/// Configured addresses that name one server are refused before this (`DuplicateNode`).
#[derive(Debug, Default)]
pub(crate) struct Identities {
    claimed: Mutex<std::collections::HashMap<String, usize>>,
    /// Nodes already reported as aliases (reported once, loudly).
    reported: Mutex<HashSet<usize>>,
}

impl Identities {
    /// Claims the servers `ids` (a standalone server's run id, or every node id of a Redis
    /// Cluster) for `node`, giving up those it had before (a restart, a name now pointing
    /// elsewhere); the node that had claimed one of them, if another.
    fn claim(&self, ids: &[&str], node: usize) -> Result<(), usize> {
        let mut claimed = self.claimed.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(&first) = ids
            .iter()
            .filter_map(|id| claimed.get(*id))
            .find(|owner| **owner != node)
        {
            return Err(first);
        }
        claimed.retain(|_, owner| *owner != node);
        claimed.extend(ids.iter().map(|id| ((*id).to_owned(), node)));
        Ok(())
    }

    /// Whether `node` is reported as an alias for the first time.
    fn first_report(&self, node: usize) -> bool {
        self.reported
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(node)
    }
}

/// The run id in an `INFO server` reply.
fn run_id_of(info: &str) -> Option<&str> {
    info.lines()
        .find_map(|line| line.strip_prefix("run_id:"))
        .map(str::trim)
        .filter(|id| !id.is_empty())
}

/// How many requests a node's connection may hold before it writes them: far more than any
/// client has in flight to one node (a stalled node's requests time out and are skipped).
const PIPELINE_BUFFER: usize = 1 << 20;

/// How long a release stays out at least, whatever its caller's timeout: a stalled node whose
/// buffers are full takes queued requests late, and a release given up meanwhile would be
/// skipped while the acquisition before it still runs (bounded by memory, not correctness:
/// the caller learned of the timeout long before).
const RELEASE_PATIENCE: Duration = Duration::from_secs(10);

/// `from + by`, or a far future where that does not fit (an absurd configured timeout).
fn later(from: tokio::time::Instant, by: Duration) -> tokio::time::Instant {
    from.checked_add(by)
        .unwrap_or_else(|| from + Duration::from_secs(60 * 60 * 24 * 365))
}

/// A reply being awaited from the node.
type Reply = Pin<Box<dyn Future<Output = RedisResult<Value>> + Send>>;

/// The connection, what is known to be cached on it, the queue while connecting, and health.
#[derive(Default)]
struct State {
    connection: Option<Wire>,
    /// Bumped whenever the connection is replaced: what was learned on an older one is stale.
    generation: u64,
    /// SHAs the node ran on this connection. Anything else is sent whole (`EVAL`).
    cached_scripts: HashSet<String>,
    /// Whether a connection attempt is in flight.
    connecting: bool,
    /// Requests made while connecting, in order; sent in that order once connected.
    waiting: VecDeque<Waiting>,
    /// How many requests were queued on the connection so far: a request's sequence number.
    queued: u64,
    /// A probe of an unresponsive node is in flight.
    probing: bool,
    /// The latest deadline of a request placed so far that is not a release. A releasing
    /// request stays out at least this long, and its own timeout more (its caller hears of a
    /// timeout at its own deadline): were it given up before an earlier request was written,
    /// redis-rs would skip it (nobody awaits it) and still write the earlier one, an
    /// acquisition it was to undo.
    latest_deadline: Option<tokio::time::Instant>,
}

/// A request queued while the node connects (`None`: only waiting for the connection).
struct Waiting {
    request: Option<Request>,
    /// The request's per-node timeout (it bounds a replicated write's `WAIT`).
    timeout: Duration,
    done: oneshot::Sender<Result<Option<Queued>, Arc<ConnectError>>>,
}

/// What to send: a script (by SHA when the node has it cached) or a plain command.
#[derive(Clone)]
pub(crate) enum Request {
    Script(Arc<PreparedScript>),
    Command(Arc<Cmd>),
}

/// A script call packed once for every node of a fan-out.
pub(crate) struct PreparedScript {
    /// What standalone masters run.
    standalone: Variant,
    /// What cluster members run, when it differs.
    on_cluster: Option<Variant>,
    by_source: bool,
    releasing: bool,
    replicated: bool,
    /// The slot of the call's keys on a cluster.
    slot: Option<u16>,
}

/// One script of a call, packed.
struct Variant {
    evalsha: Arc<Cmd>,
    sha: &'static str,
    source: &'static str,
}

impl Variant {
    fn new(call: &ScriptCall, script: &'static LockScript) -> Self {
        Self {
            evalsha: Arc::new(call.evalsha_of(script)),
            sha: script.sha(),
            source: script.source(),
        }
    }

    /// The same call with the script's source (`EVAL`), built only when needed.
    fn eval(&self) -> Arc<Cmd> {
        let mut eval = redis::cmd("EVAL");
        eval.arg(self.source);
        for arg in self.evalsha.args_iter().skip(2) {
            if let redis::Arg::Simple(bytes) = arg {
                eval.arg(bytes);
            }
        }
        Arc::new(eval)
    }
}

impl PreparedScript {
    pub(crate) fn new(call: &ScriptCall) -> Self {
        Self {
            standalone: Variant::new(call, call.script_for(false)),
            on_cluster: call
                .has_cluster_variant()
                .then(|| Variant::new(call, call.script_for(true))),
            by_source: call.is_by_source(),
            releasing: call.is_releasing(),
            replicated: call.is_replicated(),
            slot: call.first_key().map(hash_slot),
        }
    }

    /// The script a node of this kind runs.
    fn variant(&self, cluster: bool) -> &Variant {
        match &self.on_cluster {
            Some(variant) if cluster => variant,
            _ => &self.standalone,
        }
    }
}

impl Request {
    /// Whether it releases what earlier requests may have taken: sent even to an unresponsive
    /// node.
    pub(crate) fn is_releasing(&self) -> bool {
        matches!(self, Request::Script(script) if script.releasing)
    }
}

/// A request on the connection: its reply, its place in the queue, and how it was sent.
struct Queued {
    reply: Reply,
    /// The `WAIT` queued right after a replicated write.
    confirmation: Option<Confirmation>,
    sequence: u64,
    generation: u64,
    /// The script SHA it was sent by (`EVALSHA`), or by source (`EVAL`) for a script.
    script: Option<(&'static str, bool)>,
}

/// The reply of the `WAIT` after a replicated write, and how many replicas it must count.
type Confirmation = (Reply, usize);

/// How a request was first placed: on the connection, or in the connecting queue.
enum Placed {
    Queued(Queued),
    /// Connected, and nothing to send (a wish to be connected).
    Connected,
    Waiting(oneshot::Receiver<Result<Option<Queued>, Arc<ConnectError>>>),
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node")
            .field("index", &self.index)
            .field("address", &self.link.address)
            .finish_non_exhaustive()
    }
}

impl Node {
    /// Opens a node from its URL. Nothing is connected until the first request (or
    /// [`Node::connect`]).
    pub(crate) fn open(
        index: usize,
        url: &str,
        options: &NodeOptions,
    ) -> Result<Self, InvalidArgument> {
        let address = NodeAddress::redact(url);
        #[cfg(feature = "tls-rustls")]
        if url
            .get(..6)
            .is_some_and(|scheme| scheme.eq_ignore_ascii_case("rediss"))
        {
            // rustls picks a process-wide crypto provider from its crate features, and panics at
            // the first TLS connection when a build enables two (`ring` here, `aws-lc-rs` from
            // another crate). Installing ours first settles it; a provider the service installed
            // before stays.
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
        let unusable = |reason: String| InvalidArgument::NodeUrl {
            index,
            address: address.clone(),
            reason: hide_secret(reason, url),
        };
        let link = |connector, cluster| Link {
            index,
            address: address.clone(),
            connector,
            cluster,
            replica_acks: options.replica_acks,
            connect_timeout: options.connect_timeout,
            state: Mutex::default(),
            unresponsive: AtomicBool::new(false),
            identities: Arc::clone(&options.identities),
        };
        if is_cluster_url(url) {
            let seeds: Arc<[String]> = seeds(url).map_err(&unusable)?.into();
            // No retries: redis-rs would send a request again after a lost reply, and a
            // script that ran twice counts a hold twice. A redirection refreshes the slot map,
            // and only a request refused because its slot moves is sent again (`until_run`).
            // No response timeout of its own: each request has the caller's per-node timeout.
            let client = ClusterClientBuilder::new(seeds.iter().map(String::as_str))
                .retries(0)
                .connection_timeout(options.connect_timeout)
                .build()
                .map_err(|err| unusable(err.to_string()))?;
            return Ok(Self {
                index,
                endpoint: Endpoint::Cluster(seeds),
                link: Arc::new(link(Connector::Cluster(Box::new(client)), true)),
            });
        }
        let (pool_size, connect_timeout) = (options.pool_size, options.connect_timeout);
        let client = redis::Client::open(url).map_err(|err| unusable(err.to_string()))?;
        // Connecting is bounded by the connect timeout; every request by the caller's per-node
        // timeout (redis-rs's own response timeout would cut a longer configured one short).
        // The multiplexer's channel must never be full: a request that found it full would
        // wait for a slot and enter it on a later poll, in whatever order its task runs, and
        // could be overtaken by one made after it (see `queue_cmd`). Its blocks are allocated
        // as they fill, so a large bound costs nothing until a node stalls.
        let connection_config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(connect_timeout))
            .set_response_timeout(None)
            .set_pipeline_buffer_size(PIPELINE_BUFFER);
        let manager =
            Manager::new_with_config(client.get_connection_info().clone(), connection_config)
                .map_err(|err| unusable(err.to_string()))?;
        let pool = Pool::builder(manager)
            .max_size(pool_size.max(1))
            .runtime(Runtime::Tokio1)
            .build()
            .map_err(|err| unusable(err.to_string()))?;
        Ok(Self {
            index,
            endpoint: Endpoint::Server(Arc::new(client)),
            link: Arc::new(link(Connector::Pool(pool), false)),
        })
    }

    /// The node's position in the configuration.
    pub fn index(&self) -> usize {
        self.index
    }

    /// The node's URL, password hidden.
    pub fn address(&self) -> &NodeAddress {
        &self.link.address
    }

    /// How the node is reached, for what its request connection cannot carry (pub/sub).
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// Whether the node is a Redis Cluster member.
    pub fn is_cluster(&self) -> bool {
        self.link.cluster
    }

    /// Whether the node's last request timed out (or its connection failed) and nothing was
    /// heard from it since: fan-outs with a majority of responsive nodes do not wait for it.
    pub fn is_unresponsive(&self) -> bool {
        self.link.unresponsive.load(Ordering::Relaxed)
    }

    /// Runs a script on this node within `timeout`.
    ///
    /// # Cancel safety
    ///
    /// The request is queued on the node's connection when this is called (not when the future
    /// is first polled), so it keeps its place before anything sent later, and its timeout runs
    /// from then. Dropping the future abandons the reply; a request the connection has not
    /// written yet is then skipped (redis-rs sends nothing nobody awaits), one already written
    /// still runs.
    ///
    /// # Errors
    ///
    /// A [`NodeError`] for a timeout, a failed connection or an error reply.
    pub fn run_script<T: FromRedisValue>(
        &self,
        call: &ScriptCall,
        timeout: Duration,
    ) -> impl Future<Output = Result<T, NodeError>> + Send + 'static {
        let request = Request::Script(Arc::new(PreparedScript::new(call)));
        self.decoded(self.submit(&request, timeout))
    }

    /// Runs one command on this node within `timeout`.
    ///
    /// # Cancel safety
    ///
    /// As [`Node::run_script`].
    ///
    /// # Errors
    ///
    /// A [`NodeError`] for a timeout, a failed connection or an error reply.
    pub fn query<T: FromRedisValue>(
        &self,
        cmd: &Cmd,
        timeout: Duration,
    ) -> impl Future<Output = Result<T, NodeError>> + Send + 'static {
        let request = Request::Command(Arc::new(cmd.clone()));
        self.decoded(self.submit(&request, timeout))
    }

    fn decoded<T: FromRedisValue>(
        &self,
        reply: impl Future<Output = Result<Value, NodeErrorKind>> + Send + 'static,
    ) -> impl Future<Output = Result<T, NodeError>> + Send + 'static {
        let link = Arc::clone(&self.link);
        async move {
            reply
                .await
                .and_then(decode)
                .map_err(|kind| link.error(kind))
        }
    }

    /// The error of this node with `kind`.
    pub(crate) fn error(&self, kind: NodeErrorKind) -> NodeError {
        self.link.error(kind)
    }

    /// Queues `request` on the node now, and returns its reply within `timeout`. The returned
    /// future owns what it needs: it may finish in the background after its caller decided.
    pub(crate) fn submit(
        &self,
        request: &Request,
        timeout: Duration,
    ) -> impl Future<Output = Result<Value, NodeErrorKind>> + Send + 'static {
        let link = Arc::clone(&self.link);
        let (placed, deadline, keep_until) = link.place(Some(request), timeout);
        let request = request.clone();
        async move {
            let reply = {
                let link = Arc::clone(&link);
                async move { link.finish(placed, request, timeout).await }
            };
            if keep_until <= deadline {
                return match tokio::time::timeout_at(deadline, reply).await {
                    Ok(outcome) => outcome,
                    Err(_) => {
                        link.unresponsive.store(true, Ordering::Relaxed);
                        Err(NodeErrorKind::Timeout(timeout))
                    }
                };
            }
            // A release that must outlive the acquisitions queued before it: its caller hears
            // of a timeout at its own deadline, and the request stays out until `keep_until`.
            let mut reply = Box::pin(reply);
            match tokio::time::timeout_at(deadline, reply.as_mut()).await {
                Ok(outcome) => outcome,
                Err(_) => {
                    link.unresponsive.store(true, Ordering::Relaxed);
                    crate::spawn_cleanup(async move {
                        let _ = tokio::time::timeout_at(keep_until, reply).await;
                    });
                    Err(NodeErrorKind::Timeout(timeout))
                }
            }
        }
    }

    /// Starts a probe of an unresponsive node (a `PING` within `timeout`) unless one is in
    /// flight: its answer makes the node responsive again.
    pub(crate) fn probe(&self, timeout: Duration) {
        {
            let mut state = self.link.state();
            if !self.is_unresponsive() || state.probing {
                return;
            }
            state.probing = true;
        }
        /// Clears the flag however the probe ends, its task dropped unfinished included.
        struct Probing(Arc<Link>);
        impl Drop for Probing {
            fn drop(&mut self) {
                self.0.state().probing = false;
            }
        }
        let probing = Probing(Arc::clone(&self.link));
        let ping = self.submit(&Request::Command(Arc::new(redis::cmd("PING"))), timeout);
        let probe = async move {
            let _ = ping.await;
            drop(probing);
        };
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(probe);
        }
    }

    /// Makes sure the node is connected, waiting at most the connect timeout.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the connection attempt goes on in its own task.
    ///
    /// # Errors
    ///
    /// A [`NodeError`] when no connection could be made (refused, unreachable, a failed TLS
    /// handshake or `AUTH`, or the connect timeout).
    pub async fn connect(&self) -> Result<(), NodeError> {
        let link = Arc::clone(&self.link);
        let timeout = self.link.connect_timeout.saturating_mul(2);
        let (placed, _, _) = link.place(None, timeout);
        let connected = async {
            match placed {
                Placed::Queued(_) | Placed::Connected => Ok(()),
                Placed::Waiting(done) => link.connected(done).await.map(|_| ()),
            }
        };
        match tokio::time::timeout(timeout, connected).await {
            Ok(outcome) => outcome.map_err(|kind| self.link.error(kind)),
            Err(_) => Err(self.link.error(NodeErrorKind::Timeout(timeout))),
        }
    }
}

impl Link {
    fn state(&self) -> MutexGuard<'_, State> {
        // The guarded value is never left half-written: a poisoned lock still holds a
        // consistent value.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn error(&self, kind: NodeErrorKind) -> NodeError {
        crate::telemetry::node_error(&self.address, &kind);
        NodeError {
            index: self.index,
            address: self.address.clone(),
            kind,
        }
    }

    /// Places a request (or, with `None`, a wish to be connected) in line: on the connection
    /// if there is one, else in the connecting queue, starting a connection attempt if none is
    /// in flight. Returns where it went, its deadline (`timeout` from now), and how long it
    /// stays out regardless: for a release, past the deadline of every acquisition queued
    /// before it, and its own timeout more.
    fn place(
        self: &Arc<Self>,
        request: Option<&Request>,
        timeout: Duration,
    ) -> (Placed, tokio::time::Instant, tokio::time::Instant) {
        let (done, waiting) = oneshot::channel();
        let now = tokio::time::Instant::now();
        let deadline = later(now, timeout);
        let keep_until;
        {
            let mut state = self.state();
            match request {
                Some(request) if request.is_releasing() => {
                    let after_earlier = state
                        .latest_deadline
                        .map_or(deadline, |latest| later(latest, timeout));
                    keep_until = deadline
                        .max(after_earlier)
                        .max(later(now, RELEASE_PATIENCE));
                }
                _ => {
                    keep_until = deadline;
                    state.latest_deadline = Some(
                        state
                            .latest_deadline
                            .map_or(deadline, |latest| latest.max(deadline)),
                    );
                }
            }
            if state.connection.is_some() {
                let placed = match request {
                    Some(request) => Placed::Queued(queue(self, &mut state, request, timeout)),
                    None => Placed::Connected,
                };
                return (placed, deadline, keep_until);
            }
            state.waiting.push_back(Waiting {
                request: request.cloned(),
                timeout,
                done,
            });
            if state.connecting {
                return (Placed::Waiting(waiting), deadline, keep_until);
            }
            state.connecting = true;
        }
        // Spawned outside the lock: with no runtime, the attempt is dropped at once, and its
        // drop fails the queue (under the lock) without blaming the node.
        let attempt = ConnectAttempt {
            link: Arc::clone(self),
            finished: false,
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn(attempt.run())),
            Err(_) => attempt.abandon(),
        }
        (Placed::Waiting(waiting), deadline, keep_until)
    }

    /// The queued request once connected, or why no connection came.
    async fn connected(
        &self,
        done: oneshot::Receiver<Result<Option<Queued>, Arc<ConnectError>>>,
    ) -> Result<Option<Queued>, NodeErrorKind> {
        match done.await {
            Ok(Ok(queued)) => Ok(queued),
            Ok(Err(failure)) => Err(NodeErrorKind::Connect(failure)),
            Err(_) => Err(NodeErrorKind::Connect(Arc::new(ConnectError::Timeout(
                self.connect_timeout,
            )))),
        }
    }

    /// Awaits the reply of a placed request. A script the node forgot (`NOSCRIPT`) is sent
    /// again by source only if nothing was queued after it: a resent request must never land
    /// after a later one (a release overtaken by its own retry, say). Otherwise the `NOSCRIPT`
    /// is the answer: the request did not run.
    async fn finish(
        &self,
        placed: Placed,
        request: Request,
        timeout: Duration,
    ) -> Result<Value, NodeErrorKind> {
        let queued = match placed {
            Placed::Queued(queued) => queued,
            Placed::Waiting(done) => self.connected(done).await?.ok_or(NodeErrorKind::NotAsked)?,
            Placed::Connected => return Err(NodeErrorKind::NotAsked),
        };
        let (sequence, generation, script) = (queued.sequence, queued.generation, queued.script);
        let confirmation = queued.confirmation;
        let outcome = self.finish_script(
            queued.reply,
            (sequence, generation),
            script,
            &request,
            timeout,
        );
        let (value, resent) = outcome.await?;
        // A script sent again has a `WAIT` of its own after it; the first one confirmed nothing.
        match resent.or(confirmation) {
            Some((reply, wanted)) => self.confirmed(value, reply, wanted, generation).await,
            None => Ok(value),
        }
    }

    /// Awaits `WAIT`'s count after a replicated write: the write counts only when at least
    /// `wanted` replicas have it.
    async fn confirmed(
        &self,
        value: Value,
        reply: Reply,
        wanted: usize,
        generation: u64,
    ) -> Result<Value, NodeErrorKind> {
        let acked = self
            .settle(reply.await, generation)
            .map_err(NodeErrorKind::Command)
            .and_then(decode::<i64>)?;
        if usize::try_from(acked).is_ok_and(|acked| acked >= wanted) {
            Ok(value)
        } else {
            Err(NodeErrorKind::NotReplicated { acked, wanted })
        }
    }

    /// Awaits a request's own reply, resending a forgotten script when that is safe (with the
    /// `WAIT` that confirms the resent one, for a replicated write).
    async fn finish_script(
        &self,
        reply: Reply,
        (sequence, generation): (u64, u64),
        script: Option<(&'static str, bool)>,
        request: &Request,
        timeout: Duration,
    ) -> Result<(Value, Option<Confirmation>), NodeErrorKind> {
        match self.settle(reply.await, generation) {
            Err(err) if err.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                let resent = {
                    let mut state = self.state();
                    if state.generation == generation {
                        state.cached_scripts.clear();
                    }
                    // A cluster member is sent scripts by source and never answers `NOSCRIPT`;
                    // resending there would split the script from its `WAIT` again.
                    let last = state.generation == generation
                        && state.queued == sequence + 1
                        && state.connection.is_some()
                        && !self.cluster;
                    match request {
                        Request::Script(script) if last => {
                            let variant = script.variant(self.cluster);
                            let resent =
                                queue_cmd(&mut state, variant.eval(), None, script.slot, timeout);
                            let confirmation = queue_wait(self, &mut state, script, timeout);
                            Some((resent, confirmation))
                        }
                        _ => None,
                    }
                };
                match resent {
                    Some((resent, confirmation)) => {
                        let outcome = self.settle(resent.reply.await, generation);
                        if outcome.is_ok() {
                            if let Request::Script(script) = request {
                                self.cached(generation, script.variant(self.cluster).sha);
                            }
                        }
                        let value = outcome.map_err(NodeErrorKind::Command)?;
                        Ok((value, confirmation))
                    }
                    None => Err(NodeErrorKind::Command(err)),
                }
            }
            Ok(value) => {
                if let Some((sha, false)) = script {
                    self.cached(generation, sha);
                }
                Ok((value, None))
            }
            Err(err) => Err(NodeErrorKind::Command(err)),
        }
    }

    /// Turns a reply into a result, and learns from it: an answer means the node is there; a
    /// broken connection is given back for the next request to reconnect.
    fn settle(&self, reply: RedisResult<Value>, generation: u64) -> RedisResult<Value> {
        let reply = reply.and_then(Value::extract_error);
        match &reply {
            Err(err)
                if err.is_io_error()
                    || err.is_connection_dropped()
                    || err.is_unrecoverable_error() =>
            {
                let mut state = self.state();
                // A cluster connection is kept: it reconnects each shard itself, and a new one
                // could overtake requests the old one has not sent yet to healthy shards. Unless
                // its task is gone (its runtime ended, say): then it sends nothing any more, and
                // nothing queued on it can be overtaken.
                let replace = !self.cluster || cluster_task_gone(err);
                if state.generation == generation && replace {
                    // Back to the pool: its health check discards it.
                    state.connection = None;
                    state.cached_scripts.clear();
                }
            }
            _ => self.unresponsive.store(false, Ordering::Relaxed),
        }
        reply
    }

    fn cached(&self, generation: u64, sha: &str) {
        let mut state = self.state();
        if state.generation == generation && !state.cached_scripts.contains(sha) {
            state.cached_scripts.insert(sha.to_owned());
        }
    }
}

/// Queues `request` on the connection (which must be there), and right after a replicated
/// write, the `WAIT` that confirms it.
fn queue(link: &Link, state: &mut State, request: &Request, timeout: Duration) -> Queued {
    match request {
        Request::Script(script) => {
            let variant = script.variant(link.cluster);
            // A cluster member's shards each cache scripts of their own: `EVAL` always there
            // (an `EVALSHA` to a shard that never ran the script would come back `NOSCRIPT`).
            let by_sha =
                !link.cluster && !script.by_source && state.cached_scripts.contains(variant.sha);
            if link.cluster {
                if let Some(wait) = wait_for(link, script, timeout) {
                    return queue_confirmed(
                        state,
                        variant.eval(),
                        wait,
                        variant.sha,
                        script.slot,
                        timeout,
                    );
                }
            }
            let mut queued = if by_sha {
                let evalsha = Arc::clone(&variant.evalsha);
                queue_cmd(state, evalsha, Some((variant.sha, true)), None, timeout)
            } else {
                queue_cmd(
                    state,
                    variant.eval(),
                    Some((variant.sha, false)),
                    None,
                    timeout,
                )
            };
            queued.confirmation = queue_wait(link, state, script, timeout);
            queued
        }
        Request::Command(cmd) => queue_cmd(state, Arc::clone(cmd), None, None, timeout),
    }
}

/// Queues the `WAIT` that confirms a replicated write just queued, when the node asks for
/// replica acknowledgements. It is part of the write's request: a resend after `NOSCRIPT` is
/// safe when nothing but its `WAIT` came after it.
///
/// `WAIT` blocks the connection it runs on (every request of this client to that node or
/// shard waits behind it), so it may take at most half the request's own timeout, whatever the
/// configured one.
fn queue_wait(
    link: &Link,
    state: &mut State,
    script: &PreparedScript,
    request_timeout: Duration,
) -> Option<Confirmation> {
    let (wait, replicas) = wait_for(link, script, request_timeout)?;
    let queued = queue_cmd(state, Arc::new(wait), None, script.slot, request_timeout);
    state.queued -= 1;
    Some((queued.reply, replicas))
}

/// The `WAIT` that confirms `script`'s write, and how many replicas it must count, when the
/// node asks for replica acknowledgements and the script writes.
fn wait_for(
    link: &Link,
    script: &PreparedScript,
    request_timeout: Duration,
) -> Option<(Cmd, usize)> {
    let acks = link.replica_acks.filter(|_| script.replicated)?;
    let capped = ReplicaAcks {
        timeout: acks.timeout.min(request_timeout / 2),
        ..acks
    };
    let mut wait = redis::cmd("WAIT");
    wait.arg(acks.replicas).arg(capped.timeout_millis());
    Some((wait, acks.replicas))
}

/// Queues a replicated write on a Redis Cluster member together with the `WAIT` that confirms
/// it, as one pipeline to the master of its slot. Sent as two requests, each would be routed
/// on its own: after a failover, while the old master's connection is made again, the `WAIT`
/// could reach another node and count that node's replicas for a write it never saw.
fn queue_confirmed(
    state: &mut State,
    eval: Arc<Cmd>,
    (wait, replicas): (Cmd, usize),
    sha: &'static str,
    slot: Option<u16>,
    budget: Duration,
) -> Queued {
    use futures_util::FutureExt;

    let mut pipeline = redis::pipe();
    pipeline.add_command((*eval).clone()).add_command(wait);
    let connection = state.connection.as_ref().map(Wire::sender);
    let both = async move {
        match connection {
            Some(sender) => sender.send_pipeline(pipeline, 2, slot, budget).await,
            None => Err(RedisError::from(std::io::Error::from(
                std::io::ErrorKind::NotConnected,
            ))),
        }
    }
    .boxed()
    .shared();
    let part = |index: usize| -> Reply {
        Box::pin(both.clone().map(move |replies| {
            replies.and_then(|mut replies| {
                if replies.len() > index {
                    Ok(replies.swap_remove(index))
                } else {
                    Err(RedisError::from((
                        ErrorKind::Client,
                        "a pipeline reply is missing",
                    )))
                }
            })
        }))
    };
    let reply = Box::pin(tokio::task::unconstrained(part(0)));
    let mut queued = handed_over(state, reply, Some((sha, false)));
    queued.confirmation = Some((part(1), replicas));
    queued
}

/// Hands `cmd` to the multiplexed connection at once: its send future is polled once here, and
/// redis-rs takes a request into its FIFO channel on the first poll, the channel being far from
/// full (`PIPELINE_BUFFER`). So the order of these calls, all made under the node's lock, is the
/// order the node sees. The poll is unconstrained by tokio's task budget, which would otherwise
/// make it wait for nothing.
fn queue_cmd(
    state: &mut State,
    cmd: Arc<Cmd>,
    script: Option<(&'static str, bool)>,
    slot: Option<u16>,
    budget: Duration,
) -> Queued {
    let connection = state.connection.as_ref().map(Wire::sender);
    let reply: Reply = Box::pin(tokio::task::unconstrained(async move {
        match connection {
            Some(sender) => sender.send(&cmd, slot, budget).await,
            None => Err(RedisError::from(std::io::Error::from(
                std::io::ErrorKind::NotConnected,
            ))),
        }
    }));
    handed_over(state, reply, script)
}

/// Polls a request's `reply` once, which hands it to the connection (see [`queue_cmd`]), and
/// counts it as the next request queued.
fn handed_over(
    state: &mut State,
    mut reply: Reply,
    script: Option<(&'static str, bool)>,
) -> Queued {
    if let Poll::Ready(done) = reply.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        reply = Box::pin(std::future::ready(done));
    }
    let sequence = state.queued;
    state.queued += 1;
    Queued {
        reply,
        confirmation: None,
        sequence,
        generation: state.generation,
        script,
    }
}

/// The value a caller asked for.
pub(crate) fn decode<T: FromRedisValue>(value: Value) -> Result<T, NodeErrorKind> {
    redis::from_redis_value(value).map_err(|err| NodeErrorKind::Command(err.into()))
}

/// One connection attempt, in a task of its own so it outlives the requests waiting for it.
/// Dropped unfinished (its runtime ended), it fails the waiting requests and lets the next
/// request try again.
struct ConnectAttempt {
    link: Arc<Link>,
    finished: bool,
}

impl ConnectAttempt {
    async fn run(mut self) {
        let timeout = self.link.connect_timeout;
        let connecting = async {
            match &self.link.connector {
                Connector::Pool(pool) => pool
                    .get()
                    .await
                    .map(Wire::Pooled)
                    .map_err(ConnectError::Failed),
                Connector::Cluster(client) => client
                    .get_async_connection()
                    .await
                    .map(Wire::Cluster)
                    .map_err(ConnectError::Cluster),
            }
        };
        let identified = async {
            let mut wire = connecting.await?;
            match &mut wire {
                Wire::Pooled(connection) => self.identify(connection).await?,
                Wire::Cluster(connection) => self.identify_cluster(connection).await?,
            }
            Ok(wire)
        };
        let outcome = match tokio::time::timeout(timeout, identified).await {
            Ok(outcome) => outcome.map_err(Arc::new),
            Err(_) => Err(Arc::new(ConnectError::Timeout(timeout))),
        };
        self.finish(outcome, true);
    }

    /// Asks the server who it is, and refuses it if another node of the set reached it first.
    /// A server that does not tell (an ACL without `INFO`) is not checked.
    async fn identify(&self, connection: &mut Connection) -> Result<(), ConnectError> {
        let info: RedisResult<String> = redis::cmd("INFO")
            .arg("server")
            .query_async(&mut **connection)
            .await;
        let Some(run_id) = info.as_deref().ok().and_then(run_id_of) else {
            return Ok(());
        };
        self.claim(&[run_id])
    }

    /// Asks one node of the cluster for every node's id (`CLUSTER NODES`), and refuses the
    /// member if another member of the set reached one of them first: one cluster given as two
    /// members (disjoint seeds) would vote twice. A cluster that does not tell (an ACL without
    /// `CLUSTER`) is not checked.
    async fn identify_cluster(
        &self,
        connection: &mut ClusterConnection,
    ) -> Result<(), ConnectError> {
        let mut nodes = redis::cmd("CLUSTER");
        nodes.arg("NODES");
        let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random);
        let listing = match connection.route_command(nodes, routing).await {
            Ok(Value::BulkString(bytes)) => String::from_utf8_lossy(&bytes).into_owned(),
            Ok(Value::VerbatimString { text, .. }) => text,
            // Not allowed to ask (an ACL without `CLUSTER`, a renamed command): not checked.
            Err(err) if refused_command(&err) => return Ok(()),
            // Anything else (`CLUSTERDOWN`, `LOADING`, no answer): not connected yet; the
            // next request tries again, rather than keeping a connection never checked.
            Err(err) => return Err(ConnectError::Cluster(err)),
            Ok(_) => return Ok(()),
        };
        let ids: Vec<&str> = listing
            .lines()
            .filter_map(|line| line.split_whitespace().next())
            .collect();
        if ids.is_empty() {
            return Ok(());
        }
        self.claim(&ids)
    }

    /// Claims `ids` for this node, or says which node reached them first.
    fn claim(&self, ids: &[&str]) -> Result<(), ConnectError> {
        let node = self.link.index;
        self.link.identities.claim(ids, node).map_err(|first| {
            if self.link.identities.first_report(node) {
                tracing::error!(node = %self.link.address, first, "this node is another node's server under another name: it would vote twice, so it never counts; list each server once");
            }
            ConnectError::Alias { first }
        })
    }

    /// Gives up without trying (no runtime to connect on): the queue fails, the node is not
    /// blamed.
    fn abandon(mut self) {
        let timeout = self.link.connect_timeout;
        self.finish(Err(Arc::new(ConnectError::Timeout(timeout))), false);
    }

    fn finish(&mut self, outcome: Result<Wire, Arc<ConnectError>>, blame: bool) {
        self.finished = true;
        let mut state = self.link.state();
        state.connecting = false;
        let waiting = std::mem::take(&mut state.waiting);
        match outcome {
            Ok(connection) => {
                if state.connection.is_none() {
                    state.connection = Some(connection);
                    state.generation += 1;
                    state.cached_scripts.clear();
                }
                for waiting in waiting {
                    if waiting.done.is_closed() {
                        continue; // nobody awaits it any more: never sent, like redis-rs does
                    }
                    let queued = waiting
                        .request
                        .as_ref()
                        .map(|request| queue(&self.link, &mut state, request, waiting.timeout));
                    let _ = waiting.done.send(Ok(queued));
                }
            }
            Err(failure) => {
                if blame {
                    self.link.unresponsive.store(true, Ordering::Relaxed);
                }
                for waiting in waiting {
                    let _ = waiting.done.send(Err(Arc::clone(&failure)));
                }
            }
        }
    }
}

impl Drop for ConnectAttempt {
    fn drop(&mut self) {
        if !self.finished {
            let timeout = self.link.connect_timeout;
            self.finish(Err(Arc::new(ConnectError::Timeout(timeout))), true);
        }
    }
}

/// How every node of a set is opened.
pub(crate) struct NodeOptions {
    pub(crate) pool_size: usize,
    pub(crate) connect_timeout: Duration,
    pub(crate) replica_acks: Option<ReplicaAcks>,
    pub(crate) identities: Arc<Identities>,
}

/// Removes a URL's password from a message that might echo the URL.
fn hide_secret(message: String, url: &str) -> String {
    match url::Url::parse(url)
        .ok()
        .and_then(|u| u.password().map(str::to_owned))
    {
        Some(password) if !password.is_empty() => message.replace(&password, "***"),
        _ => message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const URL: &str = "rediss://:topsecret@127.0.0.1:6380";
    const SHOWN: &str = "rediss://:***@127.0.0.1:6380";

    fn refused(kind: ServerErrorKind) -> RedisError {
        RedisError::from((ErrorKind::Server(kind), "refused"))
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_refused_while_its_slot_moves_is_sent_until_it_runs() {
        let tries = std::cell::Cell::new(0);
        let sent = until_run(Duration::from_secs(1), || {
            tries.set(tries.get() + 1);
            let answer = match tries.get() {
                1 => Err(refused(ServerErrorKind::TryAgain)),
                2 => Err(refused(ServerErrorKind::Ask)),
                3 => Err(refused(ServerErrorKind::Moved)),
                _ => Ok(7),
            };
            async move { answer }
        })
        .await;
        assert_eq!(sent.ok(), Some(7));
        assert_eq!(tries.get(), 4);
    }

    #[tokio::test(start_paused = true)]
    async fn past_its_budget_the_refusal_is_the_answer_and_other_errors_at_once() {
        let started = tokio::time::Instant::now();
        let tries = std::cell::Cell::new(0);
        let sent: RedisResult<()> = until_run(Duration::from_millis(500), || {
            tries.set(tries.get() + 1);
            async { Err(refused(ServerErrorKind::TryAgain)) }
        })
        .await;
        assert!(sent.is_err_and(|err| err.kind() == ErrorKind::Server(ServerErrorKind::TryAgain)));
        assert!(started.elapsed() < Duration::from_millis(500));
        assert!(tries.get() > 3, "sent {} times", tries.get());

        // A script that may have run (here: an error of its own) is never sent again.
        let tries = std::cell::Cell::new(0);
        let sent: RedisResult<()> = until_run(Duration::from_secs(1), || {
            tries.set(tries.get() + 1);
            async { Err(refused(ServerErrorKind::ResponseError)) }
        })
        .await;
        assert!(sent.is_err());
        assert_eq!(tries.get(), 1);
    }

    /// Whether this build of redis-rs speaks TLS. Built alone (`cargo test -p redlock-core
    /// --lib`), it does only with `tls-rustls`; in a workspace build another crate turns that
    /// feature on (feature unification), so the tests ask redis-rs. `cargo test -p redlock-core
    /// --lib` runs the branches without TLS, the workspace build those with it.
    fn tls_compiled_in() -> bool {
        let tls = redis::Client::open("rediss://127.0.0.1:6380").is_ok();
        // With the feature, redis-rs has TLS for sure; without it, only unification can add it.
        assert!(
            tls || !cfg!(feature = "tls-rustls"),
            "tls-rustls is on, yet redis-rs refuses rediss://"
        );
        tls
    }

    #[test]
    fn a_server_reached_by_two_nodes_is_kept_by_the_first() {
        let identities = Identities::default();
        assert_eq!(identities.claim(&["abc"], 0), Ok(()));
        assert_eq!(identities.claim(&["abc"], 0), Ok(()), "a reconnection");
        assert_eq!(identities.claim(&["abc"], 2), Err(0));
        assert_eq!(
            identities.claim(&["def"], 2),
            Ok(()),
            "its own server after a restart"
        );
        // Node 0's name now points at another server: its old one is free for node 2.
        assert_eq!(identities.claim(&["ghi"], 0), Ok(()));
        assert_eq!(identities.claim(&["abc"], 2), Ok(()));
        // A cluster claims all its nodes: one of them claimed by another node is an alias.
        assert_eq!(identities.claim(&["c1", "c2", "c3"], 1), Ok(()));
        assert_eq!(identities.claim(&["c3", "c4"], 0), Err(1));
        assert_eq!(
            identities.claim(&["c2", "c3", "c1"], 1),
            Ok(()),
            "reconnected"
        );
        assert!(identities.first_report(2));
        assert!(!identities.first_report(2), "reported once");
        assert_eq!(
            run_id_of("# Server\r\nredis_version:7.0.15\r\nrun_id:5e1f00\r\ntcp_port:1\r\n"),
            Some("5e1f00")
        );
        assert_eq!(run_id_of("# Server\r\n"), None);
    }

    #[test]
    fn a_tls_url_without_tls_support_says_so_without_the_password() {
        let tls = tls_compiled_in();
        let options = NodeOptions {
            pool_size: 1,
            connect_timeout: Duration::from_secs(1),
            replica_acks: None,
            identities: Arc::default(),
        };
        match Node::open(0, URL, &options) {
            Ok(node) => {
                assert!(tls, "accepted without TLS support");
                assert_eq!(node.address().as_str(), SHOWN);
            }
            Err(err) => {
                assert!(!tls, "refused with TLS support: {err}");
                let shown = err.to_string();
                assert!(shown.to_lowercase().contains("tls"), "{shown}");
                assert!(!shown.contains("topsecret"), "{shown}");
            }
        }
    }

    /// The same through the public constructor: the refusal is a typed `NodeUrl` error that
    /// names the node by its redacted address.
    #[test]
    fn a_tls_url_is_accepted_with_tls_and_refused_with_a_hint_without() {
        let tls = tls_compiled_in();
        match (
            tls,
            crate::Redlock::new(crate::RedlockConfig::with_nodes([URL])),
        ) {
            (true, Ok(redlock)) => {
                let node = redlock.nodes().iter().next().expect("one node");
                assert_eq!(node.address().as_str(), SHOWN);
            }
            (
                false,
                Err(crate::Error::InvalidArgument(InvalidArgument::NodeUrl {
                    index,
                    address,
                    reason,
                })),
            ) => {
                assert_eq!(index, 0);
                assert_eq!(address.as_str(), SHOWN);
                assert!(reason.to_lowercase().contains("tls"), "{reason}");
                assert!(!reason.contains("topsecret"), "{reason}");
            }
            (tls, other) => panic!("TLS compiled in: {tls}, yet got {other:?}"),
        }
    }
}
