//! Masks the credentials of URLs in text redlock did not write itself (clap's messages quote
//! what was typed), so that a password never reaches the terminal or a log.

/// `text` with the user-info of every `scheme://user:password@host` replaced by `***`.
pub(crate) fn credentials(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (before, after) = rest.split_at(at + 3);
        out.push_str(before);
        let authority_end = after
            .find(|c: char| c == '/' || c == ',' || c == '\'' || c == '"' || c.is_whitespace())
            .unwrap_or(after.len());
        match after[..authority_end].rfind('@') {
            Some(user_info_end) => {
                out.push_str("***");
                rest = &after[user_info_end..];
            }
            None => rest = after,
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::credentials;

    #[test]
    fn passwords_in_urls_are_masked() {
        assert_eq!(
            credentials("unrecognized subcommand 'redis://:hunter2@10.0.0.1:6379'"),
            "unrecognized subcommand 'redis://***@10.0.0.1:6379'"
        );
        assert_eq!(
            credentials("a rediss://user:pw@h/0,redis://h2 b"),
            "a rediss://***@h/0,redis://h2 b"
        );
        assert_eq!(credentials("no url here"), "no url here");
        assert_eq!(credentials("redis://host:6379"), "redis://host:6379");
    }
}
