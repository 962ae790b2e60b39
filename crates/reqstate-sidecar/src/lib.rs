//! The reqstate sidecar and CLI: a gRPC service that mints and verifies MCP
//! `requestState` tokens for servers in any language, with keyring hot
//! reload, caller authentication, metrics and graceful shutdown.
//!
//! The `reqstate` binary is a thin `main` over this crate:
//! [`Cli::parse_args`] → [`init_tracing`] → [`run`]. Everything is
//! parsed by [`cli`] (flags and `REQSTATE_*` variables) and checked by
//! [`config`]; a bad configuration exits with [`EXIT_BAD_CONFIG`] before any
//! port is bound.
//!
//! - [`service`]: the `reqstate.v1.RequestState` implementation, over
//!   [`wire`] (proto messages to core calls and back) and [`live_keyring`]
//!   (the keyring in service, swapped whole on reload).
//! - [`call_gate`]: the tower layers between a listener and the routes,
//!   one per concern and assembled in one place (error mapping, the
//!   `:authority` check, bearer token, peer-uid allow-list, concurrency
//!   limits with load shedding, the call deadline, call metrics);
//!   [`bearer`]: the bearer tokens, reloaded with the keyring.
//! - [`call_metrics`]: call counts and latency by rpc and result.
//! - [`listeners`]: Unix (mode 0600) and TCP listeners.
//! - [`reload`]: SIGHUP and directory-watch keyring reload.
//! - [`metrics`]: Prometheus metrics and readiness on an admin listener.
//! - [`serve`]: assembly, signals and draining; [`service_manager`]:
//!   systemd's readiness notifications (`Type=notify`).
//! - [`keys`], [`local`]: the key tooling and mint/verify/consume/seal/
//!   unseal/inspect on a keyring file; [`remote`]: the same commands asked
//!   of a running sidecar (`--connect`, over [`connect`]); [`output`]:
//!   standard output and a closed pipe.
//! - [`health`]: `reqstate health`, the exec probe.

// The other lints are declared once, in the workspace's `[workspace.lints]`.
#![forbid(unsafe_code)]

pub mod bearer;
pub mod call_gate;
pub mod call_metrics;
pub mod cli;
pub mod config;
pub mod connect;
pub mod health;
/// Keyring files on disk and their checks: the `reqstate-keyring-file`
/// crate, under the name the sidecar's modules use.
pub use reqstate_keyring_file as keyring_source;
pub mod key_evidence;
pub mod keys;
pub mod listeners;
pub mod live_keyring;
pub mod local;
pub mod metrics;
pub mod output;
pub mod reload;
pub mod remote;
pub mod serve;
pub mod service;
pub mod service_manager;
pub mod wire;

use std::process::ExitCode;

pub use cli::{Cli, Command, EXIT_BAD_CONFIG};
pub use config::{ConfigError, ServeConfig};

/// Sends `tracing` logs to standard error, filtered by `filter`
/// (`--log` / `REQSTATE_LOG`). Logs carry rpc names, results, key ids and
/// generations; never key material or token contents.
pub fn init_tracing(filter: &str) -> Result<(), ConfigError> {
    let targets: tracing_subscriber::filter::Targets = filter
        .parse()
        .map_err(|e| ConfigError::new(format!("--log {filter}: {e}")))?;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_ansi(false)
                .with_target(false),
        )
        .with(targets)
        .try_init()
        .map_err(|e| ConfigError::new(format!("cannot set up logging: {e}")))
}

/// Runs a parsed command to completion and returns the process exit code.
pub fn run(command: Command) -> ExitCode {
    let code = match command {
        Command::Serve(args) => match ServeConfig::from_args(args) {
            Ok(config) => return serve::run(config),
            Err(e) => {
                tracing::error!(error = %e, "bad configuration");
                EXIT_BAD_CONFIG
            }
        },
        Command::Keys { command } => keys::run(command),
        Command::Mint(args) => local::mint(args),
        Command::Verify(args) => local::verify(args),
        Command::Consume(args) => local::consume(args),
        Command::Seal(args) => local::seal(args),
        Command::Unseal(args) => local::unseal(args),
        Command::Inspect(args) => local::inspect(args),
        Command::Health(args) => health::run(&args),
    };
    ExitCode::from(code)
}
