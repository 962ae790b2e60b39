//! tests/vectors/v1.json's `keyrings` as keyring files, through every
//! implementation's command line: a refused keyring is a configuration error
//! (exit 64, a message, no JSON); a loaded one verifies the vector's token
//! from its key, and mints the same claims with that key (byte for byte
//! under an HMAC-SHA256 primary). So each implementation's keyring reader
//! (the TOML, the secret's base64, the defaults, which key mints) is held to
//! the one rule of docs/KEYRING.md, not only the core's.

use std::os::unix::fs::PermissionsExt as _;

use serde_json::Value;

use crate::fixtures::{check_fields, fixtures, now, strings};
use crate::implementations::{implementations, run};
use crate::shapes::{Outcome, outcome};
use crate::sidecar_process::TestResult;

/// A keyring vector as the file it stands for: `version` if given, one
/// `[[key]]` table per entry, strings as TOML basic strings (JSON's
/// escapes are TOML's), `created` unquoted (a TOML date-time).
fn keyring_file(name: &str, vector: &Value) -> TestResult<String> {
    let mut out = String::new();
    if let Some(version) = vector.get("version") {
        out.push_str(&format!("version = {version}\n"));
    }
    for key in vector["keys"].as_array().ok_or("keys")? {
        out.push_str("\n[[key]]\n");
        for (field, value) in key.as_object().ok_or("key")? {
            match (field.as_str(), value) {
                ("created", Value::String(text)) => out.push_str(&format!("created = {text}\n")),
                (_, Value::String(_) | Value::Number(_)) => {
                    out.push_str(&format!("{field} = {value}\n"));
                }
                _ => return Err(format!("keyring vector {name:?}: field {field}").into()),
            }
        }
    }
    Ok(out)
}

#[test]
fn keyring_vectors_through_every_implementation() -> TestResult {
    let fx = fixtures()?;
    let imps = implementations();
    let vectors = fx.vectors["keyrings"].as_array().ok_or("keyrings")?;
    assert!(vectors.len() >= 30, "{} keyring vectors", vectors.len());
    let (mut refused, mut loaded) = (0, 0);
    for (i, vector) in vectors.iter().enumerate() {
        let name = vector["name"].as_str().ok_or("keyring vector name")?;
        check_fields(
            name,
            vector,
            &["name", "version", "keys", "expect_fail", "mint"],
        )?;
        let path = fx.dir.path().join(format!("keyring-vector-{i}.toml"));
        std::fs::write(&path, keyring_file(name, vector)?)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
        let keyring = path.display().to_string();
        match vector.get("expect_fail").and_then(Value::as_str) {
            Some("invalid_keyring") => {
                for imp in &imps {
                    let what = format!("keyring vector {name:?} / {}", imp.name);
                    let args = strings(&[
                        "verify",
                        "--keyring",
                        &keyring,
                        "--tool",
                        "t",
                        "--token",
                        "EQE",
                    ]);
                    let got = outcome(&what, &run(imp, &args, None)?, "verify")?;
                    assert_eq!(
                        got,
                        Outcome::Usage,
                        "{what}: a refused keyring must exit 64"
                    );
                }
                refused += 1;
            }
            Some(other) => return Err(format!("keyring vector {name:?}: {other:?}").into()),
            None => {
                let m = &vector["mint"];
                check_fields(
                    name,
                    m,
                    &[
                        "tool",
                        "context",
                        "step",
                        "state_cbor",
                        "ttl",
                        "now",
                        "key_id",
                        "deterministic",
                        "token",
                    ],
                )?;
                let field = |key: &str| -> TestResult<String> {
                    Ok(match &m[key] {
                        Value::String(s) => s.clone(),
                        Value::Number(n) => n.to_string(),
                        _ => return Err(format!("keyring vector {name:?}: mint.{key}").into()),
                    })
                };
                let common = |command: &str| -> TestResult<Vec<String>> {
                    let mut args = strings(&[command, "--keyring", &keyring]);
                    args.extend(strings(&["--tool", &field("tool")?]));
                    args.extend(strings(&["--context-hex", &field("context")?]));
                    args.extend(now(m["now"].as_u64().ok_or("now")?));
                    Ok(args)
                };
                for imp in &imps {
                    let what = format!("keyring vector {name:?} / {}", imp.name);
                    let mut args = common("verify")?;
                    args.push(format!("--token={}", field("token")?));
                    let Outcome::Ok(got) = outcome(&what, &run(imp, &args, None)?, "verify")?
                    else {
                        return Err(format!("{what}: the vector's token did not verify").into());
                    };
                    assert_eq!(got["key_id"], m["key_id"], "{what}: key id");
                    assert_eq!(got["step"], m["step"], "{what}: step");
                    assert_eq!(got["state_cbor_hex"], m["state_cbor"], "{what}: state");

                    let mut args = common("mint")?;
                    args.extend(strings(&["--step", &field("step")?]));
                    args.extend(strings(&["--state-cbor-hex", &field("state_cbor")?]));
                    args.extend(strings(&["--ttl", &field("ttl")?]));
                    let Outcome::Ok(minted) = outcome(&what, &run(imp, &args, None)?, "mint")?
                    else {
                        return Err(format!("{what}: the keyring did not mint").into());
                    };
                    assert_eq!(minted["key_id"], m["key_id"], "{what}: minted with");
                    if m["deterministic"] == Value::Bool(true) {
                        assert_eq!(minted["token"], m["token"], "{what}: token");
                    }
                }
                loaded += 1;
            }
        }
    }
    assert_eq!(refused + loaded, vectors.len());
    assert!(
        refused >= 15 && loaded >= 8,
        "{refused} refused, {loaded} loaded"
    );
    Ok(())
}
