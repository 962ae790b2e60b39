//! The errors of the crate, one type per kind of failure:
//!
//! - [`Refusal`]: a token was refused. What [`crate::Codec::verify`] and
//!   [`crate::Codec::unseal`] return; the client's fault (or an attacker's),
//!   to be answered with an error to the client (MCP: `-32602`).
//! - [`StoreError`]: the spent-token store could not record a single-use
//!   token (full, or not answering). Not the token's fault: the server's, to
//!   be answered as a server error the client may retry, never as "invalid".
//! - [`ConsumeError`]: what [`crate::Codec::consume`] returns, either of the
//!   two above.
//! - [`InvalidArgument`]: the caller passed something out of range (an empty
//!   tool name, a policy value out of bounds, arguments that are not JSON).
//!   The server's fault, caught where the value is built.
//! - [`MintError`]: minting failed.
//! - [`KeyringError`]: a keyring was refused; nothing of it was loaded.
//! - [`RandomnessUnavailable`]: the random source failed.
//!
//! [`Error`] holds any of them, for callers that propagate with `?` across
//! operations. Every type has `reason()`: a stable snake_case name
//! (docs/FORMAT.md §8, docs/CLI.md, the sidecar's wire enum).

use alloc::string::String;
use core::fmt;

use crate::types::{Algorithm, KeyId, TokenKind};

/// Why a token was refused.
///
/// Variants are ordered as the checks run (docs/FORMAT.md §8): a token fails
/// with the first check it does not pass. Nothing here ever contains key
/// material; the step names in [`Refusal::WrongStep`] come from the caller
/// and from an authenticated token.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Refusal {
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
    /// The token is single-use and was handed to `verify`: a single-use
    /// token is accepted only by [`crate::Codec::consume`] (or
    /// [`crate::Codec::verify_single_use`]), which records it as spent.
    SingleUse,
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
    /// stored (docs/FORMAT.md §4; the reasons: [`crate::design`], "The tool
    /// and context are bound, not stored").
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
    /// The lifetime the token carries is longer than the policy allows.
    LifetimeTooLong {
        /// The lifetime, in seconds.
        lifetime: u64,
        /// The policy's maximum, in seconds.
        max: u64,
    },
    /// The token verified, but its state does not decode into the requested type.
    StateDecoding(String),
    /// The single-use token was already consumed.
    Replayed,
}

impl Refusal {
    /// Every refusal's [`Refusal::reason`], in the order of the checks.
    pub const REASONS: [&'static str; 16] = [
        "too_large",
        "malformed",
        "unsupported_version",
        "unsupported_algorithm",
        "wrong_kind",
        "single_use",
        "unknown_key",
        "retired_key",
        "algorithm_mismatch",
        "authentication_failed",
        "expired",
        "not_yet_valid",
        "wrong_step",
        "lifetime_too_long",
        "state_decoding",
        "replayed",
    ];

    /// A stable snake_case name for the variant, for logs, metrics labels and
    /// wire protocols. Never contains token contents or key material.
    pub fn reason(&self) -> &'static str {
        match self {
            Refusal::TooLarge { .. } => "too_large",
            Refusal::Malformed(_) => "malformed",
            Refusal::UnsupportedVersion(_) => "unsupported_version",
            Refusal::UnsupportedAlgorithm(_) => "unsupported_algorithm",
            Refusal::WrongKind { .. } => "wrong_kind",
            Refusal::SingleUse => "single_use",
            Refusal::UnknownKey(_) => "unknown_key",
            Refusal::RetiredKey(_) => "retired_key",
            Refusal::AlgorithmMismatch { .. } => "algorithm_mismatch",
            Refusal::AuthenticationFailed => "authentication_failed",
            Refusal::Expired { .. } => "expired",
            Refusal::NotYetValid { .. } => "not_yet_valid",
            Refusal::WrongStep { .. } => "wrong_step",
            Refusal::LifetimeTooLong { .. } => "lifetime_too_long",
            Refusal::StateDecoding(_) => "state_decoding",
            Refusal::Replayed => "replayed",
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::TooLarge { len, max } => {
                write!(f, "token is {len} characters; the limit is {max}")
            }
            Refusal::Malformed(what) => write!(f, "malformed token: {what}"),
            Refusal::UnsupportedVersion(v) => write!(f, "unsupported token version {v}"),
            Refusal::UnsupportedAlgorithm(a) => {
                write!(f, "unsupported algorithm identifier {a}")
            }
            Refusal::WrongKind { expected, found } => {
                write!(f, "expected a {expected} token, got a {found} token")
            }
            Refusal::SingleUse => f.write_str(
                "the token is single-use: it must be consumed (recorded as spent), \
                 not merely verified",
            ),
            Refusal::UnknownKey(id) => write!(f, "no key with id {id} in the keyring"),
            Refusal::RetiredKey(id) => write!(f, "key {id} is retired; its tokens are refused"),
            Refusal::AlgorithmMismatch { key_id, key, token } => write!(
                f,
                "key {key_id} is {key}, but the token claims {token}; the key decides"
            ),
            Refusal::AuthenticationFailed => f.write_str(
                "authentication failed: the token was altered, or minted under another key, \
                 for another tool, or with other context",
            ),
            Refusal::Expired { expires_at, now } => {
                write!(f, "token expired at {expires_at} (now {now})")
            }
            Refusal::NotYetValid { issued_at, now } => write!(
                f,
                "token issued at {issued_at}, beyond the allowed clock skew (now {now})"
            ),
            Refusal::WrongStep { expected, found } => {
                write!(f, "token is for step {found:?}, expected {expected:?}")
            }
            Refusal::LifetimeTooLong { lifetime, max } => write!(
                f,
                "token lifetime of {lifetime} s exceeds the maximum of {max} s"
            ),
            Refusal::StateDecoding(e) => {
                write!(f, "state does not decode into the requested type: {e}")
            }
            Refusal::Replayed => f.write_str("the single-use token was already consumed"),
        }
    }
}

impl core::error::Error for Refusal {}

/// Why a spent-token store did not record a single-use token. The token is
/// not accepted (consumption fails closed), but it was not refused either:
/// the same token may succeed once the store answers again, so a server
/// answers this as its own failure (MCP: an internal error, retry later),
/// never as an invalid token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreError {
    /// The store is at its capacity and every record in it is still live:
    /// it refuses rather than forget one (which would re-open replay).
    Full,
    /// The store could not be reached, or did not answer in time.
    Unavailable,
}

impl StoreError {
    /// Every store error's [`StoreError::reason`].
    pub const REASONS: [&'static str; 2] = ["replay_store_full", "replay_store_unavailable"];

    /// `"replay_store_full"` or `"replay_store_unavailable"`.
    pub fn reason(&self) -> &'static str {
        match self {
            StoreError::Full => "replay_store_full",
            StoreError::Unavailable => "replay_store_unavailable",
        }
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            StoreError::Full => {
                "the spent-token store is full of live records; the token was not recorded \
                 and not accepted"
            }
            StoreError::Unavailable => {
                "the spent-token store did not answer; the token was not recorded and not accepted"
            }
        })
    }
}

impl core::error::Error for StoreError {}

/// Why [`crate::Codec::consume`] (or [`crate::Redemption::redeem`]) gave no
/// state: the token was refused, or the store could not record it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConsumeError {
    /// The token was refused (including [`Refusal::Replayed`]): the
    /// client's fault, or an attacker's.
    Refused(Refusal),
    /// The token passed every check but the store could not record it: the
    /// server's failure. The token was not accepted and may be retried.
    Store(StoreError),
}

impl ConsumeError {
    /// The reason of the error it holds.
    pub fn reason(&self) -> &'static str {
        match self {
            ConsumeError::Refused(e) => e.reason(),
            ConsumeError::Store(e) => e.reason(),
        }
    }

    /// The refusal, if the token was refused.
    pub fn refusal(&self) -> Option<&Refusal> {
        match self {
            ConsumeError::Refused(e) => Some(e),
            ConsumeError::Store(_) => None,
        }
    }
}

impl From<Refusal> for ConsumeError {
    fn from(e: Refusal) -> Self {
        ConsumeError::Refused(e)
    }
}

impl From<StoreError> for ConsumeError {
    fn from(e: StoreError) -> Self {
        ConsumeError::Store(e)
    }
}

impl fmt::Display for ConsumeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConsumeError::Refused(e) => fmt::Display::fmt(e, f),
            ConsumeError::Store(e) => fmt::Display::fmt(e, f),
        }
    }
}

impl core::error::Error for ConsumeError {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            ConsumeError::Refused(e) => Some(e),
            ConsumeError::Store(e) => Some(e),
        }
    }
}

/// An argument out of range: the caller's mistake, not the token's. The
/// message says which argument and what is allowed; it never repeats the value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InvalidArgument(pub(crate) &'static str);

impl InvalidArgument {
    /// An argument error with this message, for callers that check their
    /// own arguments alongside the crate's (the message should name the
    /// argument and what is allowed, never repeat the value).
    pub const fn new(message: &'static str) -> Self {
        InvalidArgument(message)
    }

    /// What is wrong, for a person to read.
    pub fn message(&self) -> &'static str {
        self.0
    }

    /// Always `"invalid_argument"`.
    pub fn reason(&self) -> &'static str {
        "invalid_argument"
    }
}

impl fmt::Display for InvalidArgument {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid argument: {}", self.0)
    }
}

impl core::error::Error for InvalidArgument {}

/// The random source failed; nothing was minted or generated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RandomnessUnavailable;

impl RandomnessUnavailable {
    /// Always `"randomness_unavailable"`.
    pub fn reason(&self) -> &'static str {
        "randomness_unavailable"
    }
}

impl fmt::Display for RandomnessUnavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the random source failed")
    }
}

impl core::error::Error for RandomnessUnavailable {}

/// Why [`crate::Codec::mint`] or [`crate::Codec::seal`] made no token.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum MintError {
    /// An argument is out of range: an empty or overlong step, a zero ttl, a
    /// ttl that takes the expiry past 2^64 − 1.
    InvalidArgument(InvalidArgument),
    /// The ttl is longer than the policy allows.
    LifetimeTooLong {
        /// The lifetime asked for, in seconds.
        lifetime: u64,
        /// The policy's maximum, in seconds.
        max: u64,
    },
    /// The state could not be encoded as CBOR, or its encoding is not one
    /// well-formed item nested at most [`crate::MAX_STATE_DEPTH`] deep.
    StateEncoding(String),
    /// The token would be longer than the policy's maximum.
    TooLarge {
        /// The token's length in characters.
        len: usize,
        /// The policy's maximum.
        max: usize,
    },
    /// The random source failed.
    RandomnessUnavailable,
}

impl MintError {
    /// A stable snake_case name for the variant (the same names as
    /// [`Refusal::reason`] where they mean the same).
    pub fn reason(&self) -> &'static str {
        match self {
            MintError::InvalidArgument(_) => "invalid_argument",
            MintError::LifetimeTooLong { .. } => "lifetime_too_long",
            MintError::StateEncoding(_) => "state_encoding",
            MintError::TooLarge { .. } => "too_large",
            MintError::RandomnessUnavailable => "randomness_unavailable",
        }
    }
}

impl fmt::Display for MintError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MintError::InvalidArgument(e) => fmt::Display::fmt(e, f),
            MintError::LifetimeTooLong { lifetime, max } => write!(
                f,
                "a lifetime of {lifetime} s exceeds the maximum of {max} s"
            ),
            MintError::StateEncoding(e) => write!(f, "state could not be encoded as CBOR: {e}"),
            MintError::TooLarge { len, max } => {
                write!(f, "the token would be {len} characters; the limit is {max}")
            }
            MintError::RandomnessUnavailable => fmt::Display::fmt(&RandomnessUnavailable, f),
        }
    }
}

impl core::error::Error for MintError {}

impl From<InvalidArgument> for MintError {
    fn from(e: InvalidArgument) -> Self {
        MintError::InvalidArgument(e)
    }
}

impl From<RandomnessUnavailable> for MintError {
    fn from(_: RandomnessUnavailable) -> Self {
        MintError::RandomnessUnavailable
    }
}

/// Why a keyring was refused, with where in the source it happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyringError {
    line: Option<usize>,
    key_id: Option<KeyId>,
    message: String,
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

    /// 1-based line in the TOML source, when the error has one.
    pub fn line(&self) -> Option<usize> {
        self.line
    }

    /// The key the error is about, when it is about one key.
    pub fn key_id(&self) -> Option<KeyId> {
        self.key_id
    }

    /// What is wrong, for a person to read. Never contains key material, nor
    /// any value from the source.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Always `"invalid_keyring"`.
    pub fn reason(&self) -> &'static str {
        "invalid_keyring"
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

impl core::error::Error for KeyringError {}

/// Any error of the crate, for callers that propagate several operations'
/// errors with `?`. Each operation returns its own, narrower type.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// A token was refused.
    Refused(Refusal),
    /// The spent-token store could not record a single-use token.
    Store(StoreError),
    /// An argument was out of range.
    InvalidArgument(InvalidArgument),
    /// Minting failed for a reason other than an argument or randomness.
    Mint(MintError),
    /// A keyring was refused.
    InvalidKeyring(KeyringError),
    /// The random source failed.
    RandomnessUnavailable,
}

impl Error {
    /// The reason of the error it holds.
    pub fn reason(&self) -> &'static str {
        match self {
            Error::Refused(e) => e.reason(),
            Error::Store(e) => e.reason(),
            Error::InvalidArgument(e) => e.reason(),
            Error::Mint(e) => e.reason(),
            Error::InvalidKeyring(e) => e.reason(),
            Error::RandomnessUnavailable => RandomnessUnavailable.reason(),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Refused(e) => fmt::Display::fmt(e, f),
            Error::Store(e) => fmt::Display::fmt(e, f),
            Error::InvalidArgument(e) => fmt::Display::fmt(e, f),
            Error::Mint(e) => fmt::Display::fmt(e, f),
            Error::InvalidKeyring(e) => write!(f, "invalid keyring: {e}"),
            Error::RandomnessUnavailable => fmt::Display::fmt(&RandomnessUnavailable, f),
        }
    }
}

impl core::error::Error for Error {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            Error::Refused(e) => Some(e),
            Error::Store(e) => Some(e),
            Error::InvalidArgument(e) => Some(e),
            Error::Mint(e) => Some(e),
            Error::InvalidKeyring(e) => Some(e),
            Error::RandomnessUnavailable => None,
        }
    }
}

impl From<Refusal> for Error {
    fn from(e: Refusal) -> Self {
        Error::Refused(e)
    }
}

impl From<StoreError> for Error {
    fn from(e: StoreError) -> Self {
        Error::Store(e)
    }
}

impl From<ConsumeError> for Error {
    fn from(e: ConsumeError) -> Self {
        match e {
            ConsumeError::Refused(e) => Error::Refused(e),
            ConsumeError::Store(e) => Error::Store(e),
        }
    }
}

impl From<InvalidArgument> for Error {
    fn from(e: InvalidArgument) -> Self {
        Error::InvalidArgument(e)
    }
}

/// Mint errors that have their own [`Error`] variant land there.
impl From<MintError> for Error {
    fn from(e: MintError) -> Self {
        match e {
            MintError::InvalidArgument(e) => Error::InvalidArgument(e),
            MintError::RandomnessUnavailable => Error::RandomnessUnavailable,
            other => Error::Mint(other),
        }
    }
}

impl From<KeyringError> for Error {
    fn from(e: KeyringError) -> Self {
        Error::InvalidKeyring(e)
    }
}

impl From<RandomnessUnavailable> for Error {
    fn from(_: RandomnessUnavailable) -> Self {
        Error::RandomnessUnavailable
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reason_table_lists_every_refusal_in_check_order() {
        let samples = [
            Refusal::TooLarge { len: 2, max: 1 },
            Refusal::Malformed("x"),
            Refusal::UnsupportedVersion(2),
            Refusal::UnsupportedAlgorithm(3),
            Refusal::WrongKind {
                expected: TokenKind::State,
                found: TokenKind::Sealed,
            },
            Refusal::SingleUse,
            Refusal::UnknownKey(KeyId::new(1)),
            Refusal::RetiredKey(KeyId::new(1)),
            Refusal::AlgorithmMismatch {
                key_id: KeyId::new(1),
                key: Algorithm::HmacSha256,
                token: Algorithm::XChaCha20Poly1305,
            },
            Refusal::AuthenticationFailed,
            Refusal::Expired {
                expires_at: 1,
                now: 2,
            },
            Refusal::NotYetValid {
                issued_at: 9,
                now: 2,
            },
            Refusal::WrongStep {
                expected: "a".into(),
                found: "b".into(),
            },
            Refusal::LifetimeTooLong {
                lifetime: 9,
                max: 1,
            },
            Refusal::StateDecoding("x".into()),
            Refusal::Replayed,
        ];
        let reasons: alloc::vec::Vec<_> = samples.iter().map(Refusal::reason).collect();
        assert_eq!(reasons, Refusal::REASONS);
    }

    #[test]
    fn the_umbrella_keeps_each_reason() {
        let e: Error = MintError::InvalidArgument(InvalidArgument("x")).into();
        assert_eq!(e, Error::InvalidArgument(InvalidArgument("x")));
        let e: Error = MintError::RandomnessUnavailable.into();
        assert_eq!(e.reason(), "randomness_unavailable");
        let e: Error = MintError::StateEncoding("x".into()).into();
        assert_eq!(e.reason(), "state_encoding");
        let e: Error = Refusal::AuthenticationFailed.into();
        assert_eq!(e.reason(), "authentication_failed");
        let e: Error = ConsumeError::Store(StoreError::Unavailable).into();
        assert_eq!(e, Error::Store(StoreError::Unavailable));
        assert_eq!(e.reason(), "replay_store_unavailable");
    }

    #[test]
    fn a_store_failure_is_not_a_refusal() {
        for (store, reason) in [StoreError::Full, StoreError::Unavailable]
            .into_iter()
            .zip(StoreError::REASONS)
        {
            let e = ConsumeError::from(store);
            assert_eq!(e.reason(), reason);
            assert_eq!(e.refusal(), None, "{store:?} is the server's failure");
            assert!(!Refusal::REASONS.contains(&reason));
        }
        let replayed = ConsumeError::from(Refusal::Replayed);
        assert_eq!(replayed.refusal(), Some(&Refusal::Replayed));
    }
}
