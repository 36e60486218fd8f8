//! The counter checker: every accepted increment of a lock's resource is in its final value,
//! and nothing else is.

use std::collections::{BTreeMap, HashMap};

use super::{lock_of, Report};
use crate::history::{Event, Op, Phase};

/// What happened to one lock's counter.
#[derive(Default)]
struct Tally {
    /// Accepted writes (W).
    accepted: u64,
    /// Writes whose outcome is unknown (I).
    indeterminate: u64,
    /// The test's `note info what=value lock=L value=V`, if any (inner `None`: not a number).
    final_value: Option<Option<u64>>,
}

/// For each lock, compares its resource's final value V (the test's `note info what=value
/// lock=L value=V`) with the W accepted writes (`write ok`) and the I indeterminate ones (a
/// `write invoke` whose worker logged no `write ok` / `write fail` before its next write
/// invoke or the history's end, or that ended in `write info`). Each accepted write adds one,
/// so W <= V <= W + I: V < W means W - V lost updates, V > W + I writes from nowhere. A lock
/// written without a final value is a violation.
///
/// Figures (summed over locks): `critical_sections` (W), `indeterminate` (I), `lost_updates`,
/// `final_value`.
pub fn check_counter(events: &[Event]) -> Report {
    let mut report = Report::new("counter");
    let mut locks: BTreeMap<&str, Tally> = BTreeMap::new();
    let mut pending: HashMap<&str, &Event> = HashMap::new();
    for event in events {
        let worker = event.actor.as_str();
        match (event.op, event.phase) {
            (Op::Write, Phase::Invoke) => {
                // The previous write of this worker, if still unanswered, never will be.
                if let Some(unanswered) = pending.insert(worker, event) {
                    locks.entry(lock_of(unanswered)).or_default().indeterminate += 1;
                }
            }
            (Op::Write, Phase::Ok) => {
                locks.entry(lock_of(event)).or_default().accepted += 1;
                pending.remove(worker);
            }
            (Op::Write, Phase::Fail) => {
                pending.remove(worker);
            }
            (Op::Write, Phase::Info) => {
                locks.entry(lock_of(event)).or_default().indeterminate += 1;
                pending.remove(worker);
            }
            (Op::Note, _) if event.field("what") == Some("value") => {
                locks.entry(lock_of(event)).or_default().final_value = Some(event.number("value"));
            }
            _ => {}
        }
    }
    for unanswered in pending.values() {
        locks.entry(lock_of(unanswered)).or_default().indeterminate += 1;
    }
    let (mut w_all, mut i_all, mut lost_all, mut v_all) = (0, 0, 0, 0);
    for (lock, tally) in &locks {
        let (w, i) = (tally.accepted, tally.indeterminate);
        w_all += w;
        i_all += i;
        match tally.final_value {
            None => report.violations.push(format!(
                "no `note info what=value lock={lock} value=V`: {lock}'s final value is unknown"
            )),
            Some(None) => report
                .violations
                .push(format!("{lock}'s final value is not a number")),
            Some(Some(v)) => {
                v_all += v;
                if v < w {
                    lost_all += w - v;
                    report.violations.push(format!(
                        "{} lost updates of {lock}: final value {v}, but {w} writes were accepted",
                        w - v
                    ));
                } else if v > w + i {
                    report.violations.push(format!(
                        "{} writes from nowhere to {lock}: final value {v}, but only {w} writes \
                         were accepted and {i} may have been",
                        v - w - i
                    ));
                }
            }
        }
    }
    report.push_figure("final_value", v_all);
    report.push_figure("critical_sections", w_all);
    report.push_figure("indeterminate", i_all);
    report.push_figure("lost_updates", lost_all);
    report
}

#[cfg(test)]
mod tests {
    use super::super::test_support::history;
    use super::*;

    /// Two accepted writes, one rejected, and three whose outcome nobody knows: w2 was
    /// killed mid-write, w3 invoked twice without an answer, w4's ended in `info`.
    const GOOD: &str = "
        1 w1 write invoke lock=L token=5 value=1
        2 w1 write ok lock=L token=5 value=1 seq=2
        3 w1 write invoke lock=L token=5 value=2
        4 w1 write fail lock=L token=5 value=2 highest=7
        5 w2 write invoke lock=L token=7 value=2
        6 w1 write invoke lock=L token=9 value=2
        7 w1 write ok lock=L token=9 value=2 seq=4
        8 w3 write invoke lock=L token=11 value=3
        9 w3 write invoke lock=L token=11 value=3
        10 w3 write ok lock=L token=11 value=3 seq=6
        11 w4 write invoke lock=L token=13 value=4
        12 w4 write info lock=L token=13 value=4 err=timeout
        20 test note info what=value lock=L value=FINAL
    ";

    fn check(final_value: &str) -> Report {
        check_counter(&history(&GOOD.replace("FINAL", final_value)))
    }

    #[test]
    fn a_final_value_within_the_bounds_passes() {
        for v in ["3", "4", "5", "6"] {
            let report = check(v);
            assert!(report.passed(), "{report}");
            assert_eq!(report.figure("critical_sections"), Some(3));
            assert_eq!(report.figure("indeterminate"), Some(3));
        }
    }

    #[test]
    fn lost_updates_are_caught() {
        let report = check("1");
        assert_eq!(report.figure("lost_updates"), Some(2));
        assert_eq!(
            report.violations,
            ["2 lost updates of L: final value 1, but 3 writes were accepted"]
        );
    }

    #[test]
    fn writes_from_nowhere_are_caught() {
        let report = check("7");
        assert_eq!(
            report.violations,
            [
                "1 writes from nowhere to L: final value 7, but only 3 writes were accepted and 3 \
                 may have been"
            ]
        );
    }

    #[test]
    fn a_missing_final_value_is_caught() {
        let report = check_counter(&history("1 w1 write ok lock=L token=5 value=1 seq=1"));
        assert_eq!(report.violations.len(), 1);
        assert!(report.violations[0].starts_with("no `note info what=value lock=L"));
        assert!(!check("x").passed());
    }

    #[test]
    fn each_lock_has_its_own_counter() {
        let report = check_counter(&history(
            "
            1 w1 write ok lock=A token=5 value=1 seq=2
            2 w2 write ok lock=B token=6 value=1 seq=2
            3 w2 write ok lock=B token=7 value=1 seq=4
            9 test note info what=value lock=A value=1
            9 test note info what=value lock=B value=1
            ",
        ));
        assert_eq!(
            report.violations,
            ["1 lost updates of B: final value 1, but 2 writes were accepted"]
        );
    }
}
