//! Runs the model checker over the scenarios and prints what it found.
//!
//! `cargo run -p redlock-model --release` checks the bounded scenarios CI checks; `-- --deep`
//! the deeper ones; `-- --variants` also checks that every broken variant is caught and prints
//! its counterexample; `-- --only NAME` checks one scenario; `-- --budget SECS` stops each
//! scenario after that long (and fails, reporting how far it got).

use std::time::Duration;

use redlock_model::bounded::BoundedReport;
use redlock_model::quorum_family::{
    check_family, family_catching, family_scenarios, FamilyVariant,
};
use redlock_model::rw::{check_rw, rw_catching, rw_deep_scenarios, rw_scenarios, RwVariant};
use redlock_model::{check_within, find, scenarios, Variant};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let deep = args.iter().any(|arg| arg == "--deep");
    let variants = args.iter().any(|arg| arg == "--variants");
    let only = args
        .iter()
        .position(|arg| arg == "--only")
        .and_then(|at| args.get(at + 1));
    let budget = args
        .iter()
        .position(|arg| arg == "--budget")
        .and_then(|at| args.get(at + 1))
        .and_then(|secs| secs.parse().ok())
        .map(Duration::from_secs);
    let mut failed = false;
    let mut chosen = if deep {
        scenarios::deep()
    } else {
        scenarios::bounded()
    };
    chosen.retain(|scenario| only.is_none_or(|name| scenario.name == name));
    for scenario in &chosen {
        let report = check_within(scenario, budget);
        println!("{}", report.summary());
        for (property, counterexample) in &report.violations {
            println!("counterexample to {property:?}:\n{}", counterexample.trace);
        }
        failed |= !report.passed();
    }
    let mut rw = if deep {
        rw_deep_scenarios()
    } else {
        rw_scenarios(RwVariant::Correct)
    };
    rw.retain(|scenario| only.is_none_or(|name| scenario.name == name));
    for scenario in &rw {
        let report = check_rw(scenario, None);
        println!("{}", report.summary());
        failed |= !report.passed();
    }
    let mut family = family_scenarios(FamilyVariant::Correct);
    family.retain(|scenario| only.is_none_or(|name| scenario.name == name));
    for scenario in &family {
        let report = check_family(scenario, None);
        println!("{}", report.summary());
        failed |= !report.passed();
    }
    if variants {
        for variant in FamilyVariant::BROKEN {
            let property = variant.breaks();
            let report = check_family(&family_catching(variant), Some(property));
            failed |= !says_caught(&format!("{variant:?}"), property.name(), &report);
        }
        for variant in RwVariant::BROKEN {
            let property = variant.breaks();
            let report = check_rw(&rw_catching(variant), Some(property));
            failed |= !says_caught(&format!("{variant:?}"), property.name(), &report);
        }
        for variant in Variant::BROKEN {
            let (scenario, property) = scenarios::catching(variant);
            let (found, report) = find(&scenario, property);
            match found {
                Some(counterexample) => println!(
                    "{variant:?} caught in {}: {property:?} broken in {} steps ({} states, {:.1} s)\n{}",
                    scenario.name,
                    counterexample.steps,
                    report.unique_states,
                    report.elapsed.as_secs_f64(),
                    counterexample.trace
                ),
                None => {
                    println!("{variant:?} NOT caught in {}: {}", scenario.name, report.summary());
                    failed = true;
                }
            }
        }
    }
    if failed {
        std::process::exit(1);
    }
}

/// Prints whether the broken `variant` was caught breaking `property` in `report`; whether it
/// was.
fn says_caught(variant: &str, property: &str, report: &BoundedReport) -> bool {
    match report.steps_to(property) {
        Some(steps) => {
            println!(
                "{variant} caught in {}: {property:?} broken in {steps} steps ({} states, {:.1} s)",
                report.name,
                report.unique_states,
                report.elapsed.as_secs_f64()
            );
            true
        }
        None => {
            println!(
                "{variant} NOT caught in {}: {}",
                report.name,
                report.summary()
            );
            false
        }
    }
}
