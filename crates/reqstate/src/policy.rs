//! The limits a codec enforces: token length, clock leeway, lifetime.

use core::time::Duration;

use crate::error::InvalidArgument;

/// The limits a codec enforces. Strict by default; each relaxation is a named
/// method that checks its bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    max_token_len: usize,
    clock_leeway: u64,
    max_lifetime: u64,
}

impl Policy {
    /// Default longest token, in characters: 8 KiB.
    pub const DEFAULT_MAX_TOKEN_LEN: usize = 8 * 1024;
    /// Highest configurable token length, in characters: 1 MiB.
    pub const MAX_MAX_TOKEN_LEN: usize = 1024 * 1024;
    /// Default clock leeway, in seconds.
    pub const DEFAULT_CLOCK_LEEWAY: u64 = 60;
    /// Highest configurable clock leeway, in seconds (10 minutes).
    pub const MAX_CLOCK_LEEWAY: u64 = 600;
    /// Default longest token lifetime, in seconds (1 day).
    pub const DEFAULT_MAX_LIFETIME: u64 = 86_400;
    /// Highest configurable token lifetime, in seconds (30 days).
    pub const MAX_MAX_LIFETIME: u64 = 30 * 86_400;

    /// The default policy: 8 KiB tokens, 60 s leeway, lifetimes up to a day.
    pub const fn new() -> Self {
        Policy {
            max_token_len: Self::DEFAULT_MAX_TOKEN_LEN,
            clock_leeway: Self::DEFAULT_CLOCK_LEEWAY,
            max_lifetime: Self::DEFAULT_MAX_LIFETIME,
        }
    }

    /// Sets the longest token accepted or minted, in characters (64..=1 MiB).
    /// Checked before anything of a token is decoded.
    pub fn with_max_token_len(mut self, chars: usize) -> Result<Self, InvalidArgument> {
        if !(64..=Self::MAX_MAX_TOKEN_LEN).contains(&chars) {
            return Err(InvalidArgument("max token length must be in 64..=1048576"));
        }
        self.max_token_len = chars;
        Ok(self)
    }

    /// Sets the clock leeway, at most 10 minutes. A token is accepted while
    /// `issued_at <= now + leeway` and `now < expires_at + leeway`.
    /// Whole seconds only: a fraction is refused, not rounded.
    pub fn with_clock_leeway(mut self, leeway: Duration) -> Result<Self, InvalidArgument> {
        if leeway.subsec_nanos() != 0 {
            return Err(InvalidArgument(
                "clock leeway must be a whole number of seconds",
            ));
        }
        let secs = leeway.as_secs();
        if secs > Self::MAX_CLOCK_LEEWAY {
            return Err(InvalidArgument("clock leeway must be at most 600 seconds"));
        }
        self.clock_leeway = secs;
        Ok(self)
    }

    /// Sets the longest lifetime minted or accepted (1 s..=30 days), in
    /// whole seconds: a fraction is refused, not rounded.
    pub fn with_max_lifetime(mut self, lifetime: Duration) -> Result<Self, InvalidArgument> {
        if lifetime.subsec_nanos() != 0 {
            return Err(InvalidArgument(
                "max lifetime must be a whole number of seconds",
            ));
        }
        let secs = lifetime.as_secs();
        if !(1..=Self::MAX_MAX_LIFETIME).contains(&secs) {
            return Err(InvalidArgument(
                "max lifetime must be in 1..=2592000 seconds",
            ));
        }
        self.max_lifetime = secs;
        Ok(self)
    }

    /// The longest token, in characters.
    pub fn max_token_len(&self) -> usize {
        self.max_token_len
    }

    /// The clock leeway, in seconds.
    pub fn clock_leeway(&self) -> u64 {
        self.clock_leeway
    }

    /// The longest lifetime, in seconds.
    pub fn max_lifetime(&self) -> u64 {
        self.max_lifetime
    }
}

impl Default for Policy {
    fn default() -> Self {
        Self::new()
    }
}
