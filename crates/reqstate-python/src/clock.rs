//! The clock every codec of the package reads: the system clock, or the
//! `now=` given to the call running on this thread ([`at`]), put back when
//! the call returns or unwinds. Also the two test hooks that check it
//! (`_panic_under_clock_override`, `_clock_now`).

use std::cell::Cell;

use pyo3::prelude::*;
use reqstate::{Clock, SystemClock};

std::thread_local! {
    /// A clock reading given to this call (`now=`), else `None`.
    static CALL_NOW: Cell<Option<u64>> = const { Cell::new(None) };
}

/// The system clock, or the `now=` of the call running on this thread.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CallClock;

impl Clock for CallClock {
    fn now(&self) -> u64 {
        CALL_NOW
            .with(Cell::get)
            .unwrap_or_else(|| SystemClock.now())
    }
}

/// Runs `f` with the clock reading `now` (the system clock if `None`). The
/// reading in force before is restored when `f` returns or unwinds: a panic
/// in `f` (turned into a Python `PanicException` by PyO3) must not leave a
/// pinned clock behind for the next call on this thread.
pub(crate) fn at<R>(now: Option<u64>, f: impl FnOnce() -> R) -> R {
    /// Puts the previous reading back on drop, unwinding included.
    struct Restore(Option<u64>);
    impl Drop for Restore {
        fn drop(&mut self) {
            CALL_NOW.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(CALL_NOW.with(|c| c.replace(now)));
    f()
}

/// For tests only (tests/test_api.py): panics inside the clock override of
/// `now`, as a bug under a call's `now=` would. PyO3 raises the panic as
/// `pyo3_runtime.PanicException`; the next call on this thread must read
/// the system clock again, not `now`.
#[pyfunction]
pub(crate) fn _panic_under_clock_override(now: u64) {
    at(Some(now), || {
        panic!("a panic under the clock override (test)")
    })
}

/// For tests only: the clock reading a call would use on this thread
/// outside any `now=` (the system clock, unless an override leaked).
#[pyfunction]
pub(crate) fn _clock_now() -> u64 {
    CallClock.now()
}
