//! Injectable time and randomness: the only two things a codec takes from its environment.

use crate::error::Error;

/// A source of the current time, in whole unix seconds.
///
/// The `std` feature provides [`SystemClock`]; tests and `no_std` users supply
/// their own (an edge runtime's `Date.now()`, a hardware RTC, [`FixedClock`]).
pub trait Clock: Send + Sync {
    /// Seconds since 1970-01-01T00:00:00Z.
    fn now(&self) -> u64;
}

/// A cryptographically secure random source, used for AEAD nonces and key
/// generation.
///
/// Implementations must be unpredictable and must never return the same bytes
/// twice, including across `fork`: XChaCha20-Poly1305 tokens are only as safe
/// as their nonces are unique. The `std` feature provides [`OsRandom`].
pub trait SecureRandom: Send + Sync {
    /// Fills `dest` with random bytes, or fails (the codec then mints nothing).
    fn fill(&self, dest: &mut [u8]) -> Result<(), Error>;
}

/// A clock that always reads the same second: for tests and test vectors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FixedClock(pub u64);

impl Clock for FixedClock {
    fn now(&self) -> u64 {
        self.0
    }
}

/// The operating system's wall clock.
#[cfg(feature = "std")]
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

#[cfg(feature = "std")]
impl Clock for SystemClock {
    fn now(&self) -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    }
}

/// The operating system's CSPRNG (`getrandom(2)` on Linux) through `ring`.
///
/// Each call is one system call. It is not buffered, so a forked child can
/// never replay its parent's random bytes.
#[cfg(feature = "std")]
#[derive(Debug)]
pub struct OsRandom(ring::rand::SystemRandom);

#[cfg(feature = "std")]
impl Default for OsRandom {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(feature = "std")]
impl OsRandom {
    /// The system random source.
    pub fn new() -> Self {
        OsRandom(ring::rand::SystemRandom::new())
    }
}

#[cfg(feature = "std")]
impl SecureRandom for OsRandom {
    fn fill(&self, dest: &mut [u8]) -> Result<(), Error> {
        ring::rand::SecureRandom::fill(&self.0, dest).map_err(|_| Error::RandomnessUnavailable)
    }
}
