//! A `no_std` user of the core crate: supplies its own clock and randomness
//! and mints and verifies, so the whole API is instantiated for the target.
#![no_std]

extern crate alloc;

use alloc::string::String;
use core::time::Duration;

use reqstate::{Clock, Codec, Error, Keyring, Policy, SecureRandom};

/// A clock fed by the host (e.g. `Date.now()` in a Worker).
pub struct HostClock(pub u64);

impl Clock for HostClock {
    fn now(&self) -> u64 {
        self.0
    }
}

/// Randomness fed by the host. This check only compiles; a real embedding
/// calls its platform's CSPRNG here.
pub struct HostRandom(pub fn(&mut [u8]) -> bool);

impl SecureRandom for HostRandom {
    fn fill(&self, dest: &mut [u8]) -> Result<(), Error> {
        if (self.0)(dest) { Ok(()) } else { Err(Error::RandomnessUnavailable) }
    }
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Counter {
    current: u64,
    amount: u64,
}

/// Mints and verifies one token with a keyring given as TOML text.
pub fn round_trip(keyring_toml: &str, now: u64, random: fn(&mut [u8]) -> bool) -> Result<String, Error> {
    let codec = Codec::with_parts(Keyring::from_toml(keyring_toml)?, Policy::new(), HostClock(now), HostRandom(random));
    let context = reqstate::call_context("user-42", "counter-server", "tools/call", "{\"current\":10}")?;
    let token = codec.mint("increase-counter", "confirm", &Counter { current: 10, amount: 5 }, Duration::from_secs(600), &context)?;
    let verified = codec.verify_step::<Counter>(&token, "increase-counter", "confirm", &context)?;
    let _ = (verified.state.current, verified.state.amount);
    let sealed = codec.seal(b"payload", b"aad")?;
    codec.unseal(&sealed, b"aad")?;
    Ok(token)
}
