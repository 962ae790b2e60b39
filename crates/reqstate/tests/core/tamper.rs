//! Tampering and misuse: every altered, re-targeted, re-keyed or out-of-time
//! token is refused, for every algorithm and both token kinds.

use std::time::Duration;

use base64::Engine as _;
use reqstate::{
    Aad, Algorithm, Binding, Codec, FixedClock, KeyId, KeySpec, KeyStatus, Keyring, MintError,
    Minted, OsRandom, Policy, Refusal, Secret,
};
use serde::{Deserialize, Serialize};

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::URL_SAFE_NO_PAD;
const NOW: u64 = 1_764_460_800;
const TOOL: &str = "increase-counter";
const CONTEXT: &[u8] = b"principal=user-42;audience=counter-server;method=tools/call";

#[derive(Serialize, Deserialize, Debug, PartialEq, Clone)]
struct Counter {
    current: u64,
    amount: u64,
}

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

/// Associated data for a sealed payload.
fn aad(bytes: &[u8]) -> Aad<'_> {
    Aad::new(bytes).expect("aad")
}

fn codec_with(specs: Vec<KeySpec>, now: u64) -> Codec {
    Codec::with_parts(
        Keyring::new(specs).expect("keyring"),
        Policy::new(),
        FixedClock(now),
        OsRandom::new(),
    )
}

fn codec(algorithm: Algorithm) -> Codec {
    codec_with(vec![spec(7, algorithm, KeyStatus::Primary, 0xa5)], NOW)
}

fn state() -> Counter {
    Counter {
        current: 10,
        amount: 5,
    }
}

fn mint_detailed(c: &Codec) -> Minted {
    c.mint(
        bind(TOOL, CONTEXT),
        "confirm",
        &state(),
        Duration::from_secs(600),
    )
    .expect("mint")
}

fn mint(c: &Codec) -> String {
    mint_detailed(c).token
}

fn seal(c: &Codec, payload: &[u8], associated: &[u8]) -> String {
    c.seal(payload, aad(associated)).expect("seal").token
}

fn verify(c: &Codec, token: &str) -> Result<reqstate::Verified<Counter>, Refusal> {
    c.verify::<Counter>(token, bind(TOOL, CONTEXT).any_step())
}

#[test]
fn every_single_bit_flip_is_rejected() {
    let mut count = 0;
    for algorithm in Algorithm::ALL {
        let c = codec(algorithm);
        for token in [mint(&c), seal(&c, b"payload bytes", CONTEXT)] {
            let raw = B64.decode(&token).expect("valid");
            for bit in 0..raw.len() * 8 {
                let mut flipped = raw.clone();
                flipped[bit / 8] ^= 1 << (bit % 8);
                let flipped = B64.encode(&flipped);
                assert!(
                    verify(&c, &flipped).is_err(),
                    "{algorithm}: bit {bit} flip accepted"
                );
                assert!(
                    c.unseal(&flipped, aad(CONTEXT)).is_err(),
                    "{algorithm}: bit {bit} flip unsealed"
                );
                count += 1;
            }
        }
    }
    println!("single-bit flips rejected: {count}");
    assert!(count > 1500);
}

#[test]
fn every_truncation_and_extension_is_rejected() {
    let mut count = 0;
    for algorithm in Algorithm::ALL {
        let c = codec(algorithm);
        let token = mint(&c);
        let raw = B64.decode(&token).expect("valid");
        for len in 0..raw.len() {
            assert!(
                verify(&c, &B64.encode(&raw[..len])).is_err(),
                "{algorithm}: {len}-byte prefix accepted"
            );
            count += 1;
        }
        for extra in 1..=64usize {
            let mut longer = raw.clone();
            longer.extend((0..extra).map(|i| i as u8));
            assert!(
                verify(&c, &B64.encode(&longer)).is_err(),
                "{algorithm}: +{extra} bytes accepted"
            );
            count += 1;
        }
        // Character-level: every prefix of the text form too.
        for len in 0..token.len() {
            assert!(
                verify(&c, &token[..len]).is_err(),
                "{algorithm}: {len}-char prefix accepted"
            );
            count += 1;
        }
    }
    println!("truncations and extensions rejected: {count}");
}

#[test]
fn tokens_are_bound_to_tool_context_and_step() {
    for algorithm in Algorithm::ALL {
        let c = codec(algorithm);
        let token = mint(&c);
        assert_eq!(verify(&c, &token).expect("genuine").state, state());
        assert_eq!(
            c.verify::<Counter>(&token, bind("other-tool", CONTEXT).any_step())
                .unwrap_err(),
            Refusal::AuthenticationFailed
        );
        assert_eq!(
            c.verify::<Counter>(
                &token,
                bind(
                    TOOL,
                    b"principal=user-43;audience=counter-server;method=tools/call"
                )
                .any_step()
            )
            .unwrap_err(),
            Refusal::AuthenticationFailed
        );
        assert_eq!(
            c.verify::<Counter>(&token, bind(TOOL, b"").any_step())
                .unwrap_err(),
            Refusal::AuthenticationFailed
        );
        assert_eq!(
            c.verify::<Counter>(&token, bind(TOOL, CONTEXT).step("amount"))
                .unwrap_err(),
            Refusal::WrongStep {
                expected: "amount".into(),
                found: "confirm".into()
            }
        );
        assert!(
            c.verify::<Counter>(&token, bind(TOOL, CONTEXT).step("confirm"))
                .is_ok()
        );
    }
}

#[test]
fn tool_and_context_boundaries_cannot_be_shifted() {
    // Length prefixes keep "ab" + "c" apart from "a" + "bc".
    for algorithm in Algorithm::ALL {
        let c = codec(algorithm);
        let token = c
            .mint(bind("ab", b"c"), "s", &1u8, Duration::from_secs(60))
            .expect("mint")
            .token;
        assert!(c.verify::<u8>(&token, bind("a", b"bc").any_step()).is_err());
        assert!(c.verify::<u8>(&token, bind("ab", b"c").any_step()).is_ok());
    }
}

#[test]
fn a_token_under_another_key_with_the_same_id_is_rejected() {
    for algorithm in Algorithm::ALL {
        let ours = codec_with(vec![spec(7, algorithm, KeyStatus::Primary, 0xa5)], NOW);
        let theirs = codec_with(vec![spec(7, algorithm, KeyStatus::Primary, 0x5a)], NOW);
        let forged = mint(&theirs);
        assert_eq!(
            verify(&ours, &forged).unwrap_err(),
            Refusal::AuthenticationFailed
        );
        let sealed = seal(&theirs, b"x", b"");
        assert_eq!(
            ours.unseal(&sealed, Aad::EMPTY).unwrap_err(),
            Refusal::AuthenticationFailed
        );
    }
}

#[test]
fn the_same_secret_under_the_other_algorithm_does_not_verify() {
    // Algorithm confusion: the key decides, and derivation separates the two.
    let hmac = codec_with(
        vec![spec(7, Algorithm::HmacSha256, KeyStatus::Primary, 0xa5)],
        NOW,
    );
    let aead = codec_with(
        vec![spec(
            7,
            Algorithm::XChaCha20Poly1305,
            KeyStatus::Primary,
            0xa5,
        )],
        NOW,
    );
    for (from, to) in [(&hmac, &aead), (&aead, &hmac)] {
        let token = mint(from);
        assert!(matches!(
            verify(to, &token).unwrap_err(),
            Refusal::AlgorithmMismatch { .. }
        ));
        // Rewriting the header's algorithm bits to match the key still fails the tag.
        let mut raw = B64.decode(&token).expect("valid");
        raw[0] ^= 0b11;
        assert!(verify(to, &B64.encode(&raw)).is_err());
    }
}

#[test]
fn expiry_and_issue_time_are_enforced_with_the_leeway() {
    for algorithm in Algorithm::ALL {
        let minted = mint_detailed(&codec(algorithm));
        let at = |now: u64| codec_with(vec![spec(7, algorithm, KeyStatus::Primary, 0xa5)], now);
        let leeway = Policy::DEFAULT_CLOCK_LEEWAY;
        assert!(verify(&at(minted.expires_at + leeway - 1), &minted.token).is_ok());
        assert_eq!(
            verify(&at(minted.expires_at + leeway), &minted.token).unwrap_err(),
            Refusal::Expired {
                expires_at: minted.expires_at,
                now: minted.expires_at + leeway
            }
        );
        assert!(verify(&at(minted.issued_at - leeway), &minted.token).is_ok());
        assert_eq!(
            verify(&at(minted.issued_at - leeway - 1), &minted.token).unwrap_err(),
            Refusal::NotYetValid {
                issued_at: minted.issued_at,
                now: minted.issued_at - leeway - 1
            }
        );
    }
}

#[test]
fn retired_key_is_refused_and_active_key_still_verifies() {
    for algorithm in Algorithm::ALL {
        let old = codec_with(vec![spec(1, algorithm, KeyStatus::Primary, 1)], NOW);
        let token = mint(&old);
        let rotated = codec_with(
            vec![
                spec(1, algorithm, KeyStatus::Active, 1),
                spec(2, algorithm, KeyStatus::Primary, 2),
            ],
            NOW,
        );
        assert_eq!(
            verify(&rotated, &token)
                .expect("active key verifies")
                .key_id,
            KeyId::new(1)
        );
        assert_eq!(mint_key(&rotated), KeyId::new(2));
        let retired = codec_with(
            vec![
                spec(1, algorithm, KeyStatus::Retired, 1),
                spec(2, algorithm, KeyStatus::Primary, 2),
            ],
            NOW,
        );
        assert_eq!(
            verify(&retired, &token).unwrap_err(),
            Refusal::RetiredKey(KeyId::new(1))
        );
        let removed = codec_with(vec![spec(2, algorithm, KeyStatus::Primary, 2)], NOW);
        assert_eq!(
            verify(&removed, &token).unwrap_err(),
            Refusal::UnknownKey(KeyId::new(1))
        );
    }
}

fn mint_key(c: &Codec) -> KeyId {
    c.mint(bind(TOOL, b""), "s", &0u8, Duration::from_secs(1))
        .expect("mint")
        .key_id
}

#[test]
fn sealed_and_state_tokens_never_cross() {
    for algorithm in Algorithm::ALL {
        let c = codec(algorithm);
        let sealed = c.seal(b"\xa1\x01\x02", aad(CONTEXT)).expect("seal");
        assert_eq!(sealed.key_id, KeyId::new(7));
        let sealed = sealed.token;
        assert!(matches!(
            verify(&c, &sealed).unwrap_err(),
            Refusal::WrongKind { .. }
        ));
        let token = mint(&c);
        assert!(matches!(
            c.unseal(&token, aad(CONTEXT)).unwrap_err(),
            Refusal::WrongKind { .. }
        ));
        assert_eq!(
            c.unseal(&sealed, aad(CONTEXT)).expect("unseal").payload,
            b"\xa1\x01\x02"
        );
        let detailed = c.unseal(&sealed, aad(CONTEXT)).expect("unseal");
        assert_eq!(
            (detailed.payload.as_slice(), detailed.key_id),
            (&b"\xa1\x01\x02"[..], KeyId::new(7))
        );
    }
}

#[test]
fn hmac_state_is_readable_and_aead_state_is_not() {
    let needle = b"secret-looking-state";
    let readable = |algorithm| {
        let c = codec(algorithm);
        let t = c
            .mint(
                bind(TOOL, b""),
                "s",
                &"secret-looking-state",
                Duration::from_secs(60),
            )
            .expect("mint")
            .token;
        let raw = B64.decode(t).expect("valid");
        raw.windows(needle.len()).any(|w| w == needle)
    };
    assert!(readable(Algorithm::HmacSha256));
    assert!(!readable(Algorithm::XChaCha20Poly1305));
}

#[test]
fn aead_tokens_for_the_same_claims_differ() {
    let c = codec(Algorithm::XChaCha20Poly1305);
    assert_ne!(mint(&c), mint(&c));
}

#[test]
fn mint_refuses_bad_arguments() {
    let c = codec(Algorithm::DEFAULT);
    let ttl = Duration::from_secs(60);
    let t = bind("t", b"");
    // The tool and context are checked where the binding is built.
    assert_eq!(
        Binding::with_context_bytes("", b"").unwrap_err().message(),
        "tool name is empty"
    );
    assert_eq!(
        Binding::with_context_bytes(&"t".repeat(257), b"")
            .unwrap_err()
            .message(),
        "tool name is longer than 256 bytes"
    );
    assert!(Binding::with_context_bytes(&"t".repeat(256), b"").is_ok());
    assert_eq!(
        Binding::with_context_bytes("t", &vec![0; 65_537])
            .unwrap_err()
            .message(),
        "context is longer than 65536 bytes"
    );
    assert!(Binding::with_context_bytes("t", &vec![0; 65_536]).is_ok());
    // The step and ttl at mint.
    assert!(matches!(
        c.mint(t, "", &1u8, ttl),
        Err(MintError::InvalidArgument(_))
    ));
    assert!(matches!(
        c.mint(t, &"s".repeat(257), &1u8, ttl),
        Err(MintError::InvalidArgument(_))
    ));
    assert!(matches!(
        c.mint(t, "s", &1u8, Duration::from_millis(999)),
        Err(MintError::InvalidArgument(_))
    ));
    assert!(matches!(
        c.mint(t, "s", &1u8, Duration::from_secs(86_401)),
        Err(MintError::LifetimeTooLong {
            lifetime: 86_401,
            max: 86_400
        })
    ));
    // A state too large for the policy is refused at mint, not at verify.
    assert!(matches!(
        c.mint(t, "s", &"x".repeat(9000), ttl),
        Err(MintError::TooLarge { .. })
    ));
    // A state nested deeper than verification accepts is refused at mint.
    let mut deep = serde_json::json!(1);
    for _ in 0..20 {
        deep = serde_json::json!([deep]);
    }
    assert!(matches!(
        c.mint(t, "s", &deep, ttl),
        Err(MintError::StateEncoding(_))
    ));
}

#[test]
fn state_of_the_wrong_type_is_a_decoding_error_after_verification() {
    let c = codec(Algorithm::DEFAULT);
    let token = c
        .mint(bind(TOOL, b""), "s", &"text", Duration::from_secs(60))
        .expect("mint")
        .token;
    match c.verify::<Counter>(&token, bind(TOOL, b"").any_step()) {
        // A message for people: serde's words, never ciborium's debug text
        // (`Semantic(None, "invalid type: …")`).
        Err(Refusal::StateDecoding(message)) => {
            assert!(message.starts_with("invalid type: string"), "{message}");
            assert!(!message.contains("Semantic"), "{message}");
        }
        other => panic!("expected state_decoding, got {other:?}"),
    }
}

/// A state serde cannot write: the message is the serializer's own words,
/// not ciborium's debug text (`Value("…")`).
#[test]
fn state_encoding_errors_read_as_text() {
    struct Unwritable;
    impl serde::Serialize for Unwritable {
        fn serialize<S: serde::Serializer>(&self, _: S) -> Result<S::Ok, S::Error> {
            Err(serde::ser::Error::custom("this state has no CBOR form"))
        }
    }
    let c = codec(Algorithm::DEFAULT);
    match c.mint(bind(TOOL, b""), "s", &Unwritable, Duration::from_secs(60)) {
        Err(e @ MintError::StateEncoding(_)) => assert_eq!(
            e.to_string(),
            "state could not be encoded as CBOR: this state has no CBOR form"
        ),
        other => panic!("expected state_encoding, got {:?}", other.map(|m| m.token)),
    }
}

#[test]
fn policy_bounds_are_enforced() {
    assert!(
        Policy::new()
            .with_clock_leeway(Duration::from_secs(601))
            .is_err()
    );
    assert!(
        Policy::new()
            .with_clock_leeway(Duration::from_secs(600))
            .is_ok()
    );
    assert!(Policy::new().with_max_token_len(63).is_err());
    assert!(Policy::new().with_max_lifetime(Duration::ZERO).is_err());
    let tight = Policy::new().with_max_token_len(100).expect("policy");
    let c = codec(Algorithm::XChaCha20Poly1305).with_policy(tight);
    let long_token = codec(Algorithm::XChaCha20Poly1305)
        .mint(
            bind(TOOL, CONTEXT),
            "confirm",
            &"x".repeat(200),
            Duration::from_secs(60),
        )
        .expect("mint")
        .token;
    assert!(matches!(
        verify(&c, &long_token),
        Err(Refusal::TooLarge { max: 100, .. })
    ));
}

#[test]
fn keys_never_show_in_debug_output() {
    let secret_byte_pattern = "165, 165"; // 0xa5 as Debug would print it
    let c = codec(Algorithm::HmacSha256);
    let shown = format!("{c:?} {:?} {:?}", c.keyring(), Secret::new(vec![0xa5; 32]));
    assert!(!shown.contains(secret_byte_pattern), "{shown}");
    assert!(!shown.to_lowercase().contains("a5a5"), "{shown}");
    assert!(shown.contains("HmacSha256"));
}
