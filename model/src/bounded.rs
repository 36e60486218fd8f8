//! Checking a small model of its own over every execution up to its bounds, breadth first, and
//! what a run found: the read-write lock's ([`crate::rw`]) and the quorum designs'
//! ([`crate::quorum_family`]).

use std::time::{Duration, Instant};

use stateright::{Checker, HasDiscoveries, Model};

/// What one run of the checker found.
#[derive(Clone, Debug)]
pub struct BoundedReport {
    /// The scenario's name.
    pub name: &'static str,
    /// Distinct states explored.
    pub unique_states: usize,
    /// How long it took.
    pub elapsed: Duration,
    /// Properties broken, with the length of the shortest path found (breadth first).
    pub violations: Vec<(&'static str, usize)>,
    /// Situations never reached.
    pub unreached: Vec<&'static str>,
}

impl BoundedReport {
    /// Whether every promise held and every situation was reached.
    pub fn passed(&self) -> bool {
        self.violations.is_empty() && self.unreached.is_empty()
    }

    /// The length of the shortest path found that breaks the property named `property`.
    pub fn steps_to(&self, property: &str) -> Option<usize> {
        self.violations
            .iter()
            .find(|(name, _)| *name == property)
            .map(|(_, steps)| *steps)
    }

    /// One line of figures.
    pub fn summary(&self) -> String {
        format!(
            "{}: {} unique states, {:.1} s; {}",
            self.name,
            self.unique_states,
            self.elapsed.as_secs_f64(),
            if self.passed() {
                "every property holds".to_owned()
            } else {
                format!(
                    "violated: {:?}; unreached: {:?}",
                    self.violations, self.unreached
                )
            }
        )
    }
}

/// Explores every execution of `system` breadth first (a violation's path is a shortest one),
/// stopping early only at the first violation of the property named `stop_at` if given.
pub fn check_bounded<M>(
    name: &'static str,
    system: M,
    stop_at: Option<&'static str>,
) -> BoundedReport
where
    M: Model + Send + Sync + 'static,
    M::State: Clone + std::fmt::Debug + std::hash::Hash + PartialEq + Send + Sync + 'static,
    M::Action: Clone + std::fmt::Debug + PartialEq + Send + Sync + 'static,
{
    let properties = system.properties();
    let started = Instant::now();
    let mut builder = system.checker().threads(1);
    if let Some(property) = stop_at {
        builder = builder.finish_when(HasDiscoveries::AnyOf([property].into_iter().collect()));
    }
    let checker = builder.spawn_bfs().join();
    let mut violations = Vec::new();
    let mut unreached = Vec::new();
    for property in &properties {
        let found = checker.discovery(property.name);
        match (property.expectation.clone(), found) {
            (stateright::Expectation::Sometimes, None) if stop_at.is_none() => {
                unreached.push(property.name);
            }
            (stateright::Expectation::Always, Some(path)) => {
                violations.push((property.name, path.into_actions().len()));
            }
            _ => {}
        }
    }
    BoundedReport {
        name,
        unique_states: checker.unique_state_count(),
        elapsed: started.elapsed(),
        violations,
        unreached,
    }
}
