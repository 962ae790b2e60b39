//! Generated gRPC types for the reqstate sidecar protocol, `reqstate.v1`.
//!
//! The source of truth is `proto/reqstate/v1/reqstate.proto`; `build.rs`
//! compiles it at build time with a vendored `protoc`, so the generated code
//! can never be stale. Every message, field and rpc is documented there, and
//! those comments are carried into the generated items below.

#![forbid(unsafe_code)]

/// Version 1 of the protocol: messages, the `RequestState` client and server.
pub mod v1 {
    #![allow(missing_docs, unreachable_pub, clippy::all)]
    tonic::include_proto!("reqstate.v1");
}

/// The encoded `FileDescriptorSet` of `reqstate.v1`, for gRPC server
/// reflection (so that `grpcurl` works without the .proto file).
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/reqstate_v1_descriptor.bin"));
