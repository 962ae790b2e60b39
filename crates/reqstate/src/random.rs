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

/// OS randomness for everything, with nonce hedges served from a per-thread
/// pool fetched 4 KiB at a time (one `getrandom` call per ~170 hedges).
///
/// [`SecureRandom::fill`] (single-use token ids, key generation) goes to the
/// OS on every call, like [`OsRandom`]: no pool, so no clone of the process
/// can repeat those bytes. A pool guarded by a process-id check would not do:
/// the check does **not** see every clone (a child forked into a new PID
/// namespace can have its parent's pid, and a VM or CRIU snapshot restored
/// twice keeps both the pid and the pool), and two single-use tokens with one
/// id would share one spent-token record.
///
/// [`SecureRandom::fill_hedge`], which the codec uses for its nonces, draws
/// from the pool with no check at all: nonces are hedged with the message
/// (FORMAT.md §4.2), so bytes repeated after any clone, `fork` included, can
/// give the same nonce only to the very same message, which is then the very
/// same token. Bytes are wiped from the pool as they are handed out, and the
/// pool is wiped when its thread exits. Requests over 64 bytes go straight to
/// the OS.
#[cfg(feature = "std")]
#[cfg_attr(docsrs, doc(cfg(feature = "std")))]
#[derive(Debug, Default, Clone, Copy)]
pub struct BufferedRandom;

#[cfg(feature = "std")]
struct Pool {
    bytes: zeroize::Zeroizing<[u8; POOL_LEN]>,
    /// Bytes before `pos` have been handed out (and wiped).
    pos: usize,
}

#[cfg(feature = "std")]
const POOL_LEN: usize = 4096;

#[cfg(feature = "std")]
std::thread_local! {
    static POOL: core::cell::RefCell<Pool> = core::cell::RefCell::new(Pool {
        bytes: zeroize::Zeroizing::new([0; POOL_LEN]),
        pos: POOL_LEN,
    });
}

#[cfg(feature = "std")]
impl BufferedRandom {
    /// Draws from this thread's pool, refilling it when it runs short.
    fn draw(dest: &mut [u8]) -> Result<(), RandomnessUnavailable> {
        if dest.len() > 64 {
            return OsRandom::new().fill(dest);
        }
        POOL.with(|pool| {
            let mut pool = pool.borrow_mut();
            if POOL_LEN - pool.pos < dest.len() {
                ring::rand::SecureRandom::fill(
                    &ring::rand::SystemRandom::new(),
                    &mut pool.bytes[..],
                )
                .map_err(|_| RandomnessUnavailable)?;
                pool.pos = 0;
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
        OsRandom::new().fill(dest)
    }

    fn fill_hedge(&self, dest: &mut [u8]) -> Result<(), RandomnessUnavailable> {
        Self::draw(dest)
    }
}
