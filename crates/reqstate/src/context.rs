//! Canonical caller context: who called, for which server, which method, with
//! which arguments, reduced to 32 bytes to bind into a token.

use alloc::string::String;
use alloc::vec::Vec;

use ring::digest;
use serde_json::Value;

use crate::error::Error;

/// Length of a call context digest, in bytes.
pub const CALL_CONTEXT_LEN: usize = 32;

const LABEL: &[u8] = b"reqstate/v1 call-context";

/// Builds the context to bind a token to one caller and one original request.
///
/// ```text
/// args    = SHA-256(canonical_json(arguments))
/// context = SHA-256("reqstate/v1 call-context" ‖ lp(principal) ‖ lp(audience) ‖ lp(method) ‖ args)
/// lp(x)   = u32 big-endian byte length of x ‖ x
/// ```
///
/// `canonical_json` is the compact JSON text with object keys sorted by their
/// UTF-8 bytes (see [`canonical_json`]). Binding this digest means a client that
/// changes the arguments on the retry, replays the token as another principal,
/// or sends it to another server gets [`Error::AuthenticationFailed`].
///
/// `arguments_json` must be one JSON value (an object for `tools/call`).
pub fn call_context(
    principal: &str,
    audience: &str,
    method: &str,
    arguments_json: &str,
) -> Result<[u8; CALL_CONTEXT_LEN], Error> {
    let arguments: Value = serde_json::from_str(arguments_json)
        .map_err(|_| Error::InvalidArgument("arguments are not valid JSON"))?;
    Ok(call_context_from_value(
        principal, audience, method, &arguments,
    ))
}

/// [`call_context`] for arguments already parsed.
pub fn call_context_from_value(
    principal: &str,
    audience: &str,
    method: &str,
    arguments: &Value,
) -> [u8; CALL_CONTEXT_LEN] {
    let args = digest::digest(&digest::SHA256, canonical_json(arguments).as_bytes());
    let mut ctx = digest::Context::new(&digest::SHA256);
    ctx.update(LABEL);
    for part in [principal, audience, method] {
        ctx.update(&(part.len() as u32).to_be_bytes());
        ctx.update(part.as_bytes());
    }
    ctx.update(args.as_ref());
    let mut out = [0u8; CALL_CONTEXT_LEN];
    out.copy_from_slice(ctx.finish().as_ref());
    out
}

/// Compact JSON with object keys sorted by their UTF-8 bytes, whatever order
/// the value's map keeps (so enabling serde_json's `preserve_order` elsewhere
/// cannot change the digest). Strings are escaped as serde_json escapes them,
/// numbers printed as serde_json prints them (integers in decimal, floats in
/// the shortest form that round-trips).
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out.push('{');
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(k, out);
                out.push(':');
                write_canonical(v, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(v, out);
            }
            out.push(']');
        }
        Value::String(s) => write_string(s, out),
        // Null, booleans and numbers print the same compact or not.
        other => out.push_str(&serde_json::to_string(other).unwrap_or_default()),
    }
}

fn write_string(s: &str, out: &mut String) {
    out.push_str(&serde_json::to_string(s).unwrap_or_default());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_order_and_whitespace_do_not_change_the_context() {
        let a = call_context(
            "u",
            "aud",
            "tools/call",
            r#"{"b": 1, "a": [1, {"y": 2, "x": null}]}"#,
        )
        .unwrap();
        let b = call_context(
            "u",
            "aud",
            "tools/call",
            r#"{"a":[1,{"x":null,"y":2}],"b":1}"#,
        )
        .unwrap();
        assert_eq!(a, b);
    }

    #[test]
    fn every_field_changes_the_context() {
        let base = call_context("u", "aud", "tools/call", r#"{"current":10}"#).unwrap();
        for other in [
            call_context("v", "aud", "tools/call", r#"{"current":10}"#).unwrap(),
            call_context("u", "aux", "tools/call", r#"{"current":10}"#).unwrap(),
            call_context("u", "aud", "prompts/get", r#"{"current":10}"#).unwrap(),
            call_context("u", "aud", "tools/call", r#"{"current":11}"#).unwrap(),
            // Length prefixes keep field boundaries: "u"+"aud" is not "ua"+"ud".
            call_context("ua", "ud", "tools/call", r#"{"current":10}"#).unwrap(),
        ] {
            assert_ne!(base, other);
        }
    }

    #[test]
    fn canonical_json_sorts_keys_by_bytes_and_is_compact() {
        let v: Value =
            serde_json::from_str(r#"{ "é": 1, "z": "a\"b", "A": [true, null, 1.5] }"#).unwrap();
        assert_eq!(
            canonical_json(&v),
            r#"{"A":[true,null,1.5],"z":"a\"b","é":1}"#
        );
    }

    #[test]
    fn invalid_arguments_json_is_an_error() {
        assert_eq!(
            call_context("u", "a", "m", "{not json"),
            Err(Error::InvalidArgument("arguments are not valid JSON"))
        );
    }
}
