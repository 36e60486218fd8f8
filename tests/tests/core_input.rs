//! Bad input gets a typed error, never a panic and never a key; secrets never reach messages.

use std::time::Duration;

use redlock_core::{Error, InvalidArgument, Redlock, RedlockConfig, RetryPolicy};
use redlock_testkit::{error_chain, CapturedLogs, RedisCluster, RedisServer};

/// A client with no retries (the outcomes below are not retryable, or are the first
/// attempt's) and a per-node timeout a busy machine cannot trip, its first request included
/// (it connects and loads the script).
fn redlock(urls: Vec<String>) -> Redlock {
    Redlock::new(RedlockConfig {
        retry: RetryPolicy::none(),
        node_timeout: Some(Duration::from_millis(500)),
        ..RedlockConfig::with_nodes(urls)
    })
    .expect("valid config")
}

#[tokio::test]
async fn each_invalid_argument_has_its_own_error_and_sends_nothing() {
    let cluster = RedisCluster::start(3);
    // The default per-node timeout (its 20 ms floor makes a 21 ms lease too short).
    let client = Redlock::new(RedlockConfig::with_nodes(cluster.urls())).expect("valid config");
    let second = Duration::from_secs(1);

    type Expectation = fn(&InvalidArgument) -> bool;
    let cases: Vec<(Result<_, Error>, Expectation)> = vec![
        (client.acquire("", second).await, |e| {
            *e == InvalidArgument::EmptyName
        }),
        (client.acquire("a", Duration::ZERO).await, |e| {
            *e == InvalidArgument::ZeroLease
        }),
        (client.acquire("a", Duration::from_millis(21)).await, |e| {
            matches!(e, InvalidArgument::LeaseTooShort { .. })
        }),
        (client.acquire_once("", second).await, |e| {
            *e == InvalidArgument::EmptyName
        }),
        (client.acquire("a", Duration::MAX).await, |e| {
            matches!(e, InvalidArgument::LeaseTooLong { .. })
        }),
    ];
    for (outcome, expected) in cases {
        match outcome {
            Err(Error::InvalidArgument(arg)) => assert!(expected(&arg), "unexpected {arg:?}"),
            other => panic!("expected an invalid argument, got {other:?}"),
        }
    }
    assert_eq!(cluster.count_keys("*"), 0, "nothing reached Redis");
}

#[test]
fn invalid_configurations_are_refused_at_construction() {
    let refused = |config: RedlockConfig| match Redlock::new(config) {
        Err(Error::InvalidArgument(arg)) => arg,
        other => panic!("expected an invalid argument, got {other:?}"),
    };
    assert_eq!(refused(RedlockConfig::default()), InvalidArgument::NoNodes);
    assert!(matches!(
        refused(RedlockConfig::with_nodes(["http://:topsecret@127.0.0.1:1"])),
        InvalidArgument::NodeUrl { index: 0, .. }
    ));
    let err = refused(RedlockConfig::with_nodes([
        "redis://127.0.0.1:1",
        "redis://:topsecret@127.0.0.1:2/notadb",
    ]));
    assert!(
        matches!(err, InvalidArgument::NodeUrl { index: 1, .. }),
        "{err:?}"
    );
    assert!(!format!("{err} {err:?}").contains("topsecret"), "{err}");
    assert!(matches!(
        refused(RedlockConfig {
            node_timeout: Some(Duration::ZERO),
            ..RedlockConfig::with_nodes(["redis://127.0.0.1:1"])
        }),
        InvalidArgument::ZeroNodeTimeout
    ));
    assert!(matches!(
        refused(RedlockConfig {
            clock_drift_factor: 1.5,
            ..RedlockConfig::with_nodes(["redis://127.0.0.1:1"])
        }),
        InvalidArgument::DriftFactor(_)
    ));
}

#[tokio::test]
async fn a_name_colliding_with_other_data_is_a_clear_error_and_the_data_survives() {
    let cluster = RedisCluster::start(3);
    for node in cluster.nodes() {
        redis::cmd("RPUSH")
            .arg("redlock:queue")
            .arg("job-1")
            .exec(&mut node.connection())
            .expect("seed a list");
    }
    let client = redlock(cluster.urls());
    let err = client
        .acquire("queue", Duration::from_secs(5))
        .await
        .expect_err("a list is not a lock");
    match &err {
        Error::WrongType { key, found } => {
            assert_eq!(key, "redlock:queue");
            assert_eq!(found, "list");
        }
        other => panic!("expected WrongType, got {other:?}"),
    }
    assert!(
        err.to_string().contains("choose another lock name"),
        "{err}"
    );
    assert!(!err.is_retryable());
    for node in cluster.nodes() {
        let len: usize = redis::cmd("LLEN")
            .arg("redlock:queue")
            .query(&mut node.connection())
            .expect("LLEN");
        assert_eq!(len, 1, "the list is untouched");
    }
}

#[tokio::test]
async fn a_collision_on_a_minority_of_nodes_is_outvoted_and_never_overwritten() {
    let cluster = RedisCluster::start(5);
    redis::cmd("HSET")
        .arg("redlock:mixed")
        .arg("field")
        .arg("value")
        .exec(&mut cluster.node(2).connection())
        .expect("seed a hash");
    let client = redlock(cluster.urls());
    let lease = client
        .acquire("mixed", Duration::from_secs(5))
        .await
        .expect("4 of 5 nodes grant");
    assert!(lease.granted_by() >= 3, "{}", lease.granted_by());
    client.release(&lease).await.expect("released");
    let kind: String = redis::cmd("TYPE")
        .arg("redlock:mixed")
        .query(&mut cluster.node(2).connection())
        .expect("TYPE");
    assert_eq!(
        kind, "hash",
        "the colliding hash is untouched by acquire and release"
    );
}

#[tokio::test]
async fn passwords_work_but_never_reach_a_log_line_or_an_error() {
    const PASSWORD: &str = "correct-horse-battery";
    let server = RedisServer::builder().password(PASSWORD).start();
    redis::cmd("ACL")
        .arg("SETUSER")
        .arg("locker")
        .arg("on")
        .arg(format!(">{PASSWORD}"))
        .arg("~redlock:*")
        .arg("+@all")
        .exec(&mut server.connection())
        .expect("create an ACL user");

    let logs = CapturedLogs::default();
    let _guard = logs.capture();

    for url in [
        server.url_with_auth(None, PASSWORD),
        server.url_with_auth(Some("locker"), PASSWORD),
    ] {
        let client = redlock(vec![url]);
        let lease = client
            .acquire("secured", Duration::from_secs(5))
            .await
            .expect("authenticated acquisition");
        client.release(&lease).await.expect("released");
    }

    let wrong = redlock(vec![server.url_with_auth(None, "not-the-password")]);
    let err = wrong
        .acquire("secured", Duration::from_secs(5))
        .await
        .expect_err("wrong password");
    let chain = error_chain(&err);
    assert!(
        matches!(err, Error::NoQuorum { answered: 0, .. }),
        "{chain}"
    );
    assert!(!chain.contains("not-the-password"), "{chain}");
    assert!(
        chain.contains(":***@"),
        "the node is named, redacted: {chain}"
    );

    let server_url = server.url_with_auth(None, PASSWORD);
    drop(server);
    let dead = redlock(vec![server_url]);
    let err = dead
        .acquire("secured", Duration::from_secs(5))
        .await
        .expect_err("server is gone");
    assert!(!format!("{err:?}").contains(PASSWORD));

    let written = logs.text();
    assert!(
        written.contains("redlock.acquire"),
        "spans were logged: {written}"
    );
    assert!(
        !written.contains(PASSWORD),
        "a password reached the log:\n{written}"
    );
}

/// Whether this build of redis-rs speaks TLS.
fn tls_compiled_in() -> bool {
    redis::Client::open("rediss://127.0.0.1:6380").is_ok()
}

/// This package's dev-dependency on `redlock-core` turns `tls-rustls` on, so its tests always
/// have TLS: a `rediss://` URL is accepted, its password hidden. The refusal without TLS is
/// `redlock-core`'s unit tests' (`node::open::tests`), which `cargo test -p redlock-core --lib`
/// builds without TLS.
#[test]
fn a_tls_url_is_accepted_with_its_password_hidden() {
    assert!(
        tls_compiled_in(),
        "redlock-tests builds redlock-core with tls-rustls, yet redis-rs refuses rediss://"
    );
    let redlock = Redlock::new(RedlockConfig::with_nodes([
        "rediss://:topsecret@127.0.0.1:6380",
    ]))
    .expect("accepted with TLS compiled in");
    let shown = redlock
        .nodes()
        .iter()
        .next()
        .expect("one node")
        .address()
        .to_string();
    assert_eq!(shown, "rediss://:***@127.0.0.1:6380");
}
