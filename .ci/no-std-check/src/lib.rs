//! A `no_std` user of the core crate: supplies its own clock and randomness
//! and mints and verifies, so the whole API is instantiated for the target.
#![no_std]

extern crate alloc;

use alloc::string::String;
use core::time::Duration;

use reqstate::{
    Aad, Binding, Clock, Codec, Error, Keyring, Policy, RandomnessUnavailable, SecretRef,
    SecretSource, SecureRandom,
};
use zeroize::Zeroizing;

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
    fn fill(&self, dest: &mut [u8]) -> Result<(), RandomnessUnavailable> {
        if (self.0)(dest) { Ok(()) } else { Err(RandomnessUnavailable) }
    }
}

/// Secrets fed by the host: a `secret_env` reference is looked up in the
/// host's bindings (a Worker's `env`); files do not exist here.
pub struct HostSecrets(pub fn(&str) -> Option<String>);

impl SecretSource for HostSecrets {
    fn resolve(&self, reference: SecretRef<'_>) -> Result<Zeroizing<String>, String> {
        match reference {
            SecretRef::Env(name) => (self.0)(name)
                .map(Zeroizing::new)
                .ok_or_else(|| String::from("the host has no such binding")),
            _ => Err(String::from("this host has no files")),
        }
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
    let context = reqstate::call_context(&reqstate::Call {
        principal: "user-42",
        audience: "counter-server",
        method: "tools/call",
        arguments: reqstate::Arguments::Json("{\"current\":10}"),
    })?;
    let binding = Binding::new("increase-counter", &context)?;
    let minted = codec.mint(binding, "confirm", &Counter { current: 10, amount: 5 }, Duration::from_secs(600))?;
    let verified = codec.verify::<Counter>(&minted.token, binding.step("confirm"))?;
    let _ = (verified.state.current, verified.state.amount);
    let sealed = codec.seal(b"payload", Aad::new(b"aad")?)?;
    codec.unseal(&sealed.token, Aad::new(b"aad")?)?;
    Ok(minted.token)
}

/// Loads a keyring whose secrets the host resolves.
pub fn load_with_host_secrets(keyring_toml: &str, secrets: fn(&str) -> Option<String>) -> Result<Keyring, Error> {
    Ok(Keyring::from_toml_with(keyring_toml, &HostSecrets(secrets))?)
}
