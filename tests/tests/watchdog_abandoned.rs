//! A lost signal handed out for a hold fires no later than the hold's validity ends, whatever
//! happens to the client, the watchdog's task or the runtime: a client dropped without
//! `shutdown()`, or the runtime it ran on shut down, stops renewal, and whoever still holds the
//! signal (or its token) is told before another owner can get in.

use redlock_reentrant::LostReason;
use redlock_testkit::RedisCluster;
use redlock_tests::{client, WATCHDOG};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_client_still_tells_the_kept_signal_before_anyone_else_gets_in() {
    let cluster = RedisCluster::start(3);
    let holder = client(&cluster, WATCHDOG).await;
    let lock = holder.get_lock("abandoned");
    lock.lock().await.expect("lock");
    let signal = lock.lost_signal().expect("held");
    let token = signal.token();
    // The lock (a task-owned hold, never unlocked) and the client go; only the signal stays.
    drop(lock);
    drop(holder);
    assert!(!signal.is_lost(), "the validity it had is still good");

    // Another client gets in once the keys expire (nothing renews them any more).
    let rival = client(&cluster, WATCHDOG).await;
    let taken = rival.get_lock("abandoned");
    tokio::time::timeout(WATCHDOG * 4, taken.lock())
        .await
        .expect("the lock frees within its lease")
        .expect("lock");
    // By then the token was cancelled, by its deadline, without anyone reading the signal.
    assert!(
        token.is_cancelled(),
        "another owner holds the lock while the kept token still says it is ours"
    );
    assert_eq!(signal.reason(), Some(LostReason::Abandoned));
    taken.unlock().await.expect("unlock");
    rival.shutdown().await;
}

#[test]
fn a_runtime_shut_down_under_a_hold_still_tells_the_kept_token_before_anyone_else_gets_in() {
    let cluster = RedisCluster::start(3);
    // The holder's runtime: it locks, hands the token out, and is shut down with the client.
    let token = {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async {
            let holder = client(&cluster, WATCHDOG).await;
            let lock = holder.get_lock("abandoned");
            lock.lock().await.expect("lock");
            let token = lock.lost_signal().expect("held").token();
            // Handed to work that only watches the token (it never reads the signal).
            std::mem::forget(lock);
            std::mem::forget(holder);
            token
        })
    };
    assert!(!token.is_cancelled(), "the validity it had is still good");

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let rival = client(&cluster, WATCHDOG).await;
        let taken = rival.get_lock("abandoned");
        tokio::time::timeout(WATCHDOG * 4, taken.lock())
            .await
            .expect("the lock frees within its lease")
            .expect("lock");
        assert!(
            token.is_cancelled(),
            "another owner holds the lock while the kept token still says it is ours"
        );
        taken.unlock().await.expect("unlock");
        rival.shutdown().await;
    });
}
