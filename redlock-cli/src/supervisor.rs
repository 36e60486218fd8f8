//! The job's supervisor: a process between redlock and the command (`redlock __exec PARENT --
//! COMMAND...`), in a process group of its own.
//!
//! redlock starts itself again for this. The supervisor:
//!
//! - starts the command as its child, leading a new process group;
//! - passes on to the job the signals redlock sends it (each followed by SIGCONT, so that a
//!   stopped job acts on it), and stops or continues the job when redlock asks ([`STOP_JOB`],
//!   [`CONTINUE_JOB`]). The job is the command and its descendants in the session: a signal
//!   goes to the command's group, to any group a process of the job made (`timeout(1)` inside
//!   a script makes one), and to each other such descendant, so that each process gets it
//!   once (a job may take a second SIGINT or SIGTERM as "stop now");
//! - asks the kernel for a signal when redlock dies (Linux `PR_SET_PDEATHSIG`), and checks
//!   every second besides; when redlock is gone, it SIGKILLs the job. That reaches setuid
//!   programs that keep the caller as their real user, which a parent-death signal set on the
//!   program itself would not (the kernel drops it at such an exec);
//! - is the subreaper of the command's descendants (`PR_SET_CHILD_SUBREAPER`), and collects
//!   them;
//! - exits, with the command's code (128 + N if a signal killed it), only once no process of
//!   the job is left (`job_left`: a descendant still in the session): the lock is held as long
//!   as any process of the job runs, as flock(1)'s lock is while any process holds its file
//!   open. A process that makes a session of its own (a daemon) leaves the job.
//!
//! If the supervisor itself dies, its orphans are handed to redlock (a subreaper too), which
//! kills and collects them before it lets the lock go (`Job::wait`).
//!
//! A separate process rather than code between `fork` and `exec` keeps the crate free of
//! `unsafe`.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{kill, killpg, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::{getppid, getsid, Pid};

use crate::exit;
use crate::procfs;
use crate::report::say;
use crate::signals::{block_terminal_stops, Caught, FORWARDED};

/// The supervisor's argument: `redlock __exec PARENT_PID -- COMMAND [ARGS...]`.
pub(crate) const SUPERVISOR: &str = "__exec";
/// redlock asks the supervisor to stop the job (SIGSTOP to it) with this signal.
pub(crate) const STOP_JOB: Signal = Signal::SIGTSTP;
/// redlock asks the supervisor to continue the job (SIGCONT to it) with this signal.
pub(crate) const CONTINUE_JOB: Signal = Signal::SIGCONT;

/// How often the supervisor looks whether redlock is still there, besides the signal.
const PARENT_CHECK: Duration = Duration::from_secs(1);
/// How often it looks whether the processes the command left behind are done.
const LINGER_CHECK: Duration = Duration::from_millis(100);

/// Runs the supervisor; the exit code to end with.
pub(crate) fn supervise(args: &[OsString]) -> u8 {
    let (parent, command) = match args {
        [parent, separator, command @ ..] if separator == "--" && !command.is_empty() => (
            parent.to_str().and_then(|pid| pid.parse::<i32>().ok()),
            command,
        ),
        _ => {
            say(format_args!(
                "{SUPERVISOR} is redlock's own; use `redlock run`"
            ));
            return exit::USAGE;
        }
    };
    let Some(parent) = parent else {
        say("the job's supervisor was given no parent");
        return exit::USAGE;
    };
    block_terminal_stops();
    // The parent-death signal is one the supervisor catches (and so survives).
    let death_signal = FORWARDED
        .into_iter()
        .find(|signal| !procfs::ignored(*signal));
    #[cfg(target_os = "linux")]
    {
        if let Err(err) = nix::sys::prctl::set_pdeathsig(death_signal) {
            say(format_args!("cannot tie the job to redlock's life: {err}"));
            return exit::SOFTWARE;
        }
        if let Err(err) = nix::sys::prctl::set_child_subreaper(true) {
            say(format_args!("cannot collect the job's processes: {err}"));
            return exit::SOFTWARE;
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = death_signal;
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            say(format_args!("cannot start the job's supervisor: {err}"));
            return exit::SOFTWARE;
        }
    };
    runtime.block_on(watch(Pid::from_raw(parent), command))
}

async fn watch(parent: Pid, command: &[OsString]) -> u8 {
    // Handlers first: a signal redlock sends must not end the supervisor. One that arrives
    // before the command starts is passed on once it has (the loop below reads it then).
    let mut signals = FORWARDED.to_vec();
    signals.extend([STOP_JOB, CONTINUE_JOB]);
    let mut caught = match Caught::catch(&signals) {
        Ok(caught) => caught,
        Err(err) => {
            say(format_args!("cannot catch signals for the job: {err}"));
            return exit::SOFTWARE;
        }
    };
    // redlock may have died before the parent-death signal was asked for.
    if getppid() != parent {
        return exit::LOST;
    }
    let program = &command[0];
    // std's `spawn` sets SIGPIPE back to its default for the command (Rust ignores it, and an
    // ignored signal stays ignored across exec), empties its signal mask, and looks the program
    // up in PATH.
    let job = match std::process::Command::new(program)
        .args(&command[1..])
        .process_group(0)
        .spawn()
    {
        Ok(job) => Pid::from_raw(i32::try_from(job.id()).unwrap_or(i32::MAX)),
        Err(err) => {
            say(format_args!(
                "cannot run `{}`: {err}",
                program.to_string_lossy()
            ));
            return match err.kind() {
                std::io::ErrorKind::NotFound => exit::NOT_FOUND,
                _ => exit::CANNOT_RUN,
            };
        }
    };
    let session = getsid(None).unwrap_or(Pid::from_raw(0));
    let mut code = None;
    let mut check = tokio::time::interval(PARENT_CHECK);
    // Consecutive looks that found no process of the job: two are needed, as one look at
    // /proc is not atomic (a process that dies while it is taken hands its children to the
    // supervisor, and the next look sees them).
    let mut empty_looks = 0;
    loop {
        reap(job, &mut code);
        let alive = code.is_none();
        if getppid() != parent {
            // redlock is gone: nobody holds the lock for the job any more.
            signal_job(job, alive, session, &[Signal::SIGKILL]);
        }
        if code.is_some() {
            empty_looks = if job_left(session) {
                0
            } else {
                empty_looks + 1
            };
            if let (Some(code), 2..) = (code, empty_looks) {
                return code;
            }
        }
        tokio::select! {
            event = caught.next_or_child() => match event {
                // A child stopped or ended: collected at the top of the loop.
                None => {}
                Some(STOP_JOB) => signal_job(job, alive, session, &[Signal::SIGSTOP]),
                Some(CONTINUE_JOB) => signal_job(job, alive, session, &[Signal::SIGCONT]),
                // The parent-death signal is one of these: the top of the loop tells.
                Some(passed_on) if getppid() == parent => {
                    signal_job(job, alive, session, &[passed_on, Signal::SIGCONT]);
                }
                Some(_) => {}
            },
            // The command is done: look again shortly for the rest of the job (their ends are
            // signalled to their own parents, not here), and at once for the second look.
            () = tokio::time::sleep(if empty_looks > 0 { Duration::ZERO } else { LINGER_CHECK }),
                if code.is_some() => {}
            _ = check.tick() => {}
        }
    }
}

/// Whether a process of the job is left: a descendant in the supervisor's session (zombies
/// included: one may be a process whose main thread exited while others run). A process that
/// made a session of its own (`setsid`: a daemon detaching, an agent such as `gpg-agent` or an
/// ssh master connection) is not the job's any more, as it would not hold flock(1)'s lock
/// either once it closed the descriptors it inherited.
fn job_left(session: Pid) -> bool {
    procfs::descendants()
        .iter()
        .any(|descendant| descendant.session == session)
}

/// Sends `signals`, in order, to every process of the job, once each: to the process groups
/// the job made (the command's own while it has members, and any a process of it made, as
/// `timeout(1)` does) as a whole, and to each other process of the job by its pid
/// ([`Delivery::aim`] decides). A stop or a kill is sent again, to what the last look had not
/// reached, until a look finds no such process (one forked meanwhile by a process not stopped
/// or killed yet). Other signals are sent once: a process forked after them by one that got
/// them did not exist when they were passed on.
fn signal_job(command: Pid, command_alive: bool, session: Pid, signals: &[Signal]) {
    deliver(
        command,
        command_alive,
        signals,
        || {
            procfs::descendants()
                .into_iter()
                .filter(|descendant| descendant.session == session)
                .collect()
        },
        |target, signal| {
            let _ = match target {
                Target::Group(group) => killpg(group, signal),
                Target::Process(pid) => kill(pid, signal),
            };
        },
    );
}

/// [`signal_job`]'s loop over the looks (`look` reads the job's processes) and the sends
/// (`send`), apart from `/proc` and the kernel so that a test can record every send.
fn deliver(
    command: Pid,
    command_alive: bool,
    signals: &[Signal],
    mut look: impl FnMut() -> Vec<procfs::Descendant>,
    mut send: impl FnMut(Target, Signal),
) {
    let looks = if signals
        .iter()
        .any(|signal| matches!(signal, Signal::SIGSTOP | Signal::SIGKILL))
    {
        5
    } else {
        1
    };
    let mut delivery = Delivery::default();
    for _ in 0..looks {
        let job = look();
        let targets = delivery.aim(command, command_alive, &job);
        if targets.is_empty() {
            return;
        }
        for signal in signals {
            for target in &targets {
                send(*target, *signal);
            }
        }
    }
}

/// Where a signal is sent: a whole process group, or one process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    Group(Pid),
    Process(Pid),
}

/// One delivery of signals to the job, over the looks it takes: what it has reached so far,
/// so that no process gets them twice.
#[derive(Debug, Default)]
struct Delivery {
    /// The groups sent to as a whole.
    groups: Vec<Pid>,
    /// The processes seen in a look, and so reached (by their group, or by their pid).
    reached: Vec<Pid>,
}

impl Delivery {
    /// The targets that reach each process of `job` (a look) not reached yet, once; records
    /// them as reached. A group goes whole if the job made it (its leader is in the job; the
    /// command's while the command is not collected or a process is in it, even if the look
    /// missed the command) and holds no process reached by its pid before; each other process
    /// not reached goes by its pid. A newcomer to a group sent to earlier was in it then, or was
    /// forked after the signals by one that got them.
    fn aim(
        &mut self,
        command: Pid,
        command_alive: bool,
        job: &[procfs::Descendant],
    ) -> Vec<Target> {
        let made_by_the_job = |group: Pid| {
            (group == command
                && (command_alive || job.iter().any(|process| process.group == command)))
                || job.iter().any(|process| process.pid == group)
        };
        let mut groups: Vec<Pid> = Vec::new();
        let candidates = command_alive
            .then_some(command)
            .into_iter()
            .chain(job.iter().map(|process| process.group));
        for group in candidates {
            let holds_one_reached = job
                .iter()
                .any(|process| process.group == group && self.reached.contains(&process.pid));
            if made_by_the_job(group)
                && !holds_one_reached
                && !self.groups.contains(&group)
                && !groups.contains(&group)
            {
                groups.push(group);
            }
        }
        let processes = job.iter().filter(|process| {
            !self.reached.contains(&process.pid)
                && !self.groups.contains(&process.group)
                && !groups.contains(&process.group)
        });
        let targets: Vec<Target> = groups
            .iter()
            .copied()
            .map(Target::Group)
            .chain(processes.map(|process| Target::Process(process.pid)))
            .collect();
        self.groups.extend(groups);
        for process in job {
            if !self.reached.contains(&process.pid) {
                self.reached.push(process.pid);
            }
        }
        targets
    }
}

/// Collects every exited child: the command (its exit code goes to `code`), and the
/// descendants handed to the supervisor as their parents died.
fn reap(job: Pid, code: &mut Option<u8>) {
    loop {
        let exited = match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::Exited(pid, status)) => {
                (pid, u8::try_from(status).unwrap_or(exit::SOFTWARE))
            }
            Ok(WaitStatus::Signaled(pid, signal, _)) => (pid, exit::killed_by(signal as i32)),
            Err(Errno::EINTR) | Ok(WaitStatus::Stopped(..) | WaitStatus::Continued(_)) => continue,
            // None exited (StillAlive), or no child left (ECHILD).
            _ => return,
        };
        if exited.0 == job && code.is_none() {
            *code = Some(exited.1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use procfs::Descendant;

    fn process(pid: i32, group: i32) -> Descendant {
        Descendant {
            pid: Pid::from_raw(pid),
            group: Pid::from_raw(group),
            session: Pid::from_raw(1),
        }
    }

    /// How many of `targets` reach each process of `job`.
    fn deliveries(targets: &[Target], job: &[Descendant]) -> Vec<(i32, usize)> {
        job.iter()
            .map(|process| {
                let reaching = targets
                    .iter()
                    .filter(|target| match target {
                        Target::Group(group) => *group == process.group,
                        Target::Process(pid) => *pid == process.pid,
                    })
                    .count();
                (process.pid.as_raw(), reaching)
            })
            .collect()
    }

    fn once_each(job: &[Descendant]) -> Vec<(i32, usize)> {
        job.iter()
            .map(|process| (process.pid.as_raw(), 1))
            .collect()
    }

    /// The command 10 with a child in its group; `timeout` (20) in a group it made, with its
    /// child; 31 left in the group of 30, which exited (a group the job no longer leads).
    fn a_job() -> Vec<Descendant> {
        vec![
            process(10, 10),
            process(11, 10),
            process(20, 20),
            process(21, 20),
            process(31, 30),
        ]
    }

    #[test]
    fn each_process_is_reached_once_by_its_group_or_its_pid() {
        let job = a_job();
        let targets = Delivery::default().aim(Pid::from_raw(10), true, &job);
        assert_eq!(
            targets,
            [
                Target::Group(Pid::from_raw(10)),
                Target::Group(Pid::from_raw(20)),
                Target::Process(Pid::from_raw(31)),
            ]
        );
        assert_eq!(deliveries(&targets, &job), once_each(&job));
    }

    #[test]
    fn the_checker_catches_the_command_group_sent_to_twice() {
        // The defect this design replaced: the command's group signalled before the look,
        // and again as a group of the look.
        let job = a_job();
        let mut targets = vec![Target::Group(Pid::from_raw(10))];
        targets.extend(Delivery::default().aim(Pid::from_raw(10), true, &job));
        assert_ne!(deliveries(&targets, &job), once_each(&job));
        assert_eq!(deliveries(&targets, &job)[0], (10, 2));
    }

    /// Runs [`deliver`] over `looks` (one job per look; the last repeats), and counts what
    /// reached each process of the last look, per signal.
    fn delivered(signals: &[Signal], looks: &[Vec<Descendant>]) -> Vec<(i32, Signal, usize)> {
        let mut sent: Vec<(Target, Signal)> = Vec::new();
        let mut next = 0;
        deliver(
            Pid::from_raw(10),
            true,
            signals,
            || {
                let job = looks[next.min(looks.len() - 1)].clone();
                next += 1;
                job
            },
            |target, signal| sent.push((target, signal)),
        );
        let last = looks.last().expect("a look");
        let mut counts = Vec::new();
        for process in last {
            for signal in signals {
                let reaching = sent
                    .iter()
                    .filter(|(target, sent)| {
                        sent == signal
                            && match target {
                                Target::Group(group) => *group == process.group,
                                Target::Process(pid) => *pid == process.pid,
                            }
                    })
                    .count();
                counts.push((process.pid.as_raw(), *signal, reaching));
            }
        }
        counts
    }

    #[test]
    fn the_whole_delivery_sends_each_signal_once_to_each_process() {
        // The integration tests cannot see a duplicate (the kernel merges a standard signal
        // sent twice before it is handled): here every send is recorded.
        let mut later = a_job();
        later.push(process(12, 10));
        later.push(process(40, 40));
        for signals in [
            &[Signal::SIGTERM, Signal::SIGCONT][..],
            &[Signal::SIGSTOP][..],
            &[Signal::SIGKILL][..],
        ] {
            for looks in [vec![a_job()], vec![a_job(), later.clone()]] {
                let one_shot =
                    !signals.contains(&Signal::SIGSTOP) && !signals.contains(&Signal::SIGKILL);
                for (pid, signal, reaching) in delivered(signals, &looks) {
                    // A one-shot signal takes one look: a group made after it (40) was not
                    // there to get it. A stop or a kill looks again and reaches it, once.
                    let expected = usize::from(!(one_shot && pid == 40));
                    assert_eq!(
                        reaching,
                        expected,
                        "{signal:?} to {pid}, looks {}",
                        looks.len()
                    );
                }
            }
        }
    }

    #[test]
    fn the_commands_group_is_reached_even_when_the_look_missed_the_command() {
        let targets = Delivery::default().aim(Pid::from_raw(10), true, &[]);
        assert_eq!(targets, [Target::Group(Pid::from_raw(10))]);
    }

    #[test]
    fn the_commands_group_is_the_jobs_after_the_command_only_while_it_has_members() {
        let command = Pid::from_raw(10);
        let left = [process(11, 10)];
        let targets = Delivery::default().aim(command, false, &left);
        assert_eq!(targets, [Target::Group(command)]);
        // Empty, its id may be another group's by now.
        assert_eq!(Delivery::default().aim(command, false, &[]), []);
    }

    #[test]
    fn a_later_look_reaches_only_the_processes_the_earlier_ones_did_not() {
        let command = Pid::from_raw(10);
        let mut delivery = Delivery::default();
        let first = a_job();
        delivery.aim(command, true, &first);
        assert_eq!(delivery.aim(command, true, &first), [], "nothing new");
        let mut second = first.clone();
        // Forked into groups already sent to: they got it with their group.
        second.push(process(12, 10));
        second.push(process(22, 20));
        // Forked by 31 before it got it: not in a group the job made, so by its pid.
        second.push(process(32, 30));
        // A new process leading a group of its own, with a member.
        second.push(process(40, 40));
        second.push(process(41, 40));
        let targets = delivery.aim(command, true, &second);
        assert_eq!(
            targets,
            [
                Target::Group(Pid::from_raw(40)),
                Target::Process(Pid::from_raw(32)),
            ]
        );
        assert_eq!(delivery.aim(command, true, &second), [], "all reached");
    }

    #[test]
    fn a_reached_process_that_makes_a_group_is_not_sent_to_again_with_it() {
        let command = Pid::from_raw(10);
        let mut delivery = Delivery::default();
        delivery.aim(command, true, &[process(10, 10), process(31, 30)]);
        // 31 (reached by its pid) now leads a group, and forked 32 into it.
        let later = [process(10, 10), process(31, 31), process(32, 31)];
        let targets = delivery.aim(command, true, &later);
        assert_eq!(targets, [Target::Process(Pid::from_raw(32))]);
    }
}
