//! The token v1 byte layout (FORMAT.md §2–§3): base64url, the header byte
//! and the LEB128 key id, and [`UntrustedToken`], the view of a token before
//! it is verified.

use alloc::string::String;
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
    header: Header,
}

/// What the header of a decoded token says (FORMAT.md §2), read before
/// anything is verified: routing fields only.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct Header {
    pub(crate) kind: TokenKind,
    pub(crate) algorithm: Algorithm,
    pub(crate) key_id: KeyId,
    /// Bytes of header byte plus key id.
    pub(crate) prefix_len: usize,
    /// Length of the token in characters.
    pub(crate) encoded_len: usize,
}

/// Refuses a token longer than the policy's maximum before decoding anything
/// (FORMAT.md §8 step 0).
fn check_len(token: &str, policy: &Policy) -> Result<(), Refusal> {
    let max_len = policy.max_token_len();
    if token.len() > max_len {
        return Err(Refusal::TooLarge {
            len: token.len(),
            max: max_len,
        });
    }
    Ok(())
}

fn not_base64<E>(_: E) -> Refusal {
    Refusal::Malformed("not canonical unpadded base64url")
}

/// Reads the header byte and key id of a decoded token and checks it is long
/// enough for its nonce and tag (FORMAT.md §8 steps 2–4).
pub(crate) fn read_header(bytes: &[u8], encoded_len: usize) -> Result<Header, Refusal> {
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
    let algorithm =
        Algorithm::from_id(header & 0b11).ok_or(Refusal::UnsupportedAlgorithm(header & 0b11))?;
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
    Ok(Header {
        kind,
        algorithm,
        key_id,
        prefix_len,
        encoded_len,
    })
}

/// Decoded tokens up to this many bytes (1024 characters) are decoded on the
/// stack by [`with_decoded`]; longer ones on the heap.
const INLINE_TOKEN_LEN: usize = 768;

/// Decodes `token` as [`UntrustedToken::parse`] does (the same checks in the
/// same order) and hands its bytes and header to `f`, without a heap
/// allocation for a token of up to [`INLINE_TOKEN_LEN`] bytes: the verify
/// path of a token given as text.
pub(crate) fn with_decoded<R>(
    token: &str,
    policy: &Policy,
    f: impl FnOnce(&mut [u8], Header) -> Result<R, Refusal>,
) -> Result<R, Refusal> {
    check_len(token, policy)?;
    if base64::decoded_len_estimate(token.len()) <= INLINE_TOKEN_LEN {
        let mut buf = [0u8; INLINE_TOKEN_LEN];
        let len = TOKEN_BASE64
            .decode_slice(token.as_bytes(), &mut buf)
            .map_err(not_base64)?;
        let bytes = &mut buf[..len];
        let header = read_header(bytes, token.len())?;
        f(bytes, header)
    } else {
        let mut token = UntrustedToken::parse(token, policy)?;
        let header = token.header();
        f(&mut token.bytes, header)
    }
}

/// The base64url alphabet (RFC 4648 §5).
const BASE64URL: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// The unpadded base64url text of the raw token bytes in `buf`, encoded in
/// place (from the end, so that no byte is overwritten before it is read):
/// a minted token costs the one allocation of its `String`. Canonical: the
/// unused low bits of the last character are zero, as [`TOKEN_BASE64`]
/// requires when it decodes.
pub(crate) fn encode_in_place(mut buf: Vec<u8>) -> String {
    let len = buf.len();
    let groups = len / 3;
    let rest = len % 3;
    let encoded_len = groups * 4 + [0, 2, 3][rest];
    buf.resize(encoded_len, 0);
    let char_of = |six: u8| BASE64URL[usize::from(six & 0x3f)];
    // The last one or two bytes first: their characters go furthest out.
    let tail = groups * 3;
    match rest {
        1 => {
            let b0 = buf[tail];
            buf[encoded_len - 2] = char_of(b0 >> 2);
            buf[encoded_len - 1] = char_of(b0 << 4);
        }
        2 => {
            let (b0, b1) = (buf[tail], buf[tail + 1]);
            buf[encoded_len - 3] = char_of(b0 >> 2);
            buf[encoded_len - 2] = char_of((b0 << 4) | (b1 >> 4));
            buf[encoded_len - 1] = char_of(b1 << 2);
        }
        _ => {}
    }
    // Then, from the end: at most one lone 3-byte group, and 6-byte blocks,
    // 8 characters each, read as one big-endian word (its last 2 bytes are
    // not used: they may already be characters). Each step writes at or
    // after the bytes it reads, and after every byte still to be read.
    let blocks = groups / 2;
    if groups % 2 == 1 {
        let at = 3 * (groups - 1);
        let (b0, b1, b2) = (buf[at], buf[at + 1], buf[at + 2]);
        let out = &mut buf[4 * (groups - 1)..4 * groups];
        out[0] = char_of(b0 >> 2);
        out[1] = char_of((b0 << 4) | (b1 >> 4));
        out[2] = char_of((b1 << 2) | (b2 >> 6));
        out[3] = char_of(b2);
    }
    for k in (0..blocks).rev() {
        // 6k + 8 <= 8k + 8 <= the encoded length: in the buffer.
        let mut word = [0u8; 8];
        word.copy_from_slice(&buf[6 * k..6 * k + 8]);
        let word = u64::from_be_bytes(word);
        let mut chars = [0u8; 8];
        for (i, c) in chars.iter_mut().enumerate() {
            *c = char_of((word >> (58 - 6 * i)) as u8);
        }
        buf[8 * k..8 * k + 8].copy_from_slice(&chars);
    }
    String::from_utf8(buf).expect("the base64url alphabet is ASCII")
}

impl UntrustedToken {
    /// Decodes a token's base64url and header (FORMAT.md §8 steps 0–4).
    /// Refuses a token longer than the policy's maximum before decoding
    /// anything.
    pub fn parse(token: &str, policy: &Policy) -> Result<Self, Refusal> {
        check_len(token, policy)?;
        let bytes = TOKEN_BASE64.decode(token.as_bytes()).map_err(not_base64)?;
        let header = read_header(&bytes, token.len())?;
        Ok(UntrustedToken { bytes, header })
    }

    /// The header fields, as [`read_header`] gave them.
    pub(crate) fn header(&self) -> Header {
        self.header
    }

    /// The format version (always [`VERSION`] for a parsed token).
    pub fn version(&self) -> u8 {
        VERSION
    }

    /// Whether this is a state token or a sealed payload.
    pub fn kind(&self) -> TokenKind {
        self.header.kind
    }

    /// The algorithm the token claims. Unverified: the key decides.
    pub fn algorithm(&self) -> Algorithm {
        self.header.algorithm
    }

    /// The key id the token names. Unverified: a lookup hint only.
    pub fn key_id(&self) -> KeyId {
        self.header.key_id
    }

    /// Length of the token in characters.
    pub fn encoded_len(&self) -> usize {
        self.header.encoded_len
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
            .field("kind", &self.header.kind)
            .field("algorithm", &self.header.algorithm)
            .field("key_id", &self.header.key_id)
            .field("encoded_len", &self.header.encoded_len)
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
    fn in_place_base64url_is_the_engines_encoding() {
        use base64::Engine as _;
        // Every length mod 3, across the inline/heap sizes, with every byte value.
        for len in 0..=300usize {
            let raw: Vec<u8> = (0..len).map(|i| (i * 151 + len * 7) as u8).collect();
            let ours = encode_in_place(raw.clone());
            assert_eq!(ours, TOKEN_BASE64.encode(&raw), "length {len}");
            assert_eq!(TOKEN_BASE64.decode(&ours).unwrap(), raw);
        }
    }

    #[test]
    fn decoding_on_the_stack_or_the_heap_agrees_with_parse() {
        use base64::Engine as _;
        let policy = Policy::new();
        // Header 0x10 (v1, state, HMAC), key id 1, then a body and tag of
        // every size around the inline buffer's.
        for body in [
            0usize,
            16,
            INLINE_TOKEN_LEN - 18,
            INLINE_TOKEN_LEN - 2,
            INLINE_TOKEN_LEN + 40,
        ] {
            let mut raw = alloc::vec![0x10u8, 0x01];
            raw.extend((0..body).map(|i| i as u8));
            let text = TOKEN_BASE64.encode(&raw);
            let parsed = UntrustedToken::parse(&text, &policy);
            let seen = with_decoded(&text, &policy, |bytes, h| {
                Ok((
                    bytes.to_vec(),
                    h.kind,
                    h.algorithm,
                    h.key_id,
                    h.prefix_len,
                    h.encoded_len,
                ))
            });
            match parsed {
                Ok(t) => {
                    let h = t.header();
                    assert_eq!(
                        seen.unwrap(),
                        (
                            t.bytes.clone(),
                            h.kind,
                            h.algorithm,
                            h.key_id,
                            h.prefix_len,
                            h.encoded_len
                        )
                    );
                }
                Err(e) => assert_eq!(seen.unwrap_err(), e, "body {body}"),
            }
        }
        // Refusals are the same, in the same order.
        for bad in [
            "",
            "A",
            "EA=",
            "EAE",
            "EAF",
            "!!!!",
            "IAEAAAAAAAAAAAAAAAAAAAAA",
        ] {
            assert_eq!(
                with_decoded(bad, &policy, |_, _| Ok(())).unwrap_err(),
                UntrustedToken::parse(bad, &policy).unwrap_err(),
                "{bad:?}"
            );
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
