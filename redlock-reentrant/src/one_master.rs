//! The primitives that are sound on one master only (semaphores whose count is the master's,
//! the count-down latch): their refusal on several, and their calls to the one (or, for a
//! semaphore whose count its client fixed, to every master).

use std::future::Future;
use std::time::Duration;

use redlock_core::lock_kind::{FanOut, ScriptCall};
use redlock_core::redis::FromRedisValue;
use redlock_core::InvalidArgument;

use tokio::time::Instant;

use crate::inner::Inner;
use crate::Error;

/// How long a waiter of [`wait_announced`] waits between looks when nothing is announced: a
/// lost announcement costs this much, never the wait.
const LOOK_AGAIN: Duration = Duration::from_secs(1);

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
    let answers = run_on_a_majority(inner, name, key, call).await?;
    Ok(answers.into_iter().next().expect("a majority answered"))
}

/// Runs `call` on every master, once: the answers, once a majority gave one, or
/// [`Error::NoQuorum`] (`name` and `key` name the primitive in errors).
pub(crate) async fn run_on_a_majority<T: FromRedisValue + Clone>(
    inner: &Inner,
    name: &str,
    key: &str,
    call: ScriptCall,
) -> Result<Vec<T>, Error> {
    let fan: FanOut<T> = run_everywhere(inner, key, call).await?;
    if fan.answered() < fan.quorum() {
        return Err(Error::no_quorum(name, fan.answered(), fan));
    }
    Ok(fan.values().cloned().collect())
}

/// Runs `call` on every master, once, and waits for every answer (or its node's timeout);
/// [`Error::WrongType`] when a master's keys hold something else (`key` names them).
pub(crate) async fn run_everywhere<T: FromRedisValue>(
    inner: &Inner,
    key: &str,
    call: ScriptCall,
) -> Result<FanOut<T>, Error> {
    let fan: FanOut<T> = inner
        .redlock
        .nodes()
        .run_script(&call, inner.node_timeout())
        .await;
    match fan.wrong_type() {
        Some(found) => Err(Error::WrongType {
            key: key.to_owned(),
            found,
        }),
        None => Ok(fan),
    }
}

/// Looks with `look` until it says done (`Ok(true)`), or `deadline` passes (`Ok(false)`; `None`:
/// no deadline). Listens on `channel` after the first look, then looks again (an announcement
/// between the two still wakes it), then on every announcement and at least every
/// [`LOOK_AGAIN`]. A look that fails with a retryable error ends the wait with it, unless
/// `retry_failed_looks`: then it pauses as the client's retry policy says, and ends the wait
/// once the policy is spent (a look that answers resets it).
pub(crate) async fn wait_announced<F>(
    inner: &Inner,
    channel: &str,
    deadline: Option<Instant>,
    retry_failed_looks: bool,
    mut look: impl FnMut() -> F,
) -> Result<bool, Error>
where
    F: Future<Output = Result<bool, Error>>,
{
    let mut subscription = None;
    let mut retries = inner.redlock.config().retry.backoff();
    loop {
        let mut pause_after_failure = None;
        match look().await {
            Ok(true) => return Ok(true),
            Ok(false) => retries = inner.redlock.config().retry.backoff(),
            Err(err) if retry_failed_looks && err.is_retryable() => match retries.next_delay() {
                Some(pause) => pause_after_failure = Some(pause),
                None => return Err(err),
            },
            Err(err) => return Err(err),
        }
        let left = deadline.map(|deadline| deadline.saturating_duration_since(Instant::now()));
        if left == Some(Duration::ZERO) {
            return Ok(false);
        }
        let Some(heard) = &subscription else {
            subscription = Some(inner.wakeups.subscribe(channel, true).await);
            continue;
        };
        let pause = pause_after_failure.unwrap_or(LOOK_AGAIN);
        let pause = left.map_or(pause, |left| left.min(pause));
        let _ = tokio::time::timeout(pause, heard.notify().notified()).await;
    }
}
