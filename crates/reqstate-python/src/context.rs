//! The call context (FORMAT.md §7, RFC 8785): `call_context` and
//! `canonical_json`, the core's own functions. The Python package wraps
//! them (`reqstate.call_context` also takes parsed arguments), and the
//! sidecar client `reqstate_client` uses them too, so that every Python
//! caller binds tokens exactly as the core does.
//!
//! A refusal is `InvalidArgument` (reason `invalid_argument`) whose `rule`
//! names the rule the arguments broke: `not_json`, `duplicate_key`,
//! `inexact_number`, `lone_surrogate` or `too_deep`, the names of
//! tests/vectors/call_context.json.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};

use crate::errors;

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

/// The arguments' JSON text. A Python `str` holding a lone surrogate has
/// no UTF-8 form: the `lone_surrogate` rule, as for an escaped one.
fn arguments_text(py: Python<'_>, arguments_json: &Bound<'_, PyString>) -> PyResult<String> {
    arguments_json
        .to_cow()
        .map(|s| s.into_owned())
        .map_err(|_| {
            refused(
                py,
                "invalid argument: arguments have a string with a lone surrogate",
                Some("lone_surrogate"),
            )
        })
}

/// The call context of one MCP call (FORMAT.md §7, RFC 8785): 32 bytes to
/// bind a token to the principal, the audience (this server), the method
/// and the exact arguments (their JSON text). Raises `InvalidArgument` for
/// arguments JCS cannot represent exactly.
#[pyfunction]
pub(crate) fn call_context<'py>(
    py: Python<'py>,
    principal: &str,
    audience: &str,
    method: &str,
    arguments_json: &Bound<'py, PyString>,
) -> PyResult<Bound<'py, PyBytes>> {
    let text = arguments_text(py, arguments_json)?;
    let context = reqstate::call_context(&reqstate::Call {
        principal,
        audience,
        method,
        arguments: reqstate::Arguments::Json(&text),
    })
    .map_err(|e| refused(py, &e.to_string(), rule(&e)))?;
    Ok(PyBytes::new(py, context.as_bytes()))
}

/// The JCS (RFC 8785) text of one JSON value given as text. Raises
/// `InvalidArgument` for text that is not one JSON value or that JCS cannot
/// represent exactly.
#[pyfunction]
pub(crate) fn canonical_json(
    py: Python<'_>,
    arguments_json: &Bound<'_, PyString>,
) -> PyResult<String> {
    let text = arguments_text(py, arguments_json)?;
    reqstate::canonical_json(&text).map_err(|e| refused(py, &e.to_string(), rule(&e)))
}
