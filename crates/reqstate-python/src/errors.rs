//! Every core error as a Python exception whose `reason` is the core's
//! reason name (`reqstate::Error::reason()`, the proto's and docs/CLI.md's).
//!
//! The exception classes are defined in Python (`reqstate/_errors.py`, so
//! that they are ordinary, picklable exceptions with typed attributes) and
//! raised from here with `(reason, message)`. Messages come from the core's
//! `Display`, which never contains key material.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;

/// Which Python class an error is raised as.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Kind {
    /// `TokenRefused`: a token was refused (verify, unseal, consume).
    Refused,
    /// `MintRefused`: the core made no token (mint, seal).
    Mint,
    /// `InvalidArgument`: the caller's mistake (also a `ValueError`).
    InvalidArgument,
    /// `KeyringError`: a keyring (text or file) was refused.
    Keyring,
}

impl Kind {
    fn class_name(self) -> &'static str {
        match self {
            Kind::Refused => "TokenRefused",
            Kind::Mint => "MintRefused",
            Kind::InvalidArgument => "InvalidArgument",
            Kind::Keyring => "KeyringError",
        }
    }
}

static CLASSES: PyOnceLock<[Py<PyType>; 4]> = PyOnceLock::new();

fn class(py: Python<'_>, kind: Kind) -> PyResult<&Bound<'_, PyType>> {
    let classes = CLASSES.get_or_try_init(py, || -> PyResult<_> {
        let module = py.import("reqstate._errors")?;
        let get = |name: &str| -> PyResult<Py<PyType>> {
            Ok(module.getattr(name)?.cast_into::<PyType>()?.unbind())
        };
        Ok([
            get(Kind::Refused.class_name())?,
            get(Kind::Mint.class_name())?,
            get(Kind::InvalidArgument.class_name())?,
            get(Kind::Keyring.class_name())?,
        ])
    })?;
    Ok(classes[kind as usize].bind(py))
}

/// The exception instance (not raised): what the batch calls put in their
/// result lists.
pub(crate) fn instance<'py>(
    py: Python<'py>,
    kind: Kind,
    reason: &str,
    message: &str,
) -> PyResult<Bound<'py, PyAny>> {
    class(py, kind)?.call1((reason, message))
}

/// The exception as a `PyErr`, to return.
pub(crate) fn error(py: Python<'_>, kind: Kind, reason: &str, message: &str) -> PyErr {
    match instance(py, kind, reason, message) {
        Ok(exception) => PyErr::from_value(exception),
        Err(e) => e,
    }
}

/// A refused token.
pub(crate) fn refused(py: Python<'_>, e: &reqstate::Refusal) -> PyErr {
    error(py, Kind::Refused, e.reason(), &e.to_string())
}

/// A consume that gave no state: a refused token, or a store that could not
/// record it. Python keeps one exception for both (`TokenRefused`, told
/// apart by `reason`: `replay_store_full` and `replay_store_unavailable` are
/// the server's failures, to be retried), as it always had.
pub(crate) fn consume(py: Python<'_>, e: &reqstate::ConsumeError) -> PyErr {
    match e {
        reqstate::ConsumeError::Refused(refusal) => refused(py, refusal),
        reqstate::ConsumeError::Store(store) => {
            error(py, Kind::Refused, store.reason(), &store.to_string())
        }
    }
}

/// A mint or seal the core refused. An argument error is raised as
/// `InvalidArgument` (a `MintRefused` is not a `ValueError`), with the same
/// reason name.
pub(crate) fn mint(py: Python<'_>, e: &reqstate::MintError) -> PyErr {
    let kind = match e {
        reqstate::MintError::InvalidArgument(_) => Kind::InvalidArgument,
        _ => Kind::Mint,
    };
    error(py, kind, e.reason(), &e.to_string())
}

/// An argument out of range.
pub(crate) fn invalid_argument(py: Python<'_>, message: &str) -> PyErr {
    error(py, Kind::InvalidArgument, "invalid_argument", message)
}

/// A keyring that was refused (its text, or its file).
pub(crate) fn keyring(py: Python<'_>, message: &str) -> PyErr {
    error(py, Kind::Keyring, "invalid_keyring", message)
}

/// Any core error, by its kind.
pub(crate) fn any(py: Python<'_>, e: &reqstate::Error) -> PyErr {
    match e {
        reqstate::Error::Refused(r) => refused(py, r),
        reqstate::Error::Mint(m) => mint(py, m),
        reqstate::Error::InvalidArgument(a) => invalid_argument(py, &a.to_string()),
        reqstate::Error::InvalidKeyring(k) => keyring(py, &k.to_string()),
        other => error(py, Kind::Mint, other.reason(), &other.to_string()),
    }
}

/// The reasons a replay store reports itself (FORMAT.md §8 step 15).
const STORE_REASONS: [&str; 3] = ["replayed", "replay_store_full", "replay_store_unavailable"];

/// What a Python replay store's exception becomes: its own `TokenRefused`
/// for a store reason, as is (its message says why); any other `Exception`
/// a `TokenRefused` `replay_store_unavailable` whose `__cause__` it is (the
/// token is never accepted unrecorded); a `BaseException` that is not an
/// `Exception` (`KeyboardInterrupt`) unchanged.
pub(crate) fn store_failure(py: Python<'_>, e: PyErr) -> PyErr {
    let refused = class(py, Kind::Refused)
        .map(|c| e.is_instance(py, c))
        .unwrap_or(false);
    if refused {
        let reason = e
            .value(py)
            .getattr("reason")
            .and_then(|r| r.extract::<String>());
        if reason.is_ok_and(|r| STORE_REASONS.contains(&r.as_str())) {
            return e;
        }
    }
    if !e.is_instance_of::<pyo3::exceptions::PyException>(py) {
        return e;
    }
    let shown = e
        .value(py)
        .repr()
        .map(|r| r.to_string())
        .unwrap_or_else(|_| "an exception".into());
    let wrapped = error(
        py,
        Kind::Refused,
        "replay_store_unavailable",
        &format!("the replay store failed ({shown}): the token is refused unrecorded"),
    );
    wrapped.set_cause(py, Some(e));
    wrapped
}
