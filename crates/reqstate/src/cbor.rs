//! The CBOR walker: reads heads, checks canonical integers, and skips one
//! well-formed data item without building it, bounded in depth. Used on
//! authenticated bytes only (the claims envelope and the state), and on a
//! state about to be minted. Reads nothing from the rest of the crate but
//! its depth limit.

use alloc::vec::Vec;

use crate::types::MAX_STATE_DEPTH;

/// Appends a CBOR head of `major` type with `value`, minimally encoded.
pub(crate) fn push_head(out: &mut Vec<u8>, major: u8, value: u64) {
    let m = major << 5;
    if value < 24 {
        out.push(m | value as u8);
    } else if value <= 0xff {
        out.extend_from_slice(&[m | 24, value as u8]);
    } else if value <= 0xffff {
        out.push(m | 25);
        out.extend_from_slice(&(value as u16).to_be_bytes());
    } else if value <= 0xffff_ffff {
        out.push(m | 26);
        out.extend_from_slice(&(value as u32).to_be_bytes());
    } else {
        out.push(m | 27);
        out.extend_from_slice(&value.to_be_bytes());
    }
}

pub(crate) struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    /// A cursor at the start of `bytes`.
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Cursor { bytes, pos: 0 }
    }

    /// How many bytes have been read.
    pub(crate) fn position(&self) -> usize {
        self.pos
    }

    pub(crate) fn byte(&mut self) -> Result<u8, &'static str> {
        let b = *self.bytes.get(self.pos).ok_or("truncated CBOR")?;
        self.pos += 1;
        Ok(b)
    }

    pub(crate) fn take(&mut self, n: u64) -> Result<&'a [u8], &'static str> {
        let remaining = self.bytes.len() - self.pos;
        let n = usize::try_from(n)
            .ok()
            .filter(|n| *n <= remaining)
            .ok_or("truncated CBOR")?;
        let slice = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(slice)
    }

    /// Reads an initial byte's argument. Returns (major, additional info, value);
    /// for indefinite lengths (ai 31) the value is 0.
    fn head(&mut self) -> Result<(u8, u8, u64), &'static str> {
        let ib = self.byte()?;
        let (major, ai) = (ib >> 5, ib & 0x1f);
        let value = match ai {
            0..=23 => u64::from(ai),
            24 => u64::from(self.byte()?),
            25 => u64::from(u16::from_be_bytes(self.fixed()?)),
            26 => u64::from(u32::from_be_bytes(self.fixed()?)),
            27 => u64::from_be_bytes(self.fixed()?),
            31 => 0,
            _ => return Err("reserved CBOR additional information"),
        };
        Ok((major, ai, value))
    }

    fn fixed<const N: usize>(&mut self) -> Result<[u8; N], &'static str> {
        let s = self.take(N as u64)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    /// A definite, minimally encoded unsigned integer or length of `major`.
    pub(crate) fn canonical(&mut self, major: u8) -> Result<u64, &'static str> {
        let (m, ai, v) = self.head()?;
        if m != major || ai == 31 {
            return Err("unexpected CBOR type in claims");
        }
        let minimal = match ai {
            24 => v >= 24,
            25 => v > 0xff,
            26 => v > 0xffff,
            27 => v > 0xffff_ffff,
            _ => true,
        };
        if !minimal {
            return Err("non-minimal CBOR integer in claims");
        }
        Ok(v)
    }

    /// Skips one well-formed data item, at most `depth` levels deep.
    fn skip_item(&mut self, depth: usize) -> Result<(), &'static str> {
        let (major, ai, value) = self.head()?;
        match (major, ai) {
            (0 | 1, 31) => Err("indefinite length on an integer"),
            (0 | 1, _) => Ok(()),
            (2 | 3, 31) => loop {
                let (m, cai, len) = self.head()?;
                if m == 7 && cai == 31 {
                    return Ok(());
                }
                if m != major || cai == 31 {
                    return Err("bad chunk in indefinite-length string");
                }
                self.string(major, len)?;
            },
            (2 | 3, _) => self.string(major, value),
            (4..=6, _) if depth == 0 => Err("state nested too deeply"),
            (4 | 5, 31) => loop {
                if self.bytes.get(self.pos) == Some(&0xff) {
                    self.pos += 1;
                    return Ok(());
                }
                let per_entry = if major == 5 { 2 } else { 1 };
                for _ in 0..per_entry {
                    self.skip_item(depth - 1)?;
                }
            },
            (4 | 5, _) => {
                let per_entry: u64 = if major == 5 { 2 } else { 1 };
                let items = value.checked_mul(per_entry).ok_or("CBOR length overflow")?;
                // Every item takes at least one byte: refuse counts the input cannot hold.
                if items > (self.bytes.len() - self.pos) as u64 {
                    return Err("truncated CBOR");
                }
                for _ in 0..items {
                    self.skip_item(depth - 1)?;
                }
                Ok(())
            }
            (6, 31) => Err("indefinite length on a tag"),
            (6, _) => self.skip_item(depth - 1),
            (7, 24) if value < 32 => Err("non-minimal simple value"),
            (7, 31) => Err("unexpected CBOR break"),
            (7, _) => Ok(()),
            _ => Err("unknown CBOR major type"),
        }
    }

    fn string(&mut self, major: u8, len: u64) -> Result<(), &'static str> {
        let s = self.take(len)?;
        if major == 3 && !is_utf8(s) {
            return Err("text string is not UTF-8");
        }
        Ok(())
    }
}

/// Whether `bytes` is UTF-8: map keys and short strings are ASCII, which a
/// plain loop checks in a fraction of `from_utf8`'s fixed cost; anything
/// else goes to `from_utf8`.
pub(crate) fn is_utf8(bytes: &[u8]) -> bool {
    (bytes.len() <= 32 && bytes.iter().all(u8::is_ascii)) || core::str::from_utf8(bytes).is_ok()
}

/// Checks that `item` is exactly one well-formed CBOR data item no deeper than
/// [`MAX_STATE_DEPTH`].
pub(crate) fn check_state_item(item: &[u8]) -> Result<(), &'static str> {
    let mut c = Cursor::new(item);
    c.skip_item(MAX_STATE_DEPTH)?;
    if c.pos != item.len() {
        return Err("trailing bytes after the state");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deep_nesting_is_refused() {
        let mut deep = alloc::vec![0x81u8; MAX_STATE_DEPTH + 1];
        deep.push(0x00);
        assert!(check_state_item(&deep).is_err());
        let ok = &deep[1..];
        assert!(check_state_item(ok).is_ok());
    }

    #[test]
    fn huge_declared_lengths_do_not_allocate_or_loop() {
        assert!(check_state_item(&[0x9b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]).is_err());
        assert!(check_state_item(&[0x5b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]).is_err());
        assert!(check_state_item(&[0xbb, 0x80, 0, 0, 0, 0, 0, 0, 0]).is_err());
    }

    #[test]
    fn malformed_cbor_items_are_refused() {
        for bad in [
            &[0xff][..],               // stray break
            &[0x1c],                   // reserved additional info
            &[0x63, b'a', b'b'],       // truncated text
            &[0x62, 0xc3, 0x28],       // invalid UTF-8
            &[0x9f, 0x01],             // unterminated indefinite array
            &[0xf8, 0x05],             // non-minimal simple value
            &[0x01, 0x02],             // trailing bytes
            &[0x5f, 0x61, b'a', 0xff], // text chunk in a byte string
        ] {
            assert!(check_state_item(bad).is_err(), "{bad:02x?} accepted");
        }
        for good in [
            &[0x9f, 0x01, 0xff][..],
            &[0x5f, 0x41, 1, 0xff],
            &[0xc1, 0x1a, 0, 0, 0, 1],
        ] {
            assert!(check_state_item(good).is_ok(), "{good:02x?} refused");
        }
    }
}
