//! What each operation gives back: one result type per operation.

use alloc::string::String;
use alloc::vec::Vec;

use crate::types::KeyId;

/// A freshly minted token and what the caller may want to report about it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Minted {
    /// The token: base64url without padding.
    pub token: String,
    /// The key it was minted under (the keyring's primary).
    pub key_id: KeyId,
    /// Issue time, unix seconds.
    pub issued_at: u64,
    /// Expiry, unix seconds.
    pub expires_at: u64,
}

/// A freshly sealed payload.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Sealed {
    /// The token: base64url without padding.
    pub token: String,
    /// The key it was sealed under (the keyring's primary).
    pub key_id: KeyId,
}

/// The payload of a sealed token that opened, and the key that opened it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Unsealed {
    /// The payload given to [`crate::Codec::seal`].
    pub payload: Vec<u8>,
    /// The key that verified it.
    pub key_id: KeyId,
}

/// The contents of a token that passed every check.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Verified<T> {
    /// The step the token was minted for.
    pub step: String,
    /// The state, decoded.
    pub state: T,
    /// The key that verified it.
    pub key_id: KeyId,
    /// Issue time, unix seconds.
    pub issued_at: u64,
    /// Expiry, unix seconds.
    pub expires_at: u64,
}

impl<T> Verified<T> {
    /// The same contents with the state converted by `f`.
    pub fn map_state<U>(self, f: impl FnOnce(T) -> U) -> Verified<U> {
        Verified {
            step: self.step,
            state: f(self.state),
            key_id: self.key_id,
            issued_at: self.issued_at,
            expires_at: self.expires_at,
        }
    }

    /// The same contents with the state converted by `f`, which may fail.
    pub fn try_map_state<U, E>(self, f: impl FnOnce(T) -> Result<U, E>) -> Result<Verified<U>, E> {
        Ok(Verified {
            step: self.step,
            state: f(self.state)?,
            key_id: self.key_id,
            issued_at: self.issued_at,
            expires_at: self.expires_at,
        })
    }
}
