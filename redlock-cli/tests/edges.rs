//! The edges of `redlock`: it reads the environment as the library does
//! (`LockClientBuilder::from_env`), so a service and its cron job sharing one environment lock
//! the same keys the same way; settings that only fit together are fitted; a broken output
//! neither panics nor keeps the lock.

mod support;

use std::collections::HashMap;

use redlock_reentrant::LockClientBuilder;
use support::*;

/// A library client configured from `variables`, as a service reading its environment.
async fn service(variables: &HashMap<&str, String>) -> redlock_reentrant::LockClient {
    LockClientBuilder::from_lookup(|variable| variables.get(variable).cloned())
        .expect("configuration")
        .build()
        .await
        .expect("client")
}

#[tokio::test]
async fn an_empty_key_prefix_means_the_same_lock_for_the_service_and_the_command() {
    let (_masters, nodes) = masters(3);
    for prefix in ["", " "] {
        let variables = HashMap::from([
            ("REDLOCK_NODES", nodes.join(",")),
            ("REDLOCK_KEY_PREFIX", prefix.to_owned()),
        ]);
        let service = service(&variables).await;
        let guard = service.get_lock("report").acquire().await.expect("lock");
        let run = tokio::task::spawn_blocking(move || {
            finish(
                redlock(&[])
                    .env("REDLOCK_NODES", nodes_of(&variables))
                    .env("REDLOCK_KEY_PREFIX", prefix)
                    .args(["run", "report", "--no-wait", "--", "true"]),
            )
        })
        .await
        .expect("redlock");
        run.assert_code(BUSY);
        guard.unlock().await.expect("unlock");
        service.shutdown().await;
    }
}

fn nodes_of(variables: &HashMap<&str, String>) -> String {
    variables["REDLOCK_NODES"].clone()
}

#[tokio::test]
async fn the_command_takes_the_libraries_other_settings_from_the_environment() {
    let (_masters, nodes) = masters(1);
    // A setting only the library's reading knows: a zero retry pause is refused by name.
    let refused = tokio::task::spawn_blocking(move || {
        finish(redlock(&nodes).env("REDLOCK_RETRY_BASE_DELAY", "0s").args([
            "run",
            "report",
            "--no-wait",
            "--",
            "true",
        ]))
    })
    .await
    .expect("redlock");
    refused.assert_code(USAGE);
    assert!(
        refused.stderr.contains("REDLOCK_RETRY_BASE_DELAY"),
        "{refused:#?}"
    );
}

#[test]
fn status_and_unlock_work_with_a_long_node_timeout() {
    let (_masters, nodes) = masters(1);
    for command in [
        &["status", "report"][..],
        &["unlock", "--force", "report"][..],
    ] {
        let done = finish(
            redlock(&nodes)
                .args(["--node-timeout", "10s"])
                .args(command),
        );
        done.assert_code(0);
    }
}

#[test]
fn a_broken_standard_error_with_v_neither_panics_nor_keeps_the_lock() {
    let (_masters, nodes) = masters(1);
    let status = redlock(&nodes)
        .args(["-vv", "run", "report", "--", "true"])
        .stdout(std::process::Stdio::null())
        .stderr(broken_pipe())
        .status()
        .expect("redlock");
    assert_eq!(status.code(), Some(0), "the job's own code, not a panic");
    assert!(!locked(&nodes, "report"), "released");
}

#[test]
fn an_answer_that_cannot_be_written_is_a_failure() {
    let (_masters, nodes) = masters(1);
    for command in [
        &["status", "report"][..],
        &["unlock", "--force", "report"][..],
    ] {
        let status = redlock(&nodes)
            .args(command)
            .stdout(broken_pipe())
            .stderr(std::process::Stdio::null())
            .status()
            .expect("redlock");
        assert_ne!(
            status.code(),
            Some(0),
            "{command:?} said nothing and exited 0"
        );
        assert_ne!(status.code(), Some(101), "{command:?} panicked");
    }
}

/// The writing end of a pipe whose reading end is closed: every write to it fails (EPIPE).
fn broken_pipe() -> std::process::Stdio {
    let (read, write) = nix::unistd::pipe().expect("pipe");
    drop(read);
    std::process::Stdio::from(write)
}

#[test]
fn a_lock_found_lost_at_release_still_says_the_jobs_own_code() {
    let (_masters, nodes) = masters(1);
    // The job force-unlocks its own lock from outside (another client), then fails with 3:
    // redlock finds the lock lost only when it releases it.
    let run = finish(
        redlock(&nodes)
            .env("REDLOCK_BIN", env!("CARGO_BIN_EXE_redlock"))
            .args(["run", "report", "--"])
            .args(sh(
                r#""$REDLOCK_BIN" unlock --force report >/dev/null; exit 3"#,
            )),
    );
    run.assert_code(LOST);
    assert!(run.stderr.contains("the job exited with 3"), "{run:#?}");
}

#[test]
fn the_job_cannot_read_the_node_urls_from_its_supervisor_or_redlock() {
    let (_masters, nodes) = masters(1);
    // Root reads every process's environment anyway: run as a user of no privilege, as cron
    // does, from a copy of the binary that user can reach wherever the build is.
    let root =
        std::os::unix::fs::MetadataExt::uid(&std::fs::metadata("/proc/self").expect("/proc")) == 0;
    let reachable = tempfile::tempdir().expect("temporary directory");
    let binary = reachable.path().join("redlock");
    std::fs::copy(env!("CARGO_BIN_EXE_redlock"), &binary).expect("copy");
    for path in [reachable.path(), binary.as_path()] {
        std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .expect("chmod");
    }
    let mut command = if root {
        let mut command = std::process::Command::new("setpriv");
        command
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            .arg(&binary);
        command
    } else {
        std::process::Command::new(&binary)
    };
    let probe = sh(r#"
        for pid in "$PPID" "$(cut -d' ' -f4 "/proc/$PPID/stat")"; do
            if cat "/proc/$pid/environ" >/dev/null 2>&1; then echo "readable $pid"; fi
        done
        echo probed"#);
    let output = command
        .env("REDLOCK_NODES", nodes.join(","))
        .args(["run", "report", "--"])
        .args(&probe)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("redlock");
    let said = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert_eq!(
        said, "probed\n",
        "the job read an environment it must not: {said}"
    );
}

#[tokio::test]
async fn a_key_prefix_flag_is_taken_as_written() {
    let (_masters, nodes) = masters(1);
    for prefix in ["", "jobs: "] {
        let service = LockClientBuilder::default()
            .nodes(nodes.clone())
            .key_prefix(prefix)
            .build()
            .await
            .expect("client");
        let guard = service.get_lock("report").acquire().await.expect("lock");
        let flagged = nodes.clone();
        let run = tokio::task::spawn_blocking(move || {
            finish(redlock(&flagged).args(["--key-prefix", prefix]).args([
                "run",
                "report",
                "--no-wait",
                "--",
                "true",
            ]))
        })
        .await
        .expect("redlock");
        run.assert_code(BUSY);
        guard.unlock().await.expect("unlock");
        service.shutdown().await;
    }
}

#[test]
fn status_works_with_a_long_node_timeout_from_the_environment() {
    let (_masters, nodes) = masters(1);
    finish(
        redlock(&nodes)
            .env("REDLOCK_NODE_TIMEOUT", "10s")
            .args(["status", "report"]),
    )
    .assert_code(0);
}
