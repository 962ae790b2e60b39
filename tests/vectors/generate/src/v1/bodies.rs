//! `invalid` vectors over bodies only a key holder could make, with their
//! expected reasons (FORMAT.md §8 steps 9-14): the tag verifies, and the
//! claims checks refuse.

use reqstate::Policy;

use super::codec::random_for;
use super::forge::{cbor_head, claims_body, deep, forge};
use super::invalid::invalid;
use super::minted::Minted;
use super::{NOW, REFERENCE_CONTEXT};
use crate::schema::InvalidVector;

/// Appends the key holder's refused bodies to `bad`, under HMAC then
/// XChaCha20-Poly1305.
pub(super) fn bodies(minted: &Minted, bad: &mut Vec<InvalidVector>) {
    let keys = &minted.keys;
    let (hmac, xchacha) = (minted.hmac(), minted.xchacha());
    let leeway = Policy::DEFAULT_CLOCK_LEEWAY;
    let st = hex::decode(&hmac.state_cbor).expect("hex");
    let m = "malformed";
    let reasoned: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "claims map of 3 entries",
            {
                let mut b = claims_body(NOW, 600, "confirm", &[]);
                b[0] = 0xa3;
                b.pop();
                b
            },
            m,
        ),
        (
            "claims map of 5 entries",
            {
                let mut b = claims_body(NOW, 600, "confirm", &st);
                b[0] = 0xa5;
                b.extend([0x05, 0xf6]);
                b
            },
            m,
        ),
        (
            "indefinite-length claims map",
            {
                let mut b = claims_body(NOW, 600, "confirm", &st);
                b[0] = 0xbf;
                b.push(0xff);
                b
            },
            m,
        ),
        (
            "claims key 1 not in shortest form",
            {
                let b = claims_body(NOW, 600, "confirm", &st);
                [&[0xa4, 0x18, 0x01][..], &b[2..]].concat()
            },
            m,
        ),
        (
            "lifetime not in shortest form",
            {
                let mut b = vec![0xa4, 0x01];
                b.extend(cbor_head(0, NOW));
                b.extend([0x02, 0x1a, 0, 0, 0x02, 0x58, 0x03, 0x67]);
                b.extend(b"confirm");
                b.push(0x04);
                b.extend(&st);
                b
            },
            m,
        ),
        (
            "step length not in shortest form",
            {
                let mut b = vec![0xa4, 0x01];
                b.extend(cbor_head(0, NOW));
                b.extend([0x02, 0x19, 0x02, 0x58, 0x03, 0x78, 0x07]);
                b.extend(b"confirm");
                b.push(0x04);
                b.extend(&st);
                b
            },
            m,
        ),
        (
            "indefinite-length step",
            {
                let mut b = vec![0xa4, 0x01];
                b.extend(cbor_head(0, NOW));
                b.extend([0x02, 0x19, 0x02, 0x58, 0x03, 0x7f, 0x67]);
                b.extend(b"confirm");
                b.extend([0xff, 0x04]);
                b.extend(&st);
                b
            },
            m,
        ),
        (
            "step as a byte string",
            {
                let mut b = claims_body(NOW, 600, "confirm", &st);
                let at = b.iter().position(|&x| x == 0x67).expect("step head");
                b[at] = 0x47;
                b
            },
            m,
        ),
        (
            "negative issued_at",
            {
                let mut b = claims_body(NOW, 600, "confirm", &st);
                b[2] = 0x3a;
                b
            },
            m,
        ),
        (
            "state nested 17 levels through maps",
            claims_body(NOW, 600, "s", &deep(&[0xa1, 0x00], &[], 17)),
            m,
        ),
        (
            "state nested 17 levels through tags",
            claims_body(NOW, 600, "s", &deep(&[0xc6], &[], 17)),
            m,
        ),
        (
            "state nested 17 levels through indefinite arrays",
            claims_body(NOW, 600, "s", &deep(&[0x9f], &[0xff], 17)),
            m,
        ),
        (
            "state nested 17 levels, a tag inside 16 arrays",
            claims_body(NOW, 600, "s", &[vec![0x81; 16], vec![0xc6, 0x00]].concat()),
            m,
        ),
        (
            "state: reserved additional information 28",
            claims_body(NOW, 600, "s", &[0x1c]),
            m,
        ),
        (
            "state: reserved additional information 29",
            claims_body(NOW, 600, "s", &[0x5d]),
            m,
        ),
        (
            "state: reserved additional information 30",
            claims_body(NOW, 600, "s", &[0xfe]),
            m,
        ),
        ("state: stray break", claims_body(NOW, 600, "s", &[0xff]), m),
        (
            "state: break inside a definite array",
            claims_body(NOW, 600, "s", &[0x82, 0x01, 0xff]),
            m,
        ),
        (
            "state: indefinite text with a byte-string chunk",
            claims_body(NOW, 600, "s", &[0x7f, 0x41, 0x61, 0xff]),
            m,
        ),
        (
            "state: indefinite text with an indefinite chunk",
            claims_body(NOW, 600, "s", &[0x7f, 0x7f, 0xff, 0xff]),
            m,
        ),
        (
            "state: indefinite byte string with an integer chunk",
            claims_body(NOW, 600, "s", &[0x5f, 0x01, 0xff]),
            m,
        ),
        (
            "state: indefinite unsigned integer",
            claims_body(NOW, 600, "s", &[0x1f]),
            m,
        ),
        (
            "state: indefinite negative integer",
            claims_body(NOW, 600, "s", &[0x3f]),
            m,
        ),
        (
            "state: indefinite tag",
            claims_body(NOW, 600, "s", &[0xdf, 0x00]),
            m,
        ),
        (
            "state: indefinite map, key without value",
            claims_body(NOW, 600, "s", &[0xbf, 0x01, 0xff]),
            m,
        ),
        (
            "state: definite map, key without value",
            claims_body(NOW, 600, "s", &[0xa1, 0x01]),
            m,
        ),
        (
            "state: truncated 8-byte argument",
            claims_body(NOW, 600, "s", &[0x1b, 0x00, 0x00]),
            m,
        ),
        (
            "state: map key not UTF-8",
            claims_body(NOW, 600, "s", &[0xa1, 0x62, 0xc3, 0x28, 0x00]),
            m,
        ),
        (
            "state: text chunk not UTF-8",
            claims_body(NOW, 600, "s", &[0x7f, 0x62, 0xc3, 0x28, 0xff]),
            m,
        ),
        (
            "state: character split across text chunks",
            claims_body(NOW, 600, "s", &[0x7f, 0x61, 0xc3, 0x61, 0xa9, 0xff]),
            m,
        ),
        (
            "state: two-byte simple value 0",
            claims_body(NOW, 600, "s", &[0xf8, 0x00]),
            m,
        ),
        (
            "state: two-byte simple value 20 (false)",
            claims_body(NOW, 600, "s", &[0xf8, 0x14]),
            m,
        ),
        (
            "state: two-byte simple value 31",
            claims_body(NOW, 600, "s", &[0xf8, 0x1f]),
            m,
        ),
        // Well-formed, so it passes step 9 and reaches the caller's decoder.
        (
            "step 14: two-byte simple value 32 is well-formed, not an unsigned integer",
            claims_body(NOW, 600, "s", &[0xf8, 0x20]),
            "state_decoding",
        ),
        (
            "lifetime over the maximum",
            claims_body(NOW, Policy::DEFAULT_MAX_LIFETIME + 1, "s", &[0xf6]),
            "lifetime_too_long",
        ),
        (
            "step 10 before 11: lifetime over the maximum, issued in the future",
            claims_body(NOW + 1000, Policy::DEFAULT_MAX_LIFETIME + 1, "s", &[0xf6]),
            "lifetime_too_long",
        ),
        (
            "step 10 before 11: lifetime zero, issued in the future",
            claims_body(NOW + 1000, 0, "s", &[0xf6]),
            m,
        ),
        (
            "issued_at = now + leeway + 1",
            claims_body(NOW + leeway + 1, 600, "s", &[0xf6]),
            "not_yet_valid",
        ),
        (
            "expires_at + leeway = now",
            claims_body(NOW - 600 - leeway, 600, "s", &[0xf6]),
            "expired",
        ),
        (
            "step 13: NFD expected for an NFC step",
            claims_body(NOW, 600, "café", &[0xf6]),
            "wrong_step",
        ),
        // Heads at the shortest-form boundaries (FORMAT.md §5): each value
        // one below the least its head may carry.
        (
            "lifetime 23 in a one-byte head (18 17)",
            with_lifetime_head(&[0x18, 0x17]),
            m,
        ),
        (
            "lifetime 255 in a two-byte head (19 00 ff)",
            with_lifetime_head(&[0x19, 0x00, 0xff]),
            m,
        ),
        (
            "lifetime 65535 in a four-byte head (1a 00 00 ff ff)",
            with_lifetime_head(&[0x1a, 0x00, 0x00, 0xff, 0xff]),
            m,
        ),
        (
            "issued_at 2^32 - 1 in an eight-byte head",
            {
                let mut b = vec![0xa4, 0x01, 0x1b, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff];
                b.extend(&claims_body(NOW, 600, "s", &[0xf6])[2 + cbor_head(0, NOW).len()..]);
                b
            },
            m,
        ),
        (
            "a negative lifetime (-600)",
            with_lifetime_head(&[0x39, 0x02, 0x57]),
            m,
        ),
        (
            "step of 129 characters in 258 bytes",
            claims_body(NOW, 600, &"é".repeat(129), &[0xf6]),
            m,
        ),
        (
            "state: a text chunk inside an indefinite byte string",
            claims_body(NOW, 600, "s", &[0x5f, 0x61, 0x61, 0xff]),
            m,
        ),
        (
            "state: an array at level 17 reached through map keys",
            claims_body(
                NOW,
                600,
                "s",
                &[vec![0xa1; 16], vec![0x81, 0x00], vec![0x00; 16]].concat(),
            ),
            m,
        ),
    ];
    for (key_id, alg) in [(1u32, "hmac"), (2, "xchacha")] {
        let base = if key_id == 1 { hmac } else { xchacha };
        for (name, body, reason) in &reasoned {
            let token = forge(
                keys,
                key_id,
                body,
                base.tool.as_bytes(),
                REFERENCE_CONTEXT,
                &random_for(keys, key_id, 7),
            );
            let mut v = invalid(
                base,
                &format!("{alg}: key holder's body: {name}"),
                token,
                reason,
            );
            if name.starts_with("step 13") {
                v.expected_step = Some("cafe\u{301}".into());
            }
            if name.starts_with("step 14") {
                v.decode_as = Some("uint".into());
            }
            bad.push(v);
        }
    }
}

/// The claims of a body issued at [`NOW`] for step `s` with state `null`,
/// the lifetime written as `head` (a CBOR head, major type 0 or 1).
fn with_lifetime_head(head: &[u8]) -> Vec<u8> {
    let mut b = vec![0xa4, 0x01];
    b.extend(cbor_head(0, NOW));
    b.push(0x02);
    b.extend_from_slice(head);
    b.extend([0x03, 0x61, b's', 0x04, 0xf6]);
    b
}
