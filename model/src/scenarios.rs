//! The configurations checked: each one a set of faults within (or outside) the promise, at the
//! bound CI explores and at a deeper one.
//!
//! Every scenario has two clients, or three, and three masters; a lease of 3 ticks with a
//! drift allowance of 1 (the validity of a hold is 2 ticks from the start of its attempt), a
//! fixed lease of 2 for nested acquisitions, and time running to `max_time`. Messages on a
//! link that is not slow run within the tick they were sent in, in any order across links; a
//! slow link holds them across ticks, and only answers on a slow or lost link can time out.

use crate::config::{Config, Faults, Variant};

/// A named configuration.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// Its name.
    pub name: &'static str,
    /// What it explores.
    pub about: &'static str,
    /// The model's configuration.
    pub config: Config,
}

impl Scenario {
    /// The same scenario running `variant`.
    pub fn with_variant(mut self, variant: Variant) -> Self {
        self.config.variant = variant;
        self
    }
}

fn base() -> Config {
    Config {
        locks: vec![1, 1],
        masters: 3,
        lease: 3,
        short_lease: 2,
        drift: 1,
        max_time: 3,
        release_retries: 0,
        fixed_new_holds: false,
        max_depth: 1,
        faults: Faults::default(),
        pauses_within_validity: true,
        variant: Variant::Real,
    }
}

/// Two clients contend; one link is slow.
pub fn contention() -> Scenario {
    Scenario {
        name: "contention",
        about: "2 clients take turns; a slow link",
        config: Config {
            faults: Faults {
                slow_links: 1,
                ..Faults::default()
            },
            ..base()
        },
    }
}

/// Two clients contend; a connection drops with what is in flight on it.
pub fn lost_connection() -> Scenario {
    Scenario {
        name: "lost-connection",
        about: "2 clients take turns; a lost connection, a release retried",
        config: Config {
            release_retries: 1,
            faults: Faults {
                connection_losses: 1,
                ..Faults::default()
            },
            ..base()
        },
    }
}

/// One client nests a fixed-lease acquisition in a renewed hold while the other contends.
pub fn nested() -> Scenario {
    Scenario {
        name: "nested",
        about: "new and nested holds, renewed or on a fixed lease, under contention",
        config: Config {
            locks: vec![2, 1],
            max_depth: 2,
            fixed_new_holds: true,
            max_time: 2,
            ..base()
        },
    }
}

/// A client pauses (while it acquires, holds or releases), and a holder resumes before its
/// validity ends.
pub fn pause() -> Scenario {
    Scenario {
        name: "pause",
        about: "a client paused (acquiring, holding or releasing), a holder within its validity",
        config: Config {
            max_time: 2,
            faults: Faults {
                pauses: 1,
                ..Faults::default()
            },
            ..base()
        },
    }
}

/// A client crashes for good, at any moment.
pub fn crashes() -> Scenario {
    Scenario {
        name: "crashes",
        about: "a client crashed (acquiring, holding or releasing)",
        config: Config {
            max_time: 4,
            faults: Faults {
                crashes: 1,
                ..Faults::default()
            },
            ..base()
        },
    }
}

/// Outside the promise: a master restarts empty. Two clients may then believe at once, and
/// fencing tokens must still increase.
pub fn restart_empty() -> Scenario {
    Scenario {
        name: "restart-empty",
        about: "outside the promise: a master restarted without its data",
        config: Config {
            max_time: 0,
            faults: Faults {
                restarts_empty: 1,
                ..Faults::default()
            },
            ..base()
        },
    }
}

/// Outside the promise: a holder sleeps through its validity. Two clients may then believe at
/// once, and fencing tokens must still increase.
pub fn long_pause() -> Scenario {
    Scenario {
        name: "long-pause",
        about: "outside the promise: a holder paused past its validity",
        config: Config {
            pauses_within_validity: false,
            max_time: 2,
            faults: Faults {
                pauses: 1,
                ..Faults::default()
            },
            ..base()
        },
    }
}

/// Requests to a Redis Cluster member reordered: one request overtakes the one queued before it
/// on its link (a new hold's acquisition, say, overtaking the release of the same owner's
/// earlier hold), while one client locks twice and the other contends.
pub fn reordered() -> Scenario {
    Scenario {
        name: "reordered",
        about: "2 clients, one locking twice; a request overtakes the one before it on its link",
        config: Config {
            locks: vec![2, 1],
            max_time: 2,
            faults: Faults {
                overtakes: 1,
                ..Faults::default()
            },
            ..base()
        },
    }
}

/// One client's final release lands on two masters whose replies wait on slow links; it times
/// out and is retried.
pub fn release_retry() -> Scenario {
    Scenario {
        name: "release-retry",
        about: "1 client; a final release's replies held up on two slow links, the release retried",
        config: Config {
            locks: vec![1],
            release_retries: 1,
            faults: Faults {
                slow_links: 2,
                ..Faults::default()
            },
            ..base()
        },
    }
}

/// The scenarios CI checks.
pub fn bounded() -> Vec<Scenario> {
    vec![
        contention(),
        lost_connection(),
        nested(),
        pause(),
        crashes(),
        restart_empty(),
        long_pause(),
        reordered(),
        release_retry(),
    ]
}

/// Deeper bounds: more time, more calls, more faults at once, three clients.
pub fn deep() -> Vec<Scenario> {
    let mut three = contention();
    three.name = "contention, 3 clients";
    three.about = "3 clients take turns";
    three.config.locks = vec![1, 1, 1];
    three.config.faults = Faults::default();
    let mut retried = contention();
    retried.name = "contention, retried";
    retried.about = "as contention, 4 ticks and a release retried";
    retried.config.max_time = 4;
    retried.config.release_retries = 1;
    let nested = longer(
        nested(),
        "nested, longer",
        "as nested, 3 ticks and a slow link",
    );
    let pause = longer(
        pause(),
        "pause, longer",
        "as pause, 3 ticks and a slow link",
    );
    let mut crashes = crashes();
    crashes.name = "crashes and restarts";
    crashes.about = "as crashes, 5 ticks and a master restarted with its data";
    crashes.config.max_time = 5;
    crashes.config.faults.restarts_with_data = 1;
    let mut restart_empty = restart_empty();
    restart_empty.name = "restart-empty, three holds";
    restart_empty.about = "as restart-empty, with a third hold";
    restart_empty.config.locks = vec![2, 1];
    let long_pause = longer(
        long_pause(),
        "long-pause, longer",
        "as long-pause, 3 ticks and a slow link",
    );
    vec![
        three,
        retried,
        nested,
        pause,
        crashes,
        restart_empty,
        long_pause,
    ]
}

/// `scenario` with 3 ticks and a slow link.
fn longer(mut scenario: Scenario, name: &'static str, about: &'static str) -> Scenario {
    scenario.name = name;
    scenario.about = about;
    scenario.config.max_time = 3;
    scenario.config.faults.slow_links = 1;
    scenario
}

/// Where each broken variant must be caught: the scenario and the property it breaks.
pub fn catching(variant: Variant) -> (Scenario, &'static str) {
    use crate::properties::*;
    let (scenario, property) = match variant {
        Variant::Real => (contention(), MUTUAL_EXCLUSION),
        Variant::NoWriteBack => {
            let mut third_hold = restart_empty();
            third_hold.config.locks = vec![2, 1];
            (third_hold, TOKENS_INCREASE)
        }
        Variant::NoValidityCheck => (pause(), MUTUAL_EXCLUSION),
        Variant::ReleaseOnlyBelievedLocked => (contention(), RELEASE_LEAVES_NO_KEY),
        Variant::NestedShortensTtl => (nested(), BELIEF_BACKED),
        Variant::UnwatchBeforeReleaseConfirmed => (contention(), NEVER_COUNTED_UNWATCHED),
        Variant::RenewalNotCancelled => (contention(), NO_RENEWAL_AFTER_RELEASE),
        Variant::LockWithoutExpiry => (crashes(), CRASHED_HOLDER_FREES),
        Variant::UndoOnlySeenGrants => (contention(), FAILED_ATTEMPT_LEAVES_NO_KEY),
        Variant::FinalReleaseNeedsMajorityReleased => (contention(), FINAL_RELEASE_DECIDED),
        Variant::HoldByOwnerOnly => (reordered(), MUTUAL_EXCLUSION),
        Variant::NotHeldAlwaysRefuses => (release_retry(), NO_FALSE_LOSS),
    };
    (scenario.with_variant(variant), property)
}
