//! Local Redis masters for the examples: `redis-server` processes on free loopback ports,
//! keeping nothing on disk, killed when dropped.
//!
//! Demo support, not a test harness: the tests' servers (pauses, restarts, fault proxies) are
//! in the `redlock-testkit` package.

use std::env;
use std::fs::{self, OpenOptions};
use std::io::{self, Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use tempfile::TempDir;

/// How long a server may take to answer PING.
const STARTUP: Duration = Duration::from_secs(10);
/// How many fresh ports a server gets if another process takes its port first.
const PORT_ATTEMPTS: usize = 3;

/// Independent masters (not replicas, not Redis Cluster), each its own `redis-server`.
///
/// They run in a process group of their own: a terminal's Ctrl-C reaches only the example,
/// which then drops them (kills and reaps them) and says so.
pub(crate) struct Masters {
    /// One per master; `None` once killed.
    servers: Vec<Option<Child>>,
    ports: Vec<u16>,
    /// Their logs (and working directory), removed with them.
    dir: TempDir,
}

impl Masters {
    /// Starts `count` masters and waits until each answers PING.
    ///
    /// # Errors
    ///
    /// `redis-server` is missing (the message says how to install it), or one did not start:
    /// the message carries the end of its log.
    pub(crate) fn start(count: usize) -> io::Result<Masters> {
        let mut masters = Masters {
            servers: Vec::with_capacity(count),
            ports: Vec::with_capacity(count),
            dir: tempfile::Builder::new()
                .prefix("redlock-example-")
                .tempdir()?,
        };
        // Pushed as they come up: if one fails, dropping `masters` stops the others.
        for _ in 0..count {
            let (port, child) = masters.start_one()?;
            masters.servers.push(Some(child));
            masters.ports.push(port);
        }
        Ok(masters)
    }

    /// The `redis://` URLs of those still running (all of them until one is killed).
    pub(crate) fn urls(&self) -> Vec<String> {
        (self.servers.iter().zip(&self.ports))
            .filter(|(server, _)| server.is_some())
            .map(|(_, port)| format!("redis://127.0.0.1:{port}"))
            .collect()
    }

    /// Their ports, killed ones included, in the order they were started.
    pub(crate) fn ports(&self) -> &[u16] {
        &self.ports
    }

    /// Kills master `index` with SIGKILL, a crash: nothing flushed, connections reset.
    #[allow(dead_code)] // only the demo kills masters
    pub(crate) fn kill(&mut self, index: usize) {
        if let Some(mut child) = self.servers[index].take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn start_one(&self) -> io::Result<(u16, Child)> {
        let mut last_error = None;
        for _ in 0..PORT_ATTEMPTS {
            // A port that was free a moment ago; if someone takes it first, the server exits
            // and the next attempt gets another.
            let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
            match self.launch(port) {
                Ok(child) => return Ok((port, child)),
                Err(err) if err.kind() == io::ErrorKind::NotFound => return Err(err),
                Err(err) => last_error = Some(err),
            }
        }
        Err(last_error.unwrap_or_else(|| io::Error::other("no attempt was made")))
    }

    fn launch(&self, port: u16) -> io::Result<Child> {
        let binary = env::var_os("REDIS_SERVER_BIN")
            .filter(|path| !path.is_empty())
            .map_or_else(|| PathBuf::from("redis-server"), PathBuf::from);
        let log = self.dir.path().join(format!("redis-{port}.log"));
        // What it says before it opens its log file (a bad argument) goes there too.
        let output = OpenOptions::new().create(true).append(true).open(&log)?;
        let mut child = Command::new(&binary)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .arg("--dir")
            .arg(self.dir.path())
            .arg("--logfile")
            .arg(&log)
            .stdin(Stdio::null())
            .stdout(output.try_clone()?)
            .stderr(output)
            // Its own process group: Ctrl-C in the terminal reaches only the example.
            .process_group(0)
            .spawn()
            .map_err(|err| match err.kind() {
                io::ErrorKind::NotFound => io::Error::new(
                    err.kind(),
                    format!(
                        "`{}` was not found (set REDIS_SERVER_BIN to use another path); \
                         run scripts/ensure-redis to install redis-server",
                        binary.display()
                    ),
                ),
                _ => err,
            })?;

        let started = Instant::now();
        loop {
            let failure = if let Some(status) = child.try_wait()? {
                format!("redis-server on port {port} exited ({status})")
            } else if says_ready(&log) && answers_ping(port) {
                return Ok(child);
            } else if started.elapsed() > STARTUP {
                let _ = child.kill();
                let _ = child.wait();
                format!("redis-server on port {port} did not answer PING within {STARTUP:?}")
            } else {
                thread::sleep(Duration::from_millis(10));
                continue;
            };
            let log = fs::read_to_string(&log).unwrap_or_default();
            let lines: Vec<&str> = log.lines().collect();
            let tail = lines[lines.len().saturating_sub(10)..].join("\n");
            return Err(io::Error::other(format!(
                "{failure}; its log ends:\n{tail}"
            )));
        }
    }
}

impl Drop for Masters {
    fn drop(&mut self) {
        for index in 0..self.servers.len() {
            self.kill(index);
        }
    }
}

/// Whether the server logged that it listens: then the server answering on its port is this
/// one, not another process that took the port first.
fn says_ready(log: &Path) -> bool {
    fs::read_to_string(log)
        .is_ok_and(|log| log.to_lowercase().contains("ready to accept connections"))
}

/// Whether a server on `port` answers `PING` with `+PONG`.
fn answers_ping(port: u16) -> bool {
    let attempt = || -> io::Result<bool> {
        let mut stream = TcpStream::connect(("127.0.0.1", port))?;
        stream.set_read_timeout(Some(Duration::from_secs(1)))?;
        stream.write_all(b"PING\r\n")?;
        let mut reply = [0; 7];
        stream.read_exact(&mut reply)?;
        Ok(&reply == b"+PONG\r\n")
    };
    attempt().unwrap_or(false)
}
