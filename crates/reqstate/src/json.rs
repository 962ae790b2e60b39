//! A strict JSON reader (RFC 8259), the one every reqstate JSON input goes
//! through: the call context's arguments ([`canonical_json`](crate::canonical_json),
//! FORMAT.md §7), the command line's `--state-json` and the sidecar's
//! `state_json` (through the `reqstate-cli-state` crate, docs/CLI.md).
//!
//! It reads exactly RFC 8259's grammar and refuses everything else, each
//! refusal an [`Error`] with an [`ErrorKind`] and the byte offset where the
//! text broke the rule:
//!
//! - whitespace is space, tab, line feed and carriage return only; no byte
//!   order mark, no comments, no trailing commas, no `NaN` or `Infinity`,
//!   nothing but whitespace after the value;
//! - strings are unescaped; a `\u` escape of a lone surrogate (a high one not
//!   followed by a low one, or a low one alone) is refused, as is a raw
//!   control character;
//! - object members are kept in the order written, and a key that appears
//!   twice in one object (compared after unescaping: `"a"` and `"\u0061"` are
//!   the same key) is refused;
//! - numbers are checked against the grammar and kept as their literal
//!   text ([`Number`]): each consumer interprets them its own way (the call
//!   context rounds them to a double and refuses inexact forms, the command
//!   line maps integers to CBOR integers and fractions to floats);
//! - arrays and objects nest at most as deep as the caller allows.
//!
//! Nothing is recursive: [`Reader`] reads a text as a stream of [`Event`]s
//! with a heap stack, and [`parse`] builds a [`Value`] tree from them
//! iteratively. A text nested deeper than the limit is still read to its end
//! (without building the part beyond the limit), so [`ErrorKind::TooDeep`]
//! means the text is otherwise valid JSON: a caller can tell "valid but too
//! deep" from "not JSON" for any depth (`[` repeated 100 000 times is not
//! JSON). The tree itself is as deep as the limit: dropping or walking it
//! recursively uses stack in proportion to the limit, so keep it to the
//! hundreds.
//!
//! ```
//! use reqstate::json::{self, ErrorKind, Value};
//!
//! let value = json::parse(r#"{"b": [1.50, "\u00e9"], "a": null}"#, 8)?;
//! let Value::Object(members) = &value else { unreachable!() };
//! assert_eq!(members[0].0, "b"); // in the order written
//! let Value::Array(items) = &members[0].1 else { unreachable!() };
//! let Value::Number(n) = &items[0] else { unreachable!() };
//! assert_eq!((n.as_str(), n.offset(), n.is_integer()), ("1.50", 7, false));
//!
//! let e = json::parse(r#"{"a": 1, "a": 2}"#, 8).unwrap_err();
//! assert_eq!(e.kind(), &ErrorKind::DuplicateKey("a".into()));
//! assert_eq!(e.offset(), 9);
//! assert_eq!(json::parse("[[1]]", 1).unwrap_err().kind(), &ErrorKind::TooDeep);
//! assert_eq!(json::parse("[[1]] x", 1).unwrap_err().kind(), &ErrorKind::TrailingText);
//! # Ok::<(), json::Error>(())
//! ```

use alloc::borrow::Cow;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

/// One JSON value, borrowing its strings and numbers from the text it was
/// read from where it can (a string with an escape is unescaped into a new
/// `String`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value<'a> {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A number, as written.
    Number(Number<'a>),
    /// A string, unescaped.
    String(Cow<'a, str>),
    /// An array's elements, in order.
    Array(Vec<Value<'a>>),
    /// An object's members, in the order written, no key twice.
    Object(Vec<(Cow<'a, str>, Value<'a>)>),
}

/// A number as written in the text: its literal, which matches RFC 8259's
/// grammar (`-`, integer part without leading zeros, optional fraction,
/// optional exponent), and where it starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Number<'a> {
    literal: &'a str,
    offset: usize,
}

impl<'a> Number<'a> {
    /// The literal, exactly as written (`-0`, `1.50`, `1E+21`).
    pub fn as_str(&self) -> &'a str {
        self.literal
    }

    /// The byte offset of its first character in the text.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// Whether it is written as an integer: with neither a fraction nor an
    /// exponent (`10`, `-0`; not `10.0` or `1e1`).
    pub fn is_integer(&self) -> bool {
        !self
            .literal
            .bytes()
            .any(|b| matches!(b, b'.' | b'e' | b'E'))
    }
}

/// Why a text was refused, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    kind: ErrorKind,
    offset: usize,
}

impl Error {
    /// Which rule the text broke.
    pub fn kind(&self) -> &ErrorKind {
        &self.kind
    }

    /// The byte offset in the text where it broke it (see [`ErrorKind`] for
    /// what each kind points at); the text's length when it ended too soon.
    pub fn offset(&self) -> usize {
        self.offset
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at byte {}", self.kind, self.offset)
    }
}

impl core::error::Error for Error {}

/// The rule a refused text broke. Its `Display` is a short phrase
/// (`unexpected character`, `expected , or ]`) that [`Error`]'s completes
/// with the offset.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The text ended where a value was needed (at the end of the text).
    UnexpectedEnd,
    /// No value starts with this character, or a literal is misspelt (at
    /// the character, or at the literal's first one).
    UnexpectedCharacter,
    /// After an array element, neither `,` nor `]` (at what came instead).
    ExpectedCommaOrEndArray,
    /// After an object member, neither `,` nor `}` (at what came instead).
    ExpectedCommaOrEndObject,
    /// Where an object key belongs, no string (at what came instead).
    ExpectedKey,
    /// After an object key, no `:` (at what came instead).
    ExpectedColon,
    /// A string without its closing quote (at the opening quote).
    UnterminatedString,
    /// A raw control character (U+0000 to U+001F) in a string (at it).
    ControlCharacter,
    /// A backslash not followed by one of `"\/bfnrt` or by `u` and four hex
    /// digits (at the backslash).
    InvalidEscape,
    /// A `\u` escape of a surrogate that is not half of a high-low pair (at
    /// its backslash).
    LoneSurrogate,
    /// A number that does not follow the grammar: `01`, `1.`, `.5`, `-`,
    /// `1e` (at the first character that breaks it).
    InvalidNumber,
    /// Something other than whitespace after the value (at it).
    TrailingText,
    /// An object key that appears twice in one object, after unescaping (at
    /// the second one's opening quote).
    DuplicateKey(String),
    /// Arrays and objects nested deeper than the caller's limit, in a text
    /// that is otherwise valid JSON (at the first array or object beyond
    /// the limit). Duplicate keys are not looked for in such a text.
    TooDeep,
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ErrorKind::UnexpectedEnd => "unexpected end",
            ErrorKind::UnexpectedCharacter => "unexpected character",
            ErrorKind::ExpectedCommaOrEndArray => "expected , or ]",
            ErrorKind::ExpectedCommaOrEndObject => "expected , or }",
            ErrorKind::ExpectedKey => "expected a string key",
            ErrorKind::ExpectedColon => "expected :",
            ErrorKind::UnterminatedString => "unterminated string",
            ErrorKind::ControlCharacter => "control character in a string",
            ErrorKind::InvalidEscape => "invalid escape",
            ErrorKind::LoneSurrogate => "lone surrogate escape",
            ErrorKind::InvalidNumber => "bad number",
            ErrorKind::TrailingText => "text after the JSON value",
            ErrorKind::DuplicateKey(key) => {
                return write!(f, "the object key {key:?} appears twice");
            }
            ErrorKind::TooDeep => "nested too deeply",
        })
    }
}

/// One step of reading a text: what [`Reader`] yields, in text order. An
/// object yields `StartObject`, then a `Key` before each member's value,
/// then `EndObject`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event<'a> {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A number, as written.
    Number(Number<'a>),
    /// A string value, unescaped.
    String(Cow<'a, str>),
    /// `[`.
    StartArray,
    /// `]`.
    EndArray,
    /// `{`.
    StartObject,
    /// An object key, unescaped, and its `:`.
    Key(Cow<'a, str>),
    /// `}`.
    EndObject,
}

/// Where a [`Reader`] is in the grammar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// A value must come next: at the start, after `,` in an array, after `:`.
    Value,
    /// Just after `[`: a value or `]`.
    ArrayStart,
    /// Just after `{`: a key or `}`.
    ObjectStart,
    /// After `,` in an object: a key.
    Key,
    /// After a value: `,`, the closer of the innermost container, or (at the
    /// top level) the end of the text.
    AfterValue,
    /// The text is read to its end, or an error was returned.
    Done,
}

/// A pull reader: one JSON text as a stream of [`Event`]s, checked as it
/// goes and without recursion, whatever its depth (an open container costs
/// one byte of heap). It does not look for duplicate keys (that takes the
/// members; [`parse`] does it) and has no depth limit.
///
/// After the last event it checks that only whitespace follows; after an
/// error it yields nothing more.
///
/// ```
/// use reqstate::json::{Event, Reader};
///
/// let events: Vec<Event> = Reader::new(r#"[1, {"a": "x"}]"#).collect::<Result<_, _>>()?;
/// assert_eq!(events.len(), 7);
/// assert!(matches!(&events[3], Event::Key(k) if k == "a"));
/// # Ok::<(), reqstate::json::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    text: &'a str,
    pos: usize,
    /// The open containers, innermost last: `true` for an object.
    open: Vec<bool>,
    state: State,
    event_offset: usize,
}

impl<'a> Reader<'a> {
    /// A reader at the start of `text`.
    pub fn new(text: &'a str) -> Self {
        Reader {
            text,
            pos: 0,
            open: Vec::new(),
            state: State::Value,
            event_offset: 0,
        }
    }

    /// The byte offset where the event last returned starts (its first
    /// character: the quote of a string or key, the bracket of a container).
    pub fn event_offset(&self) -> usize {
        self.event_offset
    }

    /// How many arrays and objects are open.
    pub fn depth(&self) -> usize {
        self.open.len()
    }

    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    fn fail(&mut self, kind: ErrorKind, offset: usize) -> Error {
        self.state = State::Done;
        Error { kind, offset }
    }

    /// The next event, `Ok(None)` at the end of a valid text.
    fn step(&mut self) -> Result<Option<Event<'a>>, Error> {
        loop {
            self.skip_ws();
            self.event_offset = self.pos;
            match self.state {
                State::Value => return self.value().map(Some),
                State::ArrayStart => {
                    if self.peek() == Some(b']') {
                        return Ok(Some(self.close()));
                    }
                    self.state = State::Value;
                }
                State::ObjectStart => {
                    if self.peek() == Some(b'}') {
                        return Ok(Some(self.close()));
                    }
                    self.state = State::Key;
                }
                State::Key => {
                    if self.peek() != Some(b'"') {
                        return Err(self.fail(ErrorKind::ExpectedKey, self.pos));
                    }
                    let key = self.string()?;
                    self.skip_ws();
                    if self.peek() != Some(b':') {
                        return Err(self.fail(ErrorKind::ExpectedColon, self.pos));
                    }
                    self.pos += 1;
                    self.state = State::Value;
                    return Ok(Some(Event::Key(key)));
                }
                State::AfterValue => {
                    let Some(&object) = self.open.last() else {
                        if self.pos == self.text.len() {
                            self.state = State::Done;
                            return Ok(None);
                        }
                        return Err(self.fail(ErrorKind::TrailingText, self.pos));
                    };
                    let (closer, kind) = if object {
                        (b'}', ErrorKind::ExpectedCommaOrEndObject)
                    } else {
                        (b']', ErrorKind::ExpectedCommaOrEndArray)
                    };
                    match self.peek() {
                        Some(b',') => {
                            self.pos += 1;
                            self.state = if object { State::Key } else { State::Value };
                        }
                        Some(c) if c == closer => return Ok(Some(self.close())),
                        _ => return Err(self.fail(kind, self.pos)),
                    }
                }
                State::Done => return Ok(None),
            }
        }
    }

    /// At the closer of the innermost container (checked by the caller).
    fn close(&mut self) -> Event<'a> {
        self.pos += 1;
        self.state = State::AfterValue;
        match self.open.pop() {
            Some(true) => Event::EndObject,
            _ => Event::EndArray,
        }
    }

    /// A value starts here (after whitespace).
    fn value(&mut self) -> Result<Event<'a>, Error> {
        let Some(byte) = self.peek() else {
            return Err(self.fail(ErrorKind::UnexpectedEnd, self.pos));
        };
        let event = match byte {
            b'[' | b'{' => {
                self.pos += 1;
                let object = byte == b'{';
                self.open.push(object);
                self.state = if object {
                    State::ObjectStart
                } else {
                    State::ArrayStart
                };
                return Ok(if object {
                    Event::StartObject
                } else {
                    Event::StartArray
                });
            }
            b'"' => Event::String(self.string()?),
            b'-' | b'0'..=b'9' => Event::Number(self.number()?),
            b't' => self.literal("true", Event::Bool(true))?,
            b'f' => self.literal("false", Event::Bool(false))?,
            b'n' => self.literal("null", Event::Null)?,
            _ => return Err(self.fail(ErrorKind::UnexpectedCharacter, self.pos)),
        };
        self.state = State::AfterValue;
        Ok(event)
    }

    fn literal(&mut self, word: &str, event: Event<'a>) -> Result<Event<'a>, Error> {
        let rest = self.text.as_bytes().get(self.pos..).unwrap_or_default();
        if rest.starts_with(word.as_bytes()) {
            self.pos += word.len();
            Ok(event)
        } else {
            Err(self.fail(ErrorKind::UnexpectedCharacter, self.pos))
        }
    }

    /// A string at its opening quote, unescaped; borrowed when it has no
    /// escape. The text is UTF-8 already (`&str`), so only an escape can
    /// make a lone surrogate.
    fn string(&mut self) -> Result<Cow<'a, str>, Error> {
        let open = self.pos;
        self.pos += 1;
        let plain = self.plain_run();
        match self.peek() {
            Some(b'"') => {
                self.pos += 1;
                return Ok(Cow::Borrowed(plain));
            }
            Some(b'\\') => {}
            Some(_) => return Err(self.fail(ErrorKind::ControlCharacter, self.pos)),
            None => return Err(self.fail(ErrorKind::UnterminatedString, open)),
        }
        let mut out = String::with_capacity(plain.len() + 16);
        out.push_str(plain);
        loop {
            match self.peek() {
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(Cow::Owned(out));
                }
                Some(b'\\') => {
                    let c = self.escape(open)?;
                    out.push(c);
                }
                Some(_) => return Err(self.fail(ErrorKind::ControlCharacter, self.pos)),
                None => return Err(self.fail(ErrorKind::UnterminatedString, open)),
            }
            out.push_str(self.plain_run());
        }
    }

    /// The characters up to the next quote, backslash, control character or
    /// the end of the text. It stops at an ASCII byte or at the end, so both
    /// ends are character boundaries.
    fn plain_run(&mut self) -> &'a str {
        let start = self.pos;
        let bytes = self.text.as_bytes();
        while let Some(&b) = bytes.get(self.pos) {
            if b == b'"' || b == b'\\' || b < 0x20 {
                break;
            }
            self.pos += 1;
        }
        self.text.get(start..self.pos).unwrap_or_default()
    }

    /// One escape at its backslash, decoded; `open` is the string's quote.
    fn escape(&mut self, open: usize) -> Result<char, Error> {
        let backslash = self.pos;
        let Some(&byte) = self.text.as_bytes().get(backslash + 1) else {
            return Err(self.fail(ErrorKind::UnterminatedString, open));
        };
        self.pos += 2;
        Ok(match byte {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let first = self.hex4(backslash)?;
                match first {
                    0xD800..=0xDBFF => {
                        let low = backslash + 6;
                        let rest = self.text.as_bytes().get(low..).unwrap_or_default();
                        if !rest.starts_with(b"\\u") {
                            return Err(self.fail(ErrorKind::LoneSurrogate, backslash));
                        }
                        self.pos = low + 2;
                        let second = self.hex4(low)?;
                        if !(0xDC00..=0xDFFF).contains(&second) {
                            return Err(self.fail(ErrorKind::LoneSurrogate, backslash));
                        }
                        let code = 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00);
                        char::from_u32(code)
                            .ok_or_else(|| self.fail(ErrorKind::LoneSurrogate, backslash))?
                    }
                    0xDC00..=0xDFFF => {
                        return Err(self.fail(ErrorKind::LoneSurrogate, backslash));
                    }
                    // Not a surrogate, so a scalar value.
                    _ => char::from_u32(first)
                        .ok_or_else(|| self.fail(ErrorKind::InvalidEscape, backslash))?,
                }
            }
            _ => return Err(self.fail(ErrorKind::InvalidEscape, backslash)),
        })
    }

    /// Four hex digits at `pos`, of the `\u` escape at `backslash`.
    fn hex4(&mut self, backslash: usize) -> Result<u32, Error> {
        let mut n = 0u32;
        for i in 0..4 {
            let digit = self
                .text
                .as_bytes()
                .get(self.pos + i)
                .and_then(|&d| char::from(d).to_digit(16));
            match digit {
                Some(d) => n = n * 16 + d,
                None => return Err(self.fail(ErrorKind::InvalidEscape, backslash)),
            }
        }
        self.pos += 4;
        Ok(n)
    }

    /// A number at its first character (`-` or a digit).
    fn number(&mut self) -> Result<Number<'a>, Error> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => {
                self.pos += 1;
                if let Some(b'0'..=b'9') = self.peek() {
                    return Err(self.fail(ErrorKind::InvalidNumber, self.pos));
                }
            }
            Some(b'1'..=b'9') => self.digits(),
            _ => return Err(self.fail(ErrorKind::InvalidNumber, self.pos)),
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return Err(self.fail(ErrorKind::InvalidNumber, self.pos));
            }
            self.digits();
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.pos += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return Err(self.fail(ErrorKind::InvalidNumber, self.pos));
            }
            self.digits();
        }
        Ok(Number {
            // ASCII from `start` to `pos`: both are character boundaries.
            literal: self.text.get(start..self.pos).unwrap_or_default(),
            offset: start,
        })
    }

    fn digits(&mut self) {
        while let Some(b'0'..=b'9') = self.peek() {
            self.pos += 1;
        }
    }
}

impl<'a> Iterator for Reader<'a> {
    type Item = Result<Event<'a>, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        self.step().transpose()
    }
}

impl core::iter::FusedIterator for Reader<'_> {}

/// A container being built by [`parse`]: where its elements (and, for an
/// object, its keys) start on the shared stacks.
struct Open {
    values: usize,
    keys: Option<usize>,
}

/// Reads one JSON text into a [`Value`], refusing what the module's rules
/// refuse; arrays and objects may nest `max_depth` deep (a top-level array
/// is at depth 1; with `max_depth` 0 only a scalar is accepted).
///
/// A text nested deeper is read to its end without building the part
/// beyond the limit, and refused with [`ErrorKind::TooDeep`] only when it is
/// otherwise valid JSON (duplicate keys aside); any other error in it comes
/// first. Errors are reported at the first place the text breaks a rule,
/// except duplicate keys, which are found when their object closes.
pub fn parse(text: &str, max_depth: usize) -> Result<Value<'_>, Error> {
    let mut reader = Reader::new(text);
    // The elements of the open containers, innermost last, and the keys of
    // the open objects with their offsets: one stack each, so that a
    // container costs no allocation until it closes.
    let mut values: Vec<Value<'_>> = Vec::new();
    let mut keys: Vec<(Cow<'_, str>, usize)> = Vec::new();
    let mut open: Vec<Open> = Vec::new();
    let mut too_deep = None;
    while let Some(event) = reader.next() {
        let event = event?;
        if too_deep.is_some() {
            // Beyond the limit: only reading on, to the end or an error.
            continue;
        }
        let value = match event {
            Event::StartArray | Event::StartObject => {
                if open.len() >= max_depth {
                    too_deep = Some(reader.event_offset());
                    continue;
                }
                open.push(Open {
                    values: values.len(),
                    keys: (event == Event::StartObject).then_some(keys.len()),
                });
                continue;
            }
            Event::Key(key) => {
                keys.push((key, reader.event_offset()));
                continue;
            }
            Event::EndArray => {
                let start = open.pop().map_or(0, |o| o.values);
                Value::Array(values.split_off(start))
            }
            Event::EndObject => {
                let container = open.pop();
                let start = container.as_ref().map_or(0, |o| o.values);
                let key_start = container.and_then(|o| o.keys).unwrap_or(0);
                let object_keys = keys.split_off(key_start);
                if let Some((key, offset)) = first_repeat(&object_keys) {
                    return Err(Error {
                        kind: ErrorKind::DuplicateKey(String::from(key)),
                        offset,
                    });
                }
                let members = values.split_off(start);
                Value::Object(
                    object_keys
                        .into_iter()
                        .map(|(k, _)| k)
                        .zip(members)
                        .collect(),
                )
            }
            Event::Null => Value::Null,
            Event::Bool(b) => Value::Bool(b),
            Event::Number(n) => Value::Number(n),
            Event::String(s) => Value::String(s),
        };
        values.push(value);
    }
    if let Some(offset) = too_deep {
        return Err(Error {
            kind: ErrorKind::TooDeep,
            offset,
        });
    }
    // A valid text leaves exactly its value.
    values.pop().ok_or(Error {
        kind: ErrorKind::UnexpectedEnd,
        offset: text.len(),
    })
}

/// Objects up to this many members are checked for repeated keys pair by
/// pair; larger ones by sorting.
const PAIRWISE_MAX: usize = 16;

/// The first key (in the order written) equal to an earlier one in the same
/// object, with its offset.
fn first_repeat<'k>(keys: &'k [(Cow<'_, str>, usize)]) -> Option<(&'k str, usize)> {
    let found = if keys.len() <= PAIRWISE_MAX {
        (1..keys.len()).find(|&j| keys[..j].iter().any(|(k, _)| *k == keys[j].0))
    } else {
        // Sorted by key, then position: each run of equal keys starts with
        // the first occurrence, and its second entry is the first repeat.
        let mut order: Vec<usize> = (0..keys.len()).collect();
        order.sort_unstable_by(|&a, &b| keys[a].0.cmp(&keys[b].0).then(a.cmp(&b)));
        order
            .windows(2)
            .filter(|w| keys[w[0]].0 == keys[w[1]].0)
            .map(|w| w[1])
            .min()
    };
    found.map(|j| (&*keys[j].0, keys[j].1))
}

#[cfg(test)]
mod tests;
