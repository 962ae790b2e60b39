//! Generates the prost/tonic types and the reflection descriptor set from
//! `proto/reqstate/v1/reqstate.proto`, with the protoc vendored by
//! `protoc-bin-vendored` so that a fresh machine needs no system package.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?);
    let proto_root = manifest_dir.join("../../proto");
    let proto_file = proto_root.join("reqstate/v1/reqstate.proto");
    let out_dir = PathBuf::from(std::env::var("OUT_DIR")?);
    // The proto lives outside this package: without this, cargo would not
    // see it change and would keep stale generated types.
    println!("cargo:rerun-if-changed={}", proto_file.display());

    let mut config = tonic_prost_build::Config::new();
    config.protoc_executable(protoc_bin_vendored::protoc_bin_path()?);

    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        // No `connect(url)` helper: callers bring their own channel (TCP, TLS or
        // a Unix socket), and this crate stays free of tonic's transport.
        .build_transport(false)
        .file_descriptor_set_path(out_dir.join("reqstate_v1_descriptor.bin"))
        .compile_with_config(config, &[proto_file], &[proto_root])?;
    Ok(())
}
