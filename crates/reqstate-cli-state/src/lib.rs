//! The command line's state forms (docs/CLI.md), shared by every command
//! line built from Rust (the `reqstate` binary and `python -m reqstate`):
//! `--state-json` text to the CBOR value minted, `--state-cbor-hex` bytes
//! checked for preferred serialization, and the JSON form of a verified
//! state. One copy, so the rules (number kinds, key order, depth, refusals)
//! cannot drift between them; `tests/cli_conformance.rs` runs every
//! implementation, the TypeScript one included, on one table.

#![forbid(unsafe_code)]

/// Nesting limit of a state (FORMAT.md §5): no container at level 17.
pub const MAX_STATE_DEPTH: usize = 16;

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
    let mut rest = bytes;
    let value: ciborium::Value = match ciborium::from_reader(&mut rest) {
        Ok(value) => value,
        Err(ciborium::de::Error::RecursionLimitExceeded) => return Ok(too_deep_state()),
        Err(e) => return Err(format!("not a well-formed CBOR data item: {e}")),
    };
    if !rest.is_empty() {
        return Err(format!(
            "{} bytes follow the first CBOR data item",
            rest.len()
        ));
    }
    let mut again = Vec::with_capacity(bytes.len());
    ciborium::into_writer(&value, &mut again).map_err(|e| e.to_string())?;
    if again != bytes {
        return Err(format!(
            "not in preferred serialization (docs/CLI.md): it would be embedded as {}",
            encode_hex(&again)
        ));
    }
    Ok(value)
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

/// `--state-json`: JSON text to the CBOR value minted (docs/CLI.md): numbers
/// written with a fraction or an exponent are floats, others integers
/// (which must lie in [-2^63, 2^64 - 1]); object keys are sorted by their
/// UTF-8 bytes and may not repeat.
pub fn state_from_json(text: &str) -> Result<ciborium::Value, String> {
    let mut parser = JsonParser { text, pos: 0 };
    parser.skip_ws();
    let value = match parser.value(0) {
        Ok(value) => value,
        Err(JsonError::Invalid(e)) => return Err(e),
        Err(JsonError::TooDeep) => {
            // Too deep for a state, which the core refuses, but only once
            // the whole text is known to be JSON.
            parser.pos = 0;
            parser.skip_ws();
            parser.skip_value()?;
            too_deep_state()
        }
    };
    parser.skip_ws();
    if parser.pos != text.len() {
        return Err(parser.error("text after the JSON value"));
    }
    Ok(value)
}

enum JsonError {
    Invalid(String),
    TooDeep,
}

struct JsonParser<'a> {
    text: &'a str,
    pos: usize,
}

impl JsonParser<'_> {
    fn error(&self, what: &str) -> String {
        format!("not valid JSON: {what} at byte {}", self.pos)
    }

    fn invalid(&self, what: &str) -> JsonError {
        JsonError::Invalid(self.error(what))
    }

    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    fn literal(
        &mut self,
        word: &str,
        value: ciborium::Value,
    ) -> Result<ciborium::Value, JsonError> {
        if self.text[self.pos..].starts_with(word) {
            self.pos += word.len();
            Ok(value)
        } else {
            Err(self.invalid("unexpected character"))
        }
    }

    /// One value; `depth` is the number of containers around it.
    fn value(&mut self, depth: usize) -> Result<ciborium::Value, JsonError> {
        match self.peek() {
            Some(b'{') => self.object(depth + 1),
            Some(b'[') => self.array(depth + 1),
            Some(b'"') => Ok(ciborium::Value::Text(self.string()?)),
            Some(b't') => self.literal("true", ciborium::Value::Bool(true)),
            Some(b'f') => self.literal("false", ciborium::Value::Bool(false)),
            Some(b'n') => self.literal("null", ciborium::Value::Null),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(_) => Err(self.invalid("unexpected character")),
            None => Err(self.invalid("unexpected end")),
        }
    }

    fn array(&mut self, depth: usize) -> Result<ciborium::Value, JsonError> {
        if depth > MAX_STATE_DEPTH {
            return Err(JsonError::TooDeep);
        }
        self.pos += 1;
        let mut items = Vec::new();
        self.skip_ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(ciborium::Value::Array(items));
        }
        loop {
            self.skip_ws();
            items.push(self.value(depth)?);
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(ciborium::Value::Array(items));
                }
                _ => return Err(self.invalid("expected , or ]")),
            }
        }
    }

    fn object(&mut self, depth: usize) -> Result<ciborium::Value, JsonError> {
        if depth > MAX_STATE_DEPTH {
            return Err(JsonError::TooDeep);
        }
        self.pos += 1;
        let mut entries: Vec<(String, ciborium::Value)> = Vec::new();
        self.skip_ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
        } else {
            loop {
                self.skip_ws();
                if self.peek() != Some(b'"') {
                    return Err(self.invalid("expected a string key"));
                }
                let key = self.string()?;
                self.skip_ws();
                if self.peek() != Some(b':') {
                    return Err(self.invalid("expected :"));
                }
                self.pos += 1;
                self.skip_ws();
                let value = self.value(depth)?;
                entries.push((key, value));
                self.skip_ws();
                match self.peek() {
                    Some(b',') => self.pos += 1,
                    Some(b'}') => {
                        self.pos += 1;
                        break;
                    }
                    _ => return Err(self.invalid("expected , or }")),
                }
            }
        }
        // String's order is the order of the UTF-8 bytes.
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        if let Some(pair) = entries.windows(2).find(|pair| pair[0].0 == pair[1].0) {
            return Err(JsonError::Invalid(format!(
                "not accepted: the object key {:?} appears twice",
                pair[0].0
            )));
        }
        Ok(ciborium::Value::Map(
            entries
                .into_iter()
                .map(|(k, v)| (ciborium::Value::Text(k), v))
                .collect(),
        ))
    }

    /// Checks that one value is JSON, without recursion however deep it
    /// goes, and without building it.
    fn skip_value(&mut self) -> Result<(), String> {
        let invalid = |e: JsonError| match e {
            JsonError::Invalid(e) => e,
            JsonError::TooDeep => "not valid JSON".to_string(),
        };
        let mut open: Vec<u8> = Vec::new();
        'value: loop {
            self.skip_ws();
            match self.peek() {
                Some(b'[') => {
                    self.pos += 1;
                    open.push(b']');
                    self.skip_ws();
                    if self.peek() != Some(b']') {
                        continue 'value;
                    }
                }
                Some(b'{') => {
                    self.pos += 1;
                    open.push(b'}');
                    self.skip_ws();
                    if self.peek() != Some(b'}') {
                        self.key_and_colon().map_err(invalid)?;
                        continue 'value;
                    }
                }
                // A scalar: `value` does not recurse for one.
                _ => {
                    self.value(0).map_err(invalid)?;
                    if open.is_empty() {
                        return Ok(());
                    }
                    self.skip_ws();
                }
            }
            // After a value, or at the closer of an empty container.
            loop {
                let Some(&closer) = open.last() else {
                    return Ok(());
                };
                match self.peek() {
                    Some(b',') => {
                        self.pos += 1;
                        if closer == b'}' {
                            self.skip_ws();
                            self.key_and_colon().map_err(invalid)?;
                        }
                        continue 'value;
                    }
                    Some(c) if c == closer => {
                        self.pos += 1;
                        open.pop();
                        self.skip_ws();
                    }
                    _ => return Err(self.error("expected , or a closing bracket")),
                }
            }
        }
    }

    fn key_and_colon(&mut self) -> Result<(), JsonError> {
        if self.peek() != Some(b'"') {
            return Err(self.invalid("expected a string key"));
        }
        self.string()?;
        self.skip_ws();
        if self.peek() != Some(b':') {
            return Err(self.invalid("expected :"));
        }
        self.pos += 1;
        Ok(())
    }

    fn string(&mut self) -> Result<String, JsonError> {
        let start = self.pos;
        let bytes = self.text.as_bytes();
        let mut i = start + 1;
        loop {
            match bytes.get(i) {
                None => return Err(self.invalid("unterminated string")),
                Some(b'"') => break,
                Some(b'\\') => i += 2,
                Some(0..=0x1f) => {
                    self.pos = i;
                    return Err(self.invalid("control character in a string"));
                }
                Some(_) => i += 1,
            }
        }
        // The quotes are ASCII, so both ends are character boundaries; the
        // escapes (and lone surrogates, refused) are serde_json's to decode.
        let literal = &self.text[start..=i];
        let decoded = serde_json::from_str::<String>(literal).map_err(|e| {
            JsonError::Invalid(format!("not valid JSON: string at byte {start}: {e}"))
        })?;
        self.pos = i + 1;
        Ok(decoded)
    }

    fn number(&mut self) -> Result<ciborium::Value, JsonError> {
        let bytes = self.text.as_bytes();
        let start = self.pos;
        let mut i = start;
        let digits = |i: &mut usize| {
            let from = *i;
            while bytes.get(*i).is_some_and(u8::is_ascii_digit) {
                *i += 1;
            }
            *i - from
        };
        if bytes.get(i) == Some(&b'-') {
            i += 1;
        }
        match bytes.get(i) {
            Some(b'0') => i += 1,
            Some(b'1'..=b'9') => {
                digits(&mut i);
            }
            _ => return Err(self.invalid("bad number")),
        }
        let mut float = false;
        if bytes.get(i) == Some(&b'.') {
            i += 1;
            float = true;
            if digits(&mut i) == 0 {
                self.pos = i;
                return Err(self.invalid("bad number"));
            }
        }
        if matches!(bytes.get(i), Some(b'e' | b'E')) {
            i += 1;
            float = true;
            if matches!(bytes.get(i), Some(b'+' | b'-')) {
                i += 1;
            }
            if digits(&mut i) == 0 {
                self.pos = i;
                return Err(self.invalid("bad number"));
            }
        }
        let lexeme = &self.text[start..i];
        let value = if float {
            // std's parse rounds correctly, as Python's and JavaScript's do.
            match lexeme.parse::<f64>() {
                Ok(f) if f.is_finite() => ciborium::Value::Float(f),
                _ => return Err(self.invalid("number out of the range of a double")),
            }
        } else {
            let integer = lexeme
                .parse::<i128>()
                .ok()
                .and_then(|i| ciborium::value::Integer::try_from(i).ok())
                .filter(|i| {
                    let i = i128::from(*i);
                    i >= i128::from(i64::MIN) && i <= i128::from(u64::MAX)
                });
            match integer {
                Some(i) => ciborium::Value::Integer(i),
                None => {
                    return Err(self.invalid("integer outside [-2^63, 2^64 - 1]"));
                }
            }
        };
        self.pos = i;
        Ok(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
}
