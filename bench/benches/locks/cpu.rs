//! CPU time and memory: this process's (getrusage, `/proc/self/status`) and the redis-servers'
//! (`INFO cpu`), to tell where the time of a workload goes.

use std::time::Duration;

use redlock_testkit::RedisCluster;

/// This process's CPU time so far (user + system).
pub(crate) fn process_cpu() -> Result<Duration, String> {
    usage(nix::sys::resource::UsageWho::RUSAGE_SELF)
}

/// This process's context switches so far, voluntary (a thread waited) and involuntary.
pub(crate) fn context_switches() -> Result<u64, String> {
    let usage = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_SELF)
        .map_err(|e| e.to_string())?;
    let count = usage.voluntary_context_switches() + usage.involuntary_context_switches();
    Ok(u64::try_from(count).unwrap_or(0))
}

fn usage(who: nix::sys::resource::UsageWho) -> Result<Duration, String> {
    let usage = nix::sys::resource::getrusage(who).map_err(|e| e.to_string())?;
    let to_duration = |t: nix::sys::time::TimeVal| {
        Duration::from_secs(u64::try_from(t.tv_sec()).unwrap_or(0))
            + Duration::from_micros(u64::try_from(t.tv_usec()).unwrap_or(0))
    };
    Ok(to_duration(usage.user_time()) + to_duration(usage.system_time()))
}

/// This process's resident memory.
pub(crate) fn rss_bytes() -> Result<u64, String> {
    let status = std::fs::read_to_string("/proc/self/status").map_err(|e| e.to_string())?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| {
            rest.trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<u64>()
                .ok()
        })
        .map(|kib| kib * 1024)
        .ok_or_else(|| "no VmRSS in /proc/self/status".to_owned())
}

/// The CPU time (user + system) the first `nodes` servers used so far, summed.
pub(crate) fn servers_cpu(cluster: &RedisCluster, nodes: usize) -> Result<Duration, String> {
    let mut seconds = 0.0;
    for node in &cluster.nodes()[..nodes] {
        let info: String = redis::cmd("INFO")
            .arg("cpu")
            .query(&mut node.try_connection().map_err(|e| e.to_string())?)
            .map_err(|e| format!("INFO cpu: {e}"))?;
        for line in info.lines() {
            let line = line.trim();
            if let Some(value) = line
                .strip_prefix("used_cpu_user:")
                .or_else(|| line.strip_prefix("used_cpu_sys:"))
            {
                seconds += value.parse::<f64>().map_err(|e| e.to_string())?;
            }
        }
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// The calling thread's CPU time so far (user + system).
pub(crate) fn thread_cpu() -> Result<Duration, String> {
    usage(nix::sys::resource::UsageWho::RUSAGE_THREAD)
}
