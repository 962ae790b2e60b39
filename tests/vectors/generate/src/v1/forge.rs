//! Bytes made from FORMAT.md rather than by the crate: key ids, CBOR heads
//! and claims bodies, the derived keys (ring's HKDF), and tokens over any
//! body made with the derived key directly (ring's HMAC and
//! ChaCha20-Poly1305, chacha20's HChaCha20): what only a key holder could
//! produce.

use reqstate::{Algorithm, Secret};

use crate::schema::VectorKey;

/// The LEB128 encoding of a key id (FORMAT.md §3).
pub(super) fn leb128(mut v: u32) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return out;
        }
        out.push(b | 0x80);
    }
}

/// A CBOR head (major type and argument), shortest form.
pub(super) fn cbor_head(major: u8, v: u64) -> Vec<u8> {
    let m = major << 5;
    match v {
        0..=23 => vec![m | v as u8],
        24..=0xff => vec![m | 24, v as u8],
        0x100..=0xffff => [vec![m | 25], (v as u16).to_be_bytes().to_vec()].concat(),
        0x1_0000..=0xffff_ffff => [vec![m | 26], (v as u32).to_be_bytes().to_vec()].concat(),
        _ => [vec![m | 27], v.to_be_bytes().to_vec()].concat(),
    }
}

/// A claims envelope (FORMAT.md §5) around raw state bytes.
pub(super) fn claims_body(issued_at: u64, lifetime: u64, step: &str, state: &[u8]) -> Vec<u8> {
    let mut b = vec![0xa4, 0x01];
    b.extend(cbor_head(0, issued_at));
    b.push(0x02);
    b.extend(cbor_head(0, lifetime));
    b.push(0x03);
    b.extend(cbor_head(3, step.len() as u64));
    b.extend_from_slice(step.as_bytes());
    b.push(0x04);
    b.extend_from_slice(state);
    b
}

/// Replaces a token's key id bytes (keeping the header and the rest).
pub(super) fn with_key_id(token: &str, key_id: &[u8]) -> String {
    use base64::Engine as _;
    let engine = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let raw = engine.decode(token).expect("valid");
    let mut out = vec![raw[0]];
    out.extend_from_slice(key_id);
    out.extend_from_slice(&raw[2..]);
    engine.encode(out)
}

/// A state token over an arbitrary body, made with the derived key directly as
/// FORMAT.md §4 says: what only a key holder could produce.
pub(super) fn forge(
    keys: &[VectorKey],
    key_id: u32,
    body: &[u8],
    tool: &[u8],
    context: &[u8],
    nonce: &[u8],
) -> String {
    forge_kind(keys, 0, key_id, body, tool, context, nonce)
}

/// [`forge`] with the header's kind given (2: single-use, FORMAT.md §5.1).
pub(super) fn forge_kind(
    keys: &[VectorKey],
    kind: u8,
    key_id: u32,
    body: &[u8],
    tool: &[u8],
    context: &[u8],
    nonce: &[u8],
) -> String {
    use base64::Engine as _;
    let k = keys.iter().find(|k| k.id == key_id).expect("key");
    let working = hex::decode(&k.derived_key).expect("hex");
    let algorithm = Algorithm::from_name(&k.algorithm).expect("algorithm");
    let header = 0x10
        | (kind << 2)
        | if algorithm == Algorithm::HmacSha256 {
            1
        } else {
            2
        };
    let mut prefix = vec![header];
    prefix.extend_from_slice(&leb128(key_id));
    let mut ad = prefix.clone();
    ad.extend_from_slice(&(tool.len() as u32).to_be_bytes());
    ad.extend_from_slice(tool);
    ad.extend_from_slice(&(context.len() as u32).to_be_bytes());
    ad.extend_from_slice(context);
    let mut out = prefix;
    if algorithm == Algorithm::HmacSha256 {
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &working);
        let mut msg = ad;
        msg.extend_from_slice(body);
        out.extend_from_slice(body);
        out.extend_from_slice(&ring::hmac::sign(&key, &msg).as_ref()[..16]);
    } else {
        let hkey = chacha20::Key::try_from(&working[..]).expect("32 bytes");
        let hin: [u8; 16] = nonce[..16].try_into().expect("16 bytes");
        let sub: [u8; 32] = chacha20::hchacha::<chacha20::R20>(&hkey, &hin.into()).into();
        let mut n12 = [0u8; 12];
        n12[4..].copy_from_slice(&nonce[16..24]);
        let key = ring::aead::LessSafeKey::new(
            ring::aead::UnboundKey::new(&ring::aead::CHACHA20_POLY1305, &sub).expect("key"),
        );
        let mut sealed = body.to_vec();
        key.seal_in_place_append_tag(
            ring::aead::Nonce::assume_unique_for_key(n12),
            ring::aead::Aad::from(&ad[..]),
            &mut sealed,
        )
        .expect("seal");
        out.extend_from_slice(nonce);
        out.extend_from_slice(&sealed);
    }
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(out)
}

/// The working key as FORMAT.md derives it, computed independently of the
/// crate with ring's HKDF, so the vector pins the derivation too.
pub(super) fn reqstate_derived_key(k: &VectorKey) -> [u8; 32] {
    hkdf_label(k, &format!("reqstate/v1 {}", k.algorithm))
}

/// HKDF-SHA256 of a vector key's secret with FORMAT.md §1's salt and `label` as info.
pub(super) fn hkdf_label(k: &VectorKey, label: &str) -> [u8; 32] {
    struct Len32;
    impl ring::hkdf::KeyType for Len32 {
        fn len(&self) -> usize {
            32
        }
    }
    let secret = Secret::from_base64(&k.secret).expect("secret");
    let prk = ring::hkdf::Salt::new(ring::hkdf::HKDF_SHA256, b"reqstate/v1 keyring")
        .extract(secret.expose());
    let mut out = [0u8; 32];
    prk.expand(&[label.as_bytes()], Len32)
        .expect("expand")
        .fill(&mut out)
        .expect("fill");
    out
}

/// A token with the bits of `mask` flipped in its raw byte `byte`.
pub(super) fn flip_bit(token: &str, byte: usize, mask: u8) -> String {
    use base64::Engine as _;
    let engine = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let mut raw = engine.decode(token).expect("valid token");
    raw[byte] ^= mask;
    engine.encode(raw)
}

/// A CBOR item nested `n` levels: `open` `n` times, the integer 0, `close`
/// `n` times.
pub(super) fn deep(open: &[u8], close: &[u8], n: usize) -> Vec<u8> {
    let mut b = open.repeat(n);
    b.push(0x00);
    b.extend(close.repeat(n));
    b
}
