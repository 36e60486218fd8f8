//! A retried unlock whose first replies were lost does not report a false "not owner".

use std::time::Duration;

use redlock_reentrant::{Error, LockClient, RetryPolicy};
use redlock_tests::{eventually_async, RedisCluster};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unlock_retried_after_its_replies_were_lost_succeeds() {
    let cluster = RedisCluster::start(5);
    let client = LockClient::builder()
        .nodes(cluster.urls())
        .node_timeout(Duration::from_millis(100))
        .retry(RetryPolicy::none())
        .build()
        .await
        .expect("client");
    let lock = client.get_lock("flaky");
    lock.lock().await.expect("lock");

    // A majority stops answering: the unlock reaches them (queued in their sockets), but no
    // reply comes back in time.
    for node in 0..3 {
        cluster.stop(node);
    }
    let first = lock.unlock().await;
    assert!(
        matches!(first, Err(Error::NoQuorum { answered: 2, .. })),
        "{first:?}"
    );
    for node in 0..3 {
        cluster.resume(node);
    }
    assert!(
        eventually_async(Duration::from_secs(5), || cluster
            .count_keys("redlock:flaky")
            == 0)
        .await,
        "every node applied the first unlock once it resumed"
    );

    // Every node already applied it. Without the request id they would all say "not owner";
    // with it they repeat their first answer.
    lock.unlock()
        .await
        .expect("the retry gets the first attempt's answers");
    assert!(
        matches!(lock.unlock().await, Err(Error::NotOwner { .. })),
        "and it is over now"
    );
    assert_eq!(cluster.count_keys("redlock:flaky"), 0);
}
