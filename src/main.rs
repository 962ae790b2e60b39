//! The `reqstate` binary. (Placeholder entry until the sidecar crate lands.)
fn main() {}
