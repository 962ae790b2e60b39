//! What the codec's calls return: `Minted`, `Verified`, `Sealed`,
//! `Unsealed` (frozen, read-only attributes), and their builders from the
//! core's results (`minted`, `verified`: a state decoded into Python, or
//! refused `state_decoding` when it has no Python form).

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};
use reqstate::Verified;

use crate::{errors, state};

/// A minted token.
#[pyclass(module = "reqstate._native", name = "Minted", frozen, get_all)]
pub(crate) struct PyMinted {
    /// The token (base64url, no padding).
    pub(crate) token: Py<PyString>,
    /// The key that minted it (the primary).
    pub(crate) key_id: u32,
    /// Issue time, unix seconds.
    pub(crate) issued_at: u64,
    /// Expiry, unix seconds.
    pub(crate) expires_at: u64,
}

#[pymethods]
impl PyMinted {
    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "Minted(token={:?}, key_id={}, issued_at={}, expires_at={})",
            self.token.bind(py).to_string(),
            self.key_id,
            self.issued_at,
            self.expires_at
        )
    }
}

/// A token that passed every check, its state decoded.
#[pyclass(module = "reqstate._native", name = "Verified", frozen, get_all)]
pub(crate) struct PyVerified {
    /// The step the token carries.
    pub(crate) step: Py<PyString>,
    /// The state: None, bool, int, float, str, bytes, list, dict.
    pub(crate) state: Py<PyAny>,
    /// The state's CBOR bytes, as the token carries them.
    pub(crate) state_cbor: Py<PyBytes>,
    /// The key that verified it.
    pub(crate) key_id: u32,
    /// Issue time, unix seconds.
    pub(crate) issued_at: u64,
    /// Expiry, unix seconds.
    pub(crate) expires_at: u64,
}

#[pymethods]
impl PyVerified {
    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "Verified(step={:?}, state={}, key_id={}, issued_at={}, expires_at={})",
            self.step.bind(py).to_string(),
            self.state
                .bind(py)
                .repr()
                .map(|r| r.to_string())
                .unwrap_or_default(),
            self.key_id,
            self.issued_at,
            self.expires_at
        )
    }
}

/// A sealed payload.
#[pyclass(module = "reqstate._native", name = "Sealed", frozen, get_all)]
pub(crate) struct PySealed {
    /// The token.
    pub(crate) token: Py<PyString>,
    /// The key that sealed it (the primary).
    pub(crate) key_id: u32,
}

#[pymethods]
impl PySealed {
    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "Sealed(token={:?}, key_id={})",
            self.token.bind(py).to_string(),
            self.key_id
        )
    }
}

/// An opened sealed payload.
#[pyclass(module = "reqstate._native", name = "Unsealed", frozen, get_all)]
pub(crate) struct PyUnsealed {
    /// The payload given to `seal`.
    pub(crate) payload: Py<PyBytes>,
    /// The key that opened it.
    pub(crate) key_id: u32,
}

#[pymethods]
impl PyUnsealed {
    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "Unsealed(payload=<{} bytes>, key_id={})",
            self.payload.bind(py).as_bytes().len(),
            self.key_id
        )
    }
}

pub(crate) fn minted(py: Python<'_>, m: reqstate::Minted) -> PyMinted {
    PyMinted {
        token: PyString::new(py, &m.token).unbind(),
        key_id: m.key_id.get(),
        issued_at: m.issued_at,
        expires_at: m.expires_at,
    }
}

/// A verified token with its state as bytes, decoded into Python (or
/// `state_decoding` when the state has no Python form).
pub(crate) fn verified(py: Python<'_>, v: Verified<Vec<u8>>, decode: bool) -> PyResult<PyVerified> {
    let state = if decode {
        state::to_py_fast(py, &v.state)
            .map_err(|why| errors::refused(py, &reqstate::Refusal::StateDecoding(why)))?
            .unbind()
    } else {
        py.None()
    };
    Ok(PyVerified {
        step: PyString::new(py, &v.step).unbind(),
        state,
        state_cbor: PyBytes::new(py, &v.state).unbind(),
        key_id: v.key_id.get(),
        issued_at: v.issued_at,
        expires_at: v.expires_at,
    })
}
