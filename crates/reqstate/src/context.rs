//! Canonical caller context: who called, for which server, which method, with
//! which arguments, reduced to 32 bytes to bind into a token.
//!
//! The arguments are canonicalized with the JSON Canonicalization Scheme
//! (RFC 8785), after a strict parse of the arguments' JSON text that refuses
//! what JCS cannot represent exactly (docs/FORMAT.md §7).

use alloc::string::String;
use core::fmt::Write as _;

use ring::digest;

use crate::error::InvalidArgument;
use crate::json::{self, ErrorKind, Value};

/// Length of a call context digest, in bytes.
pub const CALL_CONTEXT_LEN: usize = 32;

/// The domain label of the context digest. It names the canonicalization:
/// the pre-JCS label `reqstate/v1 call-context` digested different bytes.
const LABEL: &[u8] = b"reqstate/v1 call-context-jcs";

/// The digest of one call's context: what a token is bound to besides its
/// tool (see [`call_context`]). 32 bytes, authenticated and never stored.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct CallContext([u8; CALL_CONTEXT_LEN]);

impl CallContext {
    /// Wraps a digest computed elsewhere: another implementation's
    /// `callContext`, or one carried by the caller. Prefer [`call_context`].
    pub const fn from_bytes(digest: [u8; CALL_CONTEXT_LEN]) -> Self {
        CallContext(digest)
    }

    /// The 32 bytes.
    pub const fn as_bytes(&self) -> &[u8; CALL_CONTEXT_LEN] {
        &self.0
    }
}

impl core::fmt::Debug for CallContext {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("CallContext(")?;
        for byte in self.0 {
            write!(f, "{byte:02x}")?;
        }
        f.write_str(")")
    }
}

/// Deepest nesting of arrays and objects accepted in the arguments.
pub const MAX_ARGUMENTS_DEPTH: usize = 128;

const NOT_JSON: InvalidArgument = InvalidArgument("arguments are not valid JSON");
const DUPLICATE_KEY: InvalidArgument = InvalidArgument("arguments have a duplicate object key");
const INEXACT_NUMBER: InvalidArgument =
    InvalidArgument("arguments have a number an IEEE double cannot represent exactly");
const LONE_SURROGATE: InvalidArgument =
    InvalidArgument("arguments have a string with a lone surrogate escape");
const TOO_DEEP: InvalidArgument = InvalidArgument("arguments are nested too deeply");

/// The original request a token is bound to (FORMAT.md §7): who made it,
/// to which server, which method, with which arguments. Named fields, so
/// that the four cannot be passed in the wrong order.
///
/// ```
/// use reqstate::{Arguments, Call, call_context};
///
/// let context = call_context(&Call {
///     principal: "user-42",
///     audience: "https://mcp.example.com",
///     method: "tools/call",
///     arguments: Arguments::Json(r#"{"name": "increase-counter", "arguments": {"by": 2}}"#),
/// })?;
/// # Ok::<(), reqstate::InvalidArgument>(())
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Call<'a> {
    /// The authenticated caller (a user or client id); empty when there is none.
    pub principal: &'a str,
    /// The server the call was made to (its URL or name).
    pub audience: &'a str,
    /// The JSON-RPC method, for example `tools/call`.
    pub method: &'a str,
    /// The request's parameters.
    pub arguments: Arguments<'a>,
}

/// A call's parameters: as JSON text (preferred) or as a parsed value.
#[derive(Debug, Clone, Copy)]
pub enum Arguments<'a> {
    /// The arguments' JSON text as received: one JSON value (an object for
    /// `tools/call`), any spacing and key order. Duplicate keys and numbers
    /// JCS cannot represent exactly are refused, as the text shows them.
    Json(&'a str),
    /// Arguments already parsed into a [`serde_json::Value`]. The value is
    /// printed by `serde_json` and that text is used, so the same numbers
    /// are refused (integers beyond 2^53 whose JCS form would be another
    /// integer, such as `u64::MAX`). A parsed value can no longer show what
    /// its parser resolved: duplicate keys (serde_json keeps the last) and
    /// number literals rounded to a double on the way in. When you hold the
    /// request's JSON text, pass [`Arguments::Json`].
    Value(&'a serde_json::Value),
}

/// Builds the context to bind a token to one caller and one original request.
///
/// ```text
/// args    = SHA-256(JCS(arguments))
/// context = SHA-256("reqstate/v1 call-context-jcs" ‖ lp(principal) ‖ lp(audience) ‖ lp(method) ‖ args)
/// lp(x)   = u32 big-endian byte length of x ‖ x
/// ```
///
/// `JCS` is the JSON Canonicalization Scheme, RFC 8785 (see
/// [`canonical_json`]). Binding this digest means a client that changes the
/// arguments on the retry, replays the token as another principal, or sends
/// it to another server gets [`Refusal::AuthenticationFailed`](crate::Refusal::AuthenticationFailed).
///
/// Arguments that JCS cannot represent exactly are refused with
/// [`InvalidArgument`]: duplicate object keys, a number whose JCS form is not
/// exactly the number written (`9007199254740993`, `1e400`,
/// `0.10000000000000001`), a `\u` escape of a lone surrogate, nesting deeper
/// than [`MAX_ARGUMENTS_DEPTH`].
pub fn call_context(call: &Call<'_>) -> Result<CallContext, InvalidArgument> {
    let canonical = match call.arguments {
        Arguments::Json(text) => canonical_json(text)?,
        Arguments::Value(value) => {
            canonical_json(&serde_json::to_string(value).map_err(|_| NOT_JSON)?)?
        }
    };
    Ok(CallContext(digest_context(
        call.principal,
        call.audience,
        call.method,
        &canonical,
    )))
}

fn digest_context(principal: &str, audience: &str, method: &str, canonical: &str) -> [u8; 32] {
    let args = digest::digest(&digest::SHA256, canonical.as_bytes());
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

/// The JCS (RFC 8785) text of one JSON value given as text: no whitespace,
/// object keys sorted by their UTF-16 code units, strings escaped minimally,
/// numbers as ECMAScript's `Number.prototype.toString` prints them (`1e+21`,
/// `100`, `0`, `1e-7`).
///
/// Refuses, with [`InvalidArgument`], text that is not one JSON value
/// (RFC 8259, read by [`json::parse`]: `NaN`, comments, a byte order mark
/// and trailing commas are not JSON) and what JCS cannot represent exactly;
/// see [`call_context`] and docs/FORMAT.md §7 for the number rule. A text
/// that breaks several rules is refused for one of them.
pub fn canonical_json(arguments_json: &str) -> Result<String, InvalidArgument> {
    let mut value = json::parse(arguments_json, MAX_ARGUMENTS_DEPTH).map_err(refusal)?;
    let mut out = String::with_capacity(arguments_json.len());
    write_jcs(&mut value, &mut out)?;
    Ok(out)
}

/// The call context's refusal of a text the JSON reader refused.
fn refusal(e: json::Error) -> InvalidArgument {
    match e.kind() {
        ErrorKind::DuplicateKey(_) => DUPLICATE_KEY,
        ErrorKind::LoneSurrogate => LONE_SURROGATE,
        ErrorKind::TooDeep => TOO_DEEP,
        _ => NOT_JSON,
    }
}

/// Appends the JCS text of `value`, sorting its objects' members in place.
/// Recursion is bounded by [`MAX_ARGUMENTS_DEPTH`], the parse's limit.
fn write_jcs(value: &mut Value<'_>, out: &mut String) -> Result<(), InvalidArgument> {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(n) => write_number(n.as_str(), out)?,
        Value::String(s) => write_string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter_mut().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_jcs(v, out)?;
            }
            out.push(']');
        }
        Value::Object(members) => {
            // RFC 8785 §3.2.3: members sorted by the UTF-16 code units of
            // their keys (the reader refused repeated keys).
            members.sort_unstable_by(|a, b| utf16_cmp(&a.0, &b.0));
            out.push('{');
            for (i, (k, v)) in members.iter_mut().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(k, out);
                out.push(':');
                write_jcs(v, out)?;
            }
            out.push('}');
        }
    }
    Ok(())
}

/// The order of two strings' UTF-16 code units, from their UTF-8 bytes.
///
/// UTF-8 byte order is code point order, which is UTF-16's except between
/// U+E000..=U+FFFF (lead bytes `EE`, `EF`) and the supplementary planes
/// (lead bytes `F0`..=`F4`, surrogates `D800`..=`DFFF` in UTF-16), where it
/// is reversed. At the first byte that differs: a continuation byte means
/// both characters share their lead byte, hence their range; a lead byte
/// tells the two ranges apart.
fn utf16_cmp(a: &str, b: &str) -> core::cmp::Ordering {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    match a.iter().zip(b).position(|(x, y)| x != y) {
        None => a.len().cmp(&b.len()),
        Some(i) => {
            let (x, y) = (a[i], b[i]);
            let upper_bmp = |byte: u8| matches!(byte, 0xEE | 0xEF);
            if (upper_bmp(x) && y >= 0xF0) || (x >= 0xF0 && upper_bmp(y)) {
                y.cmp(&x)
            } else {
                x.cmp(&y)
            }
        }
    }
}

/// Appends the JCS form of a JSON number literal (the reader checked its
/// grammar), or refuses it when that form is not exactly the number written
/// (FORMAT.md §7): the literal is rounded to the nearest IEEE double; it is
/// refused when that double is infinite or when the double's ECMAScript text
/// denotes another decimal value.
fn write_number(literal: &str, out: &mut String) -> Result<(), InvalidArgument> {
    // An integer of at most 15 digits is below 2^53, so exact, and
    // ECMAScript prints it as written (the grammar has no leading zeros),
    // except -0, printed "0".
    let digits = literal.strip_prefix('-').unwrap_or(literal);
    if digits.len() <= 15 && digits.bytes().all(|b| b.is_ascii_digit()) {
        out.push_str(if digits == "0" { digits } else { literal });
        return Ok(());
    }
    out.push_str(&jcs_number(literal)?);
    Ok(())
}

/// The JCS form of a JSON number literal, or a refusal when that form is not
/// exactly the number written (FORMAT.md §7): the literal is rounded to the
/// nearest IEEE double; it is refused when that double is infinite or when
/// the double's ECMAScript text denotes another decimal value.
fn jcs_number(literal: &str) -> Result<String, InvalidArgument> {
    // core's parser rounds to nearest, ties to even, and gives ±inf on overflow.
    let double: f64 = literal.parse().map_err(|_| NOT_JSON)?;
    if !double.is_finite() {
        return Err(INEXACT_NUMBER);
    }
    let text = if double == 0.0 {
        // ECMAScript prints -0 as "0".
        String::from("0")
    } else {
        String::from(ryu_js::Buffer::new().format_finite(double))
    };
    if decimal_value(literal) != decimal_value(&text) {
        return Err(INEXACT_NUMBER);
    }
    Ok(text)
}

/// The exact value of a decimal number text (`-`, digits, optional fraction,
/// optional exponent with sign) as (negative, significant digits without
/// leading or trailing zeros, exponent of the last digit); zero is
/// `(false, "", 0)` whatever its sign.
fn decimal_value(text: &str) -> (bool, String, i64) {
    let (negative, rest) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (mantissa, exponent) = match rest.find(['e', 'E']) {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => (rest, "0"),
    };
    let exponent = parse_exponent(exponent);
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let mut digits: String = int.chars().chain(frac.chars()).collect();
    let mut exponent = exponent.saturating_sub(i64::try_from(frac.len()).unwrap_or(i64::MAX));
    while digits.ends_with('0') {
        digits.pop();
        exponent = exponent.saturating_add(1);
    }
    let digits = String::from(digits.trim_start_matches('0'));
    if digits.is_empty() {
        return (false, digits, 0);
    }
    (negative, digits, exponent)
}

/// An exponent's value, saturated to i64 (a saturated exponent only occurs
/// with a double that overflowed or underflowed, refused either way).
fn parse_exponent(text: &str) -> i64 {
    let (negative, digits) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let mut n: i64 = 0;
    for d in digits.bytes() {
        n = n.saturating_mul(10).saturating_add(i64::from(d - b'0'));
    }
    if negative { -n } else { n }
}

/// RFC 8785 §3.2.2.2: only `"`, `\` and control characters are escaped, with
/// the short forms where JSON has them and `\u00xx` (lowercase) otherwise.
fn write_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\u{c}' => out.push_str("\\f"),
            '\r' => out.push_str("\\r"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    /// [`call_context`] on JSON text, the four parts in order.
    fn cc(
        principal: &str,
        audience: &str,
        method: &str,
        arguments: &str,
    ) -> Result<CallContext, InvalidArgument> {
        call_context(&Call {
            principal,
            audience,
            method,
            arguments: Arguments::Json(arguments),
        })
    }

    /// [`call_context`] on a parsed value.
    fn cc_value(
        principal: &str,
        audience: &str,
        method: &str,
        arguments: &Value,
    ) -> Result<CallContext, InvalidArgument> {
        call_context(&Call {
            principal,
            audience,
            method,
            arguments: Arguments::Value(arguments),
        })
    }

    #[test]
    fn key_order_and_whitespace_do_not_change_the_context() {
        let a = cc(
            "u",
            "aud",
            "tools/call",
            r#"{"b": 1, "a": [1, {"y": 2, "x": null}]}"#,
        )
        .unwrap();
        let b = cc(
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
        let base = cc("u", "aud", "tools/call", r#"{"current":10}"#).unwrap();
        for other in [
            cc("v", "aud", "tools/call", r#"{"current":10}"#).unwrap(),
            cc("u", "aux", "tools/call", r#"{"current":10}"#).unwrap(),
            cc("u", "aud", "prompts/get", r#"{"current":10}"#).unwrap(),
            cc("u", "aud", "tools/call", r#"{"current":11}"#).unwrap(),
            // Length prefixes keep field boundaries: "u"+"aud" is not "ua"+"ud".
            cc("ua", "ud", "tools/call", r#"{"current":10}"#).unwrap(),
        ] {
            assert_ne!(base, other);
        }
    }

    #[test]
    fn canonical_json_is_jcs() {
        assert_eq!(
            canonical_json(
                r#"{ "é": 1.0, "z": "a\"b\u001F", "A": [true, null, 1.5e0, -0, 1E21, 0.0000001] }"#
            )
            .unwrap(),
            r#"{"A":[true,null,1.5,0,1e+21,1e-7],"z":"a\"b\u001f","é":1}"#
        );
        // UTF-16 order: U+1F600 (D83D DE00) sorts before U+FB01 (FB01).
        assert_eq!(
            canonical_json("{\"\u{fb01}\":1,\"\u{1f600}\":2}").unwrap(),
            "{\"\u{1f600}\":2,\"\u{fb01}\":1}"
        );
    }

    #[test]
    fn inexact_arguments_are_refused() {
        for (text, error) in [
            ("{not json", NOT_JSON),
            ("NaN", NOT_JSON),
            ("[1,]", NOT_JSON),
            ("01", NOT_JSON),
            ("\"\t\"", NOT_JSON),
            (r#"{"to":"mallory","to":"bob"}"#, DUPLICATE_KEY),
            (r#"{"a":1,"\u0061":1}"#, DUPLICATE_KEY),
            ("18446744073709551616", INEXACT_NUMBER),
            ("9007199254740993", INEXACT_NUMBER),
            ("1e400", INEXACT_NUMBER),
            ("-1e400", INEXACT_NUMBER),
            ("1e-400", INEXACT_NUMBER),
            ("0.10000000000000001", INEXACT_NUMBER),
            (r#""\ud800""#, LONE_SURROGATE),
            (r#""\udc00\ud800""#, LONE_SURROGATE),
            (r#""\ud800\u0041""#, LONE_SURROGATE),
        ] {
            assert_eq!(canonical_json(text), Err(error), "{text}");
        }
        let nested = |n: usize| "[".repeat(n) + &"]".repeat(n);
        assert!(canonical_json(&nested(MAX_ARGUMENTS_DEPTH)).is_ok());
        assert_eq!(
            canonical_json(&nested(MAX_ARGUMENTS_DEPTH + 1)),
            Err(TOO_DEEP)
        );
    }

    #[test]
    fn exact_numbers_are_accepted() {
        for (text, jcs) in [
            ("9007199254740992", "9007199254740992"),
            ("-9007199254740992", "-9007199254740992"),
            ("100.0", "100"),
            ("1e21", "1e+21"),
            ("1e20", "100000000000000000000"),
            ("0.1", "0.1"),
            ("5e-324", "5e-324"),
            ("-0.0", "0"),
            ("0e400", "0"),
            ("1.7976931348623157e308", "1.7976931348623157e+308"),
        ] {
            assert_eq!(canonical_json(text).as_deref(), Ok(jcs), "{text}");
        }
    }

    #[test]
    fn keys_sort_by_utf16_code_units() {
        use alloc::vec::Vec;
        // Every range boundary that matters: ASCII, two- and three-byte
        // characters below the surrogates, U+E000..=U+FFFF (above them in
        // UTF-16), and supplementary characters (surrogate pairs, below).
        let keys = [
            "",
            "a",
            "ab",
            "b",
            "\u{7f}",
            "\u{80}",
            "é",
            "\u{7ff}",
            "\u{800}",
            "\u{d7ff}",
            "\u{e000}",
            "\u{fb01}",
            "\u{ff5e}",
            "\u{ffff}",
            "\u{10000}",
            "\u{1f600}",
            "\u{1f600}a",
            "\u{10ffff}",
            "a\u{ffff}",
            "a\u{10000}",
            "\u{e000}\u{10000}",
            "\u{10000}\u{e000}",
        ];
        for a in keys {
            for b in keys {
                let utf16 = |s: &str| s.encode_utf16().collect::<Vec<u16>>();
                assert_eq!(utf16_cmp(a, b), utf16(a).cmp(&utf16(b)), "{a:?} {b:?}");
            }
        }
    }

    #[test]
    fn from_value_prints_then_canonicalizes() {
        let v: Value = serde_json::from_str(r#"{"b":[1.0,2],"a":"x"}"#).unwrap();
        assert_eq!(
            cc_value("u", "a", "m", &v),
            cc("u", "a", "m", r#"{"a":"x","b":[1,2]}"#)
        );
        assert_eq!(
            cc_value("u", "a", "m", &Value::from(u64::MAX)),
            Err(INEXACT_NUMBER)
        );
    }
}
