//! Random scheduled keyrings: a keyring TOML text and an instant built from
//! arbitrary bytes, for the `keyring_schedule` target and for the Rust side
//! of the Rust-against-TypeScript runner (`fuzz/differential/`), which
//! includes this file by path so that both read the same bytes the same way.
//!
//! The bytes choose, per key (one to five of them): the id, the status, the
//! algorithm (or none), a valid secret, and `mint_from`, `retire_at` and
//! `created` instants written in one of many forms: the canonical
//! `YYYY-MM-DDTHH:MM:SSZ`, lower-case `t`/`z`, a space for `T`, numeric
//! offsets, fractions of a second, local date-times and dates, quoted
//! strings, integers, impossible dates (February 30, second 60, hour 24)
//! and the ends of the range. Keys are written as `[[key]]` tables or as one
//! array of inline tables. The instant is near one of the written instants
//! (one second before, at, after) or any second.

use std::fmt::Write as _;

use reqstate::{KeyStatus, Keyring, Policy};

/// 2026-12-01T12:00:00Z: the instants are built around it.
pub const BASE: u64 = 1_796_126_400;

/// Reads the input front to back; past its end every read is zero.
pub struct Bytes<'a>(pub &'a [u8]);

impl Bytes<'_> {
    /// The next byte, or zero.
    pub fn byte(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }

    /// The next two bytes, little-endian.
    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.byte(), self.byte()])
    }

    /// The next eight bytes, big-endian.
    pub fn u64(&mut self) -> u64 {
        (0..8).fold(0, |v, _| (v << 8) | u64::from(self.byte()))
    }
}

/// A proleptic Gregorian date-time of unix seconds `t` (UTC), as numbers.
fn civil(t: u64) -> (i64, u32, u32, u32, u32, u32) {
    let days = (t / 86_400) as i64;
    let rem = t % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (
        year,
        month,
        day,
        (rem / 3600) as u32,
        (rem % 3600 / 60) as u32,
        (rem % 60) as u32,
    )
}

/// One instant near [`BASE`] (or at the ends of the range), and the text
/// the keyring writes for it. The second is the unix time the text means
/// when it is a valid offset date-time in whole seconds, so the `now` can
/// be put next to it.
fn instant(b: &mut Bytes<'_>) -> (String, u64) {
    let t = match b.byte() % 8 {
        0 => BASE,
        1..=4 => BASE + u64::from(b.u16()) * 60,
        5 => BASE + u64::from(b.u16()),
        6 => [
            0u64,
            1,
            253_402_300_799,
            253_402_300_800,
            951_782_400,
            4_107_542_400,
        ][usize::from(b.byte()) % 6],
        _ => b.u64() % 300_000_000_000,
    };
    let (y, mo, d, h, mi, s) = civil(t);
    let date = format!("{y:04}-{mo:02}-{d:02}");
    let time = format!("{h:02}:{mi:02}:{s:02}");
    // Mostly the canonical form, so that a text usually has at most one
    // odd instant and the reader's verdict is about that one.
    let form = b.byte();
    let form = form.saturating_sub(128);
    let text = match form % 24 {
        0..=7 => format!("{date}T{time}Z"),
        8 => format!("{date}t{time}z"),
        9 => format!("{date} {time}Z"),
        10 => format!("{date}T{time}+00:00"),
        11 => format!("{date}T{time}-00:00"),
        12 => {
            // The same instant written at another offset.
            let minutes = i64::from(b.byte() % 48) * 30 - 720;
            let shifted = (t as i64 + minutes * 60).max(0) as u64;
            let (y, mo, d, h, mi, s) = civil(shifted);
            let sign = if minutes < 0 { '-' } else { '+' };
            let m = minutes.unsigned_abs();
            format!(
                "{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}{sign}{:02}:{:02}",
                m / 60,
                m % 60
            )
        }
        13 => format!(
            "{date}T{time}.{}Z",
            ["0", "5", "000", "999999999", "1", "0001", "000000001"][usize::from(b.byte()) % 7]
        ),
        14 => format!("{date}T{time}"),
        15 => date.clone(),
        16 => format!("\"{date}T{time}Z\""),
        17 => t.to_string(),
        18 => format!("{y:04}-02-{}T{time}Z", 28 + u32::from(b.byte() % 4)),
        19 => format!("{date}T{h:02}:{mi:02}:60Z"),
        20 => format!("{date}T24:00:00Z"),
        21 => format!(
            "{y:04}-{:02}-31T{time}Z",
            [4u32, 6, 9, 11, 13, 0][usize::from(b.byte()) % 6]
        ),
        22 => format!("{date}T{h:02}:{mi:02}Z"),
        _ => format!(
            "{:04}-{mo:02}-{d:02}T{time}Z",
            [0i64, 1969, 1970, 9999, 10000][usize::from(b.byte()) % 5]
        ),
    };
    (text, t)
}

/// A 32-byte secret of key `id`, base64: never the point of this target.
fn secret(id: u32) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s: String = (0..43)
        .map(|i| char::from(ALPHABET[((id as usize) * 7 + i * 13) % 64]))
        .collect();
    // 43 characters carry 258 bits; the last one's low 2 bits must be zero.
    s.pop();
    s.push('A');
    s.push('=');
    s
}

/// A keyring TOML text and an instant (unix seconds) built from `data`.
pub fn keyring_and_instant(data: &[u8]) -> (String, u64) {
    let mut b = Bytes(data);
    let shape = b.byte();
    let count = 1 + usize::from(shape % 5);
    let inline = shape & 0x80 != 0;
    let mut instants = Vec::new();
    let mut entries = Vec::new();
    let mut primary_written = false;
    for i in 0..count {
        let flags = b.byte();
        let id = if flags & 0x80 != 0 {
            u32::from(b.byte())
        } else {
            i as u32 + 1
        };
        // Mostly one primary (the first key), then active keys, some retired.
        let status = match (i, flags % 16) {
            (_, 15) => "retired",
            (_, 14) => "primary",
            (0, _) if !primary_written => "primary",
            _ => "active",
        };
        primary_written |= status == "primary";
        let mut fields = vec![format!("id = {id}")];
        match (flags >> 3) % 4 {
            0 => fields.push("algorithm = \"hmac-sha256\"".into()),
            1 => fields.push("algorithm = \"xchacha20-poly1305\"".into()),
            _ => {}
        }
        fields.push(format!("status = \"{status}\""));
        let when = b.byte();
        // mint_from mostly on active keys, retire_at mostly on the others,
        // and now and then where the rules forbid them.
        let wants_mint_from = match status {
            "active" => when & 3 != 0,
            _ => when & 0x1f == 0x1f,
        };
        let wants_retire_at = match status {
            "retired" => when & 0x1c == 0x1c,
            _ => when & 4 != 0,
        };
        if wants_mint_from {
            let (text, t) = instant(&mut b);
            fields.push(format!("mint_from = {text}"));
            instants.push(t);
        }
        if wants_retire_at {
            let (text, t) = instant(&mut b);
            fields.push(format!("retire_at = {text}"));
            instants.push(t);
        }
        if when & 0x40 != 0 {
            let (text, _) = instant(&mut b);
            fields.push(format!("created = {text}"));
        }
        fields.push(format!("secret = \"{}\"", secret(id)));
        entries.push(fields);
    }
    let mut text = String::new();
    if shape & 0x40 != 0 {
        text.push_str("version = 1\n\n");
    }
    if inline {
        text.push_str("key = [\n");
        for fields in &entries {
            let _ = writeln!(text, "  {{ {} }},", fields.join(", "));
        }
        text.push_str("]\n");
    } else {
        for fields in &entries {
            text.push_str("[[key]]\n");
            for field in fields {
                text.push_str(field);
                text.push('\n');
            }
            text.push('\n');
        }
    }
    let now = match (b.byte() % 6, instants.is_empty()) {
        (0..=3, false) => {
            let at = instants[usize::from(b.byte()) % instants.len()];
            match b.byte() % 3 {
                0 => at.saturating_sub(1),
                1 => at,
                _ => at.saturating_add(1),
            }
        }
        (4, _) => BASE + u64::from(b.u16()) * 30,
        _ => b.u64() % 300_000_000_000,
    };
    (text, now)
}

/// Checks what the core says a loaded keyring does at `now` (panics on a
/// violation): the minting key is not retired; exactly one key has the
/// status primary at `now` and it is the minting key; a key is refused
/// exactly when its status is retired or its `retire_at` has come; every
/// other key verifies.
pub fn check_at(keyring: &Keyring, now: u64) {
    let minting = keyring.minting_key(now);
    assert!(
        !minting.is_retired_at(now),
        "key {:?} mints at {now} but is retired",
        minting.id()
    );
    let keys = keyring.keys();
    let minters: Vec<_> = keys
        .iter()
        .filter(|k| keyring.status_at(k, now) == KeyStatus::Primary)
        .map(|k| k.id())
        .collect();
    assert_eq!(
        minters,
        [minting.id()],
        "at {now} the keys that mint are {minters:?}"
    );
    for key in &keys {
        let refused =
            key.status() == KeyStatus::Retired || key.retire_at().is_some_and(|at| now >= at);
        assert_eq!(
            key.is_retired_at(now),
            refused,
            "key {:?} at {now}",
            key.id()
        );
        assert_eq!(
            keyring.status_at(key, now) == KeyStatus::Retired,
            refused,
            "key {:?} at {now}",
            key.id()
        );
    }
}

/// What the core makes of a keyring text at `now`, as one JSON object: the
/// line the differential runner compares with the TypeScript reader's.
/// `{"ok": false, "error": …}` for a refused text; otherwise the minting
/// key's id, the ids of the keys that verify (ascending), and whether the
/// schedule passes the check against the default policy (24 h lifetime,
/// 60 s leeway). Runs [`check_at`] at `now` and around every transition.
pub fn evaluate(text: &str, now: u64) -> serde_json::Value {
    let keyring = match Keyring::from_toml(text) {
        Ok(keyring) => keyring,
        Err(e) => {
            assert_eq!(e.reason(), "invalid_keyring");
            assert!(!e.message().is_empty(), "a keyring error without a message");
            return serde_json::json!({ "ok": false, "error": e.to_string() });
        }
    };
    check_at(&keyring, now);
    for t in keyring.transitions() {
        for at in [t.at.saturating_sub(1), t.at, t.at.saturating_add(1)] {
            check_at(&keyring, at);
        }
    }
    let verifying: Vec<u32> = keyring
        .keys()
        .iter()
        .filter(|k| !k.is_retired_at(now))
        .map(|k| k.id().get())
        .collect();
    let policy = Policy::new();
    serde_json::json!({
        "ok": true,
        "minting": keyring.minting_key(now).id().get(),
        "verifying": verifying,
        "schedule_ok": keyring.check_schedule(&policy).is_ok(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_matches_known_dates() {
        assert_eq!(civil(BASE), (2026, 12, 1, 12, 0, 0));
        assert_eq!(civil(951_782_400), (2000, 2, 29, 0, 0, 0));
    }
}
