//! Choosing a fencing token from the candidates of the nodes that granted a new hold.
//!
//! Each node keeps one counter. A new hold on a node takes the candidate
//! `max(counter + 1, server time in µs)` and stores it. The holder's token `T` is the largest
//! candidate among the nodes that granted it. Before the acquisition reports success, `T` is
//! written back (`counter = max(counter, T)`, guarded by ownership) until a majority of all
//! nodes stands at `T` or above. Any later holder's majority shares a node with that majority,
//! and can lock it only after this hold is gone from it, so its candidate there, and its token,
//! exceeds `T`. A plain maximum without the write-back is not monotonic: see the tests.

/// The token of a new hold and whether it must be written back first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TokenChoice {
    /// The largest candidate.
    pub(crate) token: u64,
    /// Whether fewer than a majority of nodes already stand at the token.
    pub(crate) needs_write_back: bool,
}

/// Chooses the token from the granting nodes' candidates; `None` when there are none.
pub(crate) fn choose_token(candidates: &[u64], quorum: usize) -> Option<TokenChoice> {
    let token = *candidates.iter().max()?;
    let at_token = candidates.iter().filter(|&&c| c == token).count();
    Some(TokenChoice {
        token,
        needs_write_back: at_token < quorum,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::consensus::reached_by_majority;
    use proptest::prelude::*;

    /// A model of N nodes' fencing counters and clocks.
    #[derive(Debug, Clone)]
    struct Nodes {
        counters: Vec<u64>,
        clocks: Vec<u64>,
    }

    impl Nodes {
        fn new(n: usize) -> Self {
            Self {
                counters: vec![0; n],
                clocks: vec![1_000; n],
            }
        }

        /// As `acquire.lua`: one more than the counter; a node without one (0 here) starts
        /// from its clock when `with_clock`.
        fn candidate(&mut self, node: usize, with_clock: bool) -> u64 {
            let candidate = if self.counters[node] == 0 && with_clock {
                self.clocks[node]
            } else {
                self.counters[node] + 1
            };
            self.counters[node] = candidate;
            candidate
        }

        /// One acquisition granted by `granted`; returns its token.
        fn acquire(&mut self, granted: &[usize], write_back: bool, with_clock: bool) -> u64 {
            let quorum = self.counters.len() / 2 + 1;
            let candidates: Vec<u64> = granted
                .iter()
                .map(|&n| self.candidate(n, with_clock))
                .collect();
            let choice = choose_token(&candidates, quorum).expect("granted by a majority");
            if write_back && choice.needs_write_back {
                for &node in granted {
                    self.counters[node] = self.counters[node].max(choice.token);
                }
            }
            choice.token
        }
    }

    fn majority_of(n: usize, mask: u32) -> Vec<usize> {
        let quorum = n / 2 + 1;
        let mut chosen: Vec<usize> = (0..n).filter(|i| mask & (1 << i) != 0).collect();
        for i in 0..n {
            if chosen.len() >= quorum {
                break;
            }
            if !chosen.contains(&i) {
                chosen.push(i);
            }
        }
        chosen.sort_unstable();
        chosen
    }

    #[test]
    fn one_node_never_needs_a_write_back() {
        assert_eq!(
            choose_token(&[42], 1),
            Some(TokenChoice {
                token: 42,
                needs_write_back: false
            })
        );
        assert_eq!(choose_token(&[], 1), None);
    }

    #[test]
    fn a_majority_already_at_the_token_needs_no_write_back() {
        assert!(!choose_token(&[9, 9, 7], 2).expect("some").needs_write_back);
        assert!(choose_token(&[9, 8, 7], 2).expect("some").needs_write_back);
    }

    #[test]
    fn the_plain_maximum_without_write_back_goes_backwards() {
        // Five nodes, counters only. Holder 1 is granted by {0,1,2} and node 0 happens to be
        // ahead; holder 2 by {2,3,4}, which meets holder 1's majority only in node 2.
        let mut nodes = Nodes::new(5);
        nodes.counters = vec![10, 0, 0, 0, 0];
        let first = nodes.acquire(&[0, 1, 2], false, false);
        let second = nodes.acquire(&[2, 3, 4], false, false);
        assert!(
            second <= first,
            "the naive scheme is caught: {first} then {second}"
        );

        let mut nodes = Nodes::new(5);
        nodes.counters = vec![10, 0, 0, 0, 0];
        let first = nodes.acquire(&[0, 1, 2], true, false);
        let second = nodes.acquire(&[2, 3, 4], true, false);
        assert!(second > first, "with the write-back: {first} then {second}");
    }

    proptest! {
        #[test]
        fn tokens_strictly_increase_over_any_sequence_of_majorities(
            n in prop::sample::select(vec![1usize, 3, 5, 7]),
            grants in proptest::collection::vec(any::<u32>(), 1..60),
            ahead in proptest::collection::vec(0u64..50, 7),
        ) {
            let mut nodes = Nodes::new(n);
            for (node, lead) in ahead.iter().take(n).enumerate() {
                nodes.counters[node] = *lead;
            }
            let mut last = 0;
            for mask in grants {
                let token = nodes.acquire(&majority_of(n, mask), true, false);
                prop_assert!(token > last, "token {token} after {last}");
                last = token;
            }
        }

        #[test]
        fn a_minority_restarted_empty_keeps_tokens_increasing_with_the_clock_floor(
            // Clocks move at least 2 µs per acquisition: no node grants a new hold every
            // microsecond, which is what keeps counters behind the clocks.
            steps in proptest::collection::vec((any::<u32>(), any::<bool>(), 0usize..5, 2u64..1_000), 1..60),
        ) {
            let n = 5;
            let mut nodes = Nodes::new(n);
            let mut last = 0;
            for (mask, restart, victim, advance) in steps {
                // Clocks move forward together between acquisitions (a skew below the gap).
                for clock in &mut nodes.clocks {
                    *clock += advance;
                }
                if restart {
                    nodes.counters[victim] = 0;
                }
                let token = nodes.acquire(&majority_of(n, mask), true, true);
                prop_assert!(token > last, "token {token} after {last}");
                last = token;
                // The write-back leaves a majority at the token or above.
                let at_least = reached_by_majority(nodes.counters.iter().copied(), n / 2 + 1);
                prop_assert!(at_least.is_some_and(|v| v >= token));
            }
        }
    }
}
