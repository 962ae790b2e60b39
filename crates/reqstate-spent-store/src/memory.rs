//! The store in this process (`--replay-store memory`): the core's bounded,
//! swept [`MemoryReplayStore`], lost on restart; one sidecar's tokens only.

use reqstate::{MemoryReplayStore, ReplayStore as _};

use crate::outcome::{Recorded, Spend, StoreFailure};

/// Records each spent token, in order: `Ok(true)` for each this call
/// recorded, a full store's refusal for each it could not.
pub(crate) fn record(store: &MemoryReplayStore, items: &[Spend], now: u64) -> Vec<Recorded> {
    items
        .iter()
        .map(|spend| {
            store
                .insert_if_absent(&spend.id, spend.until, now)
                .map_err(StoreFailure::from)
        })
        .collect()
}
