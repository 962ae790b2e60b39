//! The token v1 byte layout: header, key id, claims envelope, and the
//! untrusted view of a token before it is verified.

use alloc::vec::Vec;
use core::fmt;

use base64::Engine as _;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};

use crate::error::Error;
use crate::keyring::{Algorithm, KeyId};

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

/// base64url without padding; non-canonical trailing bits are refused.
pub(crate) const TOKEN_BASE64: GeneralPurpose = base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// Standard base64 with or without padding, for secrets in keyring files.
pub(crate) const BASE64_STANDARD_LENIENT_PADDING: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// What a token carries: claims for [`crate::Codec::verify`], or an opaque
/// payload for [`crate::Codec::unseal`]. The kind is authenticated, so one can
/// never be accepted as the other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TokenKind {
    /// A requestState token: iat, lifetime, step and state.
    State,
    /// A sealed payload whose claims the caller stamps and checks itself.
    Sealed,
}

impl TokenKind {
    const fn id(self) -> u8 {
        match self {
            TokenKind::State => 0,
            TokenKind::Sealed => 1,
        }
    }

    /// The name used in errors and by `reqstate inspect`.
    pub const fn name(self) -> &'static str {
        match self {
            TokenKind::State => "state",
            TokenKind::Sealed => "sealed",
        }
    }
}

impl fmt::Display for TokenKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

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
fn read_key_id(bytes: &[u8]) -> Result<(KeyId, usize), Error> {
    let mut value: u64 = 0;
    for (i, &byte) in bytes.iter().take(MAX_KEY_ID_LEN).enumerate() {
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            if i > 0 && byte == 0 {
                return Err(Error::Malformed("key id is not minimally encoded"));
            }
            let id =
                u32::try_from(value).map_err(|_| Error::Malformed("key id exceeds 32 bits"))?;
            return Ok((KeyId::new(id), i + 1));
        }
    }
    Err(Error::Malformed(
        "key id encoding is truncated or longer than 5 bytes",
    ))
}

/// A token decoded from base64url with its header read, before any
/// verification. Only the routing fields are exposed; the claims are reachable
/// only through [`crate::Codec::verify`].
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
    encoded_len: usize,
}

impl UntrustedToken {
    /// Decodes a token's base64url and header. Refuses a token longer than
    /// `max_len` characters before decoding anything.
    pub fn parse(token: &str, max_len: usize) -> Result<Self, Error> {
        if token.len() > max_len {
            return Err(Error::TooLarge {
                len: token.len(),
                max: max_len,
            });
        }
        let bytes = TOKEN_BASE64
            .decode(token.as_bytes())
            .map_err(|_| Error::Malformed("not canonical unpadded base64url"))?;
        let Some(&header) = bytes.first() else {
            return Err(Error::Malformed("empty token"));
        };
        let version = header >> 4;
        if version != VERSION {
            return Err(Error::UnsupportedVersion(version));
        }
        let kind = match (header >> 2) & 0b11 {
            0 => TokenKind::State,
            1 => TokenKind::Sealed,
            _ => return Err(Error::Malformed("reserved token kind")),
        };
        let algorithm =
            Algorithm::from_id(header & 0b11).ok_or(Error::UnsupportedAlgorithm(header & 0b11))?;
        let (key_id, id_len) = read_key_id(&bytes[1..])?;
        let prefix_len = 1 + id_len;
        let minimum = prefix_len
            + TAG_LEN
            + match algorithm {
                Algorithm::HmacSha256 => 0,
                Algorithm::XChaCha20Poly1305 => XNONCE_LEN,
            };
        if bytes.len() < minimum {
            return Err(Error::Malformed(
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

// ---- The claims envelope: a CBOR map {1: iat, 2: lifetime, 3: step, 4: state}.

const MAP4: u8 = 0xa4;

fn push_head(out: &mut Vec<u8>, major: u8, value: u64) {
    let m = major << 5;
    if value < 24 {
        out.push(m | value as u8);
    } else if value <= 0xff {
        out.extend_from_slice(&[m | 24, value as u8]);
    } else if value <= 0xffff {
        out.push(m | 25);
        out.extend_from_slice(&(value as u16).to_be_bytes());
    } else if value <= 0xffff_ffff {
        out.push(m | 26);
        out.extend_from_slice(&(value as u32).to_be_bytes());
    } else {
        out.push(m | 27);
        out.extend_from_slice(&value.to_be_bytes());
    }
}

/// Appends the envelope up to and including the state's map key; the caller
/// appends the state's CBOR item.
pub(crate) fn push_claims_prefix(out: &mut Vec<u8>, issued_at: u64, lifetime: u64, step: &str) {
    out.push(MAP4);
    out.push(0x01);
    push_head(out, 0, issued_at);
    out.push(0x02);
    push_head(out, 0, lifetime);
    out.push(0x03);
    push_head(out, 3, step.len() as u64);
    out.extend_from_slice(step.as_bytes());
    out.push(0x04);
}

/// The claims of a verified state token, borrowed from its plaintext.
pub(crate) struct Claims<'a> {
    pub(crate) issued_at: u64,
    pub(crate) lifetime: u64,
    pub(crate) step: &'a str,
    /// The state's CBOR data item, exactly.
    pub(crate) state: &'a [u8],
}

struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn byte(&mut self) -> Result<u8, &'static str> {
        let b = *self.bytes.get(self.pos).ok_or("truncated CBOR")?;
        self.pos += 1;
        Ok(b)
    }

    fn take(&mut self, n: u64) -> Result<&'a [u8], &'static str> {
        let remaining = self.bytes.len() - self.pos;
        let n = usize::try_from(n)
            .ok()
            .filter(|n| *n <= remaining)
            .ok_or("truncated CBOR")?;
        let slice = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(slice)
    }

    /// Reads an initial byte's argument. Returns (major, additional info, value);
    /// for indefinite lengths (ai 31) the value is 0.
    fn head(&mut self) -> Result<(u8, u8, u64), &'static str> {
        let ib = self.byte()?;
        let (major, ai) = (ib >> 5, ib & 0x1f);
        let value = match ai {
            0..=23 => u64::from(ai),
            24 => u64::from(self.byte()?),
            25 => u64::from(u16::from_be_bytes(self.fixed()?)),
            26 => u64::from(u32::from_be_bytes(self.fixed()?)),
            27 => u64::from_be_bytes(self.fixed()?),
            31 => 0,
            _ => return Err("reserved CBOR additional information"),
        };
        Ok((major, ai, value))
    }

    fn fixed<const N: usize>(&mut self) -> Result<[u8; N], &'static str> {
        let s = self.take(N as u64)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    /// A definite, minimally encoded unsigned integer or length of `major`.
    fn canonical(&mut self, major: u8) -> Result<u64, &'static str> {
        let (m, ai, v) = self.head()?;
        if m != major || ai == 31 {
            return Err("unexpected CBOR type in claims");
        }
        let minimal = match ai {
            24 => v >= 24,
            25 => v > 0xff,
            26 => v > 0xffff,
            27 => v > 0xffff_ffff,
            _ => true,
        };
        if !minimal {
            return Err("non-minimal CBOR integer in claims");
        }
        Ok(v)
    }

    /// Skips one well-formed data item, at most `depth` levels deep.
    fn skip_item(&mut self, depth: usize) -> Result<(), &'static str> {
        let (major, ai, value) = self.head()?;
        match (major, ai) {
            (0 | 1, 31) => Err("indefinite length on an integer"),
            (0 | 1, _) => Ok(()),
            (2 | 3, 31) => loop {
                let (m, cai, len) = self.head()?;
                if m == 7 && cai == 31 {
                    return Ok(());
                }
                if m != major || cai == 31 {
                    return Err("bad chunk in indefinite-length string");
                }
                self.string(major, len)?;
            },
            (2 | 3, _) => self.string(major, value),
            (4..=6, _) if depth == 0 => Err("state nested too deeply"),
            (4 | 5, 31) => loop {
                if self.bytes.get(self.pos) == Some(&0xff) {
                    self.pos += 1;
                    return Ok(());
                }
                let per_entry = if major == 5 { 2 } else { 1 };
                for _ in 0..per_entry {
                    self.skip_item(depth - 1)?;
                }
            },
            (4 | 5, _) => {
                let per_entry: u64 = if major == 5 { 2 } else { 1 };
                let items = value.checked_mul(per_entry).ok_or("CBOR length overflow")?;
                // Every item takes at least one byte: refuse counts the input cannot hold.
                if items > (self.bytes.len() - self.pos) as u64 {
                    return Err("truncated CBOR");
                }
                for _ in 0..items {
                    self.skip_item(depth - 1)?;
                }
                Ok(())
            }
            (6, 31) => Err("indefinite length on a tag"),
            (6, _) => self.skip_item(depth - 1),
            (7, 24) if value < 32 => Err("non-minimal simple value"),
            (7, 31) => Err("unexpected CBOR break"),
            (7, _) => Ok(()),
            _ => Err("unknown CBOR major type"),
        }
    }

    fn string(&mut self, major: u8, len: u64) -> Result<(), &'static str> {
        let s = self.take(len)?;
        if major == 3 && core::str::from_utf8(s).is_err() {
            return Err("text string is not UTF-8");
        }
        Ok(())
    }
}

/// Checks that `item` is exactly one well-formed CBOR data item no deeper than
/// [`MAX_STATE_DEPTH`].
pub(crate) fn check_state_item(item: &[u8]) -> Result<(), &'static str> {
    let mut c = Cursor {
        bytes: item,
        pos: 0,
    };
    c.skip_item(MAX_STATE_DEPTH)?;
    if c.pos != item.len() {
        return Err("trailing bytes after the state");
    }
    Ok(())
}

/// Parses an authenticated claims envelope strictly: canonical keys in order,
/// minimal integers, a UTF-8 step and exactly one state item.
pub(crate) fn parse_claims(plain: &[u8]) -> Result<Claims<'_>, Error> {
    let mut c = Cursor {
        bytes: plain,
        pos: 0,
    };
    let malformed = |_| Error::Malformed("claims are not a canonical v1 envelope");
    (|| {
        if c.byte()? != MAP4 || c.byte()? != 0x01 {
            return Err("claims map header");
        }
        let issued_at = c.canonical(0)?;
        if c.byte()? != 0x02 {
            return Err("claims key 2");
        }
        let lifetime = c.canonical(0)?;
        if c.byte()? != 0x03 {
            return Err("claims key 3");
        }
        let step_len = c.canonical(3)?;
        if step_len == 0 || step_len > crate::codec::MAX_STEP_LEN as u64 {
            return Err("step length out of range");
        }
        let step = core::str::from_utf8(c.take(step_len)?).map_err(|_| "step is not UTF-8")?;
        if c.byte()? != 0x04 {
            return Err("claims key 4");
        }
        let state = &plain[c.pos..];
        check_state_item(state)?;
        Ok(Claims {
            issued_at,
            lifetime,
            step,
            state,
        })
    })()
    .map_err(malformed)
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

    #[test]
    fn claims_envelope_round_trips() {
        let mut out = Vec::new();
        push_claims_prefix(&mut out, 1_764_460_800, 600, "confirm");
        out.extend_from_slice(&[0xa1, 0x61, b'a', 0x05]);
        let c = parse_claims(&out).unwrap();
        assert_eq!(
            (c.issued_at, c.lifetime, c.step),
            (1_764_460_800, 600, "confirm")
        );
        assert_eq!(c.state, &[0xa1, 0x61, b'a', 0x05]);
    }

    #[test]
    fn deep_nesting_is_refused() {
        let mut deep = alloc::vec![0x81u8; MAX_STATE_DEPTH + 1];
        deep.push(0x00);
        assert!(check_state_item(&deep).is_err());
        let ok = &deep[1..];
        assert!(check_state_item(ok).is_ok());
    }

    #[test]
    fn huge_declared_lengths_do_not_allocate_or_loop() {
        assert!(check_state_item(&[0x9b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]).is_err());
        assert!(check_state_item(&[0x5b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]).is_err());
        assert!(check_state_item(&[0xbb, 0x80, 0, 0, 0, 0, 0, 0, 0]).is_err());
    }

    #[test]
    fn malformed_cbor_items_are_refused() {
        for bad in [
            &[0xff][..],               // stray break
            &[0x1c],                   // reserved additional info
            &[0x63, b'a', b'b'],       // truncated text
            &[0x62, 0xc3, 0x28],       // invalid UTF-8
            &[0x9f, 0x01],             // unterminated indefinite array
            &[0xf8, 0x05],             // non-minimal simple value
            &[0x01, 0x02],             // trailing bytes
            &[0x5f, 0x61, b'a', 0xff], // text chunk in a byte string
        ] {
            assert!(check_state_item(bad).is_err(), "{bad:02x?} accepted");
        }
        for good in [
            &[0x9f, 0x01, 0xff][..],
            &[0x5f, 0x41, 1, 0xff],
            &[0xc1, 0x1a, 0, 0, 0, 1],
        ] {
            assert!(check_state_item(good).is_ok(), "{good:02x?} refused");
        }
    }
}
