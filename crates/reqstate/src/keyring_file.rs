//! The TOML keyring file: parsing, validation and error locations.

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use serde::Deserialize;
use toml::Spanned;

use crate::error::{Error, KeyringError};
use crate::keyring::{KeyId, KeySpec, Keyring, Secret, parse_algorithm, parse_status};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    /// Format version of the file; only 1 exists.
    #[serde(default)]
    version: Option<Spanned<i64>>,
    #[serde(default, rename = "key")]
    keys: Vec<Spanned<Entry>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    id: i64,
    #[serde(default)]
    algorithm: Option<String>,
    status: String,
    #[serde(default)]
    created: Option<toml::value::Datetime>,
    #[serde(default)]
    secret: Option<String>,
    #[serde(default)]
    secret_file: Option<String>,
    #[serde(default)]
    secret_env: Option<String>,
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

/// Where relative `secret_file` paths are resolved: a directory with `std`.
#[cfg(feature = "std")]
pub(crate) type BaseDir<'a> = Option<&'a std::path::Path>;
/// Without `std` there are no files.
#[cfg(not(feature = "std"))]
pub(crate) type BaseDir<'a> = Option<&'a ()>;

pub(crate) fn parse(source: &str, base: BaseDir<'_>) -> Result<Keyring, Error> {
    let file: File = toml::from_str(source).map_err(|e| {
        let line = e.span().map(|s| line_of(source, s.start));
        // toml's message names the problem; its own rendering repeats the source
        // line, which may hold a secret, so only the message is kept.
        KeyringError::new(e.message().to_string()).at(line, None)
    })?;
    if let Some(v) = &file.version
        && *v.get_ref() != 1
    {
        return Err(KeyringError::new(format!(
            "unsupported keyring version {}; this reader knows version 1",
            v.get_ref()
        ))
        .at(Some(line_of(source, v.span().start)), None)
        .into());
    }
    if file.keys.is_empty() {
        return Err(KeyringError::new("the keyring has no [[key]] entries").into());
    }
    let mut specs = Vec::with_capacity(file.keys.len());
    let mut lines = Vec::with_capacity(file.keys.len());
    for entry in file.keys {
        let line = line_of(source, entry.span().start);
        let entry = entry.into_inner();
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

fn entry_to_spec(entry: Entry, base: BaseDir<'_>) -> Result<KeySpec, KeyringError> {
    let id = u32::try_from(entry.id)
        .map(KeyId::new)
        .map_err(|_| KeyringError::new(format!("id {} is not in 0..=4294967295", entry.id)))?;
    let with_id = |e: KeyringError| e.at(None, Some(id));
    let algorithm = match entry.algorithm.as_deref() {
        None => crate::Algorithm::DEFAULT,
        Some(name) => parse_algorithm(name).map_err(|m| with_id(KeyringError::new(m)))?,
    };
    let status = parse_status(&entry.status).map_err(|m| with_id(KeyringError::new(m)))?;
    let created_at = match entry.created {
        None => None,
        Some(dt) => Some(datetime_to_unix(&dt).map_err(|m| with_id(KeyringError::new(m)))?),
    };
    let sources = [
        entry.secret.is_some(),
        entry.secret_file.is_some(),
        entry.secret_env.is_some(),
    ]
    .iter()
    .filter(|s| **s)
    .count();
    if sources != 1 {
        return Err(with_id(KeyringError::new(
            "exactly one of secret, secret_file or secret_env must be given",
        )));
    }
    let secret = if let Some(text) = entry.secret.as_deref() {
        let secret = Secret::from_base64(text).map_err(with_id)?;
        // Wipe the copy serde made of the base64 text.
        if let Some(mut text) = entry.secret {
            zeroize::Zeroize::zeroize(&mut text);
        }
        secret
    } else if let Some(path) = entry.secret_file.as_deref() {
        read_secret_file(path, base).map_err(with_id)?
    } else if let Some(var) = entry.secret_env.as_deref() {
        read_secret_env(var).map_err(with_id)?
    } else {
        unreachable!("exactly one secret source was checked above")
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

#[cfg(feature = "std")]
fn read_secret_file(path: &str, base: BaseDir<'_>) -> Result<Secret, KeyringError> {
    use std::io::Read as _;
    let resolved = match base {
        Some(dir) if std::path::Path::new(path).is_relative() => dir.join(path),
        _ => std::path::PathBuf::from(path),
    };
    let cannot = |e: &dyn core::fmt::Display| {
        KeyringError::new(format!("cannot read secret_file {path:?}: {e}"))
    };
    // Refuse devices and FIFOs before opening (opening a FIFO blocks), and
    // cap the read so `/dev/zero` or a huge file cannot exhaust memory.
    let meta = std::fs::metadata(&resolved).map_err(|e| cannot(&e))?;
    if !meta.is_file() {
        return Err(cannot(&"not a regular file"));
    }
    let file = std::fs::File::open(&resolved).map_err(|e| cannot(&e))?;
    let mut bytes = zeroize::Zeroizing::new(Vec::new());
    file.take(MAX_SECRET_FILE_LEN + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| cannot(&e))?;
    if bytes.len() as u64 > MAX_SECRET_FILE_LEN {
        return Err(cannot(&"longer than 4096 bytes"));
    }
    let text = core::str::from_utf8(&bytes)
        .map_err(|_| KeyringError::new(format!("secret_file {path:?} is not base64 text")))?;
    Secret::from_base64(text)
        .map_err(|e| KeyringError::new(format!("secret_file {path:?}: {}", e.message)))
}

#[cfg(not(feature = "std"))]
fn read_secret_file(_path: &str, _base: BaseDir<'_>) -> Result<Secret, KeyringError> {
    Err(KeyringError::new(
        "secret_file needs the `std` feature; give the secret inline",
    ))
}

#[cfg(feature = "std")]
fn read_secret_env(var: &str) -> Result<Secret, KeyringError> {
    let value = zeroize::Zeroizing::new(std::env::var(var).map_err(|_| {
        KeyringError::new(format!(
            "environment variable {var} is not set or not UTF-8"
        ))
    })?);
    Secret::from_base64(&value)
        .map_err(|e| KeyringError::new(format!("secret_env {var}: {}", e.message)))
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
