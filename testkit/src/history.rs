//! The fault suite's history: every event of every process, on one clock, in one file.
//!
//! Workers, the nemesis and the test itself append one line per event to the same file (opened
//! in append mode, one `write` per line, so lines from different processes never interleave).
//! Each line is stamped with the system-wide monotonic clock ([`now_ns`], `CLOCK_MONOTONIC`),
//! which every process on the machine shares, so the checkers can order events across
//! processes. A line reads
//!
//! ```text
//! <ns> <actor> <op> <phase> key=value key=value ...
//! ```
//!
//! for example `81234567 w3 acquire ok lock=fenced depth=1 token=1732264000123456`. Values never
//! contain spaces ([`History::record`] replaces them). A worker killed mid-write leaves at most a
//! truncated last line, which [`read_history`] skips.
//!
//! # What each actor writes
//!
//! A worker `w<N>` (`w<N>.<T>` for loop T of a worker running several), where `depth` is the
//! hold count after an acquisition or before a release (1: the outer hold):
//!
//! | event | when |
//! | --- | --- |
//! | `acquire invoke lock=L depth=D` | an acquisition starts |
//! | `acquire ok lock=L depth=D token=T` | it succeeded (nested holds repeat the token) |
//! | `acquire fail lock=L depth=D err=E` | it certainly did not take the lock (`Busy`: the wait ran out) |
//! | `acquire info lock=L depth=D err=cancelled` | it was dropped part way |
//! | `release invoke`, `release ok`, `release fail ... err=E` | a release (`depth=1` ends the belief) |
//! | `lost info lock=L reason=R` | the outer hold's lost signal fired |
//! | `read invoke/ok/fail`, `write invoke/ok/fail` | fenced accesses: `token`, `value`, and on success the resource's `seq` (one order over every accepted access), on a stale rejection `highest` |
//! | `renew info lock=L round=T` | the watchdog is sending a renewal of L, in a round that started at T (before it chose its holds) |
//! | `stats info registered=R renewed=N` | after quiescing: the watchdog's registrations left |
//!
//! The nemesis writes `fault ok kind=K target=X` when a fault starts and `heal ok kind=K
//! target=X` when it ends: `kill-worker` and `stop-worker` (target `w<N>`), `kill-node`,
//! `stop-node`, `restart-node` and `flush-scripts` (target `n<I>`), and the proxy faults
//! `proxy-delay`, `proxy-hold`, `proxy-blackhole`, `proxy-reset` and `proxy-drop` (target
//! `w<N>:n<I>`, `*` for every worker or node). The test writes `spawn ok target=w<N> pid=P`,
//! `note info what=quiesce` when it heals everything and tells the workers to stop, then one
//! lease later `note info what=value lock=L value=V` with each lock's counter and `note info
//! what=final keys=K` with the lock keys left.

use std::collections::BTreeMap;
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{BufRead as _, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Mutex;

use nix::time::{clock_gettime, ClockId};

/// Nanoseconds on the machine's monotonic clock (`CLOCK_MONOTONIC`), the same in every process.
pub fn now_ns() -> u64 {
    let now = clock_gettime(ClockId::CLOCK_MONOTONIC).expect("CLOCK_MONOTONIC is always there");
    let secs = u64::try_from(now.tv_sec()).unwrap_or(0);
    let nanos = u64::try_from(now.tv_nsec()).unwrap_or(0);
    secs * 1_000_000_000 + nanos
}

/// What an event is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Op {
    /// Taking one hold of a lock (`depth` 1 is the outer hold).
    Acquire,
    /// Releasing one hold.
    Release,
    /// The watchdog sending a renewal of a lock (`key`).
    Renew,
    /// The lost signal of a hold firing (`reason`).
    Lost,
    /// A fenced read of the resource (`token`; on success `value` and `seq`).
    Read,
    /// A fenced write of the resource (`token`, `value`; on success `seq`).
    Write,
    /// A worker's watchdog counters once it went quiet (`registered`, `renewed`).
    Stats,
    /// The nemesis starting a fault (`kind`, `target`).
    Fault,
    /// The nemesis ending a fault (`kind`, `target`).
    Heal,
    /// A worker process started (`pid`).
    Spawn,
    /// A scenario milestone written by the test (`what`).
    Note,
}

/// Where an operation stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Phase {
    /// The operation was started.
    Invoke,
    /// It completed and took effect.
    Ok,
    /// It completed and certainly did not take effect.
    Fail,
    /// Its outcome is unknown, or the event is informational.
    Info,
}

macro_rules! names {
    ($ty:ty { $($variant:ident => $name:literal),* $(,)? }) => {
        impl $ty {
            /// The name written into the history.
            pub fn as_str(self) -> &'static str {
                match self { $(Self::$variant => $name),* }
            }
        }
        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
        impl FromStr for $ty {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                match s {
                    $($name => Ok(Self::$variant),)*
                    other => Err(format!("unknown {}: {other}", stringify!($ty))),
                }
            }
        }
    };
}

names!(Op {
    Acquire => "acquire",
    Release => "release",
    Renew => "renew",
    Lost => "lost",
    Read => "read",
    Write => "write",
    Stats => "stats",
    Fault => "fault",
    Heal => "heal",
    Spawn => "spawn",
    Note => "note",
});

names!(Phase {
    Invoke => "invoke",
    Ok => "ok",
    Fail => "fail",
    Info => "info",
});

/// One line of the history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// When, in [`now_ns`] nanoseconds.
    pub t: u64,
    /// Who: `w<N>` for worker N, `nemesis`, or `test`.
    pub actor: String,
    /// What.
    pub op: Op,
    /// How it stands.
    pub phase: Phase,
    /// The rest of the line's `key=value` pairs.
    pub fields: BTreeMap<String, String>,
}

impl Event {
    /// The field `key`, if present.
    pub fn field(&self, key: &str) -> Option<&str> {
        self.fields.get(key).map(String::as_str)
    }

    /// The field `key` as a number, if present and numeric.
    pub fn number(&self, key: &str) -> Option<u64> {
        self.field(key)?.parse().ok()
    }

    /// Whether this is `op` at `phase`.
    pub fn is(&self, op: Op, phase: Phase) -> bool {
        (self.op, self.phase) == (op, phase)
    }

    /// Whether the event is about a lock's outer hold (`depth=1`).
    pub fn is_outer(&self) -> bool {
        self.number("depth") == Some(1)
    }

    /// Parses one history line; `None` for a malformed (e.g. truncated) line.
    pub fn parse(line: &str) -> Option<Event> {
        let mut words = line.split_ascii_whitespace();
        let t = words.next()?.parse().ok()?;
        let actor = words.next()?.to_owned();
        let op = words.next()?.parse().ok()?;
        let phase = words.next()?.parse().ok()?;
        let mut fields = BTreeMap::new();
        for word in words {
            let (key, value) = word.split_once('=')?;
            fields.insert(key.to_owned(), value.to_owned());
        }
        Some(Event {
            t,
            actor,
            op,
            phase,
            fields,
        })
    }
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} {} {}", self.t, self.actor, self.op, self.phase)?;
        for (key, value) in &self.fields {
            write!(f, " {key}={value}")?;
        }
        Ok(())
    }
}

/// An append-only history file shared by several processes.
#[derive(Debug)]
pub struct History {
    path: PathBuf,
    file: Mutex<File>,
}

impl History {
    /// Opens (creating if needed) the history at `path` for appending.
    ///
    /// # Errors
    ///
    /// The file cannot be opened.
    pub fn open(path: impl AsRef<Path>) -> std::io::Result<History> {
        let path = path.as_ref().to_path_buf();
        let file = OpenOptions::new().create(true).append(true).open(&path)?;
        Ok(History {
            path,
            file: Mutex::new(file),
        })
    }

    /// Where the history is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one event stamped now, and returns its time. Spaces in values become `_`. A
    /// failed write panics: a history with holes would make the checkers lie.
    pub fn record(
        &self,
        actor: &str,
        op: Op,
        phase: Phase,
        fields: &[(&str, &dyn fmt::Display)],
    ) -> u64 {
        let mut line = String::with_capacity(96);
        let mut file = self
            .file
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // Stamped under the lock, so one process's lines are in time order in the file.
        let t = now_ns();
        line.push_str(&format!("{t} {actor} {op} {phase}"));
        for (key, value) in fields {
            let value = value.to_string().replace(char::is_whitespace, "_");
            line.push_str(&format!(" {key}={value}"));
        }
        line.push('\n');
        file.write_all(line.as_bytes())
            .unwrap_or_else(|err| panic!("cannot append to {}: {err}", self.path.display()));
        t
    }
}

/// Reads a history: every well-formed line, sorted by time (stable, so one process's events
/// keep their order).
///
/// # Errors
///
/// The file cannot be read.
pub fn read_history(path: impl AsRef<Path>) -> std::io::Result<Vec<Event>> {
    let reader = BufReader::new(File::open(path)?);
    let mut events = Vec::new();
    for line in reader.lines() {
        if let Some(event) = Event::parse(&line?) {
            events.push(event);
        }
    }
    events.sort_by_key(|event| event.t);
    Ok(events)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recorded_event_reads_back() {
        let dir = tempfile::tempdir().expect("temp dir");
        let history = History::open(dir.path().join("history")).expect("open");
        let t = history.record(
            "w1",
            Op::Acquire,
            Phase::Ok,
            &[("lock", &"fenced"), ("token", &42), ("err", &"two words")],
        );
        let events = read_history(history.path()).expect("read");
        assert_eq!(events.len(), 1);
        let event = &events[0];
        assert_eq!((event.t, event.actor.as_str()), (t, "w1"));
        assert_eq!((event.op, event.phase), (Op::Acquire, Phase::Ok));
        assert_eq!(event.number("token"), Some(42));
        assert_eq!(event.field("err"), Some("two_words"));
    }

    #[test]
    fn a_truncated_line_is_skipped() {
        assert_eq!(Event::parse("123 w1 acquire"), None);
        assert_eq!(Event::parse("123 w1 acquire ok lock"), None);
        assert!(Event::parse("123 w1 acquire ok lock=a").is_some());
    }

    #[test]
    fn the_clock_never_goes_back() {
        let first = now_ns();
        assert!(now_ns() >= first);
    }
}
