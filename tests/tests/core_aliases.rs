//! One server, one vote: a server reached under two names (here: directly and through a
//! proxy, two addresses the configuration cannot tell apart) is found by its run id when the
//! nodes connect, and the second name never counts. Without that, one live master listed twice
//! beside a dead one would make a majority on its own.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use redlock_reentrant::{ConnectError, Error, LockClient, NodeErrorKind, RetryPolicy};
use redlock_testkit::{FaultProxy, RedisCluster, ShardedCluster};
use redlock_tests::released_everywhere;

/// Exactly one of `client`'s first two nodes is refused when connecting, as an alias of the
/// other (whichever connected first keeps the server), not merely slow.
async fn assert_one_of_the_first_two_is_an_alias(client: &LockClient) {
    let mut refused = Vec::new();
    for (index, node) in client.redlock().nodes().iter().take(2).enumerate() {
        if let Err(err) = node.connect().await {
            let other = 1 - index;
            assert!(
                matches!(&err.kind, NodeErrorKind::Connect(cause) if matches!(**cause, ConnectError::Alias { first } if first == other)),
                "{err:?}"
            );
            refused.push(index);
        }
    }
    assert_eq!(refused.len(), 1, "exactly one of the two is refused");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_reached_under_two_names_votes_once() {
    let cluster = RedisCluster::start(2);
    let alias = FaultProxy::start(SocketAddr::from((Ipv4Addr::LOCALHOST, cluster.ports()[0])))
        .await
        .expect("proxy");
    // Master 0 twice (directly, and through the proxy), and master 1, which is down.
    let urls = vec![
        cluster.urls()[0].clone(),
        alias.url(),
        cluster.urls()[1].clone(),
    ];
    cluster.kill(1);
    let client = LockClient::builder()
        .nodes(urls)
        .retry(RetryPolicy::none())
        .build()
        .await
        .expect("the addresses differ");

    // Without the check, the one live master would answer for two of the three (the reentrant
    // script no longer grants a second copy of an attempt, but two answers still look like a
    // majority answering).
    let taken = client
        .get_lock("report")
        .try_lock(Duration::ZERO, None)
        .await;
    assert!(
        matches!(taken, Err(Error::NoQuorum { answered: 1, .. })),
        "one live server made a majority of three on its own: {taken:?}"
    );
    // One of the two names is refused as an alias of the other.
    assert_one_of_the_first_two_is_an_alias(&client).await;
    released_everywhere(&cluster, "redlock:report", Duration::from_secs(1)).await;
    client.shutdown().await;
}

/// One Redis Cluster given as two members, each with a seed of its own (the configuration
/// cannot tell they are one cluster): the second to connect finds the first's node ids and
/// never counts. Without that, the cluster would be two votes of three.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_cluster_given_as_two_members_votes_once() {
    let cluster = ShardedCluster::start(3, 0);
    let ports: Vec<u16> = cluster.nodes().iter().map(|node| node.port()).collect();
    // Two members of one cluster, through disjoint seeds, and a third member that is down.
    let urls = vec![
        format!("redis+cluster://127.0.0.1:{}", ports[0]),
        format!("redis+cluster://127.0.0.1:{}", ports[1]),
        "redis://127.0.0.1:1".to_owned(),
    ];
    let client = LockClient::builder()
        .nodes(urls)
        .node_timeout(Duration::from_millis(500))
        .retry(RetryPolicy::none())
        .build()
        .await
        .expect("the seeds differ");
    let taken = client
        .get_lock("report")
        .try_lock(Duration::ZERO, None)
        .await;
    assert!(
        matches!(taken, Err(Error::NoQuorum { answered: 1, .. })),
        "one cluster made a majority of three on its own: {taken:?}"
    );
    assert_one_of_the_first_two_is_an_alias(&client).await;
}
