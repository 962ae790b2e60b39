//! Keys, their ids and statuses, and the keyring that looks them up.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

use base64::Engine as _;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use hashbrown::HashMap;
use zeroize::Zeroizing;

use crate::crypto::Material;
use crate::datetime::rfc3339_utc;
use crate::error::{KeyringError, RandomnessUnavailable};
use crate::policy::Policy;
use crate::random::SecureRandom;
use crate::types::{Algorithm, KeyId, KeyStatus, MAX_SECRET_LEN, MIN_SECRET_LEN};

/// Standard base64 without padding, for secrets in keyring files.
const BASE64_STANDARD_UNPADDED: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::RequireNone),
);

/// Standard base64 with complete padding, for secrets in keyring files.
const BASE64_STANDARD_PADDED: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::RequireCanonical),
);

/// The whitespace a secret may have around it (docs/KEYRING.md): space, tab,
/// CR, LF. Not Unicode whitespace, and none inside.
fn is_secret_padding_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\r' | '\n')
}

/// Secret key bytes: zeroized on drop, never shown by `Debug`.
pub struct Secret(Zeroizing<Vec<u8>>);

impl Secret {
    /// Takes ownership of secret bytes. The length is checked when the key is
    /// built ([`MIN_SECRET_LEN`]..=[`MAX_SECRET_LEN`]).
    pub fn new(bytes: Vec<u8>) -> Self {
        Secret(Zeroizing::new(bytes))
    }

    /// Copies secret bytes from a slice.
    pub fn from_slice(bytes: &[u8]) -> Self {
        Secret(Zeroizing::new(bytes.to_vec()))
    }

    /// Generates a fresh 32-byte secret from `random`.
    pub fn generate(random: &dyn SecureRandom) -> Result<Self, RandomnessUnavailable> {
        let mut bytes = Zeroizing::new(alloc::vec![0u8; MIN_SECRET_LEN]);
        random.fill(&mut bytes)?;
        Ok(Secret(bytes))
    }

    /// Decodes a base64 secret as written in keyring files (docs/KEYRING.md,
    /// "How a secret is read"): spaces, tabs, CRs and LFs around it are
    /// ignored; inside it, only the standard alphabet (`A-Z a-z 0-9 + /`);
    /// padding either absent or complete (`=` or `==` up to a multiple of
    /// four characters, never partial); the unused low bits of the last
    /// character zero. Anything else is refused.
    pub fn from_base64(text: &str) -> Result<Self, KeyringError> {
        let trimmed = text.trim_matches(is_secret_padding_space);
        let engine = if trimmed.ends_with('=') {
            &BASE64_STANDARD_PADDED
        } else {
            &BASE64_STANDARD_UNPADDED
        };
        let mut out = Zeroizing::new(Vec::new());
        engine
            .decode_vec(trimmed, &mut out)
            .map_err(|_| KeyringError::new("secret is not valid base64 (standard alphabet)"))?;
        Ok(Secret(out))
    }

    /// Encodes the secret as standard padded base64, for writing a keyring file.
    /// The result holds key material: keep it out of logs.
    pub fn to_base64(&self) -> Zeroizing<String> {
        Zeroizing::new(base64::engine::general_purpose::STANDARD.encode(&*self.0))
    }

    /// The secret's length in bytes.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the secret is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The raw bytes. Key material: keep it out of logs.
    pub fn expose(&self) -> &[u8] {
        &self.0
    }
}

/// The bytes live in a `Zeroizing` buffer, wiped when the secret drops.
impl zeroize::ZeroizeOnDrop for Secret {}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// What a key is, before it is derived into a [`Key`]: the input to [`Keyring::new`].
#[derive(Debug)]
pub struct KeySpec {
    id: KeyId,
    algorithm: Algorithm,
    status: KeyStatus,
    created_at: Option<u64>,
    mint_from: Option<u64>,
    retire_at: Option<u64>,
    line: Option<usize>,
    secret: Secret,
}

impl KeySpec {
    /// A key with this id (unique in its keyring), algorithm, rotation status
    /// and secret (at least [`MIN_SECRET_LEN`] random bytes; checked by
    /// [`Keyring::new`]).
    pub fn new(id: KeyId, algorithm: Algorithm, status: KeyStatus, secret: Secret) -> Self {
        KeySpec {
            id,
            algorithm,
            status,
            created_at: None,
            mint_from: None,
            retire_at: None,
            line: None,
            secret,
        }
    }

    /// When the key was made, in unix seconds. Informational.
    pub fn created_at(mut self, unix_seconds: u64) -> Self {
        self.created_at = Some(unix_seconds);
        self
    }

    /// The instant, in unix seconds, from which this key mints (docs/KEYRING.md,
    /// "Keys on a schedule"): before it, it only verifies. Only for a key
    /// whose status is [`KeyStatus::Active`]; checked by [`Keyring::new`].
    pub fn mint_from(mut self, unix_seconds: u64) -> Self {
        self.mint_from = Some(unix_seconds);
        self
    }

    /// The instant, in unix seconds, from which this key's tokens are refused
    /// as [`Refusal::RetiredKey`](crate::Refusal::RetiredKey). Not for a key
    /// whose status is already [`KeyStatus::Retired`]; checked by
    /// [`Keyring::new`] and, against a policy, by [`Keyring::check_schedule`].
    pub fn retire_at(mut self, unix_seconds: u64) -> Self {
        self.retire_at = Some(unix_seconds);
        self
    }

    /// The line of the keyring file the key comes from, for error messages.
    pub(crate) fn line(mut self, line: usize) -> Self {
        self.line = Some(line);
        self
    }

    /// The key's id.
    pub fn id(&self) -> KeyId {
        self.id
    }
}

/// One key of a keyring, derived and ready to use.
pub struct Key {
    id: KeyId,
    algorithm: Algorithm,
    status: KeyStatus,
    created_at: Option<u64>,
    mint_from: Option<u64>,
    retire_at: Option<u64>,
    line: Option<usize>,
    pub(crate) material: Material,
}

impl Key {
    /// Derives a key from its spec (FORMAT.md §4.1). The secret is consumed
    /// and zeroized.
    fn new(spec: KeySpec) -> Result<Self, KeyringError> {
        let KeySpec {
            id,
            algorithm,
            status,
            created_at,
            mint_from,
            retire_at,
            line,
            secret,
        } = spec;
        if secret.len() < MIN_SECRET_LEN {
            return Err(KeyringError::new(alloc::format!(
                "secret is {} bytes; at least {MIN_SECRET_LEN} random bytes are required",
                secret.len()
            ))
            .at(None, Some(id)));
        }
        if secret.len() > MAX_SECRET_LEN {
            return Err(KeyringError::new(alloc::format!(
                "secret is {} bytes; at most {MAX_SECRET_LEN} are accepted",
                secret.len()
            ))
            .at(None, Some(id)));
        }
        let material = Material::derive(algorithm, secret.expose());
        drop(secret);
        Ok(Key {
            id,
            algorithm,
            status,
            created_at,
            mint_from,
            retire_at,
            line,
            material,
        })
    }

    /// The key's id.
    pub fn id(&self) -> KeyId {
        self.id
    }

    /// The key's algorithm.
    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    /// The key's status as the keyring file writes it. What the key does at
    /// a given instant also depends on its schedule: see
    /// [`Keyring::status_at`].
    pub fn status(&self) -> KeyStatus {
        self.status
    }

    /// When the key was made, in unix seconds, if the keyring says.
    pub fn created_at(&self) -> Option<u64> {
        self.created_at
    }

    /// The instant (unix seconds) from which the key mints, if it is scheduled to.
    pub fn mint_from(&self) -> Option<u64> {
        self.mint_from
    }

    /// The instant (unix seconds) from which the key's tokens are refused, if scheduled.
    pub fn retire_at(&self) -> Option<u64> {
        self.retire_at
    }

    /// Whether the key's tokens are refused at `now` (unix seconds): its
    /// status is retired, or its `retire_at` has come.
    #[inline]
    pub fn is_retired_at(&self, now: u64) -> bool {
        self.status == KeyStatus::Retired || self.retire_at.is_some_and(|at| now >= at)
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Key")
            .field("id", &self.id)
            .field("algorithm", &self.algorithm)
            .field("status", &self.status)
            .field("created_at", &self.created_at)
            .field("mint_from", &self.mint_from)
            .field("retire_at", &self.retire_at)
            .finish_non_exhaustive()
    }
}

/// The keys a codec mints and verifies with: exactly one primary, any number
/// of active and retired keys, looked up by id in O(1), and the schedule
/// that hands minting from one key to the next (docs/KEYRING.md, "Keys on a
/// schedule").
///
/// Which key mints, and which keys' tokens are refused, is a pure function
/// of the keyring and the instant: [`Keyring::minting_key`] and
/// [`Key::is_retired_at`]. A keyring therefore needs no reload when a
/// scheduled key takes over or retires.
///
/// A token names its key by id; an unknown id fails at once, without trying
/// other keys. A keyring is immutable: rotation builds a new one and swaps it in
/// whole, so no caller ever sees a half-loaded ring.
pub struct Keyring {
    keys: HashMap<KeyId, Key>,
    primary: KeyId,
    /// The scheduled keys, `(mint_from, id)` in increasing `mint_from`: the
    /// mint order after the primary.
    schedule: Vec<(u64, KeyId)>,
}

/// One change of a keyring's schedule: a key starts minting, or retires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Transition {
    /// The instant, in unix seconds.
    pub at: u64,
    /// The key it is about.
    pub key_id: KeyId,
    /// What happens to the key at that instant.
    pub kind: TransitionKind,
}

/// What a [`Transition`] does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TransitionKind {
    /// The key becomes the one that mints (its `mint_from`).
    StartsMinting,
    /// The key's tokens are refused from now on (its `retire_at`).
    Retires,
}

impl Keyring {
    /// Builds a keyring from key specs, refusing duplicate ids, anything but
    /// exactly one primary key, and a schedule that leaves an instant with
    /// no key to mint (docs/KEYRING.md, "Keys on a schedule"): a
    /// `mint_from` on a key that is not active, a `retire_at` on a retired
    /// key, two keys starting to mint at the same instant, a minting key
    /// retired before its successor takes over, or a retirement of the last
    /// key in the mint order. Whether retirements leave the tokens already
    /// minted enough time is a question of the policy: see
    /// [`Keyring::check_schedule`].
    pub fn new(specs: impl IntoIterator<Item = KeySpec>) -> Result<Self, KeyringError> {
        let mut keys = HashMap::new();
        let mut primary = None;
        let mut schedule = Vec::new();
        for spec in specs {
            let key = Key::new(spec)?;
            let id = key.id;
            let here = |e: KeyringError| e.at(key.line, Some(id));
            if key.status == KeyStatus::Primary {
                if let Some(other) = primary {
                    return Err(here(KeyringError::new(alloc::format!(
                        "more than one primary key (keys {other} and {id}); exactly one mints"
                    ))));
                }
                primary = Some(id);
            }
            if let Some(at) = key.mint_from {
                if key.status != KeyStatus::Active {
                    return Err(here(KeyringError::new(alloc::format!(
                        "`mint_from` is for a key with status = \"active\" (one that verifies \
                         until it starts minting), not \"{}\"",
                        key.status
                    ))));
                }
                schedule.push((at, id));
            }
            if key.retire_at.is_some() && key.status == KeyStatus::Retired {
                return Err(here(KeyringError::new(
                    "`retire_at` on a key with status = \"retired\": it is retired already; \
                     remove one of the two",
                )));
            }
            if keys.insert(id, key).is_some() {
                return Err(KeyringError::new("duplicate key id").at(None, Some(id)));
            }
        }
        let primary = primary.ok_or_else(|| {
            KeyringError::new("no primary key; exactly one key must have status = \"primary\"")
        })?;
        schedule.sort_unstable();
        let ring = Keyring {
            keys,
            primary,
            schedule,
        };
        ring.check_mint_order()?;
        Ok(ring)
    }

    /// The keys in mint order: the primary, then the scheduled keys by `mint_from`.
    fn mint_order(&self) -> impl Iterator<Item = &Key> {
        core::iter::once(self.primary)
            .chain(self.schedule.iter().map(|&(_, id)| id))
            .map(|id| &self.keys[&id])
    }

    /// The structural rules of the schedule: every instant has a key that
    /// mints and is not retired.
    fn check_mint_order(&self) -> Result<(), KeyringError> {
        for pair in self.schedule.windows(2) {
            let ((at, first), (next_at, second)) = (pair[0], pair[1]);
            if at == next_at {
                let line = self.keys[&first].line;
                return Err(KeyringError::new(alloc::format!(
                    "mint_from {} is also key {first}'s{}: two keys cannot start minting at \
                     the same instant",
                    rfc3339_utc(at),
                    line.map(|l| alloc::format!(" (line {l})"))
                        .unwrap_or_default()
                ))
                .at(self.keys[&second].line, Some(second)));
            }
        }
        let order: Vec<&Key> = self.mint_order().collect();
        for (i, key) in order.iter().enumerate() {
            let Some(retire_at) = key.retire_at else {
                continue;
            };
            let here = |message: String| KeyringError::new(message).at(key.line, Some(key.id));
            match order.get(i + 1) {
                None => {
                    return Err(here(alloc::format!(
                        "retire_at {}: key {} is the last key to mint, so no key would mint \
                         from then; schedule a successor first (reqstate keys rotate)",
                        rfc3339_utc(retire_at),
                        key.id
                    )));
                }
                Some(next) => {
                    // Every key after the primary has a mint_from.
                    let takeover = next.mint_from.unwrap_or(0);
                    if retire_at < takeover {
                        return Err(here(alloc::format!(
                            "retire_at {} comes before key {} takes over (mint_from {}): no key \
                             would mint in between",
                            rfc3339_utc(retire_at),
                            next.id,
                            rfc3339_utc(takeover)
                        )));
                    }
                }
            }
        }
        Ok(())
    }

    /// Checks that no scheduled retirement refuses a token while it is
    /// live under `policy`: a key that mints until its successor takes over
    /// at instant `S` mints tokens accepted until `S + max lifetime + clock
    /// leeway`, so its `retire_at` must be at least that. Loaders call this
    /// with the policy they serve (the sidecar, the command line, the Python
    /// and TypeScript packages); [`Keyring::new`] cannot, as a keyring has
    /// no policy. A key retired by its status is cut off at once, by
    /// design, and is not checked.
    pub fn check_schedule(&self, policy: &Policy) -> Result<(), KeyringError> {
        let live = policy.max_lifetime().saturating_add(policy.clock_leeway());
        let order: Vec<&Key> = self.mint_order().collect();
        for pair in order.windows(2) {
            let (key, next) = (pair[0], pair[1]);
            let (Some(retire_at), Some(takeover)) = (key.retire_at, next.mint_from) else {
                continue;
            };
            let safe = takeover.saturating_add(live);
            if retire_at < safe {
                return Err(KeyringError::new(alloc::format!(
                    "retire_at {} refuses live tokens: key {} mints until key {} takes over at \
                     {}, and its last tokens are accepted until {} (max lifetime {} s + clock \
                     leeway {} s); retire it at {} or later",
                    rfc3339_utc(retire_at),
                    key.id,
                    next.id,
                    rfc3339_utc(takeover),
                    rfc3339_utc(safe),
                    policy.max_lifetime(),
                    policy.clock_leeway(),
                    rfc3339_utc(safe)
                ))
                .at(key.line, Some(key.id)));
            }
        }
        Ok(())
    }

    /// A keyring of one fresh primary key, id 1: for tests and `serve --dev`.
    pub fn ephemeral(
        algorithm: Algorithm,
        random: &dyn SecureRandom,
    ) -> Result<Self, RandomnessUnavailable> {
        let key = Key::new(KeySpec::new(
            KeyId::new(1),
            algorithm,
            KeyStatus::Primary,
            Secret::generate(random)?,
        ))
        .expect("a generated secret has the minimum length");
        let primary = key.id;
        let mut keys = HashMap::new();
        keys.insert(primary, key);
        Ok(Keyring {
            keys,
            primary,
            schedule: Vec::new(),
        })
    }

    /// The key whose status is primary: the one that mints until the first
    /// scheduled key takes over. Which key mints at an instant is
    /// [`Keyring::minting_key`].
    pub fn primary(&self) -> &Key {
        // Invariant of construction: the primary id is always present.
        &self.keys[&self.primary]
    }

    /// The key that mints at `now` (unix seconds): the last key of the mint
    /// order (the primary, then the scheduled keys by `mint_from`) whose
    /// `mint_from` has come. [`Keyring::new`] made sure it is not retired.
    #[inline]
    pub fn minting_key(&self, now: u64) -> &Key {
        let started = self.schedule.partition_point(|&(at, _)| at <= now);
        let id = match started.checked_sub(1) {
            None => self.primary,
            Some(last) => self.schedule[last].1,
        };
        // Invariant of construction: every scheduled id is present.
        &self.keys[&id]
    }

    /// What a key does at `now`: [`KeyStatus::Primary`] if it is the
    /// minting key, [`KeyStatus::Retired`] if its tokens are refused,
    /// [`KeyStatus::Active`] otherwise (it verifies only).
    pub fn status_at(&self, key: &Key, now: u64) -> KeyStatus {
        if key.is_retired_at(now) {
            KeyStatus::Retired
        } else if self.minting_key(now).id == key.id {
            KeyStatus::Primary
        } else {
            KeyStatus::Active
        }
    }

    /// Every scheduled instant of the keyring, in order: keys starting to
    /// mint and keys retiring. Ties list the retirement after the takeover.
    pub fn transitions(&self) -> Vec<Transition> {
        let mut all: Vec<Transition> = self
            .schedule
            .iter()
            .map(|&(at, key_id)| Transition {
                at,
                key_id,
                kind: TransitionKind::StartsMinting,
            })
            .chain(self.keys.values().filter_map(|k| {
                k.retire_at.map(|at| Transition {
                    at,
                    key_id: k.id,
                    kind: TransitionKind::Retires,
                })
            }))
            .collect();
        all.sort_by_key(|t| (t.at, t.kind == TransitionKind::Retires, t.key_id));
        all
    }

    /// The first transition strictly after `now`, if any.
    pub fn next_transition(&self, now: u64) -> Option<Transition> {
        self.transitions().into_iter().find(|t| t.at > now)
    }

    /// The key with this id, whatever its status.
    pub fn get(&self, id: KeyId) -> Option<&Key> {
        self.keys.get(&id)
    }

    /// Every key, ordered by id.
    pub fn keys(&self) -> Vec<&Key> {
        let mut all: Vec<&Key> = self.keys.values().collect();
        all.sort_by_key(|k| k.id);
        all
    }

    /// How many keys the ring holds.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether the ring is empty (never true for a built keyring).
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

impl fmt::Debug for Keyring {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Keyring")
            .field("primary", &self.primary)
            .field("schedule", &self.schedule)
            .field("keys", &self.keys())
            .finish()
    }
}
