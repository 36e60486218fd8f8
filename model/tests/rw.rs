//! The read-write lock's model: the scripts as shipped keep every promise over every execution
//! of the bounded scenario, and each broken variant is caught breaking its promise, with the
//! length of the shortest path that shows it (`-- --nocapture` prints them).

use redlock_model::rw::{check_rw, rw_catching, rw_scenarios, RwVariant};

#[test]
fn the_read_write_lock_keeps_its_promises() {
    for scenario in rw_scenarios(RwVariant::Correct) {
        let report = check_rw(&scenario, None);
        println!("{}", report.summary());
        assert!(report.passed(), "{}", report.summary());
    }
}

#[test]
fn every_broken_read_write_variant_is_caught() {
    for variant in RwVariant::BROKEN {
        let property = variant.breaks();
        let report = check_rw(&rw_catching(variant), Some(property));
        let steps = report.steps_to(property.name());
        println!(
            "{variant:?} breaks {:?} in {steps:?} steps ({} states)",
            property.name(),
            report.unique_states
        );
        assert!(
            steps.is_some_and(|steps| steps > 0),
            "{variant:?} not caught: {}",
            report.summary()
        );
    }
}
