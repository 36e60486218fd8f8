//! Measured figures for the scenario reports: how fast a dead holder's lock comes back, how
//! fast a paused holder learns it lost its lock, how often an acquisition succeeds.

use std::collections::HashMap;
use std::time::Duration;

use super::beliefs::long_stops;
use super::{beliefs, is_worker, lock_of, BeliefEnd};
use crate::history::{Event, Op, Phase};

/// For each kill of a worker that believed it held a lock then (see [`beliefs`]; a worker
/// stopped longer than `pause_bound` before the kill no longer did), the time from the kill
/// to the lock's next `acquire ok depth=1` by another worker. Kills after which nobody took
/// the lock again are left out.
pub fn kill_to_reacquire(events: &[Event], pause_bound: Duration) -> Vec<Duration> {
    let mut acquired: HashMap<&str, Vec<(u64, &str)>> = HashMap::new();
    for event in events.iter().filter(|event| is_worker(&event.actor)) {
        if (event.op, event.phase) == (Op::Acquire, Phase::Ok) && event.is_outer() {
            let acquisitions = acquired.entry(lock_of(event)).or_default();
            acquisitions.push((event.t, &event.actor));
        }
    }
    let killed = beliefs(events, pause_bound);
    let killed = killed.iter().filter(|b| b.ended_by == BeliefEnd::Killed);
    killed
        .filter_map(|belief| {
            let acquisitions = acquired.get(belief.lock.as_str())?;
            let after = acquisitions.partition_point(|&(t, _)| t <= belief.end);
            let next = acquisitions[after..]
                .iter()
                .find(|(_, w)| *w != belief.worker)?;
            Some(Duration::from_nanos(next.0 - belief.end))
        })
        .collect()
}

/// For each stop longer than `pause_bound` of a worker that believed it held a lock at the
/// stop and was resumed (SIGCONT) later: `("<worker> <lock>", d)` with `d` the time from the
/// resume to the worker's `lost info` of the lock or its `release fail ... err=LockLost`,
/// `None` when it never learned (before the history ended or it acquired the lock again).
pub fn lost_after_resume(
    events: &[Event],
    pause_bound: Duration,
) -> Vec<(String, Option<Duration>)> {
    let stops = long_stops(events, pause_bound);
    let mut figures = Vec::new();
    for belief in beliefs(events, pause_bound) {
        if belief.ended_by != BeliefEnd::Stopped || belief.end == belief.start {
            continue;
        }
        let stop = stops.get(belief.worker.as_str()).into_iter().flatten();
        let Some(resumed) = stop.filter(|s| s.at == belief.end).find_map(|s| s.healed) else {
            continue;
        };
        let after = events.partition_point(|event| event.t <= resumed);
        let learned = events[after..]
            .iter()
            .filter(|event| event.actor == belief.worker && lock_of(event) == belief.lock)
            .take_while(|event| {
                !((event.op, event.phase) == (Op::Acquire, Phase::Ok) && event.is_outer())
            })
            .find(|event| match (event.op, event.phase) {
                (Op::Lost, Phase::Info) => true,
                (Op::Release, Phase::Fail) => event.field("err") == Some("LockLost"),
                _ => false,
            });
        let took = learned.map(|event| Duration::from_nanos(event.t - resumed));
        figures.push((format!("{} {}", belief.worker, belief.lock), took));
    }
    figures
}

/// `(succeeded, attempts)` over the workers' outer acquisitions: attempts are those that
/// completed with `acquire ok` or `acquire fail` at depth 1 (an `acquire info`, whose outcome
/// is unknown, is not one).
pub fn success_rate(events: &[Event]) -> (u64, u64) {
    let (mut ok, mut attempts) = (0, 0);
    for event in events.iter().filter(|event| is_worker(&event.actor)) {
        if event.op == Op::Acquire && event.is_outer() {
            match event.phase {
                Phase::Ok => (ok, attempts) = (ok + 1, attempts + 1),
                Phase::Fail => attempts += 1,
                Phase::Invoke | Phase::Info => {}
            }
        }
    }
    (ok, attempts)
}

#[cfg(test)]
mod tests {
    use super::super::test_support::history;
    use super::*;

    const BOUND: Duration = Duration::from_millis(100);
    const MS: fn(u64) -> Duration = Duration::from_millis;

    #[test]
    fn kill_to_reacquire_measures_kills_of_holders_only() {
        let events = history(
            "
            0 w1 acquire invoke lock=L depth=1
            10 w1 acquire ok lock=L depth=1 token=5
            30 nemesis fault ok kind=kill-worker target=w1
            35 w3 acquire invoke lock=L depth=1
            40 nemesis fault ok kind=kill-worker target=w3
            75 w2 acquire ok lock=L depth=1 token=7
            80 w4 acquire ok lock=M depth=1 token=1
            90 nemesis fault ok kind=kill-worker target=w4
            ",
        );
        // w3 held nothing when killed; nobody took M after w4 died.
        assert_eq!(kill_to_reacquire(&events, BOUND), [MS(45)]);
    }

    /// w1 and w2 hold L and M and are stopped for 180 ms; w3 for 50 ms.
    const STOPS: &str = "
        10 w1 acquire ok lock=L depth=1 token=5
        11 w2 acquire ok lock=M depth=1 token=5
        12 w3 acquire ok lock=N depth=1 token=5
        20 nemesis fault ok kind=stop-worker target=w1
        20 nemesis fault ok kind=stop-worker target=w2
        20 nemesis fault ok kind=stop-worker target=w3
        70 nemesis heal ok kind=stop-worker target=w3
        200 nemesis heal ok kind=stop-worker target=w1
        200 nemesis heal ok kind=stop-worker target=w2
        205 w2 release invoke lock=M depth=1
        210 w2 release fail lock=M depth=1 err=LockLost
        230 w1 lost info lock=L reason=expired
        240 w3 lost info lock=N reason=expired
    ";

    #[test]
    fn lost_after_resume_measures_long_stops_of_holders() {
        let figures = lost_after_resume(&history(STOPS), BOUND);
        let expected = [
            ("w1 L".to_owned(), Some(MS(30))),
            ("w2 M".to_owned(), Some(MS(10))),
        ];
        assert_eq!(figures, expected);
        let never = STOPS.replace("230 w1 lost info lock=L reason=expired", "");
        let figures = lost_after_resume(&history(&never), BOUND);
        assert_eq!(figures[0], ("w1 L".to_owned(), None));
    }

    #[test]
    fn success_rate_counts_completed_outer_attempts() {
        let events = history(
            "
            1 w1 acquire ok lock=L depth=1 token=5
            2 w1 acquire ok lock=L depth=2 token=5
            3 w2 acquire fail lock=L depth=1 err=Contended
            4 w3 acquire info lock=L depth=1 err=cancelled
            5 w3 acquire ok lock=L depth=1 token=7
            ",
        );
        assert_eq!(success_rate(&events), (2, 3));
    }
}
