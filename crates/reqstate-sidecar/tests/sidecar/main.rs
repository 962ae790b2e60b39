//! The sidecar's integration tests, one test binary: every module starts the
//! real `reqstate` binary (Cargo's `CARGO_BIN_EXE_reqstate`) and talks to it
//! as its users do, with real tonic clients, files, signals and a real
//! `redis-server`. Each module is one concern.
//!
//! The helpers that start a sidecar or a Redis server are shared with the
//! cross-implementation conformance package and the benchmarks, in
//! `tests/support/` at the repository root.

#[path = "../../../../tests/support/misplaced_secrets.rs"]
mod misplaced_secrets;
#[path = "../../../../tests/support/redis_server.rs"]
mod redis_server;
#[path = "../../../../tests/support/sidecar_process.rs"]
mod sidecar_process;

mod cli;
mod evidence;
mod faults;
mod fleet;
mod hardening;
mod keyring_files;
mod probes;
mod quiet_reloads;
mod reload;
mod remote;
mod rotation;
mod rpc;
mod secret_refs;
mod secrets;
mod single_use;
mod soak;
mod tls;
