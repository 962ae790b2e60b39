//! The token v1 byte layout (FORMAT.md §2–§3): base64url, the header byte
//! and the LEB128 key id, and [`UntrustedToken`], the view of a token before
//! it is verified.

use alloc::vec::Vec;
use core::fmt;

use base64::Engine as _;
use base64::engine::GeneralPurpose;

use crate::error::Refusal;
use crate::policy::Policy;
use crate::types::{Algorithm, KeyId, MAX_KEY_ID_LEN, TAG_LEN, TokenKind, VERSION, XNONCE_LEN};

/// base64url without padding; non-canonical trailing bits are refused.
pub(crate) const TOKEN_BASE64: GeneralPurpose = base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// The header byte: version in bits 7-4, kind in bits 3-2, algorithm in bits 1-0.
pub(crate) const fn header_byte(kind: TokenKind, algorithm: Algorithm) -> u8 {
    (VERSION << 4) | (kind.id() << 2) | algorithm.id()
}

/// Appends the LEB128 encoding of a key id.
pub(crate) fn push_key_id(out: &mut Vec<u8>, id: KeyId) {
    let mut v = id.get();
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// Reads a minimal LEB128 u32 key id; returns it and the bytes it took.
fn read_key_id(bytes: &[u8]) -> Result<(KeyId, usize), Refusal> {
    let mut value: u64 = 0;
    for (i, &byte) in bytes.iter().take(MAX_KEY_ID_LEN).enumerate() {
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            if i > 0 && byte == 0 {
                return Err(Refusal::Malformed("key id is not minimally encoded"));
            }
            let id =
                u32::try_from(value).map_err(|_| Refusal::Malformed("key id exceeds 32 bits"))?;
            return Ok((KeyId::new(id), i + 1));
        }
    }
    Err(Refusal::Malformed(
        "key id encoding is truncated or longer than 5 bytes",
    ))
}

/// A token decoded from base64url with its header read, before any
/// verification. Only the routing fields are exposed (for `reqstate inspect`,
/// or to route a token to the replica that holds its key); the claims are
/// reachable only by handing it to [`crate::Codec::verify_untrusted`] or
/// [`crate::Codec::unseal_untrusted`], which finish the checks.
///
/// Everything here is attacker-controlled: the key id is a lookup hint and the
/// algorithm is compared against the key's, never trusted.
#[derive(Clone, PartialEq, Eq)]
pub struct UntrustedToken {
    pub(crate) bytes: Vec<u8>,
    pub(crate) kind: TokenKind,
    pub(crate) algorithm: Algorithm,
    pub(crate) key_id: KeyId,
    /// Bytes of header byte plus key id.
    pub(crate) prefix_len: usize,
    pub(crate) encoded_len: usize,
}

impl UntrustedToken {
    /// Decodes a token's base64url and header (FORMAT.md §8 steps 0–4).
    /// Refuses a token longer than the policy's maximum before decoding
    /// anything.
    pub fn parse(token: &str, policy: &Policy) -> Result<Self, Refusal> {
        let max_len = policy.max_token_len();
        if token.len() > max_len {
            return Err(Refusal::TooLarge {
                len: token.len(),
                max: max_len,
            });
        }
        let bytes = TOKEN_BASE64
            .decode(token.as_bytes())
            .map_err(|_| Refusal::Malformed("not canonical unpadded base64url"))?;
        let Some(&header) = bytes.first() else {
            return Err(Refusal::Malformed("empty token"));
        };
        let version = header >> 4;
        if version != VERSION {
            return Err(Refusal::UnsupportedVersion(version));
        }
        let kind = match (header >> 2) & 0b11 {
            0 => TokenKind::State,
            1 => TokenKind::Sealed,
            2 => TokenKind::SingleUse,
            _ => return Err(Refusal::Malformed("reserved token kind")),
        };
        let algorithm = Algorithm::from_id(header & 0b11)
            .ok_or(Refusal::UnsupportedAlgorithm(header & 0b11))?;
        let (key_id, id_len) = read_key_id(&bytes[1..])?;
        let prefix_len = 1 + id_len;
        let minimum = prefix_len
            + TAG_LEN
            + match algorithm {
                Algorithm::HmacSha256 => 0,
                Algorithm::XChaCha20Poly1305 => XNONCE_LEN,
            };
        if bytes.len() < minimum {
            return Err(Refusal::Malformed(
                "token is shorter than its header, nonce and tag",
            ));
        }
        Ok(UntrustedToken {
            bytes,
            kind,
            algorithm,
            key_id,
            prefix_len,
            encoded_len: token.len(),
        })
    }

    /// The format version (always [`VERSION`] for a parsed token).
    pub fn version(&self) -> u8 {
        VERSION
    }

    /// Whether this is a state token or a sealed payload.
    pub fn kind(&self) -> TokenKind {
        self.kind
    }

    /// The algorithm the token claims. Unverified: the key decides.
    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    /// The key id the token names. Unverified: a lookup hint only.
    pub fn key_id(&self) -> KeyId {
        self.key_id
    }

    /// Length of the token in characters.
    pub fn encoded_len(&self) -> usize {
        self.encoded_len
    }

    /// Length of the decoded token in bytes.
    pub fn decoded_len(&self) -> usize {
        self.bytes.len()
    }
}

impl fmt::Debug for UntrustedToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The body is never shown: for HMAC tokens it is the client-readable
        // state, but logs are no place for it either.
        f.debug_struct("UntrustedToken")
            .field("kind", &self.kind)
            .field("algorithm", &self.algorithm)
            .field("key_id", &self.key_id)
            .field("encoded_len", &self.encoded_len)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_id_round_trips_through_leb128() {
        for id in [0u32, 1, 127, 128, 16_383, 16_384, u32::MAX] {
            let mut out = Vec::new();
            push_key_id(&mut out, KeyId::new(id));
            assert_eq!(read_key_id(&out).unwrap(), (KeyId::new(id), out.len()));
        }
    }

    #[test]
    fn non_minimal_or_oversized_key_ids_are_refused() {
        assert!(read_key_id(&[0x81, 0x00]).is_err());
        assert!(read_key_id(&[0xff, 0xff, 0xff, 0xff, 0x10]).is_err());
        assert!(read_key_id(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x01]).is_err());
        assert!(read_key_id(&[0x80]).is_err());
    }
}
