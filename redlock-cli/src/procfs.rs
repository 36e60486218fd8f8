//! What Linux's `/proc` tells about this process: the signals it was started with ignored,
//! and its children. Elsewhere, no signal looks ignored and there are no children to see.

use nix::sys::signal::Signal;
use nix::unistd::{getpid, Pid};

/// This process's children, each with its process group. For the rare case where they must be
/// found without having started them (orphans handed to a subreaper).
pub(crate) fn children() -> Vec<(Pid, Pid)> {
    let me = getpid().as_raw();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let (parent, group) = parent_and_group(&stat)?;
            (parent == me).then(|| (Pid::from_raw(pid), Pid::from_raw(group)))
        })
        .collect()
}

/// The parent and process group of a `/proc/PID/stat` line. The command name, in parentheses,
/// may itself hold spaces and parentheses: the fields are read after the last `)`.
fn parent_and_group(stat: &str) -> Option<(i32, i32)> {
    let (_, rest) = stat.rsplit_once(')')?;
    let mut fields = rest.split_whitespace().skip(1);
    let parent = fields.next()?.parse().ok()?;
    let group = fields.next()?.parse().ok()?;
    Some((parent, group))
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
        let stat = "4242 (a (weird) name) S 1 4240 4240 0 -1";
        assert_eq!(parent_and_group(stat), Some((1, 4240)));
        assert_eq!(parent_and_group("garbage"), None);
    }

    #[test]
    fn a_child_is_found_with_its_group() {
        let mut child = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .expect("sleep");
        let pid = Pid::from_raw(child.id() as i32);
        let found = children().into_iter().find(|(child, _)| *child == pid);
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(found, Some((pid, nix::unistd::getpgrp())));
    }

    #[test]
    fn signals_ignored_at_start_are_read_from_the_status() {
        // The test harness runs with SIGKILL's default action, which cannot be ignored.
        assert!(!ignored(Signal::SIGKILL));
    }
}
