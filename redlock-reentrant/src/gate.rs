//! This client's line for each lock: its tasks that want a new hold of the same lock take
//! turns in the order they asked, and only the task whose turn it is asks the nodes. The line
//! is an economy, never a guarantee: the nodes decide who holds the lock, and a task past its
//! turn (a holder whose hold is lost, say) does not keep the next one from asking them.
//!
//! A turn begins when a task reaches the front of the line and nothing of this client is
//! asking for, or holds, the lock: it asks the nodes (and waits on them, for another client's
//! holder) as long as it wants. Granted, the turn goes with the hold ([`Holding`], kept in the
//! hold) until the hold ends: released, lost or given up. A turn ends early when its holder's
//! lost signal fires, when its task gives up, or when its task is dropped. A task whose owner
//! holds the lock already does not queue: its acquisition is a nested one.

use std::collections::VecDeque;
use std::future::poll_fn;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Poll, Waker};

use dashmap::DashMap;
use redlock_core::lock_kind::unpoisoned;
use redlock_core::telemetry::{self, GaugeUnit};
use redlock_core::OwnerToken;
use redlock_watchdog::LostSignal;

/// Every lock's line, while some task of this client wants, or holds, the lock.
#[derive(Debug, Default)]
pub(crate) struct Gates {
    lines: DashMap<Arc<str>, Arc<Gate>>,
}

/// One lock's line.
#[derive(Debug, Default)]
struct Gate {
    line: Mutex<Line>,
}

#[derive(Debug, Default)]
struct Line {
    next_id: u64,
    /// Tasks waiting for their turn, first come first.
    waiting: VecDeque<Waiter>,
    /// The task whose turn it is: asking the nodes, or holding the lock.
    turn: Option<Turn>,
}

#[derive(Debug)]
struct Waiter {
    id: u64,
    owner: OwnerToken,
    waker: Option<Waker>,
    /// This task in the waiters gauge while it waits here.
    _counted: GaugeUnit,
}

#[derive(Debug)]
struct Turn {
    id: u64,
    owner: OwnerToken,
    /// Its hold's signal, once granted.
    held: Option<LostSignal>,
}

impl Turn {
    /// Whether the turn is still someone's: a hold whose signal fired is over for the line.
    fn is_live(&self) -> bool {
        self.held.as_ref().is_none_or(|held| !held.is_lost())
    }
}

/// What a task in the line was let through for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admission {
    /// Its turn: it asks the nodes for a new hold.
    Turn,
    /// Its owner holds the lock now (another task of the same owner got it): its acquisition
    /// is a nested one, with no turn.
    Nested,
}

impl Line {
    fn waiter(&mut self, id: u64) -> Option<&mut Waiter> {
        self.waiting.iter_mut().find(|waiter| waiter.id == id)
    }

    /// Lets waiter `id` through if it may go now.
    fn admit(&mut self, id: u64) -> Option<Admission> {
        let position = self.waiting.iter().position(|waiter| waiter.id == id)?;
        let turn = self.turn.as_ref().filter(|turn| turn.is_live());
        if let Some(turn) = turn {
            let own = turn.held.is_some() && turn.owner == self.waiting[position].owner;
            if !own {
                return None;
            }
            self.leave(position);
            return Some(Admission::Nested);
        }
        if position != 0 {
            return None;
        }
        // The next in line needs no wake-up: the turn just taken is not over, and its grant
        // (`Ticket::holding`) wakes the front to watch the holder's signal.
        let waiter = self.waiting.pop_front().expect("found above");
        self.turn = Some(Turn {
            id,
            owner: waiter.owner,
            held: None,
        });
        Some(Admission::Turn)
    }

    /// Takes the waiter at `position` out of the line; from the front, the next one is woken:
    /// its turn may have come, or it has a holder's signal to watch now.
    fn leave(&mut self, position: usize) {
        self.waiting.remove(position);
        if position == 0 {
            self.wake(None);
        }
    }

    /// Wakes the front of the line (its turn may have come), and with `owner`, every waiter
    /// of that owner (it may hold the lock now).
    fn wake(&mut self, owner: Option<&OwnerToken>) {
        for (position, waiter) in self.waiting.iter_mut().enumerate() {
            if position == 0 || owner.is_some_and(|owner| *owner == waiter.owner) {
                if let Some(waker) = waiter.waker.take() {
                    waker.wake();
                }
            }
        }
    }

    /// Ends turn `id` if it is still the turn.
    fn end_turn(&mut self, id: u64) {
        if self.turn.as_ref().is_some_and(|turn| turn.id == id) {
            self.turn = None;
            self.wake(None);
        }
    }

    /// The signal of the hold that has the turn, for the front of the line to watch.
    fn holder_signal_for(&self, id: u64) -> Option<LostSignal> {
        let front = self.waiting.front().is_some_and(|waiter| waiter.id == id);
        self.turn
            .as_ref()
            .filter(|_| front)
            .and_then(|turn| turn.held.clone())
    }

    fn is_idle(&self) -> bool {
        self.waiting.is_empty() && self.turn.is_none()
    }
}

impl Gates {
    /// Joins the line of lock `key` as `owner`: its turn at once if nobody is in it.
    pub(crate) fn join(self: &Arc<Self>, key: &Arc<str>, owner: &OwnerToken) -> Ticket {
        let gate = Arc::clone(self.lines.entry(Arc::clone(key)).or_default().value());
        let (id, admitted) = {
            let mut line = gate.line();
            let id = line.next_id;
            line.next_id += 1;
            let free = line.waiting.is_empty() && line.turn.as_ref().is_none_or(|t| !t.is_live());
            if free {
                line.turn = Some(Turn {
                    id,
                    owner: owner.clone(),
                    held: None,
                });
            } else {
                line.waiting.push_back(Waiter {
                    id,
                    owner: owner.clone(),
                    waker: None,
                    _counted: GaugeUnit::new(telemetry::WAITERS),
                });
            }
            (id, free)
        };
        Ticket {
            place: Place {
                gates: Arc::clone(self),
                key: Arc::clone(key),
                gate: Some(gate),
                id,
            },
            admitted,
        }
    }

    /// Whether some task of this client wants or holds lock `key` (a hold whose signal fired
    /// holds it no more).
    pub(crate) fn is_busy(&self, key: &str) -> bool {
        self.lines.get(key).is_some_and(|gate| {
            let line = gate.line();
            !line.waiting.is_empty() || line.turn.as_ref().is_some_and(Turn::is_live)
        })
    }

    /// Forgets lock `key`'s line once nobody is in it.
    fn forget_if_idle(&self, key: &str) {
        self.lines.remove_if(key, |_, gate| {
            Arc::strong_count(gate) == 1 && gate.line().is_idle()
        });
    }

    /// How many locks have a line (for tests: none once every task is done).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.lines.len()
    }
}

impl Gate {
    fn line(&self) -> MutexGuard<'_, Line> {
        unpoisoned(self.line.lock())
    }
}

/// A task's place for one lock, in the line or with the turn.
#[derive(Debug)]
struct Place {
    gates: Arc<Gates>,
    key: Arc<str>,
    /// The line; `None` only as the place is dropped.
    gate: Option<Arc<Gate>>,
    id: u64,
}

impl Place {
    fn line(&self) -> MutexGuard<'_, Line> {
        self.gate.as_ref().expect("present until dropped").line()
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        {
            let mut line = self.line();
            if let Some(position) = line.waiting.iter().position(|w| w.id == self.id) {
                line.leave(position);
            }
            line.end_turn(self.id);
        }
        // This place's own reference goes first, so the last place to go finds the line
        // referenced by the map alone.
        drop(self.gate.take());
        self.gates.forget_if_idle(&self.key);
    }
}

/// A task's place in one lock's line: dropped (the task gave up, or its future was dropped),
/// it leaves the line, or ends its turn and lets the next task through.
#[derive(Debug)]
pub(crate) struct Ticket {
    place: Place,
    admitted: bool,
}

impl Ticket {
    /// Waits until the task may ask the nodes: its turn, or its owner holds the lock now. Once
    /// admitted for its turn, resolves at once.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the ticket keeps its place; await again at will.
    pub(crate) async fn admitted(&mut self) -> Admission {
        if self.admitted {
            return Admission::Turn;
        }
        let admission = loop {
            // The front of the line also watches the holder's signal: a lost hold is over for
            // the line though its holder has not let go of it yet.
            let holder = {
                let mut line = self.place.line();
                if let Some(admission) = line.admit(self.place.id) {
                    break admission;
                }
                line.holder_signal_for(self.place.id)
            };
            let changed = poll_fn(|cx| {
                let mut line = self.place.line();
                match line.admit(self.place.id) {
                    Some(admission) => Poll::Ready(Some(admission)),
                    None => {
                        let front = line.waiting.front().map(|waiter| waiter.id);
                        let watched = line.holder_signal_for(self.place.id).is_some();
                        // The holder's signal appeared since: look again with it.
                        if front == Some(self.place.id) && watched && holder.is_none() {
                            return Poll::Ready(None);
                        }
                        if let Some(waiter) = line.waiter(self.place.id) {
                            waiter.waker = Some(cx.waker().clone());
                        }
                        Poll::Pending
                    }
                }
            });
            let lost = async {
                match &holder {
                    Some(holder) => {
                        holder.lost().await;
                    }
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                admission = changed => if let Some(admission) = admission {
                    break admission;
                },
                () = lost => {}
            }
        };
        self.admitted = admission == Admission::Turn;
        admission
    }

    /// The turn goes with the hold just granted: kept in the hold until it ends.
    pub(crate) fn holding(self, held: LostSignal) -> Holding {
        {
            let mut line = self.place.line();
            let owner = match line.turn.as_mut() {
                Some(turn) if turn.id == self.place.id => {
                    turn.held = Some(held);
                    Some(turn.owner.clone())
                }
                _ => None,
            };
            // Waiters of the same owner may go on as nested acquisitions; the front of the
            // line watches the new holder's signal from now on.
            line.wake(owner.as_ref());
        }
        Holding { _place: self.place }
    }
}

/// A hold's turn in its lock's line: dropped with the hold (released, lost, given up), it
/// lets the next task through.
#[derive(Debug)]
pub(crate) struct Holding {
    _place: Place,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{registration, watchdog};

    fn owner(name: &str) -> OwnerToken {
        OwnerToken::from_string(name.to_string())
    }

    /// The future's output if it is ready at its first poll.
    async fn soon<F: std::future::Future>(future: F) -> Option<F::Output> {
        futures_util::FutureExt::now_or_never(future)
    }

    #[tokio::test]
    async fn tasks_take_turns_first_come_first_served() {
        let gates = Arc::new(Gates::default());
        let key: Arc<str> = Arc::from("k");
        let mut first = gates.join(&key, &owner("a"));
        let mut second = gates.join(&key, &owner("b"));
        let mut third = gates.join(&key, &owner("c"));
        assert_eq!(first.admitted().await, Admission::Turn);
        assert_eq!(
            soon(second.admitted()).await,
            None,
            "the first has the turn"
        );
        assert!(gates.is_busy("k"));
        // The first gives up: the second's turn, not the third's.
        drop(first);
        assert_eq!(soon(third.admitted()).await, None);
        assert_eq!(second.admitted().await, Admission::Turn);
        drop(second);
        assert_eq!(third.admitted().await, Admission::Turn);
        drop(third);
        assert!(!gates.is_busy("k"));
        assert_eq!(gates.len(), 0, "an idle line is forgotten");
    }

    #[tokio::test]
    async fn a_waiter_that_leaves_the_line_lets_the_next_through() {
        let gates = Arc::new(Gates::default());
        let key: Arc<str> = Arc::from("k");
        let mut first = gates.join(&key, &owner("a"));
        let second = gates.join(&key, &owner("b"));
        let mut third = gates.join(&key, &owner("c"));
        assert_eq!(first.admitted().await, Admission::Turn);
        drop(second);
        drop(first);
        assert_eq!(third.admitted().await, Admission::Turn);
    }

    #[tokio::test]
    async fn a_dropped_wait_keeps_its_place() {
        let gates = Arc::new(Gates::default());
        let key: Arc<str> = Arc::from("k");
        let mut first = gates.join(&key, &owner("a"));
        let mut second = gates.join(&key, &owner("b"));
        let mut third = gates.join(&key, &owner("c"));
        assert_eq!(first.admitted().await, Admission::Turn);
        assert_eq!(soon(third.admitted()).await, None);
        assert_eq!(soon(second.admitted()).await, None);
        drop(first);
        assert_eq!(
            soon(third.admitted()).await,
            None,
            "still behind the second"
        );
        assert_eq!(second.admitted().await, Admission::Turn);
    }

    #[tokio::test]
    async fn a_granted_turn_stays_with_the_hold_and_its_owners_other_tasks_go_nested() {
        let watchdog = watchdog();
        let gates = Arc::new(Gates::default());
        let key: Arc<str> = Arc::from("k");
        let x = owner("x");
        let mut first = gates.join(&key, &x);
        let mut same_owner = gates.join(&key, &x);
        let mut other = gates.join(&key, &owner("y"));
        assert_eq!(first.admitted().await, Admission::Turn);
        assert_eq!(soon(same_owner.admitted()).await, None, "not granted yet");
        let hold = registration(&watchdog);
        let holding = first.holding(hold.lost_signal());
        assert_eq!(same_owner.admitted().await, Admission::Nested);
        drop(same_owner);
        assert_eq!(soon(other.admitted()).await, None, "x holds the lock");
        drop(holding);
        assert_eq!(other.admitted().await, Admission::Turn);
    }

    /// Records whether it was woken.
    #[derive(Default)]
    struct Woken(std::sync::atomic::AtomicBool);

    impl std::task::Wake for Woken {
        fn wake(self: Arc<Self>) {
            self.0.store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }

    /// The front of the line watches the holder's signal: a hold that is lost is over for the
    /// line though its holder keeps it (a fixed lease left to run out). Here the waiter becomes
    /// the front when a task of the holder's owner leaves for a nested acquisition, after the
    /// grant: it is woken then, to watch the signal from there on.
    #[tokio::test]
    async fn a_lost_hold_lets_the_next_task_through_though_its_holder_keeps_it() {
        let watchdog = watchdog();
        let gates = Arc::new(Gates::default());
        let key: Arc<str> = Arc::from("k");
        let x = owner("x");
        let mut first = gates.join(&key, &x);
        let mut same_owner = gates.join(&key, &x);
        let mut other = gates.join(&key, &owner("y"));
        assert_eq!(first.admitted().await, Admission::Turn);
        let hold = registration(&watchdog);
        let holding = first.holding(hold.lost_signal());

        let woken = Arc::new(Woken::default());
        let waker = std::task::Waker::from(Arc::clone(&woken));
        let mut waiting = Box::pin(other.admitted());
        let polled = std::future::Future::poll(
            waiting.as_mut(),
            &mut std::task::Context::from_waker(&waker),
        );
        assert!(polled.is_pending(), "behind the holder's own task");
        assert_eq!(same_owner.admitted().await, Admission::Nested);
        assert!(
            woken.0.load(std::sync::atomic::Ordering::SeqCst),
            "the new front is woken"
        );
        drop(same_owner);
        // Now the front, it looks again and watches the holder's signal.
        woken.0.store(false, std::sync::atomic::Ordering::SeqCst);
        let polled = std::future::Future::poll(
            waiting.as_mut(),
            &mut std::task::Context::from_waker(&waker),
        );
        assert!(polled.is_pending(), "the holder's hold is live");
        hold.declare_lost(redlock_core::LostReason::QuorumLost);
        assert!(
            woken.0.load(std::sync::atomic::Ordering::SeqCst),
            "the holder's signal wakes the front"
        );
        assert_eq!(
            waiting.await,
            Admission::Turn,
            "the lost hold holds up nobody"
        );
        assert!(gates.is_busy("k"), "the next task has its turn");
        drop(other);
        assert!(!gates.is_busy("k"), "a lost hold counts for nothing");
        assert_eq!(gates.len(), 1, "the lost hold is still in line...");
        drop(holding);
        assert_eq!(gates.len(), 0, "...until its holder lets go");
    }
}
