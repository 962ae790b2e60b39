//! Cross-implementation conformance (package `reqstate-conformance`): every
//! implementation of the `mint` / `verify` command line of docs/CLI.md (the
//! Rust binary, the TypeScript package's `reqstate-ts`, the Python package's
//! `python -m reqstate`) on one table and the shared vectors, every ordered
//! (minter, verifier) pair checked field by field, HMAC mints byte-identical,
//! every output exactly the documented shape; single use on one real Redis
//! shared with the sidecar; and stock gRPC clients against the real sidecar.
//!
//! Nothing is skipped: an implementation that is listed but cannot be run
//! fails the test, and every vector of `tests/vectors/v1.json` is either run
//! or excluded by name of its operation with the reason.
//!
//! # Running
//!
//! ```text
//! bash clients/typescript/build.sh                          # clients/typescript/dist (reqstate-ts)
//! bash crates/reqstate-python/run-tests.sh --install-only   # crates/reqstate-python/.venv
//! cargo build -p reqstate-sidecar --bin reqstate            # the Rust binary, next to this test
//! cargo test -p reqstate-conformance
//! ```
//!
//! The Rust binary is `target/<profile>/reqstate` in this test's own target
//! directory, or `$REQSTATE_BIN`; the Python interpreter is
//! `$REQSTATE_PYTHON`, else crates/reqstate-python/.venv/bin/python; a Redis
//! server (`redis-server`) must be on the PATH. scripts/test.sh does all of
//! this, and runs the grpcio and @grpc/grpc-js clients (tests/stock_clients/).
//!
//! # Modules, by what they check
//!
//! - [`implementations`]: the list of implementations, how each is run, and
//!   that each starts and documents the flags;
//! - [`shapes`]: the documented output shapes, checked on every run;
//! - [`fixtures`]: the keyrings and vectors every test reads;
//! - [`table`] and [`pairs`]: the mint → verify table through every ordered
//!   (minter, verifier) pair;
//! - [`vectors`]: tests/vectors/v1.json through every implementation;
//! - [`state_json`]: tests/vectors/state_json.json through the sidecar over
//!   gRPC and every command line;
//! - [`keyrings`]: v1.json's `keyrings` as keyring files through every
//!   implementation (refused: exit 64; loaded: which key verifies and mints);
//! - [`refusals`]: mint refusals in the core's order, and usage errors;
//! - [`policies`]: the verify policy's flags and v1.json's `policies`;
//! - [`single_use`]: one Redis, one spent-token record for the sidecar and
//!   every command line;
//! - [`stock_clients`]: tonic as a user takes it against the real sidecar,
//!   and the check that the vendored h2 patch is still needed.

#[path = "../support/redis_server.rs"]
mod redis_server;
#[path = "../support/sidecar_process.rs"]
mod sidecar_process;

mod fixtures;
mod implementations;
mod keyrings;
mod pairs;
mod policies;
mod refusals;
mod shapes;
mod single_use;
mod state_json;
mod stock_clients;
mod table;
mod vectors;
