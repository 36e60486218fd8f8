//! The quiescence checker: once the run winds down nothing is left behind (no lock keys, no
//! watchdog registrations, no holds), and no worker renews a lock it no longer registers.

use std::collections::{BTreeSet, HashMap};

use super::{is_worker, lock_of, nanos, nemesis_target, span_ms, Clock, Report};
use crate::history::{Event, Op, Phase};

/// How long after a `lost info` a renewal may still be sent: a round already in flight.
const LOST_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

/// A worker's watchdog registration of one lock: from its `acquire invoke depth=1` to the
/// end of the hold (`release ok`/`release fail`, `acquire fail`/`acquire info` at depth 1, or
/// `lost info` plus [`LOST_GRACE`]).
#[derive(Debug, Clone, Copy)]
enum Registration {
    Active,
    Ended {
        at: u64,
        by: &'static str,
        renewable_until: u64,
    },
}

/// Checks the end of the run: the test's `note info what=quiesce` is there; its final note's
/// `keys` (lock keys left on the nodes) is 0; every `stats info` has `registered=0` (and
/// `holds=0` when it reports holds); every worker that was not killed wrote one. And throughout the run: a
/// `renew info lock=L` of a worker comes while that worker registers L, else "renewal after
/// release". A registration spans from the `acquire invoke depth=1` to the `release ok` /
/// `release fail` at depth 1 (renewals while the release is in flight are fine), or to an
/// `acquire fail` / `acquire info` at depth 1, or to 1 s after a `lost info` (a renewal round
/// may already be in flight when the lost signal fires).
///
/// Figures: `renewals`, `renewals_after_release`, `stats_reports`.
pub fn check_quiescence(events: &[Event]) -> Report {
    let clock = Clock::of(events);
    let mut report = Report::new("quiescence");
    let note = |what: &str| {
        let is_it = |e: &&Event| e.op == Op::Note && e.field("what") == Some(what);
        events.iter().rev().find(is_it)
    };
    if note("quiesce").is_none() {
        report
            .violations
            .push("no `note info what=quiesce`".to_owned());
    }
    match note("final").map(|event| event.number("keys")) {
        None => report
            .violations
            .push("no `note info what=final ... keys=K`".to_owned()),
        Some(None) => report
            .violations
            .push("the final note has no numeric keys".to_owned()),
        Some(Some(0)) => {}
        Some(Some(keys)) => report.violations.push(format!("{keys} lock keys left")),
    }
    let (renewals, stray) = check_renewals(events, clock, &mut report.violations);
    let mut workers: BTreeSet<&str> = BTreeSet::new();
    let mut reported: BTreeSet<&str> = BTreeSet::new();
    let mut killed: BTreeSet<&str> = BTreeSet::new();
    for event in events {
        if let Some(worker) = nemesis_target(event, Op::Fault, "kill-worker") {
            killed.insert(worker);
        }
        if is_worker(&event.actor) {
            workers.insert(&event.actor);
        }
        if (event.op, event.phase) == (Op::Spawn, Phase::Ok) {
            workers.extend(event.field("target").filter(|target| is_worker(target)));
        }
        if (event.op, event.phase) != (Op::Stats, Phase::Info) {
            continue;
        }
        reported.insert(&event.actor);
        let (registered, holds) = (event.number("registered"), event.number("holds"));
        // `holds` is optional: the worker binary reports only the watchdog's registrations.
        if registered != Some(0) || holds.is_some_and(|holds| holds != 0) {
            report.violations.push(format!(
                "{} still had registered={} holds={} after quiescing (at {})",
                event.actor,
                event.field("registered").unwrap_or("?"),
                event.field("holds").unwrap_or("?"),
                clock.at(event.t),
            ));
        }
    }
    // A worker running several loops reports once per loop (`w<N>.<T>`).
    let reported_by = |worker: &str| {
        reported.iter().any(|actor| {
            *actor == worker
                || actor
                    .strip_prefix(worker)
                    .is_some_and(|task| task.starts_with('.'))
        })
    };
    for worker in workers
        .iter()
        .filter(|w| !reported_by(w))
        .filter(|w| !killed.contains(*w))
    {
        report
            .violations
            .push(format!("{worker} was never killed but reported no stats"));
    }
    report.push_figure("renewals", renewals);
    report.push_figure("renewals_after_release", stray);
    report.push_figure("stats_reports", reported.len());
    report
}

/// Checks every `renew info` against its worker's registration of the lock; returns how many
/// renewals there were and how many came after the registration ended.
fn check_renewals(events: &[Event], clock: Clock, violations: &mut Vec<String>) -> (usize, usize) {
    let grace = nanos(LOST_GRACE);
    let mut registrations: HashMap<(&str, &str), Registration> = HashMap::new();
    let (mut renewals, mut stray) = (0, 0);
    for event in events.iter().filter(|event| is_worker(&event.actor)) {
        let key = (event.actor.as_str(), lock_of(event));
        let (end, renewable_for) = match (event.op, event.phase) {
            (Op::Acquire, Phase::Invoke) if event.is_outer() => {
                registrations.insert(key, Registration::Active);
                continue;
            }
            (Op::Acquire, Phase::Fail) if event.is_outer() => ("acquire fail", 0),
            (Op::Acquire, Phase::Info) if event.is_outer() => ("acquire info", 0),
            (Op::Release, Phase::Ok) if event.is_outer() => ("release ok", 0),
            (Op::Release, Phase::Fail) if event.is_outer() => ("release fail", 0),
            (Op::Lost, Phase::Info) => ("lost", grace),
            (Op::Renew, Phase::Info) => {
                renewals += 1;
                let (worker, lock) = key;
                let at = clock.at(event.t);
                match registrations.get(&key) {
                    Some(Registration::Active) => {}
                    // With the round's start (`round=T`): a round that began before the
                    // registration ended took its holds before, and may send them after.
                    // Without it: the event's own time, with the grace after a lost signal.
                    Some(&Registration::Ended {
                        at: ended,
                        renewable_until,
                        ..
                    }) if event
                        .number("round")
                        .map_or(event.t <= renewable_until, |round| round <= ended) => {}
                    Some(&Registration::Ended { at: ended, by, .. }) => {
                        stray += 1;
                        violations.push(format!(
                            "renewal after release: {worker} renewed {lock} at {at}, {} after \
                             its registration ended ({by} at {})",
                            span_ms(ended, event.t),
                            clock.at(ended),
                        ));
                    }
                    None => {
                        stray += 1;
                        violations.push(format!(
                            "renewal after release: {worker} renewed {lock} at {at} but never \
                             registered it"
                        ));
                    }
                }
                continue;
            }
            _ => continue,
        };
        let until = event.t.saturating_add(renewable_for);
        // A hold can end twice (lost, then its release fails): the first end counts.
        let ended = match registrations.get(&key) {
            Some(&Registration::Ended {
                at,
                by,
                renewable_until,
            }) => Registration::Ended {
                at,
                by,
                renewable_until: renewable_until.max(until),
            },
            _ => Registration::Ended {
                at: event.t,
                by: end,
                renewable_until: until,
            },
        };
        registrations.insert(key, ended);
    }
    (renewals, stray)
}

#[cfg(test)]
mod tests {
    use super::super::test_support::history;
    use super::*;

    /// w1 renews from before its acquisition completes until its release is in flight; w2
    /// loses its lock and one renewal round still goes out; w3 is killed and reports nothing.
    const GOOD: &str = "
        0 w1 acquire invoke lock=L depth=1
        1 w1 renew info lock=L
        2 w1 acquire ok lock=L depth=1 token=5
        5 w1 renew info lock=L
        8 w1 release invoke lock=L depth=1
        9 w1 renew info lock=L
        10 w1 release ok lock=L depth=1
        20 w2 acquire invoke lock=L depth=1
        21 w2 acquire ok lock=L depth=1 token=7
        30 w2 lost info lock=L reason=expired
        500 w2 renew info lock=L
        600 w2 release invoke lock=L depth=1
        601 w2 release fail lock=L depth=1 err=LockLost
        700 w3 acquire invoke lock=L depth=1
        701 nemesis fault ok kind=kill-worker target=w3
        1100 test note info what=quiesce
        1200 w1 stats info registered=0 holds=0 renewed=3
        1201 w2 stats info registered=0 holds=0 renewed=1
        1300 test note info what=final keys=0
    ";

    fn check(edit: impl Fn(&str) -> String) -> Report {
        check_quiescence(&history(&edit(GOOD)))
    }

    #[test]
    fn a_clean_wind_down_passes() {
        let report = check(str::to_owned);
        assert!(report.passed(), "{report}");
        assert_eq!(report.figure("renewals"), Some(4));
        assert_eq!(report.figure("renewals_after_release"), Some(0));
        assert_eq!(report.figure("stats_reports"), Some(2));
    }

    #[test]
    fn a_renewal_after_release_is_caught() {
        let report = check(|h| format!("{h}\n11 w1 renew info lock=L"));
        assert_eq!(report.figure("renewals_after_release"), Some(1));
        assert_eq!(
            report.violations,
            [
                "renewal after release: w1 renewed L at 11.0ms, 1.0ms after its registration \
              ended (release ok at 10.0ms)"
            ]
        );
    }

    #[test]
    fn a_round_started_before_the_release_may_send_after_it() {
        // `round` is on the clock (nanoseconds); w1's release completed at 10 ms.
        let report = check(|h| format!("{h}\n11 w1 renew info lock=L round=9000000"));
        assert!(report.passed(), "{report}");
        let report = check(|h| format!("{h}\n12 w1 renew info lock=L round=10500000"));
        assert_eq!(report.figure("renewals_after_release"), Some(1), "{report}");
    }

    #[test]
    fn a_renewal_past_the_lost_grace_is_caught() {
        let report = check(|h| format!("{h}\n1040 w2 renew info lock=L"));
        assert_eq!(
            report.violations,
            [
                "renewal after release: w2 renewed L at 1040.0ms, 1010.0ms after its registration \
              ended (lost at 30.0ms)"
            ]
        );
    }

    #[test]
    fn a_failed_acquisition_or_a_stranger_must_not_renew() {
        let report = check(|h| {
            format!(
                "{h}\n40 w4 acquire invoke lock=L depth=1\n41 w4 acquire fail lock=L depth=1 \
                 err=Contended\n42 w4 renew info lock=L\n43 w5 renew info lock=M"
            )
        });
        assert_eq!(report.figure("renewals_after_release"), Some(2));
        assert!(
            report.violations[0].contains("(acquire fail at 41.0ms)"),
            "{report}"
        );
        assert!(report.violations[1].ends_with("w5 renewed M at 43.0ms but never registered it"));
    }

    #[test]
    fn leftovers_after_quiescing_are_caught() {
        let report = check(|h| {
            h.replace("keys=0", "keys=2").replace(
                "1201 w2 stats info registered=0 holds=0",
                "1201 w2 stats info registered=1 holds=2",
            )
        });
        assert_eq!(
            report.violations,
            [
                "2 lock keys left",
                "w2 still had registered=1 holds=2 after quiescing (at 1201.0ms)"
            ]
        );
    }

    #[test]
    fn a_silent_worker_and_missing_notes_are_caught() {
        let report = check(|h| h.replace("1201 w2 stats info registered=0 holds=0 renewed=1", ""));
        assert_eq!(
            report.violations,
            ["w2 was never killed but reported no stats"]
        );
        // A worker that was spawned and never said a word.
        let report = check(|h| format!("1 test spawn ok target=w9 pid=42\n{h}"));
        assert_eq!(
            report.violations,
            ["w9 was never killed but reported no stats"]
        );
        let report = check(|h| {
            h.replace("what=quiesce", "what=other")
                .replace("what=final", "what=x")
        });
        assert_eq!(
            report.violations,
            [
                "no `note info what=quiesce`",
                "no `note info what=final ... keys=K`"
            ]
        );
    }
}
