//! Records the watchdog's renewals into the history: a tracing layer that turns each
//! `RENEWING_TARGET` trace event (one per lock, as a round is sent) into `renew info lock=L
//! round=T`, where T is when that round started (its `round` event, before it chose the holds).

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use redlock_reentrant::RENEWING_TARGET;
use redlock_testkit::history::{now_ns, History, Op, Phase};
use redlock_testkit::WorkerSpec;
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::registry::LookupSpan;

/// The layer, filtered to the renewal events.
pub(crate) fn layer<S>(history: Arc<History>, args: Arc<WorkerSpec>) -> impl Layer<S>
where
    S: Subscriber + for<'span> LookupSpan<'span>,
{
    Renewals {
        history,
        args,
        round_started: AtomicU64::new(0),
    }
    .with_filter(Targets::new().with_target(RENEWING_TARGET, Level::TRACE))
}

struct Renewals {
    history: Arc<History>,
    args: Arc<WorkerSpec>,
    /// When the current round started, on the history's clock.
    round_started: AtomicU64,
}

impl<S: Subscriber> Layer<S> for Renewals {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let mut key = KeyField(None);
        event.record(&mut key);
        match key.0 {
            None => self.round_started.store(now_ns(), Ordering::Relaxed),
            Some(key) => {
                let lock = key.strip_prefix(&self.args.key_prefix).unwrap_or(&key);
                let actor = crate::lock_actor(&self.args, lock);
                let round = self.round_started.load(Ordering::Relaxed);
                self.history.record(
                    &actor,
                    Op::Renew,
                    Phase::Info,
                    &[("lock", &lock), ("round", &round)],
                );
            }
        }
    }
}

/// Picks the `key` field out of an event.
struct KeyField(Option<String>);

impl Visit for KeyField {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() == "key" {
            self.0 = Some(format!("{value:?}"));
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "key" {
            self.0 = Some(value.to_owned());
        }
    }
}
