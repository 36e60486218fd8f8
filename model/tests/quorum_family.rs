//! The quorum designs of the semaphore and the latch: the acknowledgement quorum and the
//! grow-only set keep their promises over every execution of the bounded scenarios, and the
//! plain majority and the counter are caught breaking them, with the length of the shortest
//! path that shows it (`-- --nocapture` prints them).

use redlock_model::quorum_family::{
    check_family, family_catching, family_scenarios, FamilyConfig, FamilyVariant, Primitive,
};

#[test]
fn the_quorum_designs_keep_their_promises() {
    for scenario in family_scenarios(FamilyVariant::Correct) {
        let report = check_family(&scenario, None);
        println!("{}", report.summary());
        assert!(report.passed(), "{}", report.summary());
    }
}

#[test]
fn the_plain_majority_and_the_counter_are_caught() {
    for variant in FamilyVariant::BROKEN {
        let property = variant.breaks();
        let report = check_family(&family_catching(variant), Some(property));
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

#[test]
fn the_acknowledgement_quorum_is_the_pigeonhole_bound() {
    let quorum = |masters, permits| {
        FamilyConfig {
            name: "q",
            masters,
            clients: 0,
            primitive: Primitive::Semaphore { permits },
            variant: FamilyVariant::Correct,
        }
        .permit_quorum(permits)
    };
    // One permit is the majority; k >= N-1 needs every master.
    assert_eq!(quorum(5, 1), 3);
    assert_eq!(quorum(5, 2), 4);
    assert_eq!(quorum(5, 3), 4);
    assert_eq!(quorum(5, 4), 5);
    assert_eq!(quorum(3, 2), 3);
}
