//! Running the real `redlock` binary against real redis-server processes.

#![allow(dead_code, unreachable_pub)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use redlock_testkit::{eventually, RedisCluster};

/// Long enough for anything a test waits on, on a busy machine.
pub const PATIENCE: Duration = Duration::from_secs(60);

/// The watchdog timeout of the tests that lose their lock on purpose (a force-unlock, a stop):
/// short, so that the loss is noticed within seconds (at the next renewal, a third of it
/// later), yet long enough that a process stalled by a busy machine does not lose it unasked.
pub const WATCHDOG: &str = "10s";

/// A node timeout with room for a busy machine, for the commands that take no lock (`status`,
/// `unlock --force`): the one derived from their lease is 300 ms.
pub const NODE_TIMEOUT: [&str; 2] = ["--node-timeout", "5s"];

/// The busy exit code.
pub const BUSY: i32 = 75;
/// The no-quorum exit code.
pub const UNAVAILABLE: i32 = 69;
/// The lost exit code.
pub const LOST: i32 = 79;
/// The usage exit code.
pub const USAGE: i32 = 64;

/// `redlock` with `nodes` (none when empty) and a clean environment of ours.
pub fn redlock(nodes: &[String]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_redlock"));
    // redlock reads every REDLOCK_* variable, as the library does: none of the caller's.
    for (var, _) in std::env::vars_os() {
        if var.to_string_lossy().starts_with("REDLOCK_") {
            command.env_remove(var);
        }
    }
    command.env_remove("RUST_LOG");
    if !nodes.is_empty() {
        command.env("REDLOCK_NODES", nodes.join(","));
    }
    command.stdin(Stdio::null());
    command
}

/// A finished `redlock`.
#[derive(Debug)]
pub struct Finished {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Finished {
    pub fn code(&self) -> i32 {
        self.status
            .code()
            .unwrap_or_else(|| panic!("killed: {self:?}"))
    }

    /// Asserts the exit code, showing what redlock said if it differs.
    pub fn assert_code(&self, code: i32) -> &Self {
        assert_eq!(self.status.code(), Some(code), "{self:#?}");
        self
    }
}

/// Runs `command` to the end.
pub fn finish(command: &mut Command) -> Finished {
    Running::start(command).wait()
}

/// A running `redlock`, its standard output and error collected as they come.
#[derive(Debug)]
pub struct Running {
    child: Child,
    stdout: Collected,
    stderr: Collected,
}

/// A pipe read to its end in a thread of its own: a process that outlives redlock and keeps
/// the pipe open (a failure the test should report) cannot hang the test.
#[derive(Debug, Clone, Default)]
struct Collected {
    text: Arc<Mutex<String>>,
    ended: Arc<std::sync::atomic::AtomicBool>,
}

impl Collected {
    fn read(pipe: impl std::io::Read + Send + 'static) -> Collected {
        let collected = Collected::default();
        let writer = collected.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                let mut text = writer.text.lock().expect("collected");
                text.push_str(&line);
                text.push('\n');
            }
            writer
                .ended
                .store(true, std::sync::atomic::Ordering::Release);
        });
        collected
    }

    fn text(&self) -> String {
        self.text.lock().expect("collected").clone()
    }

    /// The text, once the pipe ended (at most [`PATIENCE`]).
    fn finished_text(&self) -> String {
        let ended = || self.ended.load(std::sync::atomic::Ordering::Acquire);
        assert!(
            eventually(PATIENCE, ended),
            "a process outlived redlock holding its output open: {}",
            self.text()
        );
        self.text()
    }
}

impl Running {
    pub fn start(command: &mut Command) -> Running {
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("redlock starts");
        let stdout = Collected::read(child.stdout.take().expect("stdout piped"));
        let stderr = Collected::read(child.stderr.take().expect("stderr piped"));
        Running {
            child,
            stdout,
            stderr,
        }
    }

    pub fn pid(&self) -> Pid {
        Pid::from_raw(i32::try_from(self.child.id()).expect("pid"))
    }

    pub fn signal(&self, signal: Signal) {
        kill(self.pid(), signal).expect("signal redlock");
    }

    /// What it said on standard error so far.
    pub fn stderr(&self) -> String {
        self.stderr.text()
    }

    /// Whether it has exited (without reaping it).
    pub fn has_exited(&mut self) -> bool {
        self.child.try_wait().expect("try_wait").is_some()
    }

    /// Waits for it to exit, at most [`PATIENCE`].
    pub fn wait(mut self) -> Finished {
        let deadline = Instant::now() + PATIENCE;
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                break status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!(
                    "redlock did not exit within {PATIENCE:?}: {}",
                    self.stderr()
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        Finished {
            status,
            stdout: self.stdout.finished_text(),
            stderr: self.stderr.finished_text(),
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `redlock status NAME --json` (which must succeed).
pub fn status(nodes: &[String], name: &str) -> serde_json::Value {
    let done = finish(
        redlock(nodes)
            .args(["status", name, "--json"])
            .args(NODE_TIMEOUT),
    );
    done.assert_code(0);
    serde_json::from_str(done.stdout.trim()).unwrap_or_else(|err| panic!("{err}: {done:#?}"))
}

/// `redlock unlock --force NAME --json` (which must succeed): whether it deleted the lock.
pub fn force_unlock(nodes: &[String], name: &str) -> bool {
    let done = finish(
        redlock(nodes)
            .args(["unlock", "--force", name, "--json"])
            .args(NODE_TIMEOUT),
    );
    done.assert_code(0);
    let answer: serde_json::Value =
        serde_json::from_str(done.stdout.trim()).unwrap_or_else(|err| panic!("{err}: {done:#?}"));
    answer["deleted"]
        .as_bool()
        .unwrap_or_else(|| panic!("`deleted` is a boolean: {done:#?}"))
}

/// Whether a majority holds the lock `name` (a release returns once a majority let it go, so
/// this is false as soon as a release returned).
pub fn locked(nodes: &[String], name: &str) -> bool {
    status(nodes, name)["locked"]
        .as_bool()
        .expect("`locked` is a boolean")
}

/// A scratch directory for the jobs' files.
pub struct Scratch {
    dir: tempfile::TempDir,
}

impl Scratch {
    pub fn new() -> Scratch {
        Scratch {
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The file's text ("" when absent).
    pub fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.path(name)).unwrap_or_default()
    }

    /// Waits until the file exists, at most [`PATIENCE`].
    pub fn await_file(&self, name: &str) {
        let path = self.path(name);
        assert!(
            eventually(PATIENCE, || path.exists()),
            "{} never appeared",
            path.display()
        );
    }

    pub fn touch(&self, name: &str) {
        std::fs::write(self.path(name), "").expect("touch");
    }

    /// A shell snippet that writes `value` (`$$`, `$!`, ...) to the file `name` at once, so that
    /// [`Scratch::await_pid`] never reads it half written.
    pub fn publish(&self, name: &str, value: &str) -> String {
        let path = self.path(name);
        format!(
            "echo \"{value}\" > '{0}.tmp'; mv '{0}.tmp' '{0}'",
            path.display()
        )
    }

    /// Waits for the file `name` (written by [`Scratch::publish`]) and reads the pid in it.
    pub fn await_pid(&self, name: &str) -> i32 {
        self.await_file(name);
        self.read(name).trim().parse().expect("a pid")
    }
}

/// A job (`sh -c SCRIPT`) that appends `ran` to `out`, then waits until `go` exists.
pub fn job_until(out: &Path, go: &Path) -> Vec<String> {
    sh(&format!(
        "echo ran >> '{}'; while [ ! -e '{}' ]; do sleep 0.02; done",
        out.display(),
        go.display()
    ))
}

/// A `redlock run NAME` holding the lock with [`job_until`]`(out, go)`, once its job runs.
pub fn holding(nodes: &[String], name: &str, scratch: &Scratch) -> Running {
    let holder = Running::start(
        redlock(nodes)
            .args(["run", name, "--"])
            .args(job_until(&scratch.path("out"), &scratch.path("go"))),
    );
    scratch.await_file("out");
    holder
}

/// `sh -c script` as a command line.
pub fn sh(script: &str) -> Vec<String> {
    vec!["sh".into(), "-c".into(), script.into()]
}

/// Masters for one test.
pub fn masters(n: usize) -> (RedisCluster, Vec<String>) {
    let cluster = RedisCluster::start(n);
    let urls = cluster.urls();
    (cluster, urls)
}

/// The fields of `/proc/PID/stat` after the command name (state, parent, ...), if `pid`
/// exists. The name, in parentheses, may itself hold spaces: the fields follow the last `)`.
fn stat_fields(pid: i32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    Some(rest.split_whitespace().map(str::to_owned).collect())
}

/// The state letter of process `pid` (`T` when stopped), if it exists.
pub fn state_of(pid: i32) -> Option<String> {
    stat_fields(pid)?.into_iter().next()
}

/// The process group of process `pid`.
pub fn group_of(pid: i32) -> i32 {
    stat_fields(pid)
        .and_then(|fields| fields.get(2)?.parse().ok())
        .expect("the group of a live process")
}

/// The parent of process `pid`.
pub fn parent_of(pid: i32) -> i32 {
    stat_fields(pid)
        .and_then(|fields| fields.get(1)?.parse().ok())
        .expect("the parent of a live process")
}

/// Whether process `pid` is gone or a zombie (dead, not yet reaped).
pub fn is_dead(pid: i32) -> bool {
    state_of(pid).is_none_or(|state| state == "Z" || state == "X")
}

/// Whether `signal` is ignored in this test process (and so in what it starts).
pub fn ignored_here(signal: Signal) -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let mask = status
                .lines()
                .find_map(|line| line.strip_prefix("SigIgn:"))?;
            u64::from_str_radix(mask.trim(), 16).ok()
        })
        .is_some_and(|mask| mask & (1 << (signal as i32 - 1)) != 0)
}
