//! The seeded nemesis: random faults over a [`FaultRun`], each recorded in its history.
//!
//! Faults overlap: a paused worker, a dead master and a partitioned proxy can all be active
//! at once. At most half the workers are stopped at a time, and at most `max_nodes_faulted`
//! masters are faulted (killed, stopped, or cut off from every worker), so a majority stays
//! reachable unless a scenario asks otherwise. A
//! killed master comes back empty only after `kill_node` lasted at least one lease (the delayed
//! restart of `docs/safety.md`); a killed worker is replaced by a new one.

use std::time::Duration;

use tokio::time::Instant;

use crate::fault_run::FaultRun;
use crate::Fault;

/// A kind of fault the nemesis may choose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// SIGKILL a worker (and start a replacement).
    KillWorker,
    /// SIGSTOP a worker for less than the pause bound.
    PauseWorker,
    /// SIGSTOP a worker for 1.5 to 5 leases.
    FreezeWorker,
    /// SIGKILL a master, restarted empty after one to two leases.
    KillNode,
    /// SIGSTOP a master.
    StopNode,
    /// `SCRIPT FLUSH` on a master.
    FlushScripts,
    /// A proxy fault between one worker and one master, or every worker and one master.
    Proxy,
}

impl FaultKind {
    /// Every kind.
    pub const ALL: [FaultKind; 7] = [
        FaultKind::KillWorker,
        FaultKind::PauseWorker,
        FaultKind::FreezeWorker,
        FaultKind::KillNode,
        FaultKind::StopNode,
        FaultKind::FlushScripts,
        FaultKind::Proxy,
    ];
}

/// A fault that lasts until healed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Active {
    StoppedWorker(usize),
    KilledNode(usize),
    StoppedNode(usize),
    Proxy(Option<usize>, usize),
}

impl Active {
    /// The master it takes away from every worker, if any.
    fn node(self) -> Option<usize> {
        match self {
            Active::KilledNode(n) | Active::StoppedNode(n) | Active::Proxy(None, n) => Some(n),
            Active::StoppedWorker(_) | Active::Proxy(Some(_), _) => None,
        }
    }
}

/// The nemesis' settings.
#[derive(Debug, Clone)]
pub struct Nemesis {
    /// The kinds it chooses from, uniformly.
    pub kinds: Vec<FaultKind>,
    /// Masters faulted at once, at most.
    pub max_nodes_faulted: usize,
    /// The pause between two new faults, drawn from this range.
    pub gap: (Duration, Duration),
    /// How long a fault (other than freezes and node kills) lasts, drawn from this range.
    pub duration: (Duration, Duration),
}

impl Nemesis {
    /// Every kind, two masters at most, a new fault every 100-600 ms lasting 100-1500 ms.
    pub fn new(kinds: &[FaultKind]) -> Nemesis {
        Nemesis {
            kinds: kinds.to_vec(),
            max_nodes_faulted: 2,
            gap: (Duration::from_millis(100), Duration::from_millis(600)),
            duration: (Duration::from_millis(100), Duration::from_millis(1500)),
        }
    }

    /// Injects faults for `how_long`, then heals what it started. Returns the faults started.
    pub async fn run(&self, run: &mut FaultRun, how_long: Duration) -> usize {
        let deadline = Instant::now() + how_long;
        let mut active: Vec<(Active, Instant)> = Vec::new();
        let mut started = 0;
        while Instant::now() < deadline {
            let now = Instant::now();
            let (done, left): (Vec<_>, Vec<_>) =
                active.into_iter().partition(|(_, end)| *end <= now);
            active = left;
            for (fault, _) in done {
                heal(run, fault);
            }
            if self.start_one(run, &mut active).await {
                started += 1;
            }
            let gap = pick(run.rng(), self.gap);
            tokio::time::sleep(gap.min(deadline.saturating_duration_since(Instant::now()))).await;
        }
        for (fault, _) in active {
            heal(run, fault);
        }
        started
    }

    /// Starts one fault if the chosen kind has a target; returns whether it did.
    async fn start_one(&self, run: &mut FaultRun, active: &mut Vec<(Active, Instant)>) -> bool {
        if self.kinds.is_empty() {
            return false;
        }
        let kind = self.kinds[run.rng().usize(..self.kinds.len())];
        let lease = run.lease();
        let lasting = pick(run.rng(), self.duration);
        let nodes = run.cluster.len();
        let faulted: Vec<usize> = active
            .iter()
            .filter_map(|(fault, _)| fault.node())
            .collect();
        let free_node = |run: &mut FaultRun| -> Option<usize> {
            if faulted.len() >= self.max_nodes_faulted {
                return None;
            }
            let candidates: Vec<usize> = (0..nodes).filter(|n| !faulted.contains(n)).collect();
            (!candidates.is_empty()).then(|| candidates[run.rng().usize(..candidates.len())])
        };
        let running = run.running_workers();
        let frozen = active
            .iter()
            .filter(|(fault, _)| matches!(fault, Active::StoppedWorker(_)))
            .count();
        let some_worker = |run: &mut FaultRun| -> Option<usize> {
            // Keep most workers running, so the locks keep changing hands.
            (running.len() > frozen.max(1)).then(|| running[run.rng().usize(..running.len())])
        };
        let now = Instant::now();
        match kind {
            FaultKind::KillWorker => {
                let Some(w) = some_worker(run) else {
                    return false;
                };
                run.kill_worker(w);
                run.spawn_worker(|_| {}).await;
            }
            FaultKind::PauseWorker | FaultKind::FreezeWorker => {
                let Some(w) = some_worker(run) else {
                    return false;
                };
                let pause = if kind == FaultKind::PauseWorker {
                    let bound = run.pause_bound();
                    pick(run.rng(), (Duration::ZERO, bound / 2))
                } else {
                    lease.mul_f64(run.rng().f64().mul_add(3.5, 1.5))
                };
                run.stop_worker(w);
                active.push((Active::StoppedWorker(w), now + pause));
            }
            FaultKind::KillNode => {
                let Some(n) = free_node(run) else {
                    return false;
                };
                run.kill_node(n);
                let down = lease.mul_f64(1.0 + run.rng().f64());
                active.push((Active::KilledNode(n), now + down));
            }
            FaultKind::StopNode => {
                let Some(n) = free_node(run) else {
                    return false;
                };
                run.stop_node(n);
                active.push((Active::StoppedNode(n), now + lasting));
            }
            FaultKind::FlushScripts => {
                let n = run.rng().usize(..nodes);
                if run.cluster.node(n).is_running() && !run.cluster.node(n).is_stopped() {
                    run.flush_scripts(n);
                } else {
                    return false;
                }
            }
            FaultKind::Proxy => {
                let fault = match run.rng().usize(..5) {
                    0 => Fault::Delay(pick(
                        run.rng(),
                        (Duration::from_millis(1), Duration::from_millis(50)),
                    )),
                    1 => Fault::HoldReplies,
                    2 => Fault::Blackhole,
                    3 => Fault::Reset,
                    _ => Fault::DropReplies,
                };
                let whole_node = run.rng().bool();
                let target = if whole_node {
                    free_node(run).map(|n| (None, n))
                } else {
                    let workers = run.worker_count();
                    let w = run.rng().usize(..workers);
                    Some((Some(w), run.rng().usize(..nodes)))
                };
                let Some((w, n)) = target else {
                    return false;
                };
                let overlapping = active.iter().any(|(fault, _)| {
                    matches!(fault, Active::Proxy(other, node)
                        if *node == n && (other.is_none() || w.is_none() || *other == w))
                });
                if overlapping {
                    return false;
                }
                run.proxy(w, Some(n), fault);
                active.push((Active::Proxy(w, n), now + lasting));
            }
        }
        true
    }
}

fn heal(run: &mut FaultRun, fault: Active) {
    match fault {
        Active::StoppedWorker(w) => run.resume_worker(w),
        Active::KilledNode(n) => run.restart_node(n),
        Active::StoppedNode(n) => run.resume_node(n),
        Active::Proxy(w, n) => run.proxy(w, Some(n), Fault::Pass),
    }
}

fn pick(rng: &mut fastrand::Rng, (low, high): (Duration, Duration)) -> Duration {
    if high <= low {
        return low;
    }
    low + (high - low).mul_f64(rng.f64())
}
