//! Running a check and what it found: states explored, time, and each property's verdict with a
//! counterexample (or, for a situation to reach, an example).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use stateright::{Checker, Expectation, HasDiscoveries, Model, Path, Property};

use crate::scenarios::Scenario;
use crate::system::{Action, System};

/// A path the checker found.
#[derive(Clone, Debug)]
pub struct Counterexample {
    /// How many actions it takes.
    pub steps: usize,
    /// The actions, one per line, with the state after the last.
    pub trace: String,
}

/// What one check found.
#[derive(Clone, Debug)]
pub struct Report {
    /// The scenario's name.
    pub scenario: &'static str,
    /// States generated (with repeats).
    pub states: usize,
    /// Distinct states.
    pub unique_states: usize,
    /// The longest path explored.
    pub max_depth: usize,
    /// How long it took.
    pub elapsed: Duration,
    /// Whether every state within the bound was explored (not stopped by a time budget).
    pub complete: bool,
    /// Properties that must always hold and did not, with their counterexamples.
    pub violations: BTreeMap<&'static str, Counterexample>,
    /// Situations that must be reachable and were not.
    pub unreached: Vec<&'static str>,
}

impl Report {
    /// Whether every property held and every situation was reached, in every state.
    pub fn passed(&self) -> bool {
        self.complete && self.violations.is_empty() && self.unreached.is_empty()
    }

    /// One line of figures.
    pub fn summary(&self) -> String {
        format!(
            "{}: {} states ({} unique), depth {}, {:.1} s; {}",
            self.scenario,
            self.states,
            self.unique_states,
            self.max_depth,
            self.elapsed.as_secs_f64(),
            if self.passed() {
                "every property holds".to_owned()
            } else if !self.complete && self.violations.is_empty() {
                "stopped by its time budget; no violation so far".to_owned()
            } else {
                format!(
                    "violated: {:?}; unreached: {:?}",
                    self.violations.keys().collect::<Vec<_>>(),
                    self.unreached
                )
            }
        )
    }
}

/// Explores every execution of `scenario` (depth first, on every core, one state of each class
/// of states equal up to renaming the masters).
pub fn check(scenario: &Scenario) -> Report {
    check_within(scenario, None)
}

/// As [`check`], stopping after `budget` if given: the report then says it is incomplete.
pub fn check_within(scenario: &Scenario, budget: Option<Duration>) -> Report {
    let system = System::new(scenario.config.clone());
    let properties = system.properties();
    let threads = std::thread::available_parallelism().map_or(1, usize::from);
    let started = Instant::now();
    let mut builder = system.checker().threads(threads);
    if let Some(budget) = budget {
        builder = builder.timeout(budget);
    }
    let checker = builder.spawn_dfs().join();
    let elapsed = started.elapsed();
    let complete = budget.is_none_or(|budget| elapsed < budget);
    let discoveries = checker.discoveries();
    let mut violations = BTreeMap::new();
    let mut unreached = Vec::new();
    for property in &properties {
        let found = discoveries.get(property.name);
        match (&property.expectation, found) {
            (Expectation::Sometimes, None) => unreached.push(property.name),
            (Expectation::Sometimes, Some(_)) | (_, None) => {}
            (_, Some(path)) => {
                violations.insert(
                    property.name,
                    counterexample(checker.model(), path, property),
                );
            }
        }
    }
    Report {
        scenario: scenario.name,
        states: checker.state_count(),
        unique_states: checker.unique_state_count(),
        max_depth: checker.max_depth(),
        elapsed,
        complete,
        violations,
        unreached,
    }
}

/// Searches `scenario` breadth first for a shortest path that breaks `property`, stopping at
/// the first one found.
pub fn find(scenario: &Scenario, property: &'static str) -> (Option<Counterexample>, Report) {
    let system = System::new(scenario.config.clone());
    let started = Instant::now();
    // One thread: several would each take a level of the search at their own pace, and the
    // first violation found might not be a shortest one.
    let checker = system
        .checker()
        .threads(1)
        .finish_when(HasDiscoveries::AnyOf([property].into_iter().collect()))
        .spawn_bfs()
        .join();
    let broken = checker
        .model()
        .properties()
        .into_iter()
        .find(|candidate| candidate.name == property)
        .expect("a property of the scenario");
    let found = checker
        .discovery(property)
        .map(|path| counterexample(checker.model(), &path, &broken));
    let report = Report {
        scenario: scenario.name,
        states: checker.state_count(),
        unique_states: checker.unique_state_count(),
        max_depth: checker.max_depth(),
        elapsed: started.elapsed(),
        complete: true,
        violations: found
            .clone()
            .map(|found| (property, found))
            .into_iter()
            .collect(),
        unreached: Vec::new(),
    };
    (found, report)
}

/// The path as the actions that lead to it, with the masters named as in the first state (the
/// checker's states are representatives up to renaming the masters), up to the first state that
/// breaks `property`, and that state.
fn counterexample(
    system: &System,
    path: &Path<crate::State, Action>,
    property: &Property<System>,
) -> Counterexample {
    let plain = System {
        config: system.config.clone(),
        symmetric: false,
    };
    let mut state = plain.initial();
    let mut trace = String::new();
    let states = path.clone().into_states();
    let mut steps = 0;
    for (step, next) in states.iter().skip(1).enumerate() {
        let mut actions = Vec::new();
        plain.enabled(&state, &mut actions);
        let (action, after) = actions
            .into_iter()
            .filter_map(|action| Some((action.clone(), plain.step(&state, action)?)))
            .find(|(_, after)| system.canonical(after.clone()) == *next)
            .expect("every step of the path is a step of the model");
        let _ = writeln!(trace, "{:>3}. {action:?}", step + 1);
        state = after;
        steps = step + 1;
        if !(property.condition)(&plain, &state) {
            break;
        }
    }
    let _ = writeln!(trace, "state: {state:#?}");
    Counterexample { steps, trace }
}
