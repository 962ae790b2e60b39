//! Nothing to use: this target compiles the Rust snippets of the
//! repository's README, of the core crate's README (crates/reqstate/README.md)
//! and of docs/KEYRING.md ("From Rust"), which make a keyring file and reload it with
//! `reqstate-keyring-file`, as doctests of this package
//! (`cargo test -p reqstate-example-key-rotation --doc`), so that they
//! cannot rot. The core cannot run them: it cannot depend on its companion.

/// The repository's README, its Rust snippet compiled as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct RepositoryReadme;

/// The core crate's README, its snippets compiled as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../../crates/reqstate/README.md")]
pub struct CoreReadme;

/// docs/KEYRING.md, its Rust snippets compiled as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/KEYRING.md")]
pub struct KeyringDoc;
