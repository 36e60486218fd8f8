//! What Linux's `/proc` tells about this process: the signals it was started with ignored.
//! Elsewhere, no signal looks ignored.

use nix::sys::signal::Signal;

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
    fn signals_ignored_at_start_are_read_from_the_status() {
        // The test harness runs with SIGKILL's default action, which cannot be ignored.
        assert!(!ignored(Signal::SIGKILL));
    }
}
