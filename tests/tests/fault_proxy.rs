//! The fault proxy against a real redis-server: each fault does to the bytes what it says, and
//! only on the proxy it is set on.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use redis::{AsyncCommands as _, AsyncConnectionConfig, RedisResult};
use redlock_testkit::{eventually_async, Fault, FaultProxy, ProxyGrid, RedisServer};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio::time::timeout;

/// Response timeout when the reply must come.
const PATIENT: Duration = Duration::from_secs(10);
/// Response timeout when the reply must not come: the test waits this long for nothing.
const IMPATIENT: Duration = Duration::from_millis(500);
/// How long an effect that should be prompt may take (generous: the machine may be loaded).
const PROMPTLY: Duration = Duration::from_secs(5);

fn upstream(server: &RedisServer) -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, server.port()))
}

async fn connect(url: &str, response_timeout: Duration) -> RedisResult<MultiplexedConnection> {
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(2)))
        .set_response_timeout(Some(response_timeout));
    redis::Client::open(url)?
        .get_multiplexed_async_connection_with_config(&config)
        .await
}

/// A connection straight to the server, bypassing any proxy.
async fn direct(server: &RedisServer) -> MultiplexedConnection {
    connect(&server.url(), PATIENT)
        .await
        .expect("direct connection to redis-server")
}

async fn ping(con: &mut MultiplexedConnection) -> RedisResult<String> {
    redis::cmd("PING").query_async(con).await
}

async fn get(con: &mut MultiplexedConnection, key: &str) -> Option<String> {
    con.get(key).await.expect("GET on the direct connection")
}

/// Polls `key` on `con` until it has a value or [`PROMPTLY`] passes.
async fn value_soon(con: &mut MultiplexedConnection, key: &str) -> Option<String> {
    let until = Instant::now() + PROMPTLY;
    loop {
        let value = get(con, key).await;
        if value.is_some() || Instant::now() >= until {
            return value;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pass_forwards_both_ways_and_counts_connections() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(upstream(&server)).await.expect("proxy");
    assert_eq!(proxy.fault(), Fault::Pass);
    assert_eq!(proxy.addr().ip(), Ipv4Addr::LOCALHOST);
    assert_ne!(proxy.addr().port(), server.port());
    assert_eq!(
        proxy.url(),
        format!("redis://127.0.0.1:{}", proxy.addr().port())
    );
    assert_eq!(proxy.open_connections(), 0);
    // Faults are set from the test's thread, or any other.
    std::thread::scope(|s| {
        s.spawn(|| proxy.set(Fault::HoldReplies));
    });
    assert_eq!(proxy.fault(), Fault::HoldReplies);
    proxy.set(Fault::Pass);

    let mut con = connect(&proxy.url(), PATIENT).await.expect("connect");
    let () = con.set("k", "v").await.expect("SET through the proxy");
    let got: String = con.get("k").await.expect("GET through the proxy");
    assert_eq!(got, "v");
    assert_eq!(
        get(&mut direct(&server).await, "k").await.as_deref(),
        Some("v")
    );
    assert_eq!(proxy.open_connections(), 1);

    drop(con);
    assert!(
        eventually_async(PROMPTLY, || proxy.open_connections() == 0).await,
        "a connection the client closes is closed and uncounted"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delay_delays_requests_and_replies() {
    const DELAY: Duration = Duration::from_millis(300);
    let server = RedisServer::start();
    let proxy = FaultProxy::start(upstream(&server)).await.expect("proxy");
    let mut con = connect(&proxy.url(), PATIENT).await.expect("connect");
    proxy.set(Fault::Delay(DELAY));
    assert_eq!(proxy.fault(), Fault::Delay(DELAY));

    let start = Instant::now();
    assert_eq!(ping(&mut con).await.expect("PING"), "PONG");
    let round_trip = start.elapsed();
    assert!(
        round_trip >= 2 * DELAY && round_trip < PROMPTLY,
        "request and reply are each delayed by {DELAY:?}: took {round_trip:?}"
    );

    proxy.set(Fault::Pass);
    let start = Instant::now();
    assert_eq!(ping(&mut con).await.expect("PING"), "PONG");
    assert!(start.elapsed() < DELAY, "no delay after Pass");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delay_does_not_slow_reads_or_reorder() {
    // Long, so that the gap between right (2 s each) and wrong (about 3 s) dwarfs any noise.
    const DELAY: Duration = Duration::from_secs(1);
    const COMMANDS: u32 = 4;
    const SPACING: Duration = Duration::from_millis(50);
    let server = RedisServer::start();
    let proxy = FaultProxy::start(upstream(&server)).await.expect("proxy");
    let con = connect(&proxy.url(), PATIENT).await.expect("connect");
    proxy.set(Fault::Delay(DELAY));

    // Commands sent 50 ms apart. A proxy that waited out the delay before reading on (read,
    // wait, forward) would read the later ones only after 1 s, and deliver their replies only
    // after the first reply's wait: each but the first would take about 3 s.
    let start = tokio::time::Instant::now();
    let sends: Vec<_> = (0..COMMANDS)
        .map(|i| {
            let mut con = con.clone();
            tokio::spawn(async move {
                tokio::time::sleep_until(start + SPACING * i).await;
                let sent = Instant::now();
                let len: RedisResult<u32> = con.rpush("order", i).await;
                (i, len, sent.elapsed())
            })
        })
        .collect();
    for send in sends {
        let (i, len, latency) = send.await.expect("send task");
        assert_eq!(len.expect("RPUSH"), i + 1, "RPUSH {i} arrived in order");
        assert!(
            latency >= 2 * DELAY && latency < 2 * DELAY + DELAY / 2,
            "RPUSH {i} is delayed both ways, not behind the others: took {latency:?}"
        );
    }
    let order: Vec<u32> = direct(&server)
        .await
        .lrange("order", 0, -1)
        .await
        .expect("LRANGE");
    assert_eq!(order, (0..COMMANDS).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shorter_delay_does_not_let_later_bytes_overtake() {
    const DELAY: Duration = Duration::from_secs(1);
    let server = RedisServer::start();
    let proxy = FaultProxy::start(upstream(&server)).await.expect("proxy");
    let con = connect(&proxy.url(), PATIENT).await.expect("connect");
    proxy.set(Fault::Delay(DELAY));

    let first = tokio::spawn({
        let mut con = con.clone();
        async move { con.rpush::<_, _, u32>("seq", "first").await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    proxy.set(Fault::Pass);
    let sent = Instant::now();
    let mut con = con;
    let second: u32 = con.rpush("seq", "second").await.expect("RPUSH second");
    let waited = sent.elapsed();
    assert_eq!(first.await.expect("task").expect("RPUSH first"), 1);
    assert_eq!(second, 2, "the second RPUSH ran after the first");
    assert!(
        waited >= DELAY / 2,
        "the second RPUSH waited behind the delayed first: took {waited:?}"
    );
    let seq: Vec<String> = direct(&server)
        .await
        .lrange("seq", 0, -1)
        .await
        .expect("LRANGE");
    assert_eq!(seq, ["first", "second"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hold_replies_runs_commands_and_delivers_replies_in_order_on_pass() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(upstream(&server)).await.expect("proxy");
    let mut con = connect(&proxy.url(), PATIENT).await.expect("connect");
    assert_eq!(ping(&mut con).await.expect("PING"), "PONG");
    proxy.set(Fault::HoldReplies);

    let set = tokio::spawn({
        let mut con = con.clone();
        async move { con.set::<_, _, String>("held", "v").await }
    });
    let mut direct = direct(&server).await;
    assert_eq!(
        value_soon(&mut direct, "held").await.as_deref(),
        Some("v"),
        "the SET reaches the server"
    );
    // A second command behind it, so the held replies must come back in order.
    let incr = tokio::spawn(async move { con.incr::<_, _, i64>("counter", 5).await });
    assert_eq!(
        value_soon(&mut direct, "counter").await.as_deref(),
        Some("5")
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!set.is_finished(), "the SET reply is held");
    assert!(!incr.is_finished(), "the INCR reply is held");

    proxy.set(Fault::Pass);
    let set = timeout(PROMPTLY, set).await.expect("released promptly");
    assert_eq!(set.expect("task").expect("SET reply").as_str(), "OK");
    let incr = timeout(PROMPTLY, incr).await.expect("released promptly");
    assert_eq!(incr.expect("task").expect("INCR reply"), 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drop_replies_runs_commands_then_resets_the_connections_that_lost_replies() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(upstream(&server)).await.expect("proxy");
    let mut con = connect(&proxy.url(), IMPATIENT).await.expect("connect");
    assert_eq!(ping(&mut con).await.expect("PING"), "PONG");
    // A connection with no traffic during the fault: it loses nothing, so it is left alone.
    let mut idle = connect(&proxy.url(), PATIENT).await.expect("connect");
    assert_eq!(ping(&mut idle).await.expect("PING"), "PONG");
    proxy.set(Fault::DropReplies);

    let err = con
        .set::<_, _, ()>("dropped", "v")
        .await
        .expect_err("no reply comes back");
    assert!(err.is_timeout(), "the client times out: {err:?}");
    assert_eq!(
        value_soon(&mut direct(&server).await, "dropped")
            .await
            .as_deref(),
        Some("v"),
        "the server ran the SET"
    );
    assert_eq!(proxy.open_connections(), 2, "the connections stay open");

    // The reply is lost: the connection is as good as dead, and now it is.
    proxy.set(Fault::Pass);
    assert!(
        eventually_async(PROMPTLY, || proxy.open_connections() == 1).await,
        "the connection that lost a reply is reset when the fault ends"
    );
    let err = ping(&mut con)
        .await
        .expect_err("the connection that lost a reply is gone");
    assert!(
        !err.is_timeout(),
        "a connection error, not a wrong or missing reply: {err:?}"
    );
    assert_eq!(
        ping(&mut idle)
            .await
            .expect("the idle connection continues"),
        "PONG"
    );
    let mut fresh = connect(&proxy.url(), PATIENT).await.expect("reconnect");
    assert_eq!(get(&mut fresh, "dropped").await.as_deref(), Some("v"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blackhole_holds_both_ways_and_delivers_everything_when_it_heals() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(upstream(&server)).await.expect("proxy");
    let mut con = connect(&proxy.url(), PATIENT).await.expect("connect");
    assert_eq!(ping(&mut con).await.expect("PING"), "PONG");
    // A client that gives up waiting: the late reply must not put it out of step.
    let mut impatient = connect(&proxy.url(), IMPATIENT).await.expect("connect");
    assert_eq!(ping(&mut impatient).await.expect("PING"), "PONG");
    proxy.set(Fault::Blackhole);

    let set = tokio::spawn({
        let mut con = con.clone();
        async move { con.set::<_, _, String>("held", "v").await }
    });
    let err = impatient
        .incr::<_, _, i64>("counter", 1)
        .await
        .expect_err("no reply comes back");
    assert!(err.is_timeout(), "the client times out: {err:?}");
    // A new connection is accepted, and its handshake held too.
    let url = proxy.url();
    let new = tokio::spawn(async move { connect(&url, PATIENT).await });
    assert!(
        eventually_async(PROMPTLY, || proxy.open_connections() == 3).await,
        "the new connection is accepted"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut direct = direct(&server).await;
    assert_eq!(
        get(&mut direct, "held").await,
        None,
        "the SET does not reach the server while the partition lasts"
    );
    assert_eq!(get(&mut direct, "counter").await, None);
    assert!(!set.is_finished(), "no reply while the partition lasts");
    assert!(!new.is_finished(), "the handshake waits");
    assert_eq!(proxy.open_connections(), 3, "the connections stay open");

    proxy.set(Fault::Pass);
    let set = timeout(PROMPTLY, set).await.expect("delivered promptly");
    assert_eq!(
        set.expect("task")
            .expect("the SET reply, on the connection it was sent on")
            .as_str(),
        "OK"
    );
    assert_eq!(
        get(&mut direct, "held").await.as_deref(),
        Some("v"),
        "the SET ran once the partition healed"
    );
    let got: String = con.get("held").await.expect("GET on the same connection");
    assert_eq!(got, "v", "the connection is in step");
    // The timed-out INCR ran too, and its late reply went to it, not to the next command.
    let counter: i64 = impatient.incr("counter", 10).await.expect("INCR");
    assert_eq!(counter, 11, "the impatient connection is in step");
    let mut new = timeout(PROMPTLY, new)
        .await
        .expect("the handshake completes promptly")
        .expect("task")
        .expect("the new connection");
    assert_eq!(ping(&mut new).await.expect("PING"), "PONG");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_bytes_pass_from_one_fault_to_the_next() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(upstream(&server)).await.expect("proxy");
    let mut direct = direct(&server).await;
    let con = connect(&proxy.url(), PATIENT).await.expect("connect");
    let set = |key: &'static str| {
        let mut con = con.clone();
        tokio::spawn(async move { con.set::<_, _, String>(key, "v").await })
    };

    // Replies held, then a partition: they stay held.
    proxy.set(Fault::HoldReplies);
    let first = set("first");
    assert_eq!(value_soon(&mut direct, "first").await.as_deref(), Some("v"));
    proxy.set(Fault::Blackhole);
    let second = set("second");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(get(&mut direct, "second").await, None, "partitioned");
    // The partition becomes one-way: the held request goes on, the replies stay held.
    proxy.set(Fault::HoldReplies);
    assert_eq!(
        value_soon(&mut direct, "second").await.as_deref(),
        Some("v"),
        "the held request is delivered"
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !first.is_finished() && !second.is_finished(),
        "replies held"
    );
    proxy.set(Fault::Delay(Duration::from_millis(50)));
    for (name, reply) in [("first", first), ("second", second)] {
        let reply = timeout(PROMPTLY, reply).await.expect("delivered promptly");
        assert_eq!(reply.expect("task").expect(name).as_str(), "OK");
    }

    // A partition turned into DropReplies: the held request runs, its reply is lost, and the
    // connection is reset when that fault ends.
    proxy.set(Fault::Blackhole);
    let third = set("third");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(get(&mut direct, "third").await, None, "partitioned");
    proxy.set(Fault::DropReplies);
    assert_eq!(
        value_soon(&mut direct, "third").await.as_deref(),
        Some("v"),
        "the held request is delivered"
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!third.is_finished(), "its reply is dropped");
    proxy.set(Fault::Pass);
    let third = timeout(PROMPTLY, third).await.expect("fails promptly");
    let err = third.expect("task").expect_err("the connection is reset");
    assert!(!err.is_timeout(), "{err:?}");
    assert!(
        eventually_async(PROMPTLY, || proxy.open_connections() == 0).await,
        "the connection is closed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_resets_open_and_new_connections_while_it_lasts() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(upstream(&server)).await.expect("proxy");
    let mut con = connect(&proxy.url(), PATIENT).await.expect("connect");
    assert_eq!(ping(&mut con).await.expect("PING"), "PONG");
    // A raw socket too, to see the RST itself.
    let mut raw = TcpStream::connect(proxy.addr()).await.expect("raw connect");
    raw.write_all(b"PING\r\n").await.expect("raw PING");
    let mut buf = [0; 64];
    let n = raw.read(&mut buf).await.expect("raw PONG");
    assert_eq!(&buf[..n], b"+PONG\r\n");
    assert_eq!(proxy.open_connections(), 2);

    proxy.set(Fault::Reset);
    // Without any traffic on them.
    assert!(
        eventually_async(PROMPTLY, || proxy.open_connections() == 0).await,
        "open connections are closed at once"
    );
    let read = raw.read(&mut buf).await;
    assert_eq!(
        read.as_ref().map_err(std::io::Error::kind).err(),
        Some(std::io::ErrorKind::ConnectionReset),
        "a RST, not a FIN: {read:?}"
    );
    let started = Instant::now();
    let err = ping(&mut con).await.expect_err("the open connection fails");
    assert!(
        !err.is_timeout() && started.elapsed() < PROMPTLY,
        "it fails at once, not by timing out: {err:?}"
    );
    assert!(err.is_connection_dropped(), "{err:?}");

    let err = connect(&proxy.url(), PATIENT)
        .await
        .expect_err("new connections are reset");
    assert!(err.is_connection_dropped(), "{err:?}");
    // Accepted and reset at once: the RST may even beat `connect` returning.
    let read = match TcpStream::connect(proxy.addr()).await {
        Ok(mut raw) => raw.read(&mut buf).await,
        Err(err) => Err(err),
    };
    assert_eq!(
        read.as_ref().map_err(std::io::Error::kind).err(),
        Some(std::io::ErrorKind::ConnectionReset),
        "a new connection is reset: {read:?}"
    );

    proxy.set(Fault::Pass);
    let mut con = connect(&proxy.url(), PATIENT).await.expect("reconnect");
    assert_eq!(ping(&mut con).await.expect("PING"), "PONG");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_crash_closes_clients_and_restart_serves_new_ones() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(upstream(&server)).await.expect("proxy");
    let mut con = connect(&proxy.url(), PATIENT).await.expect("connect");
    let () = con.set("k", "v").await.expect("SET");

    tokio::task::block_in_place(|| server.kill());
    let started = Instant::now();
    let err = ping(&mut con).await.expect_err("the server is gone");
    assert!(
        !err.is_timeout() && started.elapsed() < PROMPTLY,
        "the client side is closed, not left hanging: {err:?}"
    );
    assert!(
        eventually_async(PROMPTLY, || proxy.open_connections() == 0).await,
        "the proxied connection is closed"
    );
    let err = connect(&proxy.url(), PATIENT)
        .await
        .expect_err("nothing listens upstream");
    assert!(!err.is_timeout(), "closed at once: {err:?}");

    tokio::task::block_in_place(|| server.restart());
    let mut con = connect(&proxy.url(), PATIENT).await.expect("reconnect");
    assert_eq!(ping(&mut con).await.expect("PING"), "PONG");
    let value: Option<String> = con.get("k").await.expect("GET");
    assert_eq!(value, None, "this is the restarted, empty server");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_proxy_closes_its_connections_and_listener() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(upstream(&server)).await.expect("proxy");
    let addr = proxy.addr();
    let mut con = connect(&proxy.url(), PATIENT).await.expect("connect");
    assert_eq!(ping(&mut con).await.expect("PING"), "PONG");

    drop(proxy);
    let err = timeout(PROMPTLY, ping(&mut con))
        .await
        .expect("fails promptly")
        .expect_err("the connection is closed");
    assert!(!err.is_timeout(), "{err:?}");
    let until = Instant::now() + PROMPTLY;
    while TcpStream::connect(addr).await.is_ok() {
        assert!(Instant::now() < until, "the listener is closed");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grid_faults_one_worker_node_pair_at_a_time() {
    let servers = [RedisServer::start(), RedisServer::start()];
    let upstreams = [upstream(&servers[0]), upstream(&servers[1])];
    let mut grid = ProxyGrid::start(2, &upstreams).await.expect("grid");
    let (urls0, urls1) = (grid.urls(0), grid.urls(1));
    assert_eq!((urls0.len(), urls1.len()), (2, 2));
    let mut all: Vec<&String> = urls0.iter().chain(&urls1).collect();
    all.sort();
    all.dedup();
    assert_eq!(all.len(), 4, "one proxy per (worker, node)");

    // Each column reaches its own node.
    for (node, url) in urls0.iter().enumerate() {
        let mut con = connect(url, PATIENT).await.expect("connect");
        let () = con.set("node", node).await.expect("SET");
    }
    for (node, server) in servers.iter().enumerate() {
        let mut direct = direct(server).await;
        assert_eq!(get(&mut direct, "node").await, Some(node.to_string()));
    }

    let mut w0n0 = connect(&urls0[0], IMPATIENT).await.expect("connect");
    let mut w0n1 = connect(&urls0[1], IMPATIENT).await.expect("connect");
    let mut w1n1 = connect(&urls1[1], IMPATIENT).await.expect("connect");
    grid.set(0, 1, Fault::Blackhole);
    assert_eq!(grid.fault(0, 1), Fault::Blackhole);
    assert_eq!(grid.fault(1, 1), Fault::Pass);
    assert_eq!(grid.fault(0, 0), Fault::Pass);
    let err = ping(&mut w0n1)
        .await
        .expect_err("worker 0 is cut off node 1");
    assert!(err.is_timeout(), "{err:?}");
    assert_eq!(
        ping(&mut w1n1)
            .await
            .expect("worker 1 still reaches node 1"),
        "PONG"
    );
    assert_eq!(
        ping(&mut w0n0)
            .await
            .expect("worker 0 still reaches node 0"),
        "PONG"
    );

    grid.set_node(0, Fault::DropReplies);
    assert_eq!(grid.fault(0, 0), Fault::DropReplies);
    assert_eq!(grid.fault(1, 0), Fault::DropReplies);
    assert_eq!(grid.fault(0, 1), Fault::Blackhole);
    grid.set_worker(1, Fault::HoldReplies);
    assert_eq!(grid.fault(1, 0), Fault::HoldReplies);
    assert_eq!(grid.fault(1, 1), Fault::HoldReplies);
    assert_eq!(grid.fault(0, 0), Fault::DropReplies);
    grid.heal();
    for worker in 0..2 {
        for node in 0..2 {
            assert_eq!(grid.fault(worker, node), Fault::Pass);
        }
    }

    assert_eq!(grid.add_worker().await.expect("add a worker"), 2);
    assert_eq!(grid.workers(), 3);
    let urls2 = grid.urls(2);
    assert_eq!(urls2.len(), 2);
    assert!(!urls2
        .iter()
        .any(|url| urls0.contains(url) || urls1.contains(url)));
    grid.set_worker(0, Fault::Blackhole);
    for url in &urls2 {
        let mut con = connect(url, PATIENT)
            .await
            .expect("the new worker connects");
        assert_eq!(ping(&mut con).await.expect("PING"), "PONG");
    }
}
