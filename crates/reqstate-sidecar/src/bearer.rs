//! The bearer tokens of `--auth-token-file`: one or more per file, so that
//! callers can move from one token to the next without downtime, reloaded
//! with the keyring (SIGHUP, and changes in the file's directory: see
//! [`crate::reload`]), and compared in constant time.
//!
//! The file holds one token per line; blank lines and lines starting with
//! `#` are skipped, and surrounding whitespace is removed. A token is 1 to
//! [`MAX_TOKEN_LEN`] visible ASCII characters (what `authorization: Bearer
//! <token>` can carry); a file has 1 to [`MAX_TOKENS`] of them. Rotation:
//! add the new token as a second line, let callers move to it, then remove
//! the old line (docs/SIDECAR.md).
//!
//! Whoever can change the file can add a token of their own and mint
//! anything: it gets the keyring file's checks (ownership, mode, every
//! directory on its path, regular file, non-blocking open, size), at start and
//! on every reload, through [`reqstate_keyring_file::read_protected_file`].
//! A file with no token is refused, never taken as "revoke every token": a
//! file being rewritten can be empty for a moment, and a refused reload keeps
//! the tokens in service (to revoke them all, write a new token in their
//! place, or stop the sidecar).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use reqstate_keyring_file::{KeyringPermissions, read_protected_file};
use ring::digest;
use subtle::{Choice, ConstantTimeEq as _};
use zeroize::{Zeroize, Zeroizing};

use crate::metrics::Metrics;
use crate::reload::OffThreadReads;
use crate::reload::{RefusalMemory, file_version};

/// Most tokens one file may hold.
pub const MAX_TOKENS: usize = 16;
/// Longest token, in characters.
pub const MAX_TOKEN_LEN: usize = 4096;
/// Largest token file, in bytes.
pub const MAX_FILE_LEN: u64 = 64 * 1024;
/// Longest a reload may take to read the file before it is abandoned.
pub const RELOAD_TIMEOUT: Duration = Duration::from_secs(10);

/// The tokens callers may present, kept only as SHA-256 digests: comparing
/// digests in constant time hides each token's length as well as its bytes.
pub struct BearerTokens {
    digests: Vec<[u8; 32]>,
}

impl Drop for BearerTokens {
    fn drop(&mut self) {
        self.digests.zeroize();
    }
}

impl std::fmt::Debug for BearerTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "BearerTokens({} tokens, <redacted>)", self.digests.len())
    }
}

impl BearerTokens {
    /// The tokens of a file's bytes (the rules in the module's text).
    pub fn parse(bytes: &[u8]) -> Result<BearerTokens, String> {
        let text = std::str::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_owned())?;
        let mut digests = Vec::new();
        for (index, line) in text.lines().enumerate() {
            let token = line.trim();
            if token.is_empty() || token.starts_with('#') {
                continue;
            }
            let number = index + 1;
            if token.len() > MAX_TOKEN_LEN {
                return Err(format!(
                    "line {number}: a token is at most {MAX_TOKEN_LEN} characters"
                ));
            }
            if !token.bytes().all(|b| b.is_ascii_graphic()) {
                return Err(format!(
                    "line {number}: a token is visible ASCII without spaces \
                     (what `authorization: Bearer <token>` can carry)"
                ));
            }
            if digests.len() == MAX_TOKENS {
                return Err(format!("more than {MAX_TOKENS} tokens"));
            }
            digests.push(sha256(token.as_bytes()));
        }
        if digests.is_empty() {
            return Err(
                "no token in the file (an empty file never revokes the tokens in \
                        service: to revoke them all, write a new token in their place)"
                    .to_owned(),
            );
        }
        Ok(BearerTokens { digests })
    }

    /// Reads and parses a token file, with the keyring file's checks
    /// ([`read_protected_file`]: opened without blocking, so a FIFO in its
    /// place is refused, not waited on; a regular file of at most
    /// [`MAX_FILE_LEN`] bytes, owned by this user or root, writable by no
    /// one else, readable by no one else unless `permissions` allows it, on
    /// a path no other user can replace). Returns its bytes too, to tell a
    /// real change from a touch on reload.
    pub fn read(
        path: &Path,
        permissions: KeyringPermissions,
    ) -> Result<(Zeroizing<Vec<u8>>, BearerTokens), String> {
        let bytes = read_protected_file(path, permissions, MAX_FILE_LEN).map_err(|e| match e {
            reqstate_keyring_file::KeyringLoadError::NotAKeyringFile {
                what: "larger than its limit",
                ..
            } => format!("larger than {MAX_FILE_LEN} bytes"),
            e => e.describe_as("bearer token file"),
        })?;
        let tokens = BearerTokens::parse(&bytes)?;
        Ok((bytes, tokens))
    }

    /// How many tokens are accepted.
    pub fn len(&self) -> usize {
        self.digests.len()
    }

    /// Always false: a file without a token is refused.
    pub fn is_empty(&self) -> bool {
        self.digests.is_empty()
    }

    /// Whether `presented` is one of the tokens. Every digest is compared,
    /// whichever matches, so the time taken says nothing of which did.
    pub fn accepts(&self, presented: &[u8]) -> bool {
        let presented = sha256(presented);
        let mut any = Choice::from(0);
        for expected in &self.digests {
            any |= presented.ct_eq(expected);
        }
        bool::from(any)
    }
}

fn sha256(bytes: &[u8]) -> [u8; 32] {
    let mut out = [0u8; 32];
    out.copy_from_slice(digest::digest(&digest::SHA256, bytes).as_ref());
    out
}

/// The tokens in service, swapped whole on reload.
pub type SharedBearerTokens = Arc<ArcSwap<BearerTokens>>;

/// The `--auth-token-file` read at start: its path, bytes and tokens.
#[derive(Debug)]
pub struct AuthTokenFile {
    /// The file, as given.
    pub path: PathBuf,
    /// Its bytes as first read.
    pub contents: Zeroizing<Vec<u8>>,
    /// Its tokens.
    pub tokens: BearerTokens,
    /// Whether group or others may read it (as for the keyring).
    pub permissions: KeyringPermissions,
}

impl AuthTokenFile {
    /// Reads the file for the first time.
    pub fn load(path: &Path, permissions: KeyringPermissions) -> Result<AuthTokenFile, String> {
        let (contents, tokens) = BearerTokens::read(path, permissions)?;
        Ok(AuthTokenFile {
            path: path.to_path_buf(),
            contents,
            tokens,
            permissions,
        })
    }
}

/// Reloads the token file into the shared tokens: a file that cannot be
/// read or has no valid token is refused (logged at `ERROR`, counted in
/// `reqstate_auth_token_reload_failures_total`) and the previous tokens
/// stay. A refused version of the file is reported once, as the keyring's
/// ([`RefusalMemory`]); a SIGHUP always reports.
pub struct TokenReloader {
    path: PathBuf,
    permissions: KeyringPermissions,
    shared: SharedBearerTokens,
    last_good: Zeroizing<Vec<u8>>,
    refused: RefusalMemory,
    metrics: Arc<Metrics>,
    timeout: Duration,
    reads: OffThreadReads,
}

impl std::fmt::Debug for TokenReloader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenReloader")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl TokenReloader {
    /// A reloader for the file the sidecar started with.
    pub fn new(
        path: PathBuf,
        permissions: KeyringPermissions,
        shared: SharedBearerTokens,
        initial_contents: Zeroizing<Vec<u8>>,
        metrics: Arc<Metrics>,
    ) -> Self {
        TokenReloader {
            path,
            permissions,
            shared,
            last_good: initial_contents,
            refused: RefusalMemory::default(),
            metrics,
            timeout: RELOAD_TIMEOUT,
            reads: OffThreadReads::default(),
        }
    }

    /// The token file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads the file (on a thread of its own, for at most
    /// [`RELOAD_TIMEOUT`], with the keyring's cap on stuck reads) and swaps
    /// its tokens in if it changed and is valid. A refusal is reported
    /// unless it is the same as the last one, of the same bytes, and not
    /// `force`d (SIGHUP).
    pub async fn reload(&mut self, force: bool) {
        let (path, permissions) = (self.path.clone(), self.permissions);
        let read = self
            .reads
            .read("token-reload", self.timeout, move || {
                let version = file_version(&path, permissions, MAX_FILE_LEN);
                (BearerTokens::read(&path, permissions), version)
            })
            .await;
        let (contents, tokens) = match read {
            Ok((Ok(loaded), _)) => loaded,
            Ok((Err(e), version)) => {
                if self.refused.is_new(force, &e, version.as_deref()) {
                    self.refused(&e);
                } else {
                    tracing::debug!(
                        file = %self.path.display(),
                        "bearer token file unchanged since its last refusal; not reported again"
                    );
                }
                return;
            }
            Err(abandoned) => return self.refused(&abandoned),
        };
        self.refused.clear();
        if contents == self.last_good {
            return;
        }
        let count = tokens.len();
        self.shared.store(Arc::new(tokens));
        self.last_good = contents;
        self.metrics.auth_token_reload_succeeded();
        tracing::info!(tokens = count, "bearer tokens reloaded");
    }

    fn refused(&self, error: &dyn std::fmt::Display) {
        self.metrics.auth_token_reload_failed();
        tracing::error!(
            file = %self.path.display(),
            error = %error,
            "bearer token reload refused; the previous tokens stay accepted"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    #[test]
    fn one_token_per_line_with_blank_lines_and_comments_skipped() {
        let tokens = BearerTokens::parse(b"# rotated 2026-11-30\n  old-token \n\nnew-token\n")
            .expect("parses");
        assert_eq!(tokens.len(), 2);
        assert!(tokens.accepts(b"old-token"));
        assert!(tokens.accepts(b"new-token"));
        for wrong in [
            &b"old-toke"[..],
            b"new-token2",
            b"",
            b"# rotated 2026-11-30",
        ] {
            assert!(!tokens.accepts(wrong), "{wrong:?}");
        }
    }

    #[test]
    fn a_single_token_file_is_what_it_always_was() {
        let tokens = BearerTokens::parse(b"s3cret\n").expect("parses");
        assert_eq!(tokens.len(), 1);
        assert!(tokens.accepts(b"s3cret"));
        assert!(!tokens.accepts(b"s3cret\n"));
    }

    #[test]
    fn bad_files_are_refused_with_the_line() {
        let too_long = "x".repeat(MAX_TOKEN_LEN + 1);
        let too_many = (0..=MAX_TOKENS)
            .map(|i| format!("t{i}\n"))
            .collect::<String>();
        for (bytes, want) in [
            (&b""[..], "no token"),
            (b"\n  \n# only a comment\n", "no token"),
            (b"ok\nwith space\n", "line 2: a token is visible ASCII"),
            (b"caf\xc3\xa9\n", "line 1: a token is visible ASCII"),
            (b"\xff\n", "not UTF-8"),
            (too_long.as_bytes(), "line 1: a token is at most 4096"),
            (too_many.as_bytes(), "more than 16 tokens"),
        ] {
            let e = BearerTokens::parse(bytes).expect_err("refused");
            assert!(e.contains(want), "{e} (want {want})");
        }
        let exactly = "x".repeat(MAX_TOKEN_LEN);
        assert!(BearerTokens::parse(exactly.as_bytes()).is_ok());
        let most = (0..MAX_TOKENS)
            .map(|i| format!("t{i}\n"))
            .collect::<String>();
        assert_eq!(
            BearerTokens::parse(most.as_bytes()).map(|t| t.len()),
            Ok(16)
        );
    }

    #[test]
    fn reading_refuses_what_is_not_a_small_regular_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .expect("mkfifo runs");
        assert!(made.success(), "mkfifo");
        let owner_only = KeyringPermissions::OwnerOnly;
        assert_eq!(
            BearerTokens::read(&fifo, owner_only).expect_err("a FIFO"),
            "cannot read: not a regular file"
        );
        let big = dir.path().join("big");
        std::fs::write(&big, vec![b'x'; MAX_FILE_LEN as usize + 1]).expect("write");
        std::fs::set_permissions(&big, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        assert!(
            BearerTokens::read(&big, owner_only)
                .expect_err("big")
                .contains("larger than 65536 bytes")
        );
        assert!(
            BearerTokens::read(dir.path(), owner_only).is_err(),
            "a directory"
        );
    }

    /// Security review round 3, finding 2: the token file gets the keyring
    /// file's checks, so another local user cannot add a token of their own.
    #[test]
    fn a_token_file_others_could_change_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700))
            .expect("chmod");
        let file = dir.path().join("token");
        std::fs::write(&file, "s3cret\n").expect("write");
        let set_mode = |mode: u32| {
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).expect("chmod")
        };
        let owner_only = KeyringPermissions::OwnerOnly;
        let readable = KeyringPermissions::AllowGroupOrOtherReadable;
        set_mode(0o600);
        assert!(BearerTokens::read(&file, owner_only).is_ok());
        // Writable by group or others: never, whatever the read allowance.
        for mode in [0o620, 0o602, 0o666] {
            set_mode(mode);
            for permissions in [owner_only, readable] {
                let e = BearerTokens::read(&file, permissions).expect_err("writable by others");
                assert!(e.contains("write the bearer token file"), "{e}");
            }
        }
        // Readable by others: only when allowed (a Kubernetes Secret's 0644).
        set_mode(0o644);
        let e = BearerTokens::read(&file, owner_only).expect_err("readable by others");
        assert!(e.contains("read the bearer token file"), "{e}");
        assert!(BearerTokens::read(&file, readable).is_ok());
        // In a directory others can write (they could replace the file).
        set_mode(0o600);
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777))
            .expect("chmod");
        let e = BearerTokens::read(&file, owner_only).expect_err("replaceable");
        assert!(e.contains("other users can replace the file"), "{e}");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700))
            .expect("chmod");
        // Owned by another user (the test runs as root, which may chown).
        if nix::unistd::geteuid().is_root() {
            std::os::unix::fs::chown(&file, Some(54_321), None).expect("chown");
            let e = BearerTokens::read(&file, owner_only).expect_err("another owner");
            assert!(e.contains("belongs to uid 54321"), "{e}");
        }
    }

    #[test]
    fn the_debug_form_shows_no_digest() {
        let tokens = BearerTokens::parse(b"s3cret").expect("parses");
        assert_eq!(format!("{tokens:?}"), "BearerTokens(1 tokens, <redacted>)");
    }
}
