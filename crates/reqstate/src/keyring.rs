//! Keys, their ids and statuses, and the keyring that looks them up.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

use hashbrown::HashMap;
use ring::{hkdf, hmac};
use zeroize::Zeroizing;

use crate::error::{Error, KeyringError};

/// Shortest secret accepted for any key, in bytes.
pub const MIN_SECRET_LEN: usize = 32;
/// Longest secret accepted for any key, in bytes.
pub const MAX_SECRET_LEN: usize = 1024;

/// The compact identifier of a key, carried (authenticated) in every token.
///
/// Ids are small unsigned integers so that the common case costs one byte in
/// the token (LEB128: ids below 128 take one byte, below 16384 two).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KeyId(u32);

impl KeyId {
    /// Wraps a numeric key id.
    pub const fn new(id: u32) -> Self {
        KeyId(id)
    }

    /// The numeric value.
    pub const fn get(self) -> u32 {
        self.0
    }
}

impl fmt::Display for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

/// The algorithm of a key. It is fixed by the keyring; a token's algorithm
/// field is only compared against it, never used to choose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Algorithm {
    /// HMAC-SHA256 with a 128-bit tag. Integrity only: the client can read
    /// the state (it is base64url-encoded CBOR), but cannot change it.
    HmacSha256,
    /// XChaCha20-Poly1305 with a random 192-bit nonce. Confidential and
    /// authenticated; the default for new keys.
    XChaCha20Poly1305,
}

impl Algorithm {
    /// The algorithm every new key gets unless told otherwise.
    pub const DEFAULT: Algorithm = Algorithm::XChaCha20Poly1305;

    /// Every algorithm, in identifier order.
    pub const ALL: [Algorithm; 2] = [Algorithm::HmacSha256, Algorithm::XChaCha20Poly1305];

    /// The name used in keyring files and on the wire.
    pub const fn name(self) -> &'static str {
        match self {
            Algorithm::HmacSha256 => "hmac-sha256",
            Algorithm::XChaCha20Poly1305 => "xchacha20-poly1305",
        }
    }

    /// Parses a name as written by [`Algorithm::name`].
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.name() == name)
    }

    /// The 2-bit identifier in a token's header byte.
    pub(crate) const fn id(self) -> u8 {
        match self {
            Algorithm::HmacSha256 => 1,
            Algorithm::XChaCha20Poly1305 => 2,
        }
    }

    pub(crate) const fn from_id(id: u8) -> Option<Self> {
        match id {
            1 => Some(Algorithm::HmacSha256),
            2 => Some(Algorithm::XChaCha20Poly1305),
            _ => None,
        }
    }

    /// Whether the client can read the state of tokens under this algorithm.
    pub const fn is_confidential(self) -> bool {
        matches!(self, Algorithm::XChaCha20Poly1305)
    }

    const fn derivation_label(self) -> &'static [u8] {
        match self {
            Algorithm::HmacSha256 => b"reqstate/v1 hmac-sha256",
            Algorithm::XChaCha20Poly1305 => b"reqstate/v1 xchacha20-poly1305",
        }
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Where a key stands in its rotation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeyStatus {
    /// Mints new tokens and verifies. Exactly one key of a keyring is primary.
    Primary,
    /// Verifies only: a key being rolled out, or the previous primary while
    /// its tokens are still alive.
    Active,
    /// Refuses its tokens with [`Error::RetiredKey`], genuine or not: the way
    /// to cut off a leaked key at once.
    Retired,
}

impl KeyStatus {
    /// The name used in keyring files and on the wire.
    pub const fn name(self) -> &'static str {
        match self {
            KeyStatus::Primary => "primary",
            KeyStatus::Active => "active",
            KeyStatus::Retired => "retired",
        }
    }

    /// Parses a name as written by [`KeyStatus::name`].
    pub fn from_name(name: &str) -> Option<Self> {
        [KeyStatus::Primary, KeyStatus::Active, KeyStatus::Retired]
            .into_iter()
            .find(|s| s.name() == name)
    }
}

impl fmt::Display for KeyStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
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
    pub fn generate(random: &dyn crate::SecureRandom) -> Result<Self, Error> {
        let mut bytes = Zeroizing::new(alloc::vec![0u8; MIN_SECRET_LEN]);
        random.fill(&mut bytes)?;
        Ok(Secret(bytes))
    }

    /// Decodes a base64 secret (standard alphabet, padding optional), as
    /// written in keyring files.
    pub fn from_base64(text: &str) -> Result<Self, KeyringError> {
        use base64::Engine as _;
        let trimmed = text.trim();
        let mut out = Zeroizing::new(Vec::new());
        crate::token::BASE64_STANDARD_LENIENT_PADDING
            .decode_vec(trimmed, &mut out)
            .map_err(|_| KeyringError::new("secret is not valid base64 (standard alphabet)"))?;
        Ok(Secret(out))
    }

    /// Encodes the secret as standard padded base64, for writing a keyring file.
    /// The result holds key material: keep it out of logs.
    pub fn to_base64(&self) -> Zeroizing<String> {
        use base64::Engine as _;
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

/// The working form of a key, derived once when the key is loaded.
pub(crate) enum Material {
    /// ring precomputes the HMAC pads; ring does not zeroize them (see
    /// docs/SECURITY.md), so the raw derived key is wiped here right away.
    Hmac(hmac::Key),
    /// The 256-bit XChaCha20 key, ours to zeroize, and the HMAC key that
    /// hedges its nonces (FORMAT.md §4.2): derived from the same secret under
    /// its own label.
    XChaCha {
        /// The working key `K`.
        key: Zeroizing<[u8; 32]>,
        /// The nonce key `K_n`.
        nonce_key: crate::crypto::NonceKey,
    },
}

/// What a key is, before it is derived into a [`Key`]: the input to [`Keyring::new`].
#[derive(Debug)]
pub struct KeySpec {
    /// The key's id, unique in its keyring.
    pub id: KeyId,
    /// The algorithm tokens under this key use.
    pub algorithm: Algorithm,
    /// Where the key stands in its rotation.
    pub status: KeyStatus,
    /// When the key was made, in unix seconds, if known. Informational.
    pub created_at: Option<u64>,
    /// The secret, at least [`MIN_SECRET_LEN`] random bytes.
    pub secret: Secret,
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
    /// Derives a key from its spec. The secret is consumed and zeroized.
    ///
    /// The working key is `HKDF-SHA256(salt = "reqstate/v1 keyring",
    /// ikm = secret, info = "reqstate/v1 <algorithm name>", L = 32)`, so the
    /// same secret configured under two algorithms yields unrelated keys.
    pub fn new(spec: KeySpec) -> Result<Self, Error> {
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
            .at(None, Some(id))
            .into());
        }
        if secret.len() > MAX_SECRET_LEN {
            return Err(KeyringError::new(alloc::format!(
                "secret is {} bytes; at most {MAX_SECRET_LEN} are accepted",
                secret.len()
            ))
            .at(None, Some(id))
            .into());
        }
        let prk =
            hkdf::Salt::new(hkdf::HKDF_SHA256, b"reqstate/v1 keyring").extract(secret.expose());
        drop(secret);
        let expand = |label: &[u8]| -> Result<Zeroizing<[u8; 32]>, Error> {
            let mut derived = Zeroizing::new([0u8; 32]);
            prk.expand(&[label], Len32)
                .and_then(|okm| okm.fill(&mut derived[..]))
                .map_err(|_| Error::InvalidArgument("key derivation failed"))?;
            Ok(derived)
        };
        let derived = expand(algorithm.derivation_label())?;
        let material = match algorithm {
            // `derived` is wiped when it drops at the end of each arm.
            Algorithm::HmacSha256 => {
                Material::Hmac(hmac::Key::new(hmac::HMAC_SHA256, &derived[..]))
            }
            Algorithm::XChaCha20Poly1305 => {
                let nonce_key = expand(NONCE_KEY_LABEL)?;
                Material::XChaCha {
                    key: derived,
                    nonce_key: crate::crypto::nonce_key(&nonce_key),
                }
            }
        };
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

/// The HKDF info of an XChaCha20-Poly1305 key's nonce key `K_n` (FORMAT.md §4.2).
const NONCE_KEY_LABEL: &[u8] = b"reqstate/v1 xchacha20-poly1305 nonce";

struct Len32;

impl hkdf::KeyType for Len32 {
    fn len(&self) -> usize {
        32
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
    pub fn new(specs: impl IntoIterator<Item = KeySpec>) -> Result<Self, Error> {
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
                    .at(None, Some(id))
                    .into());
                }
                primary = Some(id);
            }
            if keys.insert(id, key).is_some() {
                return Err(KeyringError::new("duplicate key id")
                    .at(None, Some(id))
                    .into());
            }
        }
        let primary = primary.ok_or_else(|| {
            KeyringError::new("no primary key; exactly one key must have status = \"primary\"")
        })?;
        Ok(Keyring { keys, primary })
    }

    /// A keyring of one fresh primary key: for tests and `serve --dev`.
    pub fn ephemeral(
        algorithm: Algorithm,
        random: &dyn crate::SecureRandom,
    ) -> Result<Self, Error> {
        Keyring::new([KeySpec {
            id: KeyId::new(1),
            algorithm,
            status: KeyStatus::Primary,
            created_at: None,
            secret: Secret::generate(random)?,
        }])
    }

    /// Parses a keyring from TOML (format: `docs/KEYRING.md`).
    ///
    /// Secrets may be inline (`secret`, base64). With the `std` feature they may
    /// also be read from a file (`secret_file`) or an environment variable
    /// (`secret_env`). Errors name the line and key they are about.
    pub fn from_toml(source: &str) -> Result<Self, Error> {
        crate::keyring_file::parse(source, None)
    }

    /// [`Keyring::from_toml`] for a keyring file in `dir`: a relative
    /// `secret_file` is resolved against `dir` (the keyring's own directory),
    /// so a keyring and its secrets can move together, as in a Kubernetes
    /// Secret volume.
    #[cfg(feature = "std")]
    #[cfg_attr(docsrs, doc(cfg(feature = "std")))]
    pub fn from_toml_in_dir(source: &str, dir: &std::path::Path) -> Result<Self, Error> {
        crate::keyring_file::parse(source, Some(dir))
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

/// Names for keyring fields, used by the TOML loader and the CLI that writes files.
pub(crate) fn parse_status(name: &str) -> Result<KeyStatus, String> {
    KeyStatus::from_name(name).ok_or_else(|| {
        alloc::format!("unknown status {name:?}; expected \"primary\", \"active\" or \"retired\"")
    })
}

pub(crate) fn parse_algorithm(name: &str) -> Result<Algorithm, String> {
    Algorithm::from_name(name).ok_or_else(|| {
        alloc::format!(
            "unknown algorithm {name:?}; expected \"xchacha20-poly1305\" or \"hmac-sha256\""
        )
    })
}
