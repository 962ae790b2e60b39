//! Unit tests of the strict JSON reader: the RFC 8259 grammar's edges, duplicate keys, surrogates, depth and offsets.

use super::*;
use alloc::format;
use alloc::string::ToString;
use alloc::vec;

/// The error of a text refused at depth limit 8.
fn refused(text: &str) -> (ErrorKind, usize) {
    let e = parse(text, 8).expect_err(text);
    (e.kind().clone(), e.offset())
}

fn number(literal: &str, offset: usize) -> Value<'_> {
    Value::Number(Number { literal, offset })
}

fn string(s: &str) -> Value<'_> {
    Value::String(Cow::Borrowed(s))
}

#[test]
fn reads_every_kind_of_value() {
    assert_eq!(parse("null", 0), Ok(Value::Null));
    assert_eq!(parse(" true", 0), Ok(Value::Bool(true)));
    assert_eq!(parse("false \r\n\t", 0), Ok(Value::Bool(false)));
    assert_eq!(parse("-0", 0), Ok(number("-0", 0)));
    assert_eq!(parse(r#""a""#, 0), Ok(string("a")));
    assert_eq!(parse("[]", 1), Ok(Value::Array(vec![])));
    assert_eq!(parse("{}", 1), Ok(Value::Object(vec![])));
    assert_eq!(
        parse(r#" { "b" : [ 1 , "x" , null ] , "a" : { } } "#, 2),
        Ok(Value::Object(vec![
            (
                Cow::Borrowed("b"),
                Value::Array(vec![number("1", 11), string("x"), Value::Null])
            ),
            (Cow::Borrowed("a"), Value::Object(vec![])),
        ]))
    );
    // Nested containers close into their parents in order.
    assert_eq!(
        parse("[[1,[2]],3,[]]", 3),
        Ok(Value::Array(vec![
            Value::Array(vec![number("1", 2), Value::Array(vec![number("2", 5)])]),
            number("3", 9),
            Value::Array(vec![]),
        ]))
    );
}

#[test]
fn numbers_are_kept_as_written() {
    for (text, integer) in [
        ("0", true),
        ("-0", true),
        ("10", true),
        ("18446744073709551616", true),
        ("-9", true),
        ("1.0", false),
        ("1.50", false),
        ("1e5", false),
        ("1E+5", false),
        ("-1.5e-10", false),
        ("0e400", false),
        ("0.0", false),
    ] {
        let Ok(Value::Number(n)) = parse(text, 0) else {
            panic!("{text} is not a number");
        };
        assert_eq!((n.as_str(), n.offset(), n.is_integer()), (text, 0, integer));
    }
}

#[test]
fn the_number_grammar_is_rfc_8259s() {
    for (text, offset) in [
        ("01", 1),
        ("-01", 2),
        ("00", 1),
        ("1.", 2),
        ("1.e5", 2),
        ("-", 1),
        ("-a", 1),
        ("--1", 1),
        ("1e", 2),
        ("1e+", 3),
        ("1E-", 3),
        ("[1.]", 3),
    ] {
        assert_eq!(refused(text), (ErrorKind::InvalidNumber, offset), "{text}");
    }
    for text in [".5", "+1", "NaN", "Infinity", "'1'"] {
        assert_eq!(refused(text), (ErrorKind::UnexpectedCharacter, 0), "{text}");
    }
    assert_eq!(refused("-Infinity"), (ErrorKind::InvalidNumber, 1));
    assert_eq!(refused("0x10"), (ErrorKind::TrailingText, 1));
    assert_eq!(refused("1 2"), (ErrorKind::TrailingText, 2));
}

#[test]
fn strings_are_unescaped() {
    assert_eq!(
        parse(
            r#""\"\\\/\b\f\n\r\t\u0041\u00e9\u20AC\ud83d\ude00\u0000""#,
            0
        ),
        Ok(Value::String(Cow::Owned(String::from(
            "\"\\/\u{8}\u{c}\n\r\tAé€😀\u{0}"
        ))))
    );
    // Raw non-ASCII, U+2028 and DEL are allowed as they are.
    assert_eq!(
        parse("\"é\u{2028}\u{7f}😀\"", 0),
        Ok(string("é\u{2028}\u{7f}😀"))
    );
    // Escapes between plain runs.
    assert_eq!(
        parse(r#""ab\ncd\tef""#, 0),
        Ok(Value::String(Cow::Owned(String::from("ab\ncd\tef"))))
    );
    // No escape: borrowed from the text.
    assert!(matches!(
        parse(r#""plain""#, 0),
        Ok(Value::String(Cow::Borrowed("plain")))
    ));
}

#[test]
fn bad_strings_are_refused_where_they_break() {
    for (text, kind, offset) in [
        ("\"abc", ErrorKind::UnterminatedString, 0),
        ("[\"abc\\", ErrorKind::UnterminatedString, 1),
        ("[\"a\\\"", ErrorKind::UnterminatedString, 1),
        ("\"a\u{1}\"", ErrorKind::ControlCharacter, 2),
        ("\"\t\"", ErrorKind::ControlCharacter, 1),
        ("\"a\\nb\n\"", ErrorKind::ControlCharacter, 5),
        ("\"\u{0}\"", ErrorKind::ControlCharacter, 1),
        (r#""\x""#, ErrorKind::InvalidEscape, 1),
        (r#""ab\'""#, ErrorKind::InvalidEscape, 3),
        (r#""\u12""#, ErrorKind::InvalidEscape, 1),
        (r#""\u12g4""#, ErrorKind::InvalidEscape, 1),
        (r#""\U0041""#, ErrorKind::InvalidEscape, 1),
        (r#""\u""#, ErrorKind::InvalidEscape, 1),
        (r#""\ud800""#, ErrorKind::LoneSurrogate, 1),
        (r#""\uDBFF""#, ErrorKind::LoneSurrogate, 1),
        (r#""\udc00""#, ErrorKind::LoneSurrogate, 1),
        (r#""x\uDFFF""#, ErrorKind::LoneSurrogate, 2),
        (r#""\udc00\ud800""#, ErrorKind::LoneSurrogate, 1),
        (r#""\ud800\u0041""#, ErrorKind::LoneSurrogate, 1),
        (r#""\ud800\ud800""#, ErrorKind::LoneSurrogate, 1),
        (r#""\ud83dx""#, ErrorKind::LoneSurrogate, 1),
        (r#""\ud800\n""#, ErrorKind::LoneSurrogate, 1),
        (r#""\ud800\uZZZZ""#, ErrorKind::InvalidEscape, 7),
        (r#"{"\ud800":1}"#, ErrorKind::LoneSurrogate, 2),
    ] {
        assert_eq!(refused(text), (kind, offset), "{text}");
    }
}

#[test]
fn the_structure_is_checked_where_it_breaks() {
    for (text, kind, offset) in [
        ("", ErrorKind::UnexpectedEnd, 0),
        ("  ", ErrorKind::UnexpectedEnd, 2),
        ("[", ErrorKind::UnexpectedEnd, 1),
        ("[1,", ErrorKind::UnexpectedEnd, 3),
        ("{\"a\":", ErrorKind::UnexpectedEnd, 5),
        ("[1", ErrorKind::ExpectedCommaOrEndArray, 2),
        ("[1 2]", ErrorKind::ExpectedCommaOrEndArray, 3),
        ("[1}", ErrorKind::ExpectedCommaOrEndArray, 2),
        ("{\"a\":1", ErrorKind::ExpectedCommaOrEndObject, 6),
        ("{\"a\":1]", ErrorKind::ExpectedCommaOrEndObject, 6),
        ("{\"a\":1 \"b\":2}", ErrorKind::ExpectedCommaOrEndObject, 7),
        ("{", ErrorKind::ExpectedKey, 1),
        ("{1:2}", ErrorKind::ExpectedKey, 1),
        ("{'a':1}", ErrorKind::ExpectedKey, 1),
        ("{a:1}", ErrorKind::ExpectedKey, 1),
        ("{\"a\":1,}", ErrorKind::ExpectedKey, 7),
        ("{\"a\" 1}", ErrorKind::ExpectedColon, 5),
        ("{\"a\"", ErrorKind::ExpectedColon, 4),
        ("[1,]", ErrorKind::UnexpectedCharacter, 3),
        ("[,1]", ErrorKind::UnexpectedCharacter, 1),
        ("]", ErrorKind::UnexpectedCharacter, 0),
        ("nul", ErrorKind::UnexpectedCharacter, 0),
        ("[tru]", ErrorKind::UnexpectedCharacter, 1),
        ("True", ErrorKind::UnexpectedCharacter, 0),
        ("undefined", ErrorKind::UnexpectedCharacter, 0),
        ("truex", ErrorKind::TrailingText, 4),
        ("{} {}", ErrorKind::TrailingText, 3),
        ("[] ]", ErrorKind::TrailingText, 3),
        ("1 // comment", ErrorKind::TrailingText, 2),
        ("/* c */ 1", ErrorKind::UnexpectedCharacter, 0),
        ("\u{feff}{}", ErrorKind::UnexpectedCharacter, 0),
        // Whitespace is the four of RFC 8259 only.
        ("\u{a0}1", ErrorKind::UnexpectedCharacter, 0),
        ("1\u{b}", ErrorKind::TrailingText, 1),
        ("[1,\u{c}2]", ErrorKind::UnexpectedCharacter, 3),
        ("1\u{2028}", ErrorKind::TrailingText, 1),
    ] {
        assert_eq!(refused(text), (kind, offset), "{text:?}");
    }
}

#[test]
fn duplicate_keys_are_refused_at_the_second() {
    for (text, key, offset) in [
        (r#"{"a":1,"a":2}"#, "a", 7),
        (r#"{"k":true,"k":true}"#, "k", 10),
        (r#"{"a":1,"\u0061":2}"#, "a", 7),
        (r#"{"a":1,"b":2,"b":3,"a":4}"#, "b", 13),
        (r#"[{"x":1,"y":{"x":2},"x":3}]"#, "x", 20),
        (r#"{"":1,"":2}"#, "", 6),
    ] {
        assert_eq!(
            refused(text),
            (ErrorKind::DuplicateKey(key.to_string()), offset),
            "{text}"
        );
    }
    // The same key in different objects is not a repeat.
    assert!(parse(r#"{"a":{"a":{"a":1}},"b":[{"a":1},{"a":2}]}"#, 8).is_ok());
    // Keys are compared after unescaping, exactly: case and
    // normalization differ.
    assert!(parse(r#"{"a":1,"A":2,"é":3,"e\u0301":4}"#, 8).is_ok());
}

#[test]
fn large_objects_find_the_first_repeat_in_the_order_written() {
    let members = |keys: &[String]| {
        let body: Vec<String> = keys.iter().map(|k| format!("\"{k}\":0")).collect();
        format!("{{{}}}", body.join(","))
    };
    let mut keys: Vec<String> = (0..100).map(|i| format!("k{i:03}")).collect();
    let text = members(&keys);
    let Ok(Value::Object(parsed)) = parse(&text, 1) else {
        panic!("100 distinct keys");
    };
    assert_eq!(parsed.len(), 100);
    assert_eq!(parsed[57].0, "k057", "in the order written");
    // Repeats: k090 again at index 95, k010 again at index 99, k020
    // three times. The first repeat in the text is at index 30 (k020's
    // second); without it, at index 95, though k010 sorts first.
    keys[95] = String::from("k090");
    keys[99] = String::from("k010");
    keys[30] = String::from("k020");
    keys[40] = String::from("k020");
    let e = parse(&members(&keys), 1).unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::DuplicateKey(String::from("k020")));
    assert_eq!(e.offset(), 1 + 30 * 9);
    keys[30] = String::from("k030");
    keys[40] = String::from("k040");
    let text = members(&keys);
    let e = parse(&text, 1).unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::DuplicateKey(String::from("k090")));
    // Members are 9 bytes each ("kNNN":0 and a comma), after the `{`.
    assert_eq!(e.offset(), 1 + 95 * 9);
    assert_eq!(text.get(e.offset()..e.offset() + 6), Some("\"k090\""));
    // Same answer below the pairwise threshold.
    let small: Vec<String> = ["a", "b", "c", "b", "a"].map(String::from).to_vec();
    let e = parse(&members(&small), 1).unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::DuplicateKey(String::from("b")));
}

#[test]
fn depth_is_limited_by_the_caller() {
    let nested = |n: usize| "[".repeat(n) + &"]".repeat(n);
    assert!(parse(&nested(16), 16).is_ok());
    assert_eq!(
        parse(&nested(17), 16).map_err(|e| (e.kind().clone(), e.offset())),
        Err((ErrorKind::TooDeep, 16))
    );
    assert_eq!(parse("1", 0), Ok(number("1", 0)));
    assert_eq!(parse("[]", 0).unwrap_err().kind(), &ErrorKind::TooDeep);
    assert_eq!(parse("{}", 0).unwrap_err().offset(), 0);
    // Objects count as arrays do, siblings do not add up.
    assert!(parse(r#"{"a":[{"b":[]}],"c":[{"d":[]}]}"#, 4).is_ok());
    assert_eq!(
        parse(r#"{"a":[{"b":[]}],"c":[{"d":[{}]}]}"#, 4)
            .unwrap_err()
            .offset(),
        27
    );
}

#[test]
fn too_deep_means_otherwise_valid_however_deep() {
    let n = 100_000;
    let deep = format!("{}1,{{\"a\":[{{}}]}}{} ", "[".repeat(n), "]".repeat(n));
    let e = parse(&deep, 16).unwrap_err();
    assert_eq!((e.kind(), e.offset()), (&ErrorKind::TooDeep, 16));
    // Any other error past the limit comes first.
    for (text, kind) in [
        ("[".repeat(n), ErrorKind::UnexpectedEnd),
        (
            format!("{}1,]]", "[".repeat(20)),
            ErrorKind::UnexpectedCharacter,
        ),
        (
            format!("{}{{1:2}}]", "[".repeat(20)),
            ErrorKind::ExpectedKey,
        ),
        (
            format!("{}]] x", "[".repeat(17)),
            ErrorKind::ExpectedCommaOrEndArray,
        ),
        (
            format!("{}\"\\ud800\"]", "[".repeat(20)),
            ErrorKind::LoneSurrogate,
        ),
        (
            format!("{}{}x", "[".repeat(n), "]".repeat(n)),
            ErrorKind::TrailingText,
        ),
    ] {
        let e = parse(&text, 16).unwrap_err();
        assert_eq!(e.kind(), &kind, "{text:.40}");
    }
    // Duplicate keys are not looked for beyond the limit.
    let dup = format!("{}{{\"a\":1,\"a\":2}}{}", "[".repeat(20), "]".repeat(20));
    assert_eq!(parse(&dup, 16).unwrap_err().kind(), &ErrorKind::TooDeep);
}

#[test]
fn the_reader_streams_events_without_a_limit() {
    let text = r#"{"a":[1,"x",{}],"b":true,"a":null}"#;
    let events: Result<Vec<Event<'_>>, Error> = Reader::new(text).collect();
    assert_eq!(
        events,
        Ok(vec![
            Event::StartObject,
            Event::Key(Cow::Borrowed("a")),
            Event::StartArray,
            Event::Number(Number {
                literal: "1",
                offset: 6
            }),
            Event::String(Cow::Borrowed("x")),
            Event::StartObject,
            Event::EndObject,
            Event::EndArray,
            Event::Key(Cow::Borrowed("b")),
            Event::Bool(true),
            // The reader does not look for repeated keys.
            Event::Key(Cow::Borrowed("a")),
            Event::Null,
            Event::EndObject,
        ])
    );
    let mut reader = Reader::new("[[\"k\"]] x");
    let mut offsets = Vec::new();
    let mut depths = Vec::new();
    let error = loop {
        match reader.next() {
            Some(Ok(_)) => {
                offsets.push(reader.event_offset());
                depths.push(reader.depth());
            }
            Some(Err(e)) => break e,
            None => panic!("trailing text accepted"),
        }
    };
    assert_eq!(offsets, [0, 1, 2, 5, 6]);
    assert_eq!(depths, [1, 2, 2, 1, 0]);
    assert_eq!(
        (error.kind(), error.offset()),
        (&ErrorKind::TrailingText, 8)
    );
    assert!(reader.next().is_none(), "nothing after an error");
    let deep = "[".repeat(200_000) + &"]".repeat(200_000);
    assert_eq!(Reader::new(&deep).filter(Result::is_err).count(), 0);
}

#[test]
fn errors_print_their_rule_and_offset() {
    assert_eq!(
        parse("[1,]", 8).unwrap_err().to_string(),
        "unexpected character at byte 3"
    );
    assert_eq!(
        parse(r#"{"a\"":1,"a\"":2}"#, 8).unwrap_err().to_string(),
        r#"the object key "a\"" appears twice at byte 9"#
    );
    assert_eq!(
        ErrorKind::ExpectedCommaOrEndArray.to_string(),
        "expected , or ]"
    );
}
