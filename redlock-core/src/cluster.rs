//! Redis Cluster as one quorum member: the `redis+cluster://` URL form, and hash slots.
//!
//! A cluster member is one vote in the quorum, like a standalone master. Every key of one lock
//! (its hash, release channel and fencing counter) carries the lock's hash tag,
//! so each script runs on the one shard that owns the lock's slot.

/// The URL schemes of a cluster member, and the scheme of each of its seed nodes.
const CLUSTER_SCHEMES: [(&str, &str); 2] =
    [("redis+cluster", "redis"), ("rediss+cluster", "rediss")];

/// The query parameter that names another seed node of a cluster member (the convention of
/// go-redis's cluster URLs).
const SEED_PARAMETER: &str = "addr";

/// Whether `url` names a Redis Cluster member (`redis+cluster://` or `rediss+cluster://`).
///
/// # Examples
///
/// ```
/// use redlock_core::is_cluster_url;
/// assert!(is_cluster_url("redis+cluster://10.0.0.1:7000?addr=10.0.0.2:7000"));
/// assert!(!is_cluster_url("redis://10.0.0.1:6379"));
/// ```
pub fn is_cluster_url(url: &str) -> bool {
    CLUSTER_SCHEMES.iter().any(|(scheme, _)| {
        url.get(..scheme.len())
            .is_some_and(|start| start.eq_ignore_ascii_case(scheme))
            && url
                .get(scheme.len()..)
                .is_some_and(|rest| rest.starts_with("://"))
    })
}

/// The seed node URLs of a cluster member URL: its host, then every `addr=host:port`, each with
/// the member's credentials and the plain scheme (`redis://` or `rediss://`). The client learns
/// the rest of the cluster from whichever seed answers first.
///
/// The error is a reason fit to show: it never contains the password.
pub(crate) fn seeds(url: &str) -> Result<Vec<String>, String> {
    let parsed = url::Url::parse(url).map_err(|err| format!("not a URL: {err}"))?;
    let Some((_, plain)) = CLUSTER_SCHEMES
        .iter()
        .find(|(scheme, _)| parsed.scheme().eq_ignore_ascii_case(scheme))
    else {
        return Err("not a cluster URL (redis+cluster:// or rediss+cluster://)".to_owned());
    };
    let host = parsed
        .host_str()
        .filter(|host| !host.is_empty())
        .ok_or_else(|| "no host".to_owned())?;
    if !matches!(parsed.path(), "" | "/") {
        return Err("a cluster has one database: no /db path".to_owned());
    }
    let mut addresses = vec![(host.to_owned(), parsed.port().unwrap_or(6379))];
    // Seed values are never echoed: one could hold credentials by mistake.
    for (position, (key, value)) in parsed.query_pairs().enumerate() {
        let seed = position + 1;
        if key != SEED_PARAMETER {
            return Err(format!(
                "unknown parameter {seed} (only `{SEED_PARAMETER}=host:port`)"
            ));
        }
        let (host, port) = value
            .rsplit_once(':')
            .ok_or_else(|| format!("seed {seed} is not host:port"))?;
        let port: u16 = port.parse().map_err(|_| format!("seed {seed}: bad port"))?;
        if host.is_empty() || host.contains('@') {
            return Err(format!(
                "seed {seed}: not a host (credentials go before the first host)"
            ));
        }
        addresses.push((host.to_owned(), port));
    }
    // `rediss+cluster://...#insecure` (no certificate check) holds for every seed, and redis-rs
    // takes the TLS mode of the seeds for the nodes it discovers.
    let fragment = match parsed.fragment() {
        None | Some("") => "",
        Some("insecure") => "#insecure",
        Some(_) => return Err("unknown fragment (only `#insecure`)".to_owned()),
    };
    let userinfo = match (parsed.username(), parsed.password()) {
        ("", None) => String::new(),
        (user, None) => format!("{user}@"),
        (user, Some(password)) => format!("{user}:{password}@"),
    };
    Ok(addresses
        .into_iter()
        .map(|(host, port)| format!("{plain}://{userinfo}{host}:{port}{fragment}"))
        .collect())
}

/// The hash slot of `key` in a Redis Cluster (CRC16 of its hash tag, or of the whole key when
/// it has none, modulo 16384).
pub(crate) fn hash_slot(key: &[u8]) -> u16 {
    crc16_xmodem(hash_tag(key).unwrap_or(key)) % 16384
}

/// The part of `key` between its first `{` and the first `}` after it, when not empty: keys
/// with the same tag share a slot.
pub(crate) fn hash_tag(key: &[u8]) -> Option<&[u8]> {
    let open = key.iter().position(|&byte| byte == b'{')?;
    let rest = &key[open + 1..];
    let close = rest.iter().position(|&byte| byte == b'}')?;
    (close > 0).then(|| &rest[..close])
}

/// CRC16-CCITT (XMODEM), as Redis Cluster hashes keys.
fn crc16_xmodem(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &byte in bytes {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_match_redis_cluster() {
        // Values from the Redis Cluster specification and `CLUSTER KEYSLOT`.
        assert_eq!(crc16_xmodem(b"123456789"), 0x31C3);
        assert_eq!(hash_slot(b"foo"), 12182);
        assert_eq!(hash_slot(b"{user1000}.following"), hash_slot(b"user1000"));
        assert_eq!(
            hash_slot(b"foo{}{bar}"),
            crc16_xmodem(b"foo{}{bar}") % 16384
        );
        assert_eq!(hash_slot(b"foo{{bar}}zap"), hash_slot(b"{bar"));
    }

    #[test]
    fn seeds_carry_the_credentials_and_every_address() {
        let seeds =
            seeds("redis+cluster://app:s3cret@10.0.0.1:7000?addr=10.0.0.2:7001&addr=h:7002")
                .expect("valid");
        assert_eq!(
            seeds,
            [
                "redis://app:s3cret@10.0.0.1:7000",
                "redis://app:s3cret@10.0.0.2:7001",
                "redis://app:s3cret@h:7002"
            ]
        );
        assert_eq!(
            super::seeds("rediss+cluster://h").expect("valid"),
            ["rediss://h:6379"]
        );
    }

    #[test]
    fn insecure_tls_holds_for_every_seed() {
        assert_eq!(
            seeds("rediss+cluster://h:7000?addr=g:7001#insecure").expect("valid"),
            ["rediss://h:7000#insecure", "rediss://g:7001#insecure"]
        );
        let unknown = seeds("rediss+cluster://h:7000#sekret").expect_err("refused");
        assert!(!unknown.contains("sekret"), "{unknown}");
    }

    #[test]
    fn bad_cluster_urls_say_why_without_the_password() {
        for (url, reason) in [
            ("redis+cluster://:pw@h:1/2", "database"),
            ("redis+cluster://:pw@h:1?db=2", "unknown parameter"),
            ("redis+cluster://h:1?addr=u:pw@h2:3", "not a host"),
            ("redis+cluster://:pw@h:1?addr=h2", "host:port"),
            ("redis+cluster://:pw@h:1?addr=h2:x", "bad port"),
            ("redis://:pw@h:1", "not a cluster URL"),
        ] {
            let err = seeds(url).expect_err(url);
            assert!(err.contains(reason), "{url}: {err}");
            assert!(!err.contains("pw"), "{url}: {err}");
        }
        assert!(is_cluster_url("REDIS+CLUSTER://h:1"));
        assert!(!is_cluster_url("redis+cluster"));
        assert!(
            !is_cluster_url("redis+clusteé://h:1"),
            "no panic inside a character"
        );
    }
}
