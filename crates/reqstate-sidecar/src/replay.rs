//! The spent-token store of single-use tokens (docs/SINGLE_USE.md): in this
//! process (`--replay-store memory`, the default) or in Redis, shared by every
//! sidecar of a fleet (`--replay-store redis://…`, `rediss://…`, `unix://…`,
//! or a Redis Cluster with `--replay-cluster`).
//!
//! Redis records are written with one atomic `SET <name> <attempt> NX GET PX
//! <ms>` per token (pipelined for a batch): exactly one of any number of
//! concurrent consumes of a token, on any sidecar, records it. The lifetime is
//! relative ([`reqstate::shared_record_lifetime`]): long enough for every
//! verifier whatever its leeway, while every verifier's clock is within
//! `--replay-max-skew-ms` of Redis's, which the clock guard (`ClockGuard`)
//! checks against Redis `TIME` (at start, every 10 s, and before a consume
//! after a wall-clock step), refusing consumes while it does not hold. Every store call has a deadline;
//! a store that errs or does not answer in time makes the consume fail closed
//! (`REASON_REPLAY_STORE_UNAVAILABLE`) and nothing else: the sidecar keeps
//! serving, and the Redis connection reconnects by itself. A call whose
//! outcome is unknown (it may have been recorded) leaves its attempt id
//! behind, so that the caller's retry through this sidecar is accepted once if
//! it was (`Pending`).

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use reqstate::{MemoryReplayStore, Redemption, ReplayStore as _, SpentId, StoreError};
use tokio::sync::OnceCell;

use crate::metrics::Metrics;

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
/// How often the clock guard reads Redis `TIME`.
pub const CLOCK_CHECK_PERIOD: Duration = Duration::from_secs(10);
/// A reading older than this is taken again before a consume is answered.
const CLOCK_READING_MAX_AGE: Duration = Duration::from_secs(30);
/// A wall-clock step larger than this since the last reading (seen as a
/// change of wall time minus monotonic time) makes the guard read again.
const CLOCK_STEP_MS: i128 = 100;
/// Attempts of unknown outcome remembered at most (see [`Pending`]).
const MAX_PENDING: usize = 10_000;

/// Where spent tokens are recorded, as configured.
#[derive(Clone, PartialEq, Eq)]
pub enum ReplayStoreConfig {
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
impl fmt::Debug for ReplayStoreConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReplayStoreConfig::Memory { capacity } => f
                .debug_struct("Memory")
                .field("capacity", capacity)
                .finish(),
            ReplayStoreConfig::Redis {
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
            ReplayStoreConfig::Cluster {
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

/// One single-use token to record: its record, how long an in-process store
/// keeps it, and what a shared store needs to compute its lifetime.
#[derive(Debug, Clone, Copy)]
pub struct Spend {
    /// The record.
    pub id: SpentId,
    /// `expires_at + leeway` of this verifier: the memory store's expiry.
    pub until: u64,
    /// The token's expiry (unix seconds).
    pub expires_at: u64,
}

impl Spend {
    /// The record a redemption asks for.
    pub fn of<T>(redemption: &Redemption<T>) -> Spend {
        Spend {
            id: redemption.spent_id(),
            until: redemption.record_until(),
            expires_at: redemption.expires_at(),
        }
    }
}

/// What a caller reads of a store failure beyond its reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreDetail {
    /// The reason's own message says it all: the token was not recorded.
    Plain,
    /// The token was not recorded, and why (a clock out of bounds, a store
    /// that could not be reached).
    NotRecorded(Arc<str>),
    /// The store answered with a refusal (out of memory, a replica's
    /// `READONLY`, an ACL): nothing was recorded. The text names the cause
    /// and says so; the reason's own message ("did not answer") would be
    /// false here, so it is not used.
    Refused(Arc<str>),
    /// The store's answer was lost after the record was sent (`cause`:
    /// what went wrong), and what a retry gets. The reason's own message
    /// ("the token was not recorded") would be false here, so it is not
    /// used.
    OutcomeUnknown {
        /// What went wrong (a timeout, a dropped connection).
        cause: Arc<str>,
        /// What a retry of the same consume gets.
        retry: RetryOffer,
    },
}

/// What a retry of a consume of unknown outcome gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryOffer {
    /// This sidecar remembers the attempt: its retry is accepted once,
    /// whether or not the attempt recorded the token.
    Remembered,
    /// This sidecar's memory of such attempts is full: a retry is accepted
    /// only if the attempt did not record the token.
    MemoryFull,
    /// A command-line run: the attempt ends with the process, so a later
    /// consume is accepted only if this one did not record the token.
    ProcessEnds,
}

impl StoreDetail {
    /// The message a person reads for a failure with this reason.
    pub fn message(&self, error: &StoreError) -> String {
        match self {
            StoreDetail::Plain => error.to_string(),
            StoreDetail::NotRecorded(why) => format!("{error}: {why}"),
            StoreDetail::Refused(why) => format!("{why}; the token was not accepted"),
            StoreDetail::OutcomeUnknown { cause, retry } => outcome_unknown_message(cause, *retry),
        }
    }
}

/// Why a store did not record a token (or may not have), with what the
/// caller should know beyond the reason.
#[derive(Debug, Clone)]
pub struct StoreFailure {
    /// The reason: full or unavailable.
    pub error: StoreError,
    /// What to tell the caller beyond the reason.
    pub why: StoreDetail,
}

impl StoreFailure {
    fn unavailable(why: impl Into<Arc<str>>) -> Self {
        StoreFailure {
            error: StoreError::Unavailable,
            why: StoreDetail::NotRecorded(why.into()),
        }
    }
}

impl From<StoreError> for StoreFailure {
    fn from(error: StoreError) -> Self {
        StoreFailure {
            error,
            why: StoreDetail::Plain,
        }
    }
}

/// The message of a consume whose record was sent but whose answer was
/// lost (`failure`: what went wrong), with what the caller can do.
fn outcome_unknown_message(failure: &str, retry: RetryOffer) -> String {
    let retry = match retry {
        RetryOffer::Remembered => {
            "Retry the same consume through this same sidecar: the retry is accepted once, \
             whether or not this attempt recorded the token"
        }
        RetryOffer::MemoryFull => {
            "Retry the same consume: the retry is accepted only if this attempt did not \
             record the token, and refused as replayed if it did (this sidecar already \
             remembers as many consumes of unknown outcome as it keeps)"
        }
        RetryOffer::ProcessEnds => {
            "Retry the same consume: a later run is accepted only if this one did not record \
             the token, and refused as replayed if it did (a run's attempt ends with it)"
        }
    };
    format!(
        "{failure}: the replay store's answer was lost, so the token may or may not be spent; \
         it was not accepted. {retry}"
    )
}

/// A store's answer for one token: `Ok(true)` if this call recorded it.
pub type Recorded = Result<bool, StoreFailure>;

/// Why a consume gave no state: the token was refused (a replay), or the
/// store did not record it (not the token's fault: the caller retries).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unspent {
    /// The token was refused: [`reqstate::Refusal::Replayed`].
    Refused(reqstate::Refusal),
    /// The store did not record the token (or its answer was lost), with
    /// what the caller should know beyond the reason (a clock out of
    /// bounds, an outcome that is unknown and how to retry).
    NotRecorded(StoreError, StoreDetail),
}

impl Unspent {
    /// The same failure, as a command-line run reports it: the attempt of a
    /// consume of unknown outcome ends with the process, so no retry finds
    /// it.
    pub fn for_one_run(self) -> Unspent {
        match self {
            Unspent::NotRecorded(error, StoreDetail::OutcomeUnknown { cause, .. }) => {
                Unspent::NotRecorded(
                    error,
                    StoreDetail::OutcomeUnknown {
                        cause,
                        retry: RetryOffer::ProcessEnds,
                    },
                )
            }
            other => other,
        }
    }

    /// The reason name (the wire's and the command line's).
    pub fn reason(&self) -> &'static str {
        match self {
            Unspent::Refused(refusal) => refusal.reason(),
            Unspent::NotRecorded(error, _) => error.reason(),
        }
    }
}

impl fmt::Display for Unspent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unspent::Refused(refusal) => refusal.fmt(f),
            Unspent::NotRecorded(error, why) => f.write_str(&why.message(error)),
        }
    }
}

/// The end of every consume, in the sidecar and on the command line: the
/// store's answer decides between the state, a replay, and a token the
/// store did not record.
pub fn finish<T>(
    redemption: Redemption<T>,
    recorded: Recorded,
) -> Result<reqstate::Verified<T>, Unspent> {
    match recorded {
        Ok(first) => redemption.finish(Ok(first)).map_err(|e| match e {
            reqstate::ConsumeError::Refused(refusal) => Unspent::Refused(refusal),
            reqstate::ConsumeError::Store(error) => Unspent::NotRecorded(error, StoreDetail::Plain),
        }),
        Err(StoreFailure { error, why }) => Err(Unspent::NotRecorded(error, why)),
    }
}

/// This sidecar's clock against the store's (Redis `TIME`), kept as the
/// last reading: consumes are refused while the difference, plus the
/// reading's own uncertainty, exceeds `max_skew`.
#[derive(Debug)]
struct ClockGuard {
    max_skew: Duration,
    reading: Mutex<Option<ClockReading>>,
    /// The monotonic origin that wall-clock steps are measured against.
    origin: Instant,
}

#[derive(Debug, Clone, Copy)]
struct ClockReading {
    /// This clock minus the store's, in ms (positive: this one is ahead).
    skew_ms: i64,
    /// Half the round trip of the reading, in ms.
    uncertainty_ms: i64,
    /// When it was taken.
    at: Instant,
    /// Wall time minus monotonic time then, in ms: a step of the wall clock
    /// since changes it.
    wall_minus_monotonic_ms: i128,
}

fn wall_ms() -> i128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i128)
}

impl ClockGuard {
    fn new(max_skew: Duration) -> Self {
        ClockGuard {
            max_skew,
            reading: Mutex::new(None),
            origin: Instant::now(),
        }
    }

    fn wall_minus_monotonic_ms(&self) -> i128 {
        wall_ms() - self.origin.elapsed().as_millis() as i128
    }

    fn last(&self) -> Option<ClockReading> {
        *self.reading.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether the last reading may be used for a consume now.
    fn fresh(&self) -> Option<ClockReading> {
        let reading = self.last()?;
        let stepped = (self.wall_minus_monotonic_ms() - reading.wall_minus_monotonic_ms).abs()
            > CLOCK_STEP_MS;
        (reading.at.elapsed() <= CLOCK_READING_MAX_AGE && !stepped).then_some(reading)
    }

    /// Takes a reading from `TIME`'s answer, given the wall clock before the
    /// call was sent and after its answer; logs a change of verdict.
    fn record(
        &self,
        sent_ms: i128,
        answered_ms: i128,
        store_ms: i128,
        metrics: &crate::metrics::Metrics,
    ) {
        let middle = (sent_ms + answered_ms) / 2;
        let reading = ClockReading {
            skew_ms: (middle - store_ms).clamp(i64::MIN as i128, i64::MAX as i128) as i64,
            uncertainty_ms: ((answered_ms - sent_ms).max(0) / 2 + 1) as i64,
            at: Instant::now(),
            wall_minus_monotonic_ms: self.wall_minus_monotonic_ms(),
        };
        let previous = self
            .reading
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .replace(reading);
        metrics.observe_replay_store_clock(reading.skew_ms, self.max_skew);
        let was_within = previous.is_none_or(|p| self.verdict(&p).is_ok());
        match self.verdict(&reading) {
            Err(why) if was_within => tracing::error!(
                skew_ms = reading.skew_ms,
                max_skew_ms = self.max_skew.as_millis() as u64,
                "{why}"
            ),
            Ok(()) if !was_within => tracing::info!(
                skew_ms = reading.skew_ms,
                "the clocks agree again with the replay store's: consumes are accepted"
            ),
            _ => {}
        }
    }

    /// Whether a reading allows consumes, and why not.
    fn verdict(&self, reading: &ClockReading) -> Result<(), String> {
        let max = self.max_skew.as_millis() as i64;
        let off = reading.skew_ms.saturating_abs();
        if off.saturating_add(reading.uncertainty_ms) <= max {
            return Ok(());
        }
        let direction = if reading.skew_ms > 0 {
            "ahead of"
        } else {
            "behind"
        };
        Err(format!(
            "the clock here is {off} ms (± {} ms) {direction} the replay store's (Redis TIME), \
             more than the {max} ms allowed (--replay-max-skew-ms): consumes are refused until \
             the clocks agree, since a spent-token record could expire while a verifier still \
             accepts its token",
            reading.uncertainty_ms
        ))
    }
}

/// Attempts whose outcome is unknown: a `SET` that timed out or whose
/// connection failed may still have been recorded. Its record name and
/// attempt id stay here until the record's lifetime ends, so that the
/// caller's retry through this sidecar sends the same attempt id and is
/// accepted if Redis holds exactly that (the earlier call recorded it, and
/// its caller was refused: no one was accepted yet). A retry takes the entry
/// out first, so concurrent retries cannot both be accepted. Bounded: beyond
/// [`MAX_PENDING`] an attempt is not remembered, and its retry is refused
/// as a replay if the earlier call did record it (the safe side).
#[derive(Debug, Default)]
struct Pending {
    attempts: Mutex<HashMap<String, ([u8; 16], Instant)>>,
}

impl Pending {
    fn take(&self, name: &str) -> Option<[u8; 16]> {
        let mut attempts = self.attempts.lock().unwrap_or_else(|p| p.into_inner());
        match attempts.remove(name) {
            Some((attempt, until)) if until > Instant::now() => Some(attempt),
            _ => None,
        }
    }

    /// Remembers an attempt whose outcome is unknown; false when the memory
    /// is full and it was not remembered.
    fn remember(&self, name: String, attempt: [u8; 16], lifetime: Duration) -> bool {
        let mut attempts = self.attempts.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        if attempts.len() >= MAX_PENDING {
            attempts.retain(|_, (_, until)| *until > now);
        }
        if attempts.len() < MAX_PENDING {
            attempts.insert(name, (attempt, now + lifetime));
            true
        } else {
            false
        }
    }
}

/// One `SET … NX GET PX` to send: the record, the attempt id it writes, and
/// whether that id is a pending one (so that finding it there means this
/// sidecar's earlier call recorded it).
struct Attempt {
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
fn record_name(prefix: &str, id: &SpentId) -> String {
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
    fn command(&self) -> redis::Cmd {
        let lifetime_ms = self.lifetime.as_millis().clamp(1000, i64::MAX as u128) as u64;
        // "SET", the name, 32 hex digits, "NX", "GET", "PX", up to 20 digits.
        let mut cmd = redis::Cmd::with_capacity(7, 3 + self.name.len() + 32 + 2 + 3 + 2 + 20);
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

enum Backend {
    Memory(MemoryReplayStore),
    Redis(redis::aio::ConnectionManager),
    Cluster(Box<Cluster>),
}

/// A cluster connection, made on first use (and retried on the next call
/// while the cluster cannot be reached); it then follows the cluster's
/// topology and reconnects by itself.
struct Cluster {
    client: redis::cluster::ClusterClient,
    connection: OnceCell<redis::cluster_async::ClusterConnection>,
}

/// A connection to a Redis server or cluster, for one call.
#[derive(Clone)]
enum Connection {
    Redis(redis::aio::ConnectionManager),
    Cluster(redis::cluster_async::ClusterConnection),
}

/// The sidecar's spent-token store.
pub struct Replay {
    backend: Backend,
    /// The deployment's prefix of every record name.
    prefix: String,
    timeout: Duration,
    metrics: Arc<Metrics>,
    description: String,
    /// Redis only: the clock check and the attempts of unknown outcome.
    clock: Option<ClockGuard>,
    pending: Pending,
}

impl fmt::Debug for Replay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Replay")
            .field("store", &self.description)
            .finish_non_exhaustive()
    }
}

/// Why a store could not be set up (a bad URL): a configuration error.
#[derive(Debug)]
pub struct ReplaySetupError(pub String);

impl fmt::Display for ReplaySetupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ReplaySetupError {}

impl Replay {
    /// Sets the store up. Nothing is connected yet: a Redis that is down at
    /// start makes consumes fail closed until it is up, and the sidecar
    /// serves everything else meanwhile. [`Replay::watch_clock`] connects
    /// at once and keeps the clock check current.
    pub fn new(
        config: &ReplayStoreConfig,
        metrics: Arc<Metrics>,
    ) -> Result<Self, ReplaySetupError> {
        let bad_url = |url: &str, e: redis::RedisError| {
            ReplaySetupError(format!(
                "--replay-store {}: {}",
                redacted(url),
                e.detail().unwrap_or(
                    "not a Redis URL (a password with characters such as / @ : ? # \
                     must be percent-encoded)"
                )
            ))
        };
        let (backend, prefix, timeout, description, clock) = match config {
            ReplayStoreConfig::Memory { capacity } => (
                Backend::Memory(MemoryReplayStore::new(*capacity)),
                String::new(),
                DEFAULT_TIMEOUT,
                format!("memory (capacity {capacity})"),
                None,
            ),
            ReplayStoreConfig::Redis {
                url,
                prefix,
                timeout,
                max_skew,
            } => {
                if url.starts_with("rediss://") {
                    install_tls_provider();
                }
                let client = redis::Client::open(url.as_str()).map_err(|e| bad_url(url, e))?;
                let manager_config = redis::aio::ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(*timeout))
                    .set_response_timeout(Some(*timeout))
                    .set_number_of_retries(1)
                    .set_max_delay(Duration::from_secs(2));
                let manager =
                    redis::aio::ConnectionManager::new_lazy_with_config(client, manager_config)
                        .map_err(|e| bad_url(url, e))?;
                (
                    Backend::Redis(manager),
                    prefix.clone(),
                    *timeout,
                    format!("redis {}", redacted(url)),
                    Some(ClockGuard::new(*max_skew)),
                )
            }
            ReplayStoreConfig::Cluster {
                urls,
                prefix,
                timeout,
                max_skew,
            } => {
                if urls.iter().any(|u| u.starts_with("rediss://")) {
                    install_tls_provider();
                }
                let client =
                    redis::cluster::ClusterClient::builder(urls.iter().map(String::as_str))
                        .connection_timeout(*timeout)
                        .response_timeout(*timeout)
                        .retries(1)
                        .build()
                        .map_err(|e| bad_url(&urls.join(","), e))?;
                (
                    Backend::Cluster(Box::new(Cluster {
                        client,
                        connection: OnceCell::new(),
                    })),
                    prefix.clone(),
                    *timeout,
                    format!("redis cluster {}", redacted(&urls.join(","))),
                    Some(ClockGuard::new(*max_skew)),
                )
            }
        };
        Ok(Replay {
            backend,
            prefix,
            timeout,
            metrics,
            description,
            clock,
            pending: Pending::default(),
        })
    }

    /// What the store is, for logs (no password).
    pub fn description(&self) -> &str {
        &self.description
    }

    fn record_name(&self, id: &SpentId) -> String {
        record_name(&self.prefix, id)
    }

    /// For a shared store: reads its clock now and then every
    /// [`CLOCK_CHECK_PERIOD`], for as long as the store lives (which also
    /// opens the connection at start rather than on the first consume).
    /// Nothing for the memory store.
    pub fn watch_clock(self: &Arc<Self>) {
        if self.clock.is_none() {
            return;
        }
        let replay = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(CLOCK_CHECK_PERIOD);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                let Some(replay) = replay.upgrade() else {
                    return;
                };
                if let Ok(connection) = replay.connection().await {
                    let _ = replay.read_clock(&connection).await;
                }
            }
        });
    }

    /// The connection to a shared store, or why there is none.
    async fn connection(&self) -> Result<Connection, StoreFailure> {
        match &self.backend {
            Backend::Memory(_) => Err(StoreError::Unavailable.into()),
            Backend::Redis(manager) => Ok(Connection::Redis(manager.clone())),
            Backend::Cluster(cluster) => {
                let connected = tokio::time::timeout(
                    self.timeout,
                    cluster
                        .connection
                        .get_or_try_init(|| cluster.client.get_async_connection()),
                )
                .await;
                match connected {
                    Ok(Ok(connection)) => Ok(Connection::Cluster(connection.clone())),
                    Ok(Err(e)) => {
                        tracing::warn!(error = %e.category(), "replay store: cannot reach the cluster");
                        Err(StoreFailure::unavailable(
                            "the replay store cannot be reached",
                        ))
                    }
                    Err(_) => Err(StoreFailure::unavailable(format!(
                        "the replay store did not answer within {} ms",
                        self.timeout.as_millis()
                    ))),
                }
            }
        }
    }

    /// Reads the store's clock (`TIME`) into the guard.
    async fn read_clock(&self, connection: &Connection) -> Result<(), StoreFailure> {
        let Some(clock) = &self.clock else {
            return Ok(());
        };
        let sent = wall_ms();
        let cmd = redis::cmd("TIME");
        let answer = match connection.clone() {
            Connection::Redis(mut c) => {
                tokio::time::timeout(self.timeout, cmd.query_async::<(i64, i64)>(&mut c)).await
            }
            Connection::Cluster(mut c) => {
                tokio::time::timeout(self.timeout, cmd.query_async::<(i64, i64)>(&mut c)).await
            }
        };
        let answered = wall_ms();
        match answer {
            Ok(Ok((seconds, micros))) => {
                let store_ms = i128::from(seconds) * 1000 + i128::from(micros) / 1000;
                clock.record(sent, answered, store_ms, &self.metrics);
                Ok(())
            }
            Ok(Err(e)) => Err(StoreFailure {
                error: store_error(&e),
                why: StoreDetail::NotRecorded(
                    format!(
                        "its clock could not be read ({}); nothing was recorded",
                        failure_text(&e)
                    )
                    .into(),
                ),
            }),
            Err(_) => Err(StoreFailure::unavailable(format!(
                "the replay store did not answer TIME within {} ms",
                self.timeout.as_millis()
            ))),
        }
    }

    /// Whether consumes may be recorded now: a fresh reading of the store's
    /// clock within bounds (read again first if it is stale, or if the wall
    /// clock stepped since).
    async fn clock_allows(&self, connection: &Connection) -> Result<(), StoreFailure> {
        let Some(clock) = &self.clock else {
            return Ok(());
        };
        let reading = match clock.fresh() {
            Some(reading) => reading,
            None => {
                self.read_clock(connection).await?;
                clock.last().ok_or_else(|| {
                    StoreFailure::unavailable("the replay store's clock could not be read")
                })?
            }
        };
        clock.verdict(&reading).map_err(StoreFailure::unavailable)
    }

    /// Records one spent token: `Ok(true)` if this call recorded it.
    pub async fn record(&self, spend: Spend, now: u64) -> Recorded {
        self.record_many(&[spend], now)
            .await
            .pop()
            .unwrap_or(Err(StoreError::Unavailable.into()))
    }

    /// Records many spent tokens in one round trip (a pipeline on Redis),
    /// one answer per item, in order.
    pub async fn record_many(&self, items: &[Spend], now: u64) -> Vec<Recorded> {
        if items.is_empty() {
            return Vec::new();
        }
        let started = Instant::now();
        let answers = match &self.backend {
            Backend::Memory(store) => items
                .iter()
                .map(|spend| {
                    store
                        .insert_if_absent(&spend.id, spend.until, now)
                        .map_err(StoreFailure::from)
                })
                .collect(),
            Backend::Redis(_) | Backend::Cluster(_) => self.record_shared(items, now).await,
        };
        self.metrics
            .observe_replay_store(started.elapsed(), &answers);
        answers
    }

    async fn record_shared(&self, items: &[Spend], now: u64) -> Vec<Recorded> {
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

    /// One SET per item, all in flight at once on the cluster's multiplexed
    /// connections (a cluster refuses a pipeline whose keys span slots),
    /// under one deadline.
    async fn concurrent(
        &self,
        connection: &redis::cluster_async::ClusterConnection,
        attempts: &[Attempt],
    ) -> Vec<Result<Option<Vec<u8>>, SetFailure>> {
        let calls = attempts.iter().map(|attempt| {
            let mut connection = connection.clone();
            let cmd = attempt.command();
            async move { cmd.query_async::<Option<Vec<u8>>>(&mut connection).await }
        });
        match tokio::time::timeout(self.timeout, futures_util::future::join_all(calls)).await {
            Ok(replies) => replies
                .into_iter()
                .map(|reply| reply.map_err(|e| self.set_failure(&e)))
                .collect(),
            Err(_) => vec![Err(SetFailure::Lost(self.timed_out())); attempts.len()],
        }
    }

    /// `SET … NX GET PX` for each item, in one pipeline (one round trip),
    /// under the deadline; a single item is sent as the command alone. On
    /// the multiplexed connection, concurrent calls share the socket: their
    /// commands are written back to back and the replies matched in order,
    /// so concurrent consumes are pipelined too.
    async fn pipelined<C: redis::aio::ConnectionLike + Send>(
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
        let mut pipeline = redis::Pipeline::with_capacity(attempts.len());
        for attempt in attempts {
            pipeline.add_command(attempt.command());
        }
        let answered: Result<Result<Vec<Option<Vec<u8>>>, redis::RedisError>, _> =
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
                vec![
                    Err(SetFailure::Lost(StoreFailure::unavailable(
                        "the replay store answered a pipeline with the wrong number of replies"
                    )));
                    attempts.len()
                ]
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
    fn set_failure(&self, e: &redis::RedisError) -> SetFailure {
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

    fn timed_out(&self) -> StoreFailure {
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
fn store_error(e: &redis::RedisError) -> StoreError {
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
enum SetFailure {
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
fn failure_text(e: &redis::RedisError) -> &'static str {
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
fn install_tls_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

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
        let config = ReplayStoreConfig::Cluster {
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

    fn reading(skew_ms: i64, uncertainty_ms: i64) -> ClockReading {
        ClockReading {
            skew_ms,
            uncertainty_ms,
            at: Instant::now(),
            wall_minus_monotonic_ms: 0,
        }
    }

    #[test]
    fn clock_readings_beyond_the_bound_refuse_and_say_why() {
        let guard = ClockGuard::new(Duration::from_millis(2000));
        assert!(guard.verdict(&reading(1500, 10)).is_ok());
        assert!(guard.verdict(&reading(-1990, 10)).is_ok());
        // The reading's own uncertainty counts against the bound.
        let why = guard
            .verdict(&reading(-1995, 10))
            .expect_err("out of bounds");
        assert!(why.contains("1995 ms (± 10 ms) behind"), "{why}");
        let why = guard.verdict(&reading(4200, 1)).expect_err("out of bounds");
        assert!(
            why.contains("ahead of") && why.contains("2000 ms allowed"),
            "{why}"
        );
    }

    #[test]
    fn a_stale_or_stepped_reading_is_not_used() {
        let guard = ClockGuard::new(Duration::from_millis(2000));
        assert!(guard.fresh().is_none(), "no reading yet");
        let now = guard.wall_minus_monotonic_ms();
        *guard.reading.lock().expect("lock") = Some(ClockReading {
            wall_minus_monotonic_ms: now,
            ..reading(0, 1)
        });
        assert!(guard.fresh().is_some());
        // The wall clock stepped by a second since the reading.
        *guard.reading.lock().expect("lock") = Some(ClockReading {
            wall_minus_monotonic_ms: now - 1000,
            ..reading(0, 1)
        });
        assert!(guard.fresh().is_none(), "a step went unnoticed");
    }

    #[test]
    fn a_pending_attempt_is_taken_once() {
        let pending = Pending::default();
        assert!(pending.remember("n".into(), [7; 16], Duration::from_secs(60)));
        assert_eq!(pending.take("n"), Some([7; 16]));
        assert_eq!(pending.take("n"), None, "taken twice");
        pending.remember("old".into(), [1; 16], Duration::ZERO);
        assert_eq!(pending.take("old"), None, "an expired attempt was reused");
    }

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

    /// Security review round 4: a consume whose answer was lost says so in
    /// one message (not "not recorded" and "may have been recorded" at
    /// once), with what to do, and keeps its reason.
    #[test]
    fn an_outcome_unknown_consume_says_what_happened_and_what_to_do() {
        for retry in [
            RetryOffer::Remembered,
            RetryOffer::MemoryFull,
            RetryOffer::ProcessEnds,
        ] {
            let unspent = Unspent::NotRecorded(
                StoreError::Unavailable,
                StoreDetail::OutcomeUnknown {
                    cause: "the replay store did not answer within 250 ms".into(),
                    retry,
                },
            );
            assert_eq!(unspent.reason(), "replay_store_unavailable");
            let message = unspent.to_string();
            assert!(!message.contains("not recorded"), "{message}");
            for said in [
                "did not answer within 250 ms",
                "may or may not be spent",
                "not accepted",
                "Retry the same consume",
            ] {
                assert!(message.contains(said), "no {said:?} in {message}");
            }
            assert_eq!(
                message.contains("replayed"),
                retry != RetryOffer::Remembered,
                "{message}"
            );
            assert_eq!(
                message.contains("this same sidecar"),
                retry == RetryOffer::Remembered,
                "{message}"
            );
        }
        let remembered = Unspent::NotRecorded(
            StoreError::Unavailable,
            StoreDetail::OutcomeUnknown {
                cause: "x".into(),
                retry: RetryOffer::Remembered,
            },
        );
        assert!(
            remembered
                .for_one_run()
                .to_string()
                .contains("a run's attempt ends with it")
        );
        let plain = Unspent::NotRecorded(StoreError::Unavailable, StoreDetail::Plain);
        assert_eq!(plain.to_string(), StoreError::Unavailable.to_string());
    }
}
