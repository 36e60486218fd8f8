//! A password in a node URL never shows: not in any public type's `Debug` (so not through a
//! `#[tracing::instrument]` that records an `RLock`), not in any error, not in a log line. And
//! the client reports nodes it cannot reach, or whose password is wrong, as soon as it is
//! built, without failing while a majority answers.
//!
//! Before the fix, `RedlockConfig` derived `Debug` over the raw URLs, and `format!("{client:?}")`
//! or `format!("{lock:?}")` printed `redis://:password@...`.

use std::time::Duration;

use redlock_reentrant::{Error, LockClient, RedlockConfig, RetryPolicy};
use redlock_testkit::{error_chain, eventually_async, CapturedLogs, RedisCluster, RedisServer};

const PASSWORD: &str = "tr0ub4dor-and-3";

fn assert_hidden(what: &str, shown: &str) {
    assert!(
        !shown.contains(PASSWORD),
        "{what} shows the password: {shown}"
    );
}

#[tracing::instrument]
fn instrumented(lock: &redlock_reentrant::RLock) {
    tracing::info!("inside");
}

#[tokio::test(flavor = "current_thread")]
async fn no_public_type_error_or_log_line_shows_a_password() {
    let logs = CapturedLogs::default();
    let _guard = logs.capture();
    let good = RedisServer::builder().password(PASSWORD).start();
    let url = good.url_with_auth(None, PASSWORD);

    let builder = LockClient::builder()
        .nodes([url.clone()])
        .retry(RetryPolicy::none());
    assert_hidden("LockClientBuilder", &format!("{builder:?} {builder:#?}"));
    let client = builder.build().await.expect("client");
    let lock = client.get_lock("secret");
    let guard = lock.acquire().await.expect("held");
    let owner = client.new_owner();
    let config = RedlockConfig::with_nodes([url.clone()]);
    let readiness = client.readiness().await;
    assert!(readiness.is_ready());
    for (what, shown) in [
        ("LockClient", format!("{client:?} {client:#?}")),
        ("RLock", format!("{lock:?} {lock:#?}")),
        ("LockGuard", format!("{guard:?} {guard:#?}")),
        ("LockOwner", format!("{owner:?}")),
        ("RedlockConfig", format!("{config:?} {config:#?}")),
        ("Redlock", format!("{:?}", client.redlock())),
        ("Watchdog", format!("{:?}", client.watchdog())),
        ("Readiness", format!("{readiness:?}")),
    ] {
        assert_hidden(what, &shown);
        assert!(shown.len() > 8, "{what} shows something: {shown}");
    }
    instrumented(&lock);
    guard.unlock().await.expect("unlock");

    // Errors: a wrong password, a node that is gone, an unusable URL. The wrong password is for
    // a second server: one server listed twice would be refused outright (it would vote twice).
    let other = RedisServer::builder().password(PASSWORD).start();
    let wrong = LockClient::builder()
        .nodes([other.url_with_auth(None, "wrong-one"), url.clone()])
        .retry(RetryPolicy::none())
        .build()
        .await
        .expect("a client builds while some nodes fail");
    let refused = wrong.readiness().await;
    let failure = refused
        .failures()
        .next()
        .expect("the wrong password is reported");
    assert_hidden("a wrong password's failure", &error_chain(failure));
    let err = wrong
        .get_lock("secret")
        .lock()
        .await
        .expect_err("2 nodes, one refuses: no majority");
    assert!(matches!(err, Error::NoQuorum { .. }), "{err:?}");
    assert_hidden("NoQuorum", &error_chain(&err));

    drop(good);
    let err = lock.lock().await.expect_err("the server is gone");
    assert_hidden("a dead node's error", &error_chain(&err));
    let err = LockClient::connect([format!("redis://:{PASSWORD}@127.0.0.1:notaport")])
        .await
        .expect_err("an unusable URL");
    assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
    assert_hidden("an unusable URL's error", &error_chain(&err));

    let written = logs.text();
    assert!(written.contains("inside"), "the instrumented span logged");
    assert!(
        written.contains("a lock node does not answer"),
        "the build reported the refused node: {written}"
    );
    assert_hidden("the log", &written);
}

/// On a current-thread runtime, so the log capture sees what the client's tasks write.
#[tokio::test(flavor = "current_thread")]
async fn a_client_reports_unreachable_nodes_when_built_and_on_demand() {
    let cluster = RedisCluster::start(3);
    cluster.kill(2);
    let logs = CapturedLogs::default();
    let _guard = logs.capture();
    let client = LockClient::builder()
        .nodes(cluster.urls())
        .build()
        .await
        .expect("a majority is enough to build");
    // Built once a majority answered; the dead node is reported as soon as it fails.
    let dead = format!("127.0.0.1:{}", cluster.node(2).port());
    assert!(
        eventually_async(Duration::from_secs(5), || {
            let written = logs.text();
            written.contains("a lock node does not answer") && written.contains(&dead)
        })
        .await,
        "the dead node is named: {}",
        logs.text()
    );
    let readiness = client.readiness().await;
    assert!(readiness.is_ready());
    assert_eq!(readiness.reachable(), 2);
    let failure = readiness.failures().next().expect("one failure");
    assert_eq!(failure.index, 2);

    // Locking works on the majority; a second dead node makes the client not ready.
    let lock = client.get_lock("ready");
    lock.lock().await.expect("2 of 3");
    lock.unlock().await.expect("unlock");
    cluster.kill(1);
    assert!(!client.readiness().await.is_ready());
    cluster.restart(1);
    cluster.restart(2);
    let readiness = client.readiness().await;
    assert_eq!(readiness.reachable(), 3, "{readiness:?}");
}
