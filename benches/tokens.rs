//! Mint and verify of the reference claims (../shared/bench/reference-claims.json)
//! for each algorithm, against the bare `ring` primitives over the same bytes.
//!
//! `cargo bench --bench tokens`; `cargo bench --bench tokens -- --test` runs
//! each benchmark once (the smoke test).

// criterion's macros generate undocumented public functions.
#![allow(missing_docs)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use reqstate::{
    Algorithm, Codec, KeyId, KeySpec, KeyStatus, Keyring, OsRandom, Policy, SecureRandom,
    SystemClock,
};
use ring::{aead, hmac};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
struct Counter {
    current: u64,
    amount: u64,
}

struct Reference {
    tool: String,
    step: String,
    state: Counter,
    ttl: Duration,
    context: Vec<u8>,
}

fn reference() -> Reference {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../shared/bench/reference-claims.json"
    );
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let v: serde_json::Value = serde_json::from_str(&text).expect("reference claims are JSON");
    Reference {
        tool: v["tool"].as_str().expect("tool").into(),
        step: v["step"].as_str().expect("step").into(),
        state: serde_json::from_value(v["state"].clone()).expect("state"),
        ttl: Duration::from_secs(v["ttl_seconds"].as_u64().expect("ttl")),
        context: v["context"].as_str().expect("context").as_bytes().to_vec(),
    }
}

fn codec(algorithm: Algorithm) -> Codec {
    let mut secret = vec![0u8; 32];
    OsRandom::new().fill(&mut secret).expect("random");
    let keyring = Keyring::new([KeySpec {
        id: KeyId::new(1),
        algorithm,
        status: KeyStatus::Primary,
        created_at: None,
        secret: reqstate::Secret::new(secret),
    }])
    .expect("keyring");
    Codec::with_parts(keyring, Policy::new(), SystemClock, OsRandom::new())
}

/// The bytes each construction authenticates for the reference claims:
/// (associated data, claims envelope).
fn authenticated_bytes(r: &Reference, algorithm: Algorithm) -> (Vec<u8>, Vec<u8>) {
    let c = codec(algorithm);
    let token = c
        .mint(&r.tool, &r.step, &r.state, r.ttl, &r.context)
        .expect("mint");
    use base64::Engine as _;
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .expect("b64");
    let prefix = &raw[..2];
    let mut ad = prefix.to_vec();
    ad.extend_from_slice(&(r.tool.len() as u32).to_be_bytes());
    ad.extend_from_slice(r.tool.as_bytes());
    ad.extend_from_slice(&(r.context.len() as u32).to_be_bytes());
    ad.extend_from_slice(&r.context);
    let body_start = if algorithm == Algorithm::HmacSha256 {
        2
    } else {
        26
    };
    let body = raw[body_start..raw.len() - 16].to_vec();
    (ad, body)
}

fn bench(c: &mut Criterion) {
    let r = reference();
    let mut g = c.benchmark_group("reference-claims");

    // The floors: the bare primitives over the same bytes, keys already set up.
    let (ad, body) = authenticated_bytes(&r, Algorithm::HmacSha256);
    let hkey = hmac::Key::new(hmac::HMAC_SHA256, &[7u8; 32]);
    let mut message = ad.clone();
    message.extend_from_slice(&body);
    g.bench_function("floor/hmac-sha256", |b| {
        b.iter(|| hmac::sign(&hkey, black_box(&message)))
    });
    let (ad, body) = authenticated_bytes(&r, Algorithm::XChaCha20Poly1305);
    let ckey = aead::LessSafeKey::new(
        aead::UnboundKey::new(&aead::CHACHA20_POLY1305, &[7u8; 32]).expect("key"),
    );
    g.bench_function("floor/chacha20-poly1305-seal", |b| {
        b.iter(|| {
            let mut buf = body.clone();
            let tag = ckey
                .seal_in_place_separate_tag(
                    aead::Nonce::assume_unique_for_key([0; 12]),
                    aead::Aad::from(black_box(&ad[..])),
                    &mut buf,
                )
                .expect("seal");
            black_box((buf, tag))
        })
    });
    g.bench_function("floor/xchacha20-poly1305-seal", |b| {
        let k = chacha20::Key::from([7u8; 32]);
        b.iter(|| {
            let sub: [u8; 32] = chacha20::hchacha::<chacha20::R20>(&k, &[9u8; 16].into()).into();
            let key = aead::LessSafeKey::new(
                aead::UnboundKey::new(&aead::CHACHA20_POLY1305, &sub).expect("key"),
            );
            let mut buf = body.clone();
            let tag = key
                .seal_in_place_separate_tag(
                    aead::Nonce::assume_unique_for_key([0; 12]),
                    aead::Aad::from(black_box(&ad[..])),
                    &mut buf,
                )
                .expect("seal");
            black_box((buf, tag))
        })
    });
    let random = OsRandom::new();
    g.bench_function("floor/os-random-24-bytes", |b| {
        b.iter(|| {
            let mut n = [0u8; 24];
            random.fill(&mut n).expect("random");
            black_box(n)
        })
    });

    for algorithm in Algorithm::ALL {
        let codec = codec(algorithm);
        let token = codec
            .mint(&r.tool, &r.step, &r.state, r.ttl, &r.context)
            .expect("mint");
        println!("{algorithm}: reference token is {} characters", token.len());
        g.bench_function(format!("reqstate/{algorithm}/mint"), |b| {
            b.iter(|| {
                codec
                    .mint(
                        black_box(&r.tool),
                        &r.step,
                        black_box(&r.state),
                        r.ttl,
                        &r.context,
                    )
                    .expect("mint")
            })
        });
        g.bench_function(format!("reqstate/{algorithm}/verify"), |b| {
            b.iter(|| {
                codec
                    .verify::<Counter>(black_box(&token), &r.tool, &r.context)
                    .expect("verify")
            })
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = bench
}
criterion_main!(benches);
