//! Fuzz target `claims_cbor`: arbitrary bytes inside genuinely authenticated
//! tokens, so that the claims envelope parser, the CBOR walker and state
//! decoding run on them (they only ever see bytes that passed the tag).
//!
//! The harness derives the working key from a fixed secret with HKDF-SHA256
//! (ring) and builds HMAC-SHA256 tokens itself, from docs/FORMAT.md §1, §3 and
//! §4 alone, then verifies them with the codec. Four uses of each input:
//!
//! 1. the bytes as the whole claims body;
//! 2. the bytes as the state item of a well-formed envelope (issued now,
//!    600 s, step "confirm"), decoded into several Rust types;
//! 3. the bytes decoded with ciborium, when they parse, minted as a state
//!    under HMAC and XChaCha20-Poly1305 keys and verified back;
//! 4. an `arbitrary`-built CBOR value and step, minted and verified back.
//!
//! Asserts: nothing panics; a token built from the spec never fails
//! authentication (the harness and the core agree on §1-§4), and fails it
//! under another context; a body fails only with a claims-level refusal
//! (malformed, lifetime, time window, step, state decoding); a verified token's
//! times and step respect the policy; verifying for the step a token carries
//! accepts it; the fast state decoder (cbor4ii) never
//! returns a value different from ciborium's on the same bytes; any value of
//! depth <= 16 mints, and every minted value verifies back to an equal value
//! (NaN equal to NaN) with the same step, under both algorithms. "Equal" is
//! up to one documented ciborium behaviour: a bignum tag (2/3) over at most 16
//! bytes reads back as an integer, or is refused at 2^127 and beyond (see
//! `ciborium_read_back`, README.md "Findings", artifacts-found/).
#![no_main]

use std::collections::BTreeMap;
use std::sync::OnceLock;
use std::time::Duration;

use arbitrary::{Arbitrary, Unstructured};
use libfuzzer_sys::fuzz_target;
use reqstate::{
    Aad, Algorithm, Codec, KeyStatus, Keyring, MintError, Policy, Refusal, MAX_STATE_DEPTH,
};
use reqstate_fuzz::{
    binding, codec, depth, envelope, fuzz_secret, hmac_token, roomy_policy, same_value, spec,
    vector_binding, working_key, CONTEXT, NOW, TOOL,
};
use serde::Deserialize;

/// The HMAC codec (key 1 primary) and XChaCha codec (key 2 primary), the
/// 1 MiB token limit, and the HMAC key's working key computed by the harness.
struct Fixture {
    hmac: Codec,
    xchacha: Codec,
    k1: [u8; 32],
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let secret = fuzz_secret(1);
        let hmac = Keyring::new([spec(1, Algorithm::HmacSha256, KeyStatus::Primary, &secret)])
            .expect("valid keyring");
        let xchacha = Keyring::new([spec(
            2,
            Algorithm::XChaCha20Poly1305,
            KeyStatus::Primary,
            &fuzz_secret(2),
        )])
        .expect("valid keyring");
        Fixture {
            hmac: codec(hmac, roomy_policy()),
            xchacha: codec(xchacha, roomy_policy()),
            k1: working_key(&secret, "hmac-sha256"),
        }
    })
}

/// A struct state like the README's.
#[derive(Deserialize, Debug)]
#[allow(dead_code)]
struct Counter {
    current: u64,
    amount: u64,
}

/// A state of many shapes.
#[derive(Deserialize, Debug)]
#[allow(dead_code)]
enum Shape {
    Unit,
    Newtype(String),
    Tuple(i64, Option<f64>),
    Struct { items: Vec<Option<bool>>, bytes: Vec<u8> },
}

/// Refusals a genuine token can fail with once authenticated.
fn claims_level(e: &Refusal) -> bool {
    matches!(
        e,
        Refusal::Malformed(_)
            | Refusal::LifetimeTooLong { .. }
            | Refusal::NotYetValid { .. }
            | Refusal::Expired { .. }
            | Refusal::WrongStep { .. }
            | Refusal::StateDecoding(_)
    )
}

fn check_verified<T>(v: &reqstate::Verified<T>, policy: &Policy) {
    assert!(v.expires_at > v.issued_at);
    assert!(v.expires_at - v.issued_at <= policy.max_lifetime());
    assert!(v.issued_at <= NOW + policy.clock_leeway());
    assert!(NOW < v.expires_at.saturating_add(policy.clock_leeway()));
    assert!(!v.step.is_empty() && v.step.len() <= 256);
}

/// Verifies a spec-built token as `T`; returns the result after the checks
/// every genuine token must pass.
fn verify_as<T: serde::de::DeserializeOwned>(token: &str) -> Result<reqstate::Verified<T>, Refusal> {
    let f = fixture();
    let r = f.hmac.verify::<T>(token, vector_binding().any_step());
    match &r {
        Ok(v) => check_verified(v, f.hmac.policy()),
        Err(e) => {
            assert!(claims_level(e), "a genuine token failed before its claims: {e:?}");
            let _ = e.to_string();
        }
    }
    r
}

/// Use 1: the input is the whole claims body.
fn body(data: &[u8]) {
    let f = fixture();
    let token = hmac_token(&f.k1, 1, 0, TOOL.as_bytes(), CONTEXT, data);
    let value = verify_as::<ciborium::Value>(&token);
    // The same step check as verify, when the body has one.
    if let Ok(v) = &value {
        let stepped = f.hmac.verify::<ciborium::Value>(&token, vector_binding().step(&v.step));
        assert!(stepped.is_ok(), "verify for its own step refused it: {stepped:?}");
    }
    let _ = verify_as::<Counter>(&token);
    // Bound to the context: the same bytes under another context never pass.
    assert_eq!(
        f.hmac.verify::<ciborium::Value>(&token, binding(TOOL, b"another caller").any_step()).err(),
        Some(Refusal::AuthenticationFailed)
    );
    // The sealed kind under the same construction returns the body as is.
    let sealed = hmac_token(&f.k1, 1, 1, b"", CONTEXT, data);
    let aad = Aad::new(CONTEXT).expect("the vectors' context is a valid aad");
    assert_eq!(f.hmac.unseal(&sealed, aad).map(|u| u.payload).as_deref(), Ok(data));
}

/// Use 2: the input is the state item of a well-formed envelope.
fn state(data: &[u8]) {
    let f = fixture();
    let token = hmac_token(
        &f.k1,
        1,
        0,
        TOOL.as_bytes(),
        CONTEXT,
        &envelope(NOW, 600, "confirm", data),
    );
    let only_state = |e: &Refusal| matches!(e, Refusal::Malformed(_) | Refusal::StateDecoding(_));
    match verify_as::<ciborium::Value>(&token) {
        Ok(v) => {
            assert_eq!((v.step.as_str(), v.issued_at, v.expires_at), ("confirm", NOW, NOW + 600));
            // The fast path (cbor4ii, then ciborium on failure) must agree
            // with ciborium alone whenever ciborium reads the bytes.
            if let Ok(reference) = ciborium::from_reader::<ciborium::Value, _>(data) {
                assert!(
                    same_value(&v.state, &reference),
                    "state decoders disagree: verify gave {:?}, ciborium {:?}",
                    v.state,
                    reference
                );
            }
        }
        Err(e) => assert!(only_state(&e), "{e:?}"),
    }
    macro_rules! decode_as {
        ($t:ty) => {
            match verify_as::<$t>(&token) {
                Ok(v) => {
                    if let Ok(reference) = ciborium::from_reader::<$t, _>(data) {
                        assert_eq!(
                            format!("{:?}", v.state),
                            format!("{:?}", reference),
                            concat!("state decoders disagree on ", stringify!($t))
                        );
                    }
                }
                Err(e) => assert!(only_state(&e), "{e:?}"),
            }
        };
    }
    decode_as!(serde_json::Value);
    decode_as!(String);
    decode_as!(Vec<u8>);
    decode_as!(u64);
    decode_as!(i128);
    decode_as!(f64);
    decode_as!(Counter);
    decode_as!(Shape);
    decode_as!(Option<BTreeMap<String, Vec<u32>>>);
}

/// What ciborium returns when it reads back the CBOR it wrote for `v`, or
/// `None` when it refuses to read it. ciborium's `deserialize_any` turns a
/// bignum tag (2 or 3) over a definite byte string of at most 16 bytes into
/// an integer (ciborium-0.2.2 src/de/mod.rs, `Header::Tag`), and refuses a
/// tag-3 bignum whose magnitude is 2^127 or more ("integer too large"). So a
/// `Value` with such a tag does not survive mint → verify unchanged; see
/// README.md "Findings" and artifacts-found/. Everything else must.
fn ciborium_read_back(v: &ciborium::Value) -> Option<ciborium::Value> {
    use ciborium::Value as V;
    Some(match v {
        V::Tag(tag @ (2 | 3), inner) if matches!(&**inner, V::Bytes(b) if b.len() <= 16) => {
            let V::Bytes(b) = &**inner else { unreachable!() };
            let raw = b.iter().fold(0u128, |n, &byte| (n << 8) | u128::from(byte));
            if *tag == 2 {
                V::from(raw)
            } else {
                V::from(i128::try_from(raw).ok()? ^ !0)
            }
        }
        V::Tag(tag, inner) => V::Tag(*tag, Box::new(ciborium_read_back(inner)?)),
        V::Array(items) => V::Array(items.iter().map(ciborium_read_back).collect::<Option<_>>()?),
        V::Map(entries) => V::Map(
            entries
                .iter()
                .map(|(k, v)| Some((ciborium_read_back(k)?, ciborium_read_back(v)?)))
                .collect::<Option<_>>()?,
        ),
        other => other.clone(),
    })
}

/// Mints `value` at `step` under both algorithms and checks it verifies back
/// to an equal value (up to ciborium's bignum reading, above).
fn round_trip(value: &ciborium::Value, step: &str) {
    let f = fixture();
    let expected = ciborium_read_back(value);
    let bound = vector_binding();
    for codec in [&f.hmac, &f.xchacha] {
        let minted = codec.mint(bound, step, value, Duration::from_secs(600));
        let token = match minted {
            Ok(minted) => minted.token,
            Err(MintError::StateEncoding(_)) if depth(value) > MAX_STATE_DEPTH => continue,
            Err(MintError::TooLarge { .. }) => continue,
            Err(e) => panic!("minting {value:?} at step {step:?} failed: {e:?}"),
        };
        assert!(
            depth(value) <= MAX_STATE_DEPTH,
            "a state {} levels deep was minted",
            depth(value)
        );
        let back = codec.verify::<ciborium::Value>(&token, bound.step(step));
        let Some(expected) = &expected else {
            assert!(
                matches!(back, Err(Refusal::StateDecoding(_))),
                "ciborium refuses {value:?}, verify gave {back:?}"
            );
            continue;
        };
        let back = back.unwrap_or_else(|e| panic!("minted {value:?} does not verify: {e:?}"));
        assert!(
            same_value(&back.state, expected),
            "round trip changed the state: minted {value:?}, expected {expected:?}, verified {:?}",
            back.state
        );
        assert_eq!(back.step, step);
    }
}

/// A CBOR value built by `arbitrary`, turned into a `ciborium::Value` with its
/// nesting capped a little above the limit.
#[derive(Arbitrary, Debug)]
enum ArbValue {
    Uint(u64),
    Int(i64),
    BigNegative(u64),
    Bytes(Vec<u8>),
    Text(String),
    Float(f64),
    Bool(bool),
    Null,
    Tag(u64, Box<ArbValue>),
    Array(Vec<ArbValue>),
    Map(Vec<(ArbValue, ArbValue)>),
}

impl ArbValue {
    fn to_value(&self, budget: usize) -> ciborium::Value {
        use ciborium::Value as V;
        if budget == 0 {
            return V::Null;
        }
        match self {
            ArbValue::Uint(n) => V::Integer((*n).into()),
            ArbValue::Int(n) => V::Integer((*n).into()),
            // -1 - n: CBOR major type 1 reaches -2^64.
            ArbValue::BigNegative(n) => V::Integer(
                ciborium::value::Integer::try_from(-1i128 - i128::from(*n))
                    .expect("CBOR negative integers reach -2^64"),
            ),
            ArbValue::Bytes(b) => V::Bytes(b.clone()),
            ArbValue::Text(s) => V::Text(s.clone()),
            ArbValue::Float(x) => V::Float(*x),
            ArbValue::Bool(b) => V::Bool(*b),
            ArbValue::Null => V::Null,
            ArbValue::Tag(t, inner) => V::Tag(*t, Box::new(inner.to_value(budget - 1))),
            ArbValue::Array(items) => V::Array(items.iter().map(|i| i.to_value(budget - 1)).collect()),
            ArbValue::Map(entries) => V::Map(
                entries
                    .iter()
                    .map(|(k, v)| (k.to_value(budget - 1), v.to_value(budget - 1)))
                    .collect(),
            ),
        }
    }
}

fuzz_target!(|data: &[u8]| {
    body(data);
    state(data);

    // Use 3: whatever ciborium reads from the input, minted and verified back.
    if let Ok(value) = ciborium::from_reader::<ciborium::Value, _>(data) {
        round_trip(&value, "confirm");
    }

    // Use 4: an arbitrary value and step.
    let mut u = Unstructured::new(data);
    if let (Ok(value), Ok(step)) = (ArbValue::arbitrary(&mut u), String::arbitrary(&mut u)) {
        let step = if step.is_empty() || step.len() > 256 { "confirm".to_string() } else { step };
        round_trip(&value.to_value(MAX_STATE_DEPTH + 2), &step);
    }
});
