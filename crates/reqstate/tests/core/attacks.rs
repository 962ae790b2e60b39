//! The attack classes of the JWT and PASETO experience, one test each, against
//! the core crate.

use std::time::Duration;

use base64::Engine as _;
use reqstate::{
    Algorithm, Arguments, Binding, Call, CallContext, Codec, FixedClock, KeyId, KeySpec, KeyStatus,
    Keyring, MintError, OsRandom, Policy, Refusal, Secret, call_context,
};

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::URL_SAFE_NO_PAD;
const NOW: u64 = 1_764_460_800;
const TTL: Duration = Duration::from_secs(600);

fn spec(id: u32, algorithm: Algorithm, status: KeyStatus, byte: u8) -> KeySpec {
    KeySpec::new(
        KeyId::new(id),
        algorithm,
        status,
        Secret::new(vec![byte; 32]),
    )
}

/// The binding of `tool` to `context` bytes.
fn bind<'a>(tool: &'a str, context: &'a [u8]) -> Binding<'a> {
    Binding::with_context_bytes(tool, context).expect("binding")
}

/// The binding of `tool` to a call context.
fn bind_call<'a>(tool: &'a str, context: &'a CallContext) -> Binding<'a> {
    Binding::new(tool, context).expect("binding")
}

/// Keys 1 (HMAC, primary), 2 (XChaCha, active), 3 (XChaCha, retired).
fn ring_at(now: u64) -> Codec {
    Codec::with_parts(
        Keyring::new([
            spec(1, Algorithm::HmacSha256, KeyStatus::Primary, 1),
            spec(2, Algorithm::XChaCha20Poly1305, KeyStatus::Active, 2),
            spec(3, Algorithm::XChaCha20Poly1305, KeyStatus::Retired, 3),
        ])
        .expect("keyring"),
        Policy::new(),
        FixedClock(now),
        OsRandom::new(),
    )
}

fn minted_under(id: u32, algorithm: Algorithm, byte: u8, now: u64) -> String {
    Codec::with_parts(
        Keyring::new([spec(id, algorithm, KeyStatus::Primary, byte)]).expect("keyring"),
        Policy::new(),
        FixedClock(now),
        OsRandom::new(),
    )
    .mint(bind("t", b"ctx"), "s", &1u8, TTL)
    .expect("mint")
    .token
}

fn with_raw(token: &str, edit: impl FnOnce(&mut Vec<u8>)) -> String {
    let mut raw = B64.decode(token).expect("valid token");
    edit(&mut raw);
    B64.encode(raw)
}

#[test]
fn algorithm_confusion_is_refused_both_ways() {
    let c = ring_at(NOW);
    // An XChaCha token relabelled as HMAC for the HMAC key 1, and the reverse.
    let aead = minted_under(2, Algorithm::XChaCha20Poly1305, 2, NOW);
    let as_hmac = with_raw(&aead, |r| {
        r[0] = 0x11;
        r[1] = 1;
    });
    assert!(
        c.verify::<u8>(&as_hmac, bind("t", b"ctx").any_step())
            .is_err()
    );
    let hmac = minted_under(1, Algorithm::HmacSha256, 1, NOW);
    let as_aead = with_raw(&hmac, |r| r[0] = 0x12);
    // Too short to hold a nonce (FORMAT.md §8 step 5), or refused by the key.
    assert!(matches!(
        c.verify::<u8>(&as_aead, bind("t", b"ctx").any_step()),
        Err(Refusal::AlgorithmMismatch { .. } | Refusal::Malformed(_))
    ));
    // Pointing an HMAC token at the XChaCha key 2 is refused before any crypto.
    let redirected = with_raw(&hmac, |r| r[1] = 2);
    assert!(matches!(
        c.verify::<u8>(&redirected, bind("t", b"ctx").any_step()),
        Err(Refusal::AlgorithmMismatch { .. })
    ));
}

#[test]
fn key_id_injection_finds_nothing() {
    let c = ring_at(NOW);
    let hmac = minted_under(1, Algorithm::HmacSha256, 1, NOW);
    let body = B64.decode(&hmac).expect("valid")[2..].to_vec();
    let forged = |kid: &[u8]| {
        let mut raw = vec![0x11];
        raw.extend_from_slice(kid);
        raw.extend_from_slice(&body);
        B64.encode(raw)
    };
    // Path-like, SQL-like and huge ids are just bytes of a LEB128 integer:
    // either a malformed encoding or an id that is not in the keyring.
    for kid in [
        &b"../../etc/passwd"[..],
        b"' OR 1=1 --",
        b"\xff\xff\xff\xff\xff\xff\xff\xff",
        b"\x80\x80\x80\x80\x80\x80",
        b"\xff\xff\xff\xff\x0f",
        b"\x09",
        b"",
    ] {
        let err = c
            .verify::<u8>(&forged(kid), bind("t", b"ctx").any_step())
            .expect_err("accepted");
        assert!(
            matches!(
                err,
                Refusal::UnknownKey(_) | Refusal::Malformed(_) | Refusal::AuthenticationFailed
            ),
            "{kid:?}: {err:?}"
        );
    }
}

#[test]
fn a_token_of_a_key_the_ring_lacks_is_unknown_not_tried() {
    let c = ring_at(NOW);
    let stranger = minted_under(9, Algorithm::HmacSha256, 1, NOW);
    assert_eq!(
        c.verify::<u8>(&stranger, bind("t", b"ctx").any_step()),
        Err(Refusal::UnknownKey(KeyId::new(9)))
    );
}

#[test]
fn absurd_expiry_is_refused_at_mint_and_verify() {
    let c = ring_at(NOW);
    assert!(matches!(
        c.mint(bind("t", b""), "s", &1u8, Duration::from_secs(u64::MAX)),
        Err(MintError::LifetimeTooLong { .. })
    ));
    assert!(matches!(
        c.mint(bind("t", b""), "s", &1u8, Duration::ZERO),
        Err(MintError::InvalidArgument(_))
    ));
    // A genuine token minted under a looser policy (30 days) meets the default one.
    let loose = Codec::with_parts(
        Keyring::new([spec(1, Algorithm::HmacSha256, KeyStatus::Primary, 1)]).expect("keyring"),
        Policy::new()
            .with_max_lifetime(Duration::from_secs(30 * 86_400))
            .expect("policy"),
        FixedClock(NOW),
        OsRandom::new(),
    );
    let long = loose
        .mint(bind("t", b""), "s", &1u8, Duration::from_secs(30 * 86_400))
        .expect("mint")
        .token;
    assert!(matches!(
        c.verify::<u8>(&long, bind("t", b"").any_step()),
        Err(Refusal::LifetimeTooLong { .. })
    ));
}

#[test]
fn clock_skew_is_bounded_both_ways() {
    let token = minted_under(1, Algorithm::HmacSha256, 1, NOW);
    // The verifier's clock behind the minter's by more than the leeway.
    assert!(matches!(
        ring_at(NOW - 61).verify::<u8>(&token, bind("t", b"ctx").any_step()),
        Err(Refusal::NotYetValid { .. })
    ));
    assert!(
        ring_at(NOW - 60)
            .verify::<u8>(&token, bind("t", b"ctx").any_step())
            .is_ok()
    );
    // Ahead: the token expires at NOW + 600, accepted until the leeway is spent.
    assert!(
        ring_at(NOW + 659)
            .verify::<u8>(&token, bind("t", b"ctx").any_step())
            .is_ok()
    );
    assert!(matches!(
        ring_at(NOW + 660).verify::<u8>(&token, bind("t", b"ctx").any_step()),
        Err(Refusal::Expired { .. })
    ));
}

#[test]
fn oversized_tokens_are_refused_before_decoding() {
    let c = ring_at(NOW);
    for len in [8193, 100_000, 10_000_000] {
        // Not even valid base64: the length check comes first.
        assert!(matches!(
            c.verify::<u8>(&"!".repeat(len), bind("t", b"").any_step()),
            Err(Refusal::TooLarge { .. })
        ));
    }
}

#[test]
fn deep_cbor_nesting_is_refused_at_mint() {
    let c = ring_at(NOW);
    let mut deep = serde_json::json!(0);
    for _ in 0..1000 {
        deep = serde_json::json!([deep]);
    }
    assert!(matches!(
        c.mint(bind("t", b""), "s", &deep, TTL),
        Err(MintError::StateEncoding(_))
    ));
}

#[test]
fn non_canonical_base64_is_refused() {
    let c = ring_at(NOW);
    let token = minted_under(1, Algorithm::HmacSha256, 1, NOW);
    for variant in [
        format!("{token}="),
        format!("{token}=="),
        token.replace('-', "+").replace('_', "/"),
        format!(" {token}"),
        format!("{token}\n"),
    ] {
        if variant != token {
            assert!(
                c.verify::<u8>(&variant, bind("t", b"ctx").any_step())
                    .is_err(),
                "{variant:?}"
            );
        }
    }
}

#[test]
fn tokens_of_a_retired_key_are_refused() {
    let c = ring_at(NOW);
    let old = minted_under(3, Algorithm::XChaCha20Poly1305, 3, NOW);
    assert_eq!(
        c.verify::<u8>(&old, bind("t", b"ctx").any_step()),
        Err(Refusal::RetiredKey(KeyId::new(3)))
    );
}

#[test]
fn a_token_for_tool_a_replayed_to_tool_b_fails() {
    let c = ring_at(NOW);
    let token = c
        .mint(bind("read-balance", b"ctx"), "s", &1u8, TTL)
        .expect("mint")
        .token;
    assert_eq!(
        c.verify::<u8>(&token, bind("transfer-funds", b"ctx").any_step()),
        Err(Refusal::AuthenticationFailed)
    );
}

#[test]
fn a_token_for_principal_a_replayed_by_principal_b_fails() {
    let c = ring_at(NOW);
    let args = r#"{"account":"A-1"}"#;
    let alice = call_context(&Call {
        principal: "alice",
        audience: "bank",
        method: "tools/call",
        arguments: Arguments::Json(args),
    })
    .expect("context");
    let bob = call_context(&Call {
        principal: "bob",
        audience: "bank",
        method: "tools/call",
        arguments: Arguments::Json(args),
    })
    .expect("context");
    let token = c
        .mint(bind_call("transfer-funds", &alice), "confirm", &1u8, TTL)
        .expect("mint")
        .token;
    assert_eq!(
        c.verify::<u8>(&token, bind_call("transfer-funds", &bob).any_step()),
        Err(Refusal::AuthenticationFailed)
    );
    // And with the arguments changed on the retry.
    let changed = call_context(&Call {
        principal: "alice",
        audience: "bank",
        method: "tools/call",
        arguments: Arguments::Json(r#"{"account":"B-2"}"#),
    })
    .expect("context");
    assert_eq!(
        c.verify::<u8>(&token, bind_call("transfer-funds", &changed).any_step()),
        Err(Refusal::AuthenticationFailed)
    );
    assert!(
        c.verify::<u8>(&token, bind_call("transfer-funds", &alice).any_step())
            .is_ok()
    );
}

#[test]
fn every_key_id_swap_is_rejected() {
    // Each token re-labelled with every other id of the ring, and a spread of
    // ids the ring lacks.
    let c = ring_at(NOW);
    let tokens = [
        minted_under(1, Algorithm::HmacSha256, 1, NOW),
        minted_under(2, Algorithm::XChaCha20Poly1305, 2, NOW),
    ];
    let mut count = 0;
    for token in &tokens {
        let original = B64.decode(token).expect("valid")[1];
        for id in (0u8..128).filter(|id| *id != original) {
            let swapped = with_raw(token, |r| r[1] = id);
            assert!(
                c.verify::<u8>(&swapped, bind("t", b"ctx").any_step())
                    .is_err(),
                "id {id} accepted"
            );
            count += 1;
        }
    }
    println!("key id swaps rejected: {count}");
}

#[test]
fn mint_refuses_an_expiry_that_would_overflow() {
    // Review item 11: a clock at 2^64 - ttl used to mint a token whose expiry
    // saturated, which verification then called `malformed`.
    for now in [u64::MAX, u64::MAX - 599] {
        match ring_at(now).mint(bind("t", b""), "s", &1u8, TTL) {
            Err(MintError::InvalidArgument(e)) => {
                assert!(e.message().contains("overflows"), "{e}");
            }
            other => panic!("now = {now}: {other:?}"),
        }
    }
    // The last second at which the expiry still fits mints, and the token
    // verifies at that clock.
    let codec = ring_at(u64::MAX - 600);
    let minted = codec.mint(bind("t", b""), "s", &1u8, TTL).expect("mint");
    assert_eq!(minted.expires_at, u64::MAX);
    let verified = codec
        .verify::<u8>(&minted.token, bind("t", b"").any_step())
        .expect("verify");
    assert_eq!(verified.expires_at, u64::MAX);
}
