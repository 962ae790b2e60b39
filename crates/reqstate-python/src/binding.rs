//! `Binding` (`PyBinding`): what a state token is bound to but does not
//! carry, checked once when built; and the argument readers the classes
//! share (`text_arg`: a `str`, refused `invalid_argument` otherwise;
//! `bytes_param`: `bytes` or `bytearray`, anything else, a `str` included,
//! a `TypeError` naming the parameter and the type given).

use std::borrow::Cow;

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyString};
use reqstate::Binding;

use crate::errors;

/// What a state token is bound to but does not carry: the tool and the
/// caller's context bytes (usually `call_context(...)`). Checked once.
#[pyclass(module = "reqstate._native", name = "Binding", frozen)]
pub(crate) struct PyBinding {
    tool: String,
    context: Vec<u8>,
}

#[pymethods]
impl PyBinding {
    /// `tool`: 1 to 256 bytes of UTF-8; `context`: `bytes` or `bytearray`,
    /// at most 65536 bytes (empty or `None` binds to no context). A `str`
    /// context is a `TypeError`: encode it (or use `call_context`).
    #[new]
    #[pyo3(signature = (tool, context = None))]
    fn new(
        py: Python<'_>,
        tool: &Bound<'_, PyAny>,
        context: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let tool = text_arg(py, tool, "tool")?;
        let context = match context {
            None => Vec::new(),
            Some(c) => bytes_param(c, "context")?.into_owned(),
        };
        Binding::with_context_bytes(&tool, &context)
            .map_err(|e| errors::invalid_argument(py, &e.to_string()))?;
        Ok(PyBinding { tool, context })
    }

    /// The binding of one MCP call in one native call: the tool, and the
    /// call context of the principal, audience, method and arguments (the
    /// parsed value: a `str` is a JSON string), as `Binding(tool, call_context(principal,
    /// audience, method, arguments))` builds it, without the context's
    /// `bytes` in between. Raises `InvalidArgument` as both do.
    #[staticmethod]
    fn for_call(
        py: Python<'_>,
        tool: &Bound<'_, PyAny>,
        principal: &str,
        audience: &str,
        method: &str,
        arguments: &Bound<'_, PyAny>,
    ) -> PyResult<Self> {
        let tool = text_arg(py, tool, "tool")?;
        let context = crate::context::context_of(py, principal, audience, method, arguments)?;
        Binding::with_context_bytes(&tool, context.as_bytes())
            .map_err(|e| errors::invalid_argument(py, &e.to_string()))?;
        Ok(PyBinding {
            tool,
            context: context.as_bytes().to_vec(),
        })
    }

    /// The tool name.
    #[getter]
    fn tool(&self) -> &str {
        &self.tool
    }

    /// The context bytes.
    #[getter]
    fn context<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.context)
    }

    fn __repr__(&self) -> String {
        format!(
            "Binding(tool={:?}, context=<{} bytes>)",
            self.tool,
            self.context.len()
        )
    }
}

impl PyBinding {
    /// The core's binding (checked once already, when this was built).
    pub(crate) fn binding(&self, py: Python<'_>) -> PyResult<Binding<'_>> {
        Binding::with_context_bytes(&self.tool, &self.context)
            .map_err(|e| errors::invalid_argument(py, &e.to_string()))
    }
}

/// A `str` argument called `name`, or `invalid_argument`.
pub(crate) fn text_arg(py: Python<'_>, value: &Bound<'_, PyAny>, name: &str) -> PyResult<String> {
    let s = value
        .cast::<PyString>()
        .map_err(|_| errors::invalid_argument(py, &format!("{name} must be a str")))?;
    s.to_cow()
        .map(|s| s.into_owned())
        .map_err(|_| errors::invalid_argument(py, &format!("{name} is not valid Unicode")))
}

/// A bytes parameter called `name`: `bytes` (borrowed) or `bytearray`
/// (copied). Anything else, a `str` above all (which text? which
/// encoding?), is a `TypeError` that names the parameter and the type
/// given, as Python's own functions say it.
pub(crate) fn bytes_param<'a>(value: &'a Bound<'_, PyAny>, name: &str) -> PyResult<Cow<'a, [u8]>> {
    if let Ok(b) = value.cast::<PyBytes>() {
        return Ok(Cow::Borrowed(b.as_bytes()));
    }
    if let Ok(b) = value.cast::<PyByteArray>() {
        return Ok(Cow::Owned(b.to_vec()));
    }
    let hint = if value.is_instance_of::<PyString>() {
        " (encode the text first, e.g. text.encode())"
    } else {
        ""
    };
    Err(PyTypeError::new_err(format!(
        "{name} must be bytes or bytearray, not {}{hint}",
        crate::state::type_name(value)
    )))
}
