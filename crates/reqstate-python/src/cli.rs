//! The command line's state forms (docs/CLI.md), for `python -m reqstate`
//! (`reqstate/_cli.py`): the JSON <-> CBOR mapping of the shared
//! `reqstate-cli-state` crate, so that the Python command line reads and
//! prints states exactly as the Rust binary does.

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::{errors, state};

/// docs/CLI.md `--state-json`: JSON text to the CBOR bytes minted. Raises
/// `ValueError` (a usage error) for text the command line refuses.
#[pyfunction]
pub(crate) fn _cli_state_from_json<'py>(
    py: Python<'py>,
    text: &str,
) -> PyResult<Bound<'py, PyBytes>> {
    let value = reqstate_cli_state::state_from_json(text)
        .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))?;
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

/// The one JSON -> CBOR mapping of a state (docs/CLI.md, "JSON to CBOR:
/// the one mapping"), for a Python server that holds a JSON text: the CBOR
/// bytes the sidecar's `state_json` and `reqstate mint --state-json` embed
/// for it, to mint with `Codec.mint_cbor`. Raises `InvalidArgument` for a
/// text the mapping refuses (exit 64 on the command line) and `MintRefused`
/// with reason `state_encoding` for JSON nested deeper than 16 levels.
#[pyfunction]
pub(crate) fn state_cbor_from_json<'py>(
    py: Python<'py>,
    text: &str,
) -> PyResult<Bound<'py, PyBytes>> {
    let value = reqstate_cli_state::state_from_json(text)
        .map_err(|e| errors::invalid_argument(py, &format!("state JSON: {e}")))?;
    if value == reqstate_cli_state::too_deep_state() {
        return Err(errors::error(
            py,
            errors::Kind::Mint,
            "state_encoding",
            "the state is nested deeper than 16 levels",
        ));
    }
    let bytes = state::encode(&value).map_err(|e| errors::invalid_argument(py, &e))?;
    Ok(PyBytes::new(py, &bytes))
}

/// The JSON form of a state's CBOR bytes (docs/CLI.md, "state"), as
/// `reqstate verify` and the sidecar print it, or None when it has none.
/// Raises `InvalidArgument` for bytes that are not one CBOR item.
#[pyfunction]
pub(crate) fn state_json_from_cbor(
    py: Python<'_>,
    cbor: &Bound<'_, PyAny>,
) -> PyResult<Option<String>> {
    let cbor = crate::binding::bytes_param(cbor, "cbor")?;
    let mut rest = &cbor[..];
    let value: ciborium::Value = ciborium::from_reader(&mut rest)
        .map_err(|e| errors::invalid_argument(py, &format!("not one CBOR item: {e}")))?;
    if !rest.is_empty() {
        return Err(errors::invalid_argument(
            py,
            "bytes follow the first CBOR item",
        ));
    }
    Ok(reqstate_cli_state::state_to_json_text(&value))
}

/// Lowercase hex of bytes.
#[pyfunction]
pub(crate) fn _hex(bytes: &[u8]) -> String {
    reqstate_cli_state::encode_hex(bytes)
}
