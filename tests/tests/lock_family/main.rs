//! The lock family beside `RLock`, on real masters: the read-write lock (`read_write`), the
//! multi-lock (`multi`), the spinning wait strategy (`spin`) and the permit semaphore
//! (`semaphore`). One test binary for them all: each binary is linked on its own, and CI runs
//! on two cores.

mod multi;
mod read_write;
mod semaphore;
mod spin;
