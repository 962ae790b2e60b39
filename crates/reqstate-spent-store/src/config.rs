//! What a store connects to ([`StoreConfig`]), the defaults of the
//! `--replay-*` flags, and store URLs shown without their credentials.

use std::fmt;
use std::time::Duration;

/// The default `--replay-capacity`: live records held by the memory store.
pub const DEFAULT_MEMORY_CAPACITY: usize = 1_000_000;
/// The default `--replay-timeout-ms`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(250);
/// The default `--replay-key-prefix`, the same in every implementation
/// (the TypeScript and Python Redis stores), so that they share records.
pub const DEFAULT_KEY_PREFIX: &str = "reqstate:";
/// The default `--replay-max-skew-ms`: how far any verifier's clock may be
/// from Redis's before consumes are refused.
pub const DEFAULT_MAX_SKEW: Duration = Duration::from_millis(2000);

/// Where spent tokens are recorded, as configured.
#[derive(Clone, PartialEq, Eq)]
pub enum StoreConfig {
    /// In this process: bounded, swept, lost on restart.
    Memory {
        /// Live records held at most.
        capacity: usize,
    },
    /// One Redis (or Valkey) server.
    Redis {
        /// `redis://`, `rediss://` (TLS) or `unix://` URL, with user and
        /// password if the server needs them.
        url: String,
        /// Prefix of every record name.
        prefix: String,
        /// Deadline of each store call.
        timeout: Duration,
        /// How far this sidecar's clock may be from Redis's.
        max_skew: Duration,
    },
    /// A Redis Cluster, found from these seed nodes.
    Cluster {
        /// Seed node URLs.
        urls: Vec<String>,
        /// Prefix of every record name.
        prefix: String,
        /// Deadline of each store call.
        timeout: Duration,
        /// How far this sidecar's clock may be from the cluster's.
        max_skew: Duration,
    },
}

/// Shows the URLs without their passwords.
impl fmt::Debug for StoreConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreConfig::Memory { capacity } => f
                .debug_struct("Memory")
                .field("capacity", capacity)
                .finish(),
            StoreConfig::Redis {
                url,
                prefix,
                timeout,
                max_skew,
            } => f
                .debug_struct("Redis")
                .field("url", &redacted(url))
                .field("prefix", prefix)
                .field("timeout", timeout)
                .field("max_skew", max_skew)
                .finish(),
            StoreConfig::Cluster {
                urls,
                prefix,
                timeout,
                max_skew,
            } => f
                .debug_struct("Cluster")
                .field(
                    "urls",
                    &urls.iter().map(|u| redacted(u)).collect::<Vec<_>>(),
                )
                .field("prefix", prefix)
                .field("timeout", timeout)
                .field("max_skew", max_skew)
                .finish(),
        }
    }
}

/// A store URL (or a comma-separated list of them) with every credential
/// replaced by `***`, for logs and errors: the password of the user-info
/// (everything between the first `:` after the scheme and the **last** `@`
/// of the authority, so a password holding `/`, `@` or `:` is hidden whole),
/// a user-info that is a password alone (`redis://secret@host`), and the
/// value of every `pass` or `password` query parameter (`unix://…?pass=`).
pub fn redacted(urls: &str) -> String {
    urls.split(',')
        .map(redacted_one)
        .collect::<Vec<_>>()
        .join(",")
}

fn redacted_one(url: &str) -> String {
    let (head, query) = match url.split_once('?') {
        Some((head, query)) => (head, Some(query)),
        None => (url, None),
    };
    let mut shown = match head.split_once("://") {
        // The authority ends at the first `/` after the last `@`: a
        // password may hold `/` (unencoded) and still be hidden whole.
        Some((scheme, rest)) => match rest.rfind('@') {
            Some(at) => {
                let userinfo = &rest[..at];
                let user = match userinfo.split_once(':') {
                    Some((user, _password)) => format!("{user}:***"),
                    // `redis://secret@host` puts the password alone before `@`.
                    None => "***".to_string(),
                };
                format!("{scheme}://{user}@{}", &rest[at + 1..])
            }
            None => head.to_string(),
        },
        None => head.to_string(),
    };
    if let Some(query) = query {
        let params: Vec<String> = query
            .split('&')
            .map(|param| match param.split_once('=') {
                Some((name, _)) if is_password_param(name) => format!("{name}=***"),
                _ => param.to_string(),
            })
            .collect();
        shown.push('?');
        shown.push_str(&params.join("&"));
    }
    shown
}

fn is_password_param(name: &str) -> bool {
    name.eq_ignore_ascii_case("pass") || name.eq_ignore_ascii_case("password")
}

/// Why a store could not be set up (a bad URL): a configuration error.
#[derive(Debug)]
pub struct StoreSetupError(pub String);

impl fmt::Display for StoreSetupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for StoreSetupError {}

#[cfg(test)]
mod tests {
    use super::*;

    /// Security review round 3, finding 4: every shape of store URL that can
    /// carry a credential is shown without it.
    #[test]
    fn passwords_never_reach_logs() {
        let cases = [
            (
                "redis://app:hunter2@cache:6379/0",
                "redis://app:***@cache:6379/0",
            ),
            ("rediss://hunter2@cache", "rediss://***@cache"),
            ("redis://cache:6379", "redis://cache:6379"),
            ("unix:///run/redis.sock", "unix:///run/redis.sock"),
            // A password holding `/`, `@` and `:` (not percent-encoded).
            (
                "redis://app:hun/ter@2:x@cache:6379/0",
                "redis://app:***@cache:6379/0",
            ),
            ("redis://:s3cr/et@cache", "redis://:***@cache"),
            // A cluster's node list.
            (
                "redis://a:pw1@n1:7000,redis://a:pw/2@n2:7001,redis://n3:7002",
                "redis://a:***@n1:7000,redis://a:***@n2:7001,redis://n3:7002",
            ),
            // Unix sockets take their credentials as query parameters.
            (
                "unix:///run/redis.sock?db=2&pass=hunter2",
                "unix:///run/redis.sock?db=2&pass=***",
            ),
            (
                "redis+unix:///run/redis.sock?user=app&password=hunter2",
                "redis+unix:///run/redis.sock?user=app&password=***",
            ),
            (
                "rediss://u:p@w@cache/0?protocol=resp3&PASSWORD=x",
                "rediss://u:***@cache/0?protocol=resp3&PASSWORD=***",
            ),
        ];
        for (url, shown) in cases {
            assert_eq!(redacted(url), shown, "{url}");
            for secret in ["hunter2", "hun/ter", "s3cr", "pw1", "pw/2", "p@w"] {
                assert!(!redacted(url).contains(secret), "{url}");
            }
        }
        let config = StoreConfig::Cluster {
            urls: vec!["redis://u:hun/ter2@h:1".into(), "redis://u:x@y@h:2".into()],
            prefix: "p:".into(),
            timeout: DEFAULT_TIMEOUT,
            max_skew: DEFAULT_MAX_SKEW,
        };
        let shown = format!("{config:?}");
        assert!(
            !shown.contains("hun/ter2") && !shown.contains("x@y"),
            "{shown}"
        );
    }
}
