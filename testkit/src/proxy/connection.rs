//! One proxied connection: its upstream connection and the pumps that carry bytes both ways.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};
use tokio::time::{sleep_until, timeout, Instant};

use super::fault::{Action, Direction, State};
use super::{Fault, OpenGuard};

/// How long a proxied connection may take to connect upstream before the client is closed.
const UPSTREAM_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// The most bytes one read takes from a socket.
const CHUNK_SIZE: usize = 16 * 1024;

/// How a connection's pumps ended.
enum Ending {
    /// A side closed or failed, or the proxy is gone: close both sides.
    Closed,
    /// The fault became [`Fault::Reset`], or a [`Fault::DropReplies`] that discarded replies
    /// on this connection ended: reset both sides.
    Reset,
}

/// Proxies one accepted client connection to `upstream`, until it closes or is reset.
pub(super) async fn serve(
    client: TcpStream,
    upstream: SocketAddr,
    state: watch::Receiver<State>,
    _open: OpenGuard,
) {
    let State { fault, resets, .. } = *state.borrow();
    if fault == Fault::Reset {
        reset(&client);
        return;
    }
    let Ok(Ok(upstream)) = timeout(UPSTREAM_CONNECT_TIMEOUT, TcpStream::connect(upstream)).await
    else {
        return;
    };
    // Redis traffic is small request/reply messages: Nagle would only add latency.
    let _ = client.set_nodelay(true);
    let _ = upstream.set_nodelay(true);
    if let Ending::Reset = pump(&client, &upstream, state, resets).await {
        reset(&client);
        reset(&upstream);
    }
    // Both sockets close here: with a FIN, or with a RST after `reset`.
}

/// Makes closing `stream` send a RST instead of a FIN.
fn reset(stream: &TcpStream) {
    // Deprecated because a nonzero linger blocks on close; a zero linger does not. Used rather
    // than `set_zero_linger` (tokio 1.50) so the workspace's tokio lower bound still builds.
    #[allow(deprecated)]
    let _ = stream.set_linger(Some(Duration::ZERO));
}

/// Carries bytes both ways until a side closes or fails, or a reset.
async fn pump(
    client: &TcpStream,
    upstream: &TcpStream,
    mut state: watch::Receiver<State>,
    resets: u64,
) -> Ending {
    let (requests_tx, requests_rx) = mpsc::unbounded_channel();
    let (replies_tx, replies_rx) = mpsc::unbounded_channel();
    let read_requests = read_side(client, state.clone(), requests_tx);
    let write_requests = write_side(upstream, Direction::Requests, state.clone(), requests_rx);
    let read_replies = read_side(upstream, state.clone(), replies_tx);
    let write_replies = write_side(client, Direction::Replies, state.clone(), replies_rx);
    tokio::pin!(read_requests, write_requests, read_replies, write_replies);
    let (mut requests_read, mut replies_read) = (false, false);
    loop {
        tokio::select! {
            () = &mut read_requests, if !requests_read => requests_read = true,
            () = &mut read_replies, if !replies_read => replies_read = true,
            ending = &mut write_requests => return ending,
            ending = &mut write_replies => return ending,
            changed = state.wait_for(|s| s.resets != resets) => {
                return if changed.is_ok() { Ending::Reset } else { Ending::Closed };
            }
        }
    }
}

/// What a reader passes to its writer.
enum Piece {
    Data(Vec<u8>),
    /// The source closed or failed.
    End,
}

/// A piece and when it is due.
struct Queued {
    due: Instant,
    piece: Piece,
}

/// Reads chunks from `from` and queues them, due per the fault at the time they were read.
/// Nothing is dropped here: the writer decides what becomes of each chunk when it is due.
async fn read_side(
    from: &TcpStream,
    state: watch::Receiver<State>,
    queue: mpsc::UnboundedSender<Queued>,
) {
    let mut buf = vec![0; CHUNK_SIZE];
    loop {
        let read = read_some(from, &mut buf).await;
        let fault = state.borrow().fault;
        let now = Instant::now();
        let due = match fault {
            // A delay too long for an `Instant` is forever, as far as a test can tell.
            Fault::Delay(delay) => now
                .checked_add(delay)
                .unwrap_or(now + Duration::from_secs(365 * 24 * 3600)),
            _ => now,
        };
        let piece = match read {
            Ok(0) | Err(_) => Piece::End,
            Ok(n) => Piece::Data(buf[..n].to_vec()),
        };
        let end = matches!(piece, Piece::End);
        if queue.send(Queued { due, piece }).is_err() || end {
            return;
        }
    }
}

/// Writes the queued pieces to `to` when due, per the fault at that time: holds them while
/// the fault holds this direction, and once it discards some, keeps discarding until that
/// fault ends and then asks for a reset. Returns once the end is delivered, `to` fails or a
/// reset is due.
async fn write_side(
    to: &TcpStream,
    direction: Direction,
    mut state: watch::Receiver<State>,
    mut queue: mpsc::UnboundedReceiver<Queued>,
) -> Ending {
    while let Some(Queued { due, piece }) = queue.recv().await {
        sleep_until(due).await;
        let Ok(now) = wait_state(&mut state, |fault| direction.action(fault) != Action::Hold).await
        else {
            return Ending::Closed;
        };
        match (piece, direction.action(now.fault)) {
            (Piece::Data(bytes), Action::Deliver) => {
                if write_all(to, &bytes).await.is_err() {
                    return Ending::Closed;
                }
            }
            (Piece::Data(_), _) => {
                return out_of_step(&mut state, &mut queue, now.drops_ended).await
            }
            (Piece::End, _) => {
                // A close is never lost either: it goes when bytes would.
                let _ = wait_state(&mut state, |fault| {
                    direction.action(fault) == Action::Deliver
                })
                .await;
                return Ending::Closed;
            }
        }
    }
    Ending::Closed
}

/// After this direction discarded bytes under [`Fault::DropReplies`] (the `drops_ended`-th):
/// the client is out of step with the server for good, as if the connection had died. Discards
/// whatever else comes until that fault ends, then asks for a reset, so the client sees the
/// connection fail rather than pair later replies with the wrong requests.
async fn out_of_step(
    state: &mut watch::Receiver<State>,
    queue: &mut mpsc::UnboundedReceiver<Queued>,
    drops_ended: u64,
) -> Ending {
    let discard = async {
        while queue.recv().await.is_some() {}
        std::future::pending::<()>().await;
    };
    tokio::select! {
        changed = state.wait_for(|s| s.drops_ended != drops_ended) => {
            if changed.is_ok() { Ending::Reset } else { Ending::Closed }
        }
        () = discard => Ending::Closed,
    }
}

/// Waits until the fault satisfies `ok` and returns the state then; fails if the proxy is gone.
async fn wait_state(
    state: &mut watch::Receiver<State>,
    ok: impl Fn(Fault) -> bool,
) -> Result<State, watch::error::RecvError> {
    state.wait_for(|s| ok(s.fault)).await.map(|s| *s)
}

/// One read through `&TcpStream`, so the reader and the writer of the other direction can
/// share the socket (and the connection task can still reset it).
async fn read_some(stream: &TcpStream, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        stream.readable().await?;
        match stream.try_read(buf) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            result => return result,
        }
    }
}

async fn write_all(stream: &TcpStream, mut bytes: &[u8]) -> io::Result<()> {
    while !bytes.is_empty() {
        stream.writable().await?;
        match stream.try_write(bytes) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => bytes = &bytes[n..],
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
