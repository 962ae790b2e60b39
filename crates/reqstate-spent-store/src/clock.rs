//! The clock guard: this process's clock against a shared store's (Redis
//! `TIME`). A record's lifetime is relative, so it outlives every verifier's
//! acceptance of its token only while their clocks agree with the store's;
//! consumes are refused while they do not.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::observer::StoreObserver;
use crate::outcome::{StoreDetail, StoreFailure};
use crate::redis::{Connection, failure_text, store_error};
use crate::{SpentStore, wall_ms};

/// How often the clock guard reads Redis `TIME`.
pub const CLOCK_CHECK_PERIOD: Duration = Duration::from_secs(10);
/// A reading older than this is taken again before a consume is answered.
const CLOCK_READING_MAX_AGE: Duration = Duration::from_secs(30);
/// A wall-clock step larger than this since the last reading (seen as a
/// change of wall time minus monotonic time) makes the guard read again.
const CLOCK_STEP_MS: i128 = 100;

/// This sidecar's clock against the store's (Redis `TIME`), kept as the
/// last reading: consumes are refused while the difference, plus the
/// reading's own uncertainty, exceeds `max_skew`.
#[derive(Debug)]
pub(crate) struct ClockGuard {
    pub(crate) max_skew: Duration,
    reading: Mutex<Option<ClockReading>>,
    /// The monotonic origin that wall-clock steps are measured against.
    origin: Instant,
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct ClockReading {
    /// This clock minus the store's, in ms (positive: this one is ahead).
    skew_ms: i64,
    /// Half the round trip of the reading, in ms.
    uncertainty_ms: i64,
    /// When it was taken.
    at: Instant,
    /// Wall time minus monotonic time then, in ms: a step of the wall clock
    /// since changes it.
    wall_minus_monotonic_ms: i128,
}

impl ClockGuard {
    pub(crate) fn new(max_skew: Duration) -> Self {
        ClockGuard {
            max_skew,
            reading: Mutex::new(None),
            origin: Instant::now(),
        }
    }

    fn wall_minus_monotonic_ms(&self) -> i128 {
        wall_ms() - self.origin.elapsed().as_millis() as i128
    }

    pub(crate) fn last(&self) -> Option<ClockReading> {
        *self.reading.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether the last reading may be used for a consume now.
    pub(crate) fn fresh(&self) -> Option<ClockReading> {
        let reading = self.last()?;
        let stepped = (self.wall_minus_monotonic_ms() - reading.wall_minus_monotonic_ms).abs()
            > CLOCK_STEP_MS;
        (reading.at.elapsed() <= CLOCK_READING_MAX_AGE && !stepped).then_some(reading)
    }

    /// Takes a reading from `TIME`'s answer, given the wall clock before the
    /// call was sent and after its answer; logs a change of verdict.
    pub(crate) fn record(
        &self,
        sent_ms: i128,
        answered_ms: i128,
        store_ms: i128,
        observer: &dyn StoreObserver,
    ) {
        let middle = (sent_ms + answered_ms) / 2;
        let reading = ClockReading {
            skew_ms: (middle - store_ms).clamp(i64::MIN as i128, i64::MAX as i128) as i64,
            uncertainty_ms: ((answered_ms - sent_ms).max(0) / 2 + 1) as i64,
            at: Instant::now(),
            wall_minus_monotonic_ms: self.wall_minus_monotonic_ms(),
        };
        let previous = self
            .reading
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .replace(reading);
        observer.clock_read(reading.skew_ms, self.max_skew);
        let was_within = previous.is_none_or(|p| self.verdict(&p).is_ok());
        match self.verdict(&reading) {
            Err(why) if was_within => tracing::error!(
                skew_ms = reading.skew_ms,
                max_skew_ms = self.max_skew.as_millis() as u64,
                "{why}"
            ),
            Ok(()) if !was_within => tracing::info!(
                skew_ms = reading.skew_ms,
                "the clocks agree again with the replay store's: consumes are accepted"
            ),
            _ => {}
        }
    }

    /// Whether a reading allows consumes, and why not.
    pub(crate) fn verdict(&self, reading: &ClockReading) -> Result<(), String> {
        let max = self.max_skew.as_millis() as i64;
        let off = reading.skew_ms.saturating_abs();
        if off.saturating_add(reading.uncertainty_ms) <= max {
            return Ok(());
        }
        let direction = if reading.skew_ms > 0 {
            "ahead of"
        } else {
            "behind"
        };
        Err(format!(
            "the clock here is {off} ms (± {} ms) {direction} the replay store's (Redis TIME), \
             more than the {max} ms allowed (--replay-max-skew-ms): consumes are refused until \
             the clocks agree, since a spent-token record could expire while a verifier still \
             accepts its token",
            reading.uncertainty_ms
        ))
    }
}

impl SpentStore {
    /// Reads the store's clock (`TIME`) into the guard.
    pub(crate) async fn read_clock(&self, connection: &Connection) -> Result<(), StoreFailure> {
        let Some(clock) = &self.clock else {
            return Ok(());
        };
        let sent = wall_ms();
        let cmd = redis::cmd("TIME");
        let answer = match connection.clone() {
            Connection::Redis(mut c) => {
                tokio::time::timeout(self.timeout, cmd.query_async::<(i64, i64)>(&mut c)).await
            }
            Connection::Cluster(mut c) => {
                tokio::time::timeout(self.timeout, cmd.query_async::<(i64, i64)>(&mut c)).await
            }
        };
        let answered = wall_ms();
        match answer {
            Ok(Ok((seconds, micros))) => {
                let store_ms = i128::from(seconds) * 1000 + i128::from(micros) / 1000;
                clock.record(sent, answered, store_ms, self.observer.as_ref());
                Ok(())
            }
            Ok(Err(e)) => Err(StoreFailure {
                error: store_error(&e),
                why: StoreDetail::NotRecorded(
                    format!(
                        "its clock could not be read ({}); nothing was recorded",
                        failure_text(&e)
                    )
                    .into(),
                ),
            }),
            Err(_) => Err(StoreFailure::unavailable(format!(
                "the replay store did not answer TIME within {} ms",
                self.timeout.as_millis()
            ))),
        }
    }

    /// Whether consumes may be recorded now: a fresh reading of the store's
    /// clock within bounds (read again first if it is stale, or if the wall
    /// clock stepped since).
    pub(crate) async fn clock_allows(&self, connection: &Connection) -> Result<(), StoreFailure> {
        let Some(clock) = &self.clock else {
            return Ok(());
        };
        let reading = match clock.fresh() {
            Some(reading) => reading,
            None => {
                self.read_clock(connection).await?;
                clock.last().ok_or_else(|| {
                    StoreFailure::unavailable("the replay store's clock could not be read")
                })?
            }
        };
        clock.verdict(&reading).map_err(StoreFailure::unavailable)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(skew_ms: i64, uncertainty_ms: i64) -> ClockReading {
        ClockReading {
            skew_ms,
            uncertainty_ms,
            at: Instant::now(),
            wall_minus_monotonic_ms: 0,
        }
    }

    #[test]
    fn clock_readings_beyond_the_bound_refuse_and_say_why() {
        let guard = ClockGuard::new(Duration::from_millis(2000));
        assert!(guard.verdict(&reading(1500, 10)).is_ok());
        assert!(guard.verdict(&reading(-1990, 10)).is_ok());
        // The reading's own uncertainty counts against the bound.
        let why = guard
            .verdict(&reading(-1995, 10))
            .expect_err("out of bounds");
        assert!(why.contains("1995 ms (± 10 ms) behind"), "{why}");
        let why = guard.verdict(&reading(4200, 1)).expect_err("out of bounds");
        assert!(
            why.contains("ahead of") && why.contains("2000 ms allowed"),
            "{why}"
        );
    }

    #[test]
    fn a_stale_or_stepped_reading_is_not_used() {
        let guard = ClockGuard::new(Duration::from_millis(2000));
        assert!(guard.fresh().is_none(), "no reading yet");
        let now = guard.wall_minus_monotonic_ms();
        *guard.reading.lock().expect("lock") = Some(ClockReading {
            wall_minus_monotonic_ms: now,
            ..reading(0, 1)
        });
        assert!(guard.fresh().is_some());
        // The wall clock stepped by a second since the reading.
        *guard.reading.lock().expect("lock") = Some(ClockReading {
            wall_minus_monotonic_ms: now - 1000,
            ..reading(0, 1)
        });
        assert!(guard.fresh().is_none(), "a step went unnoticed");
    }
}
