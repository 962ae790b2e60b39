//! Serves the `increase-counter` MCP server over stdio.
//!
//! ```text
//! cargo run -p reqstate-example-rmcp                                  # ephemeral key
//! REQSTATE_KEYRING=keyring.toml cargo run -p reqstate-example-rmcp   # keys from a keyring file
//! ```
//!
//! With no keyring the server mints under a key that lives as long as the
//! process: flows in progress end with it, which suits a stdio server that
//! serves one client for its whole life.

use std::path::Path;

use reqstate::{Algorithm, Codec, Keyring, OsRandom};
use reqstate_example_rmcp::CounterServer;
use reqstate_keyring_file::{KeyringPermissions, KeyringSecrets, watched_directory};
use rmcp::ServiceExt;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let keyring = match std::env::var_os("REQSTATE_KEYRING") {
        Some(path) => load_keyring(Path::new(&path))?,
        None => Keyring::ephemeral(Algorithm::XChaCha20Poly1305, &OsRandom::new())?,
    };
    let running = CounterServer::new(Codec::new(keyring))
        .serve(rmcp::transport::stdio())
        .await?;
    running.waiting().await?;
    Ok(())
}

/// Reads a keyring file (docs/KEYRING.md). The core does no I/O: its
/// `secret_file` and `secret_env` references are resolved by the sidecar's
/// source, a relative `secret_file` against the keyring file's directory,
/// each secret file with the sidecar's checks (a small regular file, only
/// its owner may read it).
fn load_keyring(path: &Path) -> Result<Keyring, Box<dyn std::error::Error>> {
    let text = std::fs::read_to_string(path)?;
    let secrets = KeyringSecrets::new(&watched_directory(path), KeyringPermissions::OwnerOnly);
    // Through `reqstate::Error`, whose message says "invalid keyring: ...".
    Ok(Keyring::from_toml_with(&text, &secrets).map_err(reqstate::Error::from)?)
}
