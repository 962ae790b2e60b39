//! Keys, their ids and statuses, and the keyring that looks them up.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

use base64::Engine as _;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use hashbrown::HashMap;
use zeroize::Zeroizing;

use crate::crypto::Material;
use crate::error::{KeyringError, RandomnessUnavailable};
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
            secret,
        }
    }

    /// When the key was made, in unix seconds. Informational.
    pub fn created_at(mut self, unix_seconds: u64) -> Self {
        self.created_at = Some(unix_seconds);
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

    /// The key's status.
    pub fn status(&self) -> KeyStatus {
        self.status
    }

    /// When the key was made, in unix seconds, if the keyring says.
    pub fn created_at(&self) -> Option<u64> {
        self.created_at
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Key")
            .field("id", &self.id)
            .field("algorithm", &self.algorithm)
            .field("status", &self.status)
            .field("created_at", &self.created_at)
            .finish_non_exhaustive()
    }
}

/// The keys a codec mints and verifies with: exactly one primary, any number
/// of active and retired keys, looked up by id in O(1).
///
/// A token names its key by id; an unknown id fails at once, without trying
/// other keys. A keyring is immutable: rotation builds a new one and swaps it in
/// whole, so no caller ever sees a half-loaded ring.
pub struct Keyring {
    keys: HashMap<KeyId, Key>,
    primary: KeyId,
}

impl Keyring {
    /// Builds a keyring from key specs, refusing duplicate ids and anything
    /// but exactly one primary key.
    pub fn new(specs: impl IntoIterator<Item = KeySpec>) -> Result<Self, KeyringError> {
        let mut keys = HashMap::new();
        let mut primary = None;
        for spec in specs {
            let key = Key::new(spec)?;
            let id = key.id;
            if key.status == KeyStatus::Primary {
                if let Some(other) = primary {
                    return Err(KeyringError::new(alloc::format!(
                        "more than one primary key (keys {other} and {id}); exactly one mints"
                    ))
                    .at(None, Some(id)));
                }
                primary = Some(id);
            }
            if keys.insert(id, key).is_some() {
                return Err(KeyringError::new("duplicate key id").at(None, Some(id)));
            }
        }
        let primary = primary.ok_or_else(|| {
            KeyringError::new("no primary key; exactly one key must have status = \"primary\"")
        })?;
        Ok(Keyring { keys, primary })
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
        Ok(Keyring { keys, primary })
    }

    /// The key that mints.
    pub fn primary(&self) -> &Key {
        // Invariant of construction: the primary id is always present.
        &self.keys[&self.primary]
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
            .field("keys", &self.keys())
            .finish()
    }
}
