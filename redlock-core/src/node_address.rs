//! A node's URL as it may be shown: the password is never part of it.

use std::fmt;

/// The printable form of a node URL: scheme, user, host, port and database, with any password
/// replaced by `***`.
///
/// Every log line and error message that names a node uses this type, never the raw URL.
///
/// # Examples
///
/// ```
/// use redlock_core::NodeAddress;
/// let shown = NodeAddress::redact("redis://app:s3cret@10.0.0.7:6380/2");
/// assert_eq!(shown.to_string(), "redis://app:***@10.0.0.7:6380/2");
/// assert!(!shown.to_string().contains("s3cret"));
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct NodeAddress(std::sync::Arc<str>);

const HIDDEN: &str = "***";
const SECRET_QUERY_KEYS: [&str; 3] = ["pass", "password", "token"];

impl NodeAddress {
    /// Redacts `raw`. A string that does not parse as a URL is not shown at all.
    pub fn redact(raw: &str) -> Self {
        let Ok(mut url) = url::Url::parse(raw) else {
            return Self("<unparseable url>".into());
        };
        if url.password().is_some() {
            // Setting a password only fails for URLs that cannot have one, and those have none.
            let _ = url.set_password(Some(HIDDEN));
        }
        // A value with `@` may carry credentials (`addr=user:pass@host:port` by mistake).
        let secret =
            |key: &str, value: &str| SECRET_QUERY_KEYS.contains(&key) || value.contains('@');
        if url.query_pairs().any(|(key, value)| secret(&key, &value)) {
            let pairs: Vec<(String, String)> = url
                .query_pairs()
                .map(|(key, value)| {
                    let value = if secret(&key, &value) {
                        HIDDEN.to_owned()
                    } else {
                        value.into_owned()
                    };
                    (key.into_owned(), value)
                })
                .collect();
            url.query_pairs_mut().clear().extend_pairs(pairs);
        }
        Self(url.to_string().replace("%2A%2A%2A", HIDDEN).into())
    }

    /// Redacts every URL of a list: how the configurations' `Debug` shows their nodes.
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_core::NodeAddress;
    /// let shown = NodeAddress::redact_all(&["redis://:s3cret@a:6379".to_owned()]);
    /// assert_eq!(format!("{shown:?}"), "[NodeAddress(redis://:***@a:6379)]");
    /// ```
    pub fn redact_all(urls: &[String]) -> Vec<Self> {
        urls.iter().map(|url| Self::redact(url)).collect()
    }

    /// The redacted URL.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for NodeAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for NodeAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "NodeAddress({})", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hides_passwords_wherever_a_url_carries_them() {
        let cases = [
            (
                "redis://:hunter2@127.0.0.1:6379",
                "redis://:***@127.0.0.1:6379",
            ),
            (
                "rediss://user:hunter2@host:6380/1",
                "rediss://user:***@host:6380/1",
            ),
            (
                "redis+unix:///tmp/redis.sock?db=1&pass=hunter2",
                "redis+unix:///tmp/redis.sock?db=1&pass=***",
            ),
            ("redis://127.0.0.1:6379", "redis://127.0.0.1:6379"),
            (
                "redis+cluster://:hunter2@h:1?addr=h2:2&addr=u:hunter2@h3:3",
                "redis+cluster://:***@h:1?addr=h2%3A2&addr=***",
            ),
        ];
        for (raw, shown) in cases {
            let address = NodeAddress::redact(raw);
            assert_eq!(address.as_str(), shown);
            assert!(!format!("{address} {address:?}").contains("hunter2"));
        }
    }

    #[test]
    fn an_unparseable_url_is_not_echoed() {
        let address = NodeAddress::redact("not a url with hunter2 inside");
        assert!(!address.as_str().contains("hunter2"));
    }
}
