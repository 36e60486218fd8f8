//! The readiness probe: one PING over a plain TCP connection, no client library involved.

use std::io::{BufRead, BufReader, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::time::Duration;

/// How long one probe may take to connect, write or read.
const PROBE_TIMEOUT: Duration = Duration::from_millis(500);

/// What one PING on a port found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Probe {
    /// The server answered `+PONG`, or `-NOAUTH` (it is up but wants a password).
    Ready,
    /// Nothing answered: refused, reset, timed out or an unexpected reply.
    NotReady(String),
}

/// Sends `PING` to `127.0.0.1:port` and reads one reply line.
pub(crate) fn ping(port: u16) -> Probe {
    match try_ping(port) {
        Ok(line) if line.starts_with("+PONG") || line.starts_with("-NOAUTH") => Probe::Ready,
        Ok(line) => Probe::NotReady(format!("unexpected reply {line:?}")),
        Err(e) => Probe::NotReady(e.to_string()),
    }
}

fn try_ping(port: u16) -> std::io::Result<String> {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let mut stream = TcpStream::connect_timeout(&addr, PROBE_TIMEOUT)?;
    stream.set_read_timeout(Some(PROBE_TIMEOUT))?;
    stream.set_write_timeout(Some(PROBE_TIMEOUT))?;
    stream.write_all(b"*1\r\n$4\r\nPING\r\n")?;
    let mut line = String::new();
    BufReader::new(stream).read_line(&mut line)?;
    Ok(line.trim_end().to_owned())
}
