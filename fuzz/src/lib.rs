//! Fixtures shared by the reqstate fuzz targets: fixed keys and secrets, a
//! fixed clock, a deterministic random source, an independent implementation
//! of the HMAC token construction of docs/FORMAT.md §1, §3 and §4, and a
//! NaN-aware comparison of CBOR values. Nothing here is fuzzed itself.
//! [`schedule`] builds the random scheduled keyrings of `keyring_schedule`
//! and of the Rust-against-TypeScript runner (`fuzz/differential/`).

pub mod schedule;

use std::sync::atomic::{AtomicU64, Ordering};

use base64::Engine as _;
use reqstate::{
    Algorithm, Binding, Codec, FixedClock, KeyId, KeySpec, KeyStatus, Keyring, Policy,
    RandomnessUnavailable, Secret, SecureRandom,
};

/// The clock every fuzz codec reads: the `now` of tests/vectors/v1.json.
pub const NOW: u64 = 1_764_460_800;
/// The tool the vectors' valid tokens were minted for.
pub const TOOL: &str = "increase-counter";
/// The context the vectors' valid tokens were minted with (hex-decoded).
pub const CONTEXT: &[u8] = b"principal=user-42;audience=counter-server;method=tools/call";
/// The associated data of the vectors' sealed payloads.
pub const AAD: &[u8] = b"tools/call";

/// A fuzz-only 32-byte secret, different for each `seed`. None of these is a
/// secret of tests/vectors/v1.json, so no vector token verifies under them.
pub fn fuzz_secret(seed: u8) -> [u8; 32] {
    let mut s = [0u8; 32];
    for (i, b) in s.iter_mut().enumerate() {
        *b = seed.wrapping_mul(0x9d) ^ (i as u8).wrapping_mul(0x3b) ^ 0xa5;
    }
    s
}

/// A deterministic `SecureRandom` (SplitMix64 over a counter): XChaCha nonces
/// become reproducible, so a crash input replays exactly. Never use outside tests.
#[derive(Debug, Default)]
pub struct DeterministicRandom(AtomicU64);

impl SecureRandom for DeterministicRandom {
    fn fill(&self, dest: &mut [u8]) -> Result<(), RandomnessUnavailable> {
        for chunk in dest.chunks_mut(8) {
            let mut z = self
                .0
                .fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed)
                .wrapping_add(0x9e37_79b9_7f4a_7c15);
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^= z >> 31;
            chunk.copy_from_slice(&z.to_le_bytes()[..chunk.len()]);
        }
        Ok(())
    }
}

/// One key spec.
pub fn spec(id: u32, algorithm: Algorithm, status: KeyStatus, secret: &[u8]) -> KeySpec {
    KeySpec::new(KeyId::new(id), algorithm, status, Secret::from_slice(secret))
}

/// The binding of the vectors' valid tokens: [`TOOL`] and [`CONTEXT`].
pub fn vector_binding() -> Binding<'static> {
    binding(TOOL, CONTEXT)
}

/// A binding the fuzz targets build from fixed, valid values.
pub fn binding<'a>(tool: &'a str, context: &'a [u8]) -> Binding<'a> {
    Binding::with_context_bytes(tool, context).expect("a fixture binding is valid")
}

/// A codec at [`NOW`] with deterministic randomness and the given policy.
pub fn codec(keyring: Keyring, policy: Policy) -> Codec {
    Codec::with_parts(
        keyring,
        policy,
        FixedClock(NOW),
        DeterministicRandom::default(),
    )
}

/// The policy of the codecs that must accept anything a fuzz input can
/// produce: the default leeway and lifetime, the 1 MiB token limit.
pub fn roomy_policy() -> Policy {
    Policy::new()
        .with_max_token_len(Policy::MAX_MAX_TOKEN_LEN)
        .expect("1 MiB is in range")
}

/// The keyring of the verify target: the layout of tests/vectors/v1.json
/// (HMAC id 1 active, XChaCha id 2 primary, XChaCha id 3 retired, HMAC id 200
/// active) under fuzz-only secrets, so the vectors' tokens reach the tag
/// check and fail there.
pub fn vector_layout_keyring_with_fuzz_secrets() -> Keyring {
    Keyring::new([
        spec(1, Algorithm::HmacSha256, KeyStatus::Active, &fuzz_secret(1)),
        spec(2, Algorithm::XChaCha20Poly1305, KeyStatus::Primary, &fuzz_secret(2)),
        spec(3, Algorithm::XChaCha20Poly1305, KeyStatus::Retired, &fuzz_secret(3)),
        spec(200, Algorithm::HmacSha256, KeyStatus::Active, &fuzz_secret(200)),
    ])
    .expect("the fixed keyring is valid")
}

/// The keyring of tests/vectors/v1.json itself (secrets included), for the
/// sidecar target, whose seeds are the vectors' genuine tokens.
pub fn vector_keyring() -> Keyring {
    let b64 = |s: &str| {
        base64::engine::general_purpose::STANDARD
            .decode(s)
            .expect("vector secret is base64")
    };
    Keyring::new([
        spec(
            1,
            Algorithm::HmacSha256,
            KeyStatus::Active,
            &b64("EBceJSwzOkFIT1ZdZGtyeYCHjpWco6qxuL/GzdTb4uk="),
        ),
        spec(
            2,
            Algorithm::XChaCha20Poly1305,
            KeyStatus::Primary,
            &b64("ICcuNTxDSlFYX2ZtdHuCiZCXnqWss7rByM/W3eTr8vk="),
        ),
        spec(
            3,
            Algorithm::XChaCha20Poly1305,
            KeyStatus::Retired,
            &b64("MDc+RUxTWmFob3Z9hIuSmaCnrrW8w8rR2N/m7fT7Agk="),
        ),
        spec(
            200,
            Algorithm::HmacSha256,
            KeyStatus::Active,
            &b64("QEdOVVxjanF4f4aNlJuiqbC3vsXM09rh6O/2/QQLEhk="),
        ),
    ])
    .expect("the vector keyring is valid")
}

struct Len32;

impl ring::hkdf::KeyType for Len32 {
    fn len(&self) -> usize {
        32
    }
}

/// The working key of docs/FORMAT.md §1, computed here independently of the
/// core: `HKDF-SHA256(salt = "reqstate/v1 keyring", IKM = secret,
/// info = "reqstate/v1 " ‖ algorithm name, L = 32)`.
pub fn working_key(secret: &[u8], algorithm_name: &str) -> [u8; 32] {
    let info = format!("reqstate/v1 {algorithm_name}");
    let prk = ring::hkdf::Salt::new(ring::hkdf::HKDF_SHA256, b"reqstate/v1 keyring").extract(secret);
    let mut k = [0u8; 32];
    prk.expand(&[info.as_bytes()], Len32)
        .and_then(|okm| okm.fill(&mut k))
        .expect("HKDF-SHA256 yields 32 bytes");
    k
}

/// Unsigned LEB128 (docs/FORMAT.md §3).
pub fn leb128(mut v: u32, out: &mut Vec<u8>) {
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

/// An HMAC-SHA256 token over an arbitrary `body`, built from docs/FORMAT.md
/// §3 and §4.1 alone: `header ‖ key_id ‖ body ‖ HMAC(K, A ‖ body)[0..16]`
/// with `A = prefix ‖ lp(tool) ‖ lp(context)`, base64url without padding.
/// `kind` is 0 (state) or 1 (sealed).
pub fn hmac_token(k: &[u8; 32], key_id: u32, kind: u8, tool: &[u8], context: &[u8], body: &[u8]) -> String {
    let mut out = vec![(1u8 << 4) | (kind << 2) | 1];
    leb128(key_id, &mut out);
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, k);
    let mut ctx = ring::hmac::Context::with_key(&key);
    ctx.update(&out);
    ctx.update(&(tool.len() as u32).to_be_bytes());
    ctx.update(tool);
    ctx.update(&(context.len() as u32).to_be_bytes());
    ctx.update(context);
    ctx.update(body);
    let tag = ctx.sign();
    out.extend_from_slice(body);
    out.extend_from_slice(&tag.as_ref()[..16]);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(out)
}

/// A CBOR head (major type, argument), shortest form.
pub fn cbor_head(major: u8, value: u64, out: &mut Vec<u8>) {
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

/// The claims envelope of docs/FORMAT.md §5 around raw `state` bytes:
/// `A4 01 <iat> 02 <lifetime> 03 <step> 04 <state>`.
pub fn envelope(issued_at: u64, lifetime: u64, step: &str, state: &[u8]) -> Vec<u8> {
    let mut out = vec![0xa4, 0x01];
    cbor_head(0, issued_at, &mut out);
    out.push(0x02);
    cbor_head(0, lifetime, &mut out);
    out.push(0x03);
    cbor_head(3, step.len() as u64, &mut out);
    out.extend_from_slice(step.as_bytes());
    out.push(0x04);
    out.extend_from_slice(state);
    out
}

/// Equality of CBOR values where every NaN equals every NaN and other floats
/// compare by bits (so 0.0 and -0.0 differ, as they do on the wire).
pub fn same_value(a: &ciborium::Value, b: &ciborium::Value) -> bool {
    use ciborium::Value as V;
    match (a, b) {
        (V::Float(x), V::Float(y)) => (x.is_nan() && y.is_nan()) || x.to_bits() == y.to_bits(),
        (V::Array(x), V::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_value(x, y))
        }
        (V::Map(x), V::Map(y)) => {
            x.len() == y.len()
                && x
                    .iter()
                    .zip(y)
                    .all(|((kx, vx), (ky, vy))| same_value(kx, ky) && same_value(vx, vy))
        }
        (V::Tag(tx, x), V::Tag(ty, y)) => tx == ty && same_value(x, y),
        _ => a == b,
    }
}

/// Nesting depth as docs/FORMAT.md §5 counts it: arrays, maps and tags are
/// one level each; scalars are zero.
pub fn depth(v: &ciborium::Value) -> usize {
    use ciborium::Value as V;
    match v {
        V::Array(items) => 1 + items.iter().map(depth).max().unwrap_or(0),
        V::Map(entries) => {
            1 + entries
                .iter()
                .map(|(k, v)| depth(k).max(depth(v)))
                .max()
                .unwrap_or(0)
        }
        V::Tag(_, inner) => 1 + depth(inner),
        _ => 0,
    }
}

/// JSON values equal up to float parsing precision (serde_json's default
/// float parser may be one ULP off, so a JSON → f64 → JSON → f64 trip can move
/// the last bit).
pub fn json_close(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    use serde_json::Value as J;
    match (a, b) {
        (J::Number(x), J::Number(y)) => {
            if x == y {
                return true;
            }
            match (x.as_f64(), y.as_f64()) {
                (Some(x), Some(y)) => x == y || ((x - y).abs() <= 1e-12 * x.abs().max(y.abs())),
                _ => false,
            }
        }
        (J::Array(x), J::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(x, y)| json_close(x, y)),
        (J::Object(x), J::Object(y)) => {
            x.len() == y.len()
                && x
                    .iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_close(v, w)))
        }
        _ => a == b,
    }
}
