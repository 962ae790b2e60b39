//! The TOML keyring file (docs/KEYRING.md): parsing, validation and error
//! locations. Secrets written inline are decoded here; `secret_file` and
//! `secret_env` references are handed to the caller's [`SecretSource`]: the
//! core reads no file and no environment variable.

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use toml::Spanned;
use toml::de::{DeTable, DeValue};
use zeroize::Zeroizing;

use crate::datetime::days_from_civil;
use crate::error::KeyringError;
use crate::keyring::{KeySpec, Keyring, Secret};
use crate::types::{Algorithm, KeyId, KeyStatus};

/// A reference to a secret kept outside the keyring file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SecretRef<'a> {
    /// `secret_file = "…"`: a path, as written (a relative one is the
    /// source's to resolve, usually against the keyring file's directory).
    File(&'a str),
    /// `secret_env = "…"`: the name of an environment variable.
    Env(&'a str),
}

/// Resolves a keyring's `secret_file` and `secret_env` references.
///
/// The core does no I/O: whoever loads a keyring file decides how a
/// reference is read and what is checked first (the sidecar's source opens
/// files without following a FIFO and applies the keyring file's own
/// ownership and mode checks). [`Keyring::from_toml`] resolves none.
pub trait SecretSource {
    /// The secret's text, base64 as in an inline `secret` (decoded by the
    /// loader). On failure, a message for a person: it must not repeat the
    /// reference or anything read (either could be key material); the loader
    /// adds the line and the key id.
    fn resolve(&self, reference: SecretRef<'_>) -> Result<Zeroizing<String>, String>;
}

/// The source behind [`Keyring::from_toml`]: inline secrets only.
struct InlineOnly;

impl SecretSource for InlineOnly {
    fn resolve(&self, reference: SecretRef<'_>) -> Result<Zeroizing<String>, String> {
        let field = match reference {
            SecretRef::File(_) => "secret_file",
            SecretRef::Env(_) => "secret_env",
        };
        Err(format!(
            "{field} needs a secret source (Keyring::from_toml_with); \
             Keyring::from_toml reads inline secrets only"
        ))
    }
}

impl Keyring {
    /// Parses a keyring from TOML (format: docs/KEYRING.md) whose secrets
    /// are all inline (`secret`, base64). A `secret_file` or `secret_env`
    /// is refused: use [`Keyring::from_toml_with`]. Errors name the line and
    /// key they are about, never a value from the source.
    pub fn from_toml(source: &str) -> Result<Self, KeyringError> {
        parse(source, &InlineOnly)
    }

    /// [`Keyring::from_toml`], resolving `secret_file` and `secret_env`
    /// through `secrets`.
    pub fn from_toml_with(source: &str, secrets: &dyn SecretSource) -> Result<Self, KeyringError> {
        parse(source, secrets)
    }
}

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
const ENTRY_FIELDS: &str = "`id`, `algorithm`, `status`, `created`, `mint_from`, `retire_at`, \
     `secret`, `secret_file`, `secret_env`";

/// One `[[key]]` table, its values checked for type but not yet for meaning.
#[derive(Default)]
struct Entry<'a> {
    id: Option<i64>,
    algorithm: Option<&'a str>,
    status: Option<&'a str>,
    created: Option<toml::value::Datetime>,
    mint_from: Option<toml::value::Datetime>,
    retire_at: Option<toml::value::Datetime>,
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

fn parse(source: &str, secrets: &dyn SecretSource) -> Result<Keyring, KeyringError> {
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
                    .at(at(name.span()), None));
                }
                None => {
                    return Err(KeyringError::new(format!(
                        "`version` must be the integer 1, not {} (the value is not shown)",
                        kind(value.get_ref())
                    ))
                    .at(at(name.span()), None));
                }
            },
            "key" => keys = Some(value),
            other => {
                return Err(KeyringError::new(format!(
                    "unknown top-level field {}, expected `version` or `key`",
                    shown_name(other)
                ))
                .at(at(name.span()), None));
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
            .at(at(k.span()), None));
        }
    };
    if tables.is_empty() {
        return Err(KeyringError::new("the keyring has no [[key]] entries"));
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
            .at(Some(line), None));
        };
        let entry = read_entry(source, fields).map_err(|e| e.at(Some(line), None))?;
        let spec = entry_to_spec(entry, secrets)
            .map_err(|e| e.at(Some(line), None))?
            .line(line);
        lines.push((spec.id(), line));
        specs.push(spec);
    }
    // Duplicate ids are checked here too, so the error can name both lines.
    for (i, (id, line)) in lines.iter().enumerate() {
        if let Some((_, first)) = lines[..i].iter().find(|(other, _)| other == id) {
            return Err(KeyringError::new(format!(
                "duplicate key id (first defined on line {first})"
            ))
            .at(Some(*line), Some(*id)));
        }
    }
    Keyring::new(specs).map_err(|e| {
        let line = e.key_id().and_then(|id| {
            lines
                .iter()
                .find(|(other, _)| *other == id)
                .map(|(_, l)| *l)
        });
        e.at(line, None)
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
            "created" | "mint_from" | "retire_at" => {
                let DeValue::Datetime(dt) = value.get_ref() else {
                    return Err(KeyringError::new(format!(
                        "`{field}` must be a TOML date-time such as 2026-11-30T12:00:00Z \
                         (unquoted), not {} (the value is not shown)",
                        kind(value.get_ref())
                    ))
                    .at(line, None));
                };
                let slot = match field {
                    "created" => &mut entry.created,
                    "mint_from" => &mut entry.mint_from,
                    _ => &mut entry.retire_at,
                };
                *slot = Some(*dt);
            }
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

fn entry_to_spec(entry: Entry<'_>, secrets: &dyn SecretSource) -> Result<KeySpec, KeyringError> {
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
        None => Algorithm::DEFAULT,
        Some(name) => Algorithm::from_name(name).ok_or_else(|| {
            with_id(KeyringError::new(
                "unknown algorithm (the value is not shown); \
                 expected \"xchacha20-poly1305\" or \"hmac-sha256\"",
            ))
        })?,
    };
    let status = KeyStatus::from_name(status).ok_or_else(|| {
        with_id(KeyringError::new(
            "unknown status (the value is not shown); \
             expected \"primary\", \"active\" or \"retired\"",
        ))
    })?;
    let instant = |field: &str, dt: Option<toml::value::Datetime>| match dt {
        None => Ok(None),
        Some(dt) => datetime_to_unix(field, &dt)
            .map(Some)
            .map_err(|m| with_id(KeyringError::new(m))),
    };
    let created_at = instant("created", entry.created)?;
    let scheduled = |field: &str, dt: Option<toml::value::Datetime>| match dt {
        None => Ok(None),
        Some(dt) => schedule_instant(field, &dt)
            .map(Some)
            .map_err(|m| with_id(KeyringError::new(m))),
    };
    let mint_from = scheduled("mint_from", entry.mint_from)?;
    let retire_at = scheduled("retire_at", entry.retire_at)?;
    let secret = match (entry.secret, entry.secret_file, entry.secret_env) {
        (Some(text), None, None) => Secret::from_base64(text).map_err(with_id)?,
        (None, Some(path), None) => resolve(secrets, SecretRef::File(path)).map_err(with_id)?,
        (None, None, Some(var)) => resolve(secrets, SecretRef::Env(var)).map_err(with_id)?,
        _ => {
            return Err(with_id(KeyringError::new(
                "exactly one of secret, secret_file or secret_env must be given",
            )));
        }
    };
    let mut spec = KeySpec::new(id, algorithm, status, secret);
    if let Some(at) = created_at {
        spec = spec.created_at(at);
    }
    if let Some(at) = mint_from {
        spec = spec.mint_from(at);
    }
    if let Some(at) = retire_at {
        spec = spec.retire_at(at);
    }
    Ok(spec)
}

/// Resolves a reference through the caller's source and decodes its base64.
fn resolve(secrets: &dyn SecretSource, reference: SecretRef<'_>) -> Result<Secret, KeyringError> {
    let field = match reference {
        SecretRef::File(_) => "secret_file",
        SecretRef::Env(_) => "secret_env",
    };
    let text = secrets
        .resolve(reference)
        .map_err(|message| KeyringError::new(format!("{field}: {message}")))?;
    Secret::from_base64(&text).map_err(|e| KeyringError::new(format!("{field}: {}", e.message())))
}

/// The last instant a schedule can name, 9999-12-31T23:59:59Z: RFC 3339
/// years have four digits, and an offset must not carry an instant past it.
const LAST_SCHEDULE_INSTANT: u64 = 253_402_300_799;

/// `mint_from` / `retire_at` (docs/KEYRING.md, "How an instant is read"): a
/// TOML offset date-time with its seconds written and no fraction, second
/// 0 to 59, the offset applied, within 1970-01-01T00:00:00Z ..=
/// 9999-12-31T23:59:59Z. Decided on the parsed value, so a table and an
/// inline table read alike; the TOML reader has already refused an
/// impossible calendar date.
fn schedule_instant(field: &str, dt: &toml::value::Datetime) -> Result<u64, String> {
    let (Some(_), Some(time), Some(offset)) = (dt.date, dt.time, dt.offset) else {
        return Err(format!(
            "{field} must be a full date-time with an offset, e.g. 2026-11-30T12:00:00Z"
        ));
    };
    // A fraction is refused however it is written (`.0` too): a schedule
    // counts in whole seconds, and a reader that kept fewer digits than
    // another would otherwise see a different file.
    if time.nanosecond.is_some() {
        return Err(format!(
            "`{field}` must be a whole second, written without a fraction \
             (a schedule counts in seconds, as tokens do)"
        ));
    }
    match time.second {
        None => {
            return Err(format!(
                "`{field}` must write its seconds (RFC 3339), e.g. 2026-11-30T12:00:00Z"
            ));
        }
        Some(60) => {
            return Err(format!(
                "`{field}` names second 60 (a leap second), which unix time does not count; \
                 write the second before or the minute after"
            ));
        }
        Some(_) => {}
    }
    if let toml::value::Offset::Custom { minutes } = offset
        && minutes.unsigned_abs() > 23 * 60 + 59
    {
        return Err(format!(
            "`{field}` has an offset outside -23:59..=+23:59; write it in UTC (Z) or with an offset in that range"
        ));
    }
    let at = datetime_to_unix(field, dt)?;
    if at > LAST_SCHEDULE_INSTANT {
        return Err(format!(
            "{field} is after 9999-12-31T23:59:59Z once its offset is applied"
        ));
    }
    Ok(at)
}

/// Converts a TOML offset date-time (the value of `field`) to unix seconds.
fn datetime_to_unix(field: &str, dt: &toml::value::Datetime) -> Result<u64, String> {
    let (Some(date), Some(time), Some(offset)) = (dt.date, dt.time, dt.offset) else {
        return Err(format!(
            "{field} must be a full date-time with an offset, e.g. 2026-11-30T12:00:00Z"
        ));
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
        .map_err(|_| format!("{field} is before 1970-01-01T00:00:00Z"))
}
