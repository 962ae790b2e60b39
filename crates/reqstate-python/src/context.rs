//! The call context (FORMAT.md §7, RFC 8785): `call_context` and
//! `canonical_json`, the core's own functions. The Python package exports
//! them as they are (`reqstate.call_context`), and the sidecar client
//! `reqstate_client` uses them too, so that every Python caller binds
//! tokens exactly as the core does.
//!
//! `call_context` and `canonical_json` take the parsed value (`dict`,
//! `list`, `tuple`, `str`, `int`, `float`, `bool`, `None`; a `str` is a JSON
//! string, as the TypeScript `callContext({arguments})` binds it), and
//! `call_context_from_text` and `canonical_json_from_text` the JSON text as
//! received: one meaning per function, so that no value is ever read as
//! text by accident. A value is walked here, in Rust, into compact JSON text (`json_text`: no Python
//! string is made, no `json.dumps`), which the core then reads and
//! canonicalizes exactly as it reads any JSON text: the same bytes, and the
//! same refusals, as printing the value with `json.dumps` first (which is
//! what this package did before; tests/test_context_values.py checks the two
//! against each other), except that what `json.dumps` would have printed
//! and the core refused anyway is refused here, with its path named.
//!
//! A refusal is `InvalidArgument` (reason `invalid_argument`) whose `rule`
//! names the rule the arguments broke: `not_json`, `duplicate_key`,
//! `inexact_number`, `lone_surrogate` or `too_deep`, the names of
//! tests/vectors/call_context.json.

use std::borrow::Cow;
use std::fmt::Write as _;

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

use crate::errors;
use crate::state::type_name;

/// The rule an argument refusal of the core's `canonical_json` broke, from
/// its message (the core names the rule only there; tests/test_api.py
/// checks every refusal of the shared corpus against the corpus's names).
fn rule(e: &reqstate::InvalidArgument) -> Option<&'static str> {
    let message = e.message();
    [
        ("valid JSON", "not_json"),
        ("duplicate", "duplicate_key"),
        ("number", "inexact_number"),
        ("surrogate", "lone_surrogate"),
        ("deeply", "too_deep"),
    ]
    .into_iter()
    .find(|(words, _)| message.contains(words))
    .map(|(_, rule)| rule)
}

/// `InvalidArgument` with the message and, when known, the `rule`.
fn refused(py: Python<'_>, message: &str, rule: Option<&'static str>) -> PyErr {
    let error = errors::invalid_argument(py, message);
    if let Some(rule) = rule
        && let Err(e) = error.value(py).setattr(pyo3::intern!(py, "rule"), rule)
    {
        return e;
    }
    error
}

/// Why a Python value has no JSON text the core would accept: the rule,
/// what was found, and where (innermost last, built as the walk unwinds).
struct Unfit {
    rule: &'static str,
    what: String,
    path: Vec<Step>,
}

/// One step into the arguments: a member of a dict, an item of a list.
enum Step {
    Key(String),
    Index(usize),
}

impl Unfit {
    fn new(rule: &'static str, what: String) -> Self {
        Unfit {
            rule,
            what,
            path: Vec::new(),
        }
    }

    /// `InvalidArgument` with the rule, saying what was found where:
    /// `invalid argument: arguments are not JSON: a set at arguments["to"][0]`.
    fn into_err(self, py: Python<'_>) -> PyErr {
        let mut at = String::from("arguments");
        for step in self.path.iter().rev() {
            match step {
                Step::Key(key) => {
                    let _ = write!(at, "[{key:?}]");
                }
                Step::Index(i) => {
                    let _ = write!(at, "[{i}]");
                }
            }
        }
        let message = format!("invalid argument: {} at {at}", self.what);
        refused(py, &message, Some(self.rule))
    }
}

/// Appends the JSON text of a Python value: objects (`dict` with `str`
/// keys, in their order), arrays (`list`, `tuple`), strings, numbers,
/// `true`, `false`, `null`. Integers are written exactly and floats with
/// their shortest round-trip digits (as `repr` and `json.dumps` print them),
/// so that the core's number rule sees what `json.dumps` would have shown
/// it. `depth` counts the enclosing arrays and objects; one more than
/// `MAX_ARGUMENTS_DEPTH` is refused `too_deep`, as the core refuses text.
fn json_text(value: &Bound<'_, PyAny>, depth: usize, out: &mut String) -> Result<(), Unfit> {
    if let Ok(s) = value.cast::<PyString>() {
        return json_string(s, out);
    }
    // Before int: a bool is an int to Python, not to JSON.
    if let Ok(b) = value.cast::<PyBool>() {
        out.push_str(if b.is_true() { "true" } else { "false" });
        return Ok(());
    }
    if let Ok(i) = value.cast::<PyInt>() {
        return json_int(i, out);
    }
    if let Ok(d) = value.cast::<PyDict>() {
        enter(depth)?;
        out.push('{');
        for (i, (k, v)) in d.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let Ok(key) = k.cast::<PyString>() else {
                return Err(Unfit::new(
                    "not_json",
                    format!(
                        "arguments are not JSON: a dict key of type {} (JSON object keys are str)",
                        type_name(&k)
                    ),
                ));
            };
            json_string(key, out)?;
            out.push(':');
            json_text(&v, depth + 1, out).map_err(|mut e| {
                e.path.push(Step::Key(key.to_string_lossy().into_owned()));
                e
            })?;
        }
        out.push('}');
        return Ok(());
    }
    if let Ok(list) = value.cast::<PyList>() {
        return json_array(list.iter(), depth, out);
    }
    if let Ok(tuple) = value.cast::<PyTuple>() {
        return json_array(tuple.iter(), depth, out);
    }
    if let Ok(f) = value.cast::<PyFloat>() {
        let f = f.value();
        if !f.is_finite() {
            return Err(Unfit::new(
                "inexact_number",
                format!("arguments have a number JSON cannot represent ({f})"),
            ));
        }
        // The core's own number form (ryu-js: ECMAScript's, as RFC 8785
        // prints numbers): the shortest round-trip digits with ties to even,
        // as Python's repr picks them (Rust's `{:e}` rounds ties up, so
        // that the core would refuse 1053556335433.5313 as another number).
        out.push_str(ryu_js::Buffer::new().format_finite(f));
        return Ok(());
    }
    if value.is_none() {
        out.push_str("null");
        return Ok(());
    }
    Err(Unfit::new(
        "not_json",
        format!(
            "arguments are not JSON: a value of type {} (JSON has dict, list, tuple, str, int, float, bool and None)",
            type_name(value)
        ),
    ))
}

/// One more level of nesting, or `too_deep` (the core's words).
fn enter(depth: usize) -> Result<(), Unfit> {
    if depth >= reqstate::MAX_ARGUMENTS_DEPTH {
        return Err(Unfit::new(
            "too_deep",
            format!(
                "arguments are nested too deeply (more than {} arrays and objects)",
                reqstate::MAX_ARGUMENTS_DEPTH
            ),
        ));
    }
    Ok(())
}

fn json_array<'py>(
    items: impl Iterator<Item = Bound<'py, PyAny>>,
    depth: usize,
    out: &mut String,
) -> Result<(), Unfit> {
    enter(depth)?;
    out.push('[');
    for (i, item) in items.enumerate() {
        if i > 0 {
            out.push(',');
        }
        json_text(&item, depth + 1, out).map_err(|mut e| {
            e.path.push(Step::Index(i));
            e
        })?;
    }
    out.push(']');
    Ok(())
}

/// A string, escaped where JSON needs it (the core re-escapes it as JCS
/// does). A Python `str` holding a surrogate (lone, or even two that would
/// make a pair in UTF-16) has no UTF-8 form: `lone_surrogate`, as the
/// escape of a lone one in JSON text.
fn json_string(s: &Bound<'_, PyString>, out: &mut String) -> Result<(), Unfit> {
    let text = s.to_cow().map_err(|_| {
        Unfit::new(
            "lone_surrogate",
            String::from("arguments have a string with a lone surrogate"),
        )
    })?;
    out.push('"');
    let mut plain = 0;
    for (i, byte) in text.bytes().enumerate() {
        if byte == b'"' || byte == b'\\' || byte < 0x20 {
            // An ASCII byte: `plain..i` and `i + 1..` are on character boundaries.
            out.push_str(&text[plain..i]);
            let _ = write!(out, "\\u{byte:04x}");
            plain = i + 1;
        }
    }
    out.push_str(&text[plain..]);
    out.push('"');
    Ok(())
}

/// An integer, exactly (the core refuses one whose JCS form is another
/// number, as it refuses the literal). Python's `int.__repr__` for those
/// beyond 64 bits, as `json.dumps` uses it (a subclass's own `__repr__` or
/// `__str__`, an `IntEnum`'s, is not the number).
fn json_int(i: &Bound<'_, PyInt>, out: &mut String) -> Result<(), Unfit> {
    if let Ok(n) = i.extract::<i64>() {
        let _ = write!(out, "{n}");
        return Ok(());
    }
    if let Ok(n) = i.extract::<u64>() {
        let _ = write!(out, "{n}");
        return Ok(());
    }
    let py = i.py();
    let digits = py
        .get_type::<PyInt>()
        .call_method1(pyo3::intern!(py, "__repr__"), (i,))
        .and_then(|r| r.extract::<String>())
        // Only a number of thousands of digits (sys.get_int_max_str_digits)
        // has no decimal text: far beyond the largest double.
        .map_err(|_| {
            Unfit::new(
                "inexact_number",
                String::from(
                    "arguments have a number an IEEE double cannot represent exactly (an int too large to print)",
                ),
            )
        })?;
    out.push_str(&digits);
    Ok(())
}

/// The JSON text of parsed arguments (`json_text`). A `str` is a JSON
/// string value like any other, never read as JSON text: the TypeScript
/// drop-in binds `arguments: "{\"n\":1}"` as that string, and two
/// languages serving one tool must give one call one context. Text goes
/// through the `_from_text` functions, named as such.
fn value_text(py: Python<'_>, arguments: &Bound<'_, PyAny>) -> PyResult<String> {
    let mut text = String::with_capacity(64);
    json_text(arguments, 0, &mut text).map_err(|e| e.into_err(py))?;
    Ok(text)
}

/// The arguments' JSON text as received: a `str`, or `bytes`/`bytearray`
/// of UTF-8. A `str` holding a lone surrogate, or bytes that are not UTF-8,
/// have no UTF-8 text: `lone_surrogate` and `not_json`, as the core names
/// those.
fn received_text<'a>(
    py: Python<'_>,
    arguments_json: &'a Bound<'_, PyAny>,
) -> PyResult<Cow<'a, str>> {
    if let Ok(text) = arguments_json.cast::<PyString>() {
        return text.to_cow().map_err(|_| {
            refused(
                py,
                "invalid argument: arguments have a string with a lone surrogate",
                Some("lone_surrogate"),
            )
        });
    }
    let not_utf8 = || {
        refused(
            py,
            "invalid argument: the arguments' JSON text is not valid UTF-8",
            Some("not_json"),
        )
    };
    if let Ok(b) = arguments_json.cast::<PyBytes>() {
        return std::str::from_utf8(b.as_bytes())
            .map(|s| Cow::Owned(s.to_owned()))
            .map_err(|_| not_utf8());
    }
    if let Ok(b) = arguments_json.cast::<pyo3::types::PyByteArray>() {
        return String::from_utf8(b.to_vec())
            .map(Cow::Owned)
            .map_err(|_| not_utf8());
    }
    Err(pyo3::exceptions::PyTypeError::new_err(format!(
        "arguments_json must be the JSON text (str, bytes or bytearray), not {}; pass a parsed value to call_context",
        type_name(arguments_json)
    )))
}

/// The call context of one MCP call (FORMAT.md §7): 32 bytes binding a
/// token to the principal, the audience (this server), the method and the
/// exact arguments, digested in their RFC 8785 (JCS) form.
///
/// `arguments` is the parsed value (`dict` with `str` keys, `list`,
/// `tuple`, `str`, `int`, `float`, `bool`, `None`), read in Rust without
/// printing it in Python: the same context as its `json.dumps` text. A
/// `str` is a JSON string (`"{\"n\":1}"` is that string, not an object);
/// for the JSON text as received use `call_context_from_text`. Raises
/// `InvalidArgument` (reason `invalid_argument`) for arguments JCS cannot
/// represent exactly, its `rule` naming the rule broken: `not_json` (a
/// value of another type, or a dict key that is not a `str`),
/// `inexact_number` (a number that is not exactly a double, such as
/// `2**64`; a NaN or an infinity), `lone_surrogate`, `too_deep` (nesting
/// deeper than `MAX_ARGUMENTS_DEPTH`, 128).
#[pyfunction]
pub(crate) fn call_context<'py>(
    py: Python<'py>,
    principal: &str,
    audience: &str,
    method: &str,
    arguments: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyBytes>> {
    let context = context_of(py, principal, audience, method, arguments)?;
    Ok(PyBytes::new(py, context.as_bytes()))
}

/// The call context of one MCP call from the arguments' JSON text as
/// received (`str`, or UTF-8 `bytes`/`bytearray`): preferred when you have
/// the text, since only the text shows duplicate keys and how numbers were
/// written. Raises `InvalidArgument` as `call_context` does, and also for
/// text that is not one JSON value (`not_json`) or repeats a key
/// (`duplicate_key`); `TypeError` for anything but text.
#[pyfunction]
pub(crate) fn call_context_from_text<'py>(
    py: Python<'py>,
    principal: &str,
    audience: &str,
    method: &str,
    arguments_json: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyBytes>> {
    let text = received_text(py, arguments_json)?;
    let context = context_of_text(py, principal, audience, method, &text)?;
    Ok(PyBytes::new(py, context.as_bytes()))
}

/// The core's call context of parsed arguments (`call_context`).
pub(crate) fn context_of(
    py: Python<'_>,
    principal: &str,
    audience: &str,
    method: &str,
    arguments: &Bound<'_, PyAny>,
) -> PyResult<reqstate::CallContext> {
    let text = value_text(py, arguments)?;
    context_of_text(py, principal, audience, method, &text)
}

fn context_of_text(
    py: Python<'_>,
    principal: &str,
    audience: &str,
    method: &str,
    text: &str,
) -> PyResult<reqstate::CallContext> {
    reqstate::call_context(&reqstate::Call {
        principal,
        audience,
        method,
        arguments: reqstate::Arguments::Json(text),
    })
    .map_err(|e| refused(py, &e.to_string(), rule(&e)))
}

/// The JCS (RFC 8785) text of one parsed JSON value, as `call_context`
/// takes it (a `str` is a JSON string). Raises `InvalidArgument` for what
/// JCS cannot represent exactly, its `rule` naming the rule broken (see
/// `call_context`).
#[pyfunction]
pub(crate) fn canonical_json(py: Python<'_>, arguments: &Bound<'_, PyAny>) -> PyResult<String> {
    let text = value_text(py, arguments)?;
    reqstate::canonical_json(&text).map_err(|e| refused(py, &e.to_string(), rule(&e)))
}

/// The JCS (RFC 8785) text of one JSON text (`str`, or UTF-8 `bytes` /
/// `bytearray`), as `call_context_from_text` reads it. Raises
/// `InvalidArgument` for text that is not one JSON value and for what JCS
/// cannot represent exactly (see `call_context_from_text`).
#[pyfunction]
pub(crate) fn canonical_json_from_text(
    py: Python<'_>,
    arguments_json: &Bound<'_, PyAny>,
) -> PyResult<String> {
    let text = received_text(py, arguments_json)?;
    reqstate::canonical_json(&text).map_err(|e| refused(py, &e.to_string(), rule(&e)))
}
