//! The fencing checker: a lock's resource never accepts an operation whose token is older than
//! one it already accepted.

use std::collections::BTreeMap;

use super::{lock_of, Clock, Report};
use crate::history::{Event, Op, Phase};

/// Replays each lock's accepted resource operations (`read ok`, `write ok`) in its resource's
/// `seq` order: each must carry a token at least as large as every earlier accepted one's, else
/// "stale op accepted". Two accepted operations with one `seq`, or one without a `seq` or
/// `token`, are violations too.
///
/// Figures: `accepted_writes`, `accepted_reads`, `stale_writes_rejected` (`write fail`),
/// `stale_reads_rejected` (`read fail`).
pub fn check_fencing(events: &[Event]) -> Report {
    let clock = Clock::of(events);
    let mut report = Report::new("fencing");
    let mut accepted: BTreeMap<(&str, u64), &Event> = BTreeMap::new();
    let (mut writes, mut reads, mut stale_writes, mut stale_reads) = (0, 0, 0, 0);
    for event in events {
        match (event.op, event.phase) {
            (Op::Write, Phase::Fail) => stale_writes += 1,
            (Op::Read, Phase::Fail) => stale_reads += 1,
            (Op::Write | Op::Read, Phase::Ok) => {
                if event.op == Op::Write {
                    writes += 1;
                } else {
                    reads += 1;
                }
                let (Some(seq), Some(_)) = (event.number("seq"), event.number("token")) else {
                    report.violations.push(format!(
                        "{} {} accepted at {} without a numeric seq and token: {event}",
                        event.actor,
                        event.op,
                        clock.at(event.t),
                    ));
                    continue;
                };
                if let Some(first) = accepted.insert((lock_of(event), seq), event) {
                    report.violations.push(format!(
                        "duplicate seq {seq}: {} {} at {} and {} {} at {}",
                        first.actor,
                        first.op,
                        clock.at(first.t),
                        event.actor,
                        event.op,
                        clock.at(event.t),
                    ));
                    accepted.insert((lock_of(event), seq), first);
                }
            }
            _ => {}
        }
    }
    let mut highest: Option<(u64, &Event)> = None;
    let mut lock = None;
    for ((of, seq), event) in &accepted {
        if lock != Some(*of) {
            // A new lock: a new resource, ordered by its own seq.
            lock = Some(*of);
            highest = None;
        }
        let token = event.number("token").unwrap_or(0);
        match highest {
            Some((top, by)) if token < top => report.violations.push(format!(
                "stale op accepted: {} {} token={token} seq={seq} at {}, after {} {} \
                 token={top} seq={} at {}",
                event.actor,
                event.op,
                clock.at(event.t),
                by.actor,
                by.op,
                by.field("seq").unwrap_or("?"),
                clock.at(by.t),
            )),
            Some((top, _)) if token == top => {}
            _ => highest = Some((token, event)),
        }
    }
    report.push_figure("accepted_writes", writes);
    report.push_figure("accepted_reads", reads);
    report.push_figure("stale_writes_rejected", stale_writes);
    report.push_figure("stale_reads_rejected", stale_reads);
    report
}

#[cfg(test)]
mod tests {
    use super::super::test_support::history;
    use super::*;

    /// Two holders in turn; the old one's late write is rejected, as it must be.
    const GOOD: &str = "
        10 w1 read ok lock=L token=5 value=0 seq=1
        11 w1 write ok lock=L token=5 value=1 seq=2
        20 w2 read ok lock=L token=7 value=1 seq=3
        21 w1 write fail lock=L token=5 value=1 highest=7
        22 w1 read fail lock=L token=5 highest=7
        23 w2 write ok lock=L token=7 value=2 seq=4
    ";

    #[test]
    fn a_fenced_history_passes_and_counts_rejections() {
        let report = check_fencing(&history(GOOD));
        assert!(report.passed(), "{report}");
        assert_eq!(report.figure("accepted_writes"), Some(2));
        assert_eq!(report.figure("accepted_reads"), Some(2));
        assert_eq!(report.figure("stale_writes_rejected"), Some(1));
        assert_eq!(report.figure("stale_reads_rejected"), Some(1));
    }

    #[test]
    fn a_stale_write_accepted_is_caught() {
        let bad = GOOD.replace(
            "21 w1 write fail lock=L token=5 value=1 highest=7",
            "21 w1 write ok lock=L token=5 value=1 seq=5",
        );
        let report = check_fencing(&history(&bad));
        assert_eq!(report.violations.len(), 1, "{report}");
        let violation = &report.violations[0];
        assert!(violation.starts_with("stale op accepted: w1 write token=5 seq=5"));
        assert!(
            violation.contains("after w2 read token=7 seq=3"),
            "{violation}"
        );
    }

    #[test]
    fn seq_order_decides_not_time_order() {
        // Logged late, but accepted by the resource before w2's operations: fine.
        let late = "
            10 w2 read ok lock=L token=7 value=1 seq=3
            30 w1 write ok lock=L token=5 value=1 seq=2
        ";
        assert!(check_fencing(&history(late)).passed());
        // A stale read accepted is as bad as a stale write.
        let stale = "
            10 w2 write ok lock=L token=7 value=2 seq=3
            30 w1 read ok lock=L token=5 value=2 seq=4
        ";
        let report = check_fencing(&history(stale));
        assert!(report.violations[0].starts_with("stale op accepted: w1 read token=5 seq=4"));
    }

    #[test]
    fn a_duplicate_or_missing_seq_is_caught() {
        let duplicate = GOOD.replace("seq=4", "seq=3");
        let report = check_fencing(&history(&duplicate));
        assert_eq!(report.violations.len(), 1, "{report}");
        assert!(report.violations[0].starts_with("duplicate seq 3: w2 read at 10.0ms and w2 write"));

        let missing = GOOD.replace(" seq=4", "");
        let report = check_fencing(&history(&missing));
        assert!(
            report.violations[0].contains("without a numeric seq and token"),
            "{report}"
        );
    }

    #[test]
    fn each_lock_fences_its_own_resource() {
        let report = check_fencing(&history(
            "
            1 w1 write ok lock=A token=9 value=1 seq=1
            2 w2 write ok lock=B token=5 value=1 seq=1
            3 w2 write ok lock=B token=4 value=2 seq=2
            ",
        ));
        assert_eq!(report.violations.len(), 1, "{report}");
        assert!(report.violations[0].contains("token=4"), "{report}");
    }
}
