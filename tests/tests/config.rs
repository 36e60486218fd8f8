//! Configuration from a service's own file (serde: JSON and TOML) and from `REDLOCK_*`
//! environment variables: every setting reaches the client, unknown fields and bad values are
//! refused with an error that names the setting, and a password never shows.

use std::collections::HashMap;
use std::time::Duration;

use redlock_reentrant::{ConfigError, LockClientBuilder, LockClientConfig};
use redlock_testkit::RedisCluster;

const EVERY_FIELD: &str = r#"
nodes = ["redis://:hunter2@10.0.0.1:6379", "redis://10.0.0.2:6379", "redis://10.0.0.3:6379"]
key_prefix = "billing:lock:"
watchdog_timeout = "20s"
node_timeout = "50ms"
connect_timeout = "1s"
retry = { retries = 5, base_delay = "10ms", max_delay = "200ms" }
clock_drift_factor = 0.02
pool_size = 2
renew_batch_size = 100
max_hold = "1h"
replica_acks = { replicas = 1, timeout = "30ms" }
"#;

fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    move |variable| map.get(variable).cloned()
}

fn invalid_setting(err: ConfigError) -> String {
    match err {
        ConfigError::Invalid { setting, .. } | ConfigError::Missing { setting } => setting,
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn every_field_of_a_toml_file_reaches_the_client_configuration() {
    let config: LockClientConfig = toml::from_str(EVERY_FIELD).expect("parses");
    assert_eq!(config.watchdog_timeout, Some(Duration::from_secs(20)));
    assert_eq!(config.node_timeout, Some(Duration::from_millis(50)));
    let shown = format!("{config:?}");
    assert!(!shown.contains("hunter2"), "{shown}");

    let builder = config.into_builder().expect("usable");
    let shown = format!("{builder:?}");
    assert!(!shown.contains("hunter2"), "{shown}");
    for expected in [
        "billing:lock:",
        "20s",
        "50ms",
        "1s",
        "retries: 5",
        "10ms",
        "200ms",
        "0.02",
        "pool_size: 2",
        "batch_size: 100",
        "3600s",
        "replicas: 1",
        "30ms",
    ] {
        assert!(shown.contains(expected), "{expected} missing from {shown}");
    }
}

#[test]
fn json_works_too_and_unknown_fields_are_refused_by_name() {
    let config: LockClientConfig =
        serde_json::from_str(r#"{"nodes": ["redis://127.0.0.1:6379"], "key_prefix": "x:"}"#)
            .expect("parses");
    assert_eq!(config.key_prefix.as_deref(), Some("x:"));
    let misspelt = serde_json::from_str::<LockClientConfig>(
        r#"{"nodes": ["redis://127.0.0.1:6379"], "watchdog_timout": "30s"}"#,
    )
    .expect_err("refused");
    assert!(
        misspelt.to_string().contains("watchdog_timout"),
        "{misspelt}"
    );
    let nested = toml::from_str::<LockClientConfig>(
        "nodes = [\"redis://h:1\"]\nretry = { retries = 1, delay = \"1s\" }",
    )
    .expect_err("refused");
    assert!(nested.to_string().contains("delay"), "{nested}");
    let bad_duration =
        toml::from_str::<LockClientConfig>("nodes = [\"redis://h:1\"]\nnode_timeout = \"fast\"")
            .expect_err("refused");
    assert!(
        bad_duration.to_string().contains("node_timeout"),
        "{bad_duration}"
    );
}

#[test]
fn values_that_cannot_work_name_their_field_and_hide_passwords() {
    let base = || -> LockClientConfig {
        toml::from_str("nodes = [\"redis://:hunter2@10.0.0.1:6379\"]").expect("parses")
    };
    let cases: Vec<(LockClientConfig, &str)> = vec![
        (LockClientConfig::default(), "nodes"),
        (
            LockClientConfig {
                node_timeout: Some(Duration::ZERO),
                ..base()
            },
            "node_timeout",
        ),
        (
            LockClientConfig {
                watchdog_timeout: Some(Duration::ZERO),
                ..base()
            },
            "watchdog_timeout",
        ),
        (
            LockClientConfig {
                clock_drift_factor: Some(1.5),
                ..base()
            },
            "clock_drift_factor",
        ),
        (
            LockClientConfig {
                pool_size: Some(0),
                ..base()
            },
            "pool_size",
        ),
        (
            LockClientConfig {
                nodes: vec![
                    "redis://:hunter2@10.0.0.1:6379".into(),
                    "mysql://:hunter2@10.0.0.2".into(),
                ],
                ..base()
            },
            "nodes[1]",
        ),
        (
            LockClientConfig {
                nodes: vec!["redis+cluster://:hunter2@10.0.0.1:7000".into()],
                key_prefix: Some("app{x}:".into()),
                ..base()
            },
            "key_prefix",
        ),
        (
            toml::from_str(
                "nodes = [\"redis://:hunter2@h:1\"]\nreplica_acks = { replicas = 0, timeout = \"1s\" }",
            )
            .expect("parses"),
            "replica_acks.replicas",
        ),
        (
            toml::from_str("nodes = [\"redis://:hunter2@h:1\"]\nretry = { retries = 1, base_delay = \"2s\", max_delay = \"1s\" }")
                .expect("parses"),
            "retry.base_delay",
        ),
    ];
    for (config, field) in cases {
        let err = config.into_builder().expect_err(field);
        let shown = err.to_string();
        assert!(!shown.contains("hunter2"), "{shown}");
        assert_eq!(invalid_setting(err), field, "{shown}");
    }
}

#[test]
fn the_environment_names_each_bad_variable() {
    let nodes = (
        "REDLOCK_NODES",
        "redis://:hunter2@a:6379, redis://b:6379 ,redis://c:6379",
    );
    let config = LockClientConfig::from_lookup(env(&[
        nodes,
        ("REDLOCK_WATCHDOG_TIMEOUT", "20s"),
        ("REDLOCK_KEY_PREFIX", "jobs:"),
        ("REDLOCK_NODE_TIMEOUT", "40ms"),
        ("REDLOCK_RETRIES", "7"),
        ("REDLOCK_REPLICA_ACKS", "1"),
        ("REDLOCK_REPLICA_ACKS_TIMEOUT", "25ms"),
    ]))
    .expect("parses");
    assert_eq!(config.nodes.len(), 3);
    assert_eq!(config.nodes[1], "redis://b:6379", "trimmed");
    assert_eq!(config.key_prefix.as_deref(), Some("jobs:"));
    assert_eq!(config.retry.map(|retry| retry.retries), Some(7));
    assert_eq!(
        config.replica_acks.map(|acks| acks.timeout),
        Some(Duration::from_millis(25))
    );

    for (pairs, variable) in [
        (vec![], "REDLOCK_NODES"),
        (
            vec![nodes, ("REDLOCK_WATCHDOG_TIMEOUT", "soon")],
            "REDLOCK_WATCHDOG_TIMEOUT",
        ),
        (
            vec![nodes, ("REDLOCK_NODE_TIMEOUT", "0s")],
            "REDLOCK_NODE_TIMEOUT",
        ),
        (vec![nodes, ("REDLOCK_RETRIES", "-1")], "REDLOCK_RETRIES"),
        (vec![nodes, ("REDLOCK_POOL_SIZE", "0")], "REDLOCK_POOL_SIZE"),
        (
            vec![nodes, ("REDLOCK_REPLICA_ACKS", "1")],
            "REDLOCK_REPLICA_ACKS_TIMEOUT",
        ),
        (
            vec![("REDLOCK_NODES", "redis://:hunter2@a:6379,ftp://:hunter2@b")],
            "REDLOCK_NODES (node 1)",
        ),
    ] {
        let err = LockClientBuilder::from_lookup(env(&pairs)).expect_err(variable);
        let shown = err.to_string();
        assert!(!shown.contains("hunter2"), "{shown}");
        assert_eq!(invalid_setting(err), variable, "{shown}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_built_from_a_file_locks() {
    let cluster = RedisCluster::start(3);
    let file = format!(
        "nodes = {:?}\nkey_prefix = \"from-file:\"\nwatchdog_timeout = \"5s\"",
        cluster.urls()
    );
    let config: LockClientConfig = toml::from_str(&file).expect("parses");
    let client = config
        .into_builder()
        .expect("usable")
        .build()
        .await
        .expect("client");
    assert_eq!(client.watchdog().timeout(), Duration::from_secs(5));
    // Every master connected before the first request, which otherwise connects within one
    // per-node timeout (1 % of the lease: 50 ms).
    let readiness = client.readiness().await;
    let failures: Vec<String> = readiness.failures().map(ToString::to_string).collect();
    assert!(failures.is_empty(), "masters not answering: {failures:?}");
    let lock = client.get_lock("job");
    lock.lock().await.expect("lock");
    assert!(
        redlock_testkit::eventually_async(Duration::from_secs(5), || cluster
            .count_keys("from-file:job")
            == 3)
        .await,
        "held on every master"
    );
    lock.unlock().await.expect("unlock");
    client.shutdown().await;
}

#[test]
fn nodes_may_be_one_comma_separated_string_and_a_misshapen_value_is_never_echoed() {
    let toml: LockClientConfig =
        toml::from_str("nodes = \"redis://:hunter2@10.0.0.1:6379, redis://10.0.0.2:6379\"")
            .expect("one string of URLs");
    let json: LockClientConfig = serde_json::from_str(
        r#"{"nodes": "redis://:hunter2@10.0.0.1:6379,redis://10.0.0.2:6379"}"#,
    )
    .expect("one string of URLs");
    for config in [toml, json] {
        assert_eq!(
            config.nodes,
            ["redis://:hunter2@10.0.0.1:6379", "redis://10.0.0.2:6379"]
        );
    }
    // serde_json's errors carry no excerpt of the input: what shows is ours alone.
    for misshapen in [
        r#"{"nodes": {"url": "redis://:hunter2@h:1"}}"#,
        r#"{"nodes": [["redis://:hunter2@h:1"]]}"#,
        r#"{"nodes": [{"url": "redis://:hunter2@h:1"}]}"#,
        r#"{"nodes": true}"#,
    ] {
        let err = serde_json::from_str::<LockClientConfig>(misshapen).expect_err("refused");
        let shown = err.to_string();
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("node URL"), "says what is expected: {shown}");
    }
}

#[test]
fn one_server_listed_twice_is_refused_naming_the_nodes() {
    for nodes in [
        "redis://:hunter2@10.0.0.1:6379,redis://10.0.0.2:6379,redis://10.0.0.1:6379/1",
        "redis://localhost:7000,redis://127.0.0.1:7000,redis://10.0.0.3:6379",
        "redis+cluster://:hunter2@10.0.0.1:7000?addr=10.0.0.2:7000,redis+cluster://:hunter2@10.0.0.2:7000",
    ] {
        let err = LockClientBuilder::from_lookup(env(&[("REDLOCK_NODES", nodes)]))
            .expect_err("one server votes once");
        let shown = err.to_string();
        assert_eq!(invalid_setting(err), "REDLOCK_NODES");
        assert!(shown.contains("vote twice"), "{shown}");
        assert!(!shown.contains("hunter2"), "{shown}");
    }
}

#[test]
fn a_zero_retry_pause_is_refused() {
    let config: LockClientConfig = toml::from_str(
        "nodes = [\"redis://10.0.0.1:6379\"]\nretry = { retries = 3, base_delay = \"0s\" }",
    )
    .expect("parses");
    let err = config.into_builder().expect_err("a tight retry loop");
    assert_eq!(invalid_setting(err), "retry.base_delay");
    let err = LockClientBuilder::from_lookup(env(&[
        ("REDLOCK_NODES", "redis://10.0.0.1:6379"),
        ("REDLOCK_RETRY_BASE_DELAY", "0ms"),
    ]))
    .expect_err("a tight retry loop");
    assert_eq!(invalid_setting(err), "REDLOCK_RETRY_BASE_DELAY");
}

#[test]
fn a_watchdog_lease_the_node_timeout_leaves_no_room_for_is_refused_by_name() {
    let config: LockClientConfig = toml::from_str(
        "nodes = [\"redis://10.0.0.1:6379\"]\nwatchdog_timeout = \"3s\"\nnode_timeout = \"2s\"",
    )
    .expect("parses");
    let err = config.into_builder().expect_err("cannot work");
    let shown = err.to_string();
    assert_eq!(invalid_setting(err), "watchdog_timeout");
    assert!(shown.contains("node timeout of 2s"), "{shown}");
    let err = LockClientBuilder::from_lookup(env(&[
        ("REDLOCK_NODES", "redis://10.0.0.1:6379"),
        ("REDLOCK_WATCHDOG_TIMEOUT", "3s"),
        ("REDLOCK_NODE_TIMEOUT", "2s"),
    ]))
    .expect_err("cannot work");
    assert_eq!(invalid_setting(err), "REDLOCK_WATCHDOG_TIMEOUT");
    // A lease that leaves room passes.
    let _works = LockClientBuilder::from_lookup(env(&[
        ("REDLOCK_NODES", "redis://10.0.0.1:6379"),
        ("REDLOCK_WATCHDOG_TIMEOUT", "30s"),
        ("REDLOCK_NODE_TIMEOUT", "2s"),
    ]))
    .expect("works");
}
