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
//!   still verify, retired keys whose tokens are refused. Loaded from TOML.
//! - [`Codec`]: [`Codec::mint`] / [`Codec::verify`] for state tokens,
//!   [`Codec::seal`] / [`Codec::unseal`] for SDKs that stamp their own claims.
//! - [`call_context`]: the canonical context of one call.
//! - [`UntrustedToken`]: what can be read of a token before it is verified.
//!
//! The byte format is specified in `docs/FORMAT.md`; the design reasons are in
//! [`design`].
//!
//! ```
//! # #[cfg(feature = "std")] {
//! use core::time::Duration;
//! use reqstate::{Codec, Keyring};
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Serialize, Deserialize, Debug, PartialEq)]
//! struct Counter { current: u64, amount: u64 }
//!
//! let keyring = Keyring::from_toml(r#"
//!     [[key]]
//!     id = 1
//!     algorithm = "xchacha20-poly1305"
//!     status = "primary"
//!     secret = "x3l2h7UqKk0Jq8f1c2V9m4Z6p0R5s8T1u4W7y0B3d6E="
//! "#)?;
//! let codec = Codec::new(keyring);
//! let context = reqstate::call_context("user-42", "counter-server", "tools/call", r#"{"current":10}"#)?;
//!
//! let state = Counter { current: 10, amount: 5 };
//! let token = codec.mint("increase-counter", "confirm", &state, Duration::from_secs(600), &context)?;
//!
//! let verified = codec.verify_step::<Counter>(&token, "increase-counter", "confirm", &context)?;
//! assert_eq!(verified.state, state);
//! # }
//! # Ok::<(), reqstate::Error>(())
//! ```
//!
//! # Features
//! - `std` (default): [`SystemClock`], [`OsRandom`], [`BufferedRandom`] (the
//!   per-thread pool [`Codec::new`] draws nonce randomness from), [`Codec::new`], and
//!   keyring secrets from files and environment variables. Without it the
//!   crate is `no_std + alloc`; supply a [`Clock`] and a [`SecureRandom`].
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

mod clock;
mod codec;
mod context;
mod crypto;
pub mod design;
mod error;
mod keyring;
mod keyring_file;
mod token;

#[cfg(feature = "std")]
pub use clock::{BufferedRandom, OsRandom, SystemClock};
pub use clock::{Clock, FixedClock, SecureRandom};
pub use codec::{
    Codec, MAX_CONTEXT_LEN, MAX_STEP_LEN, MAX_TOOL_LEN, Minted, Policy, Unsealed, Verified,
};
pub use context::{
    CALL_CONTEXT_LEN, MAX_ARGUMENTS_DEPTH, call_context, call_context_from_value, canonical_json,
};
pub use error::{Error, KeyringError};
pub use keyring::{
    Algorithm, Key, KeyId, KeySpec, KeyStatus, Keyring, MAX_SECRET_LEN, MIN_SECRET_LEN, Secret,
};
/// The README's Rust snippets, compiled as doctests so they cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;

pub use token::{MAX_STATE_DEPTH, TAG_LEN, TokenKind, UntrustedToken, VERSION, XNONCE_LEN};
