//! What Linux's `/proc` tells about this process: the signals it was started with ignored,
//! and its descendants. Elsewhere, no signal looks ignored and no descendant is seen.

use std::collections::{HashMap, HashSet};

use nix::sys::signal::Signal;
use nix::unistd::{getpid, Pid};

/// A descendant of this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Descendant {
    pub(crate) pid: Pid,
    pub(crate) group: Pid,
    pub(crate) session: Pid,
}

/// The descendants of this process, zombies included (a process whose main thread exited
/// shows as one while its other threads run; signalling a zombie is harmless). A snapshot: a
/// process forked while it is taken may be missing.
pub(crate) fn descendants() -> Vec<Descendant> {
    let me = getpid().as_raw();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut children: HashMap<i32, Vec<(i32, Stat)>> = HashMap::new();
    for pid in entries
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
    {
        let Some(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|stat| parse_stat(&stat))
        else {
            continue;
        };
        children.entry(stat.parent).or_default().push((pid, stat));
    }
    let mut seen = HashSet::from([me]);
    let mut found = vec![me];
    let mut descendants = Vec::new();
    while let Some(parent) = found.pop() {
        for (pid, stat) in children.get(&parent).into_iter().flatten() {
            // A pid reused during the scan could make a cycle: each is walked once.
            if seen.insert(*pid) {
                found.push(*pid);
                descendants.push(Descendant {
                    pid: Pid::from_raw(*pid),
                    group: Pid::from_raw(stat.group),
                    session: Pid::from_raw(stat.session),
                });
            }
        }
    }
    descendants
}

/// What `descendants` reads of a process.
#[derive(Debug, PartialEq, Eq)]
struct Stat {
    parent: i32,
    group: i32,
    session: i32,
}

/// The parent, process group and session of a `/proc/PID/stat` line. The command name, in
/// parentheses, may itself hold spaces and parentheses: the fields are read after the last `)`.
fn parse_stat(stat: &str) -> Option<Stat> {
    let (_, rest) = stat.rsplit_once(')')?;
    let mut fields = rest.split_whitespace().skip(1);
    let parent = fields.next()?.parse().ok()?;
    let group = fields.next()?.parse().ok()?;
    let session = fields.next()?.parse().ok()?;
    Some(Stat {
        parent,
        group,
        session,
    })
}

/// Whether `signal` was ignored when this process started (`nohup` ignores SIGHUP; a shell
/// running a command in the background ignores SIGINT and SIGQUIT for it). Such a signal is
/// neither caught nor passed on, so the job ignores it too, as it would under flock(1).
pub(crate) fn ignored(signal: Signal) -> bool {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return false;
    };
    status
        .lines()
        .find_map(|line| line.strip_prefix("SigIgn:"))
        .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        .is_some_and(|mask| mask & (1 << (signal as i32 - 1)) != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_are_read_after_the_command_name() {
        let stat = "4242 (a (weird) name) S 1 4240 4239 0 -1";
        let read = parse_stat(stat);
        assert_eq!(
            read,
            Some(Stat {
                parent: 1,
                group: 4240,
                session: 4239,
            })
        );
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn a_grandchild_is_a_descendant_with_its_group() {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 60 & echo $!; wait"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("sh");
        let mut line = String::new();
        let stdout = child.stdout.take().expect("stdout");
        std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut line)
            .expect("the grandchild's pid");
        let grandchild = Pid::from_raw(line.trim().parse().expect("pid"));
        let found = descendants();
        let _ = nix::sys::signal::kill(grandchild, nix::sys::signal::Signal::SIGKILL);
        let _ = child.wait();
        let expected = Descendant {
            pid: grandchild,
            group: nix::unistd::getpgrp(),
            session: nix::unistd::getsid(None).expect("session"),
        };
        assert!(found.contains(&expected), "{found:?}");
    }
}
