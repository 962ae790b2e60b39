//! `reqstate mint`, `verify` and `inspect`: the codec run locally on a keyring file, with JSON output for scripts.

use std::time::Duration;

use base64::Engine as _;
use reqstate::{Codec, Policy, UntrustedToken};
use serde_json::json;

use crate::config::{EXIT_BAD_CONFIG, InspectArgs, LocalKeyringArgs, MintArgs, VerifyArgs};
use crate::keyring_source::{KeyringPermissions, load_keyring_file};

fn load_codec(args: &LocalKeyringArgs) -> Result<Codec, u8> {
    let permissions = if args.allow_insecure_keyring_permissions {
        KeyringPermissions::AllowGroupOrOtherReadable
    } else {
        KeyringPermissions::OwnerOnly
    };
    load_keyring_file(&args.keyring, permissions)
        .map(|loaded| Codec::new(loaded.keyring))
        .map_err(|e| {
            eprintln!("reqstate: {e}");
            EXIT_BAD_CONFIG
        })
}

/// `reqstate mint`: prints `{"token", "key_id", "issued_at", "expires_at"}`.
pub fn mint(args: MintArgs) -> u8 {
    let codec = match load_codec(&args.keys) {
        Ok(codec) => codec,
        Err(code) => return code,
    };
    let state: ciborium::Value = match serde_json::from_str(&args.state_json) {
        Ok(state) => state,
        Err(e) => {
            eprintln!("reqstate mint: --state-json is not valid JSON: {e}");
            return EXIT_BAD_CONFIG;
        }
    };
    match codec.mint_detailed(
        &args.tool,
        &args.step,
        &state,
        Duration::from_secs(args.ttl),
        args.context.as_bytes(),
    ) {
        Ok(minted) => {
            println!(
                "{}",
                json!({
                    "token": minted.token,
                    "key_id": minted.key_id.get(),
                    "issued_at": minted.issued_at,
                    "expires_at": minted.expires_at,
                })
            );
            0
        }
        Err(e) => {
            eprintln!("reqstate mint: {e}");
            EXIT_BAD_CONFIG
        }
    }
}

/// `reqstate verify`: prints the verified contents, or `{"valid": false,
/// "reason", "detail"}` and exits 1.
pub fn verify(args: VerifyArgs) -> u8 {
    let codec = match load_codec(&args.keys) {
        Ok(codec) => codec,
        Err(code) => return code,
    };
    let context = args.context.as_bytes();
    let result = match &args.step {
        Some(step) => codec.verify_step::<ciborium::Value>(&args.token, &args.tool, step, context),
        None => codec.verify::<ciborium::Value>(&args.token, &args.tool, context),
    };
    match result {
        Ok(verified) => {
            let mut out = json!({
                "valid": true,
                "step": verified.step,
                "key_id": verified.key_id.get(),
                "issued_at": verified.issued_at,
                "expires_at": verified.expires_at,
            });
            match verified.state {
                ciborium::Value::Bytes(bytes) => {
                    out["state_base64"] =
                        json!(base64::engine::general_purpose::STANDARD.encode(bytes));
                }
                other => match serde_json::to_value(&other) {
                    Ok(value) => out["state_json"] = value,
                    Err(_) => out["state_json"] = serde_json::Value::Null,
                },
            }
            println!("{out}");
            0
        }
        Err(e) => {
            println!(
                "{}",
                json!({ "valid": false, "reason": e.reason(), "detail": e.to_string() })
            );
            1
        }
    }
}

/// `reqstate inspect`: the header fields only. No key is loaded, nothing is
/// decrypted, and nothing printed is authenticated.
pub fn inspect(args: InspectArgs) -> u8 {
    match UntrustedToken::parse(args.token.trim(), Policy::MAX_MAX_TOKEN_LEN) {
        Ok(token) => {
            println!(
                "{}",
                json!({
                    "version": token.version(),
                    "kind": token.kind().name(),
                    "key_id": token.key_id().get(),
                    "algorithm": token.algorithm().name(),
                    "length": token.encoded_len(),
                    "decoded_bytes": token.decoded_len(),
                    "verified": false,
                })
            );
            0
        }
        Err(e) => {
            println!(
                "{}",
                json!({ "error": e.reason(), "detail": e.to_string() })
            );
            1
        }
    }
}
