//! One Redis (or Valkey) server, and the protocol every shared store
//! speaks: one `SET <name> <attempt> NX GET PX <ms>` per token, pipelined
//! for a batch, under a deadline; an answer lost after the command was sent
//! leaves its attempt pending (crate `pending`).

use std::time::Duration;

use reqstate::{SpentId, StoreError};

use crate::config::{DEFAULT_MAX_SKEW, StoreSetupError, redacted};
use crate::outcome::{Recorded, RetryOffer, Spend, StoreDetail, StoreFailure};
use crate::{SpentStore, wall_ms};

/// One `SET … NX GET PX` to send: the record, the attempt id it writes, and
/// whether that id is a pending one (so that finding it there means this
/// sidecar's earlier call recorded it).
pub(crate) struct Attempt {
    name: String,
    attempt: [u8; 16],
    reused: bool,
    lifetime: Duration,
}

/// Lowercase hex digits, as every implementation writes attempt ids.
const HEX_DIGITS: &[u8; 16] = b"0123456789abcdef";

/// `bytes` in lowercase hex, without allocating.
fn hex_of<const N: usize, const M: usize>(bytes: &[u8; N]) -> [u8; M] {
    debug_assert_eq!(M, 2 * N);
    let mut out = [0u8; M];
    for (i, &b) in bytes.iter().enumerate() {
        out[2 * i] = HEX_DIGITS[usize::from(b >> 4)];
        out[2 * i + 1] = HEX_DIGITS[usize::from(b & 15)];
    }
    out
}

/// `<prefix><the core's record name>`: the layout every implementation
/// writes (FORMAT.md §5.1), in one allocation.
pub(crate) fn record_name(prefix: &str, id: &SpentId) -> String {
    let mut name = String::with_capacity(prefix.len() + reqstate::RECORD_NAME_MAX_LEN);
    name.push_str(prefix);
    id.write_record_name(&mut name);
    name
}

impl Attempt {
    /// The attempt id as the value of the record: 32 lowercase hex digits.
    fn value(&self) -> [u8; 32] {
        hex_of(&self.attempt)
    }

    /// The command, in one buffer sized for it: no reallocation while its
    /// arguments are written (this is on every consume).
    pub(crate) fn command(&self) -> ::redis::Cmd {
        let lifetime_ms = self.lifetime.as_millis().clamp(1000, i64::MAX as u128) as u64;
        // "SET", the name, 32 hex digits, "NX", "GET", "PX", up to 20 digits.
        let mut cmd = ::redis::Cmd::with_capacity(7, 3 + self.name.len() + 32 + 2 + 3 + 2 + 20);
        cmd.arg("SET")
            .arg(self.name.as_str())
            .arg(&self.value()[..])
            .arg("NX")
            .arg("GET")
            .arg("PX")
            .arg(lifetime_ms);
        cmd
    }

    /// `SET … NX GET` answers nil when it set the key, else the value held.
    fn recorded(&self, reply: Option<Vec<u8>>) -> bool {
        match reply {
            None => true,
            Some(held) => self.reused && held == self.value(),
        }
    }
}

/// A connection to a Redis server or cluster, for one call.
#[derive(Clone)]
pub(crate) enum Connection {
    Redis(::redis::aio::ConnectionManager),
    Cluster(::redis::cluster_async::ClusterConnection),
}

/// The store URL's message when it is not one the client accepts.
pub(crate) fn bad_url(url: &str, e: ::redis::RedisError) -> StoreSetupError {
    StoreSetupError(format!(
        "--replay-store {}: {}",
        redacted(url),
        e.detail().unwrap_or(
            "not a Redis URL (a password with characters such as / @ : ? # \
             must be percent-encoded)"
        )
    ))
}

/// The multiplexed, reconnecting connection to one server, made on first
/// use: every call has `timeout` to connect and to answer.
pub(crate) fn connect(
    url: &str,
    timeout: Duration,
) -> Result<::redis::aio::ConnectionManager, StoreSetupError> {
    if url.starts_with("rediss://") {
        install_tls_provider();
    }
    let client = ::redis::Client::open(url).map_err(|e| bad_url(url, e))?;
    let manager_config = ::redis::aio::ConnectionManagerConfig::new()
        .set_connection_timeout(Some(timeout))
        .set_response_timeout(Some(timeout))
        .set_number_of_retries(1)
        .set_max_delay(Duration::from_secs(2));
    ::redis::aio::ConnectionManager::new_lazy_with_config(client, manager_config)
        .map_err(|e| bad_url(url, e))
}

impl SpentStore {
    /// Records spent tokens in a shared store: the clock checked first,
    /// then one `SET … NX GET PX` per token (pending attempts reused).
    pub(crate) async fn record_shared(&self, items: &[Spend], now: u64) -> Vec<Recorded> {
        let refuse_all = |failure: StoreFailure| vec![Err(failure); items.len()];
        let connection = match self.connection().await {
            Ok(connection) => connection,
            Err(failure) => return refuse_all(failure),
        };
        if let Err(failure) = self.clock_allows(&connection).await {
            return refuse_all(failure);
        }
        let max_skew = self.clock.as_ref().map_or(DEFAULT_MAX_SKEW, |c| c.max_skew);
        // The record's lifetime is counted from the earlier of the caller's
        // `now` and this host's clock, which the guard above holds within
        // `max_skew` of the store's: a `now` ahead of it (the command line's
        // `--now`) would give a record that dies in Redis while the token
        // still verifies on every clock of the fleet (FORMAT.md §5.1).
        let now = now.min(u64::try_from(wall_ms().div_euclid(1000)).unwrap_or(0));
        let mut attempts = Vec::with_capacity(items.len());
        for spend in items {
            let name = self.record_name(&spend.id);
            let (attempt, reused) = match self.pending.take(&name) {
                Some(attempt) => (attempt, true),
                None => {
                    let mut attempt = [0u8; 16];
                    if reqstate::SecureRandom::fill(&reqstate::BufferedRandom, &mut attempt)
                        .is_err()
                    {
                        return refuse_all(StoreFailure::unavailable(
                            "no OS randomness for the record's attempt id",
                        ));
                    }
                    (attempt, false)
                }
            };
            attempts.push(Attempt {
                name,
                attempt,
                reused,
                lifetime: reqstate::shared_record_lifetime(spend.expires_at, now, max_skew),
            });
        }
        let replies = match connection {
            Connection::Redis(mut c) => self.pipelined(&mut c, &attempts).await,
            Connection::Cluster(c) => self.concurrent(&c, &attempts).await,
        };
        attempts
            .into_iter()
            .zip(replies)
            .map(|(attempt, reply)| match reply {
                Ok(reply) => Ok(attempt.recorded(reply)),
                Err(SetFailure::Refused(failure)) => {
                    // Redis answered: this SET recorded nothing. An earlier
                    // attempt of unknown outcome that it retried still may
                    // have, so its retry stays possible.
                    if attempt.reused {
                        self.pending
                            .remember(attempt.name, attempt.attempt, attempt.lifetime);
                    }
                    Err(failure)
                }
                Err(SetFailure::Lost(failure)) => {
                    // It may have been recorded: let this sidecar's retry
                    // of the same consume find out.
                    let cause = match failure.why {
                        StoreDetail::NotRecorded(why)
                        | StoreDetail::Refused(why)
                        | StoreDetail::OutcomeUnknown { cause: why, .. } => why,
                        StoreDetail::Plain => "the replay store failed".into(),
                    };
                    let retry =
                        if self
                            .pending
                            .remember(attempt.name, attempt.attempt, attempt.lifetime)
                        {
                            RetryOffer::Remembered
                        } else {
                            RetryOffer::MemoryFull
                        };
                    Err(StoreFailure {
                        error: failure.error,
                        why: StoreDetail::OutcomeUnknown { cause, retry },
                    })
                }
            })
            .collect()
    }

    /// `SET … NX GET PX` for each item, in one pipeline (one round trip),
    /// under the deadline; a single item is sent as the command alone. On
    /// the multiplexed connection, concurrent calls share the socket: their
    /// commands are written back to back and the replies matched in order,
    /// so concurrent consumes are pipelined too.
    async fn pipelined<C: ::redis::aio::ConnectionLike + Send>(
        &self,
        connection: &mut C,
        attempts: &[Attempt],
    ) -> Vec<Result<Option<Vec<u8>>, SetFailure>> {
        if let [attempt] = attempts {
            let cmd = attempt.command();
            let answered =
                tokio::time::timeout(self.timeout, cmd.query_async::<Option<Vec<u8>>>(connection))
                    .await;
            return vec![match answered {
                Ok(Ok(reply)) => Ok(reply),
                Ok(Err(e)) => Err(self.set_failure(&e)),
                Err(_) => Err(SetFailure::Lost(self.timed_out())),
            }];
        }
        let mut pipeline = ::redis::Pipeline::with_capacity(attempts.len());
        for attempt in attempts {
            pipeline.add_command(attempt.command());
        }
        let answered: Result<Result<Vec<Option<Vec<u8>>>, ::redis::RedisError>, _> =
            tokio::time::timeout(self.timeout, pipeline.query_async(connection)).await;
        match answered {
            Ok(Ok(replies)) if replies.len() == attempts.len() => {
                replies.into_iter().map(Ok).collect()
            }
            Ok(Ok(replies)) => {
                tracing::warn!(
                    expected = attempts.len(),
                    got = replies.len(),
                    "replay store: a pipeline answered the wrong number of replies"
                );
                let failure = StoreFailure::unavailable(
                    "the replay store answered a pipeline with the wrong number of replies",
                );
                vec![Err(SetFailure::Lost(failure)); attempts.len()]
            }
            // One error for the whole pipeline: which of its commands ran is
            // not known, so each may have been recorded.
            Ok(Err(e)) => {
                let failure = match self.set_failure(&e) {
                    SetFailure::Refused(failure) | SetFailure::Lost(failure) => failure,
                };
                vec![Err(SetFailure::Lost(failure)); attempts.len()]
            }
            Err(_) => vec![Err(SetFailure::Lost(self.timed_out())); attempts.len()],
        }
    }

    /// What a Redis error on a `SET` means: an error reply (Redis answered:
    /// nothing was recorded by it), named for its cause; or an answer that
    /// did not arrive (the command may have run), with what went wrong.
    pub(crate) fn set_failure(&self, e: &::redis::RedisError) -> SetFailure {
        let error = store_error(e);
        let lost = e.is_io_error() || e.is_timeout() || e.is_connection_dropped();
        match e.code() {
            Some(code) if !lost && !e.is_connection_refusal() => {
                SetFailure::Refused(StoreFailure {
                    error,
                    why: StoreDetail::Refused(refusal_text(code).into()),
                })
            }
            _ if e.is_connection_refusal() => SetFailure::Refused(StoreFailure::unavailable(
                "the replay store refused the connection; nothing was recorded",
            )),
            _ if e.is_timeout() => SetFailure::Lost(StoreFailure::unavailable(format!(
                "the replay store did not answer within {} ms",
                self.timeout.as_millis()
            ))),
            _ => SetFailure::Lost(StoreFailure::unavailable(failure_text(e))),
        }
    }

    pub(crate) fn timed_out(&self) -> StoreFailure {
        tracing::warn!(
            timeout_ms = self.timeout.as_millis() as u64,
            "replay store timed out"
        );
        StoreFailure::unavailable(format!(
            "the replay store did not answer within {} ms",
            self.timeout.as_millis()
        ))
    }
}

/// What a Redis error means for a consume: a server out of memory under a
/// `noeviction` policy is full (it will not drop records to make room:
/// docs/SINGLE_USE.md); anything else is unavailable. Logged, without the
/// server's message (which could quote a key).
pub(crate) fn store_error(e: &::redis::RedisError) -> StoreError {
    tracing::warn!(
        error = %e.category(),
        code = e.code().unwrap_or("-"),
        "replay store error"
    );
    if e.code() == Some("OOM") {
        StoreError::Full
    } else {
        StoreError::Unavailable
    }
}

/// How one `SET` of a consume failed.
#[derive(Debug, Clone)]
pub(crate) enum SetFailure {
    /// Redis answered with an error: this SET recorded nothing.
    Refused(StoreFailure),
    /// The answer did not arrive (a timeout, a connection lost after the
    /// command was sent): it may have been recorded.
    Lost(StoreFailure),
}

/// An error reply to a `SET`, in words, by its code (never the server's
/// message, which could quote a key). Redis answered, so nothing was
/// recorded.
fn refusal_text(code: &str) -> String {
    let cause = match code {
        "OOM" => {
            return "Redis is out of memory and refused the record (OOM: maxmemory reached \
                    under noeviction); nothing was recorded"
                .into();
        }
        "READONLY" => {
            "READONLY: this Redis is a replica (a failover moved the primary: use the \
             new primary's address)"
        }
        "NOAUTH" | "WRONGPASS" => {
            "authentication is required or was refused (check the user and password of \
             --replay-store)"
        }
        "NOPERM" => "NOPERM: the Redis user may not run it (ACL: +set +time)",
        "WRONGTYPE" => {
            "WRONGTYPE: the record's name holds another kind of value (another \
             application writing under this prefix?)"
        }
        "LOADING" => "LOADING: Redis is loading its data set",
        "MASTERDOWN" => "MASTERDOWN: the replica lost its primary",
        "BUSY" => "BUSY: Redis is running a script",
        other => {
            let code: String = other
                .chars()
                .filter(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
                .take(32)
                .collect();
            return format!("Redis refused the record ({code}); nothing was recorded");
        }
    };
    format!("Redis refused the record: {cause}; nothing was recorded")
}

/// What went wrong with a Redis call, in words (never the server's message,
/// which could quote a key).
pub(crate) fn failure_text(e: &::redis::RedisError) -> &'static str {
    if e.is_connection_refusal() {
        "connection refused"
    } else if e.is_timeout() {
        "timed out"
    } else if e.is_io_error() || e.is_connection_dropped() {
        "connection failed"
    } else if e.code() == Some("NOPERM") {
        "the Redis user may not run it (ACL: +set +time)"
    } else {
        "Redis answered with an error"
    }
}

/// rustls needs a process-wide crypto provider for `rediss://`: ring, as
/// the rest of the sidecar uses. Installing it twice is harmless.
pub(crate) fn install_tls_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_nx_get_answers_decide_the_consume() {
        let attempt = Attempt {
            name: "reqstate:spent:v1:1:00".into(),
            attempt: [0xab; 16],
            reused: false,
            lifetime: Duration::from_secs(5),
        };
        assert!(attempt.recorded(None));
        let mine = reqstate_cli_state::encode_hex(&[0xab; 16]).into_bytes();
        // A fresh attempt finding any value, its own included, is a replay.
        assert!(!attempt.recorded(Some(mine.clone())));
        let retry = Attempt {
            reused: true,
            ..attempt
        };
        assert!(retry.recorded(Some(mine)));
        assert!(!retry.recorded(Some(b"someone else".to_vec())));
        let args: Vec<Vec<u8>> = retry
            .command()
            .args_iter()
            .map(|arg| match arg {
                redis::Arg::Simple(bytes) => bytes.to_vec(),
                _ => b"(cursor)".to_vec(),
            })
            .collect();
        let expected: Vec<&[u8]> = vec![
            b"SET",
            b"reqstate:spent:v1:1:00",
            b"abababababababababababababababab",
            b"NX",
            b"GET",
            b"PX",
            b"5000",
        ];
        assert_eq!(args, expected, "SET name attempt NX GET PX ms");
    }

    /// Issue 50 item 3: an error reply names its cause and says nothing was
    /// recorded; an unknown code is shown as a code only (never the
    /// server's message, which could quote a key).
    #[test]
    fn an_error_reply_names_its_cause() {
        for (code, cause) in [
            ("OOM", "out of memory"),
            ("READONLY", "a replica"),
            ("NOAUTH", "authentication"),
            ("WRONGPASS", "authentication"),
            ("NOPERM", "+set +time"),
            ("WRONGTYPE", "another kind of value"),
            ("LOADING", "loading"),
        ] {
            let text = refusal_text(code);
            assert!(text.contains(cause), "{code}: {text}");
            assert!(text.ends_with("nothing was recorded"), "{code}: {text}");
        }
        assert_eq!(
            refusal_text("WEIRD key:secret\n"),
            "Redis refused the record (WEIRDkeysecret); nothing was recorded"
        );
    }

    /// The record names this sidecar writes are the core's, after the
    /// prefix: the layout every implementation shares (FORMAT.md §5.1).
    #[test]
    fn record_names_are_the_cores() -> Result<(), Box<dyn std::error::Error>> {
        let secret = "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=";
        for key_id in [1u32, 9, 10, 1_000_000, 4_294_967_295] {
            let keyring = reqstate::Keyring::from_toml(&format!(
                "version = 1\n\n[[key]]\nid = {key_id}\nstatus = \"primary\"\nsecret = \"{secret}\"\n"
            ))?;
            let codec = reqstate::Codec::new(keyring);
            let binding = reqstate::Binding::with_context_bytes("tool", b"")?;
            let minted = codec.mint_single_use(binding, "step", &(), Duration::from_secs(60))?;
            let id = codec
                .verify_single_use::<()>(&minted.token, binding.step("step"))?
                .spent_id();
            assert_eq!(id.key_id().get(), key_id);
            assert_eq!(
                record_name("counter-prod:", &id),
                format!("counter-prod:{}", id.record_name())
            );
        }
        Ok(())
    }
}
