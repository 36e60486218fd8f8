//! Opening a node from its URL: its pool or Redis Cluster client, its options, and its password
//! kept out of the errors that echo the URL. Nothing connects yet.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use deadpool_redis::{Manager, Pool, Runtime};
use redis::cluster::ClusterClientBuilder;
use redis::AsyncConnectionConfig;

use super::connect::Connector;
use super::identity::Identities;
use super::link::Link;
use super::order::PIPELINE_BUFFER;
use super::{Endpoint, Node};
use crate::cluster::{is_cluster_url, seeds};
use crate::{InvalidArgument, NodeAddress, ReplicaAcks};

impl Node {
    /// Opens a node from its URL. Nothing is connected until the first request (or
    /// [`Node::connect`]).
    pub(crate) fn open(
        index: usize,
        url: &str,
        options: &NodeOptions,
    ) -> Result<Self, InvalidArgument> {
        let address = NodeAddress::redact(url);
        #[cfg(feature = "tls-rustls")]
        if url
            .get(..6)
            .is_some_and(|scheme| scheme.eq_ignore_ascii_case("rediss"))
        {
            // rustls picks a process-wide crypto provider from its crate features, and panics at
            // the first TLS connection when a build enables two (`ring` here, `aws-lc-rs` from
            // another crate). Installing ours first settles it; a provider the service installed
            // before stays.
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
        let unusable = |reason: String| InvalidArgument::NodeUrl {
            index,
            address: address.clone(),
            reason: hide_secret(reason, url),
        };
        let link = |connector, cluster| Link {
            index,
            address: address.clone(),
            connector,
            cluster,
            replica_acks: options.replica_acks,
            connect_timeout: options.connect_timeout,
            state: Mutex::default(),
            unresponsive: AtomicBool::new(false),
            identities: Arc::clone(&options.identities),
        };
        if is_cluster_url(url) {
            let seeds: Arc<[String]> = seeds(url).map_err(&unusable)?.into();
            // No retries: redis-rs would send a request again after a lost reply, and a
            // script that ran twice counts a hold twice. A redirection refreshes the slot map,
            // and only a request refused because its slot moves is sent again (`until_run`).
            // No response timeout of its own: each request has the caller's per-node timeout.
            let client = ClusterClientBuilder::new(seeds.iter().map(String::as_str))
                .retries(0)
                .connection_timeout(options.connect_timeout)
                .build()
                .map_err(|err| unusable(err.to_string()))?;
            return Ok(Self {
                index,
                endpoint: Endpoint::Cluster(seeds),
                link: Arc::new(link(Connector::Cluster(Box::new(client)), true)),
            });
        }
        let (pool_size, connect_timeout) = (options.pool_size, options.connect_timeout);
        let client = redis::Client::open(url).map_err(|err| unusable(err.to_string()))?;
        // Connecting is bounded by the connect timeout; every request by the caller's per-node
        // timeout (redis-rs's own response timeout would cut a longer configured one short).
        // The multiplexer's channel must never be full: a request that found it full would
        // wait for a slot and enter it on a later poll, in whatever order its task runs, and
        // could be overtaken by one made after it (see `queue_cmd`). Its blocks are allocated
        // as they fill, so a large bound costs nothing until a node stalls.
        let connection_config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(connect_timeout))
            .set_response_timeout(None)
            .set_pipeline_buffer_size(PIPELINE_BUFFER);
        let manager =
            Manager::new_with_config(client.get_connection_info().clone(), connection_config)
                .map_err(|err| unusable(err.to_string()))?;
        let pool = Pool::builder(manager)
            .max_size(pool_size.max(1))
            .runtime(Runtime::Tokio1)
            .build()
            .map_err(|err| unusable(err.to_string()))?;
        Ok(Self {
            index,
            endpoint: Endpoint::Server(Arc::new(client)),
            link: Arc::new(link(Connector::Pool(pool), false)),
        })
    }
}

/// How every node of a set is opened.
pub(crate) struct NodeOptions {
    pub(crate) pool_size: usize,
    pub(crate) connect_timeout: Duration,
    pub(crate) replica_acks: Option<ReplicaAcks>,
    pub(crate) identities: Arc<Identities>,
}

/// Removes a URL's password from a message that might echo the URL.
fn hide_secret(message: String, url: &str) -> String {
    match url::Url::parse(url)
        .ok()
        .and_then(|u| u.password().map(str::to_owned))
    {
        Some(password) if !password.is_empty() => message.replace(&password, "***"),
        _ => message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const URL: &str = "rediss://:topsecret@127.0.0.1:6380";
    const SHOWN: &str = "rediss://:***@127.0.0.1:6380";
    /// Whether this build of redis-rs speaks TLS. Built alone (`cargo test -p redlock-core
    /// --lib`), it does only with `tls-rustls`; in a workspace build another crate turns that
    /// feature on (feature unification), so the tests ask redis-rs. `cargo test -p redlock-core
    /// --lib` runs the branches without TLS, the workspace build those with it.
    fn tls_compiled_in() -> bool {
        let tls = redis::Client::open("rediss://127.0.0.1:6380").is_ok();
        // With the feature, redis-rs has TLS for sure; without it, only unification can add it.
        assert!(
            tls || !cfg!(feature = "tls-rustls"),
            "tls-rustls is on, yet redis-rs refuses rediss://"
        );
        tls
    }
    #[test]
    fn a_tls_url_without_tls_support_says_so_without_the_password() {
        let tls = tls_compiled_in();
        let options = NodeOptions {
            pool_size: 1,
            connect_timeout: Duration::from_secs(1),
            replica_acks: None,
            identities: Arc::default(),
        };
        match Node::open(0, URL, &options) {
            Ok(node) => {
                assert!(tls, "accepted without TLS support");
                assert_eq!(node.address().as_str(), SHOWN);
            }
            Err(err) => {
                assert!(!tls, "refused with TLS support: {err}");
                let shown = err.to_string();
                assert!(shown.to_lowercase().contains("tls"), "{shown}");
                assert!(!shown.contains("topsecret"), "{shown}");
            }
        }
    }

    /// The same through the public constructor: the refusal is a typed `NodeUrl` error that
    /// names the node by its redacted address.
    #[test]
    fn a_tls_url_is_accepted_with_tls_and_refused_with_a_hint_without() {
        let tls = tls_compiled_in();
        match (
            tls,
            crate::Redlock::new(crate::RedlockConfig::with_nodes([URL])),
        ) {
            (true, Ok(redlock)) => {
                let node = redlock.nodes().iter().next().expect("one node");
                assert_eq!(node.address().as_str(), SHOWN);
            }
            (
                false,
                Err(crate::Error::InvalidArgument(InvalidArgument::NodeUrl {
                    index,
                    address,
                    reason,
                })),
            ) => {
                assert_eq!(index, 0);
                assert_eq!(address.as_str(), SHOWN);
                assert!(reason.to_lowercase().contains("tls"), "{reason}");
                assert!(!reason.contains("topsecret"), "{reason}");
            }
            (tls, other) => panic!("TLS compiled in: {tls}, yet got {other:?}"),
        }
    }
}
