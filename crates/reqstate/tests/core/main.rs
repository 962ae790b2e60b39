//! The core crate's integration tests, one test binary (as rustls keeps
//! them): each module is one concern, run against the public API only.
//!
//! `cargo test -p reqstate` runs them with the crate's unit tests. The
//! shared vectors they check (`tests/vectors/*.json` at the repository root)
//! belong to every implementation; the cross-implementation conformance
//! package (`tests/`) runs the other implementations on them.

mod api;
mod architecture;
mod attacks;
mod call_context;
mod keyring;
#[path = "../../../../tests/support/misplaced_secrets.rs"]
mod misplaced_secrets;
mod properties;
mod random;
// The vector files' serde types, shared with their generator (the
// `reqstate-vectors` program, tests/vectors/generate).
#[path = "../../../../tests/vectors/generate/src/schema.rs"]
mod schema;
mod single_use;
mod tamper;
mod vectors;
mod wycheproof;
