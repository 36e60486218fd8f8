//! `redlock status NAME` and `redlock unlock --force NAME`: a lock seen and cleared from
//! outside, as text or JSON.

use std::future::Future;

use redlock_reentrant::{Error, LockStatus, RLock, RPermitExpirableSemaphore};
use serde::Serialize;

use crate::args::{Connection, StatusArgs, UnlockArgs};
use crate::connect::{close, connect, WatchdogLease};
use crate::exit::Failure;
use crate::report::{answer, describe, Reporter};

/// `redlock status --json`.
#[derive(Debug, Serialize)]
struct StatusJson<'a> {
    name: &'a str,
    locked: bool,
    undecided: bool,
    held_on: usize,
    hold_count: u32,
    ttl_ms: Option<u64>,
    fencing_counter: Option<u64>,
    nodes_answered: usize,
    nodes: usize,
}

/// `redlock status --permits --json`.
#[derive(Debug, Serialize)]
struct PermitsJson<'a> {
    name: &'a str,
    set: bool,
    permits: u32,
    acquired: u32,
    available: u32,
}

/// `redlock unlock --force --json`.
#[derive(Debug, Serialize)]
struct UnlockJson<'a> {
    name: &'a str,
    deleted: bool,
}

/// Prints the lock's status on standard output.
///
/// # Errors
///
/// As [`connect`], and the library's errors of `RLock::status`.
pub(crate) async fn status(
    args: &StatusArgs,
    connection: &Connection,
    out: &Reporter,
) -> Result<u8, Failure> {
    if args.permits {
        let status = on_the_semaphore(
            connection,
            out,
            &args.name,
            |s| async move { s.status().await },
        )
        .await?;
        if args.json {
            // Unset: no count to show (the observer's own is not the semaphore's).
            let (permits, available) = match status.set {
                true => (status.permits, status.available()),
                false => (0, 0),
            };
            print_json(&PermitsJson {
                name: &args.name,
                set: status.set,
                permits,
                acquired: status.acquired,
                available,
            })?;
        } else if status.set {
            answer(format_args!(
                "{}: {} of {} permits out, {} free",
                args.name,
                status.acquired,
                status.permits,
                status.available()
            ))?;
        } else {
            answer(format_args!(
                "{}: no semaphore (no permit out, no count set)",
                args.name
            ))?;
        }
        return Ok(0);
    }
    let status = on_the_lock(
        connection,
        out,
        &args.name,
        args.shared,
        |lock| async move { lock.status().await },
    )
    .await?;
    if args.json {
        print_json(&StatusJson {
            name: &args.name,
            locked: status.locked,
            undecided: status.is_undecided(),
            held_on: status.held_on,
            hold_count: status.holder_count,
            ttl_ms: status
                .remaining_ttl
                .map(|ttl| u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX)),
            fencing_counter: status.fencing_counter,
            nodes_answered: status.answered,
            nodes: status.nodes,
        })?;
    } else {
        answer(status_line(&args.name, &status))?;
    }
    Ok(0)
}

fn status_line(name: &str, status: &LockStatus) -> String {
    let held = match status.locked {
        true => format!(
            "{} (hold count {})",
            describe(Some(status)),
            status.holder_count
        ),
        false => describe(Some(status)),
    };
    let counter = match status.fencing_counter {
        Some(counter) => format!("fencing counter {counter}"),
        None => "no fencing counter yet".to_owned(),
    };
    format!(
        "{name}: {held}; {counter}; {} of {} nodes answered",
        status.answered, status.nodes
    )
}

/// Deletes the lock whoever holds it.
///
/// # Errors
///
/// [`Failure::Usage`] without `--force`; as [`connect`], and the library's errors of
/// `RLock::force_unlock`.
pub(crate) async fn unlock(
    args: &UnlockArgs,
    connection: &Connection,
    out: &Reporter,
) -> Result<u8, Failure> {
    if !args.force {
        return Err(Failure::Usage(format!(
            "`redlock unlock` deletes {} whoever holds it, and the holder's job is told it lost \
             the lock: pass --force to mean it",
            args.name
        )));
    }
    let deleted = if args.permits {
        on_the_semaphore(
            connection,
            out,
            &args.name,
            |s| async move { s.delete().await },
        )
        .await?
    } else {
        on_the_lock(
            connection,
            out,
            &args.name,
            args.shared,
            |lock| async move { lock.force_unlock().await },
        )
        .await?
    };
    if args.json {
        print_json(&UnlockJson {
            name: &args.name,
            deleted,
        })?;
    } else if deleted {
        answer(format_args!("{}: force-unlocked", args.name))?;
    } else if args.permits {
        answer(format_args!("{}: no semaphore to delete", args.name))?;
    } else {
        // A minority may have held it (a split vote, stale grants): deleted there all the same.
        answer(format_args!(
            "{}: was not locked on a majority (anything a minority held is deleted too)",
            args.name
        ))?;
    }
    Ok(0)
}

/// Connects, runs `question` on the lock `name` (its shared side, with `shared`), and shuts the client down whatever it answered.
async fn on_the_lock<T, F>(
    connection: &Connection,
    out: &Reporter,
    name: &str,
    shared: bool,
    question: impl FnOnce(RLock) -> F,
) -> Result<T, Failure>
where
    F: Future<Output = Result<T, Error>>,
{
    let client = connect(connection, WatchdogLease::TakesNoLock, out).await?;
    let sides = client.get_read_write_lock(name);
    let lock = if shared {
        sides.read_lock()
    } else {
        sides.write_lock()
    };
    let answer = question(lock).await;
    close(client).await;
    Ok(answer?)
}

/// Connects, runs `question` on the semaphore `name`, and shuts the client down whatever it
/// answered.
async fn on_the_semaphore<T, F>(
    connection: &Connection,
    out: &Reporter,
    name: &str,
    question: impl FnOnce(RPermitExpirableSemaphore) -> F,
) -> Result<T, Failure>
where
    F: Future<Output = Result<T, Error>>,
{
    let client = connect(connection, WatchdogLease::TakesNoLock, out).await?;
    // Its status and its deletion need no count: the masters say theirs. Built as one permit
    // (the fixed count only decides acquisitions), so several masters are not refused.
    let answer = match client.get_quorum_semaphore(name, 1) {
        Ok(semaphore) => question(semaphore).await,
        Err(err) => Err(err),
    };
    close(client).await;
    Ok(answer?)
}

fn print_json(value: &impl Serialize) -> Result<(), Failure> {
    let line = serde_json::to_string(value).map_err(|err| Failure::System {
        what: "write JSON",
        source: err.into(),
    })?;
    answer(line)
}
