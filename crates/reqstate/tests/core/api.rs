//! The API a tired caller cannot hold wrong: accepting any step is written
//! out (no conversion from a bare `Binding`), the call context's four parts
//! are named, a store outage is not a refusal of the token, and lifetimes
//! are whole seconds (a fraction is refused, never rounded).

use std::time::Duration;

use reqstate::{
    Algorithm, Arguments, Binding, Call, Codec, ConsumeError, FixedClock, KeyId, KeySpec,
    KeyStatus, Keyring, MemoryReplayStore, MintError, OsRandom, Policy, Refusal, ReplayStore,
    Secret, SpentId, StoreError, call_context,
};

const NOW: u64 = 1_764_460_800;

fn codec(now: u64) -> Codec {
    let keyring = Keyring::new([KeySpec::new(
        KeyId::new(1),
        Algorithm::XChaCha20Poly1305,
        KeyStatus::Primary,
        Secret::from_slice(&[9u8; 32]),
    )])
    .expect("keyring");
    Codec::with_parts(keyring, Policy::new(), FixedClock(now), OsRandom::new())
}

fn binding() -> Binding<'static> {
    Binding::with_context_bytes("increase-counter", b"user-42").expect("binding")
}

/// A store that always answers `answer`.
struct Answering(Result<bool, StoreError>);

impl ReplayStore for Answering {
    fn insert_if_absent(&self, _: &SpentId, _: u64, _: u64) -> Result<bool, StoreError> {
        self.0
    }
}

#[test]
fn a_store_that_cannot_record_is_a_store_error_not_a_refusal() {
    let codec = codec(NOW);
    let token = codec
        .mint_single_use(binding(), "commit", &1u8, Duration::from_secs(60))
        .expect("mint")
        .token;
    for (store, reason) in [
        (StoreError::Unavailable, "replay_store_unavailable"),
        (StoreError::Full, "replay_store_full"),
    ] {
        let outcome = codec.consume::<u8>(&token, binding().step("commit"), &Answering(Err(store)));
        assert_eq!(outcome, Err(ConsumeError::Store(store)));
        let error = outcome.expect_err("not accepted");
        assert_eq!(error.reason(), reason);
        assert_eq!(error.refusal(), None, "the token was not refused");
        assert!(!Refusal::REASONS.contains(&reason));
    }
    // Once the store answers, the same token is accepted, once.
    let store = MemoryReplayStore::new(16);
    assert_eq!(
        codec
            .consume::<u8>(&token, binding().step("commit"), &store)
            .expect("accepted")
            .state,
        1
    );
    assert_eq!(
        codec.consume::<u8>(&token, binding().step("commit"), &store),
        Err(ConsumeError::Refused(Refusal::Replayed))
    );
    // A refused token never reaches the store: its error is a refusal.
    let other = Binding::with_context_bytes("increase-counter", b"user-43").expect("binding");
    let refused = codec.consume::<u8>(
        &token,
        other.step("commit"),
        &Answering(Err(StoreError::Unavailable)),
    );
    assert_eq!(
        refused,
        Err(ConsumeError::Refused(Refusal::AuthenticationFailed))
    );
}

#[test]
fn lifetimes_are_whole_seconds_and_a_fraction_is_refused_not_rounded() {
    let codec = codec(NOW);
    for ttl in [
        Duration::from_millis(1500),
        Duration::from_millis(999),
        Duration::from_nanos(1),
        Duration::new(60, 1),
    ] {
        match codec.mint(binding(), "s", &1u8, ttl) {
            Err(MintError::InvalidArgument(e)) => {
                assert!(e.message().contains("second"), "{ttl:?}: {}", e.message())
            }
            other => panic!("{ttl:?} was not refused: {other:?}"),
        }
    }
    assert!(matches!(
        codec.mint(binding(), "s", &1u8, Duration::ZERO),
        Err(MintError::InvalidArgument(_))
    ));
    // One second is the shortest: it expires one second after the clock's
    // reading (accepted at NOW, refused at NOW + 1 without leeway).
    let minted = codec
        .mint(binding(), "s", &1u8, Duration::from_secs(1))
        .expect("one second");
    assert_eq!(minted.expires_at, NOW + 1);
    let strict = Policy::new()
        .with_clock_leeway(Duration::ZERO)
        .expect("leeway");
    let at = |now| {
        let keyring = Keyring::new([KeySpec::new(
            KeyId::new(1),
            Algorithm::XChaCha20Poly1305,
            KeyStatus::Primary,
            Secret::from_slice(&[9u8; 32]),
        )])
        .expect("keyring");
        Codec::with_parts(keyring, strict, FixedClock(now), OsRandom::new())
    };
    assert!(
        at(NOW)
            .verify::<u8>(&minted.token, binding().step("s"))
            .is_ok()
    );
    assert!(matches!(
        at(NOW + 1).verify::<u8>(&minted.token, binding().step("s")),
        Err(Refusal::Expired { .. })
    ));
    // The policy's durations follow the same rule.
    assert!(
        Policy::new()
            .with_clock_leeway(Duration::from_millis(500))
            .is_err()
    );
    assert!(
        Policy::new()
            .with_clock_leeway(Duration::from_secs(5))
            .is_ok()
    );
    assert!(
        Policy::new()
            .with_max_lifetime(Duration::from_millis(86_400_500))
            .is_err()
    );
    assert!(
        Policy::new()
            .with_max_lifetime(Duration::from_secs(86_400))
            .is_ok()
    );
}

#[test]
fn the_call_context_parts_are_named_and_both_argument_forms_agree() {
    let value = serde_json::json!({"name": "increase-counter", "arguments": {"by": 2}});
    let text = r#"{ "arguments": {"by": 2}, "name": "increase-counter" }"#;
    let call = |arguments| Call {
        principal: "user-42",
        audience: "https://mcp.example.com",
        method: "tools/call",
        arguments,
    };
    let from_text = call_context(&call(Arguments::Json(text))).expect("text");
    let from_value = call_context(&call(Arguments::Value(&value))).expect("value");
    assert_eq!(from_text, from_value);
    // Each part is bound: swapping two of them gives another context.
    let swapped = call_context(&Call {
        principal: "https://mcp.example.com",
        audience: "user-42",
        ..call(Arguments::Json(text))
    })
    .expect("swapped");
    assert_ne!(from_text, swapped);
    // Refused arguments are refused in either form.
    assert!(call_context(&call(Arguments::Json(r#"{"a":1,"a":2}"#))).is_err());
    assert!(call_context(&call(Arguments::Value(&serde_json::json!({"n": u64::MAX})))).is_err());
}
