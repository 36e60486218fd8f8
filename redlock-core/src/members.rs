//! Which server each quorum member is, so that no server votes twice.
//!
//! A server listed twice (the same URL, another database number, a cluster seed shared by two
//! members) would grant a lock once per listing and make a majority on its own. The check here
//! is on the configured addresses; a server reached under two names (a DNS alias) is caught
//! when connecting, by its run id.

use crate::cluster::{is_cluster_url, seeds};

/// The servers a member URL names, as `host:port` (a Unix socket as its path): one for a
/// standalone master, every seed for a cluster member. Host names are lower-cased, the port
/// defaults to 6379, and the loopback names (`localhost`, `127.0.0.1`, `::1`) are one host. No
/// credentials, no database number: two databases of one server are one server. A URL that
/// does not parse names nothing here (opening it reports why).
pub(crate) fn servers(url: &str) -> Vec<String> {
    if is_cluster_url(url) {
        return seeds(url)
            .unwrap_or_default()
            .iter()
            .filter_map(|seed| server(seed))
            .collect();
    }
    server(url).into_iter().collect()
}

fn server(url: &str) -> Option<String> {
    let parsed = url::Url::parse(url).ok()?;
    if parsed.scheme().eq_ignore_ascii_case("unix")
        || parsed.scheme().eq_ignore_ascii_case("redis+unix")
    {
        return Some(format!("unix:{}", parsed.path()));
    }
    let host = parsed.host_str().filter(|host| !host.is_empty())?;
    let host = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase();
    let host = match host.as_str() {
        "localhost" | "127.0.0.1" | "::1" => "localhost".to_owned(),
        _ => host,
    };
    Some(format!("{host}:{}", parsed.port().unwrap_or(6379)))
}

/// The first two members (by position) that name a common server, and that server.
pub(crate) fn first_duplicate(nodes: &[String]) -> Option<(usize, usize, String)> {
    let named: Vec<Vec<String>> = nodes.iter().map(|url| servers(url)).collect();
    for (second, theirs) in named.iter().enumerate() {
        for (first, ours) in named[..second].iter().enumerate() {
            if let Some(shared) = theirs.iter().find(|server| ours.contains(server)) {
                return Some((first, second, shared.clone()));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes(urls: &[&str]) -> Vec<String> {
        urls.iter().map(|url| (*url).to_owned()).collect()
    }

    #[test]
    fn distinct_servers_pass() {
        let distinct = nodes(&[
            "redis://10.0.0.1:6379",
            "redis://10.0.0.1:6380",
            "redis://10.0.0.2",
            "redis+cluster://10.0.1.1:7000?addr=10.0.1.2:7000",
            "redis+cluster://10.0.2.1:7000?addr=10.0.2.2:7000",
            "redis+unix:///run/redis-a.sock",
            "redis+unix:///run/redis-b.sock",
        ]);
        assert_eq!(first_duplicate(&distinct), None);
    }

    #[test]
    fn one_server_named_twice_is_found_whatever_the_spelling() {
        type Case<'a> = (&'a [&'a str], (usize, usize, &'a str));
        let cases: [Case<'_>; 7] = [
            (
                &["redis://h:6379", "redis://b:1", "redis://h:6379"],
                (0, 2, "h:6379"),
            ),
            (&["redis://H:6379", "redis://h"], (0, 1, "h:6379")),
            (
                &["redis://:pw@h:1/0", "redis://user:other@h:1/3"],
                (0, 1, "h:1"),
            ),
            (
                &["redis://localhost:7000", "redis://127.0.0.1:7000"],
                (0, 1, "localhost:7000"),
            ),
            (
                &["redis://[::1]:7000", "rediss://localhost:7000"],
                (0, 1, "localhost:7000"),
            ),
            (
                &[
                    "redis+cluster://a:7000?addr=b:7000",
                    "redis://x:1",
                    "redis+cluster://b:7000?addr=c:7000",
                ],
                (0, 2, "b:7000"),
            ),
            (
                &["redis+unix:///run/r.sock", "unix:///run/r.sock"],
                (0, 1, "unix:/run/r.sock"),
            ),
        ];
        for (urls, (first, second, server)) in cases {
            assert_eq!(
                first_duplicate(&nodes(urls)),
                Some((first, second, server.to_owned())),
                "{urls:?}"
            );
        }
    }

    #[test]
    fn no_server_name_carries_a_password() {
        for url in [
            "redis://:s3cret@h:1",
            "redis+cluster://app:s3cret@h:1?addr=g:2",
        ] {
            for server in servers(url) {
                assert!(!server.contains("s3cret"), "{server}");
            }
        }
    }
}
