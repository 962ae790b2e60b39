//! The two v1 constructions: HMAC-SHA256 (truncated to 128 bits) and
//! XChaCha20-Poly1305, over the token prefix, the bound tool and context, and the body.

use alloc::vec::Vec;

use ring::{aead, hmac};
use subtle::ConstantTimeEq as _;
use zeroize::Zeroizing;

use crate::clock::SecureRandom;
use crate::error::Error;
use crate::keyring::{Key, Material};
use crate::token::{TAG_LEN, XNONCE_LEN};

/// What a token is bound to without storing it.
#[derive(Clone, Copy)]
pub(crate) struct Binding<'a> {
    /// Empty for sealed payloads.
    pub(crate) tool: &'a [u8],
    pub(crate) context: &'a [u8],
}

fn len_be(bytes: &[u8]) -> [u8; 4] {
    // Callers bound tool and context far below 4 GiB.
    (bytes.len() as u32).to_be_bytes()
}

/// `prefix ‖ u32be(|tool|) ‖ tool ‖ u32be(|context|) ‖ context`.
fn associated_data(prefix: &[u8], binding: Binding<'_>) -> Vec<u8> {
    let mut ad = Vec::with_capacity(prefix.len() + 8 + binding.tool.len() + binding.context.len());
    ad.extend_from_slice(prefix);
    ad.extend_from_slice(&len_be(binding.tool));
    ad.extend_from_slice(binding.tool);
    ad.extend_from_slice(&len_be(binding.context));
    ad.extend_from_slice(binding.context);
    ad
}

fn hmac_tag(key: &hmac::Key, prefix: &[u8], binding: Binding<'_>, body: &[u8]) -> hmac::Tag {
    let mut ctx = hmac::Context::with_key(key);
    ctx.update(prefix);
    ctx.update(&len_be(binding.tool));
    ctx.update(binding.tool);
    ctx.update(&len_be(binding.context));
    ctx.update(binding.context);
    ctx.update(body);
    ctx.sign()
}

/// The one-message ChaCha20-Poly1305 key and nonce of an XChaCha20 nonce
/// (draft-irtf-cfrg-xchacha-03, section 2.3).
fn xchacha_subkey(key: &[u8; 32], nonce: &[u8]) -> (aead::LessSafeKey, aead::Nonce) {
    let hkey = chacha20::Key::from(*key);
    let mut hin = [0u8; 16];
    hin.copy_from_slice(&nonce[..16]);
    let sub = Zeroizing::new(<[u8; 32]>::from(chacha20::hchacha::<chacha20::R20>(
        &hkey,
        &hin.into(),
    )));
    let mut n12 = [0u8; 12];
    n12[4..].copy_from_slice(&nonce[16..XNONCE_LEN]);
    let unbound = aead::UnboundKey::new(&aead::CHACHA20_POLY1305, &sub[..])
        .expect("ChaCha20-Poly1305 takes any 32-byte key");
    (
        aead::LessSafeKey::new(unbound),
        aead::Nonce::assume_unique_for_key(n12),
    )
}

/// Where a new token's body goes: `out` already holds the prefix and, for
/// XChaCha20-Poly1305, the nonce; the caller appends the body, then calls
/// [`finish`].
pub(crate) fn start(key: &Key, out: &mut Vec<u8>, random: &dyn SecureRandom) -> Result<(), Error> {
    if let Material::XChaCha(_) = key.material {
        let at = out.len();
        out.resize(at + XNONCE_LEN, 0);
        random.fill(&mut out[at..])?;
    }
    Ok(())
}

/// Authenticates (and for the AEAD, encrypts in place) the body that follows
/// `prefix_len + nonce` in `out`, then appends the tag.
pub(crate) fn finish(key: &Key, out: &mut Vec<u8>, prefix_len: usize, binding: Binding<'_>) {
    match &key.material {
        Material::Hmac(k) => {
            let (prefix, body) = out.split_at(prefix_len);
            let tag = hmac_tag(k, prefix, binding, body);
            out.extend_from_slice(&tag.as_ref()[..TAG_LEN]);
        }
        Material::XChaCha(k) => {
            let (head, body) = out.split_at_mut(prefix_len + XNONCE_LEN);
            let (prefix, nonce) = head.split_at(prefix_len);
            let (sealing, n) = xchacha_subkey(k, nonce);
            let ad = associated_data(prefix, binding);
            let tag = sealing
                .seal_in_place_separate_tag(n, aead::Aad::from(&ad[..]), body)
                .expect("a body under 4 GiB always seals");
            out.extend_from_slice(tag.as_ref());
        }
    }
}

/// Verifies a decoded token under `key` and returns the range of its
/// authenticated body (decrypted in place for the AEAD).
pub(crate) fn open(
    key: &Key,
    bytes: &mut [u8],
    prefix_len: usize,
    binding: Binding<'_>,
) -> Result<core::ops::Range<usize>, Error> {
    match &key.material {
        Material::Hmac(k) => {
            let body_end = bytes.len() - TAG_LEN;
            let (signed, tag) = bytes.split_at(body_end);
            let (prefix, body) = signed.split_at(prefix_len);
            let expected = hmac_tag(k, prefix, binding, body);
            if bool::from(expected.as_ref()[..TAG_LEN].ct_eq(tag)) {
                Ok(prefix_len..body_end)
            } else {
                Err(Error::AuthenticationFailed)
            }
        }
        Material::XChaCha(k) => {
            let (head, sealed) = bytes.split_at_mut(prefix_len + XNONCE_LEN);
            let (prefix, nonce) = head.split_at(prefix_len);
            let (opening, n) = xchacha_subkey(k, nonce);
            let ad = associated_data(prefix, binding);
            let plain = opening
                .open_in_place(n, aead::Aad::from(&ad[..]), sealed)
                .map_err(|_| Error::AuthenticationFailed)?;
            let start = prefix_len + XNONCE_LEN;
            Ok(start..start + plain.len())
        }
    }
}
