//! The one error type of the crate, shared by minting, verifying and keyring loading.

use alloc::string::String;
use core::fmt;

use crate::keyring::{Algorithm, KeyId};
use crate::token::TokenKind;

/// Everything that can go wrong when minting, verifying or loading keys.
///
/// Verification errors are ordered as the checks run (see `docs/FORMAT.md`):
/// a token fails with the first check it does not pass. [`Error::reason`] gives
/// each variant a stable snake_case name for logs, metrics and the sidecar's
/// wire enum.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The token is longer than the policy allows; nothing of it was decoded.
    TooLarge {
        /// Length of the token in characters.
        len: usize,
        /// The policy's maximum.
        max: usize,
    },
    /// The token is not well-formed: not base64url, too short, a bad key id
    /// encoding, or (after authentication) claims that do not follow the format.
    Malformed(&'static str),
    /// The token's version is not one this library verifies.
    UnsupportedVersion(u8),
    /// The token names an algorithm identifier this library does not know.
    UnsupportedAlgorithm(u8),
    /// The token was made for the other operation: a sealed payload handed to
    /// `verify`, or a state token handed to `unseal`.
    WrongKind {
        /// What the caller asked for.
        expected: TokenKind,
        /// What the token is.
        found: TokenKind,
    },
    /// No key with the token's key id is in the keyring. No other key is tried.
    UnknownKey(KeyId),
    /// The token's key is retired: tokens under it are refused even if genuine.
    RetiredKey(KeyId),
    /// The token's algorithm differs from the algorithm of the key with its id.
    /// The key decides; the token's field is only checked against it.
    AlgorithmMismatch {
        /// The key id both refer to.
        key_id: KeyId,
        /// The algorithm the keyring holds for that id.
        key: Algorithm,
        /// The algorithm the token claims.
        token: Algorithm,
    },
    /// The tag did not verify. The token was altered, or minted under another
    /// key, for another tool, or with other context bytes. These causes are
    /// deliberately indistinguishable: the tool and context are bound, not
    /// stored (see `docs/FORMAT.md`, "Why the tool is not stored").
    AuthenticationFailed,
    /// The token's expiry (plus the clock leeway) has passed.
    Expired {
        /// When the token expired, in unix seconds.
        expires_at: u64,
        /// The verifier's clock, in unix seconds.
        now: u64,
    },
    /// The token's issue time is further in the future than the clock leeway allows.
    NotYetValid {
        /// The token's issue time, in unix seconds.
        issued_at: u64,
        /// The verifier's clock, in unix seconds.
        now: u64,
    },
    /// The token is genuine but was minted for another step of the flow.
    WrongStep {
        /// The step the caller expected.
        expected: String,
        /// The step the token carries.
        found: String,
    },
    /// A lifetime (the TTL asked for at mint, or the one a token carries) is
    /// longer than the policy allows.
    LifetimeTooLong {
        /// The lifetime, in seconds.
        lifetime: u64,
        /// The policy's maximum, in seconds.
        max: u64,
    },
    /// The state could not be encoded as CBOR when minting.
    StateEncoding(String),
    /// The token verified, but its state does not decode into the requested type.
    StateDecoding(String),
    /// An argument to mint, verify or seal is out of range (empty tool, step too
    /// long, zero TTL, context too large, a policy value out of bounds …).
    InvalidArgument(&'static str),
    /// The random source failed; nothing was minted.
    RandomnessUnavailable,
    /// The keyring is invalid; nothing of it was loaded.
    InvalidKeyring(KeyringError),
}

/// Why a keyring was refused, with where in the source it happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyringError {
    /// 1-based line in the TOML source, when the error has one.
    pub line: Option<usize>,
    /// The key the error is about, when it is about one key.
    pub key_id: Option<KeyId>,
    /// What is wrong, for a person to read. Never contains key material.
    pub message: String,
}

impl KeyringError {
    pub(crate) fn new(message: impl Into<String>) -> Self {
        Self {
            line: None,
            key_id: None,
            message: message.into(),
        }
    }

    pub(crate) fn at(mut self, line: Option<usize>, key_id: Option<KeyId>) -> Self {
        self.line = self.line.or(line);
        self.key_id = self.key_id.or(key_id);
        self
    }
}

impl fmt::Display for KeyringError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(line) = self.line {
            write!(f, "line {line}: ")?;
        }
        if let Some(id) = self.key_id {
            write!(f, "key {id}: ")?;
        }
        f.write_str(&self.message)
    }
}

impl From<KeyringError> for Error {
    fn from(e: KeyringError) -> Self {
        Error::InvalidKeyring(e)
    }
}

impl Error {
    /// A stable snake_case name for the variant, for logs, metrics labels and
    /// wire protocols. Never contains token contents or key material.
    pub fn reason(&self) -> &'static str {
        match self {
            Error::TooLarge { .. } => "too_large",
            Error::Malformed(_) => "malformed",
            Error::UnsupportedVersion(_) => "unsupported_version",
            Error::UnsupportedAlgorithm(_) => "unsupported_algorithm",
            Error::WrongKind { .. } => "wrong_kind",
            Error::UnknownKey(_) => "unknown_key",
            Error::RetiredKey(_) => "retired_key",
            Error::AlgorithmMismatch { .. } => "algorithm_mismatch",
            Error::AuthenticationFailed => "authentication_failed",
            Error::Expired { .. } => "expired",
            Error::NotYetValid { .. } => "not_yet_valid",
            Error::WrongStep { .. } => "wrong_step",
            Error::LifetimeTooLong { .. } => "lifetime_too_long",
            Error::StateEncoding(_) => "state_encoding",
            Error::StateDecoding(_) => "state_decoding",
            Error::InvalidArgument(_) => "invalid_argument",
            Error::RandomnessUnavailable => "randomness_unavailable",
            Error::InvalidKeyring(_) => "invalid_keyring",
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::TooLarge { len, max } => {
                write!(f, "token is {len} characters; the limit is {max}")
            }
            Error::Malformed(what) => write!(f, "malformed token: {what}"),
            Error::UnsupportedVersion(v) => write!(f, "unsupported token version {v}"),
            Error::UnsupportedAlgorithm(a) => write!(f, "unsupported algorithm identifier {a}"),
            Error::WrongKind { expected, found } => {
                write!(f, "expected a {expected} token, got a {found} token")
            }
            Error::UnknownKey(id) => write!(f, "no key with id {id} in the keyring"),
            Error::RetiredKey(id) => write!(f, "key {id} is retired; its tokens are refused"),
            Error::AlgorithmMismatch { key_id, key, token } => write!(
                f,
                "key {key_id} is {key}, but the token claims {token}; the key decides"
            ),
            Error::AuthenticationFailed => f.write_str(
                "authentication failed: the token was altered, or minted under another key, \
                 for another tool, or with other context",
            ),
            Error::Expired { expires_at, now } => {
                write!(f, "token expired at {expires_at} (now {now})")
            }
            Error::NotYetValid { issued_at, now } => write!(
                f,
                "token issued at {issued_at}, beyond the allowed clock skew (now {now})"
            ),
            Error::WrongStep { expected, found } => {
                write!(f, "token is for step {found:?}, expected {expected:?}")
            }
            Error::LifetimeTooLong { lifetime, max } => {
                write!(f, "lifetime of {lifetime} s exceeds the maximum of {max} s")
            }
            Error::StateEncoding(e) => write!(f, "state could not be encoded as CBOR: {e}"),
            Error::StateDecoding(e) => {
                write!(f, "state does not decode into the requested type: {e}")
            }
            Error::InvalidArgument(what) => write!(f, "invalid argument: {what}"),
            Error::RandomnessUnavailable => f.write_str("the random source failed"),
            Error::InvalidKeyring(e) => write!(f, "invalid keyring: {e}"),
        }
    }
}

impl core::error::Error for Error {}
