//! Mint and verify the `requestState` tokens of MCP multi-round-trip requests.
//!
//! An MCP server that needs more input mid-call returns
//! `resultType: "input_required"` with an opaque `requestState`; the client
//! echoes it back on the retry. The server keeps no session, so everything it
//! needs between rounds travels in that string, and the client can change it.
//! This crate makes that safe: each token is a compact CBOR envelope
//! (issue time, lifetime, step, state) under HMAC-SHA256 or
//! XChaCha20-Poly1305, bound to the tool name and to caller context (principal,
//! audience, a digest of the arguments) that is authenticated but never stored.
//!
//! - [`Keyring`]: keys by compact id, one primary that mints, active keys that
//!   still verify, retired keys whose tokens are refused. Parsed from TOML
//!   text ([`Keyring::from_toml`]); secrets kept in files or the environment
//!   are read by the caller's [`SecretSource`] (this crate does no I/O). To
//!   serve a keyring file, use the companion crate
//!   [`reqstate-keyring-file`](https://docs.rs/reqstate-keyring-file): its
//!   `KeyringFile` checks the file's owner, mode and directories, hands out
//!   the [`Codec`] in service and reloads it when the file changes, keeping
//!   the last good keyring on a bad file; its `create_new` writes a new
//!   keyring file with a fresh random key.
//! - [`Codec`]: [`Codec::mint`] / [`Codec::verify`] for state tokens,
//!   [`Codec::seal`] / [`Codec::unseal`] for SDKs that stamp their own claims.
//! - [`Binding`] (tool and [`CallContext`]) and [`Expected`] (a binding and a
//!   step): what a token is bound to and what a verifier requires, built and
//!   checked once.
//! - [`call_context`]: the canonical context of one call.
//! - [`json`]: the strict JSON reader (RFC 8259) behind the call context,
//!   shared with the command lines and the sidecar.
//! - Errors by kind: [`Refusal`] (the token is refused), [`StoreError`] (a
//!   single-use token could not be recorded: the server's failure, not the
//!   token's; [`ConsumeError`] is either), [`InvalidArgument`] (the caller's
//!   mistake), [`MintError`], [`KeyringError`]; [`Error`] holds any.
//! - [`UntrustedToken`]: what can be read of a token before it is verified.
//!
//! The byte format is specified in `docs/FORMAT.md`; the design reasons are in
//! [`design`].
//!
//! ```
//! # #[cfg(feature = "std")] {
//! use core::time::Duration;
//! use reqstate::{Algorithm, Binding, Codec, Keyring, OsRandom};
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Serialize, Deserialize, Debug, PartialEq)]
//! struct Counter { current: u64, amount: u64 }
//!
//! // One fresh random key, for this example; a server serves a keyring file
//! // (`reqstate_keyring_file::KeyringFile::open("keyring.toml")?.current()`).
//! let keyring = Keyring::ephemeral(Algorithm::XChaCha20Poly1305, &OsRandom::new())?;
//! let codec = Codec::new(keyring);
//! let context = reqstate::call_context(&reqstate::Call {
//!     principal: "user-42",
//!     audience: "counter-server",
//!     method: "tools/call",
//!     arguments: reqstate::Arguments::Json(r#"{"current":10}"#),
//! })?;
//! let binding = Binding::new("increase-counter", &context)?;
//!
//! let state = Counter { current: 10, amount: 5 };
//! let minted = codec.mint(binding, "confirm", &state, Duration::from_secs(600))?;
//!
//! let verified = codec.verify::<Counter>(&minted.token, binding.step("confirm"))?;
//! assert_eq!(verified.state, state);
//! # }
//! # Ok::<(), reqstate::Error>(())
//! ```
//!
//! # Features
//! - `std` (default): [`SystemClock`], [`OsRandom`], [`BufferedRandom`] (the
//!   per-thread pool [`Codec::new`] draws nonce randomness from) and
//!   [`Codec::new`]. Without it the crate is `no_std + alloc`; supply a
//!   [`Clock`] and a [`SecureRandom`]. No feature reads files or the
//!   environment.
//! - `test-util`: `FixedClock`, a clock stuck at one second, for tests; and
//!   `test_crypto`, the crypto layer's primitives on raw keys for known-answer
//!   tests (test-only, not a stable API).
//!   On the soft-float `x86_64-unknown-none` target, build with
//!   `RUSTFLAGS='-C target-feature=+sse,+sse2 --cfg sha2_backend="soft"'`
//!   (`ring` needs SSE2; `sha2`'s SHA-NI backend does not build there).

#![cfg_attr(not(feature = "std"), no_std)]
// A project rule, stronger than the workspace's `unsafe_code = "deny"`: no
// `#[allow]` can bring unsafe code into the core. The other lints are declared
// once, in the workspace's `[workspace.lints]`.
#![forbid(unsafe_code)]
// docs.rs builds with `--cfg docsrs`: std-only items are labelled "std".
#![cfg_attr(docsrs, feature(doc_cfg))]

extern crate alloc;

// The modules, ground floor first; each imports only from those listed
// before it, so the graph has no cycle:
//
//   types      ids, algorithm, status, token kind, sizes and limits
//   error      one error type per kind of failure
//   cbor       the CBOR walker (bounded, allocation-free)
//   policy     the codec's limits
//   token      base64url, header byte, key id: the untrusted view
//   claims     the claims envelope
//   outcome    what each operation gives back
//   single_use the spent-token record, its store, redemptions
//   clock      injectable time
//   random     injectable randomness
//   crypto     key derivation, HMAC-SHA256, XChaCha20-Poly1305
//   datetime   calendar arithmetic for the keyring's instants
//   keyring    keys, the keyring and its schedule
//   keyring_toml  the TOML keyring file and secret references
//   json       the strict JSON reader (RFC 8259): imports nothing
//   context    the call context (RFC 8785)
//   binding    what a token is bound to, what a verifier expects
//   codec      mint, verify, seal, unseal: parse → key → tag → claims → bindings
mod binding;
mod cbor;
mod claims;
mod clock;
mod codec;
mod context;
mod crypto;
mod datetime;
pub mod design;
mod error;
pub mod json;
mod keyring;
mod keyring_toml;
mod outcome;
mod policy;
mod random;
mod single_use;
mod token;
mod types;

pub use binding::{Aad, Binding, Expected};
pub use clock::Clock;
#[cfg(any(test, feature = "test-util"))]
pub use clock::FixedClock;
#[cfg(feature = "std")]
pub use clock::SystemClock;
pub use codec::Codec;
pub use context::{
    Arguments, CALL_CONTEXT_LEN, Call, CallContext, MAX_ARGUMENTS_DEPTH, call_context,
    canonical_json,
};
/// **Test-only, not a stable API** (feature `test-util`): the crypto layer's
/// primitives on raw keys, for known-answer tests (Project Wycheproof).
#[cfg(feature = "test-util")]
pub use crypto::primitives as test_crypto;
pub use datetime::{days_from_civil, rfc3339_utc};
pub use error::{
    ConsumeError, Error, InvalidArgument, KeyringError, MintError, RandomnessUnavailable, Refusal,
    StoreError,
};
pub use keyring::{Key, KeySpec, Keyring, Secret, Transition, TransitionKind};
pub use keyring_toml::{SecretRef, SecretSource};
pub use outcome::{Minted, Sealed, Unsealed, Verified};
pub use policy::Policy;
pub use random::SecureRandom;
#[cfg(feature = "std")]
pub use random::{BufferedRandom, OsRandom};
#[cfg(feature = "std")]
pub use single_use::MemoryReplayStore;
pub use single_use::{
    MAX_SHARED_RECORD_LIFETIME, RECORD_NAME_MAX_LEN, Redemption, ReplayStore, SpentId,
    shared_record_lifetime,
};
pub use token::UntrustedToken;
pub use types::{
    Algorithm, KeyId, KeyStatus, MAX_CONTEXT_LEN, MAX_SECRET_LEN, MAX_STATE_DEPTH, MAX_STEP_LEN,
    MAX_TOOL_LEN, MIN_SECRET_LEN, TAG_LEN, TOKEN_ID_LEN, TokenKind, VERSION, XNONCE_LEN,
};
/// The wiper of [`SecretSource::resolve`]'s result, re-exported so that a
/// source needs no `zeroize` dependency of its own.
pub use zeroize::Zeroizing;
