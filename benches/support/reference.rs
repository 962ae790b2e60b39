//! The reference claims every benchmark uses (benches/data/reference-claims.json,
//! compiled in) and the bytes a token of them authenticates: shared by
//! benches/tokens.rs (wall clock) and benches/instructions (instruction counts),
//! so that both measure the same floors over the same bytes.

use std::time::Duration;

use reqstate::Algorithm;
use serde::{Deserialize, Serialize};

/// The reference state.
#[derive(Serialize, Deserialize)]
pub(crate) struct Counter {
    pub(crate) current: u64,
    pub(crate) amount: u64,
}

/// The reference claims.
pub(crate) struct Reference {
    pub(crate) tool: String,
    pub(crate) step: String,
    pub(crate) state: Counter,
    pub(crate) ttl: Duration,
    pub(crate) context: Vec<u8>,
}

/// The claims of benches/data/reference-claims.json.
pub(crate) fn reference() -> Reference {
    let v: serde_json::Value = serde_json::from_str(include_str!("../data/reference-claims.json"))
        .expect("benches/data/reference-claims.json is JSON");
    Reference {
        tool: v["tool"].as_str().expect("tool").into(),
        step: v["step"].as_str().expect("step").into(),
        state: serde_json::from_value(v["state"].clone()).expect("state"),
        ttl: Duration::from_secs(v["ttl_seconds"].as_u64().expect("ttl")),
        context: v["context"].as_str().expect("context").as_bytes().to_vec(),
    }
}

/// What `token` (of `r`, under `algorithm`) authenticates: (associated
/// data, claims envelope), as docs/FORMAT.md lays them out: the version and
/// kind/key-id prefix, the length-prefixed tool and context, and the body
/// between the nonce (XChaCha20-Poly1305) and the 16-byte tag.
pub(crate) fn authenticated_bytes(
    r: &Reference,
    algorithm: Algorithm,
    token: &str,
) -> (Vec<u8>, Vec<u8>) {
    use base64::Engine as _;
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .expect("a minted token is base64url");
    let mut ad = raw[..2].to_vec();
    ad.extend_from_slice(&(r.tool.len() as u32).to_be_bytes());
    ad.extend_from_slice(r.tool.as_bytes());
    ad.extend_from_slice(&(r.context.len() as u32).to_be_bytes());
    ad.extend_from_slice(&r.context);
    let body_start = if algorithm == Algorithm::HmacSha256 {
        2
    } else {
        26
    };
    (ad, raw[body_start..raw.len() - 16].to_vec())
}
