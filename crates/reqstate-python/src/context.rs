//! The call context (FORMAT.md §7, RFC 8785): `call_context` and
//! `canonical_json`, the core's own functions.

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::errors;

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
    arguments_json: &str,
) -> PyResult<Bound<'py, PyBytes>> {
    let context = reqstate::call_context(principal, audience, method, arguments_json)
        .map_err(|e| errors::invalid_argument(py, &e.to_string()))?;
    Ok(PyBytes::new(py, context.as_bytes()))
}

/// The JCS (RFC 8785) text of one JSON value given as text.
#[pyfunction]
pub(crate) fn canonical_json(py: Python<'_>, arguments_json: &str) -> PyResult<String> {
    reqstate::canonical_json(arguments_json)
        .map_err(|e| errors::invalid_argument(py, &e.to_string()))
}
