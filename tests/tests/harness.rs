//! The harness itself: real redis-server processes start, answer, crash, pause, restart and die.

use std::collections::HashSet;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::panic;
use std::thread;
use std::time::{Duration, Instant};

use redlock_testkit::{eventually, HarnessError, RedisCluster, RedisServer, INSTALL_HINT};

fn ping(con: &mut redis::Connection) -> redis::RedisResult<String> {
    redis::cmd("PING").query(con)
}

/// Whether something accepts TCP connections on the loopback port.
fn accepts(port: u16) -> bool {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    TcpStream::connect_timeout(&addr, Duration::from_millis(500)).is_ok()
}

#[test]
fn started_server_answers_ping() {
    let server = RedisServer::start();
    assert_eq!(server.url(), format!("redis://127.0.0.1:{}", server.port()));
    assert!(server.is_running());
    assert!(server.pid().is_some());
    assert_eq!(ping(&mut server.connection()).expect("PING"), "PONG");
    assert!(
        server.log().contains("Ready to accept connections"),
        "the server log is readable:\n{}",
        server.log()
    );
}

#[test]
fn kill_makes_connections_fail() {
    let server = RedisServer::start();
    let mut before = server.connection();
    assert_eq!(ping(&mut before).expect("PING before kill"), "PONG");

    server.kill();

    assert!(!server.is_running());
    assert!(!server.is_stopped());
    assert_eq!(server.pid(), None);
    assert!(!accepts(server.port()), "nothing listens after kill");
    let Err(err) = server.try_connection() else {
        panic!("a new connection succeeded after kill");
    };
    assert!(
        matches!(&err, HarnessError::Redis(e) if e.is_connection_refusal()),
        "refused, got {err:?}"
    );
    assert!(ping(&mut before).is_err(), "an open connection fails too");
    server.kill(); // idempotent
    assert!(!server.is_running());
}

#[test]
fn stop_times_out_and_resume_answers_again() {
    let server = RedisServer::start();
    let mut con = server.connection();
    con.set_read_timeout(Some(Duration::from_millis(200)))
        .expect("set read timeout");
    assert_eq!(ping(&mut con).expect("PING before stop"), "PONG");

    server.stop();
    assert!(server.is_stopped());
    assert!(!server.is_running());
    assert!(server.pid().is_some(), "a stopped process is still there");

    let started = Instant::now();
    let err = ping(&mut con).expect_err("a stopped server does not answer");
    assert!(err.is_timeout(), "expected a read timeout, got {err:?}");
    assert!(started.elapsed() >= Duration::from_millis(150));

    server.resume();
    assert!(server.is_running());
    assert!(!server.is_stopped());
    let mut fresh = server.connection();
    assert_eq!(ping(&mut fresh).expect("PING after resume"), "PONG");
}

#[test]
fn restart_comes_back_empty_on_the_same_port() {
    let server = RedisServer::start();
    let port = server.port();
    let old_pid = server.pid();
    let mut con = server.connection();
    redis::cmd("SET")
        .arg("survivor")
        .arg("1")
        .exec(&mut con)
        .expect("SET");

    server.restart();

    assert_eq!(server.port(), port);
    assert!(server.is_running());
    assert_ne!(server.pid(), old_pid, "a new process");
    let mut con = server.connection();
    let value: Option<String> = redis::cmd("GET")
        .arg("survivor")
        .query(&mut con)
        .expect("GET");
    assert_eq!(value, None, "no persistence: the key is gone");
    let size: usize = redis::cmd("DBSIZE").query(&mut con).expect("DBSIZE");
    assert_eq!(size, 0);
}

#[test]
fn restart_after_kill_and_while_stopped() {
    let server = RedisServer::start();
    server.kill();
    server.restart();
    assert_eq!(ping(&mut server.connection()).expect("PING"), "PONG");

    server.stop();
    server.restart();
    assert!(server.is_running());
    assert_eq!(ping(&mut server.connection()).expect("PING"), "PONG");
}

#[test]
fn restart_waits_for_its_port_to_be_free() {
    let server = RedisServer::start();
    let port = server.port();
    server.kill();
    let squatter =
        TcpListener::bind((Ipv4Addr::LOCALHOST, port)).expect("take the port while it is free");

    thread::scope(|scope| {
        // The port is let go once an attempt to restart was seen to find it taken: an event,
        // where a sleep would guess how long a loaded machine takes to start redis-server.
        let releaser = scope.spawn(|| {
            let refused = eventually(Duration::from_secs(10), || {
                server.log().contains("Address already in use")
            });
            drop(squatter);
            refused
        });
        server.restart();
        assert!(
            releaser.join().expect("releaser thread"),
            "no attempt found the port taken:\n{}",
            server.log()
        );
    });

    assert_eq!(server.port(), port);
    assert_eq!(ping(&mut server.connection()).expect("PING"), "PONG");
    assert!(
        server.log().contains("Address already in use"),
        "the first attempts hit the taken port:\n{}",
        server.log()
    );
}

/// Where the kernel's ephemeral port range starts: Linux's `ip_local_port_range`, which must be
/// readable there; elsewhere the documented default (IANA's and Linux's 32768, which the test
/// kit assumes too).
fn ephemeral_start() -> u16 {
    if cfg!(target_os = "linux") {
        let path = "/proc/sys/net/ipv4/ip_local_port_range";
        let range = std::fs::read_to_string(path)
            .unwrap_or_else(|err| panic!("{path} is not readable on Linux: {err}"));
        range
            .split_whitespace()
            .next()
            .and_then(|start| start.parse().ok())
            .unwrap_or_else(|| panic!("{path} does not start with a port: {range:?}"))
    } else {
        32_768
    }
}

/// Outgoing connections take local ports from the kernel's ephemeral range, so a server below
/// it can never find its port held by a client when it restarts.
#[test]
fn servers_listen_below_the_ephemeral_port_range() {
    let ephemeral_start = ephemeral_start();
    assert!(
        ephemeral_start > 10_000,
        "the ephemeral port range starts at {ephemeral_start}: no room below it for the test \
         servers, whose ports a client could then hold while they restart (raise it with \
         `sysctl net.ipv4.ip_local_port_range`)"
    );
    let end = ephemeral_start.min(30_000);
    let below = |port: u16| (10_000..end).contains(&port);
    // The control: a port the kernel picks itself comes from its ephemeral range, which the
    // check rejects.
    let picked = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|listener| listener.local_addr())
        .expect("a port picked by the kernel")
        .port();
    assert!(
        !below(picked),
        "a port the kernel picked ({picked}) passes the check"
    );

    let server = RedisServer::builder()
        .args(["--cluster-enabled", "yes"])
        .port_arg("--cluster-port")
        .start();
    let bus = server.arg_port("--cluster-port").expect("a bus port");
    for port in [server.port(), bus] {
        assert!(below(port), "port {port} is outside 10000..{end}");
    }
}

#[test]
fn a_port_argument_gets_a_free_port_of_its_own_kept_across_restarts() {
    let server = RedisServer::builder()
        .args(["--cluster-enabled", "yes"])
        .port_arg("--cluster-port")
        .start();
    let bus_port = |server: &RedisServer| -> u16 {
        let reply: Vec<String> = redis::cmd("CONFIG")
            .arg("GET")
            .arg("cluster-port")
            .query(&mut server.connection())
            .expect("CONFIG GET cluster-port");
        reply[1].parse().expect("a port number")
    };
    let bus = bus_port(&server);
    assert_eq!(server.arg_port("--cluster-port"), Some(bus));
    assert_eq!(
        server.arg_port("--port"),
        None,
        "not a port argument of the builder"
    );
    assert!(accepts(bus), "the server listens on its bus port {bus}");

    server.restart();

    assert_eq!(bus_port(&server), bus, "a restart keeps the bus port");
    assert_eq!(server.arg_port("--cluster-port"), Some(bus));
    assert!(accepts(bus), "listening on {bus} again after the restart");
}

#[test]
fn a_server_that_exits_on_its_own_is_not_running() {
    let server = RedisServer::start();
    // The connection drops as the server exits, so the reply is an error; ignore it.
    let _ = redis::cmd("SHUTDOWN")
        .arg("NOSAVE")
        .exec(&mut server.connection());
    assert!(eventually(Duration::from_secs(5), || !server.is_running()));
    assert_eq!(server.pid(), None);
}

#[test]
fn dropping_a_stopped_server_kills_it() {
    let server = RedisServer::start();
    let port = server.port();
    server.stop();
    assert!(accepts(port), "a stopped server still listens");
    drop(server);
    assert!(!accepts(port), "nothing listens after drop");
}

#[test]
fn five_node_cluster_starts_and_dies_on_drop() {
    let cluster = RedisCluster::start(5);
    assert_eq!(cluster.len(), 5);
    assert!(!cluster.is_empty());
    let ports = cluster.ports();
    assert_eq!(ports.iter().collect::<HashSet<_>>().len(), 5, "{ports:?}");
    assert_eq!(
        cluster.urls(),
        ports
            .iter()
            .map(|p| format!("redis://127.0.0.1:{p}"))
            .collect::<Vec<_>>()
    );
    for node in cluster.nodes() {
        assert_eq!(ping(&mut node.connection()).expect("PING"), "PONG");
    }

    cluster.stop(3);
    drop(cluster);

    for port in ports {
        assert!(!accepts(port), "port {port} still accepts after drop");
    }
}

#[test]
fn cluster_counts_keys_on_running_nodes_only() {
    let cluster = RedisCluster::start(3);
    for i in 0..3 {
        redis::cmd("SET")
            .arg(format!("lock:{i}"))
            .arg("owner")
            .exec(&mut cluster.node(i).connection())
            .expect("SET");
    }
    redis::cmd("SET")
        .arg("other")
        .arg("x")
        .exec(&mut cluster.node(0).connection())
        .expect("SET");

    assert_eq!(cluster.count_keys("lock:*"), 3);
    assert_eq!(cluster.count_keys("*"), 4);
    assert_eq!(cluster.keys_on(0, "*"), vec!["lock:0", "other"]);

    cluster.stop(1);
    assert_eq!(cluster.count_keys("lock:*"), 2, "a stopped node is skipped");
    cluster.kill(2);
    assert_eq!(cluster.count_keys("lock:*"), 1, "a killed node is skipped");
    cluster.resume(1);
    assert_eq!(cluster.count_keys("lock:*"), 2);
    cluster.restart(2);
    assert_eq!(cluster.count_keys("lock:*"), 2, "a restarted node is empty");
}

#[test]
fn cluster_flush_scripts_forgets_loaded_scripts() {
    let mut cluster = RedisCluster::start(2);
    let script = "return 1";
    let sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(script)
        .query(&mut cluster.node_mut(0).connection())
        .expect("SCRIPT LOAD");
    let exists = |cluster: &RedisCluster| -> Vec<bool> {
        redis::cmd("SCRIPT")
            .arg("EXISTS")
            .arg(&sha)
            .query(&mut cluster.node(0).connection())
            .expect("SCRIPT EXISTS")
    };
    assert_eq!(exists(&cluster), vec![true]);

    cluster.stop(1); // skipped, not waited on
    cluster.flush_scripts();

    assert_eq!(exists(&cluster), vec![false]);
}

#[test]
fn password_server_wants_auth() {
    let server = RedisServer::builder().password("s3cret").start();
    assert_eq!(server.password(), Some("s3cret"));

    let mut anonymous = redis::Client::open(server.url())
        .expect("url")
        .get_connection()
        .expect("connect");
    let err = ping(&mut anonymous).expect_err("no password, no PING");
    assert_eq!(err.code(), Some("NOAUTH"), "{err:?}");

    assert_eq!(ping(&mut server.connection()).expect("PING"), "PONG");
    let mut via_url = redis::Client::open(server.url_with_auth(None, "s3cret"))
        .expect("url")
        .get_connection()
        .expect("connect with password");
    assert_eq!(ping(&mut via_url).expect("PING"), "PONG");
}

#[test]
fn acl_user_with_awkward_password() {
    let server =
        RedisServer::start_with_args(&["--user", "alice", "on", ">p@ss:w/rd%", "~*", "+@all"]);
    let url = server.url_with_auth(Some("alice"), "p@ss:w/rd%");
    let mut con = redis::Client::open(url)
        .expect("url")
        .get_connection()
        .expect("connect as alice");
    let me: String = redis::cmd("ACL")
        .arg("WHOAMI")
        .query(&mut con)
        .expect("WHOAMI");
    assert_eq!(me, "alice");
}

#[test]
fn missing_binary_says_how_to_install() {
    let err = RedisServer::builder()
        .binary("/nonexistent/redis-server")
        .try_start()
        .expect_err("no such binary");
    assert!(
        matches!(&err, HarnessError::RedisServerMissing { binary } if binary.ends_with("redis-server")),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(message.contains(INSTALL_HINT), "{message}");
    assert!(message.contains("sudo apt-get install -y redis-server"));
    assert!(message.contains("brew install redis"));
    assert!(message.contains("REDIS_SERVER_BIN"));
    assert!(message.contains("/nonexistent/redis-server"));
}

#[test]
fn startup_failure_shows_the_log() {
    let err = RedisServer::builder()
        .arg("--no-such-directive")
        .arg("1")
        .try_start()
        .expect_err("redis-server rejects the directive");
    assert!(matches!(err, HarnessError::Exited { .. }), "{err:?}");
    assert!(err.to_string().contains("no-such-directive"), "{err}");

    let payload = panic::catch_unwind(|| {
        RedisServer::builder()
            .arg("--no-such-directive")
            .arg("1")
            .start()
    })
    .expect_err("start panics");
    let message = payload
        .downcast_ref::<String>()
        .expect("a formatted panic message");
    assert!(message.contains("no-such-directive"), "{message}");
}

#[test]
fn servers_can_be_shared_with_other_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<RedisServer>();
    assert_send_sync::<RedisCluster>();

    let cluster = std::sync::Arc::new(RedisCluster::start(2));
    let shared = std::sync::Arc::clone(&cluster);
    thread::spawn(move || shared.kill(1))
        .join()
        .expect("killer thread");
    assert!(!cluster.node(1).is_running());
    assert!(cluster.node(0).is_running());
}

#[test]
fn connection_to_a_killed_server_panics_with_the_cause() {
    let server = RedisServer::start();
    let port = server.port();
    server.kill();
    let payload = panic::catch_unwind(panic::AssertUnwindSafe(|| server.connection()))
        .err()
        .expect("connection() panics after kill");
    let message = payload
        .downcast_ref::<String>()
        .expect("a formatted panic message");
    assert!(message.contains(&port.to_string()), "{message}");
    assert!(message.to_lowercase().contains("refused"), "{message}");
}
