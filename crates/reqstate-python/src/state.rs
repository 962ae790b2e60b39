//! States between Python and CBOR.
//!
//! A Python state (None, bool, int, float, str, bytes, list, tuple, dict
//! with str keys) becomes one CBOR item in preferred serialization, maps
//! sorted by their keys' UTF-8 bytes: exactly what `reqstate mint
//! --state-json` embeds for the same JSON, so an HMAC token minted from
//! Python equals the command line's byte for byte. A verified state comes
//! back the same way; what has no Python form (tags, non-text map keys,
//! other simple values) is `state_decoding`.

use ciborium::Value;
use pyo3::prelude::*;
use pyo3::types::{
    PyBool, PyByteArray, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple,
};
use serde::Serialize;

/// Nesting limit of a state (FORMAT.md §5): no container at level 17.
pub(crate) use reqstate_cli_state::MAX_STATE_DEPTH;

/// A state to mint: a CBOR value, or why the Python value has none.
///
/// The core checks its arguments (tool, step, ttl) before it encodes the
/// state (FORMAT.md §8's mint list); a state that cannot be encoded is
/// therefore handed to the core as `Unencodable`, whose serialization fails,
/// and the core refuses it with `state_encoding` in its documented place.
#[derive(Debug)]
pub(crate) enum State {
    /// The value to encode.
    Value(Value),
    /// Why there is no value.
    Unencodable(String),
}

impl Serialize for State {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            State::Value(value) => value.serialize(serializer),
            State::Unencodable(why) => Err(serde::ser::Error::custom(why)),
        }
    }
}

use reqstate_cli_state::too_deep_state;

enum Unfit {
    TooDeep,
    Invalid(String),
}

/// The CBOR form of a Python state.
pub(crate) fn from_py(obj: &Bound<'_, PyAny>) -> State {
    match to_value(obj, 0) {
        Ok(value) => State::Value(value),
        Err(Unfit::TooDeep) => State::Value(too_deep_state()),
        Err(Unfit::Invalid(why)) => State::Unencodable(why),
    }
}

/// `x`, with every NaN (a sign bit set, a payload, signalling) made the one
/// NaN, the quiet positive one without payload, which the encoder writes as
/// `f97e00`: docs/CLI.md accepts no other NaN in a state, and
/// `@reqstate/codec` and the command line's `--state-cbor-hex` write every
/// NaN so; infinities are kept (`f97c00`, `f9fc00`), as they keep them.
fn one_nan(x: f64) -> f64 {
    if x.is_nan() { f64::NAN } else { x }
}

/// `depth` is the number of containers around `obj`.
fn to_value(obj: &Bound<'_, PyAny>, depth: usize) -> Result<Value, Unfit> {
    if obj.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(b) = obj.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return s
            .to_cow()
            .map(|s| Value::Text(s.into_owned()))
            .map_err(|_| {
                Unfit::Invalid(
                    "a string of the state is not valid Unicode (a lone surrogate)".into(),
                )
            });
    }
    if obj.cast::<PyInt>().is_ok() {
        return int_value(obj);
    }
    if let Ok(f) = obj.cast::<PyFloat>() {
        return Ok(Value::Float(one_nan(f.value())));
    }
    if let Ok(d) = obj.cast::<PyDict>() {
        if depth >= MAX_STATE_DEPTH {
            return Err(Unfit::TooDeep);
        }
        let mut entries = Vec::with_capacity(d.len());
        for (k, v) in d.iter() {
            let Ok(key) = k.cast::<PyString>() else {
                return Err(Unfit::Invalid(format!(
                    "a map key of the state is a {}, not a str",
                    type_name(&k)
                )));
            };
            let key = key.to_cow().map_err(|_| {
                Unfit::Invalid("a map key of the state is not valid Unicode".into())
            })?;
            entries.push((key.into_owned(), to_value(&v, depth + 1)?));
        }
        // String's order is the order of the UTF-8 bytes (docs/CLI.md).
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        return Ok(Value::Map(
            entries
                .into_iter()
                .map(|(k, v)| (Value::Text(k), v))
                .collect(),
        ));
    }
    if let Ok(l) = obj.cast::<PyList>() {
        if depth >= MAX_STATE_DEPTH {
            return Err(Unfit::TooDeep);
        }
        let mut items = Vec::with_capacity(l.len());
        for item in l.iter() {
            items.push(to_value(&item, depth + 1)?);
        }
        return Ok(Value::Array(items));
    }
    if let Ok(t) = obj.cast::<PyTuple>() {
        if depth >= MAX_STATE_DEPTH {
            return Err(Unfit::TooDeep);
        }
        let mut items = Vec::with_capacity(t.len());
        for item in t.iter() {
            items.push(to_value(&item, depth + 1)?);
        }
        return Ok(Value::Array(items));
    }
    if let Ok(b) = obj.cast::<PyBytes>() {
        return Ok(Value::Bytes(b.as_bytes().to_vec()));
    }
    if let Ok(b) = obj.cast::<PyByteArray>() {
        return Ok(Value::Bytes(b.to_vec()));
    }
    Err(Unfit::Invalid(format!(
        "a {} has no CBOR form (a state is None, bool, int, float, str, bytes, list, tuple or a dict with str keys)",
        type_name(obj)
    )))
}

fn int_value(obj: &Bound<'_, PyAny>) -> Result<Value, Unfit> {
    if let Ok(i) = obj.extract::<i64>() {
        return Ok(Value::Integer(i.into()));
    }
    if let Ok(u) = obj.extract::<u64>() {
        return Ok(Value::Integer(u.into()));
    }
    // CBOR's negative integers reach -2^64.
    if let Ok(i) = obj.extract::<i128>()
        && let Ok(i) = ciborium::value::Integer::try_from(i)
    {
        return Ok(Value::Integer(i));
    }
    Err(Unfit::Invalid(
        "an integer of the state is outside CBOR's range [-2^64, 2^64 - 1]".into(),
    ))
}

/// The name of `obj`'s type, for messages (`str`, `list`).
pub(crate) fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "value".into())
}

/// The Python form of a verified state's bytes, or why it has none.
pub(crate) fn to_py<'py>(py: Python<'py>, cbor: &[u8]) -> Result<Bound<'py, PyAny>, String> {
    let value: Value = ciborium::from_reader(cbor).map_err(|e| e.to_string())?;
    value_to_py(py, &value)
}

fn value_to_py<'py>(py: Python<'py>, value: &Value) -> Result<Bound<'py, PyAny>, String> {
    let py_err = |e: PyErr| e.to_string();
    Ok(match value {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Integer(i) => match i128::from(*i).into_pyobject(py) {
            Ok(i) => i.into_any(),
            Err(never) => match never {},
        },
        Value::Float(f) => PyFloat::new(py, *f).into_any(),
        Value::Text(s) => PyString::new(py, s).into_any(),
        Value::Bytes(b) => PyBytes::new(py, b).into_any(),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(value_to_py(py, item)?).map_err(py_err)?;
            }
            list.into_any()
        }
        Value::Map(entries) => {
            let dict = PyDict::new(py);
            for (k, v) in entries {
                let Value::Text(k) = k else {
                    return Err("a map key is not a text string".into());
                };
                if dict.contains(k.as_str()).map_err(py_err)? {
                    return Err(format!("the map key {k:?} appears twice"));
                }
                dict.set_item(k, value_to_py(py, v)?).map_err(py_err)?;
            }
            dict.into_any()
        }
        Value::Tag(tag, _) => return Err(format!("a CBOR tag ({tag}) has no Python form")),
        _ => return Err("a CBOR simple value other than false, true, null".into()),
    })
}

/// Checks that `bytes` is one CBOR item in preferred serialization, as the
/// core's encoder writes it (docs/CLI.md `--state-cbor-hex`), so that it is
/// embedded byte for byte; gives the value to mint. The command line's own
/// rule, shared with the Rust binary.
pub(crate) fn from_cbor(bytes: &[u8]) -> Result<Value, String> {
    reqstate_cli_state::state_from_cbor(bytes)
}

/// The CBOR bytes of a value, as the core embeds them.
pub(crate) fn encode(value: &Value) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    ciborium::into_writer(value, &mut out).map_err(|e| e.to_string())?;
    Ok(out)
}

// ------------------------------------------------------------- fast paths

/// A Python state serialized straight into the core's CBOR writer (no
/// intermediate value): what a single `mint` uses. Same mapping as
/// [`from_py`]; a value with no CBOR form fails the serialization, which the
/// core reports as `state_encoding` after its argument checks.
pub(crate) struct PyState<'a, 'py> {
    obj: &'a Bound<'py, PyAny>,
    depth: usize,
}

impl<'a, 'py> PyState<'a, 'py> {
    /// The state `obj`, at the top level.
    pub(crate) fn new(obj: &'a Bound<'py, PyAny>) -> Self {
        PyState { obj, depth: 0 }
    }
}

impl Serialize for PyState<'_, '_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{Error as _, SerializeMap as _, SerializeSeq as _};
        let obj = self.obj;
        let depth = self.depth + 1;
        if obj.is_none() {
            return serializer.serialize_unit();
        }
        if let Ok(b) = obj.cast::<PyBool>() {
            return serializer.serialize_bool(b.is_true());
        }
        if let Ok(s) = obj.cast::<PyString>() {
            let s = s.to_cow().map_err(|_| {
                S::Error::custom("a string of the state is not valid Unicode (a lone surrogate)")
            })?;
            return serializer.serialize_str(&s);
        }
        if obj.cast::<PyInt>().is_ok() {
            if let Ok(i) = obj.extract::<i64>() {
                return serializer.serialize_i64(i);
            }
            return match int_value(obj) {
                Ok(value) => value.serialize(serializer),
                Err(Unfit::Invalid(why)) => Err(S::Error::custom(why)),
                Err(Unfit::TooDeep) => Err(S::Error::custom("state nested too deeply")),
            };
        }
        if let Ok(f) = obj.cast::<PyFloat>() {
            return serializer.serialize_f64(one_nan(f.value()));
        }
        let too_deep = || S::Error::custom("state nested too deeply (more than 16 levels)");
        if let Ok(d) = obj.cast::<PyDict>() {
            if self.depth >= MAX_STATE_DEPTH {
                return Err(too_deep());
            }
            let mut entries = Vec::with_capacity(d.len());
            for (k, v) in d.iter() {
                let key = k
                    .cast::<PyString>()
                    .map_err(|_| {
                        S::Error::custom(format!(
                            "a map key of the state is a {}, not a str",
                            type_name(&k)
                        ))
                    })?
                    .to_cow()
                    .map_err(|_| S::Error::custom("a map key of the state is not valid Unicode"))?
                    .into_owned();
                entries.push((key, v));
            }
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            let mut map = serializer.serialize_map(Some(entries.len()))?;
            for (k, v) in &entries {
                map.serialize_entry(k, &PyState { obj: v, depth })?;
            }
            return map.end();
        }
        if let Ok(l) = obj.cast::<PyList>() {
            if self.depth >= MAX_STATE_DEPTH {
                return Err(too_deep());
            }
            let mut seq = serializer.serialize_seq(Some(l.len()))?;
            for item in l.iter() {
                seq.serialize_element(&PyState { obj: &item, depth })?;
            }
            return seq.end();
        }
        if let Ok(t) = obj.cast::<PyTuple>() {
            if self.depth >= MAX_STATE_DEPTH {
                return Err(too_deep());
            }
            let mut seq = serializer.serialize_seq(Some(t.len()))?;
            for item in t.iter() {
                seq.serialize_element(&PyState { obj: &item, depth })?;
            }
            return seq.end();
        }
        if let Ok(b) = obj.cast::<PyBytes>() {
            return serializer.serialize_bytes(b.as_bytes());
        }
        if let Ok(b) = obj.cast::<PyByteArray>() {
            return serializer.serialize_bytes(&b.to_vec());
        }
        Err(S::Error::custom(format!(
            "a {} has no CBOR form (a state is None, bool, int, float, str, bytes, list, tuple or a dict with str keys)",
            type_name(obj)
        )))
    }
}

/// Why the fast decoder gave up: the state has no Python form, or uses
/// CBOR the fast path does not read (indefinite lengths), for the general
/// path to decide.
enum Fast {
    NoPythonForm(String),
    General,
}

/// The Python form of a verified state's bytes: the fast path for definite
/// lengths, else the general one.
pub(crate) fn to_py_fast<'py>(py: Python<'py>, cbor: &[u8]) -> Result<Bound<'py, PyAny>, String> {
    let mut pos = 0;
    match decode(py, cbor, &mut pos) {
        Ok(value) if pos == cbor.len() => Ok(value),
        Ok(_) | Err(Fast::General) => to_py(py, cbor),
        Err(Fast::NoPythonForm(why)) => Err(why),
    }
}

fn head(cbor: &[u8], pos: &mut usize) -> Result<(u8, u64), Fast> {
    let first = *cbor.get(*pos).ok_or(Fast::General)?;
    *pos += 1;
    let (major, info) = (first >> 5, first & 31);
    let len = match info {
        0..=23 => return Ok((major, u64::from(info))),
        24 => 1,
        25 => 2,
        26 => 4,
        27 => 8,
        _ => return Err(Fast::General),
    };
    let bytes = cbor.get(*pos..*pos + len).ok_or(Fast::General)?;
    *pos += len;
    Ok((
        major,
        bytes.iter().fold(0u64, |n, b| (n << 8) | u64::from(*b)),
    ))
}

fn take<'a>(cbor: &'a [u8], pos: &mut usize, len: u64) -> Result<&'a [u8], Fast> {
    let len = usize::try_from(len).map_err(|_| Fast::General)?;
    let end = pos.checked_add(len).ok_or(Fast::General)?;
    let bytes = cbor.get(*pos..end).ok_or(Fast::General)?;
    *pos = end;
    Ok(bytes)
}

fn half_to_f64(bits: u16) -> f64 {
    let sign = if bits & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = i32::from((bits >> 10) & 0x1f);
    let mant = f64::from(bits & 0x3ff);
    sign * match exp {
        0 => mant * 2f64.powi(-24),
        31 if mant == 0.0 => f64::INFINITY,
        31 => f64::NAN,
        _ => (1.0 + mant / 1024.0) * 2f64.powi(exp - 15),
    }
}

fn decode<'py>(py: Python<'py>, cbor: &[u8], pos: &mut usize) -> Result<Bound<'py, PyAny>, Fast> {
    let info = cbor.get(*pos).map_or(0, |b| b & 31);
    let (major, n) = head(cbor, pos)?;
    let py_err = |_| Fast::General;
    Ok(match major {
        0 => n.into_pyobject(py).map_err(|e| match e {})?.into_any(),
        1 => (-1 - i128::from(n))
            .into_pyobject(py)
            .map_err(|e| match e {})?
            .into_any(),
        2 => PyBytes::new(py, take(cbor, pos, n)?).into_any(),
        3 => {
            let text = std::str::from_utf8(take(cbor, pos, n)?).map_err(|_| Fast::General)?;
            PyString::new(py, text).into_any()
        }
        4 => {
            let list = PyList::empty(py);
            for _ in 0..n {
                list.append(decode(py, cbor, pos)?).map_err(py_err)?;
            }
            list.into_any()
        }
        5 => {
            let dict = PyDict::new(py);
            for _ in 0..n {
                let key = decode(py, cbor, pos)?;
                let Ok(key) = key.cast_into::<PyString>() else {
                    return Err(Fast::NoPythonForm("a map key is not a text string".into()));
                };
                if dict.contains(&key).map_err(py_err)? {
                    return Err(Fast::NoPythonForm(format!(
                        "the map key {key} appears twice"
                    )));
                }
                dict.set_item(key, decode(py, cbor, pos)?).map_err(py_err)?;
            }
            dict.into_any()
        }
        6 => {
            return Err(Fast::NoPythonForm(format!(
                "a CBOR tag ({n}) has no Python form"
            )));
        }
        _ => match info {
            20 => PyBool::new(py, false).to_owned().into_any(),
            21 => PyBool::new(py, true).to_owned().into_any(),
            22 => py.None().into_bound(py),
            // u16 and u32 by the head's length: these casts do not truncate.
            25 => PyFloat::new(py, half_to_f64(n as u16)).into_any(),
            26 => PyFloat::new(py, f64::from(f32::from_bits(n as u32))).into_any(),
            27 => PyFloat::new(py, f64::from_bits(n)).into_any(),
            _ => {
                return Err(Fast::NoPythonForm(
                    "a CBOR simple value other than false, true, null".into(),
                ));
            }
        },
    })
}
