//! `invalid` vectors on both sides of every rule of FORMAT.md §2-§8 that a
//! token's bytes or the caller's arguments reach before the claims: names
//! start with the section or step they pin.

use reqstate::Policy;

use super::codec::default_vector_policy;
use super::forge::with_key_id;
use super::invalid::invalid;
use super::minted::Minted;
use crate::schema::{InvalidVector, VectorPolicy};

/// Appends the rule vectors to `bad`, in file order.
pub(super) fn rules(m: &Minted, bad: &mut Vec<InvalidVector>) {
    let (valid, sealed, retired) = (&m.valid, &m.sealed, &m.retired);
    let (hmac, xchacha) = (m.hmac(), m.xchacha());
    // The two-byte key id's token: its byte length is not a multiple of 3.
    let short = &valid[2];
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let raw_of = |t: &str| b64.decode(t).expect("valid token");
    let enc = |b: &[u8]| b64.encode(b);
    let hmac_raw = raw_of(&hmac.token);
    let xchacha_raw = raw_of(&xchacha.token);
    let rule = |name: &str, token: String, expect: &str| invalid(hmac, name, token, expect);
    let with_header = |h: u8| {
        let mut r = hmac_raw.clone();
        r[0] = h;
        enc(&r)
    };
    let with_bytes = |bytes: &[u8]| enc(bytes);
    let pad = |prefix: &[u8], n: usize| {
        let mut r = prefix.to_vec();
        r.extend(std::iter::repeat_n(0x5au8, n));
        enc(&r)
    };

    // §2 base64url.
    let dash = valid
        .iter()
        .find(|v| v.token.contains('-') && v.policy.is_none())
        .expect("a vector token with '-'");
    let underscore = valid
        .iter()
        .find(|v| v.token.contains('_') && v.policy.is_none())
        .expect("a vector token with '_'");
    bad.push(invalid(
        dash,
        "§2: '+' in place of '-' (standard alphabet)",
        dash.token.replacen('-', "+", 1),
        "malformed",
    ));
    bad.push(invalid(
        underscore,
        "§2: '/' in place of '_' (standard alphabet)",
        underscore.token.replacen('_', "/", 1),
        "malformed",
    ));
    assert_eq!(short.token_chars % 4, 3);
    bad.push(invalid(
        short,
        "§2: correct padding '=' appended",
        format!("{}=", short.token),
        "malformed",
    ));
    bad.push(rule(
        "§2: line feed inside",
        format!("{}\n{}", &hmac.token[..40], &hmac.token[40..]),
        "malformed",
    ));
    bad.push(rule(
        "§2: trailing space",
        format!("{} ", hmac.token),
        "malformed",
    ));
    assert_eq!(hmac.token_chars % 4, 0);
    bad.push(rule(
        "§2: 4n+1 characters",
        format!("{}A", hmac.token),
        "malformed",
    ));
    bad.push(rule("§2: 4n+1 characters, 1", "A".into(), "malformed"));

    // §3 header, §8 step 3 and its order.
    bad.push(rule(
        "§3: version 0",
        with_header(0x01),
        "unsupported_version",
    ));
    bad.push(rule(
        "§3: version 15",
        with_header(0xf1),
        "unsupported_version",
    ));
    bad.push(rule("§3: reserved kind 3", with_header(0x1d), "malformed"));
    bad.push(rule(
        "§3: algorithm identifier 0",
        with_header(0x10),
        "unsupported_algorithm",
    ));
    bad.push(rule(
        "step 3 order: version 2, kind 3, algorithm 0",
        with_header(0x2c),
        "unsupported_version",
    ));
    bad.push(rule(
        "step 3 order: version 0, kind 2, algorithm 1",
        with_header(0x09),
        "unsupported_version",
    ));
    bad.push(rule(
        "step 3: kind 2 is not reserved: kind 2, algorithm 0",
        with_header(0x18),
        "unsupported_algorithm",
    ));
    bad.push(rule(
        "step 3 order: kind 3, algorithm 3",
        with_header(0x1f),
        "malformed",
    ));
    bad.push(rule(
        "step 3 before 4: header byte only, version 2",
        with_bytes(&[0x21]),
        "unsupported_version",
    ));
    bad.push(rule(
        "step 3 before 4: header byte only, algorithm 0",
        with_bytes(&[0x10]),
        "unsupported_algorithm",
    ));
    bad.push(rule(
        "step 3 before 4: header byte only, kind 3",
        with_bytes(&[0x1e]),
        "malformed",
    ));

    // §3 key id, §8 step 4.
    bad.push(rule(
        "step 4: header byte only (key id missing)",
        with_bytes(&[0x11]),
        "malformed",
    ));
    bad.push(rule(
        "step 4: key id truncated after 3 continuation bytes",
        with_bytes(&[0x11, 0x80, 0x80, 0x80]),
        "malformed",
    ));
    bad.push(rule(
        "step 4: five-byte key id 2^28 is read (unknown)",
        with_key_id(&hmac.token, &[0x80, 0x80, 0x80, 0x80, 0x01]),
        "unknown_key",
    ));
    bad.push(rule(
        "step 4: five-byte key id not minimal",
        with_key_id(&hmac.token, &[0x81, 0x80, 0x80, 0x80, 0x00]),
        "malformed",
    ));
    bad.push(rule(
        "step 4: key id 2^35 - 1",
        with_key_id(&hmac.token, &[0xff, 0xff, 0xff, 0xff, 0x7f]),
        "malformed",
    ));
    bad.push(rule(
        "step 4: two-byte key id 0",
        with_key_id(&hmac.token, &[0x80, 0x00]),
        "malformed",
    ));

    // §8 step 5, by the header's algorithm.
    bad.push(rule(
        "step 5: hmac, prefix + 15 bytes",
        enc(&hmac_raw[..17]),
        "malformed",
    ));
    bad.push(rule(
        "step 5: hmac, prefix + 16 bytes (empty body) reaches the tag",
        enc(&hmac_raw[..18]),
        "authentication_failed",
    ));
    bad.push(invalid(
        xchacha,
        "step 5: xchacha, prefix + 39 bytes",
        enc(&xchacha_raw[..41]),
        "malformed",
    ));
    bad.push(invalid(
        xchacha,
        "step 5: xchacha, prefix + 40 bytes (empty body) reaches the tag",
        enc(&xchacha_raw[..42]),
        "authentication_failed",
    ));
    bad.push(rule(
        "step 5 uses the header's algorithm: hmac header, xchacha key 2, 20 bytes",
        pad(&[0x11, 0x02], 18),
        "algorithm_mismatch",
    ));
    bad.push(rule(
        "step 5 uses the header's algorithm: xchacha header, hmac key 1, 20 bytes",
        pad(&[0x12, 0x01], 18),
        "malformed",
    ));
    bad.push(rule(
        "step 5 before 6: short sealed token to verify",
        pad(&[0x15, 0x01], 15),
        "malformed",
    ));
    // §8 steps 6 and 7 and their order.
    bad.push(rule(
        "step 6 before 7: sealed token under unknown key 5 to verify",
        pad(&[0x15, 0x05], 16),
        "wrong_kind",
    ));
    let mut unseal_retired = invalid(
        retired,
        "step 6 before 7: state token under retired key 3 to unseal",
        retired.token.clone(),
        "wrong_kind",
    );
    unseal_retired.operation = "unseal".into();
    unseal_retired.tool = String::new();
    bad.push(unseal_retired);
    bad.push(rule(
        "step 7: unknown key 5",
        pad(&[0x11, 0x05], 16),
        "unknown_key",
    ));
    bad.push(rule(
        "step 7 order: retired key 3 (xchacha) named by an hmac header",
        pad(&[0x11, 0x03], 16),
        "retired_key",
    ));

    // §8 steps 0 and 1.
    let mut no_tool = rule("step 0: empty tool", hmac.token.clone(), "invalid_argument");
    no_tool.tool = String::new();
    bad.push(no_tool);
    let mut long_tool = rule(
        "step 0: tool of 257 bytes",
        hmac.token.clone(),
        "invalid_argument",
    );
    long_tool.tool = "t".repeat(257);
    bad.push(long_tool);
    let mut long_context = rule(
        "step 0: context of 65537 bytes",
        hmac.token.clone(),
        "invalid_argument",
    );
    long_context.context = hex::encode(vec![0u8; 65_537]);
    bad.push(long_context);
    let mut before_size = rule(
        "step 0 before 1: empty tool and 8193 characters",
        "A".repeat(Policy::DEFAULT_MAX_TOKEN_LEN + 1),
        "invalid_argument",
    );
    before_size.tool = String::new();
    bad.push(before_size);
    let mut long_aad = invalid(
        hmac,
        "step 0: unseal with an aad of 65537 bytes",
        sealed[0].token.clone(),
        "invalid_argument",
    );
    long_aad.operation = "unseal".into();
    long_aad.tool = String::new();
    long_aad.context = hex::encode(vec![0u8; 65_537]);
    bad.push(long_aad);
    bad.push(rule(
        "step 1: exactly max_token_len characters are decoded",
        "A".repeat(Policy::DEFAULT_MAX_TOKEN_LEN),
        "unsupported_version",
    ));
    bad.push(rule(
        "step 1 before 2: 8193 characters outside the alphabet",
        "!".repeat(Policy::DEFAULT_MAX_TOKEN_LEN + 1),
        "too_large",
    ));
    let mut one_over = rule(
        "step 1: max_token_len + 1 characters (policy 75, token 76)",
        hmac.token.clone(),
        "too_large",
    );
    one_over.policy = Some(VectorPolicy {
        max_token_len: Some(75),
        ..default_vector_policy()
    });
    bad.push(one_over);

    // §8 steps 10-14 on genuine tokens.
    let leeway = Policy::DEFAULT_CLOCK_LEEWAY;
    let mut early_step = rule(
        "step 11 before 13: not yet valid and wrong step",
        hmac.token.clone(),
        "not_yet_valid",
    );
    early_step.now = hmac.issued_at - leeway - 1;
    early_step.expected_step = Some("amount".into());
    bad.push(early_step);
    let mut late_step = rule(
        "step 12 before 13: expired and wrong step",
        hmac.token.clone(),
        "expired",
    );
    late_step.now = hmac.expires_at + leeway;
    late_step.expected_step = Some("amount".into());
    bad.push(late_step);
    let end = valid
        .iter()
        .find(|v| v.now == u64::MAX - 1)
        .expect("end-of-clock vector");
    let mut saturated = invalid(
        end,
        "step 12: now = 2^64 - 1 >= expires_at + leeway saturated to 2^64 - 1",
        end.token.clone(),
        "expired",
    );
    saturated.now = u64::MAX;
    bad.push(saturated);
    for (name, expected) in [
        ("step 13: empty expected step", ""),
        ("step 13: expected step differs in case", "Confirm"),
        ("step 13: expected step with a trailing space", "confirm "),
    ] {
        let mut v = rule(name, hmac.token.clone(), "wrong_step");
        v.expected_step = Some(expected.into());
        bad.push(v);
    }
    let mut not_uint = rule(
        "step 14: state is a map, the caller wants an unsigned integer",
        hmac.token.clone(),
        "state_decoding",
    );
    not_uint.decode_as = Some("uint".into());
    bad.push(not_uint);
    let mut step_first = rule(
        "step 13 before 14: wrong step and a state that does not decode",
        hmac.token.clone(),
        "wrong_step",
    );
    step_first.decode_as = Some("uint".into());
    step_first.expected_step = Some("amount".into());
    bad.push(step_first);
}
