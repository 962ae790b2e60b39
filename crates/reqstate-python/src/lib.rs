//! `reqstate._native`: the reqstate core crate in-process for Python.
//!
//! The Python package `reqstate` (crates/reqstate-python/python/reqstate)
//! re-exports what is here and adds the pure-Python parts (exceptions, the
//! `mcp` codec, the Redis store, the command line). Nothing here panics
//! across the FFI: every core error becomes a Python exception whose
//! `reason` is the core's reason name (`errors`).
//!
//! One module per Python class or tight group of them:
//!
//! - `keyring`: `Keyring`, `KeyInfo`, and the one live keyring every
//!   `Codec` reads (a file checked as the sidecar checks it, by the shared
//!   `reqstate-keyring-file` crate, reloaded on request or on use).
//! - `codec`: `Codec`: mint, verify, seal, unseal, consume under a keyring
//!   and a policy; batch calls release the GIL.
//! - `binding`: `Binding`, and the argument readers the classes share.
//! - `results`: `Minted`, `Verified`, `Sealed`, `Unsealed`.
//! - `single_use`: `MemoryReplayStore`, `SpentRecord`, stores written in
//!   Python, and a redemption's state decoded before it is recorded.
//! - `context`: `call_context`, `canonical_json` of parsed values and their
//!   `_from_text` forms of JSON text (FORMAT.md §7, RFC 8785).
//! - `clock`: the system clock or the call's `now=`.
//! - `cli`: the command line's state forms (docs/CLI.md), and the one JSON
//!   -> CBOR mapping of a state for servers that hold JSON text
//!   (`state_cbor_from_json`, `state_json_from_cbor`).
//! - `state`: states between Python and CBOR; `errors`: the exceptions.
//!
//! Randomness: the core's default, `BufferedRandom` (as `Codec::new`): no
//! pool logic of its own here, so nothing that a clone of the process
//! keeping its pid could repeat (`keyring::new_codec`).

use pyo3::prelude::*;

mod binding;
mod cli;
mod clock;
mod codec;
mod context;
mod errors;
mod keyring;
mod results;
mod single_use;
mod state;

/// The reason names of every core error (`reqstate::Error::reason()`).
fn reasons() -> Vec<&'static str> {
    let mut all: Vec<&'static str> = reqstate::Refusal::REASONS.to_vec();
    all.extend(reqstate::StoreError::REASONS);
    for extra in [
        "state_encoding",
        "invalid_argument",
        "randomness_unavailable",
        "invalid_keyring",
    ] {
        if !all.contains(&extra) {
            all.push(extra);
        }
    }
    all
}

/// The native module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<keyring::PyKeyring>()?;
    m.add_class::<keyring::PyKeyInfo>()?;
    m.add_class::<binding::PyBinding>()?;
    m.add_class::<codec::PyCodec>()?;
    m.add_class::<results::PyMinted>()?;
    m.add_class::<results::PyVerified>()?;
    m.add_class::<results::PySealed>()?;
    m.add_class::<results::PyUnsealed>()?;
    m.add_class::<single_use::PyReplayStore>()?;
    m.add_class::<single_use::PySpentRecord>()?;
    m.add_function(wrap_pyfunction!(context::call_context, m)?)?;
    m.add_function(wrap_pyfunction!(context::canonical_json, m)?)?;
    m.add_function(wrap_pyfunction!(context::call_context_from_text, m)?)?;
    m.add_function(wrap_pyfunction!(context::canonical_json_from_text, m)?)?;
    m.add_function(wrap_pyfunction!(cli::_cli_state_from_json, m)?)?;
    m.add_function(wrap_pyfunction!(cli::_cli_check_state_cbor, m)?)?;
    m.add_function(wrap_pyfunction!(cli::_cli_state_json, m)?)?;
    m.add_function(wrap_pyfunction!(cli::_hex, m)?)?;
    m.add_function(wrap_pyfunction!(cli::state_cbor_from_json, m)?)?;
    m.add_function(wrap_pyfunction!(cli::state_json_from_cbor, m)?)?;
    m.add_function(wrap_pyfunction!(clock::_panic_under_clock_override, m)?)?;
    m.add_function(wrap_pyfunction!(clock::_clock_now, m)?)?;
    m.add("REASONS", reasons())?;
    m.add("CALL_CONTEXT_LEN", reqstate::CALL_CONTEXT_LEN)?;
    m.add("MAX_ARGUMENTS_DEPTH", reqstate::MAX_ARGUMENTS_DEPTH)?;
    m.add("MAX_STATE_DEPTH", reqstate::MAX_STATE_DEPTH)?;
    m.add("VERSION", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
