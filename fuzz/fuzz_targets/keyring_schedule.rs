//! Fuzz target `keyring_schedule`: a random scheduled keyring and an instant
//! through the core. The input is not the TOML itself: `schedule::
//! keyring_and_instant` (src/schedule.rs) builds from it a keyring text of
//! one to five keys with statuses, `mint_from`, `retire_at` and `created`
//! instants in many forms (offsets, fractions, impossible dates, the ends of
//! the range, `[[key]]` tables or inline tables) and an instant next to one
//! of them, so that nearly every input is a keyring the loader has to judge
//! rather than a TOML syntax error.
//!
//! Asserts: nothing panics; a refusal is `invalid_keyring` with a message;
//! for a loaded keyring, at the instant and one second around every
//! transition, the minting key is not retired, exactly one key has the
//! status primary and it is the minting key, and a key is refused exactly
//! when its status is retired or its `retire_at` has come (`schedule::
//! check_at`); a codec on that keyring and instant mints under the minting
//! key, and the token verifies at that same instant under that key.
//! The Rust-against-TypeScript comparison of the same texts is
//! `fuzz/differential/run.sh`, which replays this target's corpus.
#![no_main]

use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use reqstate::{Codec, FixedClock, Keyring, Policy};
use reqstate_fuzz::schedule::{evaluate, keyring_and_instant};
use reqstate_fuzz::{binding, DeterministicRandom};

fuzz_target!(|data: &[u8]| {
    let (text, now) = keyring_and_instant(data);
    let outcome = evaluate(&text, now);
    if outcome["ok"] != true {
        return;
    }
    let keyring = Keyring::from_toml(&text).expect("evaluate loaded it");
    let minting = keyring.minting_key(now).id();
    let codec = Codec::with_parts(
        keyring,
        Policy::new(),
        FixedClock(now),
        DeterministicRandom::default(),
    );
    let bound = binding("fuzz-tool", b"ctx");
    let minted = codec
        .mint(bound, "step", &1u8, Duration::from_secs(60))
        .unwrap_or_else(|e| panic!("a loaded keyring does not mint at {now}: {e}\n{text}"));
    assert_eq!(
        minted.key_id, minting,
        "minted under another key than the minting one\n{text}"
    );
    let verified = codec
        .verify::<u8>(&minted.token, bound.step("step"))
        .unwrap_or_else(|e| panic!("a token minted at {now} does not verify then: {e}\n{text}"));
    assert_eq!((verified.key_id, verified.state), (minting, 1));
});
