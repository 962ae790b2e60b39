//! Which key is in use, as evidence an operator can read before retiring
//! one: per key of the keyring in service, the tokens minted and accepted
//! under it, the refusals of tokens naming it (by reason), and the last
//! instant it verified a token; for ListKeys and for the metrics listener.
//!
//! The counters are atomics in a structure built once per keyring
//! ([`KeyEvidence`], held next to the codec in
//! [`crate::live_keyring::KeyringInService`]): a call finds its key's
//! counters by a search over a few ids and adds one, with no lock and no
//! allocation. A key's counters live in an [`EvidenceBook`] across reloads,
//! so a reload that keeps a key keeps its counts (counts since start); a key
//! that leaves the keyring leaves the book. A token naming an id that is not
//! in the keyring in service (or whose id cannot be read) is counted under
//! the one label value [`OTHER`], so callers cannot add series.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{IntCounterVec, IntGauge, IntGaugeVec, Opts};
use reqstate::{KeyStatus, Keyring, Refusal};

use crate::live_keyring::SharedKeyring;

/// The `key_id` label of tokens whose key id is not in the keyring in
/// service, or cannot be read.
pub const OTHER: &str = "other";

const REASONS: usize = Refusal::REASONS.len();

/// The counters of one key id.
#[derive(Debug)]
pub struct KeyCounters {
    minted: AtomicU64,
    verified: AtomicU64,
    /// Unix seconds; 0 for never.
    last_verified_at: AtomicU64,
    /// Indexed like [`Refusal::REASONS`].
    refusals: [AtomicU64; REASONS],
}

impl Default for KeyCounters {
    fn default() -> Self {
        KeyCounters {
            minted: AtomicU64::new(0),
            verified: AtomicU64::new(0),
            last_verified_at: AtomicU64::new(0),
            refusals: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

impl KeyCounters {
    /// Tokens minted (Mint, MintBatch items, Seal) under the key.
    pub fn minted(&self) -> u64 {
        self.minted.load(Ordering::Relaxed)
    }

    /// Tokens accepted (Verify, consumes, VerifyBatch items, Unseal) under the key.
    pub fn verified(&self) -> u64 {
        self.verified.load(Ordering::Relaxed)
    }

    /// The last instant (unix seconds) a token under the key was accepted.
    pub fn last_verified_at(&self) -> Option<u64> {
        Some(self.last_verified_at.load(Ordering::Relaxed)).filter(|&at| at > 0)
    }

    /// Refusals of tokens naming the key, for a reason of [`Refusal::REASONS`].
    pub fn refusals(&self, reason: &str) -> u64 {
        Refusal::REASONS
            .iter()
            .position(|r| *r == reason)
            .map_or(0, |i| self.refusals[i].load(Ordering::Relaxed))
    }
}

/// The counters of the keys of one keyring, built once per keyring.
#[derive(Debug)]
pub struct KeyEvidence {
    /// Sorted by id.
    keys: Vec<(u32, Arc<KeyCounters>)>,
    other: Arc<KeyCounters>,
    sha256: String,
    newest_key_id: u32,
}

impl KeyEvidence {
    /// The counters of `id`, or those of [`OTHER`] if it is not in the keyring.
    pub fn counters(&self, id: u32) -> &KeyCounters {
        match self.keys.binary_search_by_key(&id, |(k, _)| *k) {
            Ok(i) => &self.keys[i].1,
            Err(_) => &self.other,
        }
    }

    /// Counts a token minted under `id`.
    pub fn minted(&self, id: u32) {
        self.counters(id).minted.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a token accepted under `id` at `now` (unix seconds).
    pub fn verified(&self, id: u32, now: u64) {
        let counters = self.counters(id);
        counters.verified.fetch_add(1, Ordering::Relaxed);
        counters.last_verified_at.fetch_max(now, Ordering::Relaxed);
    }

    /// Counts a refused token under the key id its header names.
    pub fn refused(&self, token: &str, refusal: &Refusal) {
        let reason = refusal.reason();
        let Some(i) = Refusal::REASONS.iter().position(|r| *r == reason) else {
            return;
        };
        let counters = match token_key_id(token) {
            Some(id) => self.counters(id),
            None => &self.other,
        };
        counters.refusals[i].fetch_add(1, Ordering::Relaxed);
    }

    /// SHA-256 of the keyring file in service, lowercase hex (empty for `--dev`).
    pub fn sha256(&self) -> &str {
        &self.sha256
    }

    /// The highest key id in the keyring: the newest key (`reqstate keys
    /// add` and `rotate` give a new key the highest id plus one).
    pub fn newest_key_id(&self) -> u32 {
        self.newest_key_id
    }
}

/// The key id a token's header names (FORMAT.md §2-§3: a header byte, then
/// a LEB128 id), read from its first eight base64url characters without
/// allocating; `None` if they are not there or do not decode. Unverified:
/// for counting refusals only.
pub fn token_key_id(token: &str) -> Option<u32> {
    let head = token.as_bytes().get(..8)?;
    let mut bytes = [0u8; 6];
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode_slice(head, &mut bytes)
        .ok()?;
    let mut value: u64 = 0;
    for (i, &byte) in bytes[1..].iter().enumerate() {
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return u32::try_from(value).ok();
        }
    }
    None
}

/// The hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, bytes);
    digest
        .as_ref()
        .iter()
        .fold(String::with_capacity(64), |mut out, b| {
            use std::fmt::Write as _;
            let _ = write!(out, "{b:02x}");
            out
        })
}

/// The keyring file's own bytes within what a load kept of it
/// ([`crate::keyring_source::LoadedKeyringFile::contents`]: the file, then
/// each secret it names as an 8-byte big-endian length and the secret). A
/// keyring that loaded is TOML text, and TOML allows no NUL character
/// anywhere (the core refuses it: see the test), while every length starts
/// with a zero byte (a secret is far shorter than 2^56 bytes): the file ends
/// at the first zero byte.
pub fn keyring_file_bytes(contents: &[u8]) -> &[u8] {
    let end = contents
        .iter()
        .position(|&b| b == 0)
        .unwrap_or(contents.len());
    &contents[..end]
}

/// The counters of every key id seen in the keyrings served since start,
/// kept across reloads for the keys that stay.
#[derive(Debug, Default)]
pub struct EvidenceBook {
    // Taken once per keyring load, never on a call.
    by_id: Mutex<HashMap<u32, Arc<KeyCounters>>>,
    other: Arc<KeyCounters>,
}

impl EvidenceBook {
    /// An empty book.
    pub fn new() -> Arc<EvidenceBook> {
        Arc::new(EvidenceBook::default())
    }

    /// The counters for `keyring`, loaded from a file whose bytes (as
    /// loaded: [`keyring_file_bytes`] is applied) are `contents`: a key the
    /// previous keyring had keeps its counts; keys no longer in it are
    /// forgotten.
    pub fn for_keyring(&self, keyring: &Keyring, contents: &[u8]) -> KeyEvidence {
        let mut by_id = self
            .by_id
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut keys: Vec<(u32, Arc<KeyCounters>)> = keyring
            .keys()
            .iter()
            .map(|key| {
                let id = key.id().get();
                (id, by_id.get(&id).cloned().unwrap_or_default())
            })
            .collect();
        keys.sort_unstable_by_key(|(id, _)| *id);
        by_id.clear();
        by_id.extend(keys.iter().map(|(id, c)| (*id, c.clone())));
        let sha256 = if contents.is_empty() {
            String::new()
        } else {
            sha256_hex(keyring_file_bytes(contents))
        };
        KeyEvidence {
            newest_key_id: keys.last().map_or(0, |(id, _)| *id),
            keys,
            other: self.other.clone(),
            sha256,
        }
    }
}

/// The name a status has in the `status` label and in docs.
fn status_name(status: KeyStatus) -> &'static str {
    status.name()
}

/// The per-key metrics, read from the keyring in service when scraped:
/// nothing is recorded twice, and the status of each key is computed from
/// its schedule at the scrape's instant.
pub struct KeyringCollector {
    shared: SharedKeyring,
    // Filled and collected under the lock (scrapes only): two scrapes at
    // once cannot interleave their resets.
    metrics: Mutex<KeyringMetrics>,
    descs: Vec<Desc>,
}

struct KeyringMetrics {
    minted: IntCounterVec,
    verified: IntCounterVec,
    refusals: IntCounterVec,
    last_verified: IntGaugeVec,
    status: IntGaugeVec,
    minting_key: IntGauge,
    newest_key: IntGauge,
    info: IntGaugeVec,
}

impl std::fmt::Debug for KeyringCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyringCollector").finish_non_exhaustive()
    }
}

impl KeyringCollector {
    /// The collector over the keyring in service.
    pub fn new(shared: SharedKeyring) -> Result<Self, prometheus::Error> {
        let metrics = KeyringMetrics {
            minted: IntCounterVec::new(
                Opts::new(
                    "reqstate_key_minted_total",
                    "Tokens minted (Mint, MintBatch items, Seal) under each key of the \
                     keyring in service, since start",
                ),
                &["key_id"],
            )?,
            verified: IntCounterVec::new(
                Opts::new(
                    "reqstate_key_verified_total",
                    "Tokens accepted (Verify, consumes, VerifyBatch items, Unseal) under \
                     each key of the keyring in service, since start",
                ),
                &["key_id"],
            )?,
            refusals: IntCounterVec::new(
                Opts::new(
                    "reqstate_key_refusals_total",
                    "Tokens refused, by the key id their header names (other: an id not in \
                     the keyring in service, or none readable) and reason (retired_key: a \
                     retired key is still presented)",
                ),
                &["key_id", "reason"],
            )?,
            last_verified: IntGaugeVec::new(
                Opts::new(
                    "reqstate_key_last_verified_timestamp_seconds",
                    "The last instant (unix seconds) this sidecar accepted a token under \
                     each key; absent for a key that has accepted none since start",
                ),
                &["key_id"],
            )?,
            status: IntGaugeVec::new(
                Opts::new(
                    "reqstate_key_status",
                    "What each key does at the scrape's instant, from its status and \
                     schedule: 1 for the status it has (primary: it mints; active: it \
                     verifies only; retired: its tokens are refused), 0 for the others",
                ),
                &["key_id", "status"],
            )?,
            minting_key: IntGauge::new(
                "reqstate_keyring_minting_key_id",
                "The id of the key that mints at the scrape's instant",
            )?,
            newest_key: IntGauge::new(
                "reqstate_keyring_newest_key_id",
                "The highest key id in the keyring in service (the newest key)",
            )?,
            info: IntGaugeVec::new(
                Opts::new(
                    "reqstate_keyring_info",
                    "The keyring in service: sha256 is the SHA-256 of its file's bytes \
                     (lowercase hex; empty for --dev), equal on replicas that loaded the \
                     same file; value 1",
                ),
                &["sha256"],
            )?,
        };
        let descs = [
            metrics.minted.desc(),
            metrics.verified.desc(),
            metrics.refusals.desc(),
            metrics.last_verified.desc(),
            metrics.status.desc(),
            metrics.minting_key.desc(),
            metrics.newest_key.desc(),
            metrics.info.desc(),
        ]
        .into_iter()
        .flatten()
        .cloned()
        .collect();
        Ok(KeyringCollector {
            shared,
            metrics: Mutex::new(metrics),
            descs,
        })
    }
}

impl Collector for KeyringCollector {
    fn desc(&self) -> Vec<&Desc> {
        self.descs.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let current = self.shared.load();
        let keyring = current.codec.keyring();
        let evidence = &current.evidence;
        let now = current.codec.now();
        let m = self
            .metrics
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for vec in [&m.minted, &m.verified, &m.refusals] {
            vec.reset();
        }
        m.last_verified.reset();
        m.status.reset();
        m.info.reset();
        let mut refusal_rows: Vec<(String, &KeyCounters)> = Vec::new();
        for key in keyring.keys() {
            let id = key.id().get();
            let label = id.to_string();
            let counters = evidence.counters(id);
            m.minted
                .with_label_values(&[&label])
                .inc_by(counters.minted());
            m.verified
                .with_label_values(&[&label])
                .inc_by(counters.verified());
            if let Some(at) = counters.last_verified_at() {
                m.last_verified
                    .with_label_values(&[&label])
                    .set(i64::try_from(at).unwrap_or(i64::MAX));
            }
            let status = keyring.status_at(key, now);
            for candidate in [KeyStatus::Primary, KeyStatus::Active, KeyStatus::Retired] {
                m.status
                    .with_label_values(&[&label, status_name(candidate)])
                    .set(i64::from(candidate == status));
            }
            refusal_rows.push((label, counters));
        }
        refusal_rows.push((OTHER.to_owned(), &evidence.other));
        for (label, counters) in &refusal_rows {
            for (i, reason) in Refusal::REASONS.iter().enumerate() {
                m.refusals
                    .with_label_values(&[label.as_str(), reason])
                    .inc_by(counters.refusals[i].load(Ordering::Relaxed));
            }
        }
        m.minting_key
            .set(i64::from(keyring.minting_key(now).id().get()));
        m.newest_key.set(i64::from(evidence.newest_key_id()));
        m.info.with_label_values(&[evidence.sha256()]).set(1);
        let mut families = Vec::new();
        families.extend(m.minted.collect());
        families.extend(m.verified.collect());
        families.extend(m.refusals.collect());
        families.extend(m.last_verified.collect());
        families.extend(m.status.collect());
        families.extend(m.minting_key.collect());
        families.extend(m.newest_key.collect());
        families.extend(m.info.collect());
        families
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWO_KEYS: &str = "[[key]]\nid = 1\nstatus = \"active\"\nsecret = \"AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\"\n[[key]]\nid = 300\nstatus = \"primary\"\nsecret = \"ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8=\"\n";

    #[test]
    fn a_tokens_key_id_is_read_from_its_header() -> Result<(), Box<dyn std::error::Error>> {
        let codec = reqstate::Codec::new(Keyring::from_toml(TWO_KEYS)?);
        let minted = codec.mint(
            reqstate::Binding::with_context_bytes("t", b"{}")?,
            "s",
            &0u8,
            std::time::Duration::from_secs(60),
        )?;
        assert_eq!(token_key_id(&minted.token), Some(300));
        for bad in ["", "AAAA", "!!!!!!!!!!!!", "_____________"] {
            assert_eq!(token_key_id(bad), None, "{bad:?}");
        }
        Ok(())
    }

    /// The file ends at the first NUL of a load's contents: a keyring with
    /// a NUL anywhere does not load, so a NUL can only start a secret's length.
    #[test]
    fn a_keyring_file_never_holds_a_nul() {
        for text in [
            format!("# a\0comment\n{TWO_KEYS}"),
            format!("{TWO_KEYS}\0"),
            TWO_KEYS.replace("id = 1\n", "id = 1 \0\n"),
        ] {
            assert!(Keyring::from_toml(&text).is_err(), "{text:?}");
        }
        let mut contents = TWO_KEYS.as_bytes().to_vec();
        contents.extend_from_slice(&44u64.to_be_bytes());
        contents.extend_from_slice(&[b'A'; 44]);
        assert_eq!(keyring_file_bytes(&contents), TWO_KEYS.as_bytes());
        assert_eq!(keyring_file_bytes(TWO_KEYS.as_bytes()), TWO_KEYS.as_bytes());
    }

    #[test]
    fn counts_survive_a_reload_for_the_keys_that_stay() -> Result<(), Box<dyn std::error::Error>> {
        let book = EvidenceBook::new();
        let first = book.for_keyring(&Keyring::from_toml(TWO_KEYS)?, TWO_KEYS.as_bytes());
        first.minted(300);
        first.verified(1, 1_700_000_000);
        first.verified(1, 1_600_000_000);
        first.verified(77, 1_700_000_001);
        assert_eq!(first.counters(300).minted(), 1);
        assert_eq!(first.counters(1).verified(), 2);
        assert_eq!(first.counters(1).last_verified_at(), Some(1_700_000_000));
        assert_eq!(first.counters(77).verified(), 1, "an unknown id is other");
        assert_eq!(first.newest_key_id(), 300);
        assert_eq!(first.sha256(), sha256_hex(TWO_KEYS.as_bytes()));
        let only_300 = TWO_KEYS
            .split("[[key]]")
            .nth(2)
            .map(|k| format!("[[key]]{k}"))
            .ok_or("two keys")?;
        let second = book.for_keyring(&Keyring::from_toml(&only_300)?, only_300.as_bytes());
        assert_eq!(second.counters(300).minted(), 1, "kept");
        assert_eq!(second.counters(1).verified(), 1, "key 1 left: other");
        assert_ne!(second.sha256(), first.sha256());
        Ok(())
    }
}
