//! Single-use tokens (FORMAT.md §5.1, §8 steps 14 and 15): the in-process
//! `MemoryReplayStore` (`PyReplayStore`), the `SpentRecord` handed to a
//! replay store written in Python, how such a store is asked
//! (`ask_store`), and the state of a redemption decoded before the token
//! is recorded (`decode_redemption`, `decoded`).

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};
use reqstate::{MemoryReplayStore, Verified};

use crate::errors::{self, Kind};
use crate::results::PyVerified;
use crate::state;

/// A single-use token's state, decoded (step 14) before the token is
/// recorded (step 15): the Python value (`None` when not asked for), and
/// the bytes as carried.
pub(crate) type DecodedState = (Option<Py<PyAny>>, Vec<u8>);

/// Decodes the state of a redemption that is not recorded yet (FORMAT.md §8
/// step 14 before step 15): a state with no Python form is refused
/// `state_decoding`, and the redemption, never recorded, is dropped.
pub(crate) fn decode_redemption(
    py: Python<'_>,
    redemption: reqstate::Redemption<Vec<u8>>,
    decode: bool,
) -> Result<reqstate::Redemption<DecodedState>, reqstate::Refusal> {
    redemption.try_map_state(|cbor| {
        let value = if decode {
            let value = state::to_py_fast(py, &cbor).map_err(reqstate::Refusal::StateDecoding)?;
            Some(value.unbind())
        } else {
            None
        };
        Ok((value, cbor))
    })
}

/// The `Verified` of a recorded single-use token, its state decoded before.
pub(crate) fn decoded(py: Python<'_>, v: Verified<DecodedState>) -> PyVerified {
    let (value, cbor) = v.state;
    PyVerified {
        step: PyString::new(py, &v.step).unbind(),
        state: value.unwrap_or_else(|| py.None()),
        state_cbor: PyBytes::new(py, &cbor).unbind(),
        key_id: v.key_id.get(),
        issued_at: v.issued_at,
        expires_at: v.expires_at,
    }
}

/// A spent-token record for single-use tokens, in this process's memory
/// (the core's `MemoryReplayStore`): single use within one process only.
/// A fleet, or a pre-forked server, needs the sidecar's shared store.
#[pyclass(module = "reqstate._native", name = "MemoryReplayStore", frozen)]
pub(crate) struct PyReplayStore {
    pub(crate) store: Arc<MemoryReplayStore>,
}

#[pymethods]
impl PyReplayStore {
    /// A store of at most `capacity` live records (refusing, `replay_store_full`, beyond).
    #[new]
    #[pyo3(signature = (capacity = 100_000))]
    fn new(py: Python<'_>, capacity: usize) -> PyResult<Self> {
        if capacity == 0 {
            return Err(errors::invalid_argument(py, "capacity must be at least 1"));
        }
        Ok(PyReplayStore {
            store: Arc::new(MemoryReplayStore::new(capacity)),
        })
    }

    fn __len__(&self) -> usize {
        self.store.len()
    }
}

/// One single-use token to record as spent (FORMAT.md §5.1, §8 step 15),
/// as `Codec.consume` hands it to a replay store written in Python
/// (`insert_if_absent(record)`). It names the record, never the token.
#[pyclass(module = "reqstate._native", name = "SpentRecord", frozen, get_all)]
pub(crate) struct PySpentRecord {
    /// The record's name after a shared store's prefix:
    /// `spent:v1:<key id in decimal>:<token id in lowercase hex>`.
    name: String,
    /// The key the token was minted under.
    key_id: u32,
    /// The token's 16 random bytes of id.
    token_id: Py<PyBytes>,
    /// The token's expiry, unix seconds.
    expires_at: u64,
    /// The verifier's clock reading used for this verification, unix
    /// seconds (the call's `now=`, or the system clock).
    now: u64,
    /// This verifier's `clock_leeway`, seconds.
    clock_leeway: u64,
    /// `expires_at + clock_leeway` (saturating): until when a store used by
    /// this verifier alone must keep the record. A store shared by
    /// verifiers with other clocks and leeways keeps it longer (the rule of
    /// `reqstate.redis.record_lifetime_ms`).
    record_until: u64,
}

#[pymethods]
impl PySpentRecord {
    fn __repr__(&self) -> String {
        format!(
            "SpentRecord(name={:?}, expires_at={}, now={}, clock_leeway={})",
            self.name, self.expires_at, self.now, self.clock_leeway
        )
    }
}

/// The record a redemption asks for, under a codec whose leeway is `leeway`.
pub(crate) fn spent_record<T>(
    py: Python<'_>,
    redemption: &reqstate::Redemption<T>,
    leeway: u64,
) -> PySpentRecord {
    let spent = redemption.spent_id();
    PySpentRecord {
        name: spent.record_name(),
        key_id: spent.key_id().get(),
        token_id: PyBytes::new(py, spent.token_id()).unbind(),
        expires_at: redemption.expires_at(),
        now: redemption.now(),
        clock_leeway: leeway,
        record_until: redemption.record_until(),
    }
}

/// Step 15 through a store written in Python: `store.insert_if_absent(record)`.
/// Its `TokenRefused` for a store reason is raised as is; any other
/// exception is refused `replay_store_unavailable`, with it as the cause.
pub(crate) fn ask_store(
    py: Python<'_>,
    store: &Bound<'_, PyAny>,
    record: PySpentRecord,
) -> PyResult<bool> {
    let answer = store
        .call_method1(pyo3::intern!(py, "insert_if_absent"), (record,))
        .map_err(|e| errors::store_failure(py, e))?;
    match answer.cast::<pyo3::types::PyBool>() {
        Ok(recorded) => Ok(recorded.is_true()),
        Err(_) => Err(errors::error(
            py,
            Kind::Refused,
            "replay_store_unavailable",
            &format!(
                "the replay store's insert_if_absent answered a {}, not a bool: the token \
                 is refused unrecorded",
                answer
                    .get_type()
                    .name()
                    .map(|n| n.to_string())
                    .unwrap_or_else(|_| "value".into())
            ),
        )),
    }
}
