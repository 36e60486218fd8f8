//! The primitives that are sound on one master only (semaphores, the count-down latch): their
//! refusal on several, and their calls to the one.

use redlock_core::lock_kind::{FanOut, ScriptCall};
use redlock_core::redis::FromRedisValue;
use redlock_core::InvalidArgument;

use crate::inner::Inner;
use crate::Error;

/// Refuses `primitive` on a client of several masters, before anything is sent, saying why.
pub(crate) fn refuse_quorum(
    inner: &Inner,
    primitive: &'static str,
    reason: &'static str,
) -> Result<(), Error> {
    let nodes = inner.redlock.nodes().len();
    if nodes > 1 {
        return Err(InvalidArgument::UnsoundOnQuorum {
            primitive,
            nodes,
            reason,
        }
        .into());
    }
    Ok(())
}

/// Runs `call` on the master, once (a reply lost on the way is [`Error::NoQuorum`], and the call
/// may have been applied). `name` and `key` name the primitive in errors.
pub(crate) async fn run_once<T: FromRedisValue + Clone>(
    inner: &Inner,
    name: &str,
    key: &str,
    call: ScriptCall,
) -> Result<T, Error> {
    let fan: FanOut<T> = inner
        .redlock
        .nodes()
        .run_script(&call, inner.node_timeout())
        .await;
    if let Some(found) = fan.wrong_type() {
        return Err(Error::WrongType {
            key: key.to_owned(),
            found,
        });
    }
    let value = fan.values().next().cloned();
    match value {
        Some(value) if fan.answered() >= fan.quorum() => Ok(value),
        _ => Err(Error::no_quorum(name, fan.answered(), fan)),
    }
}
