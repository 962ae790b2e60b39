//! The small types every other module shares: key ids, algorithms, key
//! statuses, token kinds, and the format's fixed sizes and limits. This module
//! imports nothing from the crate; everything else builds on it.

use core::fmt;

/// The token format version this library mints and verifies.
pub const VERSION: u8 = 1;
/// Length of every authentication tag (HMAC-SHA256 truncated, or Poly1305), bytes.
pub const TAG_LEN: usize = 16;
/// Length of the XChaCha20-Poly1305 nonce, bytes.
pub const XNONCE_LEN: usize = 24;
/// Longest key id encoding (LEB128 of a u32).
pub(crate) const MAX_KEY_ID_LEN: usize = 5;
/// Deepest nesting of arrays, maps and tags accepted in a state.
pub const MAX_STATE_DEPTH: usize = 16;
/// Longest tool name accepted, in bytes.
pub const MAX_TOOL_LEN: usize = 256;
/// Longest step name accepted, in bytes.
pub const MAX_STEP_LEN: usize = 256;
/// Longest context (or sealed payload's associated data) accepted, in bytes.
/// Context is hashed, not stored; bind a digest (see [`crate::call_context`])
/// rather than large values.
pub const MAX_CONTEXT_LEN: usize = 64 * 1024;
/// Length of a single-use token's random id, in bytes (FORMAT.md §5.1).
pub const TOKEN_ID_LEN: usize = 16;
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
    /// Refuses its tokens with [`Refusal::RetiredKey`](crate::Refusal::RetiredKey), genuine or not: the way
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

/// What a token carries: claims for [`crate::Codec::verify`], or an opaque
/// payload for [`crate::Codec::unseal`]. The kind is authenticated, so one can
/// never be accepted as the other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TokenKind {
    /// A requestState token: iat, lifetime, step and state.
    State,
    /// A sealed payload whose claims the caller stamps and checks itself.
    Sealed,
    /// A single-use requestState token (FORMAT.md §5.1): a state token with
    /// a random token id, accepted once, by [`crate::Codec::consume`].
    SingleUse,
}

impl TokenKind {
    /// The 2-bit identifier in a token's header byte.
    pub(crate) const fn id(self) -> u8 {
        match self {
            TokenKind::State => 0,
            TokenKind::Sealed => 1,
            TokenKind::SingleUse => 2,
        }
    }

    /// The name used in errors and by `reqstate inspect`.
    pub const fn name(self) -> &'static str {
        match self {
            TokenKind::State => "state",
            TokenKind::Sealed => "sealed",
            TokenKind::SingleUse => "single-use",
        }
    }
}

impl fmt::Display for TokenKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
