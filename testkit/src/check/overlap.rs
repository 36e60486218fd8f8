//! The overlap checker: no two workers believe they hold the same lock at the same time.

use std::collections::BTreeMap;

use super::beliefs::{logged_beliefs, token_text};
use super::{beliefs, span_ms, Belief, BeliefEnd, CheckConfig, Clock, Report};
use crate::history::Event;

/// Checks that no two workers' [`beliefs`] of one lock overlap (touching is fine), and that
/// no worker logs `acquire ok depth=1` for a lock it already believes it holds.
///
/// Figures: `beliefs`, `max_hold_ms`, `overlaps` (pairs of overlapping beliefs).
pub fn check_overlap(events: &[Event], config: &CheckConfig) -> Report {
    let clock = Clock::of(events);
    let mut report = Report::new("overlap");
    for belief in logged_beliefs(events) {
        if belief.ended_by == BeliefEnd::Reacquired {
            report.violations.push(format!(
                "{} acquired {} again at {} while it believed it held it since {} (token {})",
                belief.worker,
                belief.lock,
                clock.at(belief.end),
                clock.at(belief.start),
                token_text(belief.token),
            ));
        }
    }
    let beliefs = beliefs(events, config.pause_bound);
    let mut by_lock: BTreeMap<&str, Vec<&Belief>> = BTreeMap::new();
    for belief in beliefs.iter().filter(|belief| belief.end > belief.start) {
        by_lock.entry(&belief.lock).or_default().push(belief);
    }
    let mut overlaps = 0_usize;
    for (lock, list) in by_lock {
        let mut active: Vec<&Belief> = Vec::new();
        for belief in list {
            active.retain(|earlier| earlier.end > belief.start);
            for earlier in active
                .iter()
                .filter(|earlier| earlier.worker != belief.worker)
            {
                overlaps += 1;
                let describe = |b: &Belief| {
                    format!(
                        "{} (token {}, {}..{}, ended by {})",
                        b.worker,
                        token_text(b.token),
                        clock.at(b.start),
                        clock.at(b.end),
                        b.ended_by
                    )
                };
                report.violations.push(format!(
                    "{} and {} both believed they held {lock} for {}",
                    describe(earlier),
                    describe(belief),
                    span_ms(belief.start, earlier.end.min(belief.end)),
                ));
            }
            active.push(belief);
        }
    }
    let max_hold = beliefs.iter().map(|b| b.end - b.start).max().unwrap_or(0);
    report.push_figure("beliefs", beliefs.len());
    report.push_figure("max_hold_ms", max_hold / 1_000_000);
    report.push_figure("overlaps", overlaps);
    report
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::test_support::history;
    use super::*;

    fn config() -> CheckConfig {
        CheckConfig {
            pause_bound: Duration::from_millis(100),
        }
    }

    /// w1 holds L (nested once), releases; w2 takes it over; w3 loses it to a lost signal
    /// and w4 takes it while w3's watchdog still sends a renewal; w1 holds M meanwhile.
    const GOOD: &str = "
        0 w1 acquire invoke lock=L depth=1
        10 w1 acquire ok lock=L depth=1 token=5
        12 w1 acquire ok lock=L depth=2 token=5
        14 w1 release invoke lock=L depth=2
        20 w1 release invoke lock=L depth=1
        20 w2 acquire ok lock=L depth=1 token=7
        40 w2 release invoke lock=L depth=1
        45 w3 acquire ok lock=L depth=1 token=9
        50 w3 lost info lock=L reason=expired
        51 w1 acquire ok lock=M depth=1 token=1
        60 w3 renew info lock=L
        61 w4 acquire ok lock=L depth=1 token=11
        70 w4 write ok lock=L token=11 value=1 seq=1
    ";

    #[test]
    fn handed_over_beliefs_pass() {
        let report = check_overlap(&history(GOOD), &config());
        assert!(report.passed(), "{report}");
        assert_eq!(report.figure("beliefs"), Some(5));
        assert_eq!(report.figure("max_hold_ms"), Some(20));
        assert_eq!(report.figure("overlaps"), Some(0));
    }

    #[test]
    fn an_overlap_is_caught_with_both_workers_tokens_and_length() {
        let bad = GOOD.replace("20 w2 acquire ok", "17 w2 acquire ok");
        let report = check_overlap(&history(&bad), &config());
        assert_eq!(report.figure("overlaps"), Some(1));
        assert_eq!(
            report.violations,
            [
                "w1 (token 5, 10.0ms..20.0ms, ended by release) and w2 (token 7, 17.0ms..40.0ms, \
              ended by release) both believed they held L for 3.0ms"
            ]
        );
        // Every overlapping pair counts: w5 overlaps both w1 and w2.
        let worse =
            format!("{bad}\n18 w5 acquire ok lock=L depth=1 token=8\n19 w5 lost info lock=L");
        assert_eq!(
            check_overlap(&history(&worse), &config()).figure("overlaps"),
            Some(3)
        );
    }

    #[test]
    fn acquiring_a_lock_already_believed_held_is_caught() {
        let bad = GOOD.replace(
            "14 w1 release invoke lock=L depth=2",
            "14 w1 acquire ok lock=L depth=1 token=6",
        );
        let report = check_overlap(&history(&bad), &config());
        assert_eq!(
            report.violations,
            ["w1 acquired L again at 14.0ms while it believed it held it since 10.0ms (token 5)"]
        );
    }

    #[test]
    fn a_holder_paused_past_the_bound_no_longer_overlaps() {
        let history_with = |heal: u64| {
            history(&format!(
                "
                0 w1 acquire ok lock=L depth=1 token=5
                30 nemesis fault ok kind=stop-worker target=w1
                35 w2 acquire ok lock=L depth=1 token=7
                {heal} nemesis heal ok kind=stop-worker target=w1
                300 w1 lost info lock=L reason=expired
                310 w2 release invoke lock=L depth=1
                "
            ))
        };
        assert!(check_overlap(&history_with(131), &config()).passed());
        let report = check_overlap(&history_with(130), &config());
        assert_eq!(report.figure("overlaps"), Some(1), "{report}");
        assert!(report.violations[0].contains("0.0ms..300.0ms, ended by lost"));
    }
}
