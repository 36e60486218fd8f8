//! `redlock run --no-wait` does not wait for a holder, but a split vote is no holder: runs
//! started together on several hosts never all give up, also with a minority of masters down.

mod support;

use redlock_testkit::{eventually, Monitor};
use support::*;

const KEY: &str = "redlock:report";

/// A rival's partial grant of `KEY` on master `node`, as an attempt that got only a minority
/// leaves it until its undo arrives.
fn partial_grant(cluster: &redlock_testkit::RedisCluster, node: usize, owner: &str) {
    redis::pipe()
        .hset(KEY, owner, 1)
        .pexpire(KEY, 60_000)
        .query::<()>(&mut cluster.node(node).connection())
        .expect("partial grant");
}

#[test]
fn a_split_vote_is_retried_until_the_lock_is_taken() {
    let (cluster, nodes) = masters(3);
    let scratch = Scratch::new();
    // Two rivals' partial grants on two of the three masters: a majority holds the lock for
    // someone, but for no one owner.
    partial_grant(&cluster, 0, "rival-a");
    partial_grant(&cluster, 1, "rival-b");
    let free = Monitor::start(cluster.node(2).port()).expect("MONITOR");
    let attempts = || {
        free.lines()
            .iter()
            .filter(|line| line.contains(KEY) && line.contains("EVAL"))
            .count()
    };

    let run = Running::start(
        redlock(&nodes)
            .args(["run", "report", "--no-wait", "--"])
            .args(sh(&format!(
                "echo ran >> '{}'",
                scratch.path("out").display()
            ))),
    );
    // Its first attempt found the split (it ran on the free master too); then the rivals undo
    // their grants, as they do at once.
    assert!(eventually(PATIENCE, || attempts() >= 1), "no attempt");
    for node in 0..2 {
        redis::cmd("DEL")
            .arg(KEY)
            .query::<()>(&mut cluster.node(node).connection())
            .expect("DEL");
    }
    run.wait().assert_code(0);
    assert_eq!(scratch.read("out"), "ran\n", "the job ran");
    assert!(
        attempts() >= 2,
        "the split was tried again: {:?}",
        free.lines()
    );
}

#[test]
fn a_split_that_does_not_clear_is_busy_after_a_bounded_retry() {
    let (cluster, nodes) = masters(3);
    partial_grant(&cluster, 0, "rival-a");
    partial_grant(&cluster, 1, "rival-b");
    let busy = finish(redlock(&nodes).args(["run", "report", "--no-wait", "-v", "--", "true"]));
    busy.assert_code(BUSY);
}

#[test]
fn runs_started_together_with_a_master_down_never_all_give_up() {
    let (cluster, nodes) = masters(3);
    cluster.kill(2);
    for round in 0..5 {
        let scratch = Scratch::new();
        let job = job_until(&scratch.path("out"), &scratch.path("go"));
        let mut runs: Vec<Running> = (0..3)
            .map(|_| {
                Running::start(
                    redlock(&nodes)
                        .args(["run", "report", "--no-wait", "--"])
                        .args(&job),
                )
            })
            .collect();
        // The job waits for `go`: the others must give up (busy) while it holds the lock.
        let gave_up = |runs: &mut Vec<Running>| {
            runs.iter_mut()
                .map(Running::has_exited)
                .filter(|gone| *gone)
                .count()
        };
        assert!(
            eventually(PATIENCE, || gave_up(&mut runs) >= 2),
            "round {round}: {} of 3 gave up",
            gave_up(&mut runs)
        );
        scratch.touch("go");
        let codes: Vec<i32> = runs.into_iter().map(|run| run.wait().code()).collect();
        let mut sorted = codes.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, [0, BUSY, BUSY], "round {round}: {codes:?}");
        assert_eq!(
            scratch.read("out"),
            "ran\n",
            "round {round}: the job ran once"
        );
    }
}
