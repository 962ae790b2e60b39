//! Vectors whose own `policy` leaves knobs out, so that each FORMAT.md §8
//! default (`max_token_len` 8192, `clock_leeway` 60, `max_lifetime` 86400)
//! decides the outcome on both sides, and step 1's limit counted in bytes.

use reqstate::Policy;

use super::accepted::accept_claims;
use super::invalid::invalid;
use super::minted::{Minted, mint_vector_at, reference};
use super::{NOW, REFERENCE_CONTEXT};
use crate::schema::{AcceptedVector, InvalidVector, VectorPolicy};

/// A policy giving only `max_token_len` (the leeway and lifetime default).
fn only_len(len: usize) -> Option<VectorPolicy> {
    Some(VectorPolicy {
        max_token_len: Some(len),
        ..VectorPolicy::default()
    })
}

/// A policy giving only `max_lifetime` (the length and leeway default).
fn only_lifetime(secs: u64) -> Option<VectorPolicy> {
    Some(VectorPolicy {
        max_lifetime: Some(secs),
        ..VectorPolicy::default()
    })
}

/// A policy giving only `clock_leeway` (the length and lifetime default).
fn only_leeway(secs: u64) -> Option<VectorPolicy> {
    Some(VectorPolicy {
        clock_leeway: Some(secs),
        ..VectorPolicy::default()
    })
}

/// Appends the vectors, to `bad` (refused) and `accepted`.
pub(super) fn defaults(
    m: &Minted,
    bad: &mut Vec<InvalidVector>,
    accepted: &mut Vec<AcceptedVector>,
) {
    let hmac = m.hmac();
    let leeway = Policy::DEFAULT_CLOCK_LEEWAY;
    let limit = Policy::DEFAULT_MAX_TOKEN_LEN;
    let with = |mut v: InvalidVector, now: u64, policy: Option<VectorPolicy>| {
        v.now = now;
        v.policy = policy;
        v
    };

    // Step 1 counts bytes: 8191 ASCII characters and one of two bytes are
    // 8192 characters but 8193 bytes. Counted in characters, step 2 would
    // refuse the `é` as `malformed` instead.
    bad.push(invalid(
        hmac,
        "step 1: the limit counts bytes (8191 ASCII characters and a two-byte character)",
        format!("{}é", "A".repeat(limit - 1)),
        "too_large",
    ));

    // max_token_len defaults to 8192.
    bad.push(with(
        invalid(
            hmac,
            "§8 default max_token_len: a policy without it refuses 8193 characters",
            "A".repeat(limit + 1),
            "too_large",
        ),
        hmac.now,
        only_leeway(leeway),
    ));
    bad.push(with(
        invalid(
            hmac,
            "§8 default max_token_len: a policy without it decodes 8192 characters",
            "A".repeat(limit),
            "unsupported_version",
        ),
        hmac.now,
        Some(VectorPolicy::default()),
    ));

    // clock_leeway defaults to 60 s, on both sides of the window.
    let st = hex::decode(&hmac.state_cbor).expect("hex");
    let accept = |name: &str, now: u64, policy: Option<VectorPolicy>| AcceptedVector {
        policy,
        ..accept_claims(hmac, name, now, &st)
    };
    accepted.push(accept(
        "§8 default clock_leeway: a policy without it accepts now = expires_at + 59",
        hmac.expires_at + leeway - 1,
        only_len(limit),
    ));
    bad.push(with(
        invalid(
            hmac,
            "§8 default clock_leeway: a policy without it refuses now = expires_at + 60",
            hmac.token.clone(),
            "expired",
        ),
        hmac.expires_at + leeway,
        only_len(limit),
    ));
    accepted.push(accept(
        "§8 default clock_leeway: a policy without it accepts issued_at = now + 60",
        hmac.issued_at - leeway,
        only_lifetime(Policy::DEFAULT_MAX_LIFETIME),
    ));
    bad.push(with(
        invalid(
            hmac,
            "§8 default clock_leeway: a policy without it refuses issued_at = now + 61",
            hmac.token.clone(),
            "not_yet_valid",
        ),
        hmac.issued_at - leeway - 1,
        only_lifetime(Policy::DEFAULT_MAX_LIFETIME),
    ));

    // max_lifetime defaults to 86400 s: genuine tokens of 86400 and 86401 s.
    let long = Some(VectorPolicy {
        max_lifetime: Some(Policy::MAX_MAX_LIFETIME),
        ..VectorPolicy::default()
    });
    for (ttl, fail) in [
        (Policy::DEFAULT_MAX_LIFETIME, None),
        (Policy::DEFAULT_MAX_LIFETIME + 1, Some("lifetime_too_long")),
    ] {
        let t = mint_vector_at(
            &m.keys,
            "",
            hmac.key_id,
            &hmac.tool,
            &hmac.step,
            reference(),
            ttl,
            REFERENCE_CONTEXT,
            0,
            NOW,
            long,
        );
        match fail {
            None => accepted.push(AcceptedVector {
                policy: only_leeway(leeway),
                ..accept_claims(
                    &t,
                    &format!(
                        "§8 default max_lifetime: a policy without it accepts a lifetime of {ttl} s"
                    ),
                    NOW,
                    &st,
                )
            }),
            Some(reason) => bad.push(with(
                invalid(
                    &t,
                    &format!(
                        "§8 default max_lifetime: a policy without it refuses a lifetime of {ttl} s"
                    ),
                    t.token.clone(),
                    reason,
                ),
                NOW,
                only_leeway(leeway),
            )),
        }
    }
}
