//! A master's data and the scripts it runs, each one atomic step mirroring its Lua file in
//! `redlock-reentrant/src/lua/`. A change to a script that breaks a promise must be made here too
//! for the checker to see it: each function names its script.

use crate::config::{Config, Tick, Variant};

/// One client's lock hash on a master: one owner field and its hold count, with an expiry.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LockKey {
    /// The owner (a client's index).
    pub owner: u8,
    /// The owner's hold count here.
    pub count: u8,
    /// When the key expires, in real ticks by this master's nominal clock.
    pub expires_at: Tick,
    /// Ghost: the hold (its generation at the owner) that created the key.
    pub hold: u8,
}

/// A master's data.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Master {
    /// The lock hash, if any.
    pub lock: Option<LockKey>,
    /// The fencing counter (`{prefix}fencing-counter`), absent on a new or emptied master.
    pub counter: Option<u64>,
    /// Per client: the request id of its last final release applied here (the unlock latch).
    pub latches: Vec<Option<u8>>,
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
    /// Another owner holds it.
    HeldByOther,
    /// This owner's count here is not the one expected (the hold was lost here).
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
            latches: vec![None; clients],
            released: vec![None; clients],
        }
    }

    /// A restart without persistence: everything is forgotten (the ghost history stays).
    pub fn wipe(&mut self) {
        self.lock = None;
        self.counter = None;
        self.latches.iter_mut().for_each(|latch| *latch = None);
    }

    /// `acquire.lua`: take or re-enter the lock. `expected` is the owner's count (0 for a new
    /// hold), `hint` the smallest candidate the owner wants, `clock` this master's `TIME` in
    /// microseconds.
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
            // A leftover field of this owner's (a hold it gave up as lost): a new hold.
            Some(_) if expected == 0 => self.new_hold(config, owner, hold, lease, hint, now, clock),
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

    /// `fence.lua`: raise the counter to `token` while `owner` holds the lock here.
    pub fn fence(&mut self, owner: u8, token: u64) -> bool {
        if self.lock.as_ref().is_none_or(|key| key.owner != owner) {
            return false;
        }
        if self.counter.is_none_or(|counter| counter < token) {
            self.counter = Some(token);
        }
        true
    }

    /// `undo.lua`: take back one attempt that set the count to `expected_after`, if it landed.
    pub fn undo(&mut self, owner: u8, expected_after: u8) -> bool {
        match &mut self.lock {
            Some(key) if key.owner == owner && key.count == expected_after => {
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

    /// `unlock.lua`: release one hold counted `expected` before; the answer is the holds left,
    /// or `None` when the owner does not hold it here. A retried request gets the first answer.
    pub fn unlock(&mut self, owner: u8, expected: u8, request: u8) -> Option<u8> {
        let held = self
            .lock
            .as_ref()
            .filter(|key| key.owner == owner)
            .map_or(0, |key| key.count);
        if held == expected && held > 0 {
            let key = self.lock.as_mut().expect("held above");
            if held == 1 {
                self.released[usize::from(owner)] = Some(key.hold);
                self.lock = None;
                self.latches[usize::from(owner)] = Some(request);
                return Some(0);
            }
            key.count -= 1;
            return Some(held - 1);
        }
        if held > 0 && held + 1 == expected {
            return Some(held);
        }
        if held == 0 && self.latches[usize::from(owner)] == Some(request) {
            return Some(0);
        }
        None
    }

    /// `renew.lua`: extend the owner's lock to at least `lease`, never recreating or shortening
    /// it. Also reports (ghost) whether the renewal of `hold` arrived after that hold's release
    /// was applied here.
    pub fn renew(&mut self, owner: u8, hold: u8, lease: Tick, now: Tick) -> (bool, bool) {
        let after_release = self.released[usize::from(owner)] == Some(hold);
        match &mut self.lock {
            Some(key) if key.owner == owner => {
                if key.expires_at.saturating_sub(now) < lease {
                    key.expires_at = now + lease;
                }
                (true, after_release)
            }
            _ => (false, after_release),
        }
    }

    /// `abandon.lua`: delete the lock whatever its count, if the owner holds it here.
    pub fn abandon(&mut self, owner: u8) -> bool {
        if self.lock.as_ref().is_some_and(|key| key.owner == owner) {
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
    fn a_retried_final_release_gets_the_first_answer() {
        let config = config();
        let mut master = Master::empty(2);
        master.acquire(&config, 0, 1, 0, 4, 0, 0, 1_000);
        assert_eq!(master.unlock(0, 1, 7), Some(0));
        assert_eq!(master.unlock(0, 1, 7), Some(0));
        assert_eq!(master.unlock(0, 1, 8), None);
    }

    #[test]
    fn candidates_start_from_the_clock_and_follow_the_hint() {
        let config = config();
        let mut master = Master::empty(2);
        assert_eq!(
            master.acquire(&config, 0, 1, 0, 4, 0, 0, 3_000),
            Grant::New(3_000)
        );
        master.unlock(0, 1, 1);
        assert_eq!(
            master.acquire(&config, 1, 1, 0, 4, 5_000, 0, 3_000),
            Grant::New(5_000)
        );
        assert_eq!(master.counter, Some(5_000));
    }
}
