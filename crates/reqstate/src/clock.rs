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

/// OS randomness fetched 4 KiB at a time and handed out per thread: one
/// `getrandom` call per ~170 XChaCha20-Poly1305 nonces instead of one per nonce.
///
/// Fork-safe: the pool remembers the process id it was filled in, and a
/// forked child (new pid) discards it before drawing, so parent and child never
/// hand out the same bytes. That check is a `getpid` call per draw, which is
/// most of this source's cost (see docs/BENCHMARKS.md); a pool without it would
/// be faster and would let a forked child repeat its parent's nonces. Bytes are wiped from the pool as they are handed
/// out, and the pool is wiped when its thread exits. Requests over 64 bytes
/// (key generation) go straight to the OS.
#[cfg(feature = "std")]
#[derive(Debug, Default, Clone, Copy)]
pub struct BufferedRandom;

#[cfg(feature = "std")]
struct Pool {
    bytes: zeroize::Zeroizing<[u8; POOL_LEN]>,
    /// Bytes before `pos` have been handed out (and wiped).
    pos: usize,
    pid: u32,
}

#[cfg(feature = "std")]
const POOL_LEN: usize = 4096;

#[cfg(feature = "std")]
std::thread_local! {
    static POOL: core::cell::RefCell<Pool> = core::cell::RefCell::new(Pool {
        bytes: zeroize::Zeroizing::new([0; POOL_LEN]),
        pos: POOL_LEN,
        pid: 0,
    });
}

#[cfg(feature = "std")]
impl SecureRandom for BufferedRandom {
    fn fill(&self, dest: &mut [u8]) -> Result<(), Error> {
        if dest.len() > 64 {
            return OsRandom::new().fill(dest);
        }
        POOL.with(|pool| {
            let mut pool = pool.borrow_mut();
            let pid = std::process::id();
            if pool.pid != pid || POOL_LEN - pool.pos < dest.len() {
                ring::rand::SecureRandom::fill(
                    &ring::rand::SystemRandom::new(),
                    &mut pool.bytes[..],
                )
                .map_err(|_| Error::RandomnessUnavailable)?;
                pool.pos = 0;
                pool.pid = pid;
            }
            let range = pool.pos..pool.pos + dest.len();
            dest.copy_from_slice(&pool.bytes[range.clone()]);
            zeroize::Zeroize::zeroize(&mut pool.bytes[range]);
            pool.pos += dest.len();
            Ok(())
        })
    }
}
