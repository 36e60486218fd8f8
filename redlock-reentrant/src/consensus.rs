//! What a majority of nodes agree on, from their separate answers.

/// The largest value that at least `quorum` of the answers reach (the `quorum`-th largest), or
/// `None` when fewer than `quorum` nodes answered.
///
/// For a hold count or a remaining TTL, this is what can be relied on: a majority holds at
/// least this much.
pub(crate) fn reached_by_majority<T: Ord + Copy>(
    answers: impl IntoIterator<Item = T>,
    quorum: usize,
) -> Option<T> {
    let mut answers: Vec<T> = answers.into_iter().collect();
    if quorum == 0 || answers.len() < quorum {
        return None;
    }
    answers.sort_unstable_by(|a, b| b.cmp(a));
    Some(answers[quorum - 1])
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn picks_the_value_a_majority_reaches() {
        assert_eq!(reached_by_majority([5, 1, 3, 4, 2], 3), Some(3));
        assert_eq!(reached_by_majority([7], 1), Some(7));
        assert_eq!(reached_by_majority([7, 7], 3), None);
    }

    proptest! {
        #[test]
        fn at_least_quorum_answers_reach_it_and_no_larger_value_is_reached(
            answers in proptest::collection::vec(0u32..100, 1..9),
            quorum in 1usize..9,
        ) {
            match reached_by_majority(answers.iter().copied(), quorum) {
                None => prop_assert!(answers.len() < quorum),
                Some(value) => {
                    prop_assert!(answers.iter().filter(|&&a| a >= value).count() >= quorum);
                    prop_assert!(answers.iter().filter(|&&a| a > value).count() < quorum);
                }
            }
        }
    }
}
