//! The command line's state forms (docs/CLI.md), for `python -m reqstate`
//! (`reqstate/_cli.py`): the JSON <-> CBOR mapping of the shared
//! `reqstate-cli-state` crate, so that the Python command line reads and
//! prints states exactly as the Rust binary does.

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::state;

/// docs/CLI.md `--state-json`: JSON text to the CBOR bytes minted. Raises
/// `ValueError` (a usage error) for text the command line refuses.
#[pyfunction]
pub(crate) fn _cli_state_from_json<'py>(
    py: Python<'py>,
    text: &str,
) -> PyResult<Bound<'py, PyBytes>> {
    let value = reqstate_cli_state::state_from_json(text)
        .map_err(pyo3::exceptions::PyValueError::new_err)?;
    let bytes = state::encode(&value).map_err(pyo3::exceptions::PyValueError::new_err)?;
    Ok(PyBytes::new(py, &bytes))
}

/// docs/CLI.md `--state-cbor-hex`: the CBOR bytes, checked. Raises
/// `ValueError` (a usage error) for bytes the command line refuses.
#[pyfunction]
pub(crate) fn _cli_check_state_cbor(cbor: &[u8]) -> PyResult<()> {
    state::from_cbor(cbor)
        .map(drop)
        .map_err(pyo3::exceptions::PyValueError::new_err)
}

/// docs/CLI.md `verify`'s `state`: the JSON text of a state's JSON form,
/// or None when it has none.
#[pyfunction]
pub(crate) fn _cli_state_json(cbor: &[u8]) -> Option<String> {
    let value: ciborium::Value = ciborium::from_reader(cbor).ok()?;
    reqstate_cli_state::state_to_json(&value).map(|j| j.to_string())
}

/// Lowercase hex of bytes.
#[pyfunction]
pub(crate) fn _hex(bytes: &[u8]) -> String {
    reqstate_cli_state::encode_hex(bytes)
}
