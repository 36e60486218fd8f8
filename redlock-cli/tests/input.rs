//! Bad input gets one line and a distinct exit code, never a panic, never a lock left behind;
//! and a password in a node URL is never printed.

mod support;

use redlock_testkit::RedisServer;
use support::*;

/// Asserts redlock said exactly one line, its own, and did not panic.
fn one_line(done: &Finished) {
    let lines: Vec<&str> = done.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{done:#?}");
    assert!(lines[0].starts_with("redlock: "), "{done:#?}");
    assert!(!done.stderr.contains("panicked"), "{done:#?}");
}

#[test]
fn bad_command_lines_get_one_line_and_the_usage_code() {
    let (_masters, nodes) = masters(1);
    let cases: &[&[&str]] = &[
        &["run", "job", "--"],
        &["run", "job", "true"],
        &["run", "job", "--lease", "0s", "--", "true"],
        &["run", "job", "--wait", "soon", "--", "true"],
        &["run", "job", "--wait", "1s", "--no-wait", "--", "true"],
        &["run", "job", "--on-lost", "maybe", "--", "true"],
        &["run", "", "--", "true"],
        &["run", "fencing-counter", "--", "true"],
        &["unlock", "job"],
        &["frobnicate"],
    ];
    for args in cases {
        let done = finish(redlock(&nodes).args(*args));
        done.assert_code(USAGE);
        one_line(&done);
    }
}

#[test]
fn missing_bad_and_unreachable_nodes_are_told_apart() {
    let none = finish(redlock(&[]).args(["run", "job", "--", "true"]));
    none.assert_code(USAGE);
    one_line(&none);
    assert!(none.stderr.contains("REDLOCK_NODES"), "{none:#?}");

    let bad = finish(redlock(&["redis://:hunter2@[not-a-host".to_owned()]).args(["status", "x"]));
    bad.assert_code(USAGE);
    one_line(&bad);

    let gone = RedisServer::start();
    let url = gone.url_with_auth(None, "hunter2");
    gone.kill();
    let unreachable = finish(redlock(&[url]).args(["run", "job", "--", "true"]));
    unreachable.assert_code(UNAVAILABLE);
    one_line(&unreachable);

    // TLS is built in: a `rediss://` node that does not answer is unreachable, not unusable.
    let gone_tls = RedisServer::start();
    let url = gone_tls.url().replacen("redis://", "rediss://", 1);
    gone_tls.kill();
    let tls = finish(redlock(&[url]).args(["status", "job"]));
    tls.assert_code(UNAVAILABLE);
    one_line(&tls);

    for done in [&bad, &unreachable] {
        assert!(!done.stderr.contains("hunter2"), "{done:#?}");
    }
}

#[test]
fn a_command_that_cannot_run_releases_the_lock() {
    let (_masters, nodes) = masters(1);
    let missing = finish(redlock(&nodes).args(["run", "job", "--", "/nonexistent/report.sh"]));
    missing.assert_code(127);
    one_line(&missing);
    let scratch = Scratch::new();
    let not_executable = scratch.path("report.sh");
    std::fs::write(&not_executable, "echo hi").expect("write");
    let denied = finish(
        redlock(&nodes)
            .args(["run", "job", "--"])
            .arg(&not_executable),
    );
    denied.assert_code(126);
    one_line(&denied);
    assert!(!locked(&nodes, "job"));
}

#[test]
fn a_name_that_collides_with_other_data_is_a_usage_error() {
    let (masters, nodes) = masters(1);
    let mut connection = masters.node(0).connection();
    redis::cmd("SET")
        .arg("redlock:taken")
        .arg("not a lock")
        .exec(&mut connection)
        .expect("set");
    let done = finish(redlock(&nodes).args(["run", "taken", "--", "true"]));
    done.assert_code(USAGE);
    one_line(&done);
    assert!(done.stderr.contains("not a lock"), "{done:#?}");
    // Another prefix is another key.
    finish(redlock(&nodes).args(["--key-prefix", "jobs:", "run", "taken", "--", "true"]))
        .assert_code(0);
}

#[test]
fn a_password_is_never_printed() {
    let server = RedisServer::builder().password("hunter2").start();
    let nodes = vec![server.url_with_auth(None, "hunter2")];
    let help = finish(redlock(&nodes).args(["run", "--help"]));
    help.assert_code(0);
    let verbose = finish(redlock(&nodes).args(["-vv", "run", "job", "--", "true"]));
    verbose.assert_code(0);
    assert!(verbose.stderr.contains("127.0.0.1"), "{verbose:#?}");
    let wrong = vec![server.url_with_auth(None, "hunter3")];
    let refused = finish(redlock(&wrong).args(["-v", "status", "job"]));
    refused.assert_code(UNAVAILABLE);
    // A typo makes the URL an argument clap quotes back.
    let typo = finish(redlock(&[]).args(["--nodes=", &nodes[0], "status", "job"]));
    typo.assert_code(USAGE);
    one_line(&typo);
    assert!(typo.stderr.contains("'redis://***"), "{typo:#?}");
    for done in [&help, &verbose, &refused, &typo] {
        let said = format!("{}{}", done.stdout, done.stderr);
        assert!(!said.contains("hunter"), "{done:#?}");
    }
}

#[test]
fn status_and_unlock_answer_in_text() {
    let (_masters, nodes) = masters(3);
    let free = finish(redlock(&nodes).args(["status", "report"]));
    free.assert_code(0);
    assert!(
        free.stdout.starts_with("report: free; ") && free.stdout.contains("3 of 3 nodes answered"),
        "{free:#?}"
    );
    let gone = finish(redlock(&nodes).args(["unlock", "--force", "report"]));
    gone.assert_code(0);
    assert_eq!(
        gone.stdout,
        "report: was not locked on a majority (anything a minority held is deleted too)\n"
    );
}

#[test]
fn status_says_undecided_when_the_silent_nodes_could_make_it_held() {
    let (masters, nodes) = masters(3);
    let scratch = Scratch::new();
    let holder = holding(&nodes, "report", &scratch);
    // Held on all three. One is stopped and the key vanishes from another: of the two that
    // answer, one holds it, and the silent one could make a majority.
    masters.stop(0);
    let mut connection = masters.node(1).connection();
    redis::cmd("DEL")
        .arg("redlock:report")
        .exec(&mut connection)
        .expect("del");
    let seen = status(&nodes, "report");
    assert_eq!(seen["locked"], false, "{seen}");
    assert_eq!(seen["undecided"], true, "{seen}");
    assert_eq!(seen["held_on"], 1, "{seen}");
    assert_eq!(seen["nodes_answered"], 2, "{seen}");
    let text = finish(redlock(&nodes).args(["status", "report"]));
    assert!(
        text.stdout
            .contains("undecided: held on 1 of 3 nodes, 1 did not answer"),
        "{text:#?}"
    );
    masters.resume(0);
    scratch.touch("go");
    // The holder may or may not have learnt of the vanished key by now: either way it ends.
    let code = holder.wait().code();
    assert!(code == 0 || code == LOST, "exit {code}");
}
