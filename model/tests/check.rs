//! The bounded check CI runs: every scenario explored exhaustively with the real protocol (every
//! property holds, every situation is reached), and every broken variant caught with its
//! counterexample printed (`cargo test -p redlock-model -- --nocapture` shows them).
//! The deeper bound: `cargo run -p redlock-model --release -- --deep`.

use redlock_model::{check, find, scenarios, Variant};

fn holds(scenario: scenarios::Scenario) {
    let report = check(&scenario);
    println!("{}", report.summary());
    for (property, counterexample) in &report.violations {
        println!("counterexample to {property:?}:\n{}", counterexample.trace);
    }
    assert!(report.passed(), "{}", report.summary());
}

fn caught(variant: Variant) {
    let (scenario, property) = scenarios::catching(variant);
    let (found, report) = find(&scenario, property);
    let counterexample = found.unwrap_or_else(|| {
        panic!(
            "{variant:?} was not caught breaking {property:?}: {}",
            report.summary()
        )
    });
    println!(
        "{variant:?} breaks {property:?} in {} steps ({} states searched):\n{}",
        counterexample.steps, report.unique_states, counterexample.trace
    );
    assert!(counterexample.steps > 0);
}

#[test]
fn contention_holds() {
    holds(scenarios::contention());
}

#[test]
fn a_lost_connection_holds() {
    holds(scenarios::lost_connection());
}

#[test]
fn nested_holds_hold() {
    holds(scenarios::nested());
}

#[test]
fn a_pause_within_the_validity_holds() {
    holds(scenarios::pause());
}

#[test]
fn crashes_hold() {
    holds(scenarios::crashes());
}

#[test]
fn tokens_increase_across_a_master_restarted_empty() {
    holds(scenarios::restart_empty());
}

#[test]
fn tokens_increase_past_a_pause_longer_than_the_validity() {
    holds(scenarios::long_pause());
}

#[test]
fn reordered_requests_hold() {
    holds(scenarios::reordered());
}

#[test]
fn a_retried_release_holds() {
    holds(scenarios::release_retry());
}

#[test]
fn counting_every_not_held_as_refused_is_caught() {
    caught(Variant::NotHeldAlwaysRefuses);
}

#[test]
fn max_of_majority_tokens_without_write_back_are_caught() {
    caught(Variant::NoWriteBack);
}

#[test]
fn no_validity_check_is_caught() {
    caught(Variant::NoValidityCheck);
}

#[test]
fn release_only_on_the_masters_believed_locked_is_caught() {
    caught(Variant::ReleaseOnlyBelievedLocked);
}

#[test]
fn a_nested_acquisition_shortening_the_ttl_is_caught() {
    caught(Variant::NestedShortensTtl);
}

#[test]
fn unwatching_before_the_final_release_is_confirmed_is_caught() {
    caught(Variant::UnwatchBeforeReleaseConfirmed);
}

#[test]
fn renewal_after_the_release_is_caught() {
    caught(Variant::RenewalNotCancelled);
}

#[test]
fn a_lock_without_expiry_is_caught() {
    caught(Variant::LockWithoutExpiry);
}

#[test]
fn undoing_only_the_grants_seen_is_caught() {
    caught(Variant::UndoOnlySeenGrants);
}

#[test]
fn a_final_release_that_needs_a_majority_released_is_caught() {
    caught(Variant::FinalReleaseNeedsMajorityReleased);
}

#[test]
fn scripts_that_know_a_hold_by_its_owner_only_are_caught() {
    caught(Variant::HoldByOwnerOnly);
}

/// The variants `enum Variant` declares, read from its source.
fn declared_variants() -> Vec<String> {
    let source = include_str!("../src/config.rs");
    let body = source
        .split_once("pub enum Variant {")
        .and_then(|(_, rest)| rest.split_once("\n}"))
        .map(|(body, _)| body)
        .expect("model/src/config.rs declares `pub enum Variant { ... }`");
    body.lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with("//") && !line.starts_with('#'))
        .map(|line| {
            line.trim_end_matches(',')
                .split(|c: char| !c.is_alphanumeric() && c != '_')
                .next()
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

/// The bodies of this file's `#[test]` functions, without their comment lines.
fn test_bodies() -> Vec<String> {
    include_str!("check.rs")
        .split("#[test]\n")
        .skip(1)
        .map(|test| {
            test.split_once("\n}\n")
                .map_or(test, |(body, _)| body)
                .lines()
                .filter(|line| !line.trim_start().starts_with("//"))
                .collect::<Vec<_>>()
                .join("\n")
        })
        .collect()
}

#[test]
fn every_broken_variant_has_a_test_above() {
    let declared = declared_variants();
    assert!(
        declared.len() > 1 && declared.first().map(String::as_str) == Some("Real"),
        "could not read the variants from model/src/config.rs: {declared:?}"
    );
    let broken: Vec<String> = Variant::BROKEN
        .iter()
        .map(|variant| format!("{variant:?}"))
        .collect();
    let undeclared_broken: Vec<&String> = declared
        .iter()
        .filter(|name| *name != "Real" && !broken.contains(name))
        .collect();
    assert!(
        undeclared_broken.is_empty(),
        "declared but missing from Variant::BROKEN: {undeclared_broken:?}"
    );
    let bodies = test_bodies();
    let untested: Vec<&String> = broken
        .iter()
        .filter(|name| {
            let call = format!("caught(Variant::{name})");
            !bodies.iter().any(|body| body.contains(&call))
        })
        .collect();
    assert!(
        untested.is_empty(),
        "broken variants with no #[test] calling caught(Variant::...): {untested:?}"
    );
}
