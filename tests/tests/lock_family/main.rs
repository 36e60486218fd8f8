//! The lock family beside `RLock`, on real masters: the read-write lock (`read_write`), the
//! multi-lock (`multi`) and the spinning wait strategy (`spin`). One test binary for the three:
//! each binary is linked on its own, and CI runs on two cores.

mod multi;
mod read_write;
mod spin;
