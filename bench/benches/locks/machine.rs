//! What the numbers were measured on: cores, CPU model, redis-server, rustc, the commit.

use std::process::Command;

#[derive(Debug, Clone)]
pub(crate) struct Machine {
    pub(crate) cores: usize,
    pub(crate) cpu: String,
    pub(crate) os: String,
    pub(crate) redis: String,
    pub(crate) rustc: String,
    pub(crate) commit: String,
}

impl Machine {
    pub(crate) fn describe() -> Self {
        let cpu = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|info| {
                info.lines()
                    .find_map(|line| line.strip_prefix("model name"))
                    .map(|rest| rest.trim_start_matches([' ', '\t', ':']).to_owned())
            })
            .unwrap_or_else(|| "unknown".to_owned());
        let redis = std::env::var("REDIS_SERVER_BIN").unwrap_or_else(|_| "redis-server".into());
        let dirty = Command::new("git")
            .args(["status", "--porcelain"])
            .current_dir(crate::paths::workspace())
            .output()
            .is_ok_and(|out| !out.stdout.is_empty());
        let commit = output("git", &["rev-parse", "--short", "HEAD"]);
        Self {
            cores: std::thread::available_parallelism().map_or(0, usize::from),
            cpu,
            os: output("uname", &["-sr"]),
            redis: output(&redis, &["--version"]),
            rustc: output("rustc", &["--version"]),
            commit: if dirty {
                format!("{commit} (with uncommitted changes)")
            } else {
                commit
            },
        }
    }
}

/// A command's first line of output, or "unknown".
fn output(program: &str, args: &[&str]) -> String {
    Command::new(program)
        .args(args)
        .current_dir(crate::paths::workspace())
        .output()
        .ok()
        .filter(|out| out.status.success())
        .and_then(|out| {
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .next()
                .map(str::to_owned)
        })
        .unwrap_or_else(|| "unknown".to_owned())
}
