//! The counter checker: every accepted increment of the resource is in its final value, and
//! nothing else is.

use std::collections::HashMap;

use super::Report;
use crate::history::{Event, Op, Phase};

/// Compares the resource's final value V (the test's `note info what=final value=V`) with the
/// W accepted writes (`write ok`) and the I indeterminate ones (a `write invoke` whose worker
/// logged no `write ok` / `write fail` before its next write invoke or the history's end, or
/// that ended in `write info`). Each accepted write adds one, so W <= V <= W + I: V < W means
/// W - V lost updates, V > W + I writes from nowhere. A missing final value is a violation.
///
/// Figures: `critical_sections` (W), `indeterminate` (I), `lost_updates`, `final_value`.
pub fn check_counter(events: &[Event]) -> Report {
    let mut report = Report::new("counter");
    let mut accepted = 0_u64;
    let mut indeterminate = 0_u64;
    let mut pending: HashMap<&str, &Event> = HashMap::new();
    let mut final_value = None;
    for event in events {
        let worker = event.actor.as_str();
        match (event.op, event.phase) {
            (Op::Write, Phase::Invoke) => {
                // The previous write of this worker, if still unanswered, never will be.
                let unanswered = pending.insert(worker, event);
                indeterminate += u64::from(unanswered.is_some());
            }
            (Op::Write, Phase::Ok) => {
                accepted += 1;
                pending.remove(worker);
            }
            (Op::Write, Phase::Fail) => {
                pending.remove(worker);
            }
            (Op::Write, Phase::Info) => {
                indeterminate += 1;
                pending.remove(worker);
            }
            (Op::Note, _) if event.field("what") == Some("final") => {
                final_value = Some(event.number("value"));
            }
            _ => {}
        }
    }
    indeterminate += pending.len() as u64;
    let (w, i) = (accepted, indeterminate);
    let mut lost = 0;
    match final_value {
        None => report
            .violations
            .push("no `note info what=final value=V`: the final value is unknown".to_owned()),
        Some(None) => report
            .violations
            .push("the final note has no numeric value".to_owned()),
        Some(Some(v)) => {
            report.push_figure("final_value", v);
            if v < w {
                lost = w - v;
                report.violations.push(format!(
                    "{lost} lost updates: final value {v}, but {w} writes were accepted"
                ));
            } else if v > w + i {
                report.violations.push(format!(
                    "{} writes from nowhere: final value {v}, but only {w} writes were accepted \
                     and {i} may have been",
                    v - w - i
                ));
            }
        }
    }
    report.push_figure("critical_sections", w);
    report.push_figure("indeterminate", i);
    report.push_figure("lost_updates", lost);
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
        20 test note info what=final value=FINAL keys=0
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
            ["2 lost updates: final value 1, but 3 writes were accepted"]
        );
    }

    #[test]
    fn writes_from_nowhere_are_caught() {
        let report = check("7");
        assert_eq!(
            report.violations,
            [
                "1 writes from nowhere: final value 7, but only 3 writes were accepted and 3 may \
              have been"
            ]
        );
    }

    #[test]
    fn a_missing_final_value_is_caught() {
        let report = check_counter(&history("1 w1 write ok lock=L token=5 value=1 seq=1"));
        assert_eq!(report.violations.len(), 1);
        assert!(report.violations[0].starts_with("no `note info what=final"));
        assert!(!check("x").passed());
    }
}
