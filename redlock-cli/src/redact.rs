//! Masks URLs in text redlock did not write itself (clap's messages quote what was typed), so
//! that a password never reaches the terminal or a log.

/// `text` with everything after the `scheme://` of every URL masked, up to the next space: the
/// user-info, a `?password=` query, and whatever a typo put there (quotes included, as a
/// password may hold one).
pub(crate) fn credentials(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (before, after) = rest.split_at(at + 3);
        out.push_str(before);
        let end = after.find(char::is_whitespace).unwrap_or(after.len());
        if end > 0 {
            out.push_str("***");
        }
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::credentials;

    #[test]
    fn urls_are_masked_to_their_scheme() {
        assert_eq!(
            credentials("unrecognized subcommand 'redis://:hunter2@10.0.0.1:6379'"),
            "unrecognized subcommand 'redis://***"
        );
        assert_eq!(
            credentials("a redis+unix:///run/redis.sock?pass=hunter2 b"),
            "a redis+unix://*** b"
        );
        assert_eq!(credentials("no url here"), "no url here");
        assert_eq!(credentials("'redis://:pa'ss@h' x"), "'redis://*** x");
        assert_eq!(credentials("redis:// x"), "redis:// x");
    }
}
