//! Fuzz target `token_decoders`: the three ways the core decodes a token
//! must agree on every input. `Codec::verify` decodes a token of up to 768
//! bytes (1024 characters) on the stack (`with_decoded`), `Codec::verify_untrusted`
//! verifies what the heap parser `UntrustedToken::parse` gave, and
//! `Codec::verify_raw` takes the stack path but returns the state's bytes
//! undecoded.
//!
//! The first input byte picks how the token is built, so that the paths
//! past the tag are reached as often as the ones before it:
//! - 0 (mod 3): the rest of the input is the token text (lossy UTF-8);
//! - 1: a token minted in the target (HMAC key 1 or XChaCha20-Poly1305 key 2,
//!   a state of fuzz-chosen size, so both sides of the 768-byte line are
//!   hit), then edited by the input (characters replaced, inserted, removed,
//!   truncated); unedited it must verify with what was minted;
//! - 2: a body chosen by the input (raw, or a claims envelope with fuzz-chosen
//!   times, step and state padded across the 768-byte line) under a tag the
//!   target computes itself (docs/FORMAT.md §1, §3, §4), kind state,
//!   sealed or single-use: the tag verifies, so the claims parser, the
//!   policy checks and the state decoder get the fuzz bytes.
//!
//! Asserts, for every token, under the default policy (8192 characters) and
//! the largest (1 MiB), for the right tool (any step, step `confirm`) and
//! another tool: the stack and heap decoders give the same result (the same
//! refusal, or the same step, key, times and state, NaN = NaN); `verify_raw`
//! refuses with the same refusal, or accepts with the same claims and state
//! bytes that ciborium decodes to the same state, and it accepts exactly when
//! `verify` accepts or refuses only with `state_decoding` (ciborium then
//! refuses those bytes too); a token built by the target under the right
//! binding never fails `authentication_failed`; step `confirm` accepts
//! exactly the tokens any step accepts with that step, and otherwise refuses
//! as any step does or with `wrong_step`; no token verifies for another tool;
//! a raw input never verifies (an `Ok` would be a forgery); every refusal
//! displays and has a known reason.
#![no_main]

use std::sync::OnceLock;
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use reqstate::{
    Algorithm, Codec, Expected, KeyStatus, Keyring, Policy, Refusal, UntrustedToken, Verified,
};
use reqstate_fuzz::{
    binding, codec, envelope, fuzz_secret, hmac_token, roomy_policy, same_value, spec, working_key,
    CONTEXT, NOW, TOOL,
};

/// The codecs under test and the minters of mode 1.
struct Fixture {
    /// The verifying codecs: default policy, then the 1 MiB one.
    verifiers: [Codec; 2],
    /// Mints under HMAC key 1 (the verifiers' primary).
    hmac_minter: Codec,
    /// Mints under XChaCha20-Poly1305 key 2 (active in the verifiers).
    xchacha_minter: Codec,
    /// HMAC key 1's working key, for the tokens the target builds itself.
    k1: [u8; 32],
}

/// The verifiers' keyring: HMAC 1 primary, XChaCha 2 active, XChaCha 3
/// retired by status, HMAC 4 retired by its `retire_at` (before [`NOW`]).
fn verifier_keyring() -> Keyring {
    Keyring::new([
        spec(
            1,
            Algorithm::HmacSha256,
            KeyStatus::Primary,
            &fuzz_secret(1),
        ),
        spec(
            2,
            Algorithm::XChaCha20Poly1305,
            KeyStatus::Active,
            &fuzz_secret(2),
        ),
        spec(
            3,
            Algorithm::XChaCha20Poly1305,
            KeyStatus::Retired,
            &fuzz_secret(3),
        ),
        spec(4, Algorithm::HmacSha256, KeyStatus::Active, &fuzz_secret(4)).retire_at(NOW - 60),
    ])
    .expect("the fixed keyring is valid")
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let only = |id: u32, algorithm: Algorithm| {
            Keyring::new([spec(
                id,
                algorithm,
                KeyStatus::Primary,
                &fuzz_secret(id as u8),
            )])
            .expect("valid keyring")
        };
        Fixture {
            verifiers: [
                codec(verifier_keyring(), Policy::new()),
                codec(verifier_keyring(), roomy_policy()),
            ],
            hmac_minter: codec(only(1, Algorithm::HmacSha256), roomy_policy()),
            xchacha_minter: codec(only(2, Algorithm::XChaCha20Poly1305), roomy_policy()),
            k1: working_key(&fuzz_secret(1), "hmac-sha256"),
        }
    })
}

/// Reads the input front to back; past its end every read is zero.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn byte(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }

    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.byte(), self.byte()])
    }

    fn u64(&mut self) -> u64 {
        (0..8).fold(0, |v, _| (v << 8) | u64::from(self.byte()))
    }

    /// Up to `max` bytes, the count read first.
    fn chunk(&mut self, max: usize) -> &[u8] {
        let n = (usize::from(self.byte()) % (max + 1)).min(self.0.len());
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        head
    }

    fn rest(&mut self) -> &[u8] {
        std::mem::take(&mut self.0)
    }
}

/// How a token came to be, for what may be asserted of it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Origin {
    /// The fuzz bytes themselves: must never verify.
    Raw,
    /// Built by the target under HMAC key 1 for [`TOOL`] and [`CONTEXT`]
    /// (minted and unedited, or tagged by the target): the tag verifies.
    Genuine,
    /// Minted, then edited: anything may happen, but the decoders agree.
    Edited,
}

fn check_refusal(e: &Refusal) {
    assert!(
        !e.to_string().is_empty(),
        "a refusal displays as nothing: {e:?}"
    );
    assert!(
        Refusal::REASONS.contains(&e.reason()),
        "unknown reason {:?}",
        e.reason()
    );
}

fn same_verified(a: &Verified<ciborium::Value>, b: &Verified<ciborium::Value>) -> bool {
    a.step == b.step
        && a.key_id == b.key_id
        && a.issued_at == b.issued_at
        && a.expires_at == b.expires_at
        && same_value(&a.state, &b.state)
}

/// The three decoders on one token and one expectation.
fn agree(
    codec: &Codec,
    token: &str,
    expected: Expected<'_>,
) -> Result<Verified<ciborium::Value>, Refusal> {
    let stack = codec.verify::<ciborium::Value>(token, expected);
    let heap = UntrustedToken::parse(token, codec.policy())
        .and_then(|parsed| codec.verify_untrusted::<ciborium::Value>(parsed, expected));
    let raw = codec.verify_raw(token, expected);
    match (&stack, &heap) {
        (Ok(s), Ok(h)) => assert!(
            same_verified(s, h),
            "stack {s:?} and heap {h:?} disagree on {token:?}"
        ),
        (Err(s), Err(h)) => assert_eq!(s, h, "stack and heap refuse differently: {token:?}"),
        _ => panic!("stack {stack:?} and heap {heap:?} disagree on {token:?}"),
    }
    match (&stack, &raw) {
        (Ok(s), Ok(r)) => {
            assert_eq!(
                (&s.step, s.key_id, s.issued_at, s.expires_at),
                (&r.step, r.key_id, r.issued_at, r.expires_at),
                "verify and verify_raw give different claims: {token:?}"
            );
            let decoded: ciborium::Value = ciborium::from_reader(r.state.as_slice())
                .unwrap_or_else(|e| {
                    panic!("verify decoded a state ciborium refuses ({e:?}): {token:?}")
                });
            assert!(
                same_value(&decoded, &s.state),
                "verify_raw's bytes decode to {decoded:?}, verify gave {:?}",
                s.state
            );
        }
        (Err(Refusal::StateDecoding(_)), Ok(r)) => {
            assert!(
                ciborium::from_reader::<ciborium::Value, _>(r.state.as_slice()).is_err(),
                "verify refused a state ciborium decodes: {token:?}"
            );
        }
        (Err(s), Err(r)) => {
            assert_eq!(s, r, "verify and verify_raw refuse differently: {token:?}");
            assert!(
                !matches!(s, Refusal::StateDecoding(_)),
                "verify_raw decoded the state: {token:?}"
            );
        }
        _ => panic!("verify {stack:?} and verify_raw {raw:?} disagree on {token:?}"),
    }
    if let Err(e) = &stack {
        check_refusal(e);
    }
    stack
}

fn check(token: &str, origin: Origin, minted: Option<(&str, &ciborium::Value)>) {
    let f = fixture();
    for verifier in &f.verifiers {
        let right = binding(TOOL, CONTEXT);
        let any = agree(verifier, token, right.any_step());
        let confirm = agree(verifier, token, right.step("confirm"));
        match (&any, &confirm) {
            (Ok(a), Ok(c)) => assert!(a.step == "confirm" && same_verified(a, c)),
            (Ok(a), Err(e)) => assert!(
                a.step != "confirm" && matches!(e, Refusal::WrongStep { .. }),
                "{e:?}"
            ),
            // The step is checked before the state is decoded (FORMAT.md §8).
            (Err(Refusal::StateDecoding(_)), Err(Refusal::WrongStep { .. })) => {}
            (Err(a), Err(c)) => {
                assert_eq!(a, c, "a step changes a refusal that is not about the step")
            }
            (Err(_), Ok(_)) => panic!("verifies for one step but not for any step: {token:?}"),
        }
        let other_tool = agree(
            verifier,
            token,
            binding("delete-everything", CONTEXT).any_step(),
        );
        assert!(
            other_tool.is_err(),
            "a token verifies for another tool: {token:?}"
        );
        match origin {
            Origin::Raw => assert!(
                any.is_err(),
                "FORGERY: a raw fuzz input verified: {token:?}"
            ),
            Origin::Genuine => {
                assert!(
                    !matches!(any, Err(Refusal::AuthenticationFailed)),
                    "a token the target tagged fails authentication: {token:?}"
                );
                if let Some((step, state)) = minted {
                    let fits = token.len() <= verifier.policy().max_token_len();
                    match &any {
                        Ok(v) => assert!(
                            v.step == step && same_value(&v.state, state),
                            "minted {step:?} {state:?}, verified {v:?}"
                        ),
                        Err(e) => assert!(
                            !fits && matches!(e, Refusal::TooLarge { .. }),
                            "a minted token is refused: {e:?}"
                        ),
                    }
                }
            }
            Origin::Edited => {}
        }
    }
}

/// Mode 1: a minted token, then the input's edits of its text.
fn minted_then_edited(r: &mut Reader<'_>) {
    let f = fixture();
    let choice = r.byte();
    let minter = if choice & 1 == 0 {
        &f.hmac_minter
    } else {
        &f.xchacha_minter
    };
    let step = ["confirm", "", "pick", "x"][usize::from(choice >> 1) % 4];
    // A byte-string state from 0 to 1535 bytes: tokens on both sides of
    // the stack buffer and of the default 8192-character limit.
    let len = usize::from(r.u16()) % 1536;
    let fill = r.byte();
    let state = ciborium::Value::Bytes(vec![fill; len]);
    let ttl = Duration::from_secs(1 + u64::from(r.u16()) % 900);
    let Ok(minted) = minter.mint(binding(TOOL, CONTEXT), step, &state, ttl) else {
        return;
    };
    let mut text = minted.token.into_bytes();
    let edits = usize::from(r.byte()) % 5;
    for _ in 0..edits {
        let at = usize::from(r.u16()) % (text.len() + 1);
        let byte = r.byte();
        match r.byte() % 4 {
            0 if at < text.len() => text[at] = byte,
            1 => text.insert(at, byte),
            2 if at < text.len() => {
                text.remove(at);
            }
            _ => text.truncate(at),
        }
    }
    let token = String::from_utf8_lossy(&text);
    if edits == 0 && choice & 1 == 0 {
        check(&token, Origin::Genuine, Some((step, &state)));
    } else {
        check(&token, Origin::Edited, None);
    }
}

/// Mode 2: a body of the input's under a tag of the target's.
fn tagged_body(r: &mut Reader<'_>) {
    let f = fixture();
    let choice = r.byte();
    // State, sealed, single-use (the verifiers refuse the last two by kind).
    let kind = [0u8, 0, 0, 1, 2][usize::from(choice % 5)];
    let body = if choice & 0x80 == 0 {
        r.rest().to_vec()
    } else {
        let issued_at = match r.byte() % 4 {
            0 => NOW,
            1 => NOW.wrapping_add(u64::from(r.u16())).wrapping_sub(0x8000),
            _ => r.u64(),
        };
        let lifetime = match r.byte() % 3 {
            0 => 600,
            1 => u64::from(r.u16()),
            _ => r.u64(),
        };
        let step = String::from_utf8_lossy(r.chunk(12)).into_owned();
        let pad = usize::from(r.u16()) % 1200;
        let mut state = r.rest().to_vec();
        if pad > 0 {
            // A byte string of `pad` bytes, well-formed CBOR of any length.
            let mut padded = Vec::with_capacity(pad + 3);
            reqstate_fuzz::cbor_head(2, pad as u64, &mut padded);
            padded.resize(padded.len() + pad, 0xa5);
            state = padded;
        }
        envelope(issued_at, lifetime, &step, &state)
    };
    let token = hmac_token(&f.k1, 1, kind, TOOL.as_bytes(), CONTEXT, &body);
    check(
        &token,
        if kind == 0 {
            Origin::Genuine
        } else {
            Origin::Edited
        },
        None,
    );
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        check("", Origin::Raw, None);
        return;
    };
    let mut r = Reader(rest);
    match mode % 3 {
        0 => check(&String::from_utf8_lossy(rest), Origin::Raw, None),
        1 => minted_then_edited(&mut r),
        _ => tagged_body(&mut r),
    }
});
