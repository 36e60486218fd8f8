//! `redlock run --shared NAME`: any number of shared runs at once, never beside an exclusive
//! run of NAME; an exclusive run that waits goes first.

mod support;

use redlock_testkit::eventually;
use support::*;

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
            try_run(&nodes, true, &scratch, &out).code() == BUSY && scratch.read(&out).is_empty()
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
