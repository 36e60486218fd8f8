//! One real `redis-server` process on a free loopback port, with fault injection.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::fmt::Write as _;
use std::fs::{self, OpenOptions};
use std::io::{self, Write as _};
use std::net::TcpListener;
use std::os::unix::process::ExitStatusExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use tempfile::TempDir;

use crate::error::{report, HarnessError};
use crate::probe::{self, Probe};
use crate::process::{kill_child, reap_if_exited, send, to_pid, State};

/// Environment variable naming the redis-server binary to run instead of `redis-server` on `PATH`.
pub const REDIS_SERVER_BIN_ENV: &str = "REDIS_SERVER_BIN";

/// How many log lines a panic message or a panicking drop shows.
const LOG_TAIL_LINES: usize = 40;
/// How many fresh ports [`RedisServerBuilder::try_start`] tries when another process takes one first.
const PORT_ATTEMPTS: u32 = 5;
/// How long [`RedisServer::try_restart`] keeps retrying while its port is not free yet.
const RESTART_PORT_WAIT: Duration = Duration::from_secs(5);
/// How long an assertion connection may take to connect, read or write.
const ASSERT_TIMEOUT: Duration = Duration::from_secs(5);
/// How often startup polls the process, its log and its port.
const POLL_INTERVAL: Duration = Duration::from_millis(10);
/// The line redis-server logs once it listens (at the default `notice` log level).
/// Compared in lower case: redis 3 logged "The server is now ready to accept connections".
const READY_LINE: &str = "ready to accept connections";
/// Signals a terminal or `timeout` sends to a whole process group. A new server is still in its
/// caller's group until just before it runs redis-server, so one of these can kill it there: the
/// caller got the same signal and acts on it; the launch is tried again rather than failed.
const GROUP_SIGNALS: [i32; 4] = [
    Signal::SIGINT as i32,
    Signal::SIGTERM as i32,
    Signal::SIGHUP as i32,
    Signal::SIGQUIT as i32,
];

/// Options for starting a [`RedisServer`]: binary, extra arguments, password, startup timeout.
///
/// ```no_run
/// use redlock_testkit::RedisServer;
///
/// let server = RedisServer::builder()
///     .password("secret")
///     .arg("--maxmemory")
///     .arg("64mb")
///     .start();
/// let url = server.url_with_auth(None, "secret");
/// # let _ = url;
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct RedisServerBuilder {
    binary: Option<PathBuf>,
    args: Vec<OsString>,
    password: Option<String>,
    port_args: Vec<OsString>,
    startup_timeout: Duration,
    own_process_group: bool,
}

impl Default for RedisServerBuilder {
    fn default() -> Self {
        Self {
            binary: None,
            args: Vec::new(),
            port_args: Vec::new(),
            password: None,
            startup_timeout: Duration::from_secs(10),
            own_process_group: false,
        }
    }
}

impl RedisServerBuilder {
    /// Runs this binary instead of `$REDIS_SERVER_BIN` or `redis-server` on `PATH`.
    pub fn binary(mut self, path: impl Into<PathBuf>) -> Self {
        self.binary = Some(path.into());
        self
    }

    /// Appends one command-line argument, after the harness's own (so it can override them).
    pub fn arg(mut self, arg: impl Into<OsString>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// Appends several command-line arguments.
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Passes `FLAG PORT` with an extra free port of its own, such as `--cluster-port` for a
    /// cluster bus. Like the client port, it is picked afresh on each attempt to start (another
    /// process may take it first) and kept across [`RedisServer::restart`].
    pub fn port_arg(mut self, flag: impl Into<OsString>) -> Self {
        self.port_args.push(flag.into());
        self
    }

    /// Starts the server with `--requirepass PASSWORD`; [`RedisServer::client`] then authenticates.
    pub fn password(mut self, password: impl Into<String>) -> Self {
        self.password = Some(password.into());
        self
    }

    /// Starts the server in a process group of its own (default: the caller's).
    ///
    /// In the caller's group, a terminal's Ctrl-C kills the servers with the test that started
    /// them, so an interrupted test leaves nothing behind. A program that handles Ctrl-C itself
    /// wants its own group: the signal then reaches only the program, which drops
    /// its servers and says so, instead of seeing them die under it.
    pub fn own_process_group(mut self, own: bool) -> Self {
        self.own_process_group = own;
        self
    }

    /// How long to wait for the server to answer PING (default 10 s).
    pub fn startup_timeout(mut self, timeout: Duration) -> Self {
        self.startup_timeout = timeout;
        self
    }

    /// Starts the server.
    ///
    /// # Panics
    ///
    /// If it cannot start; the message says why and shows the server log's tail.
    pub fn start(&self) -> RedisServer {
        self.try_start()
            .unwrap_or_else(|e| panic!("failed to start redis-server: {}", report(&e)))
    }

    /// Starts the server on a free loopback port and waits until it answers PING.
    ///
    /// # Errors
    ///
    /// [`HarnessError::RedisServerMissing`] if the binary does not exist (the message says how to
    /// install it), [`HarnessError::PortUnavailable`] if other processes took every port tried,
    /// [`HarnessError::Exited`] or [`HarnessError::NotReady`] with the log tail otherwise.
    pub fn try_start(&self) -> Result<RedisServer, HarnessError> {
        let binary = self.resolve_binary();
        let dir = tempfile::Builder::new()
            .prefix("redis-harness-")
            .tempdir()
            .map_err(|source| HarnessError::Io {
                context: "could not create a temporary directory for redis-server".to_owned(),
                source,
            })?;
        let launcher = Launcher {
            binary,
            args: self.args.clone(),
            port_args: self.port_args.clone(),
            password: self.password.clone(),
            startup_timeout: self.startup_timeout,
            own_process_group: self.own_process_group,
            dir,
        };
        let mut last_tail = String::new();
        for _ in 0..PORT_ATTEMPTS {
            let ports = Reservation::take(self.port_args.len())?;
            match launcher.launch(&ports)? {
                Launch::Ready(child) => {
                    return Ok(RedisServer {
                        ports,
                        launcher,
                        state: Mutex::new(State {
                            child: Some(child),
                            stopped: false,
                        }),
                    })
                }
                Launch::PortTaken(tail) | Launch::Interrupted(tail) => last_tail = tail,
            }
        }
        Err(HarnessError::PortUnavailable {
            attempts: PORT_ATTEMPTS,
            log_tail: last_tail,
        })
    }

    fn resolve_binary(&self) -> PathBuf {
        if let Some(binary) = &self.binary {
            return binary.clone();
        }
        match std::env::var_os(REDIS_SERVER_BIN_ENV) {
            Some(path) if !path.is_empty() => PathBuf::from(path),
            _ => PathBuf::from("redis-server"),
        }
    }
}

/// A real `redis-server` process on `127.0.0.1`, with no persistence, its files in a temporary
/// directory, killed on drop.
///
/// Fault injection: [`kill`](Self::kill) (crash), [`stop`](Self::stop) / [`resume`](Self::resume)
/// (a pause, like a long GC or a frozen VM), [`restart`](Self::restart) (a crash and an empty
/// restart on the same port, as without persistence). They take `&self`, so a server shared with
/// a running task through an `Arc` can still be faulted.
///
/// If the thread is panicking when the server drops, the log's tail goes to standard error.
///
/// ```no_run
/// use redlock_testkit::RedisServer;
///
/// let server = RedisServer::start();
/// let mut con = server.connection();
/// let pong: String = redis::cmd("PING").query(&mut con).expect("PING");
/// assert_eq!(pong, "PONG");
/// server.kill();
/// assert!(!server.is_running());
/// ```
#[derive(Debug)]
pub struct RedisServer {
    /// Its ports, kept from other servers of this process until it drops (across restarts).
    ports: Reservation,
    launcher: Launcher,
    state: Mutex<State>,
}

impl RedisServer {
    /// Starts a server with the default options.
    ///
    /// # Panics
    ///
    /// If it cannot start; the message says why and shows the server log's tail.
    pub fn start() -> Self {
        Self::builder().start()
    }

    /// Starts a server with the default options.
    ///
    /// # Errors
    ///
    /// As [`RedisServerBuilder::try_start`].
    pub fn try_start() -> Result<Self, HarnessError> {
        Self::builder().try_start()
    }

    /// Starts a server with extra command-line arguments, e.g. `&["--requirepass", "secret"]`.
    ///
    /// # Panics
    ///
    /// If it cannot start.
    pub fn start_with_args(args: &[&str]) -> Self {
        Self::builder().args(args.iter().copied()).start()
    }

    /// Options for a server: binary, extra arguments, password, startup timeout.
    pub fn builder() -> RedisServerBuilder {
        RedisServerBuilder::default()
    }

    /// The TCP port; it stays the same across [`restart`](Self::restart).
    pub fn port(&self) -> u16 {
        self.ports.client()
    }

    /// The port passed with `flag`, one of the builder's [`port_arg`](RedisServerBuilder::port_arg)s
    /// (`None` for any other flag); it stays the same across [`restart`](Self::restart).
    pub fn arg_port(&self, flag: &str) -> Option<u16> {
        let position = self.launcher.port_args.iter().position(|f| *f == *flag)?;
        self.ports.extra().get(position).copied()
    }

    /// `redis://127.0.0.1:PORT`, without credentials.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port())
    }

    /// `redis://[USER]:PASSWORD@127.0.0.1:PORT`, user and password percent-encoded.
    pub fn url_with_auth(&self, username: Option<&str>, password: &str) -> String {
        format!(
            "redis://{}:{}@127.0.0.1:{}",
            percent_encode(username.unwrap_or("")),
            percent_encode(password),
            self.port()
        )
    }

    /// The password given to [`RedisServerBuilder::password`], if any.
    pub fn password(&self) -> Option<&str> {
        self.launcher.password.as_deref()
    }

    /// The process id, or `None` once killed.
    pub fn pid(&self) -> Option<u32> {
        self.lock().child.as_ref().map(Child::id)
    }

    /// Whether the process is alive and not stopped, i.e. it answers commands.
    pub fn is_running(&self) -> bool {
        let mut state = self.lock();
        reap_if_exited(&mut state);
        state.child.is_some() && !state.stopped
    }

    /// Whether the process is alive but stopped by [`stop`](Self::stop).
    pub fn is_stopped(&self) -> bool {
        let mut state = self.lock();
        reap_if_exited(&mut state);
        state.child.is_some() && state.stopped
    }

    /// Kills the process with SIGKILL and reaps it. Does nothing if it is already dead.
    pub fn kill(&self) {
        kill_child(&mut self.lock());
    }

    /// Pauses the process with SIGSTOP and waits until it is stopped: connections stay open,
    /// nothing is answered, keys do not expire until [`resume`](Self::resume).
    ///
    /// # Panics
    ///
    /// If the server was killed, or the signal fails.
    pub fn stop(&self) {
        self.try_stop().unwrap_or_else(|e| self.fail("stop", &e));
    }

    /// Resumes a process paused by [`stop`](Self::stop) with SIGCONT. Does nothing if it is not
    /// stopped.
    ///
    /// # Panics
    ///
    /// If the server was killed, or the signal fails.
    pub fn resume(&self) {
        self.try_resume()
            .unwrap_or_else(|e| self.fail("resume", &e));
    }

    /// Kills the process if it is alive, then starts a new, empty server on the same port and
    /// waits until it answers PING.
    ///
    /// # Panics
    ///
    /// If the new server cannot start; the message shows the log's tail.
    pub fn restart(&self) {
        self.try_restart()
            .unwrap_or_else(|e| self.fail("restart", &e));
    }

    /// As [`stop`](Self::stop), returning the error.
    ///
    /// # Errors
    ///
    /// [`HarnessError::NotRunning`] if killed, [`HarnessError::Signal`] if the signal fails.
    pub fn try_stop(&self) -> Result<(), HarnessError> {
        let mut state = self.lock();
        reap_if_exited(&mut state);
        if state.stopped {
            return Ok(());
        }
        let child = state
            .child
            .as_ref()
            .ok_or(HarnessError::NotRunning { port: self.port() })?;
        let pid = child.id();
        send(pid, Signal::SIGSTOP)?;
        state.stopped = true;
        // Wait for the stop to take effect, so the caller's next request is never answered.
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline {
            match waitpid(
                to_pid(pid),
                Some(WaitPidFlag::WUNTRACED | WaitPidFlag::WNOHANG),
            ) {
                Ok(WaitStatus::StillAlive) => thread::sleep(Duration::from_millis(1)),
                Ok(WaitStatus::Stopped(..)) => return Ok(()),
                // Exited meanwhile: `waitpid` reaped it, so forget the child.
                Ok(WaitStatus::Exited(..) | WaitStatus::Signaled(..)) | Err(_) => {
                    state.child = None;
                    state.stopped = false;
                    return Err(HarnessError::NotRunning { port: self.port() });
                }
                Ok(_) => return Ok(()),
            }
        }
        Ok(())
    }

    /// As [`resume`](Self::resume), returning the error.
    ///
    /// # Errors
    ///
    /// [`HarnessError::NotRunning`] if killed, [`HarnessError::Signal`] if the signal fails.
    pub fn try_resume(&self) -> Result<(), HarnessError> {
        let mut state = self.lock();
        let child = state
            .child
            .as_ref()
            .ok_or(HarnessError::NotRunning { port: self.port() })?;
        if state.stopped {
            send(child.id(), Signal::SIGCONT)?;
            state.stopped = false;
        }
        Ok(())
    }

    /// As [`restart`](Self::restart), returning the error.
    ///
    /// # Errors
    ///
    /// [`HarnessError::PortUnavailable`] if the port stays taken for a few seconds,
    /// [`HarnessError::Exited`] or [`HarnessError::NotReady`] with the log tail otherwise.
    pub fn try_restart(&self) -> Result<(), HarnessError> {
        let mut state = self.lock();
        kill_child(&mut state);
        let deadline = Instant::now() + RESTART_PORT_WAIT;
        let mut attempts = 0;
        loop {
            attempts += 1;
            match self.launcher.launch(&self.ports)? {
                Launch::Ready(child) => {
                    state.child = Some(child);
                    state.stopped = false;
                    return Ok(());
                }
                Launch::PortTaken(log_tail) | Launch::Interrupted(log_tail)
                    if Instant::now() >= deadline =>
                {
                    return Err(HarnessError::PortUnavailable { attempts, log_tail });
                }
                Launch::PortTaken(_) | Launch::Interrupted(_) => {
                    thread::sleep(Duration::from_millis(50));
                }
            }
        }
    }

    /// The whole server log (all runs, if restarted), or an empty string if there is none yet.
    pub fn log(&self) -> String {
        read_lossy(&self.launcher.log_path())
    }

    /// The last `lines` lines of the server log, plus its standard error if it wrote any.
    pub fn log_tail(&self, lines: usize) -> String {
        self.launcher.tail(lines)
    }

    /// A client for assertions; it authenticates if a [password](RedisServerBuilder::password)
    /// was set.
    ///
    /// # Panics
    ///
    /// Never in practice: the URL is well formed.
    pub fn client(&self) -> redis::Client {
        let url = match self.password() {
            Some(password) => self.url_with_auth(None, password),
            None => self.url(),
        };
        redis::Client::open(url).expect("the harness builds a valid redis URL")
    }

    /// A synchronous connection for assertions, with 5 s connect, read and write timeouts.
    ///
    /// # Panics
    ///
    /// If the server does not accept the connection (killed, stopped, wrong password).
    pub fn connection(&self) -> redis::Connection {
        self.try_connection().unwrap_or_else(|e| {
            panic!(
                "could not connect to redis-server on port {}: {}",
                self.port(),
                report(&e)
            )
        })
    }

    /// As [`connection`](Self::connection), returning the error.
    ///
    /// # Errors
    ///
    /// [`HarnessError::Redis`] if connecting fails.
    pub fn try_connection(&self) -> Result<redis::Connection, HarnessError> {
        let con = self.client().get_connection_with_timeout(ASSERT_TIMEOUT)?;
        con.set_read_timeout(Some(ASSERT_TIMEOUT))?;
        con.set_write_timeout(Some(ASSERT_TIMEOUT))?;
        Ok(con)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves the state consistent: keep going.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn fail(&self, action: &str, error: &HarnessError) -> ! {
        panic!(
            "could not {action} redis-server on port {}: {}\nlog tail:\n{}",
            self.port(),
            report(error),
            self.log_tail(LOG_TAIL_LINES)
        )
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        if thread::panicking() {
            let tail = self.log_tail(LOG_TAIL_LINES);
            let mut out = format!("--- redis-server on port {} (log tail) ---\n", self.port());
            for line in tail.lines() {
                let _ = writeln!(out, "[redis:{}] {line}", self.port());
            }
            // Not `eprint!`: with stderr closed it would panic again, abort the process and leave
            // this server (and any other not yet dropped) running.
            let _ = io::stderr().write_all(out.as_bytes());
        }
        kill_child(&mut self.lock());
    }
}

/// What it takes to (re)start the process: binary, arguments, its directory.
#[derive(Debug)]
struct Launcher {
    binary: PathBuf,
    args: Vec<OsString>,
    port_args: Vec<OsString>,
    password: Option<String>,
    startup_timeout: Duration,
    own_process_group: bool,
    dir: TempDir,
}

/// How one launch on one port ended, when it did not fail outright.
enum Launch {
    /// Up and answering PING.
    Ready(Child),
    /// The port was taken; carries the log tail.
    PortTaken(String),
    /// Killed by a signal meant for the caller (see [`GROUP_SIGNALS`]); carries the log tail.
    Interrupted(String),
}

impl Launcher {
    fn log_path(&self) -> PathBuf {
        self.dir.path().join("redis.log")
    }

    fn stderr_path(&self) -> PathBuf {
        self.dir.path().join("stderr.log")
    }

    /// Spawns redis-server on its `ports` (the client port, then one per port argument) and
    /// waits until it answers PING or exits.
    fn launch(&self, ports: &Reservation) -> Result<Launch, HarnessError> {
        let port = ports.client();
        let log_path = self.log_path();
        // Only what this run writes counts: the log is appended to across restarts.
        let log_start = file_len(&log_path);
        let stderr = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.stderr_path())
            .map_err(|source| HarnessError::Io {
                context: "could not open redis-server's stderr file".to_owned(),
                source,
            })?;
        let stderr_start = file_len(&self.stderr_path());

        let mut command = Command::new(&self.binary);
        command
            .arg("--port")
            .arg(port.to_string())
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .args(["--protected-mode", "no", "--daemonize", "no"])
            .arg("--dir")
            .arg(self.dir.path())
            .arg("--logfile")
            .arg(&log_path);
        if let Some(password) = &self.password {
            command.arg("--requirepass").arg(password);
        }
        for (flag, extra_port) in self.port_args.iter().zip(ports.extra()) {
            command.arg(flag).arg(extra_port.to_string());
        }
        command
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr);
        if self.own_process_group {
            // A terminal's Ctrl-C then reaches only the caller, which kills the server; it only
            // dies of the signal if sent before it leaves the caller's group (see
            // `GROUP_SIGNALS`).
            std::os::unix::process::CommandExt::process_group(&mut command, 0);
        }
        let mut child = command.spawn().map_err(|source| {
            if source.kind() == io::ErrorKind::NotFound {
                HarnessError::RedisServerMissing {
                    binary: self.binary.clone(),
                }
            } else {
                HarnessError::Spawn {
                    binary: self.binary.clone(),
                    source,
                }
            }
        })?;

        // With a custom log level the ready line may never be logged: rely on PING alone then.
        let expect_ready_line = !self.args.iter().any(|a| a == "--loglevel");
        let started = Instant::now();
        loop {
            if let Some(status) = child.try_wait().map_err(|source| HarnessError::Io {
                context: "could not poll redis-server".to_owned(),
                source,
            })? {
                let output =
                    read_from(&log_path, log_start) + &read_from(&self.stderr_path(), stderr_start);
                let log_tail = self.tail(LOG_TAIL_LINES);
                if output.contains("Address already in use") {
                    return Ok(Launch::PortTaken(log_tail));
                }
                if status
                    .signal()
                    .is_some_and(|sig| GROUP_SIGNALS.contains(&sig))
                {
                    return Ok(Launch::Interrupted(log_tail));
                }
                return Err(HarnessError::Exited {
                    port,
                    status: status.to_string(),
                    log_tail,
                });
            }
            // The ready line proves the answering server is ours and not another process that
            // took the port first.
            let ours = !expect_ready_line
                || read_from(&log_path, log_start)
                    .to_lowercase()
                    .contains(READY_LINE);
            if ours && probe::ping(port) == Probe::Ready {
                return Ok(Launch::Ready(child));
            }
            let waited = started.elapsed();
            if waited >= self.startup_timeout {
                let _ = child.kill();
                let _ = child.wait();
                return Err(HarnessError::NotReady {
                    port,
                    waited,
                    log_tail: self.tail(LOG_TAIL_LINES),
                });
            }
            thread::sleep(POLL_INTERVAL);
        }
    }

    fn tail(&self, lines: usize) -> String {
        let mut tail = last_lines(&read_lossy(&self.log_path()), lines);
        let stderr = read_lossy(&self.stderr_path());
        if !stderr.trim().is_empty() {
            tail.push_str("\n(stderr)\n");
            tail.push_str(&last_lines(&stderr, lines));
        }
        tail
    }
}

/// Ports given to this process's servers, each theirs until the server drops: a killed server
/// keeps its ports for its restart, and no other server of this process is given them meanwhile.
static RESERVED: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());

/// Ports reserved for one server, or one attempt to start it: its client port, then one per
/// port argument. Released on drop.
#[derive(Debug)]
struct Reservation(Vec<u16>);

impl Reservation {
    /// A client port and `extra` more, distinct, free a moment ago, and reserved.
    fn take(extra: usize) -> Result<Self, HarnessError> {
        let mut reservation = Reservation(Vec::with_capacity(1 + extra));
        for _ in 0..=extra {
            reservation.0.push(free_port()?);
        }
        Ok(reservation)
    }

    fn client(&self) -> u16 {
        self.0[0]
    }

    /// The ports of the port arguments, in order.
    fn extra(&self) -> &[u16] {
        &self.0[1..]
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let mut reserved = RESERVED.lock().unwrap_or_else(PoisonError::into_inner);
        for port in &self.0 {
            reserved.remove(port);
        }
    }
}

/// A port that was free a moment ago and that no other server of this process holds, now
/// reserved; the caller retries if another process takes it meanwhile.
///
/// Drawn below the kernel's ephemeral range when there is room (see [`listening_range`]):
/// outgoing connections take their local ports from that range, so none can take a port between
/// the check here and the server's bind, or hold a killed server's port while it restarts (a
/// client reconnecting to a dead loopback port can even connect to itself on it). Servers of
/// other processes can still take one first: the start is then tried again on new ports.
fn free_port() -> Result<u16, HarnessError> {
    let mut reserved = RESERVED.lock().unwrap_or_else(PoisonError::into_inner);
    let (first, end) = listening_range();
    let draws = if first < end { 64 } else { 0 };
    for _ in 0..draws {
        let port = fastrand::u16(first..end);
        if !reserved.contains(&port)
            && TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, port)).is_ok()
        {
            reserved.insert(port);
            return Ok(port);
        }
    }
    // No room below the ephemeral range (or no free port there): any port the kernel gives.
    for _ in 0..64 {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .map(|addr| addr.port())
            .map_err(|source| HarnessError::Io {
                context: "could not bind 127.0.0.1:0 to find a free port".to_owned(),
                source,
            })?;
        if reserved.insert(port) {
            return Ok(port);
        }
    }
    Err(HarnessError::Io {
        context: "every free port the kernel offered is reserved by this process".to_owned(),
        source: io::Error::from(io::ErrorKind::AddrInUse),
    })
}

/// The ports servers are started on: from 10000 up to the start of the kernel's ephemeral range
/// (`ip_local_port_range`, 32768 by default), and below 30000, where Kubernetes' node ports begin
/// (kube-proxy may answer on them without a listening socket); empty if there is no room.
fn listening_range() -> (u16, u16) {
    const FIRST: u16 = 10_000;
    const NODE_PORTS: u16 = 30_000;
    let ephemeral_start = fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32_768);
    (FIRST, ephemeral_start.clamp(FIRST, NODE_PORTS))
}

fn file_len(path: &Path) -> usize {
    fs::metadata(path).map_or(0, |m| usize::try_from(m.len()).unwrap_or(usize::MAX))
}

fn read_lossy(path: &Path) -> String {
    fs::read(path)
        .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
        .unwrap_or_default()
}

/// The file's content from byte `start` on.
fn read_from(path: &Path, start: usize) -> String {
    match fs::read(path) {
        Ok(bytes) => String::from_utf8_lossy(bytes.get(start..).unwrap_or_default()).into_owned(),
        Err(_) => String::new(),
    }
}

fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Percent-encodes everything but RFC 3986's unreserved characters.
fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}
