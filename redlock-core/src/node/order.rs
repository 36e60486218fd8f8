//! Requests reach a node in the order they were made: each is handed to redis-rs's multiplexed
//! connection when it is made, under the node's lock, by polling its send future once. This
//! relies on redis-rs taking a request into its FIFO channel on that first poll (the test here
//! pins it to the redis-rs version the workspace builds) and on the channel never being full.

use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use redis::{Cmd, RedisError};

use super::link::{Queued, Reply, State};
use super::wire::Wire;

/// How many requests a node's connection may hold before it writes them: far more than any
/// client has in flight to one node (a stalled node's requests time out and are skipped).
pub(super) const PIPELINE_BUFFER: usize = 1 << 20;

/// Hands `cmd` to the multiplexed connection at once: its send future is polled once here, and
/// redis-rs takes a request into its FIFO channel on the first poll, the channel being far from
/// full (`PIPELINE_BUFFER`). So the order of these calls, all made under the node's lock, is the
/// order the node sees. The poll is unconstrained by tokio's task budget, which would otherwise
/// make it wait for nothing.
pub(super) fn queue_cmd(
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
pub(super) fn handed_over(
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use redis::Value;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};
    use tokio::sync::mpsc;

    use crate::node::{Node, NodeOptions};

    /// A stand-in for a Redis server: answers every command `+OK` (the connection's
    /// `CLIENT SETINFO` and `INFO server` included) and passes each on as its words.
    async fn fake_server(listener: TcpListener, seen: mpsc::UnboundedSender<String>) {
        while let Ok((socket, _)) = listener.accept().await {
            tokio::spawn(answer(socket, seen.clone()));
        }
    }

    async fn answer(mut socket: TcpStream, seen: mpsc::UnboundedSender<String>) {
        let mut buffer = Vec::new();
        let mut chunk = [0; 4096];
        loop {
            while let Some(command) = take_command(&mut buffer) {
                let _ = seen.send(command);
                if socket.write_all(b"+OK\r\n").await.is_err() {
                    return;
                }
            }
            match socket.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(read) => buffer.extend_from_slice(&chunk[..read]),
            }
        }
    }

    /// The first command in `buffer` (a RESP array of bulk strings) as its words joined by
    /// spaces, taken out of the buffer; `None` until all of it arrived.
    fn take_command(buffer: &mut Vec<u8>) -> Option<String> {
        fn line(buffer: &[u8], from: usize, kind: u8) -> Option<(usize, usize)> {
            let end = from + buffer.get(from..)?.windows(2).position(|w| w == b"\r\n")?;
            assert_eq!(buffer[from], kind, "not a RESP command: {buffer:?}");
            let number = std::str::from_utf8(&buffer[from + 1..end])
                .ok()
                .and_then(|number| number.parse().ok());
            Some((number.expect("a RESP length"), end + 2))
        }
        let (count, mut at) = line(buffer, 0, b'*')?;
        let mut words = Vec::with_capacity(count);
        for _ in 0..count {
            let (len, start) = line(buffer, at, b'$')?;
            let word = buffer.get(start..start + len)?;
            words.push(String::from_utf8_lossy(word).into_owned());
            at = start + len + 2;
            if buffer.len() < at {
                return None;
            }
        }
        buffer.drain(..at);
        Some(words.join(" "))
    }

    /// This file's invariant, pinned to the redis-rs version the workspace builds: requests
    /// reach the server in the order they were made, though their replies are awaited in the
    /// reverse order. It fails if redis-rs no longer takes a request into its multiplexed
    /// connection's channel on the first poll of its send future (or `handed_over` stops
    /// polling it): each would then be sent when first awaited.
    #[tokio::test]
    async fn requests_reach_the_server_in_the_order_they_were_made() {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a local port");
        let url = format!("redis://{}", listener.local_addr().expect("its address"));
        let (seen, mut received) = mpsc::unbounded_channel();
        let server = tokio::spawn(fake_server(listener, seen));
        let options = NodeOptions {
            pool_size: 1,
            connect_timeout: Duration::from_secs(5),
            replica_acks: None,
            identities: Arc::default(),
        };
        let node = Node::open(0, &url, &options).expect("a valid URL");
        node.connect().await.expect("connected to the fake server");

        let made: Vec<String> = (0..8).map(|i| format!("ECHO {i}")).collect();
        let replies: Vec<_> = (0..8)
            .map(|i| node.query::<Value>(redis::cmd("ECHO").arg(i), Duration::from_secs(5)))
            .collect();
        for reply in replies.into_iter().rev() {
            assert_eq!(reply.await.expect("answered"), Value::Okay);
        }

        let mut sent = Vec::new();
        while let Ok(command) = received.try_recv() {
            if command.starts_with("ECHO") {
                sent.push(command);
            }
        }
        assert_eq!(sent, made, "the order the server received them in");
        server.abort();
    }
}
