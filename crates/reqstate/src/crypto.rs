//! The two v1 constructions (FORMAT.md §4): key derivation, HMAC-SHA256
//! (truncated to 128 bits) and XChaCha20-Poly1305 with a hedged nonce, over
//! the token prefix, the bound tool and context, and the body.

use alloc::vec::Vec;

use ::hmac::Mac as _;
use ring::{aead, hkdf};
use subtle::ConstantTimeEq as _;
use zeroize::{Zeroize as _, Zeroizing};

use crate::error::{RandomnessUnavailable, Refusal};
use crate::random::SecureRandom;
use crate::types::{Algorithm, TAG_LEN, XNONCE_LEN};

/// The working form of a key, derived once when the key is loaded.
pub(crate) enum Material {
    /// HMAC-SHA256 keyed once: the inner and outer pads' hash states are
    /// precomputed here and cloned per token (RustCrypto's `hmac`, which
    /// wipes them on drop; SHA-256 on the CPU's SHA extensions where it has
    /// them). The raw derived key is wiped right away.
    Hmac(HmacKey),
    /// The 256-bit XChaCha20 key, ours to zeroize, and the HMAC key that
    /// hedges its nonces (FORMAT.md §4.2): derived from the same secret under
    /// its own label.
    XChaCha {
        /// The working key `K`.
        key: Zeroizing<[u8; 32]>,
        /// The nonce key `K_n`.
        nonce_key: NonceKey,
    },
}

/// The HKDF salt of every key derivation (FORMAT.md §4.1).
const DERIVATION_SALT: &[u8] = b"reqstate/v1 keyring";

/// The HKDF info of an XChaCha20-Poly1305 key's nonce key `K_n` (FORMAT.md §4.2).
const NONCE_KEY_LABEL: &[u8] = b"reqstate/v1 xchacha20-poly1305 nonce";

/// The HKDF info of an algorithm's working key: the same secret configured
/// under two algorithms yields unrelated keys.
const fn derivation_label(algorithm: Algorithm) -> &'static [u8] {
    match algorithm {
        Algorithm::HmacSha256 => b"reqstate/v1 hmac-sha256",
        Algorithm::XChaCha20Poly1305 => b"reqstate/v1 xchacha20-poly1305",
    }
}

struct Len32;

impl hkdf::KeyType for Len32 {
    fn len(&self) -> usize {
        32
    }
}

impl Material {
    /// Derives the working key of `algorithm` from a secret:
    /// `HKDF-SHA256(salt = "reqstate/v1 keyring", ikm = secret,
    /// info = "reqstate/v1 <algorithm name>", L = 32)`, and for
    /// XChaCha20-Poly1305 the nonce key under its own info. Every derived
    /// byte we hold is wiped when it drops.
    pub(crate) fn derive(algorithm: Algorithm, secret: &[u8]) -> Self {
        let prk = hkdf::Salt::new(hkdf::HKDF_SHA256, DERIVATION_SALT).extract(secret);
        let expand = |label: &[u8]| -> Zeroizing<[u8; 32]> {
            let mut derived = Zeroizing::new([0u8; 32]);
            prk.expand(&[label], Len32)
                .and_then(|okm| okm.fill(&mut derived[..]))
                .expect("HKDF-SHA256 expands to 32 bytes");
            derived
        };
        let derived = expand(derivation_label(algorithm));
        match algorithm {
            // `derived` is wiped when it drops at the end of the arm.
            Algorithm::HmacSha256 => Material::Hmac(hmac_key(&derived[..])),
            Algorithm::XChaCha20Poly1305 => Material::XChaCha {
                key: derived,
                nonce_key: nonce_key(&expand(NONCE_KEY_LABEL)),
            },
        }
    }
}

/// What a token is bound to without storing it.
#[derive(Clone, Copy)]
pub(crate) struct Bound<'a> {
    /// Empty for sealed payloads.
    pub(crate) tool: &'a [u8],
    pub(crate) context: &'a [u8],
}

fn len_be(bytes: &[u8]) -> [u8; 4] {
    // Callers bound tool and context far below 4 GiB.
    (bytes.len() as u32).to_be_bytes()
}

/// Associated data up to this length is assembled on the stack; longer (a
/// large caller context) on the heap. 256 bytes hold the prefix, a 64-byte
/// tool and a call context with room to spare.
const INLINE_AD_LEN: usize = 256;

/// The associated data `A` of FORMAT.md §4:
/// `prefix ‖ u32be(|tool|) ‖ tool ‖ u32be(|context|) ‖ context`, handed to
/// `f` as one slice (ring takes the AEAD's associated data contiguous).
fn with_associated_data<R>(prefix: &[u8], binding: Bound<'_>, f: impl FnOnce(&[u8]) -> R) -> R {
    let len = prefix.len() + 8 + binding.tool.len() + binding.context.len();
    if len <= INLINE_AD_LEN {
        let mut buf = [0u8; INLINE_AD_LEN];
        let mut at = 0;
        for_each_ad_part(prefix, binding, |part| {
            buf[at..at + part.len()].copy_from_slice(part);
            at += part.len();
        });
        f(&buf[..len])
    } else {
        let mut ad = Vec::with_capacity(len);
        for_each_ad_part(prefix, binding, |part| ad.extend_from_slice(part));
        f(&ad)
    }
}

/// Hands the five parts of `A` to `update` in order: what every MAC and the
/// AEAD authenticate, written once.
fn for_each_ad_part(prefix: &[u8], binding: Bound<'_>, mut update: impl FnMut(&[u8])) {
    update(prefix);
    update(&len_be(binding.tool));
    update(binding.tool);
    update(&len_be(binding.context));
    update(binding.context);
}

/// HMAC-SHA256 with its pads' hash states precomputed, wiped on drop: the
/// token key of FORMAT.md §4.1 and the nonce key of §4.2.
type HmacKey = ::hmac::Hmac<::sha2::Sha256>;

/// The HMAC-SHA256 key of a working key.
fn hmac_key(key: &[u8]) -> HmacKey {
    <HmacKey as ::hmac::KeyInit>::new_from_slice(key).expect("HMAC takes any key length")
}

/// The token tag of FORMAT.md §4.1: the first [`TAG_LEN`] bytes of the
/// HMAC-SHA256 output.
fn truncated(full: &[u8; 32]) -> &[u8] {
    &full[..TAG_LEN]
}

/// Whether `tag` is the token tag of the HMAC-SHA256 output `expected`,
/// compared in constant time (a `tag` of any other length never matches).
fn tag_matches(expected: &[u8; 32], tag: &[u8]) -> bool {
    // Two 64-bit words rather than subtle's sixteen byte compares.
    const _: () = assert!(TAG_LEN == 16);
    if tag.len() != TAG_LEN {
        return false;
    }
    let word = |bytes: &[u8], at: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&bytes[at..at + 8]);
        u64::from_le_bytes(w)
    };
    let expected = truncated(expected);
    bool::from(word(expected, 0).ct_eq(&word(tag, 0)) & word(expected, 8).ct_eq(&word(tag, 8)))
}

/// The full HMAC-SHA256 of `A ‖ body` (FORMAT.md §4.1), from a clone of the
/// keyed state.
fn hmac_tag(key: &HmacKey, prefix: &[u8], binding: Bound<'_>, body: &[u8]) -> [u8; 32] {
    let mut mac = key.clone();
    for_each_ad_part(prefix, binding, |part| mac.update(part));
    mac.update(body);
    mac.finalize().into_bytes().into()
}

/// The one-message ChaCha20-Poly1305 key and nonce of an XChaCha20 nonce
/// (draft-irtf-cfrg-xchacha-03, section 2.3).
///
/// Wiped here: our copy of the working key handed to HChaCha20 and the
/// subkey HChaCha20 returns. Not wiped: the copy of the subkey inside ring's
/// `LessSafeKey` (ring has no zeroizing key type), a stack value that lives
/// for this one call (docs/SECURITY.md, "Key material in memory").
fn xchacha_subkey(key: &[u8; 32], nonce: &[u8]) -> (aead::LessSafeKey, aead::Nonce) {
    let mut hkey = chacha20::Key::default();
    hkey.copy_from_slice(&key[..]);
    let mut hin = [0u8; 16];
    hin.copy_from_slice(&nonce[..16]);
    let mut sub = chacha20::hchacha::<chacha20::R20>(&hkey, &hin.into());
    hkey.as_mut_slice().zeroize();
    let mut n12 = [0u8; 12];
    n12[4..].copy_from_slice(&nonce[16..XNONCE_LEN]);
    let unbound = aead::UnboundKey::new(&aead::CHACHA20_POLY1305, sub.as_slice())
        .expect("ChaCha20-Poly1305 takes any 32-byte key");
    sub.as_mut_slice().zeroize();
    (
        aead::LessSafeKey::new(unbound),
        aead::Nonce::assume_unique_for_key(n12),
    )
}

/// XChaCha20-Poly1305 encryption of `in_out` in place under `key` and a
/// 24-byte `nonce`, with associated data `ad`; returns the tag.
fn xchacha_seal(key: &[u8; 32], nonce: &[u8], ad: &[u8], in_out: &mut [u8]) -> aead::Tag {
    let (sealing, n) = xchacha_subkey(key, nonce);
    sealing
        .seal_in_place_separate_tag(n, aead::Aad::from(ad), in_out)
        .expect("a body under 4 GiB always seals")
}

/// XChaCha20-Poly1305 decryption in place of `sealed` (ciphertext ‖ tag)
/// under `key` and a 24-byte `nonce`, with associated data `ad`; returns the
/// plaintext, or `None` if the tag does not authenticate.
fn xchacha_open<'a>(
    key: &[u8; 32],
    nonce: &[u8],
    ad: &[u8],
    sealed: &'a mut [u8],
) -> Option<&'a mut [u8]> {
    let (opening, n) = xchacha_subkey(key, nonce);
    opening.open_in_place(n, aead::Aad::from(ad), sealed).ok()
}

/// The key that hedges an XChaCha20-Poly1305 key's nonces (FORMAT.md §4.2):
/// HMAC-SHA256 with its pads precomputed, wiped on drop.
type NonceKey = HmacKey;

/// Builds a [`NonceKey`] from `K_n`.
fn nonce_key(k_n: &[u8; 32]) -> NonceKey {
    hmac_key(k_n)
}

/// Random bytes drawn per XChaCha20-Poly1305 token to hedge its nonce.
pub(crate) const HEDGE_RANDOM_LEN: usize = 24;

/// The hedged nonce of FORMAT.md §4.2:
/// `HMAC-SHA256(K_n, r ‖ A ‖ body)[0..24]` with `r` fresh random bytes.
///
/// If the random source repeats itself (a process cloned by a VM snapshot, a
/// PID namespace or CRIU, or a broken generator) the nonce still differs for
/// any other message; only a token with the very same key, associated data,
/// body and `r` gets the same nonce, and it is then the same token.
fn hedged_nonce(
    nonce_key: &NonceKey,
    random: &[u8; HEDGE_RANDOM_LEN],
    prefix: &[u8],
    binding: Bound<'_>,
    body: &[u8],
) -> [u8; XNONCE_LEN] {
    let mut mac = nonce_key.clone();
    mac.update(random);
    for_each_ad_part(prefix, binding, |part| mac.update(part));
    mac.update(body);
    let mut nonce = [0u8; XNONCE_LEN];
    nonce.copy_from_slice(&mac.finalize().into_bytes()[..XNONCE_LEN]);
    nonce
}

/// Where a new token's body goes: appends room for the nonce (XChaCha20-Poly1305
/// only) to `out`, which already holds the prefix; the caller appends the
/// body, then calls [`finish`].
pub(crate) fn start(key: &Material, out: &mut Vec<u8>) {
    if let Material::XChaCha { .. } = key {
        out.resize(out.len() + XNONCE_LEN, 0);
    }
}

/// Authenticates (and for the AEAD, writes the hedged nonce and encrypts in
/// place) the body that follows `prefix_len + nonce` in `out`, then appends
/// the tag. Draws randomness only for the AEAD; fails only if that draw fails.
pub(crate) fn finish(
    key: &Material,
    out: &mut Vec<u8>,
    prefix_len: usize,
    binding: Bound<'_>,
    random: &dyn SecureRandom,
) -> Result<(), RandomnessUnavailable> {
    match key {
        Material::Hmac(k) => {
            let (prefix, body) = out.split_at(prefix_len);
            let tag = hmac_tag(k, prefix, binding, body);
            out.extend_from_slice(truncated(&tag));
        }
        Material::XChaCha { key: k, nonce_key } => {
            let mut r = Zeroizing::new([0u8; HEDGE_RANDOM_LEN]);
            random.fill_hedge(&mut r[..])?;
            let (head, body) = out.split_at_mut(prefix_len + XNONCE_LEN);
            let (prefix, nonce) = head.split_at_mut(prefix_len);
            nonce.copy_from_slice(&hedged_nonce(nonce_key, &r, prefix, binding, body));
            let tag = with_associated_data(prefix, binding, |ad| xchacha_seal(k, nonce, ad, body));
            out.extend_from_slice(tag.as_ref());
        }
    }
    Ok(())
}

/// Verifies a decoded token under `key` and returns the range of its
/// authenticated body (decrypted in place for the AEAD).
pub(crate) fn open(
    key: &Material,
    bytes: &mut [u8],
    prefix_len: usize,
    binding: Bound<'_>,
) -> Result<core::ops::Range<usize>, Refusal> {
    match key {
        Material::Hmac(k) => {
            let body_end = bytes.len() - TAG_LEN;
            let (signed, tag) = bytes.split_at(body_end);
            let (prefix, body) = signed.split_at(prefix_len);
            let expected = hmac_tag(k, prefix, binding, body);
            if tag_matches(&expected, tag) {
                Ok(prefix_len..body_end)
            } else {
                Err(Refusal::AuthenticationFailed)
            }
        }
        Material::XChaCha { key: k, .. } => {
            let (head, sealed) = bytes.split_at_mut(prefix_len + XNONCE_LEN);
            let (prefix, nonce) = head.split_at(prefix_len);
            let plain =
                with_associated_data(prefix, binding, |ad| xchacha_open(k, nonce, ad, sealed))
                    .ok_or(Refusal::AuthenticationFailed)?;
            let start = prefix_len + XNONCE_LEN;
            Ok(start..start + plain.len())
        }
    }
}

/// **Test-only, not a stable API** (feature `test-util`): the primitives of
/// this layer on raw keys, for known-answer suites such as Project
/// Wycheproof (`crates/reqstate/tests/core/wycheproof.rs`). They run the very functions that
/// mint and verify tokens, minus the key derivation and the token layout:
/// HMAC-SHA256 with the token tag's truncation and constant-time comparison,
/// and the XChaCha20-Poly1305 composition (HChaCha20 subkey, then
/// ChaCha20-Poly1305). May change or go away in any release.
#[cfg(feature = "test-util")]
pub mod primitives {
    use alloc::vec::Vec;

    use crate::types::XNONCE_LEN;

    /// The full 32-byte HMAC-SHA256 of `message` under `key` (any length),
    /// as this layer computes it before truncating it to a token tag.
    pub fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
        use ::hmac::Mac as _;
        let mut mac = super::hmac_key(key);
        mac.update(message);
        mac.finalize().into_bytes().into()
    }

    /// The token tag check: whether `tag` equals the first
    /// [`TAG_LEN`](crate::TAG_LEN) bytes of the HMAC-SHA256 of `message`
    /// under `key`, in constant time. A `tag` of any other length is refused.
    pub fn hmac_sha256_verify(key: &[u8], message: &[u8], tag: &[u8]) -> bool {
        super::tag_matches(&hmac_sha256(key, message), tag)
    }

    /// XChaCha20-Poly1305 encryption: returns ciphertext ‖ 16-byte tag.
    pub fn xchacha20_poly1305_seal(
        key: &[u8; 32],
        nonce: &[u8; XNONCE_LEN],
        aad: &[u8],
        plaintext: &[u8],
    ) -> Vec<u8> {
        let mut out = plaintext.to_vec();
        let tag = super::xchacha_seal(key, nonce, aad, &mut out);
        out.extend_from_slice(tag.as_ref());
        out
    }

    /// XChaCha20-Poly1305 decryption of ciphertext ‖ tag: the plaintext, or
    /// `None` if it does not authenticate (including input shorter than a tag).
    pub fn xchacha20_poly1305_open(
        key: &[u8; 32],
        nonce: &[u8; XNONCE_LEN],
        aad: &[u8],
        sealed: &[u8],
    ) -> Option<Vec<u8>> {
        let mut buf = sealed.to_vec();
        super::xchacha_open(key, nonce, aad, &mut buf).map(|plain| plain.to_vec())
    }
}
