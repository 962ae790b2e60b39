//! Mint and verify of the reference claims (benches/data/reference-claims.json)
//! for each algorithm, against the bare primitives over the same bytes: the
//! HMAC-SHA256 the crate uses (RustCrypto's, keyed state precomputed) and
//! ring's beside it, ring's ChaCha20-Poly1305 and the XChaCha20 construction.
//!
//! `cargo bench -p reqstate-benches --bench tokens`; `cargo bench -p reqstate-benches --bench tokens -- --test` runs
//! each benchmark once (the smoke test).

// criterion's macros generate undocumented public functions.
#![allow(missing_docs)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use reqstate::{
    Algorithm, Binding, BufferedRandom, Codec, KeyId, KeySpec, KeyStatus, Keyring, OsRandom,
    Policy, SecureRandom, SystemClock,
};
use ring::{aead, hmac};
use serde::{Deserialize, Serialize};

#[path = "support/reference.rs"]
mod reference;
use reference::{Counter, Reference, authenticated_bytes, reference};

/// The binding of a tool and context bytes, checked as `Binding` checks them.
/// Every mint and verify measured below builds it per call, as a server does
/// per request (and as `mint` and `verify` checked the tool and context
/// themselves before `Binding` existed).
fn binding<'a>(tool: &'a str, context: &'a [u8]) -> Binding<'a> {
    Binding::with_context_bytes(tool, context).expect("binding")
}

fn codec(algorithm: Algorithm) -> Codec {
    let mut secret = vec![0u8; 32];
    OsRandom::new().fill(&mut secret).expect("random");
    let keyring = Keyring::new([KeySpec::new(
        KeyId::new(1),
        algorithm,
        KeyStatus::Primary,
        reqstate::Secret::new(secret),
    )])
    .expect("keyring");
    Codec::with_parts(keyring, Policy::new(), SystemClock, BufferedRandom)
}

/// The bytes each construction authenticates for the reference claims:
/// (associated data, claims envelope).
fn floor_bytes(r: &Reference, algorithm: Algorithm) -> (Vec<u8>, Vec<u8>) {
    let token = codec(algorithm)
        .mint(binding(&r.tool, &r.context), &r.step, &r.state, r.ttl)
        .expect("mint")
        .token;
    authenticated_bytes(r, algorithm, &token)
}

/// The bare primitives over exactly the bytes reqstate authenticates for the
/// reference claims, keys set up once: the floors every ratio uses.
struct Floors {
    /// ring's HMAC-SHA256 key (pads precomputed), for comparison.
    ring_hmac_key: hmac::Key,
    /// RustCrypto's HMAC-SHA256 keyed state, as the crate holds a token key
    /// (and the hedge's key): the HMAC floor.
    hmac_key: ::hmac::Hmac<::sha2::Sha256>,
    /// The HMAC input of the hedged nonce: r ‖ A ‖ body (FORMAT.md §4.2).
    hedge_message: Vec<u8>,
    /// The hedge's key, as the crate holds it (RustCrypto HMAC-SHA256).
    hedge_key: ::hmac::Hmac<::sha2::Sha256>,
    hmac_message: Vec<u8>,
    chacha_key: aead::LessSafeKey,
    ad: Vec<u8>,
    body: Vec<u8>,
}

impl Floors {
    fn new(r: &Reference) -> Self {
        let (ad, body) = floor_bytes(r, Algorithm::HmacSha256);
        let mut hmac_message = ad;
        hmac_message.extend_from_slice(&body);
        let (ad, body) = floor_bytes(r, Algorithm::XChaCha20Poly1305);
        let mut hedge_message = vec![3u8; 24];
        hedge_message.extend_from_slice(&ad);
        hedge_message.extend_from_slice(&body);
        Floors {
            ring_hmac_key: hmac::Key::new(hmac::HMAC_SHA256, &[7u8; 32]),
            hmac_key: <::hmac::Hmac<::sha2::Sha256> as ::hmac::KeyInit>::new_from_slice(&[7u8; 32])
                .expect("key"),
            hedge_message,
            hedge_key: <::hmac::Hmac<::sha2::Sha256> as ::hmac::KeyInit>::new_from_slice(
                &[7u8; 32],
            )
            .expect("key"),
            hmac_message,
            chacha_key: aead::LessSafeKey::new(
                aead::UnboundKey::new(&aead::CHACHA20_POLY1305, &[7u8; 32]).expect("key"),
            ),
            ad,
            body,
        }
    }

    /// HMAC-SHA256 of the HMAC token's authenticated bytes, as the crate
    /// computes it (RustCrypto, a clone of the keyed state): the HMAC floor.
    fn hmac(&self) -> [u8; 32] {
        use ::hmac::Mac as _;
        let mut mac = self.hmac_key.clone();
        mac.update(black_box(&self.hmac_message));
        mac.finalize().into_bytes().into()
    }

    /// The same HMAC-SHA256 with ring, for comparison.
    fn ring_hmac(&self) -> hmac::Tag {
        hmac::sign(&self.ring_hmac_key, black_box(&self.hmac_message))
    }

    /// The hedged nonce's HMAC alone (FORMAT.md §4.2), what hedging adds to an
    /// XChaCha20-Poly1305 mint.
    fn hedge(&self) -> [u8; 32] {
        use ::hmac::Mac as _;
        let mut mac = self.hedge_key.clone();
        mac.update(black_box(&self.hedge_message));
        mac.finalize().into_bytes().into()
    }

    /// ChaCha20-Poly1305 seal of the claims under one reused key.
    fn chacha_seal(&self) -> (Vec<u8>, aead::Tag) {
        Self::seal(&self.chacha_key, &self.ad, &self.body)
    }

    /// The XChaCha20-Poly1305 construction: HChaCha20 subkey, key setup, seal.
    fn xchacha_seal(&self) -> (Vec<u8>, aead::Tag) {
        let k = chacha20::Key::from([7u8; 32]);
        let sub: [u8; 32] = chacha20::hchacha::<chacha20::R20>(&k, &[9u8; 16].into()).into();
        let key = aead::LessSafeKey::new(
            aead::UnboundKey::new(&aead::CHACHA20_POLY1305, &sub).expect("key"),
        );
        Self::seal(&key, &self.ad, &self.body)
    }

    fn seal(key: &aead::LessSafeKey, ad: &[u8], body: &[u8]) -> (Vec<u8>, aead::Tag) {
        let mut buf = body.to_vec();
        let tag = key
            .seal_in_place_separate_tag(
                aead::Nonce::assume_unique_for_key([0; 12]),
                aead::Aad::from(black_box(ad)),
                &mut buf,
            )
            .expect("seal");
        (buf, tag)
    }
}

fn bench(c: &mut Criterion) {
    let r = reference();
    let mut g = c.benchmark_group("reference-claims");

    // The floors: the bare primitives over the same bytes, keys already set up.
    let floors = Floors::new(&r);
    g.bench_function("floor/hmac-sha256", |b| b.iter(|| floors.hmac()));
    g.bench_function("floor/hmac-sha256-ring", |b| b.iter(|| floors.ring_hmac()));
    g.bench_function("floor/chacha20-poly1305-seal", |b| {
        b.iter(|| floors.chacha_seal())
    });
    g.bench_function("floor/xchacha20-poly1305-seal", |b| {
        b.iter(|| floors.xchacha_seal())
    });
    let random = OsRandom::new();
    g.bench_function("floor/hedged-nonce-hmac", |b| b.iter(|| floors.hedge()));
    g.bench_function("floor/os-random-24-bytes", |b| {
        b.iter(|| {
            let mut n = [0u8; 24];
            random.fill(&mut n).expect("random");
            black_box(n)
        })
    });

    g.bench_function("floor/buffered-random-24-bytes", |b| {
        b.iter(|| {
            let mut n = [0u8; 24];
            BufferedRandom.fill(&mut n).expect("random");
            black_box(n)
        })
    });

    g.bench_function("floor/buffered-random-hedge-24-bytes (no getpid)", |b| {
        b.iter(|| {
            let mut n = [0u8; 24];
            BufferedRandom.fill_hedge(&mut n).expect("random");
            black_box(n)
        })
    });

    for algorithm in Algorithm::ALL {
        let codec = codec(algorithm);
        let token = codec
            .mint(binding(&r.tool, &r.context), &r.step, &r.state, r.ttl)
            .expect("mint")
            .token;
        println!("{algorithm}: reference token is {} characters", token.len());
        g.bench_function(format!("reqstate/{algorithm}/mint"), |b| {
            b.iter(|| {
                codec
                    .mint(
                        binding(black_box(&r.tool), &r.context),
                        &r.step,
                        black_box(&r.state),
                        r.ttl,
                    )
                    .expect("mint")
                    .token
            })
        });
        g.bench_function(format!("reqstate/{algorithm}/verify"), |b| {
            b.iter(|| {
                codec
                    .verify::<Counter>(black_box(&token), binding(&r.tool, &r.context).any_step())
                    .expect("verify")
            })
        });
    }
    g.finish();
}

// ---- The peers a user would pick instead, each used as its docs recommend,
// ---- carrying the same claims and binding the same context where it can.

#[derive(Serialize, Deserialize)]
struct PeerPayload {
    step: String,
    state: Counter,
}

#[derive(Serialize, Deserialize)]
struct JwtClaims {
    sub: String,
    aud: String,
    tool: String,
    step: String,
    state: Counter,
    iat: u64,
    exp: u64,
}

/// One contender: how it mints, how it verifies, and a token to verify.
struct Contender {
    name: &'static str,
    mint: Box<dyn Fn() -> String>,
    verify: Box<dyn Fn(&str)>,
}

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs()
}

fn contenders(r: &Reference) -> Vec<Contender> {
    let mut out = Vec::new();
    for algorithm in Algorithm::ALL {
        let c = codec(algorithm);
        let (c2, tool, step, ttl, ctx) = (
            c.clone(),
            r.tool.clone(),
            r.step.clone(),
            r.ttl,
            r.context.clone(),
        );
        let state = Counter {
            current: r.state.current,
            amount: r.state.amount,
        };
        let (tool2, ctx2) = (tool.clone(), ctx.clone());
        out.push(Contender {
            name: if algorithm == Algorithm::HmacSha256 {
                "reqstate hmac-sha256"
            } else {
                "reqstate xchacha20-poly1305"
            },
            mint: Box::new(move || {
                c.mint(binding(&tool, &ctx), &step, &state, ttl)
                    .expect("mint")
                    .token
            }),
            verify: Box::new(move |t| {
                black_box(
                    c2.verify::<Counter>(t, binding(&tool2, &ctx2).any_step())
                        .expect("verify"),
                );
            }),
        });
    }

    // jsonwebtoken HS256: context as sub/aud claims, checked by Validation.
    {
        let secret = [7u8; 32];
        let enc = jsonwebtoken::EncodingKey::from_secret(&secret).expect("jwt key");
        let dec = jsonwebtoken::DecodingKey::from_secret(&secret).expect("jwt key");
        let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::HS256);
        validation.set_audience(&["counter-server"]);
        validation.sub = Some("user-42".into());
        let (tool, step, ttl) = (r.tool.clone(), r.step.clone(), r.ttl.as_secs());
        let state = (r.state.current, r.state.amount);
        out.push(Contender {
            name: "jsonwebtoken HS256",
            mint: Box::new(move || {
                let iat = now_secs();
                let claims = JwtClaims {
                    sub: "user-42".into(),
                    aud: "counter-server".into(),
                    tool: tool.clone(),
                    step: step.clone(),
                    state: Counter {
                        current: state.0,
                        amount: state.1,
                    },
                    iat,
                    exp: iat + ttl,
                };
                jsonwebtoken::encode(&jsonwebtoken::Header::default(), &claims, &enc).expect("jwt")
            }),
            verify: Box::new(move |t| {
                black_box(
                    jsonwebtoken::decode::<JwtClaims>(t, &dec, &validation).expect("jwt verify"),
                );
            }),
        });
    }

    // rmcp's RequestStateCodec: JSON state, tool + context as associated data, TTL.
    {
        let codec = std::rc::Rc::new(
            rmcp::model::RequestStateCodec::try_new(vec![7u8; 32]).expect("rmcp key"),
        );
        let codec2 = codec.clone();
        let mut ad = r.tool.as_bytes().to_vec();
        ad.extend_from_slice(&r.context);
        let ad2 = ad.clone();
        let (step, ttl) = (r.step.clone(), r.ttl);
        let state = (r.state.current, r.state.amount);
        out.push(Contender {
            name: "rmcp RequestStateCodec",
            mint: Box::new(move || {
                let payload = PeerPayload {
                    step: step.clone(),
                    state: Counter {
                        current: state.0,
                        amount: state.1,
                    },
                };
                let options = rmcp::model::SealOptions::new()
                    .associated_data(&ad)
                    .ttl(ttl);
                codec.seal_json_with(&payload, &options).expect("rmcp seal")
            }),
            verify: Box::new(move |t| {
                black_box(
                    codec2
                        .open_json_with::<PeerPayload>(t, &ad2)
                        .expect("rmcp open"),
                );
            }),
        });
    }

    // pasetors v4.local: claims with expiry, tool + context as implicit assertion.
    {
        let key = std::rc::Rc::new(
            pasetors::keys::SymmetricKey::<pasetors::version4::V4>::from(&[7u8; 32])
                .expect("paseto key"),
        );
        let key2 = key.clone();
        let mut implicit = r.tool.as_bytes().to_vec();
        implicit.extend_from_slice(&r.context);
        let implicit2 = implicit.clone();
        let (step, ttl) = (r.step.clone(), r.ttl);
        let state = (r.state.current, r.state.amount);
        out.push(Contender {
            name: "pasetors v4.local",
            mint: Box::new(move || {
                let mut claims = pasetors::claims::Claims::new_expires_in(&ttl).expect("claims");
                claims.add_additional("step", step.clone()).expect("step");
                claims
                    .add_additional(
                        "state",
                        serde_json::json!({"current": state.0, "amount": state.1}),
                    )
                    .expect("state");
                pasetors::local::encrypt(&key, &claims, None, Some(&implicit)).expect("paseto")
            }),
            verify: Box::new(move |t| {
                let rules = pasetors::claims::ClaimsValidationRules::new();
                let untrusted = pasetors::token::UntrustedToken::<
                    pasetors::Local,
                    pasetors::version4::V4,
                >::try_from(t)
                .expect("paseto parse");
                black_box(
                    pasetors::local::decrypt(&key2, &untrusted, &rules, None, Some(&implicit2))
                        .expect("paseto verify"),
                );
            }),
        });
    }

    // Branca: XChaCha20-Poly1305 over a JSON payload, TTL on decode; no associated data.
    {
        let key = [7u8; 32];
        let (step, ttl) = (r.step.clone(), r.ttl.as_secs() as u32);
        let state = (r.state.current, r.state.amount);
        out.push(Contender {
            name: "branca",
            mint: Box::new(move || {
                let payload = PeerPayload {
                    step: step.clone(),
                    state: Counter {
                        current: state.0,
                        amount: state.1,
                    },
                };
                let json = serde_json::to_vec(&payload).expect("json");
                branca::Branca::new(&key)
                    .expect("branca key")
                    .encode(&json)
                    .expect("branca")
            }),
            verify: Box::new(move |t| {
                let bytes = branca::Branca::new(&key)
                    .expect("branca key")
                    .decode(t, ttl)
                    .expect("branca decode");
                black_box(serde_json::from_slice::<PeerPayload>(&bytes).expect("json"));
            }),
        });
    }

    // Fernet: AES-128-CBC + HMAC-SHA256 over a JSON payload, TTL on decrypt.
    {
        let f = std::rc::Rc::new(
            fernet::Fernet::new(&fernet::Fernet::generate_key()).expect("fernet key"),
        );
        let f2 = f.clone();
        let (step, ttl) = (r.step.clone(), r.ttl.as_secs());
        let state = (r.state.current, r.state.amount);
        out.push(Contender {
            name: "fernet",
            mint: Box::new(move || {
                let payload = PeerPayload {
                    step: step.clone(),
                    state: Counter {
                        current: state.0,
                        amount: state.1,
                    },
                };
                f.encrypt(&serde_json::to_vec(&payload).expect("json"))
            }),
            verify: Box::new(move |t| {
                let bytes = f2.decrypt_with_ttl(t, ttl).expect("fernet decrypt");
                black_box(serde_json::from_slice::<PeerPayload>(&bytes).expect("json"));
            }),
        });
    }
    out
}

fn bench_peers(c: &mut Criterion) {
    let r = reference();
    let mut g = c.benchmark_group("peers");
    for contender in contenders(&r) {
        let token = (contender.mint)();
        g.bench_function(format!("{}/mint", contender.name), |b| {
            b.iter(|| black_box((contender.mint)()))
        });
        g.bench_function(format!("{}/verify", contender.name), |b| {
            b.iter(|| (contender.verify)(&token))
        });
    }
    g.finish();
}

/// Median nanoseconds per call of `f`, over `rounds` rounds of `n` calls.
fn median_ns(n: u32, rounds: usize, mut f: impl FnMut()) -> f64 {
    for _ in 0..n / 4 {
        f();
    }
    let mut samples: Vec<f64> = (0..rounds)
        .map(|_| {
            let start = std::time::Instant::now();
            for _ in 0..n {
                f();
            }
            start.elapsed().as_nanos() as f64 / f64::from(n)
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

/// The side-by-side table of docs/BENCHMARKS.md, printed after criterion's runs.
fn summary(_: &mut Criterion) {
    let quick = std::env::args().any(|a| a == "--test");
    let (n, rounds) = if quick { (10, 1) } else { (20_000, 9) };
    let r = reference();
    let floors = Floors::new(&r);
    let floor_hmac = median_ns(n, rounds, || {
        black_box(floors.hmac());
    });
    let floor_ring_hmac = median_ns(n, rounds, || {
        black_box(floors.ring_hmac());
    });
    let floor_aead = median_ns(n, rounds, || {
        let _ = black_box(floors.chacha_seal());
    });
    let floor_xchacha = median_ns(n, rounds, || {
        let _ = black_box(floors.xchacha_seal());
    });
    let floor_hedge = median_ns(n, rounds, || {
        black_box(floors.hedge());
    });
    let rows: Vec<(&str, f64, f64, usize)> = contenders(&r)
        .into_iter()
        .map(|c| {
            let token = (c.mint)();
            let mint = median_ns(n, rounds, || {
                black_box((c.mint)());
            });
            let verify = median_ns(n, rounds, || (c.verify)(&token));
            (c.name, mint, verify, token.len())
        })
        .collect();
    println!("\nReference claims, median of {rounds} rounds of {n} calls (ns per call):\n");
    println!(
        "| implementation | mint ns | verify ns | round trip ns | token chars | mint / floor | verify / floor |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    println!(
        "| floor: bare HMAC-SHA256 (RustCrypto, as the crate; the HMAC ratios' floor) over the same bytes | {floor_hmac:.0} | {floor_hmac:.0} | | | | |"
    );
    println!(
        "| bare HMAC-SHA256 (ring) over the same bytes, for comparison | {floor_ring_hmac:.0} | {floor_ring_hmac:.0} | | | | |"
    );
    println!(
        "| floor: bare ChaCha20-Poly1305 seal (ring) over the same bytes | {floor_aead:.0} | {floor_aead:.0} | | | | |"
    );
    println!(
        "| floor: XChaCha20-Poly1305 construction (HChaCha20 subkey + key setup + seal) | {floor_xchacha:.0} | {floor_xchacha:.0} | | | | |"
    );
    println!(
        "| floor: the nonce hedge alone, HMAC-SHA256 (RustCrypto, as the crate) over r, A and body | {floor_hedge:.0} | | | | | |"
    );
    for (name, mint, verify, len) in &rows {
        let floor = if name.contains("hmac") {
            floor_hmac
        } else {
            floor_aead
        };
        let ratios = if name.starts_with("reqstate") {
            format!("{:.2}x | {:.2}x", mint / floor, verify / floor)
        } else {
            " | ".into()
        };
        println!(
            "| {name} | {mint:.0} | {verify:.0} | {:.0} | {len} | {ratios} |",
            mint + verify
        );
    }
    if let Some((_, mint, verify, _)) = rows.iter().find(|r| r.0.contains("xchacha")) {
        println!(
            "\nreqstate xchacha20-poly1305 against the construction: mint {:.2}x, verify {:.2}x (target: mint within 2x)",
            mint / floor_xchacha,
            verify / floor_xchacha
        );
    }
    println!(
        "\nRound-trip speed-up of reqstate over each peer (peer round trip / reqstate round trip):\n"
    );
    println!("| peer | vs reqstate hmac-sha256 | vs reqstate xchacha20-poly1305 |");
    println!("|---|---:|---:|");
    let ours: Vec<f64> = rows.iter().take(2).map(|(_, m, v, _)| m + v).collect();
    for (name, mint, verify, _) in rows.iter().skip(2) {
        let theirs = mint + verify;
        println!(
            "| {name} | {:.2}x | {:.2}x |",
            theirs / ours[0],
            theirs / ours[1]
        );
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = bench, bench_peers, summary
}
criterion_main!(benches);
