//! What Linux's `/proc` tells about processes: the members of a process group, and the
//! signals this process was started with ignored.
//!
//! Linux-first, like the job's parent-death signal: elsewhere, groups look empty and no signal
//! looks ignored.

use nix::sys::signal::Signal;

/// Processes of process group `group` that are alive (not zombies), `except` one pid.
pub(crate) fn live_members(group: i32, except: Option<i32>) -> usize {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| Some(*pid) != except)
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|stat| stat_state_and_group(&stat))
                .is_some_and(|(state, pgrp)| pgrp == group && !matches!(state, 'Z' | 'X'))
        })
        .count()
}

/// The state letter and process group of a `/proc/PID/stat` line. The command name, in
/// parentheses, may itself hold spaces and parentheses: the fields are read after the last `)`.
fn stat_state_and_group(stat: &str) -> Option<(char, i32)> {
    let (_, rest) = stat.rsplit_once(')')?;
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let _parent = fields.next()?;
    let group = fields.next()?.parse().ok()?;
    Some((state, group))
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
        assert_eq!(stat_state_and_group(stat), Some(('S', 4240)));
        assert_eq!(stat_state_and_group("garbage"), None);
    }

    #[test]
    fn this_process_is_a_live_member_of_its_group() {
        let me = std::process::id() as i32;
        let group = nix::unistd::getpgrp().as_raw();
        assert!(live_members(group, None) >= 1);
        assert_eq!(live_members(group, Some(me)) + 1, live_members(group, None));
    }
}
