//! A master's data and the scripts it runs, each one atomic step mirroring its Lua file in
//! `redlock-reentrant/src/lua/`. A change to a script that breaks a promise must be made here too
//! for the checker to see it: each function names its script.
//!
//! A hold is its own field of the lock hash, the owner and the attempt that made the hold, and
//! every script but a new hold's acquisition names the field it acts on: a request of an
//! earlier hold that arrives late (reordered on a Redis Cluster member) finds no field of its
//! own, and leaves the owner's next hold alone.

use crate::config::{Config, Tick, Variant};

/// One client's lock hash on a master: one hold's field and its hold count, with an expiry.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LockKey {
    /// The owner (a client's index).
    pub owner: u8,
    /// The owner's hold count here.
    pub count: u8,
    /// When the key expires, in real ticks by this master's nominal clock.
    pub expires_at: Tick,
    /// The hold that created the key: its generation at the owner, standing for the attempt id
    /// the field carries. With the owner it names the field, and the scripts act on a key only
    /// for the hold it names (except in [`Variant::HoldByOwnerOnly`]).
    pub hold: u8,
}

impl LockKey {
    /// Whether this is the field of `owner`'s hold `hold`; in [`Variant::HoldByOwnerOnly`],
    /// whether it is any field of `owner`'s.
    fn is_of(&self, config: &Config, owner: u8, hold: u8) -> bool {
        self.owner == owner && (self.hold == hold || config.variant == Variant::HoldByOwnerOnly)
    }
}

/// A master's data.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Master {
    /// The lock hash, if any.
    pub lock: Option<LockKey>,
    /// The fencing counter (`{prefix}fencing-counter`), absent on a new or emptied master.
    pub counter: Option<u64>,
    /// Ghost, per client: the hold whose key a final release deleted here last.
    pub released: Vec<Option<u8>>,
}

/// A master's answer to an acquisition (`acquire.lua`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Grant {
    /// A new hold, with this master's fencing candidate.
    New(u64),
    /// A nested acquisition; the new count.
    Nested(u8),
    /// Another owner holds it, or another hold of this owner's.
    HeldByOther,
    /// This hold's count here is not the one expected (the hold was lost here), or a new hold
    /// finds its own field (a copy of its request ran first).
    Mismatch,
}

impl Grant {
    /// Whether the acquisition applied here.
    pub fn granted(self) -> bool {
        matches!(self, Grant::New(_) | Grant::Nested(_))
    }
}

impl Master {
    /// A master with no data.
    pub fn empty(clients: usize) -> Self {
        Self {
            lock: None,
            counter: None,
            released: vec![None; clients],
        }
    }

    /// A restart without persistence: everything is forgotten (the ghost history stays).
    pub fn wipe(&mut self) {
        self.lock = None;
        self.counter = None;
    }

    /// `acquire.lua`: take or re-enter the lock for `owner`'s hold `hold`. `expected` is the
    /// hold's count (0 for a new hold), `hint` the smallest candidate the owner wants, `clock`
    /// this master's `TIME` in microseconds.
    #[allow(clippy::too_many_arguments)]
    pub fn acquire(
        &mut self,
        config: &Config,
        owner: u8,
        hold: u8,
        expected: u8,
        lease: Tick,
        hint: u64,
        now: Tick,
        clock: u64,
    ) -> Grant {
        match &mut self.lock {
            None if expected > 0 => Grant::Mismatch,
            None => self.new_hold(config, owner, hold, lease, hint, now, clock),
            Some(key) if key.owner != owner => Grant::HeldByOther,
            // What is left of an earlier hold of this owner's (one it gave up as lost, or whose
            // fixed lease ran out): the owner asks for a new hold only when it has none, so the
            // new hold takes it over. Its late requests name the earlier hold, gone from here.
            // Only an earlier one: a late attempt of an earlier hold finds a later hold in its
            // way.
            Some(key)
                if expected == 0
                    && (key.hold < hold || config.variant == Variant::HoldByOwnerOnly) =>
            {
                self.new_hold(config, owner, hold, lease, hint, now, clock)
            }
            // This very attempt's field: a copy of its request ran first, and granted already.
            Some(key) if expected == 0 && key.hold == hold => Grant::Mismatch,
            // Another hold of this owner's, found by a nested acquisition or by a late attempt
            // of an earlier hold: `acquire.lua` answers with that holder, as for another owner.
            Some(key) if !key.is_of(config, owner, hold) => Grant::HeldByOther,
            Some(key) if key.count != expected => Grant::Mismatch,
            Some(key) => {
                key.count += 1;
                let shorten = config.variant == Variant::NestedShortensTtl;
                if shorten || key.expires_at.saturating_sub(now) < lease {
                    key.expires_at = now + lease;
                }
                Grant::Nested(key.count)
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn new_hold(
        &mut self,
        config: &Config,
        owner: u8,
        hold: u8,
        lease: Tick,
        hint: u64,
        now: Tick,
        clock: u64,
    ) -> Grant {
        let expires_at = if config.variant == Variant::LockWithoutExpiry {
            Tick::MAX
        } else {
            now + lease
        };
        self.lock = Some(LockKey {
            owner,
            count: 1,
            expires_at,
            hold,
        });
        let candidate = match self.counter {
            None => clock,
            Some(counter) => counter + 1,
        }
        .max(hint);
        self.counter = Some(candidate);
        Grant::New(candidate)
    }

    /// `fence.lua`: raise the counter to `token` while `owner`'s hold `hold` holds the lock here.
    pub fn fence(&mut self, config: &Config, owner: u8, hold: u8, token: u64) -> bool {
        if !self
            .lock
            .as_ref()
            .is_some_and(|key| key.is_of(config, owner, hold))
        {
            return false;
        }
        if self.counter.is_none_or(|counter| counter < token) {
            self.counter = Some(token);
        }
        true
    }

    /// `undo.lua`: take back one attempt for `owner`'s hold `hold` that set the count to
    /// `expected_after`, if it landed.
    pub fn undo(&mut self, config: &Config, owner: u8, hold: u8, expected_after: u8) -> bool {
        match &mut self.lock {
            Some(key) if key.is_of(config, owner, hold) && key.count == expected_after => {
                if key.count == 1 {
                    self.lock = None;
                } else {
                    key.count -= 1;
                }
                true
            }
            _ => false,
        }
    }

    /// `unlock.lua`: release one acquisition of `owner`'s hold `hold`, counted `expected`
    /// before; the answer is the holds left, or `None` when the hold is not held here. A retried
    /// nested release gets the first answer; a retried final one finds nothing (the client
    /// counts that as released where its earlier try may have landed).
    pub fn unlock(&mut self, config: &Config, owner: u8, hold: u8, expected: u8) -> Option<u8> {
        let held = self
            .lock
            .as_ref()
            .filter(|key| key.is_of(config, owner, hold))
            .map_or(0, |key| key.count);
        if held == expected && held > 0 {
            let key = self.lock.as_mut().expect("held above");
            if held == 1 {
                self.released[usize::from(owner)] = Some(key.hold);
                self.lock = None;
                return Some(0);
            }
            key.count -= 1;
            return Some(held - 1);
        }
        if held > 0 && held + 1 == expected {
            return Some(held);
        }
        None
    }

    /// `renew.lua`: extend `owner`'s hold `hold` to at least `lease`, never recreating or
    /// shortening it. Also reports (ghost) whether the renewal arrived after that hold's
    /// release was applied here.
    pub fn renew(
        &mut self,
        config: &Config,
        owner: u8,
        hold: u8,
        lease: Tick,
        now: Tick,
    ) -> (bool, bool) {
        let after_release = self.released[usize::from(owner)] == Some(hold);
        match &mut self.lock {
            Some(key) if key.is_of(config, owner, hold) => {
                if key.expires_at.saturating_sub(now) < lease {
                    key.expires_at = now + lease;
                }
                (true, after_release)
            }
            _ => (false, after_release),
        }
    }

    /// `abandon.lua`: delete the lock whatever its count, if `owner`'s hold `hold` holds it here.
    pub fn abandon(&mut self, config: &Config, owner: u8, hold: u8) -> bool {
        if self
            .lock
            .as_ref()
            .is_some_and(|key| key.is_of(config, owner, hold))
        {
            self.lock = None;
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenarios;

    fn config() -> Config {
        scenarios::contention().config
    }

    #[test]
    fn a_nested_acquisition_keeps_the_longer_ttl() {
        let config = config();
        let mut master = Master::empty(2);
        assert_eq!(
            master.acquire(&config, 0, 1, 0, 4, 0, 0, 1_000),
            Grant::New(1_000)
        );
        assert_eq!(
            master.acquire(&config, 0, 1, 1, 2, 0, 1, 1_000),
            Grant::Nested(2)
        );
        assert_eq!(master.lock.as_ref().map(|key| key.expires_at), Some(4));
    }

    #[test]
    fn a_retried_nested_release_gets_the_first_answer_and_a_final_one_finds_nothing() {
        let config = config();
        let mut master = Master::empty(2);
        master.acquire(&config, 0, 7, 0, 4, 0, 0, 1_000);
        master.acquire(&config, 0, 7, 1, 2, 0, 1, 1_000);
        assert_eq!(master.unlock(&config, 0, 7, 2), Some(1));
        assert_eq!(master.unlock(&config, 0, 7, 2), Some(1), "the retry");
        assert_eq!(master.unlock(&config, 0, 7, 1), Some(0));
        // The client tells this from a lost hold by where its earlier try may have landed.
        assert_eq!(master.unlock(&config, 0, 7, 1), None);
    }

    #[test]
    fn candidates_start_from_the_clock_and_follow_the_hint() {
        let config = config();
        let mut master = Master::empty(2);
        assert_eq!(
            master.acquire(&config, 0, 1, 0, 4, 0, 0, 3_000),
            Grant::New(3_000)
        );
        master.unlock(&config, 0, 1, 1);
        assert_eq!(
            master.acquire(&config, 1, 1, 0, 4, 5_000, 0, 3_000),
            Grant::New(5_000)
        );
        assert_eq!(master.counter, Some(5_000));
    }

    #[test]
    fn a_late_release_or_undo_of_an_earlier_hold_leaves_the_next_hold_alone() {
        let config = config();
        let mut master = Master::empty(2);
        master.acquire(&config, 0, 1, 0, 4, 0, 0, 1_000);
        assert_eq!(master.unlock(&config, 0, 1, 1), Some(0));
        assert!(master.acquire(&config, 0, 2, 0, 4, 0, 0, 1_000).granted());
        // Hold 1's release and undo, run again late (reordered, or a copy): hold 2 stays.
        assert_eq!(
            master.unlock(&config, 0, 1, 1),
            None,
            "nothing of hold 1 is left"
        );
        assert!(!master.undo(&config, 0, 1, 1));
        assert!(!master.abandon(&config, 0, 1));
        assert!(!master.fence(&config, 0, 1, 5_000));
        assert_eq!(master.renew(&config, 0, 1, 4, 0), (false, true));
        assert_eq!(
            master.lock.as_ref().map(|key| (key.hold, key.count)),
            Some((2, 1))
        );
    }

    #[test]
    fn a_new_hold_takes_over_an_earlier_hold_of_its_owner_and_its_late_release_misses() {
        let config = config();
        let mut master = Master::empty(2);
        master.acquire(&config, 0, 1, 0, 4, 0, 0, 1_000);
        // A copy of hold 1's own acquisition finds its field: not granted twice.
        assert_eq!(
            master.acquire(&config, 0, 1, 0, 4, 0, 0, 1_000),
            Grant::Mismatch
        );
        // The next hold's acquisition overtakes the earlier hold's release: it takes over what
        // is left of hold 1 ...
        assert!(master.acquire(&config, 0, 2, 0, 4, 0, 0, 1_000).granted());
        // ... and hold 1's release, run late, finds no field of its own.
        assert_eq!(master.unlock(&config, 0, 1, 1), None);
        assert_eq!(
            master.lock.as_ref().map(|key| (key.hold, key.count)),
            Some((2, 1))
        );
        // A nested acquisition names its hold too.
        assert_eq!(
            master.acquire(&config, 0, 1, 1, 4, 0, 0, 1_000),
            Grant::HeldByOther
        );
        // And a late attempt of an earlier hold never takes a later one over.
        assert_eq!(
            master.acquire(&config, 0, 1, 0, 4, 0, 0, 1_000),
            Grant::HeldByOther
        );
    }

    #[test]
    fn scripts_knowing_a_hold_by_its_owner_only_let_a_late_release_delete_the_next_hold() {
        let config = scenarios::contention()
            .with_variant(Variant::HoldByOwnerOnly)
            .config;
        let mut master = Master::empty(2);
        master.acquire(&config, 0, 1, 0, 4, 0, 0, 1_000);
        // The leftover field is taken over by the next hold ...
        assert!(master.acquire(&config, 0, 2, 0, 4, 0, 0, 1_000).granted());
        // ... and the earlier hold's release, overtaken, deletes it.
        assert_eq!(master.unlock(&config, 0, 1, 1), Some(0));
        assert_eq!(master.lock, None);
    }
}
