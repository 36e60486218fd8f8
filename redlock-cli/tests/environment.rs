//! `redlock` reads the environment as the library does (`LockClientBuilder::from_env`), so a
//! service and its cron job sharing one environment lock the same keys the same way.

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
