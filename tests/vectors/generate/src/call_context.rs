//! `tests/vectors/call_context.json`: the call-context corpus (FORMAT.md §7).
//! Argument objects as a client sends them (any spacing and key order), and
//! for each its JCS text (RFC 8785) and call context, as the crate computes
//! them, or the refusal and the rule that refuses. The core's tests, the
//! Python and Node clients and `tests/vectors/test_call_context.py` (an
//! independent RFC 8785 implementation) check the same file.

use reqstate::InvalidArgument;

use crate::schema::{CallContextCase, CallContextFile};

// The reference call: principal, audience, method.
const P: &str = "user-42";
const A: &str = "counter-server";
const M: &str = "tools/call";

/// (name, principal, audience, method, arguments_json): accepted and refused alike.
fn definitions() -> Vec<(
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    String,
)> {
    let deep = |n: usize| "[".repeat(n) + &"]".repeat(n);
    let s = |t: &str| t.to_owned();
    vec![
        // Shapes, spacing, key order.
        ("empty object", P, A, M, s("{}")),
        ("counter", P, A, M, s(r#"{"current":10}"#)),
        (
            "counter with spacing and reordered keys",
            P,
            A,
            M,
            s(" {\n\t\"amount\" : 5 ,\r\n \"current\":10 } "),
        ),
        (
            "nested objects and arrays",
            P,
            A,
            M,
            s(r#"{"b":{"z":[1,{"y":true,"x":null}],"a":[]},"a":"s","c":[[[]],[{}]]}"#),
        ),
        (
            "top-level array",
            P,
            A,
            M,
            s(r#"[3, "x", null, false, [], {}]"#),
        ),
        ("top-level string", P, A, M, s(r#""just a string""#)),
        ("top-level null", P, A, M, s("null")),
        ("literals", P, A, M, s("[true,false,null]")),
        ("other principal", "user-43", A, M, s(r#"{"current":10}"#)),
        (
            "other audience",
            P,
            "other-server",
            M,
            s(r#"{"current":10}"#),
        ),
        ("other method", P, A, "prompts/get", s(r#"{"current":10}"#)),
        (
            "unicode principal, empty audience",
            "ユーザー😀",
            "",
            M,
            s(r#"{"current":10}"#),
        ),
        ("nesting at the limit (128)", P, A, M, deep(128)),
        // Numbers.
        ("float 1.5", P, A, M, s(r#"{"x":1.5}"#)),
        ("float 100.0 prints as 100", P, A, M, s(r#"{"x":100.0}"#)),
        ("float 1.0 prints as 1", P, A, M, s(r#"{"x":1.0}"#)),
        ("trailing zeros 4.50", P, A, M, s(r#"{"x":4.50}"#)),
        ("exponent 1e21 prints as 1e+21", P, A, M, s(r#"{"x":1e21}"#)),
        ("exponent 1E+21 uppercase", P, A, M, s(r#"{"x":1E+21}"#)),
        ("1e20 prints in full", P, A, M, s(r#"{"x":1e20}"#)),
        (
            "integer literal 10^22 prints as 1e+22",
            P,
            A,
            M,
            s(r#"{"x":10000000000000000000000}"#),
        ),
        (
            "123456789012345680000",
            P,
            A,
            M,
            s(r#"{"x":123456789012345680000}"#),
        ),
        ("small 1e-7", P, A, M, s(r#"{"x":1e-7}"#)),
        ("small 0.000001", P, A, M, s(r#"{"x":0.000001}"#)),
        ("small 1e-6 prints as 0.000001", P, A, M, s(r#"{"x":1e-6}"#)),
        (
            "negative exponent -1.5E-10",
            P,
            A,
            M,
            s(r#"{"x":-1.5E-10}"#),
        ),
        ("negative zero prints as 0", P, A, M, s(r#"{"x":-0}"#)),
        ("negative zero float -0.0e5", P, A, M, s(r#"{"x":-0.0e5}"#)),
        ("zero with a huge exponent", P, A, M, s(r#"{"x":0e400}"#)),
        ("2^53-1", P, A, M, s(r#"{"x":9007199254740991}"#)),
        ("2^53", P, A, M, s(r#"{"x":9007199254740992}"#)),
        ("-2^53", P, A, M, s(r#"{"x":-9007199254740992}"#)),
        (
            "2^54 prints exactly",
            P,
            A,
            M,
            s(r#"{"x":18014398509481984}"#),
        ),
        ("smallest subnormal 5e-324", P, A, M, s(r#"{"x":5e-324}"#)),
        (
            "largest double",
            P,
            A,
            M,
            s(r#"{"x":1.7976931348623157e308}"#),
        ),
        ("0.1", P, A, M, s(r#"{"x":0.1}"#)),
        (
            "0.30000000000000004",
            P,
            A,
            M,
            s(r#"{"x":0.30000000000000004}"#),
        ),
        (
            "RFC 8785 numbers, exact",
            P,
            A,
            M,
            s(r#"[333333333.3333333, 1E30, 4.50, 2e-3, 0.000000000000000000000000001]"#),
        ),
        // Strings and keys.
        (
            "RFC 8785 key order (UTF-16 code units)",
            P,
            A,
            M,
            s(
                r#"{"\u20ac":"Euro Sign","\r":"Carriage Return","\ufb33":"Hebrew Letter Dalet With Dagesh","1":"One","\ud83d\ude00":"Emoji: Grinning Face","\u0080":"Control\u007f","\u00f6":"Latin Small Letter O With Diaeresis"}"#,
            ),
        ),
        (
            "UTF-16 order differs from code points",
            P,
            A,
            M,
            s("{\"\u{fb01}\":1,\"\u{1f600}\":2}"),
        ),
        (
            "ASCII and Latin-1 keys",
            P,
            A,
            M,
            s(r#"{"é":1,"z":2,"A":3,"a":4,"a ":5}"#),
        ),
        (
            "astral character escaped as a pair",
            P,
            A,
            M,
            s(r#"{"e":"\ud83d\ude00"}"#),
        ),
        (
            "astral character raw",
            P,
            A,
            M,
            s("{\"e\":\"\u{1f600}\u{10ffff}\"}"),
        ),
        (
            "control characters",
            P,
            A,
            M,
            s(r#"["\u0000\u0001\u001F\b\t\n\f\r\u000b"]"#),
        ),
        (
            "escapes JCS does not need",
            P,
            A,
            M,
            s(r#"["\/\u0041\u00e9\u2028\u007f"]"#),
        ),
        ("quote and backslash", P, A, M, s(r#"["a\"b\\c"]"#)),
        ("raw U+2028 and DEL", P, A, M, s("[\"\u{2028}\u{7f}\"]")),
        // Refused: duplicate keys.
        (
            "duplicate key",
            P,
            A,
            M,
            s(r#"{"to":"mallory","to":"bob"}"#),
        ),
        (
            "duplicate key with the same value",
            P,
            A,
            M,
            s(r#"{"k":true,"k":true}"#),
        ),
        (
            "duplicate key nested",
            P,
            A,
            M,
            s(r#"{"a":[{"x":1,"y":2,"x":1}]}"#),
        ),
        (
            "duplicate key through an escape",
            P,
            A,
            M,
            s(r#"{"a":1,"\u0061":2}"#),
        ),
        // Refused: numbers whose JCS form is another number.
        ("2^64", P, A, M, s(r#"{"amount":18446744073709551616}"#)),
        ("2^64+1", P, A, M, s(r#"{"amount":18446744073709551617}"#)),
        ("2^53+1", P, A, M, s(r#"{"x":9007199254740993}"#)),
        ("-2^53-1", P, A, M, s(r#"{"x":-9007199254740993}"#)),
        ("overflow 1e400", P, A, M, s(r#"{"x":1e400}"#)),
        ("overflow -1e400", P, A, M, s(r#"{"x":-1e400}"#)),
        (
            "just above the largest double",
            P,
            A,
            M,
            s(r#"{"x":1.7976931348623158e308}"#),
        ),
        ("underflow 1e-400", P, A, M, s(r#"{"x":1e-400}"#)),
        ("4.9e-324 rounds to 5e-324", P, A, M, s(r#"{"x":4.9e-324}"#)),
        (
            "decimal beyond double precision",
            P,
            A,
            M,
            s(r#"{"x":0.10000000000000001}"#),
        ),
        (
            "RFC 8785 numbers, sample input",
            P,
            A,
            M,
            s(r#"[333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001]"#),
        ),
        // Refused: lone surrogates.
        ("lone high surrogate", P, A, M, s(r#"{"s":"\ud800"}"#)),
        ("lone low surrogate", P, A, M, s(r#"{"s":"\uDC00"}"#)),
        (
            "surrogates in the wrong order",
            P,
            A,
            M,
            s(r#"{"s":"\udc00\ud800"}"#),
        ),
        (
            "high surrogate then a letter",
            P,
            A,
            M,
            s(r#"{"s":"\ud83dx"}"#),
        ),
        ("lone surrogate in a key", P, A, M, s(r#"{"\ud800":1}"#)),
        // Refused: too deep.
        ("nesting beyond the limit (129)", P, A, M, deep(129)),
        // Refused: not JSON.
        ("empty text", P, A, M, s("")),
        ("NaN", P, A, M, s(r#"{"x":NaN}"#)),
        ("Infinity", P, A, M, s(r#"{"x":-Infinity}"#)),
        ("trailing comma", P, A, M, s(r#"{"a":1,}"#)),
        ("leading zero", P, A, M, s(r#"{"x":01}"#)),
        ("leading plus", P, A, M, s(r#"{"x":+1}"#)),
        ("bare fraction", P, A, M, s(r#"{"x":.5}"#)),
        (
            "raw control character in a string",
            P,
            A,
            M,
            s("[\"a\u{1}b\"]"),
        ),
        ("two values", P, A, M, s("{} {}")),
        ("single quotes", P, A, M, s("{'a':1}")),
        ("byte order mark", P, A, M, s("\u{feff}{}")),
    ]
}

/// The rule that refused, from the refusal's message.
fn reason(e: &InvalidArgument) -> &'static str {
    match e.message() {
        m if m.contains("valid JSON") => "not_json",
        m if m.contains("duplicate") => "duplicate_key",
        m if m.contains("number") => "inexact_number",
        m if m.contains("surrogate") => "lone_surrogate",
        m if m.contains("deeply") => "too_deep",
        _ => panic!("unexpected error {e:?}"),
    }
}

/// The whole file, from the definitions.
pub(crate) fn generate() -> CallContextFile {
    let cases = definitions()
        .into_iter()
        .map(|(name, principal, audience, method, arguments_json)| {
            let canonical = reqstate::canonical_json(&arguments_json);
            let context = reqstate::call_context(&reqstate::Call {
                principal,
                audience,
                method,
                arguments: reqstate::Arguments::Json(&arguments_json),
            });
            let mut case = CallContextCase {
                name: name.to_owned(),
                principal: principal.to_owned(),
                audience: audience.to_owned(),
                method: method.to_owned(),
                arguments_json,
                canonical: None,
                context: None,
                refused: None,
                reason: None,
            };
            match (canonical, context) {
                (Ok(c), Ok(ctx)) => {
                    case.canonical = Some(c);
                    case.context = Some(hex::encode(ctx.as_bytes()));
                }
                (Err(a), Err(b)) => {
                    assert_eq!(a, b, "{name}");
                    assert_eq!(a.reason(), "invalid_argument", "{name}");
                    case.refused = Some("invalid_argument".to_owned());
                    case.reason = Some(reason(&a).to_owned());
                }
                other => panic!("{name}: canonical_json and call_context disagree: {other:?}"),
            }
            case
        })
        .collect();
    CallContextFile {
        description: "Call context (FORMAT.md §7): arguments_json as a client sends it; canonical is its \
                      JCS text (RFC 8785), context the hex of SHA-256(label ‖ lp(principal) ‖ lp(audience) ‖ \
                      lp(method) ‖ SHA-256(canonical)); or refused (invalid_argument) with the rule that \
                      refuses (reason). Generated by tests/vectors/generate/src/call_context.rs \
                      (cargo run -p reqstate-vectors -- write)."
            .to_owned(),
        label: "reqstate/v1 call-context-jcs".to_owned(),
        cases,
    }
}
