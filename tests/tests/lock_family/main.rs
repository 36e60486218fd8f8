//! The lock family beside `RLock`, on real masters: the read-write lock (`read_write`), the
//! multi-lock (`multi`), the spinning wait strategy (`spin`), the permit semaphore
//! (`semaphore`), the count-down latch (`latch`) and the fair lock (`fair`). One test binary for them all: each binary is linked on its own, and CI runs
//! on two cores.

mod fair;
mod latch;
mod multi;
mod read_write;
mod semaphore;
mod spin;
