//! Belief intervals: when each worker believed it held each lock, as far as the promise
//! covers it (a killed worker believes nothing, nor does one paused past any lease).

use std::collections::HashMap;
use std::fmt;
use std::time::Duration;

use super::{is_worker, lock_of, nanos, nemesis_target};
use crate::history::{Event, Op, Phase};

/// How long a worker believed it held a lock: from its `acquire ok depth=1` to [`BeliefEnd`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Belief {
    /// The worker (`w<N>`).
    pub worker: String,
    /// The lock.
    pub lock: String,
    /// The fencing token of the hold, if the event had one.
    pub token: Option<u64>,
    /// When the acquisition was invoked (its `acquire invoke depth=1`; `start` if none).
    pub invoked: u64,
    /// When the belief began (`acquire ok depth=1`), in clock nanoseconds.
    pub start: u64,
    /// When it ended. Equal to `start` when the worker was paused too long while acquiring.
    pub end: u64,
    /// What ended it.
    pub ended_by: BeliefEnd,
}

/// What ended a [`Belief`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BeliefEnd {
    /// The worker's `release invoke depth=1`.
    Release,
    /// The worker's `lost info`.
    Lost,
    /// The worker logged another `acquire ok depth=1` of the lock (itself a violation).
    Reacquired,
    /// The nemesis killed the worker.
    Killed,
    /// The nemesis stopped the worker for longer than the pause bound.
    Stopped,
    /// None of the above before the history ended: the worker's last event.
    HistoryEnd,
}

impl fmt::Display for BeliefEnd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BeliefEnd::Release => "release",
            BeliefEnd::Lost => "lost",
            BeliefEnd::Reacquired => "re-acquire",
            BeliefEnd::Killed => "kill",
            BeliefEnd::Stopped => "long stop",
            BeliefEnd::HistoryEnd => "history end",
        })
    }
}

/// One SIGSTOP of a worker longer than the pause bound: when, and when it was healed (if ever).
#[derive(Debug, Clone, Copy)]
pub(super) struct LongStop {
    pub(super) at: u64,
    pub(super) healed: Option<u64>,
}

/// Every worker's stops longer than `pause_bound` (or never healed), in time order.
pub(super) fn long_stops(events: &[Event], pause_bound: Duration) -> HashMap<&str, Vec<LongStop>> {
    let bound = nanos(pause_bound);
    let mut stopped: HashMap<&str, u64> = HashMap::new();
    let mut long: HashMap<&str, Vec<LongStop>> = HashMap::new();
    for event in events {
        if let Some(worker) = nemesis_target(event, Op::Fault, "stop-worker") {
            stopped.entry(worker).or_insert(event.t);
        } else if let Some(worker) = nemesis_target(event, Op::Heal, "stop-worker") {
            if let Some(at) = stopped.remove(worker) {
                if event.t.saturating_sub(at) > bound {
                    let healed = Some(event.t);
                    long.entry(worker)
                        .or_default()
                        .push(LongStop { at, healed });
                }
            }
        }
    }
    for (worker, at) in stopped {
        long.entry(worker)
            .or_default()
            .push(LongStop { at, healed: None });
    }
    long
}

/// The beliefs as the workers logged them, before the nemesis cuts them short (open ones
/// end at `u64::MAX`).
pub(super) fn logged_beliefs(events: &[Event]) -> Vec<Belief> {
    let mut invoked: HashMap<(&str, &str), u64> = HashMap::new();
    let mut open: HashMap<(&str, &str), Belief> = HashMap::new();
    let mut done = Vec::new();
    for event in events.iter().filter(|event| is_worker(&event.actor)) {
        let key = (event.actor.as_str(), lock_of(event));
        let end = match (event.op, event.phase) {
            (Op::Acquire, Phase::Invoke) if event.is_outer() => {
                invoked.insert(key, event.t);
                continue;
            }
            // An `ok` ends a belief still open (a re-acquire) and opens the next one.
            (Op::Acquire, Phase::Ok) if event.is_outer() => BeliefEnd::Reacquired,
            (Op::Release, Phase::Invoke) if event.is_outer() => BeliefEnd::Release,
            (Op::Lost, Phase::Info) => BeliefEnd::Lost,
            _ => continue,
        };
        if let Some(mut belief) = open.remove(&key) {
            (belief.end, belief.ended_by) = (event.t, end);
            done.push(belief);
        }
        if end == BeliefEnd::Reacquired {
            let belief = Belief {
                worker: key.0.to_owned(),
                lock: key.1.to_owned(),
                token: event.number("token"),
                invoked: invoked.remove(&key).unwrap_or(event.t),
                start: event.t,
                end: u64::MAX,
                ended_by: BeliefEnd::HistoryEnd,
            };
            open.insert(key, belief);
        }
    }
    done.extend(open.into_values());
    done
}

/// Every belief interval of every worker, sorted by start. A belief ends at the first of the
/// worker's `release invoke depth=1`, its `lost info`, another `acquire ok depth=1` of the
/// lock, a kill of the worker, a stop of the worker longer than `pause_bound` (or never
/// healed), or the worker's last event. A long stop between the acquisition's invoke and its
/// `ok` makes the belief empty (`end == start`): the worker was paused past any lease while
/// acquiring, so its `ok` promises nothing.
pub fn beliefs(events: &[Event], pause_bound: Duration) -> Vec<Belief> {
    let stops = long_stops(events, pause_bound);
    let mut kills: HashMap<&str, u64> = HashMap::new();
    let mut last: HashMap<&str, u64> = HashMap::new();
    for event in events {
        if let Some(worker) = nemesis_target(event, Op::Fault, "kill-worker") {
            kills.entry(worker).or_insert(event.t);
        }
        last.insert(&event.actor, event.t);
    }
    let mut beliefs = logged_beliefs(events);
    for belief in &mut beliefs {
        let worker = belief.worker.as_str();
        if let Some(&killed) = kills.get(worker) {
            if killed >= belief.invoked && killed < belief.end {
                (belief.end, belief.ended_by) = (killed.max(belief.start), BeliefEnd::Killed);
            }
        }
        let stop = stops.get(worker).into_iter().flatten();
        if let Some(stop) = stop.map(|stop| stop.at).find(|&at| at >= belief.invoked) {
            if stop < belief.end {
                (belief.end, belief.ended_by) = (stop.max(belief.start), BeliefEnd::Stopped);
            }
        }
        if belief.end == u64::MAX {
            belief.end = last.get(worker).copied().unwrap_or(belief.start);
        }
    }
    beliefs.sort_by(|a, b| (a.start, a.end, &a.worker).cmp(&(b.start, b.end, &b.worker)));
    beliefs
}

/// A token for messages: the number, or `?`.
pub(super) fn token_text(token: Option<u64>) -> String {
    token.map_or_else(|| "?".to_owned(), |token| token.to_string())
}

#[cfg(test)]
mod tests {
    use super::super::test_support::history;
    use super::*;

    const BOUND: Duration = Duration::from_millis(100);

    /// The (worker, start, end, ended_by) of each belief, times in ms.
    fn intervals(text: &str) -> Vec<(String, u64, u64, BeliefEnd)> {
        let beliefs = beliefs(&history(text), BOUND);
        let ms = |t: u64| t / 1_000_000;
        beliefs
            .into_iter()
            .map(|b| (b.worker, ms(b.start), ms(b.end), b.ended_by))
            .collect()
    }

    fn w(worker: &str, start: u64, end: u64, by: BeliefEnd) -> (String, u64, u64, BeliefEnd) {
        (worker.to_owned(), start, end, by)
    }

    #[test]
    fn the_worker_ends_its_beliefs_by_release_lost_or_reacquire() {
        let beliefs = intervals(
            "
            0 w1 acquire invoke lock=L depth=1
            10 w1 acquire ok lock=L depth=1 token=5
            12 w1 acquire ok lock=L depth=2 token=5
            14 w1 release invoke lock=L depth=2
            20 w1 release invoke lock=L depth=1
            25 w2 acquire ok lock=L depth=1 token=7
            30 w2 lost info lock=L reason=expired
            35 w3 acquire ok lock=L depth=1 token=9
            40 w3 acquire ok lock=L depth=1 token=10
            50 w3 renew info lock=L
            ",
        );
        use BeliefEnd::*;
        let expected = [
            w("w1", 10, 20, Release),
            w("w2", 25, 30, Lost),
            w("w3", 35, 40, Reacquired),
            w("w3", 40, 50, HistoryEnd),
        ];
        assert_eq!(beliefs, expected);
    }

    /// w1 holds L; the nemesis does FAULT to it at 30 ms and HEALs it.
    const NEMESIS: &str = "
        10 w1 acquire ok lock=L depth=1 token=5
        20 w1 renew info lock=L
        30 nemesis fault ok kind=FAULT target=w1
        HEAL
        300 w1 lost info lock=L reason=expired
    ";

    fn nemesis(fault: &str, heal: &str) -> Vec<(String, u64, u64, BeliefEnd)> {
        intervals(&NEMESIS.replace("FAULT", fault).replace("HEAL", heal))
    }

    #[test]
    fn a_kill_ends_the_belief_at_the_kill_even_after_the_last_event() {
        let killed = NEMESIS.replace("FAULT", "kill-worker").replace("HEAL", "");
        let killed = killed.replace("300 w1 lost info lock=L reason=expired", "");
        assert_eq!(intervals(&killed), [w("w1", 10, 30, BeliefEnd::Killed)]);
    }

    #[test]
    fn a_stop_past_the_bound_ends_the_belief_at_the_stop() {
        let heal = |t: u64| format!("{t} nemesis heal ok kind=stop-worker target=w1");
        let stopped = [w("w1", 10, 30, BeliefEnd::Stopped)];
        assert_eq!(nemesis("stop-worker", &heal(131)), stopped);
        assert_eq!(nemesis("stop-worker", ""), stopped, "never healed");
        let short = [w("w1", 10, 300, BeliefEnd::Lost)];
        assert_eq!(
            nemesis("stop-worker", &heal(130)),
            short,
            "exactly the bound"
        );
        // Other faults, or faults of another worker, end nothing.
        assert_eq!(nemesis("kill-node", ""), short);
        assert_eq!(
            intervals(
                &NEMESIS
                    .replace("FAULT target=w1", "stop-worker target=w2")
                    .replace("HEAL", "")
            ),
            short
        );
    }

    #[test]
    fn a_long_stop_while_acquiring_voids_the_belief() {
        let beliefs = intervals(
            "
            0 w1 acquire invoke lock=L depth=1
            5 nemesis fault ok kind=stop-worker target=w1
            200 nemesis heal ok kind=stop-worker target=w1
            201 w1 acquire ok lock=L depth=1 token=5
            205 w1 lost info lock=L reason=expired
            ",
        );
        assert_eq!(beliefs, [w("w1", 201, 201, BeliefEnd::Stopped)]);
    }
}
