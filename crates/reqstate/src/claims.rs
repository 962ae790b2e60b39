//! The claims envelope of a state token (FORMAT.md §5): the CBOR map
//! `{1: issued_at, 2: lifetime, 3: step, 4: state}`, and of a single-use
//! token (§5.1) with `0: token_id` first, written and read in one canonical
//! form.

use alloc::vec::Vec;

use crate::cbor::{Cursor, check_state_item, push_head};
use crate::error::Refusal;
use crate::types::{MAX_STEP_LEN, TOKEN_ID_LEN};

const MAP4: u8 = 0xa4;
const MAP5: u8 = 0xa5;
/// The head of a 16-byte byte string.
const BYTES16: u8 = 0x40 | TOKEN_ID_LEN as u8;

/// Appends the envelope up to and including the state's map key; the caller
/// appends the state's CBOR item. A single-use token's id comes first.
pub(crate) fn push_claims_prefix(
    out: &mut Vec<u8>,
    token_id: Option<&[u8; TOKEN_ID_LEN]>,
    issued_at: u64,
    lifetime: u64,
    step: &str,
) {
    match token_id {
        None => out.push(MAP4),
        Some(id) => {
            out.extend_from_slice(&[MAP5, 0x00, BYTES16]);
            out.extend_from_slice(id);
        }
    }
    out.push(0x01);
    push_head(out, 0, issued_at);
    out.push(0x02);
    push_head(out, 0, lifetime);
    out.push(0x03);
    push_head(out, 3, step.len() as u64);
    out.extend_from_slice(step.as_bytes());
    out.push(0x04);
}

/// The claims of a verified state token, borrowed from its plaintext.
pub(crate) struct Claims<'a> {
    /// A single-use token's id; `None` for other state tokens.
    pub(crate) token_id: Option<[u8; TOKEN_ID_LEN]>,
    pub(crate) issued_at: u64,
    pub(crate) lifetime: u64,
    pub(crate) step: &'a str,
    /// The state's CBOR data item, exactly.
    pub(crate) state: &'a [u8],
}

/// Parses an authenticated claims envelope strictly: canonical keys in order,
/// minimal integers, a UTF-8 step and exactly one state item; with a
/// 16-byte token id first if `single_use`.
pub(crate) fn parse_claims(plain: &[u8], single_use: bool) -> Result<Claims<'_>, Refusal> {
    let mut c = Cursor::new(plain);
    let malformed = |_| Refusal::Malformed("claims are not a canonical v1 envelope");
    (|| {
        let token_id = if single_use {
            if c.byte()? != MAP5 || c.byte()? != 0x00 || c.byte()? != BYTES16 {
                return Err("claims map header");
            }
            let mut id = [0u8; TOKEN_ID_LEN];
            id.copy_from_slice(c.take(TOKEN_ID_LEN as u64)?);
            Some(id)
        } else {
            if c.byte()? != MAP4 {
                return Err("claims map header");
            }
            None
        };
        if c.byte()? != 0x01 {
            return Err("claims key 1");
        }
        let issued_at = c.canonical(0)?;
        if c.byte()? != 0x02 {
            return Err("claims key 2");
        }
        let lifetime = c.canonical(0)?;
        if c.byte()? != 0x03 {
            return Err("claims key 3");
        }
        let step_len = c.canonical(3)?;
        if step_len == 0 || step_len > MAX_STEP_LEN as u64 {
            return Err("step length out of range");
        }
        let step = core::str::from_utf8(c.take(step_len)?).map_err(|_| "step is not UTF-8")?;
        if c.byte()? != 0x04 {
            return Err("claims key 4");
        }
        let state = &plain[c.position()..];
        check_state_item(state)?;
        Ok(Claims {
            token_id,
            issued_at,
            lifetime,
            step,
            state,
        })
    })()
    .map_err(malformed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_envelope_round_trips() {
        let mut out = Vec::new();
        push_claims_prefix(&mut out, None, 1_764_460_800, 600, "confirm");
        out.extend_from_slice(&[0xa1, 0x61, b'a', 0x05]);
        assert!(parse_claims(&out, true).is_err());
        let c = parse_claims(&out, false).unwrap();
        assert_eq!(c.token_id, None);
        assert_eq!(
            (c.issued_at, c.lifetime, c.step),
            (1_764_460_800, 600, "confirm")
        );
        assert_eq!(c.state, &[0xa1, 0x61, b'a', 0x05]);
    }

    #[test]
    fn single_use_envelope_round_trips_and_is_not_a_plain_one() {
        let id = [7u8; TOKEN_ID_LEN];
        let mut out = Vec::new();
        push_claims_prefix(&mut out, Some(&id), 1, 600, "pay");
        out.push(0xf6);
        assert_eq!(&out[..3], &[0xa5, 0x00, 0x50]);
        assert!(parse_claims(&out, false).is_err());
        let c = parse_claims(&out, true).unwrap();
        assert_eq!(
            (c.token_id, c.step, c.state),
            (Some(id), "pay", &[0xf6][..])
        );
        // A 15-byte id (head 0x4f) is refused.
        let mut short = out.clone();
        short[2] = 0x4f;
        short.remove(3);
        assert!(parse_claims(&short, true).is_err());
    }
}
