//! The TOML keyring file: parsing, validation and error locations.

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

use crate::error::{Error, KeyringError};
use crate::keyring::{KeyId, KeySpec, Keyring, Secret, parse_algorithm, parse_status};

// Errors never repeat a value (or an unknown name) from the file: a secret
// pasted into the wrong field (`secret_env = "${KEY}"` expanded by a
// templater, `status = "<base64>"`, a table header) would otherwise be
// written to every log that shows the error. They name the line, the key id
// and the field instead. Nor is toml's rendered error used: it quotes the
// source line. The file is therefore read as a generic TOML tree
// (`DeTable`, whose syntax errors are fixed descriptions) and every field is
// checked here, with messages written here, rather than by serde, whose type
// errors quote the value ("invalid type: string \"…\"").

/// The fields of a `[[key]]` table.
const ENTRY_FIELDS: &str =
    "`id`, `algorithm`, `status`, `created`, `secret`, `secret_file`, `secret_env`";

/// One `[[key]]` table, its values checked for type but not yet for meaning.
#[derive(Default)]
struct Entry<'a> {
    id: Option<i64>,
    algorithm: Option<&'a str>,
    status: Option<&'a str>,
    created: Option<toml::value::Datetime>,
    secret: Option<&'a str>,
    secret_file: Option<&'a str>,
    secret_env: Option<&'a str>,
}

fn line_of(source: &str, offset: usize) -> usize {
    source
        .as_bytes()
        .iter()
        .take(offset)
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// A name from the file, shown only if it is shaped like a field name: short
/// and plain. Anything else (a quoted key holding base64, a header pasted
/// from a secret) is not repeated.
fn shown_name(name: &str) -> String {
    let plain = !name.is_empty()
        && name.len() <= 24
        && name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if plain {
        format!("`{name}`")
    } else {
        "(name not shown: it is not a plain field name and could be key material)".to_string()
    }
}

/// What a TOML value is, for "must be a string, not …" messages.
fn kind(value: &DeValue<'_>) -> &'static str {
    match value {
        DeValue::String(_) => "a string",
        DeValue::Integer(_) => "an integer",
        DeValue::Float(_) => "a float",
        DeValue::Boolean(_) => "a boolean",
        DeValue::Datetime(_) => "a date-time",
        DeValue::Array(_) => "an array",
        DeValue::Table(_) => "a table",
    }
}

fn integer(value: &DeValue<'_>) -> Option<i64> {
    match value {
        DeValue::Integer(i) => i64::from_str_radix(i.as_str(), i.radix()).ok(),
        _ => None,
    }
}

/// The entries of a table in the order they appear in the file, so the
/// first mistake reported is the first one in the file.
fn in_file_order<'t, 'i>(
    table: &'t DeTable<'i>,
) -> Vec<(
    &'t Spanned<toml::de::DeString<'i>>,
    &'t Spanned<DeValue<'i>>,
)> {
    let mut entries: Vec<_> = table.iter().collect();
    entries.sort_by_key(|(k, _)| k.span().start);
    entries
}

/// A TOML syntax error. Its message is one of the parser's fixed
/// descriptions (the rendered error, which quotes the line, is not used);
/// a duplicate key is named when the name is plain.
fn syntax_error(source: &str, e: &toml::de::Error) -> KeyringError {
    let span = e.span();
    let mut message = format!("not valid TOML: {}", e.message());
    if e.message() == "duplicate key"
        && let Some(name) = span.as_ref().and_then(|s| source.get(s.clone()))
    {
        let name = name.trim().trim_matches(|c| c == '"' || c == '\'');
        message = format!("not valid TOML: duplicate key {}", shown_name(name));
    }
    KeyringError::new(message).at(span.map(|s| line_of(source, s.start)), None)
}

/// Wipes the copies the TOML reader made of string values: a string with
/// escapes is decoded into an owned copy (a plain one borrows the source,
/// which the caller owns). An inline secret may be among them.
fn wipe(value: &mut DeValue<'_>) {
    match value {
        DeValue::String(alloc::borrow::Cow::Owned(s)) => zeroize::Zeroize::zeroize(s),
        DeValue::Array(array) => array.iter_mut().for_each(|v| wipe(v.get_mut())),
        DeValue::Table(table) => table.iter_mut().for_each(|(_, v)| wipe(v.get_mut())),
        _ => {}
    }
}

/// The parsed document, its string copies wiped when it drops.
struct Document<'i>(Spanned<DeTable<'i>>);

impl Drop for Document<'_> {
    fn drop(&mut self) {
        self.0
            .get_mut()
            .iter_mut()
            .for_each(|(_, v)| wipe(v.get_mut()));
    }
}

pub(crate) fn parse(source: &str, base: BaseDir<'_>) -> Result<Keyring, Error> {
    let document = Document(DeTable::parse(source).map_err(|e| syntax_error(source, &e))?);
    let root = &document.0;
    let at = |span: core::ops::Range<usize>| Some(line_of(source, span.start));
    let mut keys = None;
    for (name, value) in in_file_order(root.get_ref()) {
        match name.get_ref().as_ref() {
            "version" => match integer(value.get_ref()) {
                Some(1) => {}
                Some(v) => {
                    return Err(KeyringError::new(format!(
                        "unsupported keyring version {v}; this reader knows version 1"
                    ))
                    .at(at(name.span()), None)
                    .into());
                }
                None => {
                    return Err(KeyringError::new(format!(
                        "`version` must be the integer 1, not {} (the value is not shown)",
                        kind(value.get_ref())
                    ))
                    .at(at(name.span()), None)
                    .into());
                }
            },
            "key" => keys = Some(value),
            other => {
                return Err(KeyringError::new(format!(
                    "unknown top-level field {}, expected `version` or `key`",
                    shown_name(other)
                ))
                .at(at(name.span()), None)
                .into());
            }
        }
    }
    let tables: Vec<&Spanned<DeValue<'_>>> = match keys.map(|k| (k, k.get_ref())) {
        None => Vec::new(),
        Some((_, DeValue::Array(array))) => array.iter().collect(),
        Some((k, other)) => {
            return Err(KeyringError::new(format!(
                "`key` must be an array of [[key]] tables, not {}",
                kind(other)
            ))
            .at(at(k.span()), None)
            .into());
        }
    };
    if tables.is_empty() {
        return Err(KeyringError::new("the keyring has no [[key]] entries").into());
    }
    let mut specs = Vec::with_capacity(tables.len());
    let mut lines = Vec::with_capacity(tables.len());
    for table in tables {
        let line = line_of(source, table.span().start);
        let DeValue::Table(fields) = table.get_ref() else {
            return Err(KeyringError::new(format!(
                "`key` must be an array of [[key]] tables; an element is {}",
                kind(table.get_ref())
            ))
            .at(Some(line), None)
            .into());
        };
        let entry = read_entry(source, fields).map_err(|e| e.at(Some(line), None))?;
        let spec = entry_to_spec(entry, base).map_err(|e| e.at(Some(line), None))?;
        lines.push((spec.id, line));
        specs.push(spec);
    }
    // Duplicate ids are checked here too, so the error can name both lines.
    for (i, (id, line)) in lines.iter().enumerate() {
        if let Some((_, first)) = lines[..i].iter().find(|(other, _)| other == id) {
            return Err(KeyringError::new(format!(
                "duplicate key id (first defined on line {first})"
            ))
            .at(Some(*line), Some(*id))
            .into());
        }
    }
    Keyring::new(specs).map_err(|e| match e {
        Error::InvalidKeyring(mut k) => {
            if k.line.is_none() {
                k.line = k.key_id.and_then(|id| {
                    lines
                        .iter()
                        .find(|(other, _)| *other == id)
                        .map(|(_, l)| *l)
                });
            }
            Error::InvalidKeyring(k)
        }
        other => other,
    })
}

/// Checks the fields of one `[[key]]` table for name and type. Errors name
/// the field's line and the field, never its value.
fn read_entry<'t>(source: &str, fields: &'t DeTable<'_>) -> Result<Entry<'t>, KeyringError> {
    let mut entry = Entry::default();
    let mut id_line = None;
    for (name, value) in in_file_order(fields) {
        let line = Some(line_of(source, name.span().start));
        let field = name.get_ref().as_ref();
        let string = || match value.get_ref() {
            DeValue::String(s) => Ok(s.as_ref()),
            other => Err(KeyringError::new(format!(
                "`{field}` must be a string, not {}",
                kind(other)
            ))
            .at(line, None)),
        };
        match field {
            "id" => {
                id_line = line;
                entry.id = Some(integer(value.get_ref()).ok_or_else(|| {
                    KeyringError::new(format!(
                        "`id` must be an integer in 0..=4294967295, not {} (the value is not shown)",
                        kind(value.get_ref())
                    ))
                    .at(line, None)
                })?);
            }
            "algorithm" => entry.algorithm = Some(string()?),
            "status" => entry.status = Some(string()?),
            "secret" => entry.secret = Some(string()?),
            "secret_file" => entry.secret_file = Some(string()?),
            "secret_env" => entry.secret_env = Some(string()?),
            "created" => match value.get_ref() {
                DeValue::Datetime(dt) => entry.created = Some(*dt),
                other => {
                    return Err(KeyringError::new(format!(
                        "`created` must be a TOML date-time such as 2026-11-30T12:00:00Z \
                         (unquoted), not {} (the value is not shown)",
                        kind(other)
                    ))
                    .at(line, None));
                }
            },
            other => {
                return Err(KeyringError::new(format!(
                    "unknown field {}, expected one of {ENTRY_FIELDS}",
                    shown_name(other)
                ))
                .at(line, None));
            }
        }
    }
    if entry.id.is_none() {
        return Err(KeyringError::new("missing field `id`"));
    }
    if entry.status.is_none() {
        return Err(KeyringError::new("missing field `status`").at(id_line, None));
    }
    Ok(entry)
}

/// Where relative `secret_file` paths are resolved: a directory with `std`.
#[cfg(feature = "std")]
pub(crate) type BaseDir<'a> = Option<&'a std::path::Path>;
/// Without `std` there are no files.
#[cfg(not(feature = "std"))]
pub(crate) type BaseDir<'a> = Option<&'a ()>;

fn entry_to_spec(entry: Entry<'_>, base: BaseDir<'_>) -> Result<KeySpec, KeyringError> {
    // `read_entry` made sure both are there.
    let (Some(raw_id), Some(status)) = (entry.id, entry.status) else {
        return Err(KeyringError::new("missing field `id` or `status`"));
    };
    let id = u32::try_from(raw_id)
        .map(KeyId::new)
        .map_err(|_| KeyringError::new(format!("id {raw_id} is not in 0..=4294967295")))?;
    let with_id = |e: KeyringError| e.at(None, Some(id));
    // The names are not repeated: a misplaced secret would be.
    let algorithm = match entry.algorithm {
        None => crate::Algorithm::DEFAULT,
        Some(name) => parse_algorithm(name).map_err(|_| {
            with_id(KeyringError::new(
                "unknown algorithm (the value is not shown); \
                 expected \"xchacha20-poly1305\" or \"hmac-sha256\"",
            ))
        })?,
    };
    let status = parse_status(status).map_err(|_| {
        with_id(KeyringError::new(
            "unknown status (the value is not shown); \
             expected \"primary\", \"active\" or \"retired\"",
        ))
    })?;
    let created_at = match entry.created {
        None => None,
        Some(dt) => Some(datetime_to_unix(&dt).map_err(|m| with_id(KeyringError::new(m)))?),
    };
    let secret = match (entry.secret, entry.secret_file, entry.secret_env) {
        (Some(text), None, None) => Secret::from_base64(text).map_err(with_id)?,
        (None, Some(path), None) => read_secret_file(path, base).map_err(with_id)?,
        (None, None, Some(var)) => read_secret_env(var).map_err(with_id)?,
        _ => {
            return Err(with_id(KeyringError::new(
                "exactly one of secret, secret_file or secret_env must be given",
            )));
        }
    };
    Ok(KeySpec {
        id,
        algorithm,
        status,
        created_at,
        secret,
    })
}

/// Longest `secret_file` read, in bytes: a 1024-byte secret is 1368 base64
/// characters; anything much longer is not a secret file.
#[cfg(feature = "std")]
const MAX_SECRET_FILE_LEN: u64 = 4096;

/// Reads a `secret_file`. The path is never repeated in errors (a secret put
/// in `secret_file` by mistake would be); the line and key id locate it.
#[cfg(feature = "std")]
fn read_secret_file(path: &str, base: BaseDir<'_>) -> Result<Secret, KeyringError> {
    use std::io::Read as _;
    let resolved = match base {
        Some(dir) if std::path::Path::new(path).is_relative() => dir.join(path),
        _ => std::path::PathBuf::from(path),
    };
    let cannot =
        |e: &dyn core::fmt::Display| KeyringError::new(format!("cannot read secret_file: {e}"));
    // Opened without blocking (a FIFO, even one swapped in after any check
    // by path, would block until a writer comes), then the opened file
    // itself is checked: a regular file, small. The read is capped as well,
    // in case the file grows.
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(
        &mut options,
        libc::O_NONBLOCK | libc::O_NOCTTY,
    );
    let file = options.open(&resolved).map_err(|e| cannot(&e))?;
    let meta = file.metadata().map_err(|e| cannot(&e))?;
    if !meta.is_file() {
        return Err(cannot(&"not a regular file"));
    }
    if meta.len() > MAX_SECRET_FILE_LEN {
        return Err(cannot(&"longer than 4096 bytes"));
    }
    let mut bytes = zeroize::Zeroizing::new(Vec::new());
    file.take(MAX_SECRET_FILE_LEN + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| cannot(&e))?;
    if bytes.len() as u64 > MAX_SECRET_FILE_LEN {
        return Err(cannot(&"longer than 4096 bytes"));
    }
    let text = core::str::from_utf8(&bytes)
        .map_err(|_| KeyringError::new("secret_file is not base64 text"))?;
    Secret::from_base64(text).map_err(|e| KeyringError::new(format!("secret_file: {}", e.message)))
}

#[cfg(not(feature = "std"))]
fn read_secret_file(_path: &str, _base: BaseDir<'_>) -> Result<Secret, KeyringError> {
    Err(KeyringError::new(
        "secret_file needs the `std` feature; give the secret inline",
    ))
}

/// Reads a `secret_env` variable. Its name is never repeated in errors (a
/// templater may have expanded `${KEY}` into it); the line and key id locate it.
#[cfg(feature = "std")]
fn read_secret_env(var: &str) -> Result<Secret, KeyringError> {
    let value = zeroize::Zeroizing::new(std::env::var(var).map_err(|_| {
        KeyringError::new(
            "the environment variable named by secret_env is not set or not UTF-8 \
             (the name is not shown: it could be key material)",
        )
    })?);
    Secret::from_base64(&value).map_err(|e| KeyringError::new(format!("secret_env: {}", e.message)))
}

#[cfg(not(feature = "std"))]
fn read_secret_env(_var: &str) -> Result<Secret, KeyringError> {
    Err(KeyringError::new(
        "secret_env needs the `std` feature; give the secret inline",
    ))
}

/// Converts a TOML offset date-time to unix seconds.
fn datetime_to_unix(dt: &toml::value::Datetime) -> Result<u64, String> {
    let (Some(date), Some(time), Some(offset)) = (dt.date, dt.time, dt.offset) else {
        return Err(
            "created must be a full date-time with an offset, e.g. 2026-11-30T12:00:00Z".into(),
        );
    };
    let days = days_from_civil(i64::from(date.year), date.month.into(), date.day.into());
    let seconds = days * 86_400
        + i64::from(time.hour) * 3600
        + i64::from(time.minute) * 60
        + i64::from(time.second.unwrap_or(0));
    let offset_minutes = match offset {
        toml::value::Offset::Z => 0,
        toml::value::Offset::Custom { minutes } => i64::from(minutes),
    };
    u64::try_from(seconds - offset_minutes * 60)
        .map_err(|_| "created is before 1970-01-01T00:00:00Z".to_string())
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
pub(crate) fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_from_civil_matches_known_dates() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(days_from_civil(2026, 11, 30), 20_787);
    }
}
