//! The attempts of unknown outcome, remembered so that a retry of the same
//! consume through this process is accepted once if the lost call recorded
//! the token.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Attempts of unknown outcome remembered at most (see [`Pending`]).
const MAX_PENDING: usize = 10_000;

/// Attempts whose outcome is unknown: a `SET` that timed out or whose
/// connection failed may still have been recorded. Its record name and
/// attempt id stay here until the record's lifetime ends, so that the
/// caller's retry through this sidecar sends the same attempt id and is
/// accepted if Redis holds exactly that (the earlier call recorded it, and
/// its caller was refused: no one was accepted yet). A retry takes the entry
/// out first, so concurrent retries cannot both be accepted. Bounded: beyond
/// [`MAX_PENDING`] an attempt is not remembered, and its retry is refused
/// as a replay if the earlier call did record it (the safe side).
#[derive(Debug, Default)]
pub(crate) struct Pending {
    attempts: Mutex<HashMap<String, ([u8; 16], Instant)>>,
}

impl Pending {
    pub(crate) fn take(&self, name: &str) -> Option<[u8; 16]> {
        let mut attempts = self.attempts.lock().unwrap_or_else(|p| p.into_inner());
        match attempts.remove(name) {
            Some((attempt, until)) if until > Instant::now() => Some(attempt),
            _ => None,
        }
    }

    /// Remembers an attempt whose outcome is unknown; false when the memory
    /// is full and it was not remembered.
    pub(crate) fn remember(&self, name: String, attempt: [u8; 16], lifetime: Duration) -> bool {
        let mut attempts = self.attempts.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        if attempts.len() >= MAX_PENDING {
            attempts.retain(|_, (_, until)| *until > now);
        }
        if attempts.len() < MAX_PENDING {
            attempts.insert(name, (attempt, now + lifetime));
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pending_attempt_is_taken_once() {
        let pending = Pending::default();
        assert!(pending.remember("n".into(), [7; 16], Duration::from_secs(60)));
        assert_eq!(pending.take("n"), Some([7; 16]));
        assert_eq!(pending.take("n"), None, "taken twice");
        pending.remember("old".into(), [1; 16], Duration::ZERO);
        assert_eq!(pending.take("old"), None, "an expired attempt was reused");
    }
}
