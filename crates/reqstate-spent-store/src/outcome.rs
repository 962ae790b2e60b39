//! What a consume asks of a store ([`Spend`]), what the store answers
//! ([`Recorded`], [`StoreFailure`]), and how a consume ends ([`finish`]:
//! the state, a replay, or a token the store did not record, [`Unspent`]).

use std::fmt;
use std::sync::Arc;

use reqstate::{Redemption, SpentId, StoreError};

/// One single-use token to record: its record, how long an in-process store
/// keeps it, and what a shared store needs to compute its lifetime.
#[derive(Debug, Clone, Copy)]
pub struct Spend {
    /// The record.
    pub id: SpentId,
    /// `expires_at + leeway` of this verifier: the memory store's expiry.
    pub until: u64,
    /// The token's expiry (unix seconds).
    pub expires_at: u64,
}

impl Spend {
    /// The record a redemption asks for.
    pub fn of<T>(redemption: &Redemption<T>) -> Spend {
        Spend {
            id: redemption.spent_id(),
            until: redemption.record_until(),
            expires_at: redemption.expires_at(),
        }
    }
}

/// What a caller reads of a store failure beyond its reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreDetail {
    /// The reason's own message says it all: the token was not recorded.
    Plain,
    /// The token was not recorded, and why (a clock out of bounds, a store
    /// that could not be reached).
    NotRecorded(Arc<str>),
    /// The store answered with a refusal (out of memory, a replica's
    /// `READONLY`, an ACL): nothing was recorded. The text names the cause
    /// and says so; the reason's own message ("did not answer") would be
    /// false here, so it is not used.
    Refused(Arc<str>),
    /// The store's answer was lost after the record was sent (`cause`:
    /// what went wrong), and what a retry gets. The reason's own message
    /// ("the token was not recorded") would be false here, so it is not
    /// used.
    OutcomeUnknown {
        /// What went wrong (a timeout, a dropped connection).
        cause: Arc<str>,
        /// What a retry of the same consume gets.
        retry: RetryOffer,
    },
}

/// What a retry of a consume of unknown outcome gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryOffer {
    /// This sidecar remembers the attempt: its retry is accepted once,
    /// whether or not the attempt recorded the token.
    Remembered,
    /// This sidecar's memory of such attempts is full: a retry is accepted
    /// only if the attempt did not record the token.
    MemoryFull,
    /// A command-line run: the attempt ends with the process, so a later
    /// consume is accepted only if this one did not record the token.
    ProcessEnds,
}

impl StoreDetail {
    /// The message a person reads for a failure with this reason.
    pub fn message(&self, error: &StoreError) -> String {
        match self {
            StoreDetail::Plain => error.to_string(),
            StoreDetail::NotRecorded(why) => format!("{error}: {why}"),
            StoreDetail::Refused(why) => format!("{why}; the token was not accepted"),
            StoreDetail::OutcomeUnknown { cause, retry } => outcome_unknown_message(cause, *retry),
        }
    }
}

/// Why a store did not record a token (or may not have), with what the
/// caller should know beyond the reason.
#[derive(Debug, Clone)]
pub struct StoreFailure {
    /// The reason: full or unavailable.
    pub error: StoreError,
    /// What to tell the caller beyond the reason.
    pub why: StoreDetail,
}

impl StoreFailure {
    pub(crate) fn unavailable(why: impl Into<Arc<str>>) -> Self {
        StoreFailure {
            error: StoreError::Unavailable,
            why: StoreDetail::NotRecorded(why.into()),
        }
    }
}

impl From<StoreError> for StoreFailure {
    fn from(error: StoreError) -> Self {
        StoreFailure {
            error,
            why: StoreDetail::Plain,
        }
    }
}

/// The message of a consume whose record was sent but whose answer was
/// lost (`failure`: what went wrong), with what the caller can do.
fn outcome_unknown_message(failure: &str, retry: RetryOffer) -> String {
    let retry = match retry {
        RetryOffer::Remembered => {
            "Retry the same consume through this same sidecar: the retry is accepted once, \
             whether or not this attempt recorded the token"
        }
        RetryOffer::MemoryFull => {
            "Retry the same consume: the retry is accepted only if this attempt did not \
             record the token, and refused as replayed if it did (this sidecar already \
             remembers as many consumes of unknown outcome as it keeps)"
        }
        RetryOffer::ProcessEnds => {
            "Retry the same consume: a later run is accepted only if this one did not record \
             the token, and refused as replayed if it did (a run's attempt ends with it)"
        }
    };
    format!(
        "{failure}: the replay store's answer was lost, so the token may or may not be spent; \
         it was not accepted. {retry}"
    )
}

/// A store's answer for one token: `Ok(true)` if this call recorded it.
pub type Recorded = Result<bool, StoreFailure>;

/// Why a consume gave no state: the token was refused (a replay), or the
/// store did not record it (not the token's fault: the caller retries).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unspent {
    /// The token was refused: [`reqstate::Refusal::Replayed`].
    Refused(reqstate::Refusal),
    /// The store did not record the token (or its answer was lost), with
    /// what the caller should know beyond the reason (a clock out of
    /// bounds, an outcome that is unknown and how to retry).
    NotRecorded(StoreError, StoreDetail),
}

impl Unspent {
    /// The same failure, as a command-line run reports it: the attempt of a
    /// consume of unknown outcome ends with the process, so no retry finds
    /// it.
    pub fn for_one_run(self) -> Unspent {
        match self {
            Unspent::NotRecorded(error, StoreDetail::OutcomeUnknown { cause, .. }) => {
                Unspent::NotRecorded(
                    error,
                    StoreDetail::OutcomeUnknown {
                        cause,
                        retry: RetryOffer::ProcessEnds,
                    },
                )
            }
            other => other,
        }
    }

    /// The reason name (the wire's and the command line's).
    pub fn reason(&self) -> &'static str {
        match self {
            Unspent::Refused(refusal) => refusal.reason(),
            Unspent::NotRecorded(error, _) => error.reason(),
        }
    }
}

impl fmt::Display for Unspent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unspent::Refused(refusal) => refusal.fmt(f),
            Unspent::NotRecorded(error, why) => f.write_str(&why.message(error)),
        }
    }
}

/// The end of every consume, in the sidecar and on the command line: the
/// store's answer decides between the state, a replay, and a token the
/// store did not record.
pub fn finish<T>(
    redemption: Redemption<T>,
    recorded: Recorded,
) -> Result<reqstate::Verified<T>, Unspent> {
    match recorded {
        Ok(first) => redemption.finish(Ok(first)).map_err(|e| match e {
            reqstate::ConsumeError::Refused(refusal) => Unspent::Refused(refusal),
            reqstate::ConsumeError::Store(error) => Unspent::NotRecorded(error, StoreDetail::Plain),
        }),
        Err(StoreFailure { error, why }) => Err(Unspent::NotRecorded(error, why)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Security review round 4: a consume whose answer was lost says so in
    /// one message (not "not recorded" and "may have been recorded" at
    /// once), with what to do, and keeps its reason.
    #[test]
    fn an_outcome_unknown_consume_says_what_happened_and_what_to_do() {
        for retry in [
            RetryOffer::Remembered,
            RetryOffer::MemoryFull,
            RetryOffer::ProcessEnds,
        ] {
            let unspent = Unspent::NotRecorded(
                StoreError::Unavailable,
                StoreDetail::OutcomeUnknown {
                    cause: "the replay store did not answer within 250 ms".into(),
                    retry,
                },
            );
            assert_eq!(unspent.reason(), "replay_store_unavailable");
            let message = unspent.to_string();
            assert!(!message.contains("not recorded"), "{message}");
            for said in [
                "did not answer within 250 ms",
                "may or may not be spent",
                "not accepted",
                "Retry the same consume",
            ] {
                assert!(message.contains(said), "no {said:?} in {message}");
            }
            assert_eq!(
                message.contains("replayed"),
                retry != RetryOffer::Remembered,
                "{message}"
            );
            assert_eq!(
                message.contains("this same sidecar"),
                retry == RetryOffer::Remembered,
                "{message}"
            );
        }
        let remembered = Unspent::NotRecorded(
            StoreError::Unavailable,
            StoreDetail::OutcomeUnknown {
                cause: "x".into(),
                retry: RetryOffer::Remembered,
            },
        );
        assert!(
            remembered
                .for_one_run()
                .to_string()
                .contains("a run's attempt ends with it")
        );
        let plain = Unspent::NotRecorded(StoreError::Unavailable, StoreDetail::Plain);
        assert_eq!(plain.to_string(), StoreError::Unavailable.to_string());
    }
}
