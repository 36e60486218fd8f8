//! `redlock run` as cron uses it: real `redlock` processes, real masters, real signals.

mod support;

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use redlock_testkit::eventually;
use support::*;

#[test]
fn of_two_no_wait_runs_started_together_exactly_one_runs_the_job() {
    let (_masters, nodes) = masters(3);
    let scratch = Scratch::new();
    let job = job_until(&scratch.path("out"), &scratch.path("go"));
    let start = || {
        Running::start(
            redlock(&nodes)
                .args(["run", "report", "--no-wait", "--"])
                .args(&job),
        )
    };
    let mut first = start();
    let mut second = start();
    // The job waits for `go`, so the run that did not get the lock has to give up first.
    assert!(
        eventually(PATIENCE, || first.has_exited() || second.has_exited()),
        "neither run gave up"
    );
    let (busy, runner) = if first.has_exited() {
        (first, second)
    } else {
        (second, first)
    };
    let busy = busy.wait();
    busy.assert_code(BUSY);
    assert_eq!(busy.stderr, "", "busy is silent when not on a terminal");
    scratch.touch("go");
    runner.wait().assert_code(0);
    assert_eq!(scratch.read("out"), "ran\n", "the job ran exactly once");
    assert!(!locked(&nodes, "report"), "released after the job");
}

#[test]
fn the_busy_exit_code_can_be_chosen_and_is_said_with_v() {
    let (_masters, nodes) = masters(1);
    let scratch = Scratch::new();
    let holder = holding(&nodes, "report", &scratch);
    let busy = finish(redlock(&nodes).args([
        "run",
        "report",
        "--no-wait",
        "-E",
        "1",
        "-v",
        "--",
        "false",
    ]));
    busy.assert_code(1);
    assert!(busy.stderr.contains("report is busy (held, "), "{busy:#?}");
    let waited = finish(redlock(&nodes).args(["run", "report", "--wait", "300ms", "--", "true"]));
    waited.assert_code(BUSY);
    scratch.touch("go");
    holder.wait().assert_code(0);
}

#[test]
fn eight_waiting_runs_on_five_masters_all_run_one_at_a_time_in_token_order() {
    let (_masters, nodes) = masters(5);
    let scratch = Scratch::new();
    let log = scratch.path("log");
    let job = sh(&format!(
        "echo \"start $REDLOCK_NAME $REDLOCK_FENCING_TOKEN\" >> '{0}'; sleep 0.05; \
         echo \"end $REDLOCK_NAME $REDLOCK_FENCING_TOKEN\" >> '{0}'",
        log.display()
    ));
    let runs: Vec<Running> = (0..8)
        .map(|_| {
            Running::start(
                redlock(&nodes)
                    .args(["run", "nightly", "--wait", "60s", "--"])
                    .args(&job),
            )
        })
        .collect();
    for run in runs {
        run.wait().assert_code(0);
    }
    let text = scratch.read("log");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 16, "every job ran once:\n{text}");
    let mut last_token = 0;
    for pair in lines.chunks(2) {
        let start = pair[0].strip_prefix("start nightly ");
        let end = pair[1].strip_prefix("end nightly ");
        assert!(
            start.is_some() && start == end,
            "a job started or ended inside another:\n{text}"
        );
        let token: u64 = start.and_then(|t| t.parse().ok()).expect("a token");
        assert!(token > last_token, "tokens go up with each job:\n{text}");
        last_token = token;
    }
}

#[test]
fn a_killed_redlock_takes_its_job_along_and_frees_the_lock_after_its_lease() {
    let (_masters, nodes) = masters(3);
    let scratch = Scratch::new();
    let watchdog = Duration::from_secs(10);
    // The job starts a process of its own and waits for it: both must die with redlock.
    let holder = Running::start(
        redlock(&nodes)
            .args(["run", "cron", "--watchdog-timeout", "10s", "--"])
            .args(sh(&format!(
                "sleep 600 & {}; wait",
                scratch.publish("pids", "$$ $!")
            ))),
    );
    scratch.await_file("pids");
    let pids: Vec<i32> = scratch
        .read("pids")
        .split_whitespace()
        .map(|pid| pid.parse().expect("a pid"))
        .collect();
    assert_eq!(pids.len(), 2, "the job and its child");
    holder.signal(Signal::SIGKILL);
    drop(holder);
    // Nobody released the lock: it is still held, for what is left of its lease. The masters
    // measured that after `asked`, so the lock cannot free before `asked + left`.
    let asked = Instant::now();
    let status = status(&nodes, "cron");
    assert_eq!(status["locked"], true, "{status}");
    let left = Duration::from_millis(status["ttl_ms"].as_u64().expect("a ttl while held"));
    assert!(left <= watchdog, "{status}");
    // The job's supervisor kills the whole group when redlock dies, without waiting for the
    // lease.
    assert!(
        eventually(PATIENCE, || pids.iter().all(|pid| is_dead(*pid))),
        "the job or its child outlived the redlock that held its lock"
    );
    let next = finish(
        redlock(&nodes)
            .args(["run", "cron", "--wait", "60s", "--"])
            .arg("true"),
    );
    next.assert_code(0);
    // Only the lease's end let the next run in (the slack is the masters' millisecond
    // rounding, not a timing margin).
    let waited = asked.elapsed();
    assert!(
        waited + Duration::from_millis(20) >= left,
        "the next run got in {waited:?} after the status, which saw {left:?} left on the lease"
    );
}

#[test]
fn a_force_unlock_from_outside_sends_sigterm_and_exits_lost() {
    let (_masters, nodes) = masters(3);
    let scratch = Scratch::new();
    let script = format!(
        "trap 'echo term >> \"{0}\"; exit 0' TERM; echo ready > '{1}'; \
         while true; do sleep 0.05; done",
        scratch.path("out").display(),
        scratch.path("ready").display()
    );
    let holder = Running::start(
        redlock(&nodes)
            .args(["run", "export", "--watchdog-timeout", WATCHDOG, "--"])
            .args(sh(&script)),
    );
    scratch.await_file("ready");
    assert!(force_unlock(&nodes, "export"), "the job held the lock");
    let done = holder.wait();
    done.assert_code(LOST);
    assert_eq!(scratch.read("out"), "term\n", "the job got SIGTERM once");
    assert!(
        done.stderr.contains("was lost while the job ran"),
        "{done:#?}"
    );
}

#[test]
fn a_job_that_ignores_sigterm_is_killed_after_the_grace() {
    let (_masters, nodes) = masters(1);
    let scratch = Scratch::new();
    let script = format!(
        "trap '' TERM; echo ready > '{}'; while true; do sleep 0.05; done",
        scratch.path("ready").display()
    );
    let holder = Running::start(
        redlock(&nodes)
            .args([
                "run",
                "stubborn",
                "--watchdog-timeout",
                WATCHDOG,
                "--grace",
                "1s",
                "--",
            ])
            .args(sh(&script)),
    );
    scratch.await_file("ready");
    assert!(force_unlock(&nodes, "stubborn"), "the job held the lock");
    let done = holder.wait();
    done.assert_code(LOST);
    assert!(done.stderr.contains("SIGKILL"), "{done:#?}");
    assert!(
        done.stderr.contains("the job exited with 137"),
        "killed by SIGKILL: {done:#?}"
    );
}

#[test]
fn a_job_that_outlives_its_fixed_lease_is_stopped_as_lost() {
    let (_masters, nodes) = masters(1);
    let done =
        finish(redlock(&nodes).args(["run", "short", "--lease", "1s", "--", "sleep", "600"]));
    done.assert_code(LOST);
    assert!(done.stderr.contains("lease is running out"), "{done:#?}");
    assert!(!locked(&nodes, "short"));
}

#[test]
fn signals_reach_the_job_and_the_lock_frees_as_soon_as_it_exits() {
    let (_masters, nodes) = masters(3);
    let signals = [
        (Signal::SIGINT, "INT"),
        (Signal::SIGTERM, "TERM"),
        (Signal::SIGHUP, "HUP"),
        (Signal::SIGQUIT, "QUIT"),
        (Signal::SIGUSR1, "USR1"),
    ];
    // redlock leaves alone what it was started with ignored (and so would its job): a test
    // run under `nohup`, or in a script's background, cannot check those.
    for (signal, name) in signals
        .into_iter()
        .filter(|(signal, _)| !ignored_here(*signal))
    {
        let scratch = Scratch::new();
        let script = format!(
            "trap 'echo {name} >> \"{0}\"; exit 0' {name}; echo ready > '{1}'; \
             while true; do sleep 0.05; done",
            scratch.path("out").display(),
            scratch.path("ready").display()
        );
        let holder = Running::start(redlock(&nodes).args(["run", "sig", "--"]).args(sh(&script)));
        scratch.await_file("ready");
        holder.signal(signal);
        // The job handled the signal and exited 0: so does redlock.
        holder.wait().assert_code(0);
        assert_eq!(
            scratch.read("out"),
            format!("{name}\n"),
            "{signal} forwarded once"
        );
        // Released, not left to its 30 s lease.
        assert!(
            !locked(&nodes, "sig"),
            "{signal}: still locked after the job exited"
        );
    }
    // A job that does not handle it dies of it: 128 + SIGTERM.
    let scratch = Scratch::new();
    let holder = Running::start(redlock(&nodes).args(["run", "sig", "--"]).args(sh(&format!(
        "echo ready > '{}'; exec sleep 600",
        scratch.path("ready").display()
    ))));
    scratch.await_file("ready");
    holder.signal(Signal::SIGTERM);
    holder.wait().assert_code(128 + 15);
    assert!(!locked(&nodes, "sig"));
}

/// Each process gets each forwarded signal, through every kind of group a job can make. A
/// duplicate sent microseconds after the first is merged by the kernel (a standard signal is
/// pending once), so this test sees a missed signal, not a doubled one: the supervisor's unit
/// tests record every send (`the_whole_delivery_sends_each_signal_once_to_each_process`).
#[test]
fn each_process_of_the_job_gets_each_signal_once() {
    let (_masters, nodes) = masters(1);
    let scratch = Scratch::new();
    let signals: Vec<(Signal, &str)> = [
        (Signal::SIGUSR1, "USR1"),
        (Signal::SIGUSR2, "USR2"),
        (Signal::SIGTERM, "TERM"),
        (Signal::SIGHUP, "HUP"),
    ]
    .into_iter()
    .filter(|(signal, _)| !ignored_here(*signal))
    .collect();
    // (Not SIGINT: what a script starts in the background ignores it, and a shell cannot trap
    // a signal it started with ignored.)
    // A process that appends a line to the file named `$1` for each delivery of each signal,
    // publishes its pid in `$1.pid`, and runs until `stop` exists (not saying which signal
    // ended each `sleep` on the way). The shell runs a trap for each delivery that arrives
    // after its last run began: a second delivery of a signal shows as a second line.
    let traps: String = signals
        .iter()
        .map(|(_, name)| format!("trap 'echo {name} >> \"$1\"' {name}; "))
        .collect();
    std::fs::write(
        scratch.path("count.sh"),
        format!(
            "{traps}echo $$ > \"$1.pid.tmp\"; mv \"$1.pid.tmp\" \"$1.pid\"; \
             while [ ! -e '{stop}' ]; do sleep 0.05; done 2> /dev/null; exit 0",
            stop = scratch.path("stop").display()
        ),
    )
    .expect("write count.sh");
    let count = |name: &str| {
        format!(
            "sh '{}' '{}'",
            scratch.path("count.sh").display(),
            scratch.path(name).display()
        )
    };
    // Every way a process is reached: the command and a child in the command's group; a
    // process leading a group of its own (a background job of bash's `set -m`: dash's needs a
    // terminal), which is signalled as a group; and one left in a group whose leader exited,
    // which is signalled by its pid.
    let holder = Running::start(redlock(&nodes).args(["run", "count", "--"]).args([
        "bash".to_owned(),
        "-c".to_owned(),
        format!(
            "{child} & set -m; {grouped} & ({orphan} &); exec {command}",
            child = count("child"),
            grouped = count("grouped"),
            orphan = count("orphan"),
            command = count("command"),
        ),
    ]));
    let names = ["command", "child", "grouped", "orphan"];
    let pids: Vec<i32> = names
        .iter()
        .map(|name| scratch.await_pid(&format!("{name}.pid")))
        .collect();
    let [command, child, grouped, orphan] = pids[..] else {
        unreachable!("four names")
    };
    assert_eq!(group_of(command), command, "the command leads its group");
    assert_eq!(
        group_of(child),
        command,
        "the child is in the command's group"
    );
    assert_eq!(group_of(grouped), grouped, "`set -m` made a group");
    let orphans_group = group_of(orphan);
    assert!(
        orphans_group != command && orphans_group != orphan,
        "the orphan is in the group of the subshell that started it"
    );
    assert!(
        eventually(PATIENCE, || is_dead(orphans_group)),
        "the subshell that started the orphan exits"
    );
    // Each signal several times: a second delivery shows when the process ran its trap
    // before it arrived. Each is awaited before the next is sent.
    let rounds = 5;
    let mut expected = String::new();
    for _ in 0..rounds {
        for (signal, name) in &signals {
            holder.signal(*signal);
            expected.push_str(name);
            expected.push('\n');
            let lines = expected.lines().count();
            assert!(
                eventually(PATIENCE, || names.iter().all(|name| scratch
                    .read(name)
                    .lines()
                    .count()
                    >= lines)),
                "{signal} did not reach every process: {:?}",
                names.map(|name| scratch.read(name))
            );
        }
    }
    scratch.touch("stop");
    let done = holder.wait();
    done.assert_code(0);
    for name in names {
        assert_eq!(
            scratch.read(name),
            expected,
            "{name}: one line for each signal sent once ({done:#?})"
        );
    }
}

#[test]
fn a_signal_while_waiting_ends_the_wait_without_running_the_job() {
    let (_masters, nodes) = masters(3);
    let scratch = Scratch::new();
    let holder = holding(&nodes, "queue", &scratch);
    let waiter = Running::start(redlock(&nodes).args(["run", "queue", "-v", "--"]).args(sh(
        &format!("echo waiter >> '{}'", scratch.path("out").display()),
    )));
    assert!(
        eventually(PATIENCE, || waiter.stderr().contains("waiting for queue")),
        "the waiter never said it waits: {}",
        waiter.stderr()
    );
    waiter.signal(Signal::SIGTERM);
    let gave_up = waiter.wait();
    gave_up.assert_code(128 + 15);
    scratch.touch("go");
    holder.wait().assert_code(0);
    assert_eq!(scratch.read("out"), "ran\n", "the waiter's job never ran");
    assert!(!locked(&nodes, "queue"), "free once the holder is done");
}

#[test]
fn the_job_gets_the_name_and_a_token_the_status_counter_covers() {
    let (_masters, nodes) = masters(3);
    let scratch = Scratch::new();
    let holder = Running::start(redlock(&nodes).args(["run", "env", "--"]).args(sh(&format!(
        "{}; while [ ! -e '{}' ]; do sleep 0.02; done; exit 7",
        scratch.publish("env", "$REDLOCK_NAME $REDLOCK_FENCING_TOKEN"),
        scratch.path("go").display()
    ))));
    scratch.await_file("env");
    let env = scratch.read("env");
    let (name, token) = env.trim().split_once(' ').expect("name and token");
    assert_eq!(name, "env");
    let token: u64 = token.parse().expect("a numeric token");
    let held = status(&nodes, "env");
    assert_eq!(held["locked"], true, "{held}");
    assert_eq!(held["hold_count"], 1, "{held}");
    let ttl = held["ttl_ms"].as_u64().expect("a ttl while held");
    assert!(ttl > 0 && ttl <= 30_000, "{held}");
    assert!(held["fencing_counter"].as_u64() >= Some(token), "{held}");
    assert_eq!(held["nodes_answered"], 3);
    scratch.touch("go");
    holder.wait().assert_code(7);
    let free = status(&nodes, "env");
    assert_eq!(free["locked"], false, "{free}");
    assert_eq!(free["ttl_ms"], serde_json::Value::Null, "{free}");
}

/// A job of one process (no fork while it runs, so a stop reaches it at once) that writes
/// its pid and sleeps.
fn sleeping_job(scratch: &Scratch) -> Vec<String> {
    sh(&format!("{}; exec sleep 600", scratch.publish("pid", "$$")))
}

#[test]
fn ctrl_z_stops_the_job_with_redlock_and_continuing_resumes_it_while_held() {
    let (_masters, nodes) = masters(1);
    let scratch = Scratch::new();
    let holder = Running::start(
        redlock(&nodes)
            .args(["run", "pausable", "--"])
            .args(sleeping_job(&scratch)),
    );
    let job: i32 = scratch.await_pid("pid");
    let redlock = holder.pid().as_raw();
    holder.signal(Signal::SIGTSTP);
    let stopped = |pid| state_of(pid).as_deref() == Some("T");
    assert!(
        eventually(PATIENCE, || stopped(redlock) && stopped(job)),
        "both stop"
    );
    holder.signal(Signal::SIGCONT);
    assert!(eventually(PATIENCE, || !stopped(job)), "the job goes on");
    holder.signal(Signal::SIGTERM);
    let done = holder.wait();
    // Ended by the SIGTERM passed on, not as lost: the lock was held throughout.
    done.assert_code(128 + 15);
    assert!(!done.stderr.contains("lost"), "{done:#?}");
}

#[test]
fn a_job_stopped_past_its_lease_is_not_continued_without_the_lock() {
    let (_masters, nodes) = masters(1);
    let scratch = Scratch::new();
    let holder = Running::start(
        redlock(&nodes)
            .args(["run", "paused", "--watchdog-timeout", WATCHDOG, "--"])
            .args(sleeping_job(&scratch)),
    );
    scratch.await_file("pid");
    holder.signal(Signal::SIGTSTP);
    // Stopped, redlock renews nothing: the lock runs out.
    assert!(
        eventually(PATIENCE, || !locked(&nodes, "paused")),
        "the lease never ran out"
    );
    holder.signal(Signal::SIGCONT);
    let done = holder.wait();
    done.assert_code(LOST);
    // Decided when redlock was continued, before the job was: not later, by the watchdog.
    assert!(
        done.stderr.contains("it ran out while redlock was stopped"),
        "{done:#?}"
    );
}

#[test]
fn the_lock_is_held_until_every_process_of_the_job_is_done() {
    let (_masters, nodes) = masters(1);
    let scratch = Scratch::new();
    // The command exits at once; what it started in the background goes on until `go`.
    let holder = Running::start(
        redlock(&nodes)
            .args(["run", "linger", "--"])
            .args(sh(&format!(
                "(while [ ! -e '{go}' ]; do sleep 0.02; done; echo late >> '{out}') & \
                 {ready}; exit 0",
                go = scratch.path("go").display(),
                out = scratch.path("out").display(),
                ready = scratch.publish("ready", "$$"),
            ))),
    );
    let command: i32 = scratch.await_pid("ready");
    assert!(
        eventually(PATIENCE, || is_dead(command)),
        "the command exits"
    );
    assert!(
        locked(&nodes, "linger"),
        "released while the job's process still ran"
    );
    scratch.touch("go");
    let done = holder.wait();
    done.assert_code(0);
    assert_eq!(
        scratch.read("out"),
        "late\n",
        "redlock exited before the job was done"
    );
    assert!(!locked(&nodes, "linger"));
}

#[test]
fn a_lost_lock_kills_the_processes_that_ignore_sigterm_after_the_grace() {
    let (_masters, nodes) = masters(1);
    let scratch = Scratch::new();
    let holder = Running::start(
        redlock(&nodes)
            .args([
                "run",
                "ignorer",
                "--watchdog-timeout",
                WATCHDOG,
                "--grace",
                "1s",
                "--",
            ])
            .args(sh(&format!(
                "(trap '' TERM; sh -c 'echo $PPID' > '{0}.tmp'; \
                 mv '{0}.tmp' '{0}'; while true; do sleep 0.05; done) & wait",
                scratch.path("child").display()
            ))),
    );
    let child: i32 = scratch.await_pid("child");
    assert!(force_unlock(&nodes, "ignorer"), "the job held the lock");
    let done = holder.wait();
    done.assert_code(LOST);
    assert!(
        is_dead(child),
        "a process of the job outlived redlock: {done:#?}"
    );
    assert!(done.stderr.contains("SIGKILL"), "{done:#?}");
}

#[test]
fn a_signal_ignored_at_start_is_not_passed_on() {
    let (_masters, nodes) = masters(1);
    let scratch = Scratch::new();
    // As under nohup: SIGHUP ignored. SIGUSR1 is passed on and ends the job.
    let job = format!(
        "trap 'echo usr1 >> \"{out}\"; exit 0' USR1; echo ready > '{ready}'; \
         while true; do sleep 0.02; done",
        out = scratch.path("out").display(),
        ready = scratch.path("ready").display(),
    );
    let holder = Running::start(
        std::process::Command::new("sh")
            .env("REDLOCK_NODES", nodes.join(","))
            .args(["-c", "trap '' HUP; exec \"$0\" \"$@\""])
            .arg(env!("CARGO_BIN_EXE_redlock"))
            .args(["-v", "run", "nohup", "--"])
            .args(sh(&job)),
    );
    scratch.await_file("ready");
    holder.signal(Signal::SIGHUP);
    holder.signal(Signal::SIGUSR1);
    let done = holder.wait();
    done.assert_code(0);
    assert_eq!(scratch.read("out"), "usr1\n");
    // Both were sent before redlock could pass the second on: a caught SIGHUP would be said.
    assert!(done.stderr.contains("passing SIGUSR1"), "{done:#?}");
    assert!(!done.stderr.contains("passing SIGHUP"), "{done:#?}");
}

#[test]
fn an_ignored_sigchld_does_not_lose_the_jobs_exit_code() {
    let (_masters, nodes) = masters(1);
    let done = finish(
        std::process::Command::new("sh")
            .env("REDLOCK_NODES", nodes.join(","))
            .args(["-c", "trap '' CHLD; exec \"$0\" \"$@\""])
            .arg(env!("CARGO_BIN_EXE_redlock"))
            .args(["run", "children", "--", "sh", "-c", "exit 3"]),
    );
    done.assert_code(3);
}

#[test]
fn a_killed_supervisor_takes_the_job_along_before_the_lock_is_released() {
    let (_masters, nodes) = masters(1);
    let scratch = Scratch::new();
    let holder = Running::start(
        redlock(&nodes)
            .args(["run", "orphan", "--"])
            .args(sleeping_job(&scratch)),
    );
    let job: i32 = scratch.await_pid("pid");
    let supervisor = parent_of(job);
    assert_ne!(
        supervisor,
        holder.pid().as_raw(),
        "the job runs under its supervisor"
    );
    // The next holder's job records whether the first job is still there when it starts.
    let waiter = Running::start(
        redlock(&nodes)
            .args(["run", "orphan", "--wait", "60s", "-v", "--"])
            .args(sh(&format!(
                "if kill -0 {job} 2>/dev/null; then echo alive; else echo gone; fi > '{}'",
                scratch.path("seen").display()
            ))),
    );
    assert!(
        eventually(PATIENCE, || waiter.stderr().contains("waiting for orphan")),
        "the waiter waits"
    );
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(supervisor), Signal::SIGKILL)
        .expect("kill the supervisor");
    let done = holder.wait();
    done.assert_code(128 + 9);
    waiter.wait().assert_code(0);
    // Gone (killed and collected) before redlock let the lock go.
    assert_eq!(scratch.read("seen"), "gone\n", "{done:#?}");
    assert!(!locked(&nodes, "orphan"));
}

#[test]
fn what_the_job_runs_in_a_group_of_its_own_is_reached_and_waited_for() {
    let (_masters, nodes) = masters(1);
    let scratch = Scratch::new();
    // `timeout` inside a script makes its own process group; what runs under it must get the
    // SIGTERM of a lost lock too. `timeout` passes the SIGTERM it gets on to its command and
    // its group again: the trap takes the first and ignores the rest (redlock's own
    // exactly-once delivery is checked in `each_process_of_the_job_gets_each_signal_once`).
    let inner = format!(
        "trap \"trap '' TERM; echo term >> '{out}'; exit 0\" TERM; {pid}; \
         while true; do sleep 0.05; done",
        out = scratch.path("out").display(),
        pid = scratch.publish("pid", "$$"),
    );
    let holder = Running::start(
        redlock(&nodes)
            .args([
                "run",
                "nested",
                "--watchdog-timeout",
                WATCHDOG,
                "--grace",
                "20s",
                "--",
            ])
            .args(sh("timeout 600 sh -c \"$0\"; true"))
            .arg(&inner),
    );
    let inner_pid: i32 = scratch.await_pid("pid");
    assert!(force_unlock(&nodes, "nested"), "the job held the lock");
    let done = holder.wait();
    done.assert_code(LOST);
    assert_eq!(scratch.read("out"), "term\n", "{done:#?}");
    assert!(
        !done.stderr.contains("of grace: SIGKILL"),
        "ended by its SIGTERM: {done:#?}"
    );
    assert!(
        is_dead(inner_pid),
        "the process under timeout outlived the lock"
    );
}

#[test]
fn a_daemon_the_job_starts_leaves_the_job() {
    let (_masters, nodes) = masters(1);
    let scratch = Scratch::new();
    // A process that makes a session of its own (as daemons and agents do) is not the job's:
    // it does not keep the lock held, and is not killed.
    let holder = Running::start(
        redlock(&nodes)
            .args(["run", "daemon", "--"])
            .args(sh(&format!(
                "setsid sh -c 'echo $$ > \"{pid}.tmp\"; mv \"{pid}.tmp\" \"{pid}\"; \
         while [ ! -e \"{go}\" ]; do sleep 0.02; done' > /dev/null 2>&1 & \
         while [ ! -e '{pid}' ]; do sleep 0.02; done; exit 0",
                go = scratch.path("go").display(),
                pid = scratch.path("pid").display(),
            ))),
    );
    let done = holder.wait();
    done.assert_code(0);
    let daemon: i32 = scratch.read("pid").trim().parse().expect("pid");
    assert!(!is_dead(daemon), "the daemon was killed");
    assert!(!locked(&nodes, "daemon"), "the daemon kept the lock");
    scratch.touch("go");
    assert!(eventually(PATIENCE, || is_dead(daemon)), "the daemon ends");
}

#[test]
fn a_job_under_timeout_which_makes_its_own_group_is_still_reached() {
    let (_masters, nodes) = masters(1);
    let scratch = Scratch::new();
    let job = sh(&format!("{}; exec sleep 600", scratch.publish("pid", "$$")));
    // Signals passed on reach what runs under `timeout`.
    let holder = Running::start(
        redlock(&nodes)
            .args(["run", "timed", "--", "timeout", "600"])
            .args(&job),
    );
    let sleeper: i32 = scratch.await_pid("pid");
    holder.signal(Signal::SIGTERM);
    let done = holder.wait();
    // timeout passes the TERM on, and exits 124 once its command is gone.
    assert!(done.code() == 124 || done.code() == 128 + 15, "{done:#?}");
    assert!(is_dead(sleeper), "the job under timeout outlived redlock");
    // And it dies with a killed redlock.
    std::fs::remove_file(scratch.path("pid")).expect("rm");
    let holder = Running::start(
        redlock(&nodes)
            .args(["run", "timed", "--", "timeout", "600"])
            .args(&job),
    );
    let sleeper: i32 = scratch.await_pid("pid");
    holder.signal(Signal::SIGKILL);
    drop(holder);
    assert!(
        eventually(PATIENCE, || is_dead(sleeper)),
        "the job under timeout outlived the redlock that held its lock"
    );
}

/// `redlock run --shared NAME`: any number of shared runs at once, never beside an exclusive
/// run of NAME; an exclusive run that waits goes first.
mod shared {
    use super::*;
    use redlock_testkit::eventually;

    /// A `redlock run [--shared] NAME` whose job appends to `out` and waits for `go`.
    fn start(nodes: &[String], shared: bool, scratch: &Scratch, out: &str, go: &str) -> Running {
        let mut command = redlock(nodes);
        command.arg("run");
        if shared {
            command.arg("--shared");
        }
        Running::start(
            command
                .args(["nightly", "--"])
                .args(job_until(&scratch.path(out), &scratch.path(go))),
        )
    }

    /// A one-shot run (`--no-wait`) of a job that only says it ran.
    fn try_run(nodes: &[String], shared: bool, scratch: &Scratch, out: &str) -> Finished {
        let mut command = redlock(nodes);
        command.arg("run");
        if shared {
            command.arg("--shared");
        }
        finish(
            command
                .args(["nightly", "--no-wait", "--"])
                .args(sh(&format!(
                    "echo ran >> '{}'",
                    scratch.path(out).display()
                ))),
        )
    }

    #[test]
    fn shared_runs_run_together_and_never_beside_an_exclusive_one() {
        let (_cluster, nodes) = masters(3);
        let scratch = Scratch::new();

        // Two shared runs hold it at once: each job runs while the other's still waits for `go`.
        let first = start(&nodes, true, &scratch, "first", "go");
        let second = start(&nodes, true, &scratch, "second", "go");
        scratch.await_file("first");
        scratch.await_file("second");
        // An exclusive run is busy while they hold it, and a one-shot one never holds them up.
        try_run(&nodes, false, &scratch, "exclusive").assert_code(BUSY);
        assert_eq!(scratch.read("exclusive"), "");
        try_run(&nodes, true, &scratch, "third").assert_code(0);
        assert_eq!(
            scratch.read("third"),
            "ran\n",
            "a third shared run got in beside them"
        );

        // An exclusive run that waits: new shared runs wait behind it.
        let writer = start(&nodes, false, &scratch, "writer", "writer-go");
        // Until the waiting run registered, a shared run still gets in; from then on, none does.
        let tries = std::cell::Cell::new(0);
        assert!(
            eventually(PATIENCE, || {
                tries.set(tries.get() + 1);
                let out = format!("late-{}", tries.get());
                try_run(&nodes, true, &scratch, &out).code() == BUSY
                    && scratch.read(&out).is_empty()
            }),
            "shared runs kept getting in while an exclusive run waited"
        );
        assert_eq!(
            scratch.read("writer"),
            "",
            "the exclusive run waits for the shared ones"
        );
        scratch.touch("go");
        first.wait().assert_code(0);
        second.wait().assert_code(0);
        scratch.await_file("writer");
        try_run(&nodes, true, &scratch, "beside-writer").assert_code(BUSY);
        assert_eq!(scratch.read("beside-writer"), "");
        scratch.touch("writer-go");
        writer.wait().assert_code(0);
        try_run(&nodes, true, &scratch, "after").assert_code(0);
        assert_eq!(scratch.read("after"), "ran\n");
    }
}

mod permits {
    use super::*;

    /// `redlock run --permits N NAME` (with extra flags) of a job that appends to `out` and
    /// waits for `go`.
    fn start(nodes: &[String], permits: &str, scratch: &Scratch, out: &str) -> Running {
        Running::start(
            redlock(nodes)
                .args([
                    "run",
                    "--permits",
                    permits,
                    "--watchdog-timeout",
                    "3s",
                    "uploads",
                    "--",
                ])
                .args(job_until(&scratch.path(out), &scratch.path("go"))),
        )
    }

    /// A one-shot run (`--no-wait`) of a job that only says it ran.
    fn try_run(nodes: &[String], permits: &str, scratch: &Scratch, out: &str) -> Finished {
        finish(
            redlock(nodes)
                .args(["run", "--permits", permits, "--no-wait", "uploads", "--"])
                .args(sh(&format!(
                    "echo ran >> '{}'",
                    scratch.path(out).display()
                ))),
        )
    }

    /// Two runs of `--permits 2` holding both permits (their jobs wait for `go`): a third is
    /// busy and runs nothing, and the status says two of two are out.
    fn two_of_two_out(nodes: &[String], scratch: &Scratch) -> (Running, Running) {
        let first = start(nodes, "2", scratch, "first");
        let second = start(nodes, "2", scratch, "second");
        scratch.await_file("first");
        scratch.await_file("second");
        try_run(nodes, "2", scratch, "third").assert_code(BUSY);
        assert_eq!(scratch.read("third"), "", "two of two permits out");
        let status = permits_status(nodes);
        assert_eq!(
            (&status["permits"], &status["acquired"]),
            (&serde_json::json!(2), &serde_json::json!(2)),
            "{status}"
        );
        (first, second)
    }

    fn permits_status(nodes: &[String]) -> serde_json::Value {
        let done = finish(redlock(nodes).args(["status", "--permits", "uploads", "--json"]));
        done.assert_code(0);
        serde_json::from_str(done.stdout.trim()).unwrap_or_else(|err| panic!("{err}: {done:#?}"))
    }

    #[test]
    fn at_most_n_runs_at_once_and_a_killed_runs_permit_comes_back() {
        let (_cluster, nodes) = masters(1);
        let scratch = Scratch::new();
        let (first, second) = two_of_two_out(&nodes, &scratch);
        // A run that disagrees on the count is refused, not let in.
        let disagrees = try_run(&nodes, "3", &scratch, "disagrees");
        disagrees.assert_code(USAGE);
        assert!(
            disagrees.stderr.contains("has 2 permits, not 3"),
            "{disagrees:#?}"
        );

        // The first run is killed: its permit comes back within its lease (3 s), while the
        // second run keeps its own renewed.
        first.signal(Signal::SIGKILL);
        assert!(
            eventually(PATIENCE, || try_run(&nodes, "2", &scratch, "after-kill")
                .code()
                == 0),
            "the killed run's permit came back"
        );
        assert_eq!(
            scratch.read("after-kill"),
            "ran\n",
            "once, when the permit was free"
        );
        // Deleted while the second run holds its permit: that run is told, and its job stopped.
        let deleted =
            finish(redlock(&nodes).args(["unlock", "--force", "--permits", "uploads", "--json"]));
        deleted.assert_code(0);
        assert!(deleted.stdout.contains("\"deleted\":true"), "{deleted:#?}");
        second.wait().assert_code(LOST);
        let status = permits_status(&nodes);
        assert_eq!(
            (&status["set"], &status["acquired"]),
            (&serde_json::json!(false), &serde_json::json!(0)),
            "{status}"
        );
    }

    #[test]
    fn on_three_masters_at_most_n_runs_at_once() {
        // 2 permits on 3 masters: each granted by all three (a majority is not sound).
        let (_cluster, nodes) = masters(3);
        let scratch = Scratch::new();
        let (first, second) = two_of_two_out(&nodes, &scratch);
        try_run(&nodes, "3", &scratch, "disagrees").assert_code(USAGE);
        scratch.touch("go");
        first.wait().assert_code(0);
        second.wait().assert_code(0);
        try_run(&nodes, "2", &scratch, "after").assert_code(0);
        assert_eq!(scratch.read("after"), "ran\n");
        let deleted =
            finish(redlock(&nodes).args(["unlock", "--force", "--permits", "uploads", "--json"]));
        deleted.assert_code(0);
        let status = permits_status(&nodes);
        assert_eq!(
            (&status["set"], &status["permits"]),
            (&serde_json::json!(false), &serde_json::json!(0)),
            "{status}"
        );
    }
}
