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
        max_time: 4,
        release_retries: 1,
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
        about: "2 clients take turns; a lost connection",
        config: Config {
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
        about: "a nested hold (renewed or fixed lease) under contention",
        config: Config {
            locks: vec![2, 1],
            max_depth: 2,
            ..base()
        },
    }
}

/// A client pauses (while it acquires, holds or releases), and a holder resumes before its
/// validity ends.
pub fn pause() -> Scenario {
    Scenario {
        name: "pause",
        about: "a holder paused within its validity",
        config: Config {
            faults: Faults {
                pauses: 1,
                ..Faults::default()
            },
            ..base()
        },
    }
}

/// A master crashes and restarts with its data, and a holder crashes for good.
pub fn crashes() -> Scenario {
    Scenario {
        name: "crashes",
        about: "a master restarted with its data, a client crashed holding the lock",
        config: Config {
            max_time: 5,
            faults: Faults {
                restarts_with_data: 1,
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
            locks: vec![2, 1],
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
            faults: Faults {
                pauses: 1,
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
    ]
}

/// Deeper bounds: more time, more calls, more faults at once, three clients.
pub fn deep() -> Vec<Scenario> {
    let mut three = contention();
    three.name = "contention, 3 clients";
    three.about = "3 clients take turns; a slow link, a lost connection";
    three.config.locks = vec![1, 1, 1];
    three.config.faults.connection_losses = 1;
    let mut nested = nested();
    nested.name = "nested, longer";
    nested.about = "nested holds on both clients, 6 ticks; a slow link, a lost connection";
    nested.config.locks = vec![2, 2];
    nested.config.max_time = 6;
    nested.config.faults.connection_losses = 1;
    let mut pause = pause();
    pause.name = "pause, longer";
    pause.config.max_time = 6;
    pause.config.faults.slow_links = 1;
    pause.config.locks = vec![2, 1];
    pause.config.max_depth = 2;
    let mut crashes = crashes();
    crashes.name = "crashes, longer";
    crashes.config.max_time = 7;
    crashes.config.faults.slow_links = 1;
    let mut restart_empty = restart_empty();
    restart_empty.name = "restart-empty, longer";
    restart_empty.config.max_time = 2;
    let mut long_pause = long_pause();
    long_pause.name = "long-pause, longer";
    long_pause.config.max_time = 6;
    long_pause.config.faults.slow_links = 1;
    vec![three, nested, pause, crashes, restart_empty, long_pause]
}

/// Where each broken variant must be caught: the scenario and the property it breaks.
pub fn catching(variant: Variant) -> (Scenario, &'static str) {
    use crate::properties::*;
    let (scenario, property) = match variant {
        Variant::Real => (contention(), MUTUAL_EXCLUSION),
        Variant::NoWriteBack => (restart_empty(), TOKENS_INCREASE),
        Variant::NoValidityCheck => (pause(), MUTUAL_EXCLUSION),
        Variant::ReleaseOnlyBelievedLocked => (contention(), RELEASE_LEAVES_NO_KEY),
        Variant::NestedShortensTtl => (nested(), BELIEF_BACKED),
        Variant::UnwatchBeforeReleaseConfirmed => (contention(), NEVER_COUNTED_UNWATCHED),
        Variant::RenewalNotCancelled => (contention(), NO_RENEWAL_AFTER_RELEASE),
        Variant::LockWithoutExpiry => (crashes(), CRASHED_HOLDER_FREES),
    };
    (scenario.with_variant(variant), property)
}
