//! Keyring files with a secret in the wrong place (a templater expanding
//! `${KEY}` into the wrong field, a typo, a paste into a header), and the
//! strings an error or log line must never contain. Shared by the core test
//! (`crates/reqstate/tests/core/keyring.rs`) and the sidecar test (`crates/reqstate-sidecar/tests/sidecar/secrets.rs`).

#![allow(dead_code, unreachable_pub)]

use base64::Engine as _;

/// A valid secret in its proper place, so that the misplaced one is the only mistake.
pub const PROPER: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";

/// The 32 bytes of the misplaced secret: random-looking, fixed.
pub fn misplaced_bytes() -> [u8; 32] {
    let mut out = [0u8; 32];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::try_from(i)
            .unwrap_or(0)
            .wrapping_mul(151)
            .wrapping_add(29)
            ^ 0x5a;
    }
    out
}

/// The misplaced secret as standard base64, as it would be pasted.
pub fn misplaced() -> String {
    base64::engine::general_purpose::STANDARD.encode(misplaced_bytes())
}

/// The eleven mistakes, each a whole keyring file with `s` in the wrong place.
pub fn cases(s: &str) -> Vec<(&'static str, String)> {
    let p = PROPER;
    vec![
        (
            "1 secret_file holds the secret",
            format!("[[key]]\nid = 1\nstatus = \"primary\"\nsecret_file = \"{s}\"\n"),
        ),
        (
            "2 secret_env holds the secret",
            format!("[[key]]\nid = 1\nstatus = \"primary\"\nsecret_env = \"{s}\"\n"),
        ),
        (
            "3 status holds the secret",
            format!("[[key]]\nid = 1\nstatus = \"{s}\"\nsecret = \"{p}\"\n"),
        ),
        (
            "4 algorithm holds the secret",
            format!(
                "[[key]]\nid = 1\nalgorithm = \"{s}\"\nstatus = \"primary\"\nsecret = \"{p}\"\n"
            ),
        ),
        (
            "5 id is the secret, as a string",
            format!("[[key]]\nid = \"{s}\"\nstatus = \"primary\"\nsecret = \"{p}\"\n"),
        ),
        (
            "6 created holds the secret",
            format!("[[key]]\nid = 1\nstatus = \"primary\"\ncreated = \"{s}\"\nsecret = \"{p}\"\n"),
        ),
        (
            "7 an unknown key's value",
            format!("[[key]]\nid = 1\nstatus = \"primary\"\nsecret = \"{p}\"\nnote = \"{s}\"\n"),
        ),
        (
            "8 a table header",
            format!("[\"{s}\"]\n\n[[key]]\nid = 1\nstatus = \"primary\"\nsecret = \"{p}\"\n"),
        ),
        (
            "9 a misspelled field name `secrets`",
            format!("[[key]]\nid = 1\nstatus = \"primary\"\nsecrets = \"{s}\"\n"),
        ),
        (
            "10 a second `secret` in the same entry",
            format!("[[key]]\nid = 1\nstatus = \"primary\"\nsecret = \"{p}\"\nsecret = \"{s}\"\n"),
        ),
        (
            "11 the keyring-level field `version`",
            format!(
                "version = \"{s}\"\n\n[[key]]\nid = 1\nstatus = \"primary\"\nsecret = \"{p}\"\n"
            ),
        ),
    ]
}

/// More ways to get it wrong, beyond the eleven: unquoted values (TOML
/// syntax errors, whose messages must not quote the line either), the secret
/// as a key name, at top level, in an array, in an inline table.
pub fn variants(s: &str) -> Vec<(&'static str, String)> {
    let p = PROPER;
    let key = |field: &str| format!("[[key]]\nid = 1\nstatus = \"primary\"\n{field}\n");
    vec![
        (
            "bare table header",
            format!("[{s}]\n{}", key(&format!("secret = \"{p}\""))),
        ),
        ("bare array-of-tables header", format!("[[{s}]]\n")),
        ("unquoted secret_env", key(&format!("secret_env = {s}"))),
        ("unquoted secret", key(&format!("secret = {s}"))),
        ("unquoted created", key(&format!("created = {s}"))),
        (
            "unquoted id",
            format!("[[key]]\nid = {s}\nstatus = \"primary\"\n"),
        ),
        ("secret as a key name", key(&format!("\"{s}\" = 1"))),
        ("secret as a bare key name", key(&format!("{s} = 1"))),
        (
            "top-level secret",
            format!("secret = \"{s}\"\n{}", key(&format!("secret = \"{p}\""))),
        ),
        (
            "top-level unknown field",
            format!("keys = \"{s}\"\n{}", key(&format!("secret = \"{p}\""))),
        ),
        ("secret in an array", key(&format!("secret = [\"{s}\"]"))),
        (
            "secret_file in an inline table",
            key(&format!("secret_file = {{ path = \"{s}\" }}")),
        ),
        (
            "status as an array",
            format!("[[key]]\nid = 1\nstatus = [\"{s}\"]\nsecret = \"{p}\"\n"),
        ),
        (
            "id as a float",
            format!("[[key]]\nid = 1.5\nstatus = \"{s}\"\nsecret = \"{p}\"\n"),
        ),
        (
            "version as a table",
            format!(
                "[version]\nx = \"{s}\"\n{}",
                key(&format!("secret = \"{p}\""))
            ),
        ),
        ("key as a table", format!("[key]\nsecret = \"{s}\"\n")),
        ("unterminated string", key(&format!("secret = \"{s}"))),
        ("bad escape", key(&format!("secret = \"{s}\\q\""))),
        (
            "secret then garbage",
            key(&format!("secret = \"{s}\" trailing garbage")),
        ),
        (
            "created with a bad date",
            key(&format!(
                "created = 2026-13-40T00:00:00Z\nsecret_file = \"{s}\""
            )),
        ),
    ]
}

/// Strings that would give the secret away: its base64 (padded and not),
/// windows of 8 characters across it, its hex and hex windows.
pub fn needles(s: &str, bytes: &[u8]) -> Vec<String> {
    let mut out = vec![s.to_string(), s.trim_end_matches('=').to_string()];
    let chars: Vec<char> = s.chars().collect();
    for start in (0..chars.len().saturating_sub(8)).step_by(4) {
        out.push(chars[start..start + 8].iter().collect());
    }
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    for start in (0..hex.len().saturating_sub(16)).step_by(16) {
        out.push(hex[start..start + 16].to_string());
    }
    out.push(hex);
    out
}

/// The needles `text` contains.
pub fn found_in(text: &str, needles: &[String]) -> Vec<String> {
    needles
        .iter()
        .filter(|n| text.contains(n.as_str()))
        .cloned()
        .collect()
}
