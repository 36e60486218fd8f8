//! Dropping an acquisition at any await point leaves no key behind once its spawned release ran.
//!
//! Four of five masters answer through a slow link (every chunk delayed both ways) and the
//! fifth is paused, so a fan-out is decided by the slow four a few milliseconds after the grants
//! landed: the future is dropped at a random offset, before the requests leave, while the
//! grants are on the nodes and their replies on the way, or while it backs off between
//! retries. The runtime is single-threaded, so the spawned release cannot run before the test
//! has looked at the keys right after the drop: the test proves it hit the window where grants
//! were already on the nodes.

use std::time::Duration;

use redlock_core::{Redlock, RedlockConfig, RetryPolicy};
use redlock_testkit::{eventually_async, seeded_rng, RedisCluster};
use redlock_tests::{released_everywhere, SlowLinks};

const LEASE: Duration = Duration::from_secs(60);
/// Far beyond the drop offsets below (at most five link delays): the fan-outs are decided by the
/// answering majority, and a busy machine must not turn an answer into a timeout.
const NODE_TIMEOUT: Duration = Duration::from_millis(500);
/// Each way, on the links to the four answering masters.
const LINK_DELAY: Duration = Duration::from_millis(8);

#[tokio::test(flavor = "current_thread")]
async fn an_acquisition_dropped_at_random_points_leaves_no_key() {
    let mut rng = seeded_rng();
    let cluster = RedisCluster::start(5);
    let links = SlowLinks::start(&cluster, 4).await;
    let client = Redlock::new(RedlockConfig {
        node_timeout: Some(NODE_TIMEOUT),
        retry: RetryPolicy::none(),
        ..RedlockConfig::with_nodes(links.urls())
    })
    .expect("valid config");
    // Connect to every node and cache the acquire script, but not the release script: the
    // paused node must run clean-ups it has no script for (they are sent by source).
    assert_eq!(
        client.readiness().await.reachable(),
        5,
        "every node answers"
    );
    cluster.flush_scripts();
    let _warmup = client.acquire("warmup", LEASE).await.expect("all up");
    links.slow_down(LINK_DELAY);
    cluster.stop(4);

    let (mut dropped, mut dropped_holding, mut completed) = (0, 0, 0);
    for round in 0..60 {
        let name = format!("cancel:{round}");
        // From before the first send to past the whole attempt (both ways on the slow links).
        let offset = Duration::from_micros(rng.u64(0..=LINK_DELAY.as_micros() as u64 * 5));
        match tokio::time::timeout(offset, client.acquire(&name, LEASE)).await {
            Ok(Ok(lease)) => {
                completed += 1;
                client.release(&lease).await.expect("released");
            }
            Ok(Err(err)) => panic!("round {round}: unexpected {err:?}"),
            Err(_) => {
                dropped += 1;
                // Blocking on purpose: the spawned release has not run yet.
                if cluster.count_keys(&format!("redlock:{name}")) > 0 {
                    dropped_holding += 1;
                }
            }
        }
    }
    eprintln!("dropped {dropped} (holding grants: {dropped_holding}), completed {completed}");
    assert!(
        dropped_holding > 0,
        "no drop landed after a grant: the test did not exercise the dangerous window"
    );
    // On the live nodes (the paused one is not counted), then on the resumed one too.
    released_everywhere(&cluster, "redlock:cancel:*", LEASE / 3).await;
    cluster.resume(4);
    released_everywhere(&cluster, "redlock:cancel:*", LEASE / 3).await;
}

#[tokio::test(flavor = "current_thread")]
async fn an_acquisition_dropped_while_retrying_a_contended_lock_leaves_the_holder_alone() {
    let mut rng = seeded_rng();
    let cluster = RedisCluster::start(5);
    let config = RedlockConfig {
        node_timeout: Some(NODE_TIMEOUT),
        ..RedlockConfig::with_nodes(cluster.urls())
    };
    let holder = Redlock::new(config.clone()).expect("valid config");
    assert_eq!(
        holder.readiness().await.reachable(),
        5,
        "every node answers"
    );
    let rival = Redlock::new(RedlockConfig {
        retry: RetryPolicy {
            retries: 20,
            base_delay: Duration::from_millis(5),
            max_delay: Duration::from_millis(20),
        },
        ..config
    })
    .expect("valid config");
    assert_eq!(rival.readiness().await.reachable(), 5, "every node answers");
    let held = holder.acquire("contended", LEASE).await.expect("granted");
    // Decided at the first majority: the grant on every node may still be on its way.
    let values = || -> Vec<Option<String>> {
        (0..5)
            .map(|node| {
                redis::cmd("GET")
                    .arg("redlock:contended")
                    .query(&mut cluster.node(node).connection())
                    .expect("GET")
            })
            .collect()
    };
    assert!(
        eventually_async(Duration::from_secs(5), || values()
            .iter()
            .all(Option::is_some))
        .await,
        "granted on every node: {:?}",
        values()
    );
    let holder_value: String = values()[0].clone().unwrap_or_default();

    for _ in 0..30 {
        let offset = Duration::from_micros(rng.u64(0..=50_000));
        let outcome = tokio::time::timeout(offset, rival.acquire("contended", LEASE)).await;
        assert!(!matches!(outcome, Ok(Ok(_))), "the rival must never win");
    }
    tokio::task::yield_now().await;
    for node in 0..5 {
        let value: Option<String> = redis::cmd("GET")
            .arg("redlock:contended")
            .query(&mut cluster.node(node).connection())
            .expect("GET");
        assert_eq!(value.as_deref(), Some(holder_value.as_str()), "node {node}");
    }
    holder
        .release(&held)
        .await
        .expect("the holder still owns it");
    released_everywhere(&cluster, "redlock:*", LEASE / 3).await;
}
