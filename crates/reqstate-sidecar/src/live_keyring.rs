//! The keyring in service: the codec every call uses, swapped whole when the
//! keyring is reloaded, so that a call sees either the old keyring or the
//! new one, never a mix.

use std::sync::Arc;

use arc_swap::ArcSwap;
use reqstate::Codec;

use crate::key_evidence::KeyEvidence;

/// The codec in service and which keyring generation it holds.
#[derive(Debug)]
pub struct KeyringInService {
    /// The codec around the current keyring.
    pub codec: Codec,
    /// 1 for the keyring loaded at start, one more per successful reload.
    pub generation: u64,
    /// The per-key counters of this keyring and its file's SHA-256.
    pub evidence: KeyEvidence,
}

/// The shared, atomically swappable keyring state.
pub type SharedKeyring = Arc<ArcSwap<KeyringInService>>;

/// The shared state for a keyring that comes from no file (`serve --dev`,
/// tests, the fuzz targets): generation 1, fresh counters, no file hash.
pub fn shared(codec: Codec) -> SharedKeyring {
    let evidence = crate::key_evidence::EvidenceBook::new().for_keyring(codec.keyring(), &[]);
    shared_with(codec, evidence)
}

/// The shared state for the keyring loaded at start, with its counters
/// (from the [`crate::key_evidence::EvidenceBook`] its reloads use):
/// generation 1.
pub fn shared_with(codec: Codec, evidence: KeyEvidence) -> SharedKeyring {
    Arc::new(ArcSwap::from_pointee(KeyringInService {
        codec,
        generation: 1,
        evidence,
    }))
}
