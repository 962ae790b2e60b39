//! Injectable time: one of the two things a codec takes from its
//! environment (the other is randomness, [`crate::SecureRandom`]).

/// A source of the current time, in whole unix seconds.
///
/// The `std` feature provides [`SystemClock`]; tests and `no_std` users supply
/// their own (an edge runtime's `Date.now()`, a hardware RTC, `FixedClock` (feature `test-util`)).
pub trait Clock: Send + Sync {
    /// Seconds since 1970-01-01T00:00:00Z.
    fn now(&self) -> u64;
}

/// A clock that always reads the same second: for tests and test vectors.
/// Behind the `test-util` feature: a server never wants one.
#[cfg(any(test, feature = "test-util"))]
#[cfg_attr(docsrs, doc(cfg(feature = "test-util")))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FixedClock(pub u64);

#[cfg(any(test, feature = "test-util"))]
impl Clock for FixedClock {
    fn now(&self) -> u64 {
        self.0
    }
}

/// The operating system's wall clock.
#[cfg(feature = "std")]
#[cfg_attr(docsrs, doc(cfg(feature = "std")))]
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
