//! The conformance package has no library: its tests are `conformance/`
//! (see Cargo.toml). This file exists because Cargo wants a target in every
//! package.
