//! Single-use tokens in the core (FORMAT.md §5.1, §8 steps 6 and 15): a
//! single-use token is accepted once, by `consume`, and never by `verify`;
//! the store is touched only by tokens that passed every other check.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use base64::Engine as _;
use reqstate::{
    Algorithm, Binding, Codec, ConsumeError, FixedClock, KeyId, KeySpec, KeyStatus, Keyring,
    MemoryReplayStore, OsRandom, Policy, Refusal, ReplayStore, Secret, SpentId, StoreError,
    TokenKind,
};

const NOW: u64 = 1_764_460_800;
const TTL: Duration = Duration::from_secs(600);

fn codec(algorithm: Algorithm, now: u64) -> Codec {
    let keyring = Keyring::new([KeySpec::new(
        KeyId::new(3),
        algorithm,
        KeyStatus::Primary,
        Secret::from_slice(&[7u8; 32]),
    )])
    .expect("keyring");
    Codec::with_parts(keyring, Policy::new(), FixedClock(now), OsRandom::new())
}

fn binding() -> Binding<'static> {
    Binding::with_context_bytes("increase-counter", b"user-42").expect("binding")
}

/// A store that counts the calls it gets, answering with `answer` (or with
/// a real memory store when `None`).
struct Counting {
    calls: AtomicUsize,
    answer: Mutex<Option<Result<bool, StoreError>>>,
    inner: MemoryReplayStore,
}

impl Counting {
    fn new(answer: Option<Result<bool, StoreError>>) -> Self {
        Counting {
            calls: AtomicUsize::new(0),
            answer: Mutex::new(answer),
            inner: MemoryReplayStore::new(1024),
        }
    }
}

impl ReplayStore for Counting {
    fn insert_if_absent(&self, id: &SpentId, until: u64, now: u64) -> Result<bool, StoreError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        match *self.answer.lock().expect("lock") {
            Some(answer) => answer,
            None => self.inner.insert_if_absent(id, until, now),
        }
    }
}

#[test]
fn a_single_use_token_is_consumed_once_and_never_merely_verified() {
    for algorithm in Algorithm::ALL {
        let codec = codec(algorithm, NOW);
        let minted = codec
            .mint_single_use(binding(), "confirm", &15u32, TTL)
            .expect("mint");
        let store = MemoryReplayStore::new(1024);
        assert_eq!(
            codec.verify::<u32>(&minted.token, binding().any_step()),
            Err(Refusal::SingleUse),
            "{algorithm}"
        );
        let first = codec
            .consume::<u32>(&minted.token, binding().step("confirm"), &store)
            .expect("first consume");
        assert_eq!((first.state, first.step.as_str()), (15, "confirm"));
        assert_eq!(
            codec.consume::<u32>(&minted.token, binding().step("confirm"), &store),
            Err(Refusal::Replayed.into())
        );
        // verify still refuses it the same way after it was spent.
        assert_eq!(
            codec.verify::<u32>(&minted.token, binding().any_step()),
            Err(Refusal::SingleUse)
        );
    }
}

#[test]
fn consume_refuses_tokens_that_are_not_single_use() {
    let codec = codec(Algorithm::XChaCha20Poly1305, NOW);
    let plain = codec.mint(binding(), "confirm", &1u8, TTL).expect("mint");
    let store = Counting::new(None);
    assert_eq!(
        codec.consume::<u8>(&plain.token, binding().any_step(), &store),
        Err(Refusal::WrongKind {
            expected: TokenKind::SingleUse,
            found: TokenKind::State,
        }
        .into())
    );
    assert_eq!(store.calls.load(Ordering::SeqCst), 0);
}

#[test]
fn single_use_tokens_are_distinct_even_under_hmac_and_24_characters_longer() {
    let codec = codec(Algorithm::HmacSha256, NOW);
    let plain = codec.mint(binding(), "confirm", &1u8, TTL).expect("mint");
    let again = codec.mint(binding(), "confirm", &1u8, TTL).expect("mint");
    assert_eq!(plain.token, again.token, "HMAC tokens are deterministic");
    let a = codec
        .mint_single_use(binding(), "confirm", &1u8, TTL)
        .expect("mint");
    let b = codec
        .mint_single_use(binding(), "confirm", &1u8, TTL)
        .expect("mint");
    assert_ne!(a.token, b.token);
    assert_eq!(a.token.len(), plain.token.len() + 24);
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(&a.token)
        .expect("base64url");
    assert_eq!(bytes[0], 0x19, "version 1, kind 2, HMAC");
    let x = self::codec(Algorithm::XChaCha20Poly1305, NOW)
        .mint_single_use(binding(), "confirm", &1u8, TTL)
        .expect("mint");
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(&x.token)
        .expect("base64url");
    assert_eq!(bytes[0], 0x1a, "version 1, kind 2, XChaCha20-Poly1305");
}

#[test]
fn the_store_sees_only_tokens_that_passed_every_other_check() {
    let codec = codec(Algorithm::HmacSha256, NOW);
    let minted = codec
        .mint_single_use(binding(), "confirm", &"ten", TTL)
        .expect("mint");
    let mut tampered = minted.token.clone().into_bytes();
    let last = tampered.len() - 2;
    tampered[last] = if tampered[last] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(tampered).expect("ascii");
    let other_tool = Binding::with_context_bytes("delete-everything", b"user-42").expect("b");
    let other_caller = Binding::with_context_bytes("increase-counter", b"user-43").expect("b");
    let late = self::codec(Algorithm::HmacSha256, NOW + 10_000);
    let store = Counting::new(None);
    let refusals = [
        codec
            .consume::<String>(&tampered, binding().any_step(), &store)
            .map(|_| ()),
        codec
            .consume::<String>(&minted.token, other_tool.any_step(), &store)
            .map(|_| ()),
        codec
            .consume::<String>(&minted.token, other_caller.any_step(), &store)
            .map(|_| ()),
        codec
            .consume::<String>(&minted.token, binding().step("amount"), &store)
            .map(|_| ()),
        late.consume::<String>(&minted.token, binding().any_step(), &store)
            .map(|_| ()),
        // The state is text: decoding it as a number fails before the store.
        codec
            .consume::<u64>(&minted.token, binding().any_step(), &store)
            .map(|_| ()),
    ];
    let reasons: Vec<&str> = refusals
        .iter()
        .map(|r| {
            r.as_ref()
                .map_err(ConsumeError::reason)
                .err()
                .unwrap_or("accepted")
        })
        .collect();
    assert_eq!(
        reasons,
        [
            "authentication_failed",
            "authentication_failed",
            "authentication_failed",
            "wrong_step",
            "expired",
            "state_decoding",
        ]
    );
    assert_eq!(store.calls.load(Ordering::SeqCst), 0);
    // None of that spent the token.
    let verified = codec
        .consume::<String>(&minted.token, binding().any_step(), &store)
        .expect("still unspent");
    assert_eq!(verified.state, "ten");
    assert_eq!(store.calls.load(Ordering::SeqCst), 1);
}

#[test]
fn a_store_that_cannot_record_is_a_store_error_and_leaves_the_token_unspent() {
    let codec = codec(Algorithm::XChaCha20Poly1305, NOW);
    let minted = codec
        .mint_single_use(binding(), "pay", &5u8, TTL)
        .expect("mint");
    let store = Counting::new(Some(Err(StoreError::Unavailable)));
    assert_eq!(
        codec.consume::<u8>(&minted.token, binding().any_step(), &store),
        Err(ConsumeError::Store(StoreError::Unavailable))
    );
    *store.answer.lock().expect("lock") = Some(Err(StoreError::Full));
    assert_eq!(
        codec.consume::<u8>(&minted.token, binding().any_step(), &store),
        Err(ConsumeError::Store(StoreError::Full))
    );
    // The store comes back: the token was never recorded, so it is taken once.
    *store.answer.lock().expect("lock") = None;
    assert!(
        codec
            .consume::<u8>(&minted.token, binding().any_step(), &store)
            .is_ok()
    );
    assert_eq!(
        codec.consume::<u8>(&minted.token, binding().any_step(), &store),
        Err(Refusal::Replayed.into())
    );
}

#[test]
fn a_redemption_names_its_record_and_keeps_it_for_the_whole_window() {
    let codec = codec(Algorithm::HmacSha256, NOW);
    let minted = codec
        .mint_single_use(binding(), "pay", &5u8, TTL)
        .expect("mint");
    let redemption = codec
        .verify_single_use::<u8>(&minted.token, binding().any_step())
        .expect("verifies");
    let leeway = Policy::new().clock_leeway();
    assert_eq!(redemption.record_until(), minted.expires_at + leeway);
    assert_eq!(redemption.spent_id().key_id(), KeyId::new(3));
    let name = redemption.spent_id().record_name();
    assert!(name.starts_with("spent:v1:3:"), "{name}");
    assert_eq!(name.len(), "spent:v1:3:".len() + 32);
    // The record name never contains the token.
    assert!(!minted.token.contains(&name[11..]));
    // An asynchronous store's answer finishes it: already spent is a replay.
    let again = codec
        .verify_single_use::<u8>(&minted.token, binding().any_step())
        .expect("verifies");
    assert_eq!(redemption.finish(Ok(true)).map(|v| v.state), Ok(5));
    assert_eq!(
        again.finish(Ok(false)).map(|v| v.state),
        Err(Refusal::Replayed.into())
    );
}

#[test]
fn of_many_concurrent_consumes_of_one_token_exactly_one_succeeds() {
    let codec = codec(Algorithm::XChaCha20Poly1305, NOW);
    let store = MemoryReplayStore::new(1 << 16);
    for _ in 0..20 {
        let minted = codec
            .mint_single_use(binding(), "pay", &5u8, TTL)
            .expect("mint");
        let wins = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..16)
                .map(|_| {
                    scope.spawn(|| codec.consume::<u8>(&minted.token, binding().any_step(), &store))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("no panic"))
                .filter(Result::is_ok)
                .count()
        });
        assert_eq!(wins, 1);
    }
}

#[test]
fn minting_a_single_use_token_needs_randomness_under_either_algorithm() {
    struct Broken;
    impl reqstate::SecureRandom for Broken {
        fn fill(&self, _: &mut [u8]) -> Result<(), reqstate::RandomnessUnavailable> {
            Err(reqstate::RandomnessUnavailable)
        }
    }
    let keyring = Keyring::ephemeral(Algorithm::HmacSha256, &OsRandom::new()).expect("key");
    let codec = Codec::with_parts(keyring, Policy::new(), FixedClock(NOW), Broken);
    // A plain HMAC token needs no randomness; a single-use one does.
    assert!(codec.mint(binding(), "s", &1u8, TTL).is_ok());
    assert_eq!(
        codec
            .mint_single_use(binding(), "s", &1u8, TTL)
            .map(|m| m.token)
            .map_err(|e| e.reason()),
        Err("randomness_unavailable")
    );
}
