//! The claims envelope of a state token (FORMAT.md §5): the CBOR map
//! `{1: issued_at, 2: lifetime, 3: step, 4: state}`, written and read in one
//! canonical form.

use alloc::vec::Vec;

use crate::cbor::{Cursor, check_state_item, push_head};
use crate::error::Refusal;
use crate::types::MAX_STEP_LEN;

const MAP4: u8 = 0xa4;

/// Appends the envelope up to and including the state's map key; the caller
/// appends the state's CBOR item.
pub(crate) fn push_claims_prefix(out: &mut Vec<u8>, issued_at: u64, lifetime: u64, step: &str) {
    out.push(MAP4);
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
    pub(crate) issued_at: u64,
    pub(crate) lifetime: u64,
    pub(crate) step: &'a str,
    /// The state's CBOR data item, exactly.
    pub(crate) state: &'a [u8],
}

/// Parses an authenticated claims envelope strictly: canonical keys in order,
/// minimal integers, a UTF-8 step and exactly one state item.
pub(crate) fn parse_claims(plain: &[u8]) -> Result<Claims<'_>, Refusal> {
    let mut c = Cursor::new(plain);
    let malformed = |_| Refusal::Malformed("claims are not a canonical v1 envelope");
    (|| {
        if c.byte()? != MAP4 || c.byte()? != 0x01 {
            return Err("claims map header");
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
        push_claims_prefix(&mut out, 1_764_460_800, 600, "confirm");
        out.extend_from_slice(&[0xa1, 0x61, b'a', 0x05]);
        let c = parse_claims(&out).unwrap();
        assert_eq!(
            (c.issued_at, c.lifetime, c.step),
            (1_764_460_800, 600, "confirm")
        );
        assert_eq!(c.state, &[0xa1, 0x61, b'a', 0x05]);
    }
}
