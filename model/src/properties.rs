//! The promises of docs/safety.md as properties of every reachable state, and the situations the
//! checker must reach (so that no property holds only because nothing happens).

use stateright::Property;

use crate::config::Config;
use crate::system::{State, System};

/// Two clients never believe they hold the lock at once (within the promise).
pub const MUTUAL_EXCLUSION: &str = "mutual exclusion";
/// Every belief is backed by a majority of masters holding the believed hold's key until the
/// belief ends.
pub const BELIEF_BACKED: &str = "every belief is backed by a majority's TTL";
/// A new hold's token exceeds every token handed out before its attempt began.
pub const TOKENS_INCREASE: &str = "fencing tokens increase from holder to holder";
/// No renewal of a hold runs on a master after the hold's final release ran there (where no
/// request overtook another: there a renewal may run after the release, and renews nothing).
pub const NO_RENEWAL_AFTER_RELEASE: &str = "no renewal reaches a master after its release there";
/// A crashed holder's lock is free everywhere within a lease (plus drift).
pub const CRASHED_HOLDER_FREES: &str = "a crashed holder's lock frees within its lease";
/// A hold the client still counts is renewed, or its lost deadline is armed.
pub const NEVER_COUNTED_UNWATCHED: &str = "no hold is counted but unwatched";
/// A release a majority confirmed leaves no key of the hold on a master it reached.
pub const RELEASE_LEAVES_NO_KEY: &str = "a confirmed release leaves no key where it ran";

/// A release is told the hold was lost only when it was: never while the hold is valid.
pub const NO_FALSE_LOSS: &str = "a release never reports a valid hold lost";

/// A final release that a majority of masters answered is decided (Redlock's liveness: with a
/// majority up, clients can release locks).
pub const FINAL_RELEASE_DECIDED: &str = "a final release a majority answered is decided";

/// A failed attempt leaves no key on a master its undo reached.
pub const FAILED_ATTEMPT_LEAVES_NO_KEY: &str = "a failed attempt leaves no key where its undo ran";

/// Reachable: some client holds the lock.
pub const REACH_HOLD: &str = "reach: a client holds the lock";
/// Reachable: a nested acquisition.
pub const REACH_NESTED: &str = "reach: a nested hold";
/// Reachable: a renewal extends a hold.
pub const REACH_RENEWAL: &str = "reach: a renewal extends a hold";
/// Reachable: the lock passes to another client.
pub const REACH_HANDOVER: &str = "reach: the lock changes hands";
/// Reachable: the lock is taken after its holder crashed.
pub const REACH_AFTER_CRASH: &str = "reach: the lock is taken after its holder crashed";
/// Reachable outside the promise: two clients believe at once (fencing must still hold).
pub const REACH_OVERLAP: &str = "reach (outside the promise): two clients believe at once";

/// The properties a configuration is checked against.
pub fn for_config(config: &Config) -> Vec<Property<System>> {
    let mut properties = vec![
        Property::always(TOKENS_INCREASE, |_, state: &State| {
            !state.history.fencing_broken
        }),
        Property::always(NO_RENEWAL_AFTER_RELEASE, |_, state: &State| {
            !state.history.renewal_after_release
        }),
        Property::always(NEVER_COUNTED_UNWATCHED, never_counted_unwatched),
        Property::always(RELEASE_LEAVES_NO_KEY, release_leaves_no_key),
        Property::always(FAILED_ATTEMPT_LEAVES_NO_KEY, failed_attempt_leaves_no_key),
        Property::always(FINAL_RELEASE_DECIDED, |_, state: &State| {
            !state.history.final_release_undecided
        }),
        Property::sometimes(REACH_HOLD, |_, state: &State| {
            state.clients.iter().any(|c| c.believes())
        }),
    ];
    if config.within_promise() {
        properties.push(Property::always(MUTUAL_EXCLUSION, |_, state: &State| {
            believers(state) <= 1
        }));
        properties.push(Property::always(BELIEF_BACKED, belief_backed));
        properties.push(Property::always(NO_FALSE_LOSS, |_, state: &State| {
            !state.history.valid_hold_refused
        }));
    } else {
        properties.push(Property::sometimes(REACH_OVERLAP, |_, state: &State| {
            believers(state) > 1
        }));
    }
    if config.faults.crashes > 0 {
        properties.push(Property::always(CRASHED_HOLDER_FREES, crashed_holder_frees));
        if config.clients() > 1 {
            properties.push(Property::sometimes(
                REACH_AFTER_CRASH,
                |_, state: &State| state.history.taken_after_crash,
            ));
        }
    }
    if config.max_depth > 1 {
        properties.push(Property::sometimes(REACH_NESTED, |_, state: &State| {
            state.history.nested
        }));
    }
    if config.max_time >= config.lease {
        properties.push(Property::sometimes(REACH_RENEWAL, |_, state: &State| {
            state.history.renewed
        }));
    }
    if config.clients() > 1 && config.faults.crashes == 0 {
        properties.push(Property::sometimes(REACH_HANDOVER, |_, state: &State| {
            state.history.changed_hands
        }));
    }
    properties
}

fn believers(state: &State) -> usize {
    state.clients.iter().filter(|c| c.believes()).count()
}

/// Only the believed hold's own keys count: a key of an earlier hold of the same owner's (a
/// leftover, or one taken over) is not this hold's, and its own requests may delete it.
fn belief_backed(system: &System, state: &State) -> bool {
    let config = &system.config;
    state.clients.iter().enumerate().all(|(client, c)| {
        !c.believes()
            || state
                .masters
                .iter()
                .filter(|m| {
                    m.lock.as_ref().is_some_and(|key| {
                        usize::from(key.owner) == client
                            && key.hold == c.hold.generation
                            && key.expires_at >= c.hold.valid_until + config.drift
                    })
                })
                .count()
                >= config.quorum()
    })
}

fn never_counted_unwatched(_: &System, state: &State) -> bool {
    state
        .clients
        .iter()
        .all(|c| !c.alive || c.hold.count == 0 || c.hold.lost || c.hold.watched)
}

fn crashed_holder_frees(system: &System, state: &State) -> bool {
    let config = &system.config;
    state.clients.iter().enumerate().all(|(client, c)| {
        let Some(crashed_at) = c.crashed_at else {
            return true;
        };
        // What it sent before dying still runs: the lease counts from the last of it.
        state.now < crashed_at.max(c.last_run) + config.lease + config.drift
            || state.masters.iter().all(|m| {
                m.lock
                    .as_ref()
                    .is_none_or(|key| usize::from(key.owner) != client)
            })
    })
}

fn release_leaves_no_key(system: &System, state: &State) -> bool {
    no_key_left_of(system, state, |c| c.released_hold)
}

fn failed_attempt_leaves_no_key(system: &System, state: &State) -> bool {
    no_key_left_of(system, state, |c| c.failed_hold)
}

/// No master holds a key of the hold `hold(client)` once nothing of that client is on its way
/// to it, unless the connection or the master's data failed, or a request overtook another
/// there, since the attempt began (an undo that overtakes its attempt finds nothing, and the
/// late grant stays until its lease ends: liveness, not exclusion).
fn no_key_left_of(
    system: &System,
    state: &State,
    hold: impl Fn(&crate::client::Client) -> Option<u8>,
) -> bool {
    let masters = system.config.masters;
    state.clients.iter().enumerate().all(|(client, c)| {
        let Some(released) = hold(c) else {
            return true;
        };
        (0..masters).all(|master| {
            let reached = c.tainted & (1 << master) == 0
                && state.links[client * masters + master].requests.is_empty();
            let left = state.masters[master]
                .lock
                .as_ref()
                .is_some_and(|key| usize::from(key.owner) == client && key.hold == released);
            !(reached && left)
        })
    })
}
