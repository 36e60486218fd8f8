//! What a fault-suite worker process (`tests/src/bin/fault_worker`) does: its command line, written
//! by the suite ([`WorkerSpec::to_args`]) and read back by the worker ([`WorkerSpec::parse`]).

use std::path::PathBuf;
use std::time::Duration;

/// What each of a worker's loops locks and does under the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkerMode {
    /// The lock `fenced`; under it a fenced read, the work, a fenced write of the value + 1.
    Fenced,
    /// A new lock name every cycle, no resource.
    Cycles,
}

/// One of the lock's deliberately broken behaviours (the `sabotage` feature), for the suite's
/// negative controls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sabotage {
    /// One node's vote is a majority.
    QuorumOfOne,
    /// A majority counts however late it came: no validity check.
    SkipValidity,
    /// A release deletes the lock whoever holds it.
    ReleaseWithoutCompare,
    /// Released holds stay in the watchdog, which keeps renewing them.
    KeepRenewingReleased,
}

impl Sabotage {
    /// Every broken twin.
    pub const ALL: [Sabotage; 4] = [
        Sabotage::QuorumOfOne,
        Sabotage::SkipValidity,
        Sabotage::ReleaseWithoutCompare,
        Sabotage::KeepRenewingReleased,
    ];

    /// Its command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Sabotage::QuorumOfOne => "quorum-of-one",
            Sabotage::SkipValidity => "skip-validity",
            Sabotage::ReleaseWithoutCompare => "release-without-compare",
            Sabotage::KeepRenewingReleased => "keep-renewing-released",
        }
    }

    fn from_name(name: &str) -> Option<Sabotage> {
        Sabotage::ALL.into_iter().find(|s| s.name() == name)
    }
}

/// A worker's whole configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerSpec {
    /// The worker's number: its history actor is `w<id>`.
    pub id: u32,
    /// The shared history file.
    pub history: PathBuf,
    /// The masters, as this worker reaches them (its proxies).
    pub nodes: Vec<String>,
    /// The fenced resource (required by [`WorkerMode::Fenced`]).
    pub resource: Option<String>,
    /// What its loops do.
    pub mode: WorkerMode,
    /// The watchdog timeout (the lease, renewed every third of it).
    pub lease: Duration,
    /// A fixed lease instead of the watchdog.
    pub fixed_lease: Option<Duration>,
    /// The per-node request timeout, if not the library's default.
    pub node_timeout: Option<Duration>,
    /// Retries per acquisition attempt, if not the library's default.
    pub retries: Option<u32>,
    /// How long an acquisition may wait for the lock.
    pub wait: Duration,
    /// The work under the lock, drawn uniformly from this range.
    pub hold: (Duration, Duration),
    /// One cycle in `N` holds for a duration drawn from this range instead of [`hold`](Self::hold)
    /// (`N` 0: never): cycles that outlast a renewal among many that do not.
    pub long_hold: (u32, (Duration, Duration)),
    /// The pause between cycles, drawn uniformly from this range.
    pub think: (Duration, Duration),
    /// Reentrant depth: each cycle takes 1 to this many holds.
    pub max_depth: u32,
    /// Concurrent loops (each its own task, so its own owner).
    pub tasks: u32,
    /// How many fenced locks (each with its own counter) the loops choose from at random.
    pub locks: u32,
    /// Drop each acquisition after a random delay up to this long.
    pub cancel_within: Option<Duration>,
    /// A broken twin of the lock.
    pub sabotage: Option<Sabotage>,
    /// Seeds the worker's random choices.
    pub seed: u64,
    /// The lock keys' prefix.
    pub key_prefix: String,
}

impl WorkerSpec {
    /// A fenced-mode worker with a 3 s lease, depth up to 3 and short holds.
    pub fn new(id: u32, history: impl Into<PathBuf>, nodes: Vec<String>) -> WorkerSpec {
        let lease = Duration::from_secs(3);
        WorkerSpec {
            id,
            history: history.into(),
            nodes,
            resource: None,
            mode: WorkerMode::Fenced,
            lease,
            fixed_lease: None,
            node_timeout: None,
            retries: None,
            wait: lease * 2,
            hold: (Duration::from_millis(1), Duration::from_millis(30)),
            long_hold: (0, (Duration::ZERO, Duration::ZERO)),
            think: (Duration::ZERO, Duration::from_millis(10)),
            max_depth: 3,
            tasks: 1,
            locks: 1,
            cancel_within: None,
            sabotage: None,
            seed: u64::from(id),
            key_prefix: "redlock:".to_owned(),
        }
    }

    /// The fenced locks' names: `fenced`, or `fenced-0` ... when there are several.
    pub fn lock_names(&self) -> Vec<String> {
        if self.locks == 1 {
            return vec!["fenced".to_owned()];
        }
        (0..self.locks).map(|i| format!("fenced-{i}")).collect()
    }

    /// The worker's command line.
    pub fn to_args(&self) -> Vec<String> {
        let ms = |d: Duration| d.as_millis().to_string();
        let range = |(low, high): (Duration, Duration)| format!("{}-{}", ms(low), ms(high));
        let mut args = vec![
            ("--id", self.id.to_string()),
            ("--history", self.history.display().to_string()),
            ("--nodes", self.nodes.join(",")),
            (
                "--mode",
                match self.mode {
                    WorkerMode::Fenced => "fenced",
                    WorkerMode::Cycles => "cycles",
                }
                .to_owned(),
            ),
            ("--lease-ms", ms(self.lease)),
            ("--wait-ms", ms(self.wait)),
            ("--hold-ms", range(self.hold)),
            (
                "--long-hold",
                format!("{}:{}", self.long_hold.0, range(self.long_hold.1)),
            ),
            ("--think-ms", range(self.think)),
            ("--max-depth", self.max_depth.to_string()),
            ("--tasks", self.tasks.to_string()),
            ("--locks", self.locks.to_string()),
            ("--seed", self.seed.to_string()),
            ("--key-prefix", self.key_prefix.clone()),
        ];
        let optional = [
            ("--resource", self.resource.clone()),
            ("--fixed-lease-ms", self.fixed_lease.map(ms)),
            ("--node-timeout-ms", self.node_timeout.map(ms)),
            ("--retries", self.retries.map(|r| r.to_string())),
            ("--cancel-within-ms", self.cancel_within.map(ms)),
            ("--sabotage", self.sabotage.map(|s| s.name().to_owned())),
        ];
        args.extend(
            optional
                .into_iter()
                .filter_map(|(flag, value)| value.map(|value| (flag, value))),
        );
        args.into_iter()
            .flat_map(|(flag, value)| [flag.to_owned(), value])
            .collect()
    }

    /// Reads a command line written by [`to_args`](Self::to_args).
    ///
    /// # Errors
    ///
    /// A flag is unknown, missing its value, or malformed; or `--id`, `--history` or `--nodes`
    /// is missing.
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<WorkerSpec, String> {
        let mut spec = WorkerSpec::new(0, PathBuf::new(), Vec::new());
        let mut seen_id = false;
        let mut args = args.into_iter();
        while let Some(flag) = args.next() {
            let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
            let bad = |what: &str| format!("{flag}: {what}: {value:?}");
            let number = |v: &str| v.parse::<u64>().map_err(|_| bad("not a number"));
            let ms = |v: &str| number(v).map(Duration::from_millis);
            let range = |v: &str| -> Result<(Duration, Duration), String> {
                let (low, high) = v.split_once('-').ok_or_else(|| bad("not LOW-HIGH"))?;
                Ok((ms(low)?, ms(high)?))
            };
            let small = |v: &str| u32::try_from(number(v)?).map_err(|_| bad("too large"));
            match flag.as_str() {
                "--id" => {
                    spec.id = small(&value)?;
                    seen_id = true;
                }
                "--history" => spec.history = PathBuf::from(&value),
                "--nodes" => spec.nodes = value.split(',').map(str::to_owned).collect(),
                "--resource" => spec.resource = Some(value.clone()),
                "--mode" => {
                    spec.mode = match value.as_str() {
                        "fenced" => WorkerMode::Fenced,
                        "cycles" => WorkerMode::Cycles,
                        _ => return Err(bad("not fenced or cycles")),
                    }
                }
                "--lease-ms" => spec.lease = ms(&value)?,
                "--fixed-lease-ms" => spec.fixed_lease = Some(ms(&value)?),
                "--node-timeout-ms" => spec.node_timeout = Some(ms(&value)?),
                "--retries" => spec.retries = Some(small(&value)?),
                "--wait-ms" => spec.wait = ms(&value)?,
                "--hold-ms" => spec.hold = range(&value)?,
                "--long-hold" => {
                    let (one_in, hold) =
                        value.split_once(':').ok_or_else(|| bad("not N:LOW-HIGH"))?;
                    spec.long_hold = (small(one_in)?, range(hold)?);
                }
                "--think-ms" => spec.think = range(&value)?,
                "--max-depth" => spec.max_depth = small(&value)?.max(1),
                "--tasks" => spec.tasks = small(&value)?.max(1),
                "--locks" => spec.locks = small(&value)?.max(1),
                "--cancel-within-ms" => spec.cancel_within = Some(ms(&value)?),
                "--sabotage" => {
                    spec.sabotage =
                        Some(Sabotage::from_name(&value).ok_or_else(|| bad("unknown sabotage"))?);
                }
                "--seed" => spec.seed = number(&value)?,
                "--key-prefix" => spec.key_prefix = value.clone(),
                _ => return Err(format!("unknown flag {flag}")),
            }
        }
        if !seen_id || spec.history.as_os_str().is_empty() || spec.nodes.is_empty() {
            return Err("--id, --history and --nodes are required".to_owned());
        }
        if spec.mode == WorkerMode::Fenced && spec.resource.is_none() {
            return Err("--mode fenced needs --resource".to_owned());
        }
        Ok(spec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_survives_its_command_line() {
        let mut spec = WorkerSpec::new(
            7,
            "/tmp/history",
            vec!["redis://a".into(), "redis://b".into()],
        );
        spec.resource = Some("redis://r".into());
        spec.fixed_lease = Some(Duration::from_millis(250));
        spec.cancel_within = Some(Duration::from_millis(40));
        spec.sabotage = Some(Sabotage::SkipValidity);
        spec.hold = (Duration::from_millis(5), Duration::from_millis(9));
        spec.long_hold = (10, (Duration::from_millis(110), Duration::from_millis(160)));
        spec.locks = 4;
        assert_eq!(WorkerSpec::parse(spec.to_args()), Ok(spec));
    }

    #[test]
    fn bad_command_lines_are_refused() {
        let args = |line: &str| line.split(' ').map(str::to_owned).collect::<Vec<_>>();
        assert!(WorkerSpec::parse(args("--id 1 --history h")).is_err());
        assert!(WorkerSpec::parse(args(
            "--id 1 --history h --nodes n --mode cycles --lease-ms x"
        ))
        .is_err());
        assert!(WorkerSpec::parse(args("--id 1 --history h --nodes n --bogus 1")).is_err());
        assert!(WorkerSpec::parse(args("--id 1 --history h --nodes n --mode fenced")).is_err());
        assert!(WorkerSpec::parse(args("--id 1 --history h --nodes n --mode cycles")).is_ok());
    }
}
