//! How a store reports what it did: every call's duration and answers, and
//! every reading of a shared store's clock. The sidecar's metrics implement
//! [`StoreObserver`]; the command line, which has no metrics, passes
//! [`Unobserved`].

use std::time::Duration;

use crate::outcome::Recorded;

/// Told of every store call and clock reading, on the calling task: keep it
/// cheap (a counter, a histogram), never blocking.
pub trait StoreObserver: Send + Sync {
    /// One store call (one token, or one pipelined batch) took `took` and
    /// answered `answers`, one per token, in order.
    fn consumed(&self, took: Duration, answers: &[Recorded]);

    /// A shared store's clock was read: this clock minus the store's is
    /// `skew_ms`, and consumes are refused beyond `max_skew`.
    fn clock_read(&self, skew_ms: i64, max_skew: Duration);
}

/// An observer that records nothing: for a store whose figures no one
/// reads (a command-line run, a test).
#[derive(Debug, Clone, Copy, Default)]
pub struct Unobserved;

impl StoreObserver for Unobserved {
    fn consumed(&self, _took: Duration, _answers: &[Recorded]) {}

    fn clock_read(&self, _skew_ms: i64, _max_skew: Duration) {}
}
