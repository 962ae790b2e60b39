//! `accepted` vectors: the accepted side of the rules the `invalid` ones
//! pin (FORMAT.md §8 steps 9-14), most over bodies only a key holder could
//! make, and every sealed payload unsealed.

use reqstate::Policy;

use super::codec::{default_vector_policy, random_for};
use super::forge::{claims_body, deep, forge};
use super::minted::Minted;
use super::{NOW, REFERENCE_CONTEXT};
use crate::schema::{AcceptedVector, SealedVector, ValidVector, VectorPolicy};

/// `v`'s token verified at `now` (default policy, no expected step) to its
/// claims, `state` being its state's bytes.
pub(super) fn accept_claims(v: &ValidVector, name: &str, now: u64, state: &[u8]) -> AcceptedVector {
    AcceptedVector {
        name: name.into(),
        operation: "verify".into(),
        token: v.token.clone(),
        tool: v.tool.clone(),
        context: v.context.clone(),
        expected_step: None,
        now,
        policy: None,
        decode_as: None,
        issued_at: Some(v.issued_at),
        expires_at: Some(v.expires_at),
        step: Some(v.step.clone()),
        state_cbor: Some(hex::encode(state)),
        payload: None,
        key_id: None,
        spent: Vec::new(),
        spent_record: None,
        record_until: None,
    }
}

/// An unseal of `s` that succeeds, under `policy`.
pub(super) fn unseal_accepted(
    s: &SealedVector,
    name: &str,
    policy: Option<VectorPolicy>,
) -> AcceptedVector {
    AcceptedVector {
        name: name.into(),
        operation: "unseal".into(),
        token: s.token.clone(),
        tool: String::new(),
        context: s.aad.clone(),
        expected_step: None,
        now: s.now,
        policy,
        decode_as: None,
        issued_at: None,
        expires_at: None,
        step: None,
        state_cbor: None,
        payload: Some(s.payload.clone()),
        key_id: None,
        spent: Vec::new(),
        spent_record: None,
        record_until: None,
    }
}

/// The accepted verifies and unseals, in file order (the single-use family
/// appends its consumes).
pub(super) fn accepted(m: &Minted) -> Vec<AcceptedVector> {
    let (keys, sealed) = (&m.keys, &m.sealed);
    let hmac = m.hmac();
    let leeway = Policy::DEFAULT_CLOCK_LEEWAY;
    let st = hex::decode(&hmac.state_cbor).expect("hex");
    let mut accepted = Vec::new();
    let accept_token =
        |name: &str, token: &str, now: u64, step: &str, iat: u64, exp: u64, state: &[u8]| {
            AcceptedVector {
                token: token.into(),
                issued_at: Some(iat),
                expires_at: Some(exp),
                step: Some(step.into()),
                ..accept_claims(hmac, name, now, state)
            }
        };
    accepted.push(accept_token(
        "step 11: issued_at = now + leeway",
        &hmac.token,
        hmac.issued_at - leeway,
        &hmac.step,
        hmac.issued_at,
        hmac.expires_at,
        &st,
    ));
    accepted.push(accept_token(
        "step 12: now = expires_at + leeway - 1",
        &hmac.token,
        hmac.expires_at + leeway - 1,
        &hmac.step,
        hmac.issued_at,
        hmac.expires_at,
        &st,
    ));
    accepted.push(AcceptedVector {
        policy: Some(VectorPolicy {
            clock_leeway: Some(600),
            ..default_vector_policy()
        }),
        ..accept_token(
            "step 12: policy leeway 600, now = expires_at + 599",
            &hmac.token,
            hmac.expires_at + 599,
            &hmac.step,
            hmac.issued_at,
            hmac.expires_at,
            &st,
        )
    });
    let accepted_bodies: Vec<(&str, &str, u64, Vec<u8>)> = vec![
        (
            "state nested 16 levels through arrays",
            "s",
            600,
            deep(&[0x81], &[], 16),
        ),
        (
            "state nested 16 levels through maps",
            "s",
            600,
            deep(&[0xa1, 0x00], &[], 16),
        ),
        (
            "state nested 16 levels through tags",
            "s",
            600,
            deep(&[0xc6], &[], 16),
        ),
        (
            "state nested 16 levels through indefinite arrays and maps",
            "s",
            600,
            {
                let mut b = [0x9f, 0xbf, 0x00].repeat(8);
                b.push(0x00);
                b.extend([0xff, 0xff].repeat(8));
                b
            },
        ),
        (
            "state: indefinite strings with valid chunks",
            "s",
            600,
            vec![
                0x82, 0x7f, 0x61, 0x61, 0x62, 0xc3, 0xa9, 0x60, 0xff, 0x5f, 0x41, 0x00, 0x40, 0xff,
            ],
        ),
        (
            "state nested 16 levels through arrays, an indefinite-length text at the deepest (its chunks are not a level)",
            "s",
            600,
            [
                vec![0x81; 16],
                vec![0x7f, 0x61, 0x61, 0x62, 0x62, 0x63, 0xff],
            ]
            .concat(),
        ),
        (
            "state nested 16 levels through maps, an indefinite-length byte string as the deepest value",
            "s",
            600,
            [
                [0xa1, 0x00].repeat(16),
                vec![0x5f, 0x41, 0x00, 0x42, 0x01, 0x02, 0xff],
            ]
            .concat(),
        ),
        ("state: empty indefinite text", "s", 600, vec![0x7f, 0xff]),
        (
            "state: duplicate map keys are not refused",
            "s",
            600,
            vec![0xa2, 0x61, 0x61, 0x01, 0x61, 0x61, 0x02],
        ),
        (
            "state: map keys unsorted, integers and lengths not shortest (the serializer's bytes)",
            "s",
            600,
            vec![
                0xa2, 0x61, 0x62, 0x18, 0x01, 0x78, 0x01, 0x61, 0x19, 0x00, 0x02,
            ],
        ),
        (
            "state: half, single and double floats",
            "s",
            600,
            vec![
                0x83, 0xf9, 0x3c, 0x00, 0xfa, 0x3f, 0xc0, 0x00, 0x00, 0xfb, 0x40, 0x09, 0x21, 0xfb,
                0x54, 0x44, 0x2d, 0x18,
            ],
        ),
        ("step of 256 bytes", "", 600, vec![0xf6]),
        (
            "state: tags 0 to 3 over content their definitions forbid (tags are not checked)",
            "s",
            600,
            vec![0x84, 0xc0, 0x00, 0xc1, 0x61, 0x78, 0xc2, 0x01, 0xc3, 0xf6],
        ),
        (
            "state: unassigned simple values E0, F3, F8 21 and F8 FF are well-formed",
            "s",
            600,
            vec![0x84, 0xe0, 0xf3, 0xf8, 0x21, 0xf8, 0xff],
        ),
        (
            "state: an array at level 16 reached through map keys",
            "s",
            600,
            [vec![0xa1; 15], vec![0x81, 0x00], vec![0x00; 15]].concat(),
        ),
        (
            "lifetime 24, the least in a one-byte head (18 18)",
            "s",
            24,
            vec![0xf6],
        ),
        (
            "lifetime 256, the least in a two-byte head (19 01 00)",
            "s",
            256,
            vec![0xf6],
        ),
        (
            "lifetime 65536, the least in a four-byte head (1a 00 01 00 00)",
            "s",
            65_536,
            vec![0xf6],
        ),
        (
            "lifetime = max_lifetime",
            "s",
            Policy::DEFAULT_MAX_LIFETIME,
            vec![0xf6],
        ),
    ];
    let step256 = "x".repeat(256);
    for (key_id, alg) in [(1u32, "hmac"), (2, "xchacha")] {
        for (name, step, lifetime, state) in &accepted_bodies {
            let step = if step.is_empty() {
                step256.as_str()
            } else {
                step
            };
            let body = claims_body(NOW, *lifetime, step, state);
            let token = forge(
                keys,
                key_id,
                &body,
                hmac.tool.as_bytes(),
                REFERENCE_CONTEXT,
                &random_for(keys, key_id, 7),
            );
            accepted.push(accept_token(
                &format!("{alg}: key holder's body: {name}"),
                &token,
                NOW,
                step,
                NOW,
                NOW + lifetime,
                state,
            ));
        }
    }
    let uint_token = forge(
        keys,
        1,
        &claims_body(NOW, 600, "s", &[0x05]),
        hmac.tool.as_bytes(),
        REFERENCE_CONTEXT,
        &[],
    );
    accepted.push(AcceptedVector {
        decode_as: Some("uint".into()),
        ..accept_token(
            "step 14: the caller wants an unsigned integer and gets 5",
            &uint_token,
            NOW,
            "s",
            NOW,
            NOW + 600,
            &[0x05],
        )
    });
    let nfc_token = forge(
        keys,
        1,
        &claims_body(NOW, 600, "café", &[0xf6]),
        hmac.tool.as_bytes(),
        REFERENCE_CONTEXT,
        &[],
    );
    accepted.push(AcceptedVector {
        expected_step: Some("café".into()),
        ..accept_token(
            "step 13: the expected step, byte for byte",
            &nfc_token,
            NOW,
            "café",
            NOW,
            NOW + 600,
            &[0xf6],
        )
    });
    for s in sealed {
        accepted.push(unseal_accepted(s, &format!("unseal: {}", s.name), None));
    }

    accepted
}
