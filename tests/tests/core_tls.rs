//! `rediss://` against a real TLS-enabled redis-server, with a password that stays secret.

use std::time::Duration;

use redlock_core::{Error, Redlock, RedlockConfig, RetryPolicy};
use redlock_testkit::{error_chain, RedisServer};

const PASSWORD: &str = "tls-secret-password";

/// A redis-server with a plain port (for the harness) and a TLS port with a self-signed
/// certificate; returns it and its TLS port.
fn tls_server(dir: &std::path::Path) -> (RedisServer, u16) {
    let certified = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned()])
        .expect("self-signed certificate");
    let cert = dir.join("server.crt");
    let key = dir.join("server.key");
    std::fs::write(&cert, certified.cert.pem()).expect("write certificate");
    std::fs::write(&key, certified.signing_key.serialize_pem()).expect("write key");
    let server = RedisServer::builder()
        .password(PASSWORD)
        .port_arg("--tls-port")
        .arg("--tls-cert-file")
        .arg(&cert)
        .arg("--tls-key-file")
        .arg(&key)
        .arg("--tls-ca-cert-file")
        .arg(&cert)
        .args(["--tls-auth-clients", "no"])
        .start();
    let tls_port = server.arg_port("--tls-port").expect("a TLS port");
    (server, tls_port)
}

fn redlock(url: String) -> Redlock {
    Redlock::new(RedlockConfig {
        retry: RetryPolicy::none(),
        ..RedlockConfig::with_nodes([url])
    })
    .expect("valid config")
}

#[tokio::test]
async fn a_lock_over_tls_works_and_its_password_stays_secret() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (server, tls_port) = tls_server(dir.path());
    // `#insecure`: the certificate is self-signed; production URLs verify it.
    let url = format!("rediss://:{PASSWORD}@127.0.0.1:{tls_port}/#insecure");

    let client = redlock(url);
    // Connect up front, as `LockClient::build` does: a TLS handshake on a busy machine can take
    // longer than the 50 ms per-node timeout of a 5 s lease, and it has a bound of its own.
    let readiness = client.readiness().await;
    assert!(readiness.is_ready(), "{readiness:?}");
    let lease = client
        .acquire("over-tls", Duration::from_secs(5))
        .await
        .expect("a lock over TLS");
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("redlock:*")
        .query(&mut server.connection())
        .expect("KEYS over the plain port");
    assert_eq!(
        keys,
        vec!["redlock:over-tls".to_owned()],
        "the lock reached the server"
    );
    client.release(&lease).await.expect("released over TLS");

    let wrong = redlock(format!("rediss://:not-it@127.0.0.1:{tls_port}/#insecure"));
    let readiness = wrong.readiness().await;
    assert!(!readiness.is_ready(), "a wrong password is reported");
    let refused = readiness.failures().next().expect("one failure");
    let shown = error_chain(refused);
    assert!(
        !shown.contains("not-it") && !shown.contains(PASSWORD),
        "{shown}"
    );
    let err = wrong
        .acquire("over-tls", Duration::from_secs(5))
        .await
        .expect_err("wrong password");
    assert!(
        matches!(err, Error::NoQuorum { answered: 0, .. }),
        "{err:?}"
    );
    let chain = error_chain(&err);
    assert!(
        !chain.contains("not-it") && !chain.contains(PASSWORD),
        "{chain}"
    );
}
