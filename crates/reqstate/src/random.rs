//! Injectable randomness: the random source a codec draws XChaCha20-Poly1305
//! nonce hedges from, and key generation draws secrets from.

use crate::error::RandomnessUnavailable;

/// A cryptographically secure random source, used for AEAD nonces and key
/// generation.
///
/// Implementations must be unpredictable and should never return the same
/// bytes twice, including across `fork`. The codec hedges each
/// XChaCha20-Poly1305 nonce with the message (FORMAT.md §4.2), so a source
/// that does repeat (a cloned process) cannot make two different messages
/// share a nonce, but fresh bytes are what keep two tokens of the same message
/// apart. The `std` feature provides [`OsRandom`] and [`BufferedRandom`].
pub trait SecureRandom: Send + Sync {
    /// Fills `dest` with random bytes, or fails (the codec then mints nothing).
    fn fill(&self, dest: &mut [u8]) -> Result<(), RandomnessUnavailable>;

    /// Fills `dest` with the random bytes `r` that hedge one XChaCha20-Poly1305
    /// nonce (FORMAT.md §4.2). The codec draws nonce randomness only through
    /// this method.
    ///
    /// These bytes stay secret (only an HMAC of them is published) and a
    /// repetition of them cannot give two different messages the same nonce,
    /// so a source may serve them from a cheaper path that does not detect
    /// `fork` ([`BufferedRandom`] skips its process-id check here). The
    /// default is [`SecureRandom::fill`].
    fn fill_hedge(&self, dest: &mut [u8]) -> Result<(), RandomnessUnavailable> {
        self.fill(dest)
    }
}

/// The operating system's CSPRNG (`getrandom(2)` on Linux) through `ring`.
///
/// Each call is one system call. It is not buffered, so a forked child can
/// never replay its parent's random bytes.
#[cfg(feature = "std")]
#[cfg_attr(docsrs, doc(cfg(feature = "std")))]
#[derive(Debug)]
pub struct OsRandom(ring::rand::SystemRandom);

#[cfg(feature = "std")]
impl Default for OsRandom {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(feature = "std")]
#[cfg_attr(docsrs, doc(cfg(feature = "std")))]
impl OsRandom {
    /// The system random source.
    pub fn new() -> Self {
        OsRandom(ring::rand::SystemRandom::new())
    }
}

#[cfg(feature = "std")]
impl SecureRandom for OsRandom {
    fn fill(&self, dest: &mut [u8]) -> Result<(), RandomnessUnavailable> {
        ring::rand::SecureRandom::fill(&self.0, dest).map_err(|_| RandomnessUnavailable)
    }
}

/// OS randomness fetched 4 KiB at a time and handed out per thread: one
/// `getrandom` call per ~170 draws of 24 bytes instead of one per draw.
///
/// [`SecureRandom::fill`] checks the process id on every draw, and a process
/// with another pid than the one that filled the pool (an ordinary `fork`
/// child) discards it first, so its bytes are fit for any purpose. That
/// `getpid` call costs more than the draw itself (docs/BENCHMARKS.md), and it
/// does **not** see every clone: a child forked into a new PID namespace can
/// have its parent's pid, and a VM or CRIU snapshot restored twice keeps both
/// the pid and the pool.
///
/// [`SecureRandom::fill_hedge`], which the codec uses for its nonces, skips
/// the check: nonces are hedged with the message (FORMAT.md §4.2), so bytes
/// repeated after any clone, `fork` included, can give the same nonce only to
/// the very same message, which is then the very same token. Bytes are wiped
/// from the pool as they are handed out, and the pool is wiped when its thread
/// exits. Requests over 64 bytes (key generation) go straight to the OS.
#[cfg(feature = "std")]
#[cfg_attr(docsrs, doc(cfg(feature = "std")))]
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
impl BufferedRandom {
    /// Draws from this thread's pool, refilling it when it runs short and,
    /// if `check_pid`, when this process did not fill it.
    fn draw(dest: &mut [u8], check_pid: bool) -> Result<(), RandomnessUnavailable> {
        if dest.len() > 64 {
            return OsRandom::new().fill(dest);
        }
        POOL.with(|pool| {
            let mut pool = pool.borrow_mut();
            let stale = check_pid && pool.pid != std::process::id();
            if stale || POOL_LEN - pool.pos < dest.len() {
                ring::rand::SecureRandom::fill(
                    &ring::rand::SystemRandom::new(),
                    &mut pool.bytes[..],
                )
                .map_err(|_| RandomnessUnavailable)?;
                pool.pos = 0;
                pool.pid = std::process::id();
            }
            let range = pool.pos..pool.pos + dest.len();
            dest.copy_from_slice(&pool.bytes[range.clone()]);
            zeroize::Zeroize::zeroize(&mut pool.bytes[range]);
            pool.pos += dest.len();
            Ok(())
        })
    }
}

#[cfg(feature = "std")]
impl SecureRandom for BufferedRandom {
    fn fill(&self, dest: &mut [u8]) -> Result<(), RandomnessUnavailable> {
        Self::draw(dest, true)
    }

    fn fill_hedge(&self, dest: &mut [u8]) -> Result<(), RandomnessUnavailable> {
        Self::draw(dest, false)
    }
}
