//! A child process that takes one lock with the watchdog and holds it until it is killed.
//!
//! `holder NAME TIMEOUT_MS URL...` builds a `LockClient` on the masters `URL...` with a
//! `TIMEOUT_MS` watchdog timeout, waits for the lock `NAME` (`RLock::acquire`; `read:NAME` and
//! `write:NAME` take a side of the read-write lock `NAME`, `fair:NAME` the fair lock `NAME`,
//! `permits:N:NAME` takes N permits of
//! the semaphore `NAME`, whose count the test set, `quorum-permits:N:K:NAME` N permits of the
//! semaphore `NAME` whose count of K the client fixed (on every master),
//! `quorum-count-down:ID:K:NAME` counts the latch `NAME` of K count-downs fixed by the client
//! down as `ID` (on every master), and `count-down:ID:NAME` counts the latch
//! `NAME` down as `ID` and holds nothing), prints
//! `ACQUIRED <fencing token>` and holds it: its watchdog renews the lease every third of the
//! timeout for as long as the process runs. If the hold's lost signal fires, it prints
//! `LOST <reason>` and keeps running with the guard still in hand, so a test can watch what a
//! holder that lost its lock does next.
//!
//! It never exits on its own while the process that started it lives (a test kills it); once
//! that parent is gone it exits, so an aborted test run leaves no holder renewing. Bad arguments
//! or a failed acquisition print to standard error and exit with status 2.
//!
//! The harness drives it through `redlock_testkit::HolderProcess`.

use std::future::Future;
use std::io::Write as _;
use std::pin::Pin;
use std::process::ExitCode;
use std::time::Duration;

use nix::unistd::{getppid, Pid};
use redlock_reentrant::{Error, LockClient, LockGuard, LostReason, Permit};

/// How often the holder checks that the process that started it is still there.
const PARENT_CHECK: Duration = Duration::from_millis(500);

const USAGE: &str = "usage: holder NAME TIMEOUT_MS URL...";

#[tokio::main]
async fn main() -> ExitCode {
    let parent = getppid();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((name, timeout, urls)) = parse(&args) else {
        eprintln!("holder: bad arguments {args:?}\n{USAGE}");
        return ExitCode::from(2);
    };
    let client = match LockClient::builder()
        .nodes(urls)
        .watchdog_timeout(timeout)
        .build()
        .await
    {
        Ok(client) => client,
        Err(err) => {
            eprintln!("holder: could not build the client: {err}");
            return ExitCode::from(2);
        }
    };
    let guard = match take(&client, name).await {
        Ok(guard) => guard,
        Err(err) => {
            eprintln!("holder: could not acquire the lock: {err}");
            return ExitCode::from(2);
        }
    };
    say(&format!("ACQUIRED {}", guard.fencing_token()));

    tokio::select! {
        reason = guard.lost() => say(&format!("LOST {reason:?}: {reason}")),
        () = parent_gone(parent) => return ExitCode::SUCCESS,
    }
    // Lost, but still running and still holding the guard: nothing may bring the lock back.
    parent_gone(parent).await;
    drop(guard);
    ExitCode::SUCCESS
}

/// What the holder holds: a lock's guard, or a semaphore's permits.
enum Held {
    Lock(LockGuard),
    Permit(Permit),
    /// A count-down, done: nothing to hold.
    Nothing,
}

impl Held {
    fn fencing_token(&self) -> u64 {
        match self {
            Held::Lock(guard) => guard.fencing_token(),
            Held::Permit(permit) => permit.fencing_token(),
            Held::Nothing => 0,
        }
    }

    fn lost(&self) -> Pin<Box<dyn Future<Output = LostReason> + Send>> {
        match self {
            Held::Lock(guard) => Box::pin(guard.lost()),
            Held::Permit(permit) => Box::pin(permit.lost()),
            Held::Nothing => Box::pin(std::future::pending()),
        }
    }
}

/// Takes what `name` says (see the module's docs).
async fn take(client: &LockClient, name: &str) -> Result<Held, Error> {
    if let Some(("count-down", rest)) = name.split_once(':') {
        let (id, name) = rest.split_once(':').unwrap_or((rest, rest));
        client.get_count_down_latch(name)?.count_down_as(id).await?;
        return Ok(Held::Nothing);
    }
    if let Some(("quorum-count-down", rest)) = name.split_once(':') {
        let mut parts = rest.splitn(3, ':');
        let (id, count, name) = (parts.next(), parts.next(), parts.next());
        let count = count.and_then(|n| n.parse().ok()).unwrap_or(1);
        let latch = client.get_quorum_count_down_latch(name.unwrap_or(rest), count)?;
        latch.count_down_as(id.unwrap_or(rest)).await?;
        return Ok(Held::Nothing);
    }
    if let Some(("quorum-permits", rest)) = name.split_once(':') {
        let mut parts = rest.splitn(3, ':');
        let (permits, count, name) = (parts.next(), parts.next(), parts.next());
        let number = |part: Option<&str>| part.and_then(|n| n.parse().ok()).unwrap_or(1);
        let semaphore = client.get_quorum_semaphore(name.unwrap_or(rest), number(count))?;
        return Ok(Held::Permit(semaphore.acquire(number(permits)).await?));
    }
    if let Some(("permits", rest)) = name.split_once(':') {
        let (permits, name) = rest.split_once(':').unwrap_or(("1", rest));
        let permits = permits.parse().unwrap_or(1);
        let semaphore = client.get_permit_expirable_semaphore(name)?;
        return Ok(Held::Permit(semaphore.acquire(permits).await?));
    }
    let lock = match name.split_once(':') {
        Some(("read", name)) => client.get_read_write_lock(name).read_lock(),
        Some(("write", name)) => client.get_read_write_lock(name).write_lock(),
        Some(("fair", name)) => client.get_fair_lock(name)?,
        _ => client.get_lock(name),
    };
    Ok(Held::Lock(lock.acquire().await?))
}

/// `NAME TIMEOUT_MS URL...`.
fn parse(args: &[String]) -> Option<(&str, Duration, &[String])> {
    let [name, timeout_ms, urls @ ..] = args else {
        return None;
    };
    let timeout = Duration::from_millis(timeout_ms.parse().ok()?);
    (!urls.is_empty()).then_some((name.as_str(), timeout, urls))
}

/// Writes one line to standard output and flushes it, so the test sees it at once. A closed pipe
/// only means nobody listens any more: the holder keeps holding.
fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}").and_then(|()| out.flush());
}

/// Resolves once the process that started the holder is gone (the holder was re-parented).
async fn parent_gone(parent: Pid) {
    while getppid() == parent {
        tokio::time::sleep(PARENT_CHECK).await;
    }
}
