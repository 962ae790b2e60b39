//! What every vector family mints with: a codec under one key, at a fixed
//! clock, drawing from a scripted random source.

use std::time::Duration;

use reqstate::{
    Aad, Algorithm, Binding, Codec, FixedClock, KeyId, KeySpec, KeyStatus, Keyring, Policy,
    RandomnessUnavailable, Secret, SecureRandom,
};

use crate::schema::{VectorKey, VectorPolicy};

/// A scripted "random" source: hands out its bytes in order, one draw after
/// the other, and fails a draw it has not enough bytes left for. Only for
/// reproducing vectors: a single-use mint draws its 16-byte token id, then
/// (XChaCha20-Poly1305) the 24 bytes that hedge the nonce (FORMAT.md §4.2,
/// §8's mint list), so its script is `token_id ‖ random`.
pub(crate) struct Scripted(std::sync::Mutex<Vec<u8>>);

impl Scripted {
    pub(crate) fn new(bytes: &[u8]) -> Self {
        Scripted(std::sync::Mutex::new(bytes.to_vec()))
    }
}

impl SecureRandom for Scripted {
    fn fill(&self, dest: &mut [u8]) -> Result<(), RandomnessUnavailable> {
        let mut left = self.0.lock().map_err(|_| RandomnessUnavailable)?;
        if dest.len() > left.len() {
            return Err(RandomnessUnavailable);
        }
        dest.copy_from_slice(&left[..dest.len()]);
        left.drain(..dest.len());
        Ok(())
    }
}

/// A keyring vector as a keyring file (docs/KEYRING.md): `version` if set,
/// then one `[[key]]` table per entry, its fields in order; strings as TOML
/// basic strings (JSON's escapes are TOML's), `created` bare (a TOML
/// date-time), unknown fields as strings.
pub(crate) fn keyring_toml(v: &crate::schema::KeyringVector) -> String {
    keyring_file_toml(v.version, &v.keys)
}

/// A keyring file's text from its `version` and `[[key]]` tables, as a
/// vector writes them.
pub(crate) fn keyring_file_toml(
    version: Option<u64>,
    keys: &[crate::schema::KeyringEntry],
) -> String {
    let s = |text: &str| serde_json::to_string(text).expect("string");
    let mut out = String::new();
    if let Some(version) = version {
        out.push_str(&format!("version = {version}\n"));
    }
    for k in keys {
        out.push_str("\n[[key]]\n");
        if let Some(id) = &k.id {
            // A JSON number as a TOML one, a JSON string as a TOML string.
            out.push_str(&format!("id = {id}\n"));
        }
        if let Some(a) = &k.algorithm {
            out.push_str(&format!("algorithm = {}\n", s(a)));
        }
        if let Some(status) = &k.status {
            out.push_str(&format!("status = {}\n", s(status)));
        }
        if let Some(c) = &k.created {
            out.push_str(&format!("created = {c}\n"));
        }
        if let Some(at) = &k.mint_from {
            out.push_str(&format!("mint_from = {at}\n"));
        }
        if let Some(at) = &k.retire_at {
            out.push_str(&format!("retire_at = {at}\n"));
        }
        if let Some(secret) = &k.secret {
            out.push_str(&format!("secret = {}\n", s(secret)));
        }
        if let Some(name) = &k.secret_env {
            out.push_str(&format!("secret_env = {}\n", s(name)));
        }
        for (name, value) in &k.unknown {
            out.push_str(&format!("{name} = {}\n", s(value)));
        }
    }
    out
}

/// The FORMAT.md §5.1 record name (without a deployment prefix) of a
/// single-use token, written here from the spec rather than by the crate.
pub(crate) fn record_name(key_id: u32, token_id: &[u8]) -> String {
    format!("spent:v1:{key_id}:{}", hex::encode(token_id))
}

/// Standard base64 with padding (the keyring's secrets).
pub(crate) fn base64_standard(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The key spec of a vector key, under `status`.
pub(crate) fn spec_of(k: &VectorKey, status: KeyStatus) -> KeySpec {
    KeySpec::new(
        KeyId::new(k.id),
        Algorithm::from_name(&k.algorithm).expect("known algorithm"),
        status,
        Secret::from_base64(&k.secret).expect("base64 secret"),
    )
}

/// The binding of a vector that is known to be in range.
pub(crate) fn bind<'a>(tool: &'a str, context: &'a [u8]) -> Binding<'a> {
    Binding::with_context_bytes(tool, context).expect("binding")
}

/// Associated data of a vector that is known to be in range.
pub(crate) fn aad(bytes: &[u8]) -> Aad<'_> {
    Aad::new(bytes).expect("aad")
}

/// A codec that mints under key `id` (as the only, primary key) with the
/// given clock and nonce.
pub(crate) fn minting_codec(
    keys: &[VectorKey],
    id: u32,
    now: u64,
    nonce: &[u8],
    policy: Policy,
) -> Codec {
    let k = keys.iter().find(|k| k.id == id).expect("vector key exists");
    let keyring = Keyring::new([spec_of(k, KeyStatus::Primary)]).expect("one-key keyring");
    Codec::with_parts(keyring, policy, FixedClock(now), Scripted::new(nonce))
}

/// A vector's policy, or the default one: the knobs it gives set on
/// [`Policy::new`], the others left at the crate's defaults (FORMAT.md §8).
pub(crate) fn policy_of(p: Option<VectorPolicy>) -> Policy {
    try_policy(p.unwrap_or_default()).expect("vector policy is within bounds")
}

/// Builds the knobs a policy vector gives on [`Policy::new`].
pub(crate) fn try_policy(p: VectorPolicy) -> Result<Policy, reqstate::InvalidArgument> {
    let mut q = Policy::new();
    if let Some(len) = p.max_token_len {
        q = q.with_max_token_len(len)?;
    }
    if let Some(secs) = p.clock_leeway {
        q = q.with_clock_leeway(Duration::from_secs(secs))?;
    }
    if let Some(secs) = p.max_lifetime {
        q = q.with_max_lifetime(Duration::from_secs(secs))?;
    }
    Ok(q)
}

/// Every knob of a built policy, as a vector writes it.
pub(crate) fn vector_policy(q: &Policy) -> VectorPolicy {
    VectorPolicy {
        max_token_len: Some(q.max_token_len()),
        clock_leeway: Some(q.clock_leeway()),
        max_lifetime: Some(q.max_lifetime()),
    }
}

/// The default policy, as the file's `policy` writes it.
pub(crate) fn default_vector_policy() -> VectorPolicy {
    VectorPolicy {
        max_token_len: Some(Policy::DEFAULT_MAX_TOKEN_LEN),
        clock_leeway: Some(Policy::DEFAULT_CLOCK_LEEWAY),
        max_lifetime: Some(Policy::DEFAULT_MAX_LIFETIME),
    }
}

/// The nonce in an XChaCha20-Poly1305 token (one-byte key id), hex; empty for HMAC.
pub(crate) fn nonce_in(token: &str) -> String {
    use base64::Engine as _;
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .expect("base64url");
    if raw[0] & 0x03 == 2 {
        hex::encode(&raw[2..26])
    } else {
        String::new()
    }
}

/// The random bytes a mint under key `id` draws for the nonce (FORMAT.md
/// §4.2's `r`): 24 bytes from `seed` under XChaCha20-Poly1305, none under HMAC.
pub(crate) fn random_for(keys: &[VectorKey], id: u32, seed: u8) -> Vec<u8> {
    let k = keys.iter().find(|k| k.id == id).expect("vector key exists");
    if k.algorithm == Algorithm::XChaCha20Poly1305.name() {
        (0..24u8)
            .map(|i| i.wrapping_mul(13).wrapping_add(seed))
            .collect()
    } else {
        Vec::new()
    }
}
