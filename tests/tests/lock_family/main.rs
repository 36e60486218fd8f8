//! The lock family beside `RLock`, on real masters: the read-write lock (`read_write`), the
//! multi-lock (`multi`), the spinning wait strategy (`spin`), the permit semaphore
//! (`semaphore`) and the one whose count its client fixes, on several masters
//! (`quorum_semaphore`), the count-down latch (`latch`) and the one whose count its client
//! fixes, on several masters (`quorum_latch`), and the fair lock (`fair`). One test binary for
//! them all: each binary is linked on its own, and CI runs on two cores.

mod fair;
mod latch;
mod multi;
mod quorum_latch;
mod quorum_semaphore;
mod read_write;
mod semaphore;
mod spin;

use redlock_reentrant::{Error, InvalidArgument, LockClient};
use redlock_testkit::RedisCluster;
use redlock_tests::{client, WATCHDOG};

/// A one-master primitive built on three masters: refused with its typed error, before
/// anything is sent.
async fn refused_on_three_masters<T: std::fmt::Debug>(
    build: impl FnOnce(&LockClient) -> Result<T, Error>,
) {
    let cluster = RedisCluster::start(3);
    let alice = client(&cluster, WATCHDOG).await;
    let refused = build(&alice);
    assert!(
        matches!(
            refused,
            Err(Error::InvalidArgument(InvalidArgument::UnsoundOnQuorum {
                nodes: 3,
                ..
            }))
        ),
        "{refused:?}"
    );
    assert_eq!(cluster.count_keys("*"), 0, "nothing was sent");
}

/// `answer` is [`InvalidArgument::TooManyPermits`] for `asked` of a semaphore of `count`.
fn assert_too_many_permits<T: std::fmt::Debug>(answer: &Result<T, Error>, asked: u32, count: u32) {
    assert!(
        matches!(
            answer,
            Err(Error::InvalidArgument(InvalidArgument::TooManyPermits {
                asked: a,
                count: c,
                ..
            })) if *a == asked && *c == count
        ),
        "{answer:?}"
    );
}
