//! Single-use tokens (FORMAT.md §5.1, §8 step 15): the spent-token record,
//! the store that keeps it, and [`Redemption`], through which alone the state
//! of a single-use token is reached.
//!
//! The core does no I/O: a store is a trait with one atomic operation,
//! [`ReplayStore::insert_if_absent`]. Under `std`, [`MemoryReplayStore`] is a
//! bounded in-process store; the sidecar adds Redis for fleets. A store that
//! must be awaited (a network store) uses the two halves directly:
//! [`crate::Codec::verify_single_use`], then [`Redemption::finish`] with the
//! store's answer.

use core::fmt;
use core::time::Duration;

use crate::error::{ConsumeError, Refusal, StoreError};
use crate::outcome::Verified;
use crate::policy::Policy;
use crate::types::{KeyId, TOKEN_ID_LEN};

/// How long a store shared by several verifiers (Redis) must keep the record
/// of a token expiring at `expires_at`, recorded by a verifier whose clock
/// reads `now` (unix seconds): FORMAT.md §5.1.
///
/// Each verifier accepts a token until its own clock passes `expires_at` plus
/// its own leeway. A shared store expires records by its own clock, so the
/// record is given a *relative* lifetime, long enough for the verifier with
/// the largest leeway any verifier may have ([`Policy::MAX_CLOCK_LEEWAY`],
/// whatever this one's is) and for clocks that differ by up to `max_skew`
/// from the store's, in either direction (hence twice):
/// `(expires_at + 600 − now) × 1000 + 2 × max_skew` milliseconds, computed
/// exactly (no saturation: `now` past `expires_at + 600` gives less than
/// nothing), then held within one second and
/// [`MAX_SHARED_RECORD_LIFETIME`] (FORMAT.md §5.1).
///
/// The guarantee holds while every verifier's clock is within `max_skew` of
/// the store's; a store that shares records checks that (the sidecar and the
/// TypeScript and Python Redis stores compare with Redis `TIME`) and refuses
/// to record when it does not hold. An absolute expiry computed from one
/// verifier's clock (`PXAT`) would let the record vanish while a verifier
/// whose clock runs behind, or whose leeway is larger, still accepts the
/// token: a second redemption.
pub fn shared_record_lifetime(expires_at: u64, now: u64, max_skew: Duration) -> Duration {
    let skew_ms = i128::try_from(max_skew.as_millis()).unwrap_or(i128::MAX / 4);
    let ms = (i128::from(expires_at) + i128::from(Policy::MAX_CLOCK_LEEWAY) - i128::from(now))
        * 1000
        + 2 * skew_ms.min(i128::from(u64::MAX));
    let most = MAX_SHARED_RECORD_LIFETIME.as_millis() as i128;
    Duration::from_millis(ms.clamp(1000, most) as u64)
}

/// The longest relative lifetime a shared store gives a record: 10^15 ms
/// (about 31 700 years), under Redis's limit for an expiry added to its
/// millisecond clock. Reached only by tokens expiring near the end of the
/// 64-bit clock.
pub const MAX_SHARED_RECORD_LIFETIME: Duration = Duration::from_millis(1_000_000_000_000_000);

/// The longest [`SpentId::record_name`]: `spent:v1:`, a key id of up to 10
/// digits, `:` and 32 hex digits.
pub const RECORD_NAME_MAX_LEN: usize = 9 + 10 + 1 + 2 * TOKEN_ID_LEN;

/// What a spent single-use token is recorded under: its key id and its
/// random token id. Never the token, which is a bearer credential.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct SpentId {
    key_id: KeyId,
    token_id: [u8; TOKEN_ID_LEN],
}

impl SpentId {
    pub(crate) fn new(key_id: KeyId, token_id: [u8; TOKEN_ID_LEN]) -> Self {
        SpentId { key_id, token_id }
    }

    /// The key the token was minted under.
    pub fn key_id(&self) -> KeyId {
        self.key_id
    }

    /// The token's random id.
    pub fn token_id(&self) -> &[u8; TOKEN_ID_LEN] {
        &self.token_id
    }

    /// The record's name in a shared store, after the deployment's prefix:
    /// `spent:v1:<key id>:<token id in lowercase hex>` (FORMAT.md §5.1).
    pub fn record_name(&self) -> alloc::string::String {
        let mut name = alloc::string::String::with_capacity(RECORD_NAME_MAX_LEN);
        self.write_record_name(&mut name);
        name
    }

    /// Appends [`SpentId::record_name`] to `out` (at most
    /// [`RECORD_NAME_MAX_LEN`] bytes), without allocating beyond `out`'s own
    /// growth: for a store that puts the deployment's prefix first and
    /// writes a name on every consume.
    pub fn write_record_name(&self, out: &mut alloc::string::String) {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        out.push_str("spent:v1:");
        let mut digits = [0u8; 10];
        let mut at = digits.len();
        let mut key_id = self.key_id.get();
        loop {
            at -= 1;
            digits[at] = b'0' + (key_id % 10) as u8;
            key_id /= 10;
            if key_id == 0 {
                break;
            }
        }
        for &digit in &digits[at..] {
            out.push(char::from(digit));
        }
        out.push(':');
        for byte in self.token_id {
            out.push(char::from(HEX[usize::from(byte >> 4)]));
            out.push(char::from(HEX[usize::from(byte & 15)]));
        }
    }
}

impl fmt::Debug for SpentId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SpentId({})", self.record_name())
    }
}

/// A record of spent single-use tokens.
///
/// [`ReplayStore::insert_if_absent`] must be atomic across everything that
/// shares the store (every thread, every replica): of any number of
/// concurrent inserts of one id, exactly one returns `Ok(true)`. A store
/// must keep a record until `until` and must never drop a live record to
/// make room: when it cannot take another, it answers [`StoreError::Full`].
pub trait ReplayStore: Send + Sync {
    /// Records `id` as spent until `until` (unix seconds) if it is not
    /// recorded yet: `Ok(true)` if this call recorded it, `Ok(false)` if it
    /// was already there. `now` is the verifier's clock, for expiring old
    /// records.
    fn insert_if_absent(&self, id: &SpentId, until: u64, now: u64) -> Result<bool, StoreError>;
}

/// A single-use token that passed every check of FORMAT.md §8 but the last
/// (step 15): its state is reachable only by recording the token spent.
#[must_use = "a single-use token's state is reached only by redeeming it"]
pub struct Redemption<T> {
    verified: Verified<T>,
    spent: SpentId,
    until: u64,
    now: u64,
}

impl<T> Redemption<T> {
    pub(crate) fn new(verified: Verified<T>, spent: SpentId, until: u64, now: u64) -> Self {
        Redemption {
            verified,
            spent,
            until,
            now,
        }
    }

    /// The same redemption with the (still unreachable) state converted by
    /// `f`, for callers that keep the state in another form.
    pub fn map_state<U>(self, f: impl FnOnce(T) -> U) -> Redemption<U> {
        Redemption {
            verified: self.verified.map_state(f),
            spent: self.spent,
            until: self.until,
            now: self.now,
        }
    }

    /// The same redemption with the state converted by `f`, which may
    /// refuse it: decoding the state is step 14 of FORMAT.md §8, before the
    /// token is recorded (step 15), so a token whose state does not decode
    /// is refused *unrecorded*.
    pub fn try_map_state<U>(
        self,
        f: impl FnOnce(T) -> Result<U, Refusal>,
    ) -> Result<Redemption<U>, Refusal> {
        Ok(Redemption {
            verified: self.verified.try_map_state(f)?,
            spent: self.spent,
            until: self.until,
            now: self.now,
        })
    }

    /// What the record is kept under.
    pub fn spent_id(&self) -> SpentId {
        self.spent
    }

    /// Until when the record must be kept, in unix seconds: the token's
    /// expiry plus the clock leeway.
    pub fn record_until(&self) -> u64 {
        self.until
    }

    /// The verifier's clock reading at verification, in unix seconds.
    pub fn now(&self) -> u64 {
        self.now
    }

    /// The token's expiry, in unix seconds.
    pub fn expires_at(&self) -> u64 {
        self.verified.expires_at
    }

    /// How long a store shared by several verifiers must keep this record:
    /// [`shared_record_lifetime`] of this token, at this verifier's clock.
    pub fn shared_record_lifetime(&self, max_skew: Duration) -> Duration {
        shared_record_lifetime(self.expires_at(), self.now, max_skew)
    }

    /// Records the token spent in `store` and, if this was the first
    /// time, gives its contents. A token already recorded is
    /// [`Refusal::Replayed`]; a store that could not record it is
    /// [`ConsumeError::Store`] (not accepted, not refused: retry later).
    pub fn redeem(self, store: &dyn ReplayStore) -> Result<Verified<T>, ConsumeError> {
        let recorded = store.insert_if_absent(&self.spent, self.until, self.now);
        self.finish(recorded)
    }

    /// The end of a redemption whose insert the caller ran itself (an
    /// asynchronous store): `recorded` is what
    /// [`ReplayStore::insert_if_absent`] would have returned for
    /// [`Redemption::spent_id`] and [`Redemption::record_until`].
    pub fn finish(self, recorded: Result<bool, StoreError>) -> Result<Verified<T>, ConsumeError> {
        match recorded {
            Ok(true) => Ok(self.verified),
            Ok(false) => Err(ConsumeError::Refused(Refusal::Replayed)),
            Err(e) => Err(ConsumeError::Store(e)),
        }
    }
}

impl<T> fmt::Debug for Redemption<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The state is not shown: it is not the caller's until redeemed.
        f.debug_struct("Redemption")
            .field("spent", &self.spent)
            .field("until", &self.until)
            .finish_non_exhaustive()
    }
}

#[cfg(feature = "std")]
pub use memory::MemoryReplayStore;

#[cfg(feature = "std")]
mod memory {
    use std::collections::HashMap;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::{ReplayStore, SpentId, StoreError};

    /// Shards: a consume locks one of them, never the whole store.
    const SHARDS: usize = 64;

    /// Spent-token records in this process: for a server with one replica
    /// (a fleet needs a shared store, such as the sidecar's Redis).
    ///
    /// A record is kept until the [`super::Redemption::record_until`] of the
    /// codec that redeemed it: `expires_at` plus *that codec's* leeway. Share
    /// one store only between codecs of one [`crate::Policy`]: a codec with a
    /// larger leeway would still accept a token whose record is gone.
    ///
    /// Bounded: it holds at most its capacity of live records, spread over
    /// 64 independently locked shards (so no global lock on the hot path).
    /// A shard that is full first drops its expired records; if every record
    /// in it is still live, the insert is refused with [`StoreError::Full`]
    /// and counted ([`MemoryReplayStore::refused_full`]): a live record is
    /// never evicted, which would re-open replay.
    #[derive(Debug)]
    pub struct MemoryReplayStore {
        shards: Box<[Mutex<Shard>]>,
        per_shard: usize,
        refused_full: AtomicU64,
    }

    /// One shard's records, and the earliest time one of them expires: a
    /// full shard is swept only once that time has come, so a flood of
    /// consumes against a shard full of live records costs a comparison
    /// each, not a scan.
    #[derive(Debug, Default)]
    struct Shard {
        records: HashMap<SpentId, u64>,
        earliest_until: u64,
    }

    impl Shard {
        fn sweep(&mut self, now: u64) {
            self.records.retain(|_, until| *until > now);
            self.earliest_until = self.records.values().copied().min().unwrap_or(u64::MAX);
        }
    }

    impl MemoryReplayStore {
        /// A store for about `capacity` live records: 64 shards of
        /// `capacity / 64` (rounded up) each, chosen by the token id, so a
        /// shard can be full a little before the whole store is (with
        /// 1 000 000, the default of the sidecar, each shard holds 15 625). A
        /// record takes about 40 bytes plus the map's overhead.
        pub fn new(capacity: usize) -> Self {
            let per_shard = capacity.div_ceil(SHARDS).max(1);
            MemoryReplayStore {
                shards: (0..SHARDS)
                    .map(|_| {
                        Mutex::new(Shard {
                            records: HashMap::new(),
                            earliest_until: u64::MAX,
                        })
                    })
                    .collect(),
                per_shard,
                refused_full: AtomicU64::new(0),
            }
        }

        /// The most live records it holds.
        pub fn capacity(&self) -> usize {
            self.per_shard * SHARDS
        }

        /// Records held now, expired ones not yet swept included.
        pub fn len(&self) -> usize {
            self.shards
                .iter()
                .map(|s| s.lock().map_or(0, |s| s.records.len()))
                .sum()
        }

        /// Whether it holds no record.
        pub fn is_empty(&self) -> bool {
            self.len() == 0
        }

        /// Inserts refused because a shard was full of live records.
        pub fn refused_full(&self) -> u64 {
            self.refused_full.load(Ordering::Relaxed)
        }

        /// Drops every record whose time has passed (`until <= now`).
        pub fn sweep(&self, now: u64) {
            for shard in self.shards.iter() {
                if let Ok(mut shard) = shard.lock() {
                    shard.sweep(now);
                }
            }
        }

        fn shard(&self, id: &SpentId) -> usize {
            // The token id is random: its first bytes spread the records.
            let t = id.token_id();
            usize::from(t[0]) | (usize::from(t[1]) << 8)
        }
    }

    impl ReplayStore for MemoryReplayStore {
        fn insert_if_absent(&self, id: &SpentId, until: u64, now: u64) -> Result<bool, StoreError> {
            let shard = &self.shards[self.shard(id) % SHARDS];
            // A poisoned shard (a panic while holding it) cannot be trusted
            // to hold its records: fail closed.
            let mut shard = shard.lock().map_err(|_| StoreError::Unavailable)?;
            if let Some(&recorded_until) = shard.records.get(id)
                && recorded_until > now
            {
                return Ok(false);
            }
            if shard.records.len() >= self.per_shard && !shard.records.contains_key(id) {
                if now >= shard.earliest_until {
                    shard.sweep(now);
                }
                if shard.records.len() >= self.per_shard {
                    self.refused_full.fetch_add(1, Ordering::Relaxed);
                    return Err(StoreError::Full);
                }
            }
            shard.records.insert(*id, until);
            shard.earliest_until = shard.earliest_until.min(until);
            Ok(true)
        }
    }
}

#[cfg(all(test, feature = "std"))]
mod tests {
    use super::*;

    fn id(n: u8, salt: u8) -> SpentId {
        let mut token = [salt; TOKEN_ID_LEN];
        token[0] = n;
        SpentId::new(KeyId::new(7), token)
    }

    #[test]
    fn a_shared_record_outlives_every_verifiers_acceptance_window() {
        let skew = Duration::from_millis(2000);
        // Recorded at 1000 by a verifier on the store's clock, for a token
        // expiring at 1010: kept until 1010 + 600 + 4 on the store's clock.
        assert_eq!(
            shared_record_lifetime(1010, 1000, skew),
            Duration::from_millis(614_000)
        );
        // For every recording clock and every accepting clock within `skew`
        // of the store's, and every leeway a verifier may have, the record
        // is still there whenever a verifier accepts the token.
        for recorder in [-2000i64, 0, 2000] {
            for accepter in [-2000i64, 0, 2000] {
                for leeway in [0u64, 1, 5, 60, Policy::MAX_CLOCK_LEEWAY] {
                    // Store-clock ms at which the recorder's clock reads 1000 s.
                    let recorded_at = 1_000_000 - recorder;
                    let kept_until =
                        recorded_at + shared_record_lifetime(1010, 1000, skew).as_millis() as i64;
                    // Store-clock ms of the accepter's last acceptance.
                    let accepts_until = (1010 + leeway as i64) * 1000 - accepter;
                    assert!(
                        kept_until >= accepts_until,
                        "recorder {recorder} ms, accepter {accepter} ms, leeway {leeway} s"
                    );
                }
            }
        }
        // Never zero, even for a token at the edge of its window.
        assert_eq!(
            shared_record_lifetime(0, u64::MAX, Duration::ZERO),
            Duration::from_secs(1)
        );
    }

    #[test]
    fn a_record_refuses_its_second_insert_until_it_expires() {
        let store = MemoryReplayStore::new(64);
        assert_eq!(store.insert_if_absent(&id(1, 0), 100, 10), Ok(true));
        assert_eq!(store.insert_if_absent(&id(1, 0), 100, 99), Ok(false));
        // Past its time the record is gone (the token is expired by then).
        assert_eq!(store.insert_if_absent(&id(1, 0), 200, 100), Ok(true));
    }

    #[test]
    fn a_full_store_refuses_and_never_evicts_a_live_record() {
        // 64 records: one per shard; ids with the same first byte share a shard.
        let store = MemoryReplayStore::new(64);
        assert_eq!(store.insert_if_absent(&id(3, 0), 100, 10), Ok(true));
        assert_eq!(
            store.insert_if_absent(&id(3, 1), 100, 10),
            Err(StoreError::Full)
        );
        assert_eq!(store.refused_full(), 1);
        // The live record is still there: its replay is still refused.
        assert_eq!(store.insert_if_absent(&id(3, 0), 100, 50), Ok(false));
        // Once it has expired, the shard sweeps it and takes the new one.
        assert_eq!(store.insert_if_absent(&id(3, 1), 300, 100), Ok(true));
        assert_eq!(store.len(), 1);
    }

    #[test]
    fn sweep_drops_expired_records_only() {
        let store = MemoryReplayStore::new(1024);
        for n in 0..10 {
            let until = if n % 2 == 0 { 50 } else { 500 };
            assert_eq!(store.insert_if_absent(&id(n, 9), until, 1), Ok(true));
        }
        store.sweep(100);
        assert_eq!(store.len(), 5);
    }

    #[test]
    fn concurrent_inserts_of_one_id_succeed_once() {
        let store = std::sync::Arc::new(MemoryReplayStore::new(1 << 16));
        for round in 0..50u8 {
            let wins: usize = std::thread::scope(|scope| {
                let handles: Vec<_> = (0..8)
                    .map(|_| {
                        let store = store.clone();
                        scope.spawn(move || store.insert_if_absent(&id(round, 5), 1000, 1))
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().expect("no panic"))
                    .filter(|r| *r == Ok(true))
                    .count()
            });
            assert_eq!(wins, 1, "round {round}");
        }
    }
}
