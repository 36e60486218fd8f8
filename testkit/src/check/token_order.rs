//! The token-order checker: fencing tokens follow real time, and none is handed out twice.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};

use super::{is_worker, lock_of, Clock, Report};
use crate::history::{Event, Op, Phase};

/// One outer acquisition: its worker, its `acquire invoke` and `acquire ok` times, its token.
#[derive(Debug, Clone, Copy)]
struct Acquisition<'e> {
    worker: &'e str,
    invoked: u64,
    ok: u64,
    token: u64,
}

/// Checks the outer acquisitions (`acquire ok depth=1`, each with its worker's latest
/// `acquire invoke depth=1` of the lock before it) of every lock: when A completed before B
/// was invoked, A's token must be smaller than B's; and no two acquisitions of a lock share a
/// token. An `ok` without a token or without an invoke is a violation too.
///
/// Figures: `acquisitions`, `order_violations`, `duplicate_tokens`.
pub fn check_token_order(events: &[Event]) -> Report {
    let clock = Clock::of(events);
    let mut report = Report::new("token_order");
    let mut invoked: HashMap<(&str, &str), u64> = HashMap::new();
    let mut by_lock: BTreeMap<&str, Vec<Acquisition<'_>>> = BTreeMap::new();
    for event in events
        .iter()
        .filter(|e| is_worker(&e.actor) && e.op == Op::Acquire)
    {
        let (worker, lock) = (event.actor.as_str(), lock_of(event));
        match event.phase {
            Phase::Invoke if event.is_outer() => {
                invoked.insert((worker, lock), event.t);
            }
            Phase::Ok if event.is_outer() => {
                let at = clock.at(event.t);
                let Some(token) = event.number("token") else {
                    let msg = format!("{worker} acquired {lock} at {at} without a numeric token");
                    report.violations.push(msg);
                    continue;
                };
                let invoke = invoked.remove(&(worker, lock)).unwrap_or_else(|| {
                    let msg = format!("{worker} acquired {lock} at {at} without an acquire invoke");
                    report.violations.push(msg);
                    event.t
                });
                let acquisition = Acquisition {
                    worker,
                    invoked: invoke,
                    ok: event.t,
                    token,
                };
                by_lock.entry(lock).or_default().push(acquisition);
            }
            _ => {}
        }
    }
    let (mut acquisitions, mut order_violations, mut duplicates) = (0, 0, 0);
    for (lock, mut list) in by_lock {
        acquisitions += list.len();
        let mut first_with: HashMap<u64, Acquisition<'_>> = HashMap::new();
        for acquisition in &list {
            if let Some(first) = first_with.insert(acquisition.token, *acquisition) {
                duplicates += 1;
                report.violations.push(format!(
                    "token {} of {lock} handed out twice: to {} at {} and to {} at {}",
                    acquisition.token,
                    first.worker,
                    clock.at(first.ok),
                    acquisition.worker,
                    clock.at(acquisition.ok),
                ));
                first_with.insert(first.token, first);
            }
        }
        // Sweep by invoke time; the heap yields acquisitions by completion time, so `done`
        // is the largest token among those completed before the current invoke.
        let mut completions: BinaryHeap<Reverse<(u64, usize)>> = list
            .iter()
            .enumerate()
            .map(|(i, a)| Reverse((a.ok, i)))
            .collect();
        let by_ok = list.clone();
        list.sort_by_key(|a| a.invoked);
        let mut done: Option<Acquisition<'_>> = None;
        for later in &list {
            while let Some(&Reverse((ok, i))) = completions.peek() {
                if ok >= later.invoked {
                    break;
                }
                completions.pop();
                if done.is_none_or(|d| by_ok[i].token > d.token) {
                    done = Some(by_ok[i]);
                }
            }
            if let Some(earlier) = done.filter(|d| d.token >= later.token) {
                order_violations += 1;
                report.violations.push(format!(
                    "token order: {} acquired {lock} with token {} (invoked at {}, ok at {}) \
                     after {} got token {} (ok at {})",
                    later.worker,
                    later.token,
                    clock.at(later.invoked),
                    clock.at(later.ok),
                    earlier.worker,
                    earlier.token,
                    clock.at(earlier.ok),
                ));
            }
        }
    }
    report.push_figure("acquisitions", acquisitions);
    report.push_figure("order_violations", order_violations);
    report.push_figure("duplicate_tokens", duplicates);
    report
}

#[cfg(test)]
mod tests {
    use super::super::test_support::history;
    use super::*;

    /// Tokens grow from one holder to the next; w3 and w4 race (overlapping invoke..ok
    /// windows), so their tokens may come in either order; lock M counts on its own.
    const GOOD: &str = "
        0 w1 acquire invoke lock=L depth=1
        10 w1 acquire ok lock=L depth=1 token=5
        11 w1 acquire ok lock=L depth=2 token=5
        12 w2 acquire invoke lock=L depth=1
        20 w2 acquire ok lock=L depth=1 token=7
        30 w3 acquire invoke lock=L depth=1
        31 w4 acquire invoke lock=L depth=1
        40 w4 acquire ok lock=L depth=1 token=9
        41 w3 acquire ok lock=L depth=1 token=8
        50 w1 acquire invoke lock=M depth=1
        51 w1 acquire ok lock=M depth=1 token=1
    ";

    #[test]
    fn growing_tokens_and_concurrent_races_pass() {
        let report = check_token_order(&history(GOOD));
        assert!(report.passed(), "{report}");
        assert_eq!(report.figure("acquisitions"), Some(5));
    }

    #[test]
    fn a_smaller_token_after_a_completed_acquisition_is_caught() {
        let bad = GOOD.replace("token=7", "token=4");
        let report = check_token_order(&history(&bad));
        assert_eq!(report.figure("order_violations"), Some(1));
        assert_eq!(
            report.violations,
            [
                "token order: w2 acquired L with token 4 (invoked at 12.0ms, ok at 20.0ms) \
              after w1 got token 5 (ok at 10.0ms)"
            ]
        );
    }

    #[test]
    fn a_reused_token_is_caught_even_between_racing_acquisitions() {
        let racing = GOOD.replace("token=8", "token=9");
        let report = check_token_order(&history(&racing));
        assert_eq!(report.figure("order_violations"), Some(0));
        assert_eq!(
            report.violations,
            ["token 9 of L handed out twice: to w4 at 40.0ms and to w3 at 41.0ms"]
        );
        let sequential = GOOD.replace("token=7", "token=5");
        let report = check_token_order(&history(&sequential));
        assert_eq!(report.figure("duplicate_tokens"), Some(1));
        assert_eq!(report.figure("order_violations"), Some(1));
    }

    #[test]
    fn the_matching_invoke_is_the_latest_one() {
        // w2's first attempt (at 5 ms) failed; the one that succeeded began after w1's ok.
        let retried = GOOD.replace(
            "12 w2 acquire invoke lock=L depth=1",
            "5 w2 acquire invoke lock=L depth=1\n 6 w2 acquire fail lock=L depth=1 err=Contended\n\
             12 w2 acquire invoke lock=L depth=1",
        );
        assert!(check_token_order(&history(&retried)).passed());
        let bad = retried.replace("token=7", "token=4");
        assert_eq!(
            check_token_order(&history(&bad)).figure("order_violations"),
            Some(1)
        );
    }

    #[test]
    fn a_missing_token_or_invoke_is_caught() {
        let no_token = GOOD.replace("depth=1 token=7", "depth=1");
        let report = check_token_order(&history(&no_token));
        assert_eq!(
            report.violations,
            ["w2 acquired L at 20.0ms without a numeric token"]
        );
        let no_invoke = GOOD.replace("12 w2 acquire invoke lock=L depth=1", "");
        let report = check_token_order(&history(&no_invoke));
        assert_eq!(
            report.violations,
            ["w2 acquired L at 20.0ms without an acquire invoke"]
        );
    }
}
