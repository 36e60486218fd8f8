//! `redlock run NAME -- COMMAND`: take the lock, run the job under it, release it once every
//! process of the job is done, and exit with the command's code.

use std::time::Duration;

use nix::sys::signal::Signal;
use std::future::Future;
use std::pin::Pin;

use redlock_reentrant::{
    Error, InvalidArgument, LockClient, LockGuard, LostReason, Permit, RLock,
    RPermitExpirableSemaphore,
};
use tokio::time::Instant;

use crate::args::{Connection, OnLost, RunArgs};
use crate::connect::{close, connect, WatchdogLease};
use crate::exit::{self, Failure};
use crate::job::{self, Job};
use crate::report::{describe, seconds, Reporter};
use crate::signals::{stop_self, Caught};

/// A wait shorter than this goes unmentioned.
const MENTION_WAITS_AFTER: Duration = Duration::from_millis(250);
/// How often the spinner asks the nodes how long the holder has left.
const SPINNER_REFRESH: Duration = Duration::from_secs(1);

/// Runs `redlock run`: the exit code to end with.
///
/// # Errors
///
/// Every [`Failure`] but a lost lock, which is the job's outcome ([`exit::LOST`]).
pub(crate) async fn run(
    args: &RunArgs,
    connection: &Connection,
    out: &Reporter,
) -> Result<u8, Failure> {
    // The job's processes are handed to redlock if their supervisor dies, so that redlock can
    // kill and collect them before it lets the lock go.
    #[cfg(target_os = "linux")]
    nix::sys::prctl::set_child_subreaper(true).map_err(|errno| Failure::System {
        what: "become the subreaper of the job's processes",
        source: errno.into(),
    })?;
    let mut signals = Caught::for_redlock().map_err(|source| Failure::System {
        what: "catch the signals passed on to the job",
        source,
    })?;
    let client = tokio::select! {
        client = connect(connection, WatchdogLease::Given(args.watchdog_timeout), out) => client?,
        signal = signals.next_ending() => return Err(Failure::Interrupted(signal as i32)),
    };
    let outcome = hold_and_run(&client, args, &mut signals, out).await;
    close(client).await;
    outcome
}

/// What a run holds while its job runs: the lock (a side of the read-write lock NAME), or
/// permits of the semaphore NAME (`--permits`).
enum Held {
    Lock(LockGuard),
    Permits(Permit),
}

impl Held {
    fn fencing_token(&self) -> u64 {
        match self {
            Held::Lock(guard) => guard.fencing_token(),
            Held::Permits(permit) => permit.fencing_token(),
        }
    }

    fn lost(&self) -> Pin<Box<dyn Future<Output = LostReason> + Send>> {
        match self {
            Held::Lock(guard) => Box::pin(guard.lost()),
            Held::Permits(permit) => Box::pin(permit.lost()),
        }
    }

    async fn release(self) -> Result<(), Error> {
        match self {
            Held::Lock(guard) => guard.unlock().await,
            Held::Permits(permit) => permit.release().await,
        }
    }
}

async fn hold_and_run(
    client: &LockClient,
    args: &RunArgs,
    signals: &mut Caught,
    out: &Reporter,
) -> Result<u8, Failure> {
    let started = Instant::now();
    let taken = match args.permits {
        Some(permits) => take_permit(client, permits, args, signals, out).await?,
        None => take_lock(client, args, signals, out).await?,
    };
    let token = taken.fencing_token();
    out.info(&format!(
        "acquired {} (fencing token {token}) after {}",
        args.name,
        seconds(started.elapsed())
    ));
    let env = [
        ("REDLOCK_NAME", args.name.clone()),
        ("REDLOCK_FENCING_TOKEN", token.to_string()),
    ];
    let mut job = match Job::start(&args.command, &env) {
        Ok(job) => job,
        Err(failure) => {
            release(taken, args, client, out, None).await;
            return Err(failure);
        }
    };
    let ran = supervise(&mut job, &taken, client, args, signals, out).await;
    match ran {
        Ran::Exited(code) => Ok(release(taken, args, client, out, Some(code))
            .await
            .unwrap_or(code)),
        Ran::Lost(code) => {
            out.warn(&format!(
                "the job exited with {code} after the lock {} was lost",
                args.name
            ));
            Ok(exit::LOST)
        }
        Ran::Unwatched(source) => {
            // The job cannot be waited for: every process of it is killed, and gone, before
            // the lock is let go, so none runs unlocked.
            job.kill_all().await;
            release(taken, args, client, out, None).await;
            Err(Failure::Job {
                program: args.command[0].clone(),
                source,
            })
        }
    }
}

/// Takes the lock NAME (its write side, or with `--shared` its read side), or fails busy.
async fn take_lock(
    client: &LockClient,
    args: &RunArgs,
    signals: &mut Caught,
    out: &Reporter,
) -> Result<Held, Failure> {
    // Exclusive runs take the write side, whose key is the reentrant lock's that earlier
    // versions took: old and new exclusive runs exclude each other.
    let sides = client.get_read_write_lock(args.name.as_str());
    let (lock, other) = if args.shared {
        (sides.read_lock(), sides.write_lock())
    } else {
        (sides.write_lock(), sides.read_lock())
    };
    // Dropping the attempt on a signal leaves no lock and no waiter behind.
    let guard = tokio::select! {
        guard = acquire(&lock, &other, args, out) => guard?,
        signal = signals.next_ending() => return Err(Failure::Interrupted(signal as i32)),
    };
    match guard {
        Some(guard) => Ok(Held::Lock(guard)),
        None => Err(busy(&lock, &other, args, out).await),
    }
}

/// Takes a permit of the semaphore NAME, whose count is `permits` (fixed by every run, on every
/// master; a run that disagrees with the permits out is refused), or fails busy.
async fn take_permit(
    client: &LockClient,
    permits: u32,
    args: &RunArgs,
    signals: &mut Caught,
    out: &Reporter,
) -> Result<Held, Failure> {
    let semaphore = client.get_quorum_semaphore(args.name.as_str(), permits)?;
    let differs = |found: u32| {
        Failure::Usage(format!(
            "the semaphore {} has {found} permits, not {permits}: every run of it must give the \
             same --permits (the count changes once no permit is out, or once \
             `redlock unlock --force --permits {}` took them back)",
            args.name, args.name
        ))
    };
    let wait = match (args.no_wait, args.wait) {
        (true, _) => Some(Duration::ZERO),
        (false, wait) => wait,
    };
    let attempt = async {
        match wait {
            Some(wait) => semaphore.try_acquire(1, wait, args.lease).await,
            None => match args.lease {
                Some(lease) => semaphore.try_acquire(1, Duration::MAX, Some(lease)).await,
                None => semaphore.acquire(1).await.map(Some),
            },
        }
    };
    tokio::pin!(attempt);
    let taken = tokio::select! {
        taken = &mut attempt => taken,
        () = tokio::time::sleep(MENTION_WAITS_AFTER), if !args.no_wait => {
            out.info(&format!("waiting for one of the {permits} permits of {}", args.name));
            tokio::select! {
                taken = attempt => taken,
                signal = signals.next_ending() => return Err(Failure::Interrupted(signal as i32)),
            }
        }
        signal = signals.next_ending() => return Err(Failure::Interrupted(signal as i32)),
    };
    let permit = match taken {
        Err(Error::InvalidArgument(InvalidArgument::PermitCountDiffers { found, .. })) => {
            return Err(differs(found))
        }
        taken => taken?,
    };
    match permit {
        Some(permit) => Ok(Held::Permits(permit)),
        None => Err(permits_busy(&semaphore, args, out).await),
    }
}

/// The busy failure of `--permits`, described where it will be shown.
async fn permits_busy(
    semaphore: &RPermitExpirableSemaphore,
    args: &RunArgs,
    out: &Reporter,
) -> Failure {
    let status = match out.shows_notices() {
        true => semaphore.status().await.ok(),
        false => None,
    };
    let how = match (args.no_wait, args.wait) {
        (false, Some(wait)) => format!(" after waiting {}", seconds(wait)),
        _ => String::new(),
    };
    let what = match status {
        Some(status) => format!("{} of {} permits out", status.acquired, status.permits),
        None => "every permit out".to_owned(),
    };
    Failure::Busy {
        message: format!("{} is busy ({what}){how}", args.name),
        code: args.conflict_exit_code,
    }
}

/// Takes the lock as the flags say: at once, within `--wait`, or whenever it frees. Says so
/// when the wait is noticeable.
/// `other`: the other side of the read-write lock, whose holders keep this side busy too.
async fn acquire(
    lock: &RLock,
    other: &RLock,
    args: &RunArgs,
    out: &Reporter,
) -> Result<Option<LockGuard>, Error> {
    let attempt = async {
        match (args.no_wait, args.wait, args.lease) {
            (true, _, lease) => without_waiting(lock, other, lease).await,
            (false, Some(wait), lease) => lock.try_acquire(wait, lease).await,
            (false, None, Some(lease)) => lock.acquire_with_lease(lease).await.map(Some),
            (false, None, None) => lock.acquire().await.map(Some),
        }
    };
    tokio::pin!(attempt);
    if args.no_wait {
        return attempt.await;
    }
    tokio::select! {
        taken = &mut attempt => return taken,
        () = tokio::time::sleep(MENTION_WAITS_AFTER) => {}
    }
    let waiting = out.waiting(&args.name);
    let refresh = async {
        if !out.animates() {
            return std::future::pending().await;
        }
        loop {
            waiting.show(lock.status().await.ok().as_ref());
            tokio::time::sleep(SPINNER_REFRESH).await;
        }
    };
    tokio::select! {
        taken = attempt => taken,
        never = refresh => never,
    }
}

/// How long `--no-wait` retries a split vote before it says busy.
const SPLIT_VOTE_RETRIES_FOR: Duration = Duration::from_millis(500);
/// The longest pause between two of those retries (each pause is drawn below it).
const SPLIT_VOTE_PAUSE: Duration = Duration::from_millis(40);

/// `--no-wait`: does not wait for a holder, but a split vote is no holder. Rival runs started at
/// the same moment (the same crontab line on several hosts) can each get a minority of the
/// masters, and every one of them would give up: the job would run nowhere. So the lock is busy
/// only when a majority of the masters hold it for one owner, or the other side of the
/// read-write lock is held on a majority (readers keep a writer out, a writer keeps readers out);
/// a split is retried after a short random pause (the rivals undo their partial grants at once)
/// for at most [`SPLIT_VOTE_RETRIES_FOR`].
async fn without_waiting(
    lock: &RLock,
    other: &RLock,
    lease: Option<Duration>,
) -> Result<Option<LockGuard>, Error> {
    // Counted from the first answer, so that a slow first attempt leaves the split its retries.
    let mut until = None;
    loop {
        if let Some(guard) = lock.try_acquire(Duration::ZERO, lease).await? {
            return Ok(Some(guard));
        }
        let until = *until.get_or_insert_with(|| Instant::now() + SPLIT_VOTE_RETRIES_FOR);
        // A status that cannot be read proves no holder either: the split is tried again.
        let held = lock
            .status()
            .await
            .is_ok_and(|status| status.held_by_one_owner)
            || other.status().await.is_ok_and(|status| status.locked);
        if held || Instant::now() >= until {
            return Ok(None);
        }
        tracing::debug!(lock = %lock.name(), "a split vote, not a holder: trying again");
        tokio::time::sleep(jitter(SPLIT_VOTE_PAUSE)).await;
    }
}

/// A pause drawn in `[max / 4, max)`, so that rivals retrying a split do not meet again.
fn jitter(max: Duration) -> Duration {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |now| now.subsec_nanos())
        ^ std::process::id().rotate_left(16);
    let span = max - max / 4;
    max / 4 + span.mul_f64(f64::from(nanos % 1_000) / 1_000.0)
}

/// The busy failure, described where it will be shown.
async fn busy(lock: &RLock, other: &RLock, args: &RunArgs, out: &Reporter) -> Failure {
    // The side that keeps this run out: the other one when it is held.
    let status = if out.shows_notices() {
        match other.status().await {
            Ok(status) if status.locked => Some(status),
            _ => lock.status().await.ok(),
        }
    } else {
        None
    };
    let how = match (args.no_wait, args.wait) {
        (false, Some(wait)) => format!(" after waiting {}", seconds(wait)),
        _ => String::new(),
    };
    Failure::Busy {
        message: format!("{} is busy ({}){how}", args.name, describe(status.as_ref())),
        code: args.conflict_exit_code,
    }
}

/// How the job's run ended.
enum Ran {
    /// It exited with this code, the lock held throughout.
    Exited(u8),
    /// It exited with this code, but the lock was lost while it ran.
    Lost(u8),
    /// It could not be waited for.
    Unwatched(std::io::Error),
}

/// Waits for the job, forwarding signals to it and acting on a lost lock (`--on-lost`).
async fn supervise(
    job: &mut Job,
    held: &Held,
    client: &LockClient,
    args: &RunArgs,
    signals: &mut Caught,
    out: &Reporter,
) -> Ran {
    let mut lost = held.lost();
    let mut was_lost = false;
    let mut kill_at: Option<Instant> = None;
    loop {
        tokio::select! {
            status = job.wait() => {
                return match status {
                    Ok(status) if was_lost => Ran::Lost(job::exit_code(status)),
                    Ok(status) => Ran::Exited(job::exit_code(status)),
                    Err(err) => Ran::Unwatched(err),
                };
            }
            signal = signals.next() => match signal {
                Signal::SIGTSTP => {
                    job.stop();
                    stop_self();
                    // Continued. Renewal stopped with redlock: the job goes on only if the
                    // lock is still ours on a majority (a renewal follows at once).
                    let lease = args.lease.unwrap_or(client.watchdog().timeout());
                    if !was_lost && !still_held(held, client, lease).await {
                        was_lost = true;
                        kill_at = act_on_lost(job, args, out, "it ran out while redlock was stopped");
                    } else {
                        job.resume();
                    }
                }
                forwarded => {
                    out.info(&format!("passing {forwarded} on to the job"));
                    job.pass_on(forwarded);
                }
            },
            reason = &mut lost, if !was_lost => {
                was_lost = true;
                kill_at = act_on_lost(job, args, out, &reason.to_string());
            }
            () = sleep_until(kill_at), if kill_at.is_some() => {
                out.warn(&format!("the job outlived its {} of grace: SIGKILL", seconds(args.grace)));
                job.kill();
                kill_at = None;
            }
        }
    }
}

/// Whether the guard's hold is still live, held on a majority, and for long enough that the
/// renewal that follows a stop lands before it runs out. Not knowing (no quorum) counts as
/// lost: the job must not run on without the lock. A permit is asked its own validity, which
/// the clock ends.
async fn still_held(held: &Held, client: &LockClient, lease: Duration) -> bool {
    let guard = match held {
        Held::Lock(guard) => guard,
        Held::Permits(permit) => return !permit.is_lost(),
    };
    let config = client.redlock().config();
    let margin = config.node_timeout_for(lease) * 2 + config.drift_for(lease);
    let lock = guard.lock();
    !guard.is_lost()
        && lock.hold_count().await.is_ok_and(|count| count > 0)
        && lock
            .remaining_ttl()
            .await
            .is_ok_and(|ttl| ttl.is_some_and(|ttl| ttl > margin))
}

/// Does to the job what `--on-lost` says; the time to SIGKILL it, if any.
fn act_on_lost(job: &Job, args: &RunArgs, out: &Reporter, why: &str) -> Option<Instant> {
    let lost = format!("the lock {} was lost while the job ran: {why}", args.name);
    let kill_at = match args.on_lost {
        OnLost::Term => {
            out.warn(&format!(
                "{lost}; sending SIGTERM to the job, SIGKILL in {}",
                seconds(args.grace)
            ));
            // Followed by SIGCONT: a job stopped with redlock (Ctrl-Z) acts on it.
            job.pass_on(Signal::SIGTERM);
            // A grace too long for the clock is no deadline.
            Instant::now().checked_add(args.grace)
        }
        OnLost::Kill => {
            out.warn(&format!("{lost}; killing the job"));
            job.kill();
            None
        }
        OnLost::Ignore => {
            out.warn(&format!("{lost}; letting it finish (--on-lost ignore)"));
            // A job stopped with redlock (Ctrl-Z) must run to finish.
            job.resume();
            None
        }
    };
    kill_at
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// Releases the lock after the job. `Some(LOST)` when it turns out to have been lost; a
/// release that reached no majority is only a warning: the job ran alone, and the lock frees
/// when its lease runs out.
async fn release(
    held: Held,
    args: &RunArgs,
    client: &LockClient,
    out: &Reporter,
    job_code: Option<u8>,
) -> Option<u8> {
    match held.release().await {
        Ok(()) => {
            out.info(&format!("released {}", args.name));
            None
        }
        Err(err @ (Error::LockLost { .. } | Error::NotOwner { .. })) => {
            // The lost code wins (the job's work may have overlapped another holder's); the
            // job's own code is said with it.
            let finished = match job_code {
                Some(code) => format!("the job exited with {code}"),
                None => "the job finished".to_owned(),
            };
            out.warn(&format!("{finished}, but {err}"));
            Some(exit::LOST)
        }
        Err(err) => {
            let frees = args.lease.unwrap_or(client.watchdog().timeout());
            out.warn(&format!(
                "the job finished, but releasing {} failed: {}; it frees within {}",
                args.name,
                Failure::from(err).one_line(),
                seconds(frees)
            ));
            None
        }
    }
}
