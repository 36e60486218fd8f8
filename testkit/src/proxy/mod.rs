//! A TCP proxy in front of one redis-server that injects network faults, and a grid of them
//! (one per worker and node) for asymmetric partitions.
//!
//! Each accepted connection gets its own upstream connection and one task that pumps both
//! directions. A direction is a reader and a writer joined by an unbounded queue: the reader
//! never waits for the writer and never drops anything, so a [`Fault::Delay`] delays chunks
//! without slowing reads, and a fault that holds bytes ([`Fault::HoldReplies`],
//! [`Fault::Blackhole`]) keeps them in the queue. The writer decides, when a chunk is due and
//! per the fault then, whether to write, hold or discard it. The fault lives in a `watch`
//! channel: a pump that waits on it (held bytes, a pending reset) wakes as soon as it changes.

mod connection;
mod fault;
mod grid;

use std::fmt;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::sleep;

use self::connection::serve;
pub use self::fault::Fault;
use self::fault::State;
pub use self::grid::ProxyGrid;

/// How long the accept loop waits after a failed accept (e.g. out of file descriptors).
const ACCEPT_BACKOFF: Duration = Duration::from_millis(10);

/// What the proxy and its connection tasks share.
#[derive(Debug)]
struct Shared {
    state: watch::Sender<State>,
    open: AtomicUsize,
}

/// A TCP proxy on a free `127.0.0.1` port in front of one upstream address (a redis-server),
/// applying a [`Fault`] to the bytes it carries.
///
/// It runs on the tokio runtime it was started on. Each client connection gets its own upstream
/// connection; when the upstream fails or closes (redis-server killed), the client side is
/// closed, so the client sees an error and reconnects, and its next connection goes to whatever
/// listens upstream then (a restarted server). If connecting upstream fails, the client is
/// closed. Dropping the proxy stops accepting and closes every connection.
///
/// ```no_run
/// use std::time::Duration;
///
/// use redlock_testkit::{Fault, FaultProxy, RedisServer};
///
/// # async fn demo() -> std::io::Result<()> {
/// let server = RedisServer::start();
/// let proxy = FaultProxy::start(([127, 0, 0, 1], server.port()).into()).await?;
/// let client = redis::Client::open(proxy.url()).expect("valid URL");
/// proxy.set(Fault::Delay(Duration::from_millis(100)));
/// // ... every request and reply through `client` now takes 100 ms longer ...
/// proxy.set(Fault::Pass);
/// # let _ = client;
/// # Ok(())
/// # }
/// ```
pub struct FaultProxy {
    addr: SocketAddr,
    upstream: SocketAddr,
    shared: Arc<Shared>,
    /// The accept loop; it owns the connection tasks, so aborting it ends them all.
    accept: JoinHandle<()>,
}

impl FaultProxy {
    /// Listens on `127.0.0.1:0` and forwards every connection to `upstream`, with
    /// [`Fault::Pass`] to begin with.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a dropped future leaves nothing running.
    ///
    /// # Errors
    ///
    /// If the listener cannot be bound.
    ///
    /// # Panics
    ///
    /// If called outside a tokio runtime.
    pub async fn start(upstream: SocketAddr) -> io::Result<FaultProxy> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let addr = listener.local_addr()?;
        let (state, _) = watch::channel(State {
            fault: Fault::Pass,
            resets: 0,
            drops_ended: 0,
        });
        let shared = Arc::new(Shared {
            state,
            open: AtomicUsize::new(0),
        });
        let accept = tokio::spawn(accept_loop(listener, upstream, Arc::clone(&shared)));
        Ok(FaultProxy {
            addr,
            upstream,
            shared,
            accept,
        })
    }

    /// The address clients connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The proxy's Redis URL, `redis://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("redis://{}", self.addr)
    }

    /// Applies `fault` from now on, to open connections and new ones. Callable from any thread.
    pub fn set(&self, fault: Fault) {
        self.shared.state.send_modify(|state| {
            if fault == Fault::Reset && state.fault != Fault::Reset {
                state.resets += 1;
            }
            if state.fault == Fault::DropReplies && fault != Fault::DropReplies {
                state.drops_ended += 1;
            }
            state.fault = fault;
        });
    }

    /// The fault applied now.
    pub fn fault(&self) -> Fault {
        self.shared.state.borrow().fault
    }

    /// How many client connections are open (accepted and not yet closed).
    pub fn open_connections(&self) -> usize {
        self.shared.open.load(Ordering::SeqCst)
    }
}

impl fmt::Debug for FaultProxy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FaultProxy")
            .field("addr", &self.addr)
            .field("upstream", &self.upstream)
            .field("fault", &self.fault())
            .field("open_connections", &self.open_connections())
            .finish()
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        // Dropping the accept loop drops its `JoinSet`, which aborts every connection task; a
        // connection's sockets close when its task is dropped.
        self.accept.abort();
    }
}

/// Counts a client connection as open until dropped (also when its task is aborted).
struct OpenGuard(Arc<Shared>);

impl OpenGuard {
    fn new(shared: &Arc<Shared>) -> Self {
        shared.open.fetch_add(1, Ordering::SeqCst);
        Self(Arc::clone(shared))
    }
}

impl Drop for OpenGuard {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn accept_loop(listener: TcpListener, upstream: SocketAddr, shared: Arc<Shared>) {
    let mut connections = JoinSet::new();
    loop {
        while connections.try_join_next().is_some() {}
        match listener.accept().await {
            Ok((client, _)) => {
                let open = OpenGuard::new(&shared);
                connections.spawn(serve(client, upstream, shared.state.subscribe(), open));
            }
            Err(_) => sleep(ACCEPT_BACKOFF).await,
        }
    }
}
