//! The codec: mints and verifies requestState tokens and seals raw payloads
//! under a keyring, a policy, a clock and a random source.

use alloc::string::{String, ToString};
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::time::Duration;

use base64::Engine as _;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::clock::{Clock, SecureRandom};
use crate::crypto::{self, Binding};
use crate::error::Error;
use crate::keyring::{Key, KeyId, KeyStatus, Keyring};
use crate::token::{self, TOKEN_BASE64, TokenKind, UntrustedToken};

/// Longest tool name accepted, in bytes.
pub const MAX_TOOL_LEN: usize = 256;
/// Longest step name accepted, in bytes.
pub const MAX_STEP_LEN: usize = 256;
/// Longest context accepted, in bytes. Context is hashed, not stored; bind a
/// digest (see [`crate::call_context`]) rather than large values.
pub const MAX_CONTEXT_LEN: usize = 64 * 1024;

/// The limits a codec enforces. Strict by default; each relaxation is a named
/// method that checks its bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    max_token_len: usize,
    clock_leeway: u64,
    max_lifetime: u64,
}

impl Policy {
    /// Default longest token, in characters: 8 KiB.
    pub const DEFAULT_MAX_TOKEN_LEN: usize = 8 * 1024;
    /// Highest configurable token length, in characters: 1 MiB.
    pub const MAX_MAX_TOKEN_LEN: usize = 1024 * 1024;
    /// Default clock leeway, in seconds.
    pub const DEFAULT_CLOCK_LEEWAY: u64 = 60;
    /// Highest configurable clock leeway, in seconds (10 minutes).
    pub const MAX_CLOCK_LEEWAY: u64 = 600;
    /// Default longest token lifetime, in seconds (1 day).
    pub const DEFAULT_MAX_LIFETIME: u64 = 86_400;
    /// Highest configurable token lifetime, in seconds (30 days).
    pub const MAX_MAX_LIFETIME: u64 = 30 * 86_400;

    /// The default policy: 8 KiB tokens, 60 s leeway, lifetimes up to a day.
    pub const fn new() -> Self {
        Policy {
            max_token_len: Self::DEFAULT_MAX_TOKEN_LEN,
            clock_leeway: Self::DEFAULT_CLOCK_LEEWAY,
            max_lifetime: Self::DEFAULT_MAX_LIFETIME,
        }
    }

    /// Sets the longest token accepted or minted, in characters (64..=1 MiB).
    /// Checked before anything of a token is decoded.
    pub fn with_max_token_len(mut self, chars: usize) -> Result<Self, Error> {
        if !(64..=Self::MAX_MAX_TOKEN_LEN).contains(&chars) {
            return Err(Error::InvalidArgument(
                "max token length must be in 64..=1048576",
            ));
        }
        self.max_token_len = chars;
        Ok(self)
    }

    /// Sets the clock leeway, at most 10 minutes. A token is accepted while
    /// `issued_at <= now + leeway` and `now < expires_at + leeway`.
    pub fn with_clock_leeway(mut self, leeway: Duration) -> Result<Self, Error> {
        let secs = leeway.as_secs();
        if secs > Self::MAX_CLOCK_LEEWAY {
            return Err(Error::InvalidArgument(
                "clock leeway must be at most 600 seconds",
            ));
        }
        self.clock_leeway = secs;
        Ok(self)
    }

    /// Sets the longest lifetime minted or accepted (1 s..=30 days).
    pub fn with_max_lifetime(mut self, lifetime: Duration) -> Result<Self, Error> {
        let secs = lifetime.as_secs();
        if !(1..=Self::MAX_MAX_LIFETIME).contains(&secs) {
            return Err(Error::InvalidArgument(
                "max lifetime must be in 1..=2592000 seconds",
            ));
        }
        self.max_lifetime = secs;
        Ok(self)
    }

    /// The longest token, in characters.
    pub fn max_token_len(&self) -> usize {
        self.max_token_len
    }

    /// The clock leeway, in seconds.
    pub fn clock_leeway(&self) -> u64 {
        self.clock_leeway
    }

    /// The longest lifetime, in seconds.
    pub fn max_lifetime(&self) -> u64 {
        self.max_lifetime
    }
}

impl Default for Policy {
    fn default() -> Self {
        Self::new()
    }
}

/// A freshly minted token and what the caller may want to report about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Minted {
    /// The token: base64url without padding.
    pub token: String,
    /// The key it was minted under (the keyring's primary).
    pub key_id: KeyId,
    /// Issue time, unix seconds.
    pub issued_at: u64,
    /// Expiry, unix seconds.
    pub expires_at: u64,
}

/// The payload of a sealed token that opened, and the key that opened it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unsealed {
    /// The payload given to [`Codec::seal`].
    pub payload: Vec<u8>,
    /// The key that verified it.
    pub key_id: KeyId,
}

/// The contents of a token that passed every check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified<T> {
    /// The step the token was minted for.
    pub step: String,
    /// The state, decoded.
    pub state: T,
    /// The key that verified it.
    pub key_id: KeyId,
    /// Issue time, unix seconds.
    pub issued_at: u64,
    /// Expiry, unix seconds.
    pub expires_at: u64,
}

/// Mints and verifies requestState tokens.
///
/// A codec is cheap to share (`&Codec` across threads) and immutable: to
/// rotate keys, build a new codec around the new keyring and swap it in.
///
/// ```
/// # #[cfg(feature = "std")] {
/// use core::time::Duration;
/// use reqstate::{Algorithm, Codec, Keyring, OsRandom};
///
/// let keyring = Keyring::ephemeral(Algorithm::XChaCha20Poly1305, &OsRandom::new())?;
/// let codec = Codec::new(keyring);
/// let context = reqstate::call_context("user-42", "counter-server", "tools/call", r#"{"current":10}"#)?;
///
/// let token = codec.mint("increase-counter", "amount", &10u32, Duration::from_secs(600), &context)?;
/// let verified = codec.verify::<u32>(&token, "increase-counter", &context)?;
/// assert_eq!((verified.step.as_str(), verified.state), ("amount", 10));
///
/// // Another tool, or other context, fails.
/// assert!(codec.verify::<u32>(&token, "delete-everything", &context).is_err());
/// assert!(codec.verify::<u32>(&token, "increase-counter", b"user-43").is_err());
/// # }
/// # Ok::<(), reqstate::Error>(())
/// ```
#[derive(Clone)]
pub struct Codec {
    keyring: Arc<Keyring>,
    policy: Policy,
    clock: Arc<dyn Clock>,
    random: Arc<dyn SecureRandom>,
}

impl core::fmt::Debug for Codec {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Codec")
            .field("keyring", &self.keyring)
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

fn check_name(
    name: &str,
    max: usize,
    empty: &'static str,
    long: &'static str,
) -> Result<(), Error> {
    if name.is_empty() {
        return Err(Error::InvalidArgument(empty));
    }
    if name.len() > max {
        return Err(Error::InvalidArgument(long));
    }
    Ok(())
}

fn check_tool(tool: &str) -> Result<(), Error> {
    check_name(
        tool,
        MAX_TOOL_LEN,
        "tool name is empty",
        "tool name is longer than 256 bytes",
    )
}

fn check_context(context: &[u8]) -> Result<(), Error> {
    if context.len() > MAX_CONTEXT_LEN {
        return Err(Error::InvalidArgument("context is longer than 65536 bytes"));
    }
    Ok(())
}

impl Codec {
    /// A codec with the default policy, the system clock and OS randomness
    /// (drawn through the per-thread pool of [`crate::BufferedRandom`]; nonces
    /// are hedged, so a cloned pool cannot repeat a nonce for another message).
    #[cfg(feature = "std")]
    #[cfg_attr(docsrs, doc(cfg(feature = "std")))]
    pub fn new(keyring: Keyring) -> Self {
        Self::with_parts(
            keyring,
            Policy::new(),
            crate::clock::SystemClock,
            crate::clock::BufferedRandom,
        )
    }

    /// A codec from its parts: what `no_std` users and tests call.
    pub fn with_parts(
        keyring: Keyring,
        policy: Policy,
        clock: impl Clock + 'static,
        random: impl SecureRandom + 'static,
    ) -> Self {
        Codec {
            keyring: Arc::new(keyring),
            policy,
            clock: Arc::new(clock),
            random: Arc::new(random),
        }
    }

    /// The same codec with another policy.
    pub fn with_policy(mut self, policy: Policy) -> Self {
        self.policy = policy;
        self
    }

    /// The same clock, random source and policy around another keyring: how
    /// a rotation swaps keys.
    pub fn with_keyring(&self, keyring: Keyring) -> Self {
        Codec {
            keyring: Arc::new(keyring),
            ..self.clone()
        }
    }

    /// The keyring.
    pub fn keyring(&self) -> &Keyring {
        &self.keyring
    }

    /// The policy.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The codec's clock reading, in unix seconds.
    pub fn now(&self) -> u64 {
        self.clock.now()
    }

    /// Mints a token for `tool` at `step` carrying `state`, valid for `ttl`
    /// (whole seconds, at least one), bound to `context`.
    ///
    /// The state is stored as CBOR. Under an HMAC key the client can read it;
    /// under an XChaCha20-Poly1305 key it cannot. The tool and context are
    /// authenticated but not stored: verification must supply the same ones.
    pub fn mint<S: Serialize + ?Sized>(
        &self,
        tool: &str,
        step: &str,
        state: &S,
        ttl: Duration,
        context: &[u8],
    ) -> Result<String, Error> {
        self.mint_detailed(tool, step, state, ttl, context)
            .map(|m| m.token)
    }

    /// [`Codec::mint`], also returning the key id and times.
    pub fn mint_detailed<S: Serialize + ?Sized>(
        &self,
        tool: &str,
        step: &str,
        state: &S,
        ttl: Duration,
        context: &[u8],
    ) -> Result<Minted, Error> {
        check_tool(tool)?;
        check_name(
            step,
            MAX_STEP_LEN,
            "step name is empty",
            "step name is longer than 256 bytes",
        )?;
        check_context(context)?;
        let lifetime = ttl.as_secs();
        if lifetime == 0 {
            return Err(Error::InvalidArgument("ttl must be at least one second"));
        }
        if lifetime > self.policy.max_lifetime {
            return Err(Error::LifetimeTooLong {
                lifetime,
                max: self.policy.max_lifetime,
            });
        }
        let issued_at = self.clock.now();
        // Verification calls an expiry past 2^64 - 1 `malformed` (FORMAT.md §8
        // step 10); minting refuses to make such a token.
        let expires_at = issued_at
            .checked_add(lifetime)
            .ok_or(Error::InvalidArgument(
                "the clock reading plus the ttl overflows 64 bits",
            ))?;
        let key = self.keyring.primary();
        let mut out = Vec::with_capacity(96 + step.len());
        let prefix_len = push_prefix(&mut out, TokenKind::State, key);
        crypto::start(key, &mut out);
        token::push_claims_prefix(&mut out, issued_at, lifetime, step);
        let state_at = out.len();
        ciborium::into_writer(state, &mut out).map_err(|e| Error::StateEncoding(e.to_string()))?;
        token::check_state_item(&out[state_at..]).map_err(|e| Error::StateEncoding(e.into()))?;
        let binding = Binding {
            tool: tool.as_bytes(),
            context,
        };
        let token = self.finish(key, out, prefix_len, binding)?;
        Ok(Minted {
            token,
            key_id: key.id(),
            issued_at,
            expires_at,
        })
    }

    /// Verifies a token for `tool` under `context` and decodes its state.
    ///
    /// Checks, in order: length, base64url, version, kind, key id (unknown,
    /// retired), algorithm against the key's, the tag, then (only now
    /// parsing the claims) the envelope, lifetime, issue time and expiry.
    pub fn verify<T: DeserializeOwned>(
        &self,
        token: &str,
        tool: &str,
        context: &[u8],
    ) -> Result<Verified<T>, Error> {
        self.verify_inner(token, tool, None, context)
    }

    /// [`Codec::verify`], also requiring the token to be for `expected_step`
    /// ([`Error::WrongStep`] otherwise).
    pub fn verify_step<T: DeserializeOwned>(
        &self,
        token: &str,
        tool: &str,
        expected_step: &str,
        context: &[u8],
    ) -> Result<Verified<T>, Error> {
        self.verify_inner(token, tool, Some(expected_step), context)
    }

    /// [`Codec::verify`] (with `expected_step`, as [`Codec::verify_step`])
    /// up to and without decoding the state (FORMAT.md §8 steps 0–13): the
    /// state item's bytes exactly as the token carries them, well-formed CBOR
    /// nested at most 16 deep but otherwise as the minter encoded them. For
    /// tools that show or forward the state rather than use it (the
    /// command line's `state_cbor_hex`).
    pub fn verify_raw(
        &self,
        token: &str,
        tool: &str,
        expected_step: Option<&str>,
        context: &[u8],
    ) -> Result<Verified<Vec<u8>>, Error> {
        self.verify_with(token, tool, expected_step, context, |state| {
            Ok(state.to_vec())
        })
    }

    fn verify_inner<T: DeserializeOwned>(
        &self,
        token: &str,
        tool: &str,
        expected_step: Option<&str>,
        context: &[u8],
    ) -> Result<Verified<T>, Error> {
        // ciborium writes the state; cbor4ii reads it, eight times faster on the
        // reference claims (25 ns against 218 ns). cbor4ii cannot read CBOR tags
        // into self-describing types (`ciborium::Value`), so on any failure the
        // state is read again with ciborium, whose verdict stands. The walker in
        // parse_claims has already bounded the state's size and depth.
        self.verify_with(token, tool, expected_step, context, |state| {
            match cbor4ii::serde::from_slice(state) {
                Ok(state) => Ok(state),
                Err(_) => {
                    ciborium::from_reader(state).map_err(|e| Error::StateDecoding(e.to_string()))
                }
            }
        })
    }

    /// FORMAT.md §8 steps 0–13, then `decode` (step 14) on the state's bytes.
    fn verify_with<T>(
        &self,
        token: &str,
        tool: &str,
        expected_step: Option<&str>,
        context: &[u8],
        decode: impl FnOnce(&[u8]) -> Result<T, Error>,
    ) -> Result<Verified<T>, Error> {
        check_tool(tool)?;
        check_context(context)?;
        let binding = Binding {
            tool: tool.as_bytes(),
            context,
        };
        let (mut parsed, key) = self.open_prefix(token, TokenKind::State)?;
        let body = crypto::open(key, &mut parsed.bytes, parsed.prefix_len, binding)?;
        let claims = token::parse_claims(&parsed.bytes[body])?;
        // FORMAT.md §8 step 10: both `malformed` checks before the policy's.
        if claims.lifetime == 0 {
            return Err(Error::Malformed("claims carry a zero lifetime"));
        }
        let expires_at = claims
            .issued_at
            .checked_add(claims.lifetime)
            .ok_or(Error::Malformed("expiry overflows"))?;
        if claims.lifetime > self.policy.max_lifetime {
            return Err(Error::LifetimeTooLong {
                lifetime: claims.lifetime,
                max: self.policy.max_lifetime,
            });
        }
        let now = self.clock.now();
        let leeway = self.policy.clock_leeway;
        if claims.issued_at > now.saturating_add(leeway) {
            return Err(Error::NotYetValid {
                issued_at: claims.issued_at,
                now,
            });
        }
        if now >= expires_at.saturating_add(leeway) {
            return Err(Error::Expired { expires_at, now });
        }
        if let Some(expected) = expected_step
            && claims.step != expected
        {
            return Err(Error::WrongStep {
                expected: expected.into(),
                found: claims.step.into(),
            });
        }
        let state = decode(claims.state)?;
        Ok(Verified {
            step: claims.step.into(),
            state,
            key_id: parsed.key_id,
            issued_at: claims.issued_at,
            expires_at,
        })
    }

    /// Seals an opaque payload under the primary key, bound to `aad`. No
    /// expiry or claims: for SDKs that stamp and check their own (the Python
    /// `mcp` SDK's `RequestStateCodec`). A sealed token never verifies as a
    /// state token, nor the reverse.
    pub fn seal(&self, payload: &[u8], aad: &[u8]) -> Result<String, Error> {
        check_context(aad)?;
        let key = self.keyring.primary();
        let mut out = Vec::with_capacity(64 + payload.len());
        let prefix_len = push_prefix(&mut out, TokenKind::Sealed, key);
        crypto::start(key, &mut out);
        out.extend_from_slice(payload);
        let binding = Binding {
            tool: b"",
            context: aad,
        };
        self.finish(key, out, prefix_len, binding)
    }

    /// Opens a token made by [`Codec::seal`] with the same `aad`.
    pub fn unseal(&self, token: &str, aad: &[u8]) -> Result<Vec<u8>, Error> {
        self.unseal_detailed(token, aad).map(|u| u.payload)
    }

    /// [`Codec::unseal`], also returning the key that opened the token.
    pub fn unseal_detailed(&self, token: &str, aad: &[u8]) -> Result<Unsealed, Error> {
        check_context(aad)?;
        let (mut parsed, key) = self.open_prefix(token, TokenKind::Sealed)?;
        let binding = Binding {
            tool: b"",
            context: aad,
        };
        let body = crypto::open(key, &mut parsed.bytes, parsed.prefix_len, binding)?;
        let mut payload = parsed.bytes;
        payload.truncate(body.end);
        payload.drain(..body.start);
        Ok(Unsealed {
            payload,
            key_id: parsed.key_id,
        })
    }

    /// Decodes the header and finds the key, applying every check that comes
    /// before the tag: kind, unknown key, retired key, algorithm.
    fn open_prefix(&self, token: &str, kind: TokenKind) -> Result<(UntrustedToken, &Key), Error> {
        let parsed = UntrustedToken::parse(token, self.policy.max_token_len)?;
        if parsed.kind != kind {
            return Err(Error::WrongKind {
                expected: kind,
                found: parsed.kind,
            });
        }
        let key = self
            .keyring
            .get(parsed.key_id)
            .ok_or(Error::UnknownKey(parsed.key_id))?;
        if key.status() == KeyStatus::Retired {
            return Err(Error::RetiredKey(parsed.key_id));
        }
        if key.algorithm() != parsed.algorithm {
            return Err(Error::AlgorithmMismatch {
                key_id: parsed.key_id,
                key: key.algorithm(),
                token: parsed.algorithm,
            });
        }
        Ok((parsed, key))
    }

    fn finish(
        &self,
        key: &Key,
        mut out: Vec<u8>,
        prefix_len: usize,
        binding: Binding<'_>,
    ) -> Result<String, Error> {
        crypto::finish(key, &mut out, prefix_len, binding, &*self.random)?;
        let encoded_len = base64::encoded_len(out.len(), false).unwrap_or(usize::MAX);
        if encoded_len > self.policy.max_token_len {
            return Err(Error::TooLarge {
                len: encoded_len,
                max: self.policy.max_token_len,
            });
        }
        Ok(TOKEN_BASE64.encode(&out))
    }
}

fn push_prefix(out: &mut Vec<u8>, kind: TokenKind, key: &Key) -> usize {
    out.push(token::header_byte(kind, key.algorithm()));
    token::push_key_id(out, key.id());
    out.len()
}
