//! `keyring_texts`: keyring files given as their TOML text, for the one
//! reading of `mint_from` and `retire_at` (docs/KEYRING.md, "How an instant
//! is read"). Texts rather than fields, so each implementation's own TOML
//! reader is exercised: tables and inline tables, fractions however written,
//! impossible dates, leap seconds, offsets and the ends of the range. Each
//! vector states by hand what the file does (or that it is refused); the
//! core must agree.

use reqstate::{KeyId, Keyring};

use crate::schema::{KeyringTextCheck, KeyringTextVector};

const SECRET_1: &str = "QUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUE=";
const SECRET_2: &str = "QkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkI=";
/// 2026-12-01T12:05:00Z.
const T: u64 = 1_796_126_700;
/// 9999-12-31T23:59:59Z, the last instant a schedule can name.
const LAST: u64 = 253_402_300_799;

/// Key 1 primary, key 2 active with `key2` (its schedule fields), as
/// `[[key]]` tables; `key1` adds fields to key 1.
fn tables(key1: &str, key2: &str) -> String {
    format!(
        "version = 1\n\n[[key]]\nid = 1\nstatus = \"primary\"\nalgorithm = \"hmac-sha256\"\n{key1}secret = \"{SECRET_1}\"\n\n\
         [[key]]\nid = 2\nstatus = \"active\"\nalgorithm = \"hmac-sha256\"\n{key2}secret = \"{SECRET_2}\"\n"
    )
}

/// The same keys as one inline array of inline tables.
fn inline(key1: &str, key2: &str) -> String {
    format!(
        "version = 1\nkey = [\n  {{ id = 1, status = \"primary\", algorithm = \"hmac-sha256\", {key1}secret = \"{SECRET_1}\" }},\n  \
         {{ id = 2, status = \"active\", algorithm = \"hmac-sha256\", {key2}secret = \"{SECRET_2}\" }},\n]\n"
    )
}

fn field(name: &str, value: &str, inline: bool) -> String {
    if inline {
        format!("{name} = {value}, ")
    } else {
        format!("{name} = {value}\n")
    }
}

/// Key 2 mints from `at` (written `text`): the file checked one second
/// before, at and after `at`.
fn takeover(name: &str, text: &str, at: u64, in_line: bool) -> KeyringTextVector {
    let mf = field("mint_from", text, in_line);
    let toml = if in_line {
        inline("", &mf)
    } else {
        tables("", &mf)
    };
    let mut checks = vec![check(at, 2, &[1, 2])];
    if at > 0 {
        checks.insert(0, check(at - 1, 1, &[1, 2]));
    }
    if at < LAST {
        checks.push(check(at + 1, 2, &[1, 2]));
    }
    accepted(name, toml, checks)
}

fn check(now: u64, minting: u32, verifying: &[u32]) -> KeyringTextCheck {
    KeyringTextCheck {
        now,
        minting,
        verifying: verifying.to_vec(),
    }
}

fn accepted(name: &str, toml: String, at: Vec<KeyringTextCheck>) -> KeyringTextVector {
    let keyring = Keyring::from_toml(&toml).unwrap_or_else(|e| panic!("{name}: {e}"));
    for c in &at {
        assert_eq!(
            keyring.minting_key(c.now).id().get(),
            c.minting,
            "{name} at {}",
            c.now
        );
        let verifying: Vec<u32> = [1, 2]
            .into_iter()
            .filter(|&id| {
                !keyring
                    .get(KeyId::new(id))
                    .expect("key")
                    .is_retired_at(c.now)
            })
            .collect();
        assert_eq!(verifying, c.verifying, "{name} at {}", c.now);
    }
    KeyringTextVector {
        name: name.into(),
        toml,
        expect_fail: None,
        at,
    }
}

fn refused(name: &str, toml: String) -> KeyringTextVector {
    match Keyring::from_toml(&toml) {
        Err(e) if e.reason() == "invalid_keyring" => {}
        other => panic!("{name}: the core loads it ({:?})", other.map(|_| ())),
    }
    KeyringTextVector {
        name: name.into(),
        toml,
        expect_fail: Some("invalid_keyring".into()),
        at: Vec::new(),
    }
}

/// Key 2's `mint_from` written `text`, refused, in a table and in an inline table.
fn refused_both(name: &str, text: &str) -> [KeyringTextVector; 2] {
    [
        refused(
            &format!("{name} (table)"),
            tables("", &field("mint_from", text, false)),
        ),
        refused(
            &format!("{name} (inline table)"),
            inline("", &field("mint_from", text, true)),
        ),
    ]
}

/// The keyring text vectors, in file order.
pub(super) fn keyring_texts() -> Vec<KeyringTextVector> {
    let mut all = vec![
        takeover("mint_from in a table, Z", "2026-12-01T12:05:00Z", T, false),
        takeover(
            "mint_from in an inline table, Z",
            "2026-12-01T12:05:00Z",
            T,
            true,
        ),
        takeover("a lower-case t and z", "2026-12-01t12:05:00z", T, false),
        takeover(
            "a space between date and time",
            "2026-12-01 12:05:00Z",
            T,
            false,
        ),
        takeover(
            "offset +01:00 is applied: 13:05+01:00 is 12:05Z",
            "2026-12-01T13:05:00+01:00",
            T,
            false,
        ),
        takeover(
            "offset -23:59 is applied: the day before, 12:06-23:59 is 12:05Z",
            "2026-11-30T12:06:00-23:59",
            T,
            true,
        ),
        takeover("offset +00:00 as Z", "2026-12-01T12:05:00+00:00", T, false),
        takeover(
            "Feb 29 of a leap year (2028)",
            "2028-02-29T00:00:00Z",
            1_835_395_200,
            false,
        ),
        takeover(
            "Feb 29 of 2000 (divisible by 400: a leap year)",
            "2000-02-29T00:00:00Z",
            951_782_400,
            false,
        ),
        takeover(
            "second 59 of the last minute of a year",
            "2026-12-31T23:59:59Z",
            1_798_761_599,
            false,
        ),
        takeover(
            "the first instant of the range, 1970-01-01T00:00:00Z",
            "1970-01-01T00:00:00Z",
            0,
            false,
        ),
        takeover(
            "the first instant written with an offset, 01:00+01:00",
            "1970-01-01T01:00:00+01:00",
            0,
            true,
        ),
        takeover(
            "the last instant of the range, 9999-12-31T23:59:59Z",
            "9999-12-31T23:59:59Z",
            LAST,
            false,
        ),
        takeover(
            "the last instant written with an offset, 23:58:59-00:01",
            "9999-12-31T23:58:59-00:01",
            LAST,
            true,
        ),
        takeover(
            "the last instant written with offset -23:00, 00:59:59-23:00",
            "9999-12-31T00:59:59-23:00",
            LAST,
            false,
        ),
    ];
    // retire_at: offsets applied to it as well.
    let retire = |in_line: bool| {
        let k1 = field("retire_at", "2026-12-01T13:16:00+01:00", in_line);
        let k2 = field("mint_from", "2026-12-01T12:05:00Z", in_line);
        if in_line {
            inline(&k1, &k2)
        } else {
            tables(&k1, &k2)
        }
    };
    let retired_from = T + 660;
    for (name, in_line) in [
        ("retire_at with offset +01:00 is applied (table)", false),
        (
            "retire_at with offset +01:00 is applied (inline table)",
            true,
        ),
    ] {
        all.push(accepted(
            name,
            retire(in_line),
            vec![
                check(T - 1, 1, &[1, 2]),
                check(retired_from - 1, 2, &[1, 2]),
                check(retired_from, 2, &[2]),
                check(retired_from + 1, 2, &[2]),
            ],
        ));
    }
    for (name, text) in [
        ("Feb 30 (no rollover to March)", "2026-02-30T00:00:00Z"),
        (
            "Feb 29 of a year that is not a leap year (2026)",
            "2026-02-29T00:00:00Z",
        ),
        (
            "Feb 29 of 2100 (divisible by 100, not by 400)",
            "2100-02-29T00:00:00Z",
        ),
        ("April 31", "2026-04-31T00:00:00Z"),
        ("month 13", "2026-13-01T00:00:00Z"),
        ("day 0", "2026-12-00T00:00:00Z"),
        ("hour 24", "2026-12-01T24:00:00Z"),
        ("minute 60", "2026-12-01T12:60:00Z"),
        (
            "second 60 at the end of a year (a leap second)",
            "2016-12-31T23:59:60Z",
        ),
        ("second 60 in any minute", "2026-12-01T12:05:60Z"),
        ("a fraction of a second, .5", "2026-12-01T12:05:00.5Z"),
        ("a fraction of a second, .001", "2026-12-01T12:05:00.001Z"),
        (
            "a fraction below a millisecond, .0001",
            "2026-12-01T12:05:00.0001Z",
        ),
        (
            "a fraction below a nanosecond, .0000000001",
            "2026-12-01T12:05:00.0000000001Z",
        ),
        (
            "a zero fraction, .0 (no fraction however written)",
            "2026-12-01T12:05:00.0Z",
        ),
        (
            "a zero fraction, .000000000",
            "2026-12-01T12:05:00.000000000Z",
        ),
        ("a fraction with an offset", "2026-12-01T13:05:00.5+01:00"),
        ("no seconds written (12:05Z)", "2026-12-01T12:05Z"),
        ("offset +24:00", "2026-12-01T12:05:00+24:00"),
        ("offset minutes 60", "2026-12-01T12:05:00+01:60"),
        ("a local date-time (no offset)", "2026-12-01T12:05:00"),
        ("a date alone", "2026-12-01"),
        ("a time alone", "12:05:00"),
        (
            "one second before the range, 1969-12-31T23:59:59Z",
            "1969-12-31T23:59:59Z",
        ),
        (
            "one second before the range once the offset is applied, 00:59:59+01:00",
            "1970-01-01T00:59:59+01:00",
        ),
        (
            "past the range once the offset is applied, 23:59:59-00:01",
            "9999-12-31T23:59:59-00:01",
        ),
        (
            "one second past the range once the offset is applied, 23:59:00-00:01",
            "9999-12-31T23:59:00-00:01",
        ),
        (
            "a quoted instant (a string, not a date-time)",
            "\"2026-12-01T12:05:00Z\"",
        ),
    ] {
        all.extend(refused_both(&format!("mint_from: {name}"), text));
    }
    // The rest of a keyring file's rules, read by each implementation's own
    // TOML reader (issue 49): the top level, `created`, an instant's type
    // and month, the load rule of a schedule without a policy.
    let plain = tables("", "");
    for (name, toml) in [
        (
            "version = true (a boolean, not the integer 1)",
            plain.replacen("version = 1\n", "version = true\n", 1),
        ),
        (
            "version = \"1\" (a string, not the integer 1)",
            plain.replacen("version = 1\n", "version = \"1\"\n", 1),
        ),
        (
            "version = 1.0 (a float, not the integer 1)",
            plain.replacen("version = 1\n", "version = 1.0\n", 1),
        ),
        (
            "an unknown top-level field (comment)",
            plain.replacen("version = 1\n", "version = 1\ncomment = \"old keys\"\n", 1),
        ),
        (
            "created: a quoted string (table)",
            tables(&field("created", "\"2026-11-30T12:00:00Z\"", false), ""),
        ),
        (
            "created: a quoted string (inline table)",
            inline(&field("created", "\"2026-11-30T12:00:00Z\"", true), ""),
        ),
        (
            "created: a time alone",
            tables(&field("created", "12:00:00", false), ""),
        ),
        (
            "created: a date alone",
            tables(&field("created", "2026-11-30", false), ""),
        ),
        (
            "created: a local date-time (no offset)",
            tables(&field("created", "2026-11-30T12:00:00", false), ""),
        ),
        (
            "created: an integer",
            tables(&field("created", "1796040000", false), ""),
        ),
        (
            "retire_at before the successor's mint_from (the load rule, without a policy)",
            tables(
                &field("retire_at", "2026-12-01T12:04:59Z", false),
                &field("mint_from", "2026-12-01T12:05:00Z", false),
            ),
        ),
    ] {
        all.push(refused(name, toml));
    }
    all.extend(refused_both(
        "mint_from: a TOML integer (unix seconds)",
        "1796126700",
    ));
    all.extend(refused_both("mint_from: month 00", "2026-00-01T12:05:00Z"));
    all.extend(refused_both("mint_from: a time alone", "12:05:00"));
    all.push(accepted(
        "created: an offset date-time is informational (not an instant of the schedule)",
        tables(&field("created", "2026-11-30T12:00:00+01:00", false), ""),
        vec![check(T, 1, &[1, 2])],
    ));
    all.push(takeover(
        "offset -00:00 is read as +00:00",
        "2026-12-01T12:05:00-00:00",
        T,
        false,
    ));
    all.push(accepted(
        "retire_at at the successor's mint_from (the load rule's boundary, without a policy)",
        tables(
            &field("retire_at", "2026-12-01T12:05:00Z", false),
            &field("mint_from", "2026-12-01T12:05:00Z", false),
        ),
        vec![check(T - 1, 1, &[1, 2]), check(T, 2, &[2])],
    ));
    for (name, text) in [
        ("a fraction of a second", "2026-12-01T12:16:00.5Z"),
        ("second 60", "2026-12-01T12:16:60Z"),
        ("Feb 30", "2027-02-30T00:00:00Z"),
    ] {
        for in_line in [false, true] {
            let k1 = field("retire_at", text, in_line);
            let k2 = field("mint_from", "2026-12-01T12:05:00Z", in_line);
            let (toml, shape) = if in_line {
                (inline(&k1, &k2), "inline table")
            } else {
                (tables(&k1, &k2), "table")
            };
            all.push(refused(&format!("retire_at: {name} ({shape})"), toml));
        }
    }
    all
}
