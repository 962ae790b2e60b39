//! What the benchmarks of this package share: locating the `reqstate`
//! binary that benches/sidecar.rs starts.
//!
//! Cargo builds a package's binaries (and sets `CARGO_BIN_EXE_<name>`) only
//! for that package's own tests and benchmarks, and the `reqstate` binary is
//! in the reqstate-sidecar package, so the sidecar benchmark has Cargo build it.

use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The `reqstate` binary for benches/sidecar.rs: `REQSTATE_BENCH_BIN` if set
/// (to measure another build), otherwise the workspace's own, built now
/// (`cargo build -p reqstate-sidecar --bin reqstate`, a no-op when up to date) in
/// the profile and target directory of the running benchmark: the release
/// profile under `cargo bench`.
pub fn reqstate_binary() -> io::Result<PathBuf> {
    if let Some(path) = std::env::var_os("REQSTATE_BENCH_BIN") {
        return Ok(PathBuf::from(path));
    }
    // <target dir>/<profile dir>/deps/<benchmark>-<hash>
    let exe = std::env::current_exe()?;
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .ok_or_else(|| io::Error::other(format!("{}: not in a Cargo target dir", exe.display())))?;
    let profile = match profile_dir.file_name().and_then(|name| name.to_str()) {
        // `cargo bench` builds in the bench profile, which writes to release/.
        Some("release") => "release",
        Some("debug") => "dev",
        Some(other) => other,
        None => return Err(io::Error::other("no profile directory")),
    };
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| env!("CARGO").into());
    let status = Command::new(cargo)
        .args(["build", "--quiet", "--package", "reqstate-sidecar"])
        .args(["--bin", "reqstate", "--profile", profile])
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .status()?;
    if !status.success() {
        return Err(io::Error::other(format!(
            "building the reqstate binary failed: {status}"
        )));
    }
    Ok(profile_dir.join("reqstate"))
}
