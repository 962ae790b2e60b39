//! Golden files: a test regenerates a committed file from its definitions
//! and fails if the file differs; `REQSTATE_WRITE_VECTORS=1` writes it anew.

#![allow(dead_code, unreachable_pub)]

use serde::Serialize;
use serde::de::DeserializeOwned;

/// Reads the JSON file at `path`.
pub fn load<T: DeserializeOwned>(path: &str) -> T {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path} does not parse: {e}"))
}

/// Writes `generated` to `path` when `REQSTATE_WRITE_VECTORS` is set, then
/// requires the file to equal it.
pub fn check<T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(
    path: &str,
    generated: &T,
) {
    if std::env::var_os("REQSTATE_WRITE_VECTORS").is_some() {
        let text = serde_json::to_string_pretty(generated).expect("serialize") + "\n";
        std::fs::write(path, text).unwrap_or_else(|e| panic!("write {path}: {e}"));
    }
    assert_eq!(
        &load::<T>(path),
        generated,
        "{path} is stale: regenerate it with REQSTATE_WRITE_VECTORS=1 (see the test file's header)"
    );
}
