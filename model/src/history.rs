//! Ghost facts: what happened so far, kept in the state only for the properties to read.

/// What the properties need to know of the past.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct History {
    /// The largest fencing token handed out so far.
    pub max_token: u64,
    /// A new hold got a token not above one handed out before its attempt began.
    pub fencing_broken: bool,
    /// A renewal of a hold ran on a master after that hold's final release ran there.
    pub renewal_after_release: bool,
    /// Clients that have held the lock (a bit each).
    pub holders: u8,
    /// A client got the lock after another had held it.
    pub changed_hands: bool,
    /// A client got the lock after another crashed holding it.
    pub taken_after_crash: bool,
    /// A nested acquisition was granted.
    pub nested: bool,
    /// A renewal round extended a hold's validity.
    pub renewed: bool,
    /// A final release that a majority of masters answered timed out undecided.
    pub final_release_undecided: bool,
    /// A release was decided refused (the hold lost) while its hold was still valid.
    pub valid_hold_refused: bool,
}
