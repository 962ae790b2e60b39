//! Property tests: arbitrary claims round-trip, and arbitrary input never
//! panics or verifies.

use std::time::Duration;

use proptest::prelude::*;
use reqstate::{
    Aad, Algorithm, Binding, Codec, FixedClock, KeyId, KeySpec, KeyStatus, Keyring, OsRandom,
    Policy, Secret,
};

const NOW: u64 = 1_764_460_800;

fn codec(algorithm: Algorithm) -> Codec {
    let keyring = Keyring::new([KeySpec::new(
        KeyId::new(3),
        algorithm,
        KeyStatus::Primary,
        Secret::new(vec![0x42; 32]),
    )])
    .expect("keyring");
    Codec::with_parts(keyring, Policy::new(), FixedClock(NOW), OsRandom::new())
}

/// The binding of `tool` to `context` bytes.
fn bind<'a>(tool: &'a str, context: &'a [u8]) -> Binding<'a> {
    Binding::with_context_bytes(tool, context).expect("binding")
}

fn json_value() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        any::<u64>().prop_map(serde_json::Value::from),
        ".{0,20}".prop_map(serde_json::Value::from),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(serde_json::Value::from),
            prop::collection::btree_map(".{0,8}", inner, 0..6)
                .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn minted_tokens_verify_to_the_same_claims(
        hmac in any::<bool>(),
        tool in "[a-z][a-z0-9_-]{0,40}",
        step in ".{1,30}",
        state in json_value(),
        ttl in 1u64..=86_400,
        context in prop::collection::vec(any::<u8>(), 0..100),
    ) {
        let algorithm = if hmac { Algorithm::HmacSha256 } else { Algorithm::XChaCha20Poly1305 };
        let c = codec(algorithm);
        let binding = bind(&tool, &context);
        let minted = c.mint(binding, &step, &state, Duration::from_secs(ttl)).unwrap();
        prop_assert_eq!(minted.issued_at, NOW);
        prop_assert_eq!(minted.expires_at, NOW + ttl);
        prop_assert_eq!(minted.key_id, KeyId::new(3));
        let got = c.verify::<serde_json::Value>(&minted.token, binding.step(&step)).unwrap();
        prop_assert_eq!(&got.state, &state);
        prop_assert_eq!(&got.step, &step);
        prop_assert_eq!(got.issued_at, NOW);
        prop_assert_eq!(got.expires_at, NOW + ttl);
        prop_assert_eq!(got.key_id, KeyId::new(3));
    }

    #[test]
    fn sealed_payloads_round_trip(
        hmac in any::<bool>(),
        payload in prop::collection::vec(any::<u8>(), 0..300),
        aad in prop::collection::vec(any::<u8>(), 0..64),
    ) {
        let algorithm = if hmac { Algorithm::HmacSha256 } else { Algorithm::XChaCha20Poly1305 };
        let c = codec(algorithm);
        let aad = Aad::new(&aad).unwrap();
        let sealed = c.seal(&payload, aad).unwrap();
        let unsealed = c.unseal(&sealed.token, aad).unwrap();
        prop_assert_eq!(unsealed.payload, payload);
        prop_assert_eq!(unsealed.key_id, sealed.key_id);
    }

    #[test]
    fn arbitrary_strings_never_verify_or_panic(token in ".{0,300}") {
        for algorithm in Algorithm::ALL {
            let c = codec(algorithm);
            prop_assert!(c.verify::<serde_json::Value>(&token, bind("t", b"").any_step()).is_err());
            prop_assert!(c.unseal(&token, Aad::EMPTY).is_err());
        }
    }

    #[test]
    fn arbitrary_bytes_after_a_valid_header_never_verify_or_panic(
        header in prop_oneof![Just(0x11u8), Just(0x12), Just(0x15), Just(0x16)],
        body in prop::collection::vec(any::<u8>(), 0..200),
    ) {
        use base64::Engine as _;
        let mut raw = vec![header, 3];
        raw.extend(body);
        let token = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw);
        for algorithm in Algorithm::ALL {
            let c = codec(algorithm);
            prop_assert!(c.verify::<serde_json::Value>(&token, bind("t", b"").any_step()).is_err());
            prop_assert!(c.unseal(&token, Aad::EMPTY).is_err());
        }
    }
}

fn cbor_value() -> impl Strategy<Value = ciborium::Value> {
    use ciborium::Value;
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|i| Value::Integer(i.into())),
        any::<u64>().prop_map(|i| Value::Integer(i.into())),
        // Floats that ciborium shrinks to half and single precision, and full ones.
        prop_oneof![
            Just(0.5f64),
            Just(412.5),
            Just(1.0e-7),
            any::<f64>().prop_filter("finite", |f| f.is_finite())
        ]
        .prop_map(Value::Float),
        prop::collection::vec(any::<u8>(), 0..16).prop_map(Value::Bytes),
        ".{0,12}".prop_map(Value::Text),
    ];
    leaf.prop_recursive(4, 32, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec((inner.clone(), inner.clone()), 0..4).prop_map(Value::Map),
            (0u64..100_000, inner).prop_map(|(tag, v)| Value::Tag(tag, Box::new(v))),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    // The state is written by ciborium and read back by cbor4ii: the two must
    // agree on every value ciborium can write.
    #[test]
    fn any_cbor_state_round_trips_exactly(state in cbor_value()) {
        let c = codec(Algorithm::HmacSha256);
        let token = c.mint(bind("t", b""), "s", &state, Duration::from_secs(60)).unwrap().token;
        let got = c.verify::<ciborium::Value>(&token, bind("t", b"").any_step()).unwrap();
        prop_assert_eq!(got.state, state);
    }
}
