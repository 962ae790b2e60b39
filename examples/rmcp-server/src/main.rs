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

use reqstate::{Algorithm, Codec, Keyring, OsRandom};
use reqstate_example_rmcp::CounterServer;
use rmcp::ServiceExt;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let keyring = match std::env::var_os("REQSTATE_KEYRING") {
        Some(path) => Keyring::from_toml(&std::fs::read_to_string(path)?)?,
        None => Keyring::ephemeral(Algorithm::XChaCha20Poly1305, &OsRandom::new())?,
    };
    let running = CounterServer::new(Codec::new(keyring))
        .serve(rmcp::transport::stdio())
        .await?;
    running.waiting().await?;
    Ok(())
}
