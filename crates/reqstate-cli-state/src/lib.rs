//! The command line's state forms (docs/CLI.md), shared by every command
//! line built from Rust (the `reqstate` binary and `python -m reqstate`):
//! `--state-json` text to the CBOR value minted, `--state-cbor-hex` bytes
//! checked for preferred serialization, and the JSON form of a verified
//! state. One copy, so the rules (number kinds, key order, depth, refusals)
//! cannot drift between them; `tests/conformance` runs every
//! implementation, the TypeScript one included, on one table. The sidecar
//! reads its `state_json` with the same function, [`state_from_json`], and
//! answers Verify with the same JSON form, [`state_to_json`]: one JSON text
//! gives one state everywhere (docs/CLI.md, "JSON to CBOR: the one
//! mapping"; pinned by `tests/vectors/state_json.json`). JSON text is read by
//! the core's strict reader, [`reqstate::json`], the one the call context
//! uses.

#![forbid(unsafe_code)]

use reqstate::json::{self, ErrorKind, Event, Number, Value};

/// Nesting limit of a state (FORMAT.md §5): no container at level 17.
pub use reqstate::MAX_STATE_DEPTH;

/// Lowercase hex: the command line's form of bytes (`state_cbor_hex`,
/// messages).
pub fn encode_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    out
}

/// A value nested one level deeper than a state may be: handed to the core
/// in place of a state that is too deep, so that the core refuses it with
/// `state_encoding` after its argument checks, in their documented order.
pub fn too_deep_state() -> ciborium::Value {
    (0..=MAX_STATE_DEPTH).fold(ciborium::Value::Null, |inner, _| {
        ciborium::Value::Array(vec![inner])
    })
}

/// `--state-cbor-hex`: one CBOR data item in preferred serialization, which
/// the core's encoder reproduces byte for byte (anything else is refused, so
/// the bytes embedded are exactly the bytes given). A state nested too deep
/// becomes [`too_deep_state`].
pub fn state_from_cbor(bytes: &[u8]) -> Result<ciborium::Value, String> {
    if bytes.is_empty() {
        return Err("empty: one CBOR data item is needed".into());
    }
    // The form first, at any depth (ciborium's reader stops at 256 levels,
    // which would hide what lies deeper): a state too deep that is also not
    // in preferred serialization is a usage error, as everywhere else.
    check_preferred_form(bytes)?;
    let mut rest = bytes;
    let value: ciborium::Value = match ciborium::from_reader(&mut rest) {
        Ok(value) => value,
        Err(ciborium::de::Error::RecursionLimitExceeded) => return Ok(too_deep_state()),
        Err(e) => {
            return Err(format!(
                "not a well-formed CBOR data item: {}",
                cbor_read_error(&e)
            ));
        }
    };
    if !rest.is_empty() {
        return Err(format!(
            "{} bytes follow the first CBOR data item",
            rest.len()
        ));
    }
    // Re-encoded with every NaN as the one NaN, `f97e00` (docs/CLI.md): a
    // NaN with a payload or its sign set (`f97e01`, `f9fe00`) would else
    // survive the round trip.
    let mut again = Vec::with_capacity(bytes.len());
    ciborium::into_writer(&one_nan(&value), &mut again).map_err(|e| cbor_write_error(&e))?;
    if again != bytes {
        return Err(format!(
            "not in preferred serialization (docs/CLI.md): it would be embedded as {}",
            encode_hex(&again)
        ));
    }
    Ok(value)
}

/// `--state-cbor-hex`'s form (docs/CLI.md), checked over the bytes without
/// recursion, so that it holds at any depth: exactly one well-formed item;
/// definite lengths; integers, lengths and tags in their shortest heads;
/// floats in the shortest of half, single and double precision that holds
/// them exactly, NaN only as `f97e00`; no simple values but `false`, `true`
/// and `null`; text strings UTF-8. Depth is the core's to judge.
pub fn check_preferred_form(bytes: &[u8]) -> Result<(), String> {
    let not_preferred = |at: usize, what: &str| {
        Err(format!(
            "not in preferred serialization (docs/CLI.md): {what} at byte {at}"
        ))
    };
    let truncated = |at: usize| format!("not a well-formed CBOR data item: truncated at byte {at}");
    let mut pos = 0usize;
    // Items still to read in each open container, the outermost first.
    let mut pending: Vec<u64> = vec![1];
    while let Some(left) = pending.last_mut() {
        if *left == 0 {
            pending.pop();
            continue;
        }
        *left -= 1;
        let at = pos;
        let initial = *bytes.get(pos).ok_or_else(|| truncated(at))?;
        pos += 1;
        let (major, info) = (initial >> 5, initial & 0x1f);
        let width = match info {
            0..=23 => 0,
            24 => 1,
            25 => 2,
            26 => 4,
            27 => 8,
            31 => return not_preferred(at, "an indefinite length or a break"),
            _ => {
                return Err(format!(
                    "not a well-formed CBOR data item: reserved additional information at byte {at}"
                ));
            }
        };
        let head = bytes.get(pos..pos + width).ok_or_else(|| truncated(at))?;
        pos += width;
        let arg = if width == 0 {
            u64::from(info)
        } else {
            head.iter().fold(0u64, |a, &b| (a << 8) | u64::from(b))
        };
        if major == 7 {
            match info {
                20..=22 => {}
                25 if f16_is_nan(arg) && arg != 0x7e00 => {
                    return not_preferred(at, "a NaN other than f97e00");
                }
                25 => {}
                26 => {
                    let x = f64::from(f32::from_bits(arg as u32));
                    if x.is_nan() || fits_half(x) {
                        return not_preferred(
                            at,
                            "a single-precision float that half precision holds",
                        );
                    }
                }
                27 => {
                    let x = f64::from_bits(arg);
                    if x.is_nan() || f64::from(x as f32) == x {
                        return not_preferred(
                            at,
                            "a double-precision float that single precision holds",
                        );
                    }
                }
                _ => return not_preferred(at, "a simple value other than false, true and null"),
            }
            continue;
        }
        let least = match width {
            1 => 24,
            2 => 0x100,
            4 => 0x1_0000,
            8 => 0x1_0000_0000,
            _ => 0,
        };
        if arg < least {
            return not_preferred(at, "a head longer than its value needs");
        }
        match major {
            0 | 1 => {}
            2 | 3 => {
                let end = usize::try_from(arg)
                    .ok()
                    .and_then(|n| pos.checked_add(n))
                    .filter(|&end| end <= bytes.len())
                    .ok_or_else(|| truncated(at))?;
                if major == 3 && core::str::from_utf8(&bytes[pos..end]).is_err() {
                    return Err(format!(
                        "not a well-formed CBOR data item: text that is not UTF-8 at byte {at}"
                    ));
                }
                pos = end;
            }
            4 => pending.push(arg),
            5 => pending.push(arg.checked_mul(2).ok_or_else(|| truncated(at))?),
            _ => pending.push(1),
        }
    }
    if pos != bytes.len() {
        return Err(format!(
            "{} bytes follow the first CBOR data item",
            bytes.len() - pos
        ));
    }
    Ok(())
}

/// Whether half-precision bits are a NaN (exponent all ones, fraction not
/// zero).
fn f16_is_nan(bits: u64) -> bool {
    bits & 0x7c00 == 0x7c00 && bits & 0x03ff != 0
}

/// Whether half precision holds `x` (not a NaN) exactly: zero, an infinity,
/// or a multiple of its binade's half-precision quantum within range.
fn fits_half(x: f64) -> bool {
    let a = x.abs();
    if a == 0.0 || a.is_infinite() {
        return true;
    }
    if a > 65504.0 || a < 2f64.powi(-24) {
        return false;
    }
    let exponent = ((a.to_bits() >> 52) & 0x7ff) as i32 - 1023;
    let quantum = 2f64.powi(exponent.max(-14) - 10);
    (a / quantum).fract() == 0.0
}

/// `value` with every NaN replaced by the quiet, positive NaN without
/// payload, which the encoder writes `f97e00`. Recursion is bounded by
/// ciborium's decoding limit.
fn one_nan(value: &ciborium::Value) -> ciborium::Value {
    use ciborium::Value as C;
    match value {
        C::Float(f) if f.is_nan() => C::Float(f64::NAN),
        C::Array(items) => C::Array(items.iter().map(one_nan).collect()),
        C::Map(entries) => C::Map(
            entries
                .iter()
                .map(|(k, v)| (one_nan(k), one_nan(v)))
                .collect(),
        ),
        C::Tag(tag, inner) => C::Tag(*tag, Box::new(one_nan(inner))),
        other => other.clone(),
    }
}

/// The JSON form of a verified state (docs/CLI.md, "state"), or `None` when
/// it has none: byte strings, tags, other simple values, integers outside
/// [-2^63, 2^64 - 1], non-finite floats, and maps with a key that is not a
/// text string or with a repeated key.
pub fn state_to_json(value: &ciborium::Value) -> Option<serde_json::Value> {
    use ciborium::Value as C;
    use serde_json::Value as J;
    Some(match value {
        C::Null => J::Null,
        C::Bool(b) => J::Bool(*b),
        C::Integer(i) => {
            let i = i128::from(*i);
            if let Ok(i) = i64::try_from(i) {
                J::from(i)
            } else {
                J::from(u64::try_from(i).ok()?)
            }
        }
        C::Float(f) => J::Number(serde_json::Number::from_f64(*f)?),
        C::Text(s) => J::String(s.clone()),
        C::Array(items) => J::Array(items.iter().map(state_to_json).collect::<Option<_>>()?),
        C::Map(entries) => {
            let mut map = serde_json::Map::new();
            for (k, v) in entries {
                let C::Text(k) = k else { return None };
                if map.insert(k.clone(), state_to_json(v)?).is_some() {
                    return None;
                }
            }
            J::Object(map)
        }
        _ => return None,
    })
}

/// Why JSON text has no state (docs/CLI.md, `--state-json`). Its `Display`
/// is the command line's message.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StateJsonError {
    /// Refused by the JSON reader ([`reqstate::json`]): not one JSON text
    /// (RFC 8259), a lone surrogate escape, or an object key that appears
    /// twice. Never [`ErrorKind::TooDeep`]: a state too deep is
    /// [`too_deep_state`].
    Json(json::Error),
    /// An integer literal outside [-2^63, 2^64 - 1], at this byte offset.
    IntegerOutOfRange(usize),
    /// A number written with a fraction or an exponent that is not finite
    /// as a double (`1e400`), at this byte offset.
    FloatOutOfRange(usize),
}

impl std::fmt::Display for StateJsonError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StateJsonError::Json(e) => match e.kind() {
                ErrorKind::DuplicateKey(key) => {
                    let key = serde_json::Value::String(key.to_string());
                    write!(f, "not accepted: the object key {key} appears twice")
                }
                _ => write!(f, "not valid JSON: {e}"),
            },
            StateJsonError::IntegerOutOfRange(at) => write!(
                f,
                "not valid JSON: integer outside [-2^63, 2^64 - 1] at byte {at}"
            ),
            StateJsonError::FloatOutOfRange(at) => write!(
                f,
                "not valid JSON: number out of the range of a double at byte {at}"
            ),
        }
    }
}

impl std::error::Error for StateJsonError {}

/// The one message of a refused JSON state, for the command line's
/// `--state-json` and the sidecar's `state_json` alike: `what` (the flag or
/// field) and where the text went wrong (`state_json: not valid JSON: … at
/// byte 1`).
pub fn state_json_error(what: &str, error: &StateJsonError) -> String {
    format!("{what}: {error}")
}

/// A CBOR reading error for people: what went wrong and at which byte,
/// never ciborium's debug text (`Semantic(None, "…")`).
pub fn cbor_read_error<T: std::fmt::Display>(error: &ciborium::de::Error<T>) -> String {
    use ciborium::de::Error;
    match error {
        Error::Io(e) => format!("cannot read: {e}"),
        Error::Syntax(at) => format!("not well-formed at byte {at}"),
        Error::Semantic(Some(at), message) => format!("{message} at byte {at}"),
        Error::Semantic(None, message) => message.clone(),
        Error::RecursionLimitExceeded => "nested too deep to read".to_owned(),
    }
}

/// A CBOR writing error for people (ciborium's own `Display` is its debug
/// text: `Value("a set has no CBOR form …")`).
pub fn cbor_write_error<T: std::fmt::Display>(error: &ciborium::ser::Error<T>) -> String {
    use ciborium::ser::Error;
    match error {
        Error::Io(e) => format!("cannot write: {e}"),
        Error::Value(message) => message.clone(),
    }
}

/// `--state-json` (and the sidecar's `state_json`): JSON text to the CBOR
/// value minted, by the one mapping of docs/CLI.md: numbers written with a
/// fraction or an exponent are floats, others integers (which must lie in
/// [-2^63, 2^64 - 1]); object keys are sorted by their UTF-8 bytes and may
/// not repeat. Read by the core's strict reader, [`reqstate::json`]. A
/// state nested deeper than [`MAX_STATE_DEPTH`] becomes [`too_deep_state`],
/// for the core to refuse (`state_encoding`), once the whole text is known
/// to be JSON with its numbers in range (repeated keys are not looked for in
/// such a text); `[` repeated 100 000 times is not JSON. The error's
/// `Display` is the command line's message.
pub fn state_from_json(text: &str) -> Result<ciborium::Value, StateJsonError> {
    match json::parse(text, MAX_STATE_DEPTH) {
        Ok(value) => to_cbor(value),
        Err(e) if *e.kind() == ErrorKind::TooDeep => {
            // The reader has checked the grammar to the end; the numbers
            // beyond the depth limit were not built, so read them again.
            for event in json::Reader::new(text) {
                if let Event::Number(n) = event.map_err(StateJsonError::Json)? {
                    number(n)?;
                }
            }
            Ok(too_deep_state())
        }
        Err(e) => Err(StateJsonError::Json(e)),
    }
}

/// The JSON form of a state as the command line prints it (docs/CLI.md,
/// "state"), compact, object keys sorted: [`state_to_json`] as text, or
/// `None` when the state has no JSON form. The sidecar's Verify answers
/// with it too.
pub fn state_to_json_text(value: &ciborium::Value) -> Option<String> {
    state_to_json(value).map(|json| json.to_string())
}

/// A parsed state as CBOR. Recursion is bounded by [`MAX_STATE_DEPTH`], the
/// parse's limit.
fn to_cbor(value: Value<'_>) -> Result<ciborium::Value, StateJsonError> {
    use ciborium::Value as C;
    Ok(match value {
        Value::Null => C::Null,
        Value::Bool(b) => C::Bool(b),
        Value::Number(n) => number(n)?,
        Value::String(s) => C::Text(s.into_owned()),
        Value::Array(items) => C::Array(items.into_iter().map(to_cbor).collect::<Result<_, _>>()?),
        Value::Object(members) => {
            let mut entries = members
                .into_iter()
                .map(|(k, v)| Ok((k.into_owned(), to_cbor(v)?)))
                .collect::<Result<Vec<(String, C)>, StateJsonError>>()?;
            // String's order is the order of the UTF-8 bytes; the keys are
            // distinct (the reader refused repeats).
            entries.sort_unstable_by(|a, b| a.0.cmp(&b.0));
            C::Map(entries.into_iter().map(|(k, v)| (C::Text(k), v)).collect())
        }
    })
}

/// A number by how it is written: an integer literal is a CBOR integer in
/// [-2^63, 2^64 - 1], anything else the double nearest it (std's parse
/// rounds correctly, as Python's and JavaScript's do).
fn number(n: Number<'_>) -> Result<ciborium::Value, StateJsonError> {
    if n.is_integer() {
        n.as_str()
            .parse::<i128>()
            .ok()
            .filter(|i| (i128::from(i64::MIN)..=i128::from(u64::MAX)).contains(i))
            .and_then(|i| ciborium::value::Integer::try_from(i).ok())
            .map(ciborium::Value::Integer)
            .ok_or(StateJsonError::IntegerOutOfRange(n.offset()))
    } else {
        match n.as_str().parse::<f64>() {
            Ok(f) if f.is_finite() => Ok(ciborium::Value::Float(f)),
            _ => Err(StateJsonError::FloatOutOfRange(n.offset())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The command line's form: the error as its message.
    fn state_from_json(text: &str) -> Result<ciborium::Value, String> {
        super::state_from_json(text).map_err(|e| e.to_string())
    }

    fn state_from_cbor_hex(hex: &str) -> Result<ciborium::Value, String> {
        if !hex.len().is_multiple_of(2) || !hex.is_ascii() {
            return Err(format!("not hex: {hex:?}"));
        }
        let bytes = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).map_err(|e| e.to_string()))
            .collect::<Result<Vec<u8>, String>>()?;
        state_from_cbor(&bytes)
    }

    fn cbor_hex(json: &str) -> String {
        let value = state_from_json(json).unwrap_or_else(|e| panic!("{json}: {e}"));
        let mut out = Vec::new();
        ciborium::into_writer(&value, &mut out).expect("encodes");
        encode_hex(&out)
    }

    #[test]
    fn json_state_maps_to_cbor_as_documented() {
        assert_eq!(cbor_hex("null"), "f6");
        assert_eq!(cbor_hex(" true "), "f5");
        assert_eq!(cbor_hex("0"), "00");
        assert_eq!(cbor_hex("-0"), "00");
        assert_eq!(cbor_hex("-1"), "20");
        assert_eq!(cbor_hex("1.0"), "f93c00");
        assert_eq!(cbor_hex("1e0"), "f93c00");
        assert_eq!(cbor_hex("0.1"), "fb3fb999999999999a");
        assert_eq!(cbor_hex("-0.0"), "f98000");
        assert_eq!(cbor_hex("[1.0,1,-0,\"é\"]"), "84f93c00010062c3a9");
        assert_eq!(cbor_hex("100000.0"), "fa47c35000");
        assert_eq!(cbor_hex("18446744073709551615"), "1bffffffffffffffff");
        assert_eq!(cbor_hex("-9223372036854775808"), "3b7fffffffffffffff");
        assert_eq!(
            cbor_hex(r#"{"current":10,"amount":5}"#),
            "a266616d6f756e74056763757272656e740a"
        );
        assert_eq!(cbor_hex(r#""\u00e9""#), "62c3a9");
        // Keys sorted by UTF-8 bytes: U+FF5E sorts before U+1F600 there
        // (EF… < F0…), not in UTF-16 order.
        assert_eq!(
            cbor_hex("{\"\u{1F600}\":1,\"\u{FF5E}\":2}"),
            "a263efbd9e0264f09f988001"
        );
    }

    #[test]
    fn json_state_refusals() {
        for bad in [
            "",
            "nul",
            "01",
            "1.",
            ".5",
            "+1",
            "1e",
            "NaN",
            "1e400",
            "18446744073709551616",
            "-9223372036854775809",
            r#"{"a":1,"a":2}"#,
            r#""\ud800""#,
            "[1,]",
            "{} {}",
            "\"a\u{1}\"",
        ] {
            assert!(state_from_json(bad).is_err(), "{bad:?} was accepted");
        }
        // Too deep is not a usage error: the core refuses it (state_encoding).
        let deep = format!("{}{}", "[".repeat(17), "]".repeat(17));
        assert_eq!(state_from_json(&deep).ok(), Some(too_deep_state()));
        let deep = format!(
            "{}1,{{\"a\":[{{}}]}}{} ",
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        assert_eq!(state_from_json(&deep).ok(), Some(too_deep_state()));
        // Deep but not JSON: a usage error all the same.
        for bad in [
            "[".repeat(100_000),
            format!("{}1,]]", "[".repeat(20)),
            format!("{}{{1:2}}]", "[".repeat(20)),
            format!("{}]] x", "[".repeat(17)),
        ] {
            assert!(state_from_json(&bad).is_err(), "{bad:.40}");
        }
        let ok = format!("{}{}", "[".repeat(16), "]".repeat(16));
        assert_ne!(state_from_json(&ok).ok(), Some(too_deep_state()));
    }

    #[test]
    fn json_state_messages_name_the_rule_and_the_byte() {
        for (text, message) in [
            ("[1,]", "not valid JSON: unexpected character at byte 3"),
            ("", "not valid JSON: unexpected end at byte 0"),
            ("[1 2]", "not valid JSON: expected , or ] at byte 3"),
            (r#"{"a" 1}"#, "not valid JSON: expected : at byte 5"),
            (
                "{} {}",
                "not valid JSON: text after the JSON value at byte 3",
            ),
            ("1.", "not valid JSON: bad number at byte 2"),
            (
                "\"a\u{1}\"",
                "not valid JSON: control character in a string at byte 2",
            ),
            (
                r#"[0,"\ud800"]"#,
                "not valid JSON: lone surrogate escape at byte 4",
            ),
            (
                r#"{"b":1,"a":2,"\u0062":3}"#,
                r#"not accepted: the object key "b" appears twice"#,
            ),
            (
                "[0, 18446744073709551616]",
                "not valid JSON: integer outside [-2^63, 2^64 - 1] at byte 4",
            ),
            (
                "[-9223372036854775809]",
                "not valid JSON: integer outside [-2^63, 2^64 - 1] at byte 1",
            ),
            (
                "{\"x\": -1e400}",
                "not valid JSON: number out of the range of a double at byte 6",
            ),
        ] {
            assert_eq!(
                state_from_json(text).err().as_deref(),
                Some(message),
                "{text}"
            );
        }
        assert_eq!(
            super::state_from_json("1e400"),
            Err(StateJsonError::FloatOutOfRange(0))
        );
    }

    #[test]
    fn too_deep_json_is_checked_to_the_end_numbers_included() {
        let deep = |inner: &str| format!("{}{inner}{}", "[".repeat(40), "]".repeat(40));
        assert_eq!(
            state_from_json(&deep("1.5, -7")).ok(),
            Some(too_deep_state())
        );
        assert_eq!(
            state_from_json(&deep("18446744073709551616")),
            Err("not valid JSON: integer outside [-2^63, 2^64 - 1] at byte 40".into())
        );
        assert_eq!(
            super::state_from_json(&deep("0, 1e400")),
            Err(StateJsonError::FloatOutOfRange(43))
        );
        // Repeated keys are not looked for in such a text (docs/CLI.md).
        assert_eq!(
            state_from_json(&deep(r#"{"a":1,"a":2}"#)).ok(),
            Some(too_deep_state())
        );
        assert!(
            state_from_json(&deep(r#""\udc00""#)).is_err_and(|e| e.contains("lone surrogate")),
            "strings beyond the limit are read"
        );
    }

    #[test]
    fn keys_are_sorted_at_every_depth_by_utf8_bytes() {
        let text = r#"{"current":10,"amount":5,"nested":{"z":1,"a":[{"y":0,"b":0}]}}"#;
        let key_order = |value: &ciborium::Value| -> Vec<String> {
            let mut keys = Vec::new();
            let mut stack = vec![value];
            while let Some(v) = stack.pop() {
                match v {
                    ciborium::Value::Map(entries) => {
                        for (k, v) in entries {
                            keys.push(k.as_text().unwrap_or_default().to_owned());
                            stack.push(v);
                        }
                    }
                    ciborium::Value::Array(items) => stack.extend(items),
                    _ => {}
                }
            }
            keys
        };
        let sorted = super::state_from_json(text).expect("a state");
        assert_eq!(
            key_order(&sorted),
            ["amount", "current", "nested", "a", "z", "b", "y"]
        );
        // A prefix sorts first; repeats are refused, compared unescaped.
        assert_eq!(cbor_hex(r#"{"ab":1,"a":2}"#), "a261610262616201");
        assert!(matches!(
            super::state_from_json(r#"{"a":1,"\u0061":1}"#),
            Err(StateJsonError::Json(e)) if e.kind() == &ErrorKind::DuplicateKey("a".into())
        ));
        assert_eq!(
            super::state_from_json("[1, 1.0]"),
            Ok(ciborium::Value::Array(vec![
                ciborium::Value::Integer(1.into()),
                ciborium::Value::Float(1.0)
            ]))
        );
    }

    #[test]
    fn cbor_hex_state_must_be_in_preferred_serialization() {
        assert!(state_from_cbor_hex("a16161f6").is_ok());
        assert!(state_from_cbor_hex("c11a692b8900").is_ok(), "a tag");
        assert!(state_from_cbor_hex("4401020304").is_ok(), "a byte string");
        assert!(state_from_cbor_hex("1800").is_err(), "non-shortest integer");
        assert!(
            state_from_cbor_hex("fb3ff0000000000000").is_err(),
            "wide float"
        );
        assert!(state_from_cbor_hex("9f01ff").is_err(), "indefinite length");
        // NaN only as f97e00.
        assert!(state_from_cbor_hex("f97e00").is_ok());
        assert!(state_from_cbor_hex("81f97e00").is_ok());
        for nan in [
            "f97e01",
            "f9fe00",
            "81f97e01",
            "fa7fc00000",
            "fb7ff8000000000000",
        ] {
            assert!(state_from_cbor_hex(nan).is_err(), "{nan}");
        }
        assert!(state_from_cbor_hex("0000").is_err(), "two items");
        assert!(state_from_cbor_hex("").is_err());
        assert!(state_from_cbor_hex("0").is_err());
        assert!(state_from_cbor_hex("zz").is_err());
    }

    #[test]
    fn only_json_shaped_states_get_a_json_form() {
        use ciborium::Value as C;
        assert_eq!(state_to_json(&C::Float(1.0)), Some(json!(1.0)));
        assert_eq!(state_to_json(&C::Bytes(vec![1])), None);
        assert_eq!(state_to_json(&C::Tag(1, Box::new(C::Null))), None);
        assert_eq!(state_to_json(&C::Float(f64::NAN)), None);
        assert_eq!(
            state_to_json(&C::Map(vec![(C::Integer(1.into()), C::Null)])),
            None
        );
        let dup = C::Map(vec![
            (C::Text("a".into()), C::Null),
            (C::Text("a".into()), C::Null),
        ]);
        assert_eq!(state_to_json(&dup), None);
    }

    /// tests/vectors/state_json.json: every JSON case through
    /// [`super::state_from_json`] and [`state_to_json_text`], every
    /// `--state-cbor-hex` case through [`state_from_cbor_hex`].
    #[test]
    fn the_state_json_vectors() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/vectors/state_json.json"
        );
        let text = std::fs::read_to_string(path).expect("tests/vectors/state_json.json");
        let file: serde_json::Value = serde_json::from_str(&text).expect("JSON");
        let field = |case: &serde_json::Value, name: &str| -> String {
            case[name].as_str().unwrap_or_default().to_owned()
        };
        let depth = |value: &ciborium::Value| -> usize {
            let mut deepest = 0;
            let mut stack = vec![(value, 0)];
            while let Some((v, d)) = stack.pop() {
                // A container at level d + 1 (the state item is level 1).
                if matches!(
                    v,
                    ciborium::Value::Array(_) | ciborium::Value::Map(_) | ciborium::Value::Tag(..)
                ) {
                    deepest = deepest.max(d + 1);
                }
                match v {
                    ciborium::Value::Array(items) => stack.extend(items.iter().map(|i| (i, d + 1))),
                    ciborium::Value::Map(entries) => {
                        for (k, v) in entries {
                            stack.push((k, d + 1));
                            stack.push((v, d + 1));
                        }
                    }
                    ciborium::Value::Tag(_, inner) => stack.push((inner, d + 1)),
                    _ => {}
                }
            }
            deepest
        };
        let cases = file["json_cases"].as_array().expect("json_cases");
        assert!(cases.len() > 100, "{} json cases", cases.len());
        for case in cases {
            let (name, json) = (field(case, "name"), field(case, "json"));
            let got = super::state_from_json(&json);
            match field(case, "outcome").as_str() {
                "ok" => {
                    let value = got.unwrap_or_else(|e| panic!("{name}: {e}"));
                    assert_ne!(value, too_deep_state(), "{name}");
                    let mut out = Vec::new();
                    ciborium::into_writer(&value, &mut out).expect("encodes");
                    assert_eq!(encode_hex(&out), field(case, "cbor_hex"), "{name}");
                    assert_eq!(
                        state_to_json_text(&value),
                        Some(field(case, "state")),
                        "{name}"
                    );
                }
                "usage" => assert!(got.is_err(), "{name}: accepted"),
                "state_encoding" => assert_eq!(got.ok(), Some(too_deep_state()), "{name}"),
                other => panic!("{name}: outcome {other}"),
            }
        }
        let cases = file["cbor_hex_cases"].as_array().expect("cbor_hex_cases");
        for case in cases {
            let name = field(case, "name");
            let hex = field(case, "cbor_hex").to_ascii_lowercase();
            let got = state_from_cbor_hex(&hex);
            match field(case, "outcome").as_str() {
                "ok" => {
                    let value = got.unwrap_or_else(|e| panic!("{name}: {e}"));
                    assert!(depth(&value) <= MAX_STATE_DEPTH, "{name}");
                    assert_eq!(
                        state_to_json_text(&value),
                        case["state"].as_str().map(str::to_owned),
                        "{name}"
                    );
                }
                "usage" => assert!(got.is_err(), "{name}: accepted"),
                "state_encoding" => {
                    let value = got.unwrap_or_else(|e| panic!("{name}: {e}"));
                    assert!(depth(&value) > MAX_STATE_DEPTH, "{name}");
                }
                other => panic!("{name}: outcome {other}"),
            }
        }
    }
}
