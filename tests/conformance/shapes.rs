//! The output shapes of docs/CLI.md, checked on every run: one JSON line on
//! stdout with exactly the documented fields and types for exit 0 (mint,
//! verify) and exit 1 (a refusal with one of the core's reasons), nothing on
//! stdout and a message on stderr for exit 64, no other exit code.
//!
//! `REASONS` is read by crates/reqstate-python/tests/test_api.py, which
//! checks that the Python package lists the same reasons.

use std::process::Output;

use serde_json::{Value, json};

use crate::sidecar_process::TestResult;

/// The reason names of docs/CLI.md: exactly `reqstate::Error::reason()`.
const REASONS: &[&str] = &[
    "too_large",
    "malformed",
    "unsupported_version",
    "unsupported_algorithm",
    "wrong_kind",
    "unknown_key",
    "retired_key",
    "algorithm_mismatch",
    "authentication_failed",
    "expired",
    "not_yet_valid",
    "wrong_step",
    "lifetime_too_long",
    "state_encoding",
    "state_decoding",
    "invalid_argument",
    "randomness_unavailable",
    "invalid_keyring",
    "single_use",
    "replayed",
    "replay_store_full",
    "replay_store_unavailable",
];

/// What one run printed, its shape already checked against docs/CLI.md.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Outcome {
    /// Exit 0 and the success object.
    Ok(Value),
    /// Exit 1 and the refusal object (its `message` checked and removed).
    Refused(Value),
    /// Exit 64, nothing on stdout, a message on stderr.
    Usage,
}

fn is_lower_hex(s: &str) -> bool {
    s.len().is_multiple_of(2) && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn is_token_text(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// A check of one field's value.
type FieldCheck = fn(&Value) -> bool;

/// Checks that `object` has exactly the `required` keys plus any of
/// `optional`, each passing its check.
fn check_shape(
    what: &str,
    object: &Value,
    required: &[(&str, FieldCheck)],
    optional: &[&str],
) -> TestResult {
    let map = object
        .as_object()
        .ok_or_else(|| format!("{what}: not a JSON object: {object}"))?;
    for (key, check) in required {
        let value = map
            .get(*key)
            .ok_or_else(|| format!("{what}: field {key:?} missing in {object}"))?;
        if !check(value) {
            return Err(
                format!("{what}: field {key:?} has the wrong type or form in {object}").into(),
            );
        }
    }
    for key in map.keys() {
        if !required.iter().any(|(k, _)| k == key) && !optional.contains(&key.as_str()) {
            return Err(format!("{what}: undocumented field {key:?} in {object}").into());
        }
    }
    Ok(())
}

fn is_u64(v: &Value) -> bool {
    v.is_u64()
}
fn is_string(v: &Value) -> bool {
    v.is_string()
}
fn is_reason(v: &Value) -> bool {
    v.as_str().is_some_and(|r| REASONS.contains(&r))
}
fn is_message(v: &Value) -> bool {
    v.as_str().is_some_and(|m| !m.trim().is_empty())
}
fn is_token(v: &Value) -> bool {
    v.as_str().is_some_and(is_token_text)
}
fn is_hex(v: &Value) -> bool {
    v.as_str().is_some_and(|h| !h.is_empty() && is_lower_hex(h))
}
fn is_true(v: &Value) -> bool {
    v == &Value::Bool(true)
}
fn is_false(v: &Value) -> bool {
    v == &Value::Bool(false)
}

/// The one JSON line on stdout.
pub(crate) fn stdout_object(what: &str, out: &Output) -> TestResult<Value> {
    let text =
        std::str::from_utf8(&out.stdout).map_err(|_| format!("{what}: stdout is not UTF-8"))?;
    let line = text
        .strip_suffix('\n')
        .filter(|line| !line.contains('\n'))
        .ok_or_else(|| {
            format!(
                "{what}: stdout is not exactly one line: {text:?}\nstderr: {}",
                String::from_utf8_lossy(&out.stderr)
            )
        })?;
    Ok(serde_json::from_str(line).map_err(|e| format!("{what}: not JSON ({e}): {line}"))?)
}

/// The outcome of one run of `command` (`mint` or `verify`): its exit code
/// and output checked against the shapes of docs/CLI.md, anything else an
/// error naming `what`.
pub(crate) fn outcome(what: &str, out: &Output, command: &str) -> TestResult<Outcome> {
    let stderr = String::from_utf8_lossy(&out.stderr);
    match out.status.code() {
        Some(0) => {
            let object = stdout_object(what, out)?;
            if command == "mint" {
                check_shape(
                    what,
                    &object,
                    &[
                        ("token", is_token),
                        ("key_id", is_u64),
                        ("issued_at", is_u64),
                        ("expires_at", is_u64),
                    ],
                    &[],
                )?;
            } else {
                check_shape(
                    what,
                    &object,
                    &[
                        ("valid", is_true),
                        ("step", is_string),
                        ("state_cbor_hex", is_hex),
                        ("key_id", is_u64),
                        ("issued_at", is_u64),
                        ("expires_at", is_u64),
                    ],
                    &["state"],
                )?;
            }
            Ok(Outcome::Ok(object))
        }
        Some(1) => {
            let mut object = stdout_object(what, out)?;
            if command == "mint" {
                check_shape(
                    what,
                    &object,
                    &[("reason", is_reason), ("message", is_message)],
                    &[],
                )?;
            } else {
                check_shape(
                    what,
                    &object,
                    &[
                        ("valid", is_false),
                        ("reason", is_reason),
                        ("message", is_message),
                    ],
                    &[],
                )?;
            }
            // The message is for people; it is not part of the contract.
            object
                .as_object_mut()
                .ok_or("not an object")?
                .remove("message");
            Ok(Outcome::Refused(object))
        }
        Some(64) => {
            if !out.stdout.is_empty() {
                return Err(format!(
                    "{what}: exit 64 with output on stdout: {}",
                    String::from_utf8_lossy(&out.stdout)
                )
                .into());
            }
            if stderr.trim().is_empty() {
                return Err(format!("{what}: exit 64 without a message on stderr").into());
            }
            Ok(Outcome::Usage)
        }
        other => Err(format!("{what}: unexpected exit {other:?}; stderr: {stderr}").into()),
    }
}

/// The `verify` refusal with `reason` (its `message` left out).
pub(crate) fn refused(reason: &str) -> Outcome {
    Outcome::Refused(json!({ "valid": false, "reason": reason }))
}
