//! `keys rotate`, `keys promote` and `keys retire`: placing `mint_from` and
//! `retire_at` in a keyring file so that no live token is refused, and
//! refusing (unless `--force`) the moves that would refuse some.

use std::path::Path;

use reqstate::{Algorithm, Key, KeyId, KeyStatus, Keyring, OsRandom, Policy, Secret};
use toml_edit::{ArrayOfTables, DocumentMut, Table};

use super::time::{format_duration, relative, toml_instant};
use super::timeline::Timeline;
use super::{
    KeyringPermissions, KeyringSecrets, KeysError, find_key, key_tables, read_document, set_string,
    table_id, validate_and_write, watched_directory,
};

/// `keys promote`'s settings.
#[derive(Debug)]
pub(crate) struct PromoteOptions {
    /// The clock reading.
    pub now: u64,
    /// When the key starts minting (default: now).
    pub at: Option<u64>,
    /// How long the file needs to reach every replica.
    pub propagation: u64,
    /// Promote even if replicas may not have the key yet.
    pub force: bool,
    /// The fleet's policy.
    pub policy: Policy,
}

/// `keys retire`'s settings.
#[derive(Debug)]
pub(crate) struct RetireOptions {
    /// The clock reading.
    pub now: u64,
    /// When its tokens start being refused (default: now).
    pub at: Option<u64>,
    /// Cut it off now by its status.
    pub force: bool,
    /// The fleet's policy.
    pub policy: Policy,
}

/// `keys rotate`'s settings.
#[derive(Debug)]
pub(crate) struct RotateOptions {
    /// The clock reading.
    pub now: u64,
    /// How long the file needs to reach every replica (and the clocks'
    /// disagreement).
    pub propagation: u64,
    /// Rotate only when the minting key has minted this long.
    pub every: Option<u64>,
    /// Keys retired longer ago than this are dropped.
    pub grace: u64,
    /// The new key's algorithm (default: the minting key's).
    pub algorithm: Option<Algorithm>,
    /// The fleet's policy.
    pub policy: Policy,
}

fn at(t: u64) -> String {
    reqstate::rfc3339_utc(t)
}

/// How long after a key stops minting its last tokens are accepted.
fn live(policy: &Policy) -> u64 {
    policy.max_lifetime().saturating_add(policy.clock_leeway())
}

fn policy_text(policy: &Policy) -> String {
    format!(
        "max-ttl {} s + leeway {} s",
        policy.max_lifetime(),
        policy.clock_leeway()
    )
}

/// `--keyring PATH`, for the commands a message tells the user to run
/// (they must work when pasted).
fn keyring_flag(path: &Path) -> String {
    format!(
        "--keyring {}",
        super::shell_word(&path.display().to_string())
    )
}

/// The keyring as the file holds it now: its document (to edit) and its
/// keys (to reason about). A missing file is an error: only `keys new`
/// creates one.
fn open(path: &Path) -> Result<(DocumentMut, Keyring), KeysError> {
    if let Err(e) = std::fs::metadata(path) {
        return Err(if e.kind() == std::io::ErrorKind::NotFound {
            KeysError::Refused(format!(
                "{}: no such keyring; `reqstate keys new {}` creates one",
                path.display(),
                keyring_flag(path)
            ))
        } else {
            KeysError::Io(path.to_path_buf(), e)
        });
    }
    let doc = read_document(path)?;
    let keyring = parse(path, &doc)?;
    Ok((doc, keyring))
}

/// The keys of a document, by the sidecar's loader rules (no policy).
fn parse(path: &Path, doc: &DocumentMut) -> Result<Keyring, KeysError> {
    let text = zeroize::Zeroizing::new(doc.to_string());
    let secrets = KeyringSecrets::new(
        &watched_directory(path),
        KeyringPermissions::AllowGroupOrOtherReadable,
    );
    Keyring::from_toml_with(&text, &secrets).map_err(|e| {
        KeysError::Format(
            path.to_path_buf(),
            format!("the keyring does not load: {e}"),
        )
    })
}

/// The mint order: the primary, then the scheduled keys by `mint_from`.
fn mint_order(keyring: &Keyring) -> Vec<&Key> {
    let mut scheduled: Vec<&Key> = keyring
        .keys()
        .into_iter()
        .filter(|k| k.mint_from().is_some())
        .collect();
    scheduled.sort_by_key(|k| k.mint_from());
    std::iter::once(keyring.primary())
        .chain(scheduled)
        .collect()
}

fn in_mint_order(key: &Key) -> bool {
    key.status() == KeyStatus::Primary || key.mint_from().is_some()
}

/// Sets an instant field, keeping the comment and spacing around an
/// existing value.
fn set_instant(table: &mut Table, field: &str, t: u64) -> Result<(), KeysError> {
    let value = toml_instant(t).map_err(KeysError::Refused)?;
    if let Some(existing) = table.get_mut(field).and_then(toml_edit::Item::as_value_mut) {
        let decor = existing.decor().clone();
        *existing = toml_edit::Value::from(value);
        *existing.decor_mut() = decor;
        return Ok(());
    }
    table.insert(field, toml_edit::value(value));
    Ok(())
}

/// Makes the statuses say what the schedule already does at `now`: the
/// minting key becomes `status = "primary"` without `mint_from`, keys whose
/// `mint_from` has come lose it, the old primary becomes `"active"` and keeps
/// its `retire_at`. What every key does at `now` and later is unchanged.
/// Returns what it did, if anything.
fn settle(tables: &mut ArrayOfTables, keyring: &Keyring, now: u64) -> Option<String> {
    let minting = keyring.minting_key(now).id().get();
    let primary = keyring.primary().id().get();
    let mut changed = false;
    for table in tables.iter_mut() {
        let Some(id) = table_id(table).and_then(|id| u32::try_from(id).ok()) else {
            continue;
        };
        let Some(key) = keyring.get(KeyId::new(id)) else {
            continue;
        };
        if id == minting {
            if id != primary {
                set_string(table, "status", KeyStatus::Primary.name());
                table.remove("mint_from");
                changed = true;
            }
        } else if id == primary {
            set_string(table, "status", KeyStatus::Active.name());
            changed = true;
        } else if key.mint_from().is_some_and(|m| m <= now) {
            table.remove("mint_from");
            changed = true;
        }
    }
    changed.then(|| {
        format!(
            "settled: key {minting}, which mints now, is status = \"primary\"; key {primary} is \
             \"active\" and keeps its retire_at"
        )
    })
}

/// Cuts a key off by its status: `"retired"`, without a schedule.
fn cut_off(table: &mut Table) {
    set_string(table, "status", KeyStatus::Retired.name());
    table.remove("mint_from");
    table.remove("retire_at");
}

/// `keys rotate`: see the command's help and docs/ROTATION.md.
pub(crate) fn rotate(path: &Path, o: &RotateOptions) -> Result<String, KeysError> {
    if o.propagation == 0 {
        return Err(KeysError::Usage(
            "--propagation must be at least 1s: the time the file needs to reach every replica"
                .into(),
        ));
    }
    let now = o.now;
    let (mut doc, original) = open(path)?;
    let highest_id = original
        .keys()
        .iter()
        .map(|k| k.id().get())
        .max()
        .unwrap_or(0);
    let mut said = Vec::new();
    let mut changed = false;

    // (a) Drop the keys retired for longer than the grace period.
    let expired: Vec<&Key> = original
        .keys()
        .into_iter()
        .filter(|k| {
            k.retire_at()
                .is_some_and(|r| now > r.saturating_add(o.grace))
        })
        .collect();
    let mut keyring = if expired.is_empty() {
        original
    } else {
        let ids: Vec<i64> = expired.iter().map(|k| i64::from(k.id().get())).collect();
        let tables = key_tables(&mut doc, path)?;
        if expired.iter().any(|k| in_mint_order(k)) {
            said.extend(settle(tables, &original, now));
        }
        tables.retain(|t| !table_id(t).is_some_and(|id| ids.contains(&id)));
        for k in &expired {
            let retired = k.retire_at().unwrap_or(0);
            said.push(format!(
                "dropped key {}: retired at {} ({}, more than --grace {} ago)",
                k.id(),
                at(retired),
                relative(retired, now),
                format_duration(o.grace)
            ));
        }
        changed = true;
        parse(path, &doc)?
    };

    // (b) A rotation in progress: nothing more to do.
    let pending = keyring
        .keys()
        .into_iter()
        .filter_map(|k| k.mint_from().filter(|&m| m > now).map(|m| (m, k.id())))
        .min();
    if let Some((mint_from, id)) = pending {
        said.push(format!(
            "a rotation is in progress: key {id} mints from {} ({}); nothing more to do",
            at(mint_from),
            relative(mint_from, now)
        ));
    } else {
        let minting = keyring.minting_key(now);
        let minting_id = minting.id().get();
        // (c) --every: only when the minting key has minted long enough.
        let since = minting
            .mint_from()
            .or(if minting.status() == KeyStatus::Primary {
                minting.created_at()
            } else {
                None
            });
        let due = match (o.every, since) {
            (Some(every), Some(since)) => now.saturating_sub(since) >= every,
            _ => true,
        };
        if let (false, Some(every), Some(since)) = (due, o.every, since) {
            let next = since.saturating_add(every);
            said.push(format!(
                "not due: key {minting_id} has minted since {} ({}); with --every {} the next \
                 rotation is due at {} ({})",
                at(since),
                relative(since, now),
                format_duration(every),
                at(next),
                relative(next, now)
            ));
        } else {
            // (d) Schedule the next key.
            let id = highest_id
                .checked_add(1)
                .ok_or_else(|| KeysError::Refused("no key id left above the highest".into()))?;
            let algorithm = o.algorithm.unwrap_or(minting.algorithm());
            let mint_from = now.saturating_add(o.propagation);
            let retire_at = mint_from.saturating_add(live(&o.policy));
            let secret = Secret::generate(&OsRandom::new())
                .map_err(|e| KeysError::Refused(format!("cannot generate a key: {e}")))?;
            let tables = key_tables(&mut doc, path)?;
            set_instant(find_key(tables, minting_id)?, "retire_at", retire_at)?;
            let mut table = Table::new();
            table.insert("id", toml_edit::value(i64::from(id)));
            table.insert("algorithm", toml_edit::value(algorithm.name()));
            table.insert("status", toml_edit::value(KeyStatus::Active.name()));
            table.insert(
                "created",
                toml_edit::value(toml_instant(now).map_err(KeysError::Refused)?),
            );
            table.insert(
                "mint_from",
                toml_edit::value(toml_instant(mint_from).map_err(KeysError::Refused)?),
            );
            table.insert("secret", toml_edit::value(secret.to_base64().as_str()));
            tables.push(table);
            said.push(format!(
                "scheduled key {id} ({algorithm}): it verifies as soon as a replica loads this \
                 file and mints from {} ({}). Distribute the file to every replica before then",
                at(mint_from),
                relative(mint_from, now)
            ));
            said.push(format!(
                "key {minting_id} mints until then and retires at {} ({}), when its last tokens \
                 have expired ({})",
                at(retire_at),
                relative(retire_at, now),
                policy_text(&o.policy)
            ));
            changed = true;
        }
    }

    if changed {
        keyring = validate_and_write(path, &doc, Some(&o.policy))?;
        said.push(format!("wrote {}", path.display()));
    } else {
        keyring.check_schedule(&o.policy).map_err(|e| {
            KeysError::Refused(format!(
                "{}: the file's schedule does not hold with --max-ttl {} and --leeway {} (they \
                 must be what the fleet serves): {e}",
                path.display(),
                o.policy.max_lifetime(),
                o.policy.clock_leeway()
            ))
        })?;
        said.push(format!("no change: {} was left as it was", path.display()));
    }
    said.push(Timeline::of_keyring(&keyring, now).to_text());
    Ok(said.join("\n"))
}

/// `keys promote`: schedules a key to mint from now or `--at`.
pub(crate) fn promote(path: &Path, id: u32, o: PromoteOptions) -> Result<String, KeysError> {
    let k = keyring_flag(path);
    let now = o.now;
    let (mut doc, keyring) = open(path)?;
    let key = keyring
        .get(KeyId::new(id))
        .ok_or_else(|| KeysError::Refused(format!("no key with id {id} in the keyring")))?;
    if key.is_retired_at(now) {
        return Err(KeysError::Refused(format!(
            "key {id} is retired; a retired key is never brought back. Add a new key \
             (`reqstate keys rotate {k}`)"
        )));
    }
    let start = o.at.unwrap_or(now);
    if start < now {
        return Err(KeysError::Usage(format!(
            "--at {} is in the past (now is {})",
            at(start),
            at(now)
        )));
    }
    let minting = keyring.minting_key(now).id().get();
    if minting == id {
        return Ok(format!("key {id} already mints; nothing changed"));
    }
    let superseded =
        key.status() == KeyStatus::Primary || key.mint_from().is_some_and(|m| m <= now);
    if superseded {
        return Err(KeysError::Refused(format!(
            "key {id} has minted and key {minting} has taken over since; a key is not brought \
             back. Add a new key (`reqstate keys rotate {k}`)"
        )));
    }
    if key.mint_from() == Some(start) {
        return Ok(format!(
            "key {id} already mints from {}; nothing changed",
            at(start)
        ));
    }
    let loaded_by = key.created_at().map(|c| c.saturating_add(o.propagation));
    let early = loaded_by.is_none_or(|t| start < t);
    if early && !o.force {
        return Err(KeysError::Refused(match loaded_by {
            Some(t) => format!(
                "key {id} was created at {}, less than --propagation {} before {}: replicas \
                 that have not loaded key {id} refuse its tokens as unknown_key until they do; \
                 promote at {} (`--at {}`) or pass --force",
                at(key.created_at().unwrap_or(0)),
                format_duration(o.propagation),
                at(start),
                at(t),
                at(t)
            ),
            None => format!(
                "key {id} has no `created`, so the file cannot tell whether every replica has \
                 loaded it: replicas that have not loaded key {id} refuse its tokens as \
                 unknown_key until they do; once every replica has it (`reqstate keys status \
                 --connect`), pass --force"
            ),
        }));
    }
    set_instant(
        find_key(key_tables(&mut doc, path)?, id)?,
        "mint_from",
        start,
    )?;
    let written = validate_and_write(path, &doc, Some(&o.policy))?;
    let safe = start.saturating_add(live(&o.policy));
    let mut said = vec![format!(
        "key {id} mints from {} ({}); key {minting} mints until then and keeps verifying. \
         Retire it at {} or later, when its last tokens have expired ({}): \
         `reqstate keys retire {k} {minting} --at {}`",
        at(start),
        relative(start, now),
        at(safe),
        policy_text(&o.policy),
        at(safe)
    )];
    if early {
        said.push(format!(
            "forced: replicas that have not loaded key {id} refuse its tokens as unknown_key \
             until they do"
        ));
    }
    said.push(Timeline::of_keyring(&written, now).to_text());
    Ok(said.join("\n"))
}

/// `keys retire`: schedules a retirement when no live token needs the key,
/// or cuts it off now with `--force`.
pub(crate) fn retire(path: &Path, id: u32, o: RetireOptions) -> Result<String, KeysError> {
    let k = keyring_flag(path);
    let now = o.now;
    let (mut doc, keyring) = open(path)?;
    let key = keyring
        .get(KeyId::new(id))
        .ok_or_else(|| KeysError::Refused(format!("no key with id {id} in the keyring")))?;
    if key.status() == KeyStatus::Retired {
        return Ok(format!("key {id} is already retired"));
    }
    if let Some(r) = key.retire_at().filter(|&r| r <= now) {
        return Ok(format!("key {id} is already retired (since {})", at(r)));
    }
    let minting = keyring.minting_key(now).id().get();
    let order = mint_order(&keyring);
    let position = order.iter().position(|k| k.id() == key.id());
    let cut_off_said = format!(
        "key {id} is retired (status = \"retired\"): each replica refuses its tokens \
         (retired_key) as soon as it loads this file, live or not"
    );
    let Some(i) = position else {
        // Not in the mint order: the file does not say when it last minted.
        if !o.force {
            let scheduled = key
                .retire_at()
                .map(|r| format!(" (it already retires at {})", at(r)))
                .unwrap_or_default();
            return Err(KeysError::Refused(format!(
                "key {id} is \"active\" without a schedule{scheduled}: the file cannot tell when \
                 it last minted, so tokens it minted may still be live. If it stopped minting \
                 more than the longest lifetime plus the leeway ({} s) ago, pass --force",
                live(&o.policy)
            )));
        }
        cut_off(find_key(key_tables(&mut doc, path)?, id)?);
        let written = validate_and_write(path, &doc, Some(&o.policy))?;
        return Ok(format!(
            "{cut_off_said}\n{}",
            Timeline::of_keyring(&written, now).to_text()
        ));
    };
    if o.force {
        if id == minting {
            return Err(KeysError::Refused(format!(
                "key {id} mints now: retiring it would leave no key to mint. Schedule a \
                 successor first (`reqstate keys rotate {k}`, or `reqstate keys promote {k} ID`)"
            )));
        }
        let mut said = Vec::new();
        let has_minted =
            key.status() == KeyStatus::Primary || key.mint_from().is_some_and(|m| m <= now);
        let tables = key_tables(&mut doc, path)?;
        if has_minted {
            said.extend(settle(tables, &keyring, now));
        } else if let Some(before) = i.checked_sub(1).and_then(|b| order.get(b)) {
            // A key that never minted: the one before it mints on instead.
            if let Some(retire_at) = before.retire_at() {
                let before_id = before.id().get();
                match order.get(i + 1) {
                    None => {
                        find_key(tables, before_id)?.remove("retire_at");
                        said.push(format!(
                            "key {before_id} keeps minting: its retire_at {} was dropped",
                            at(retire_at)
                        ));
                    }
                    Some(next) => {
                        let safe = next
                            .mint_from()
                            .unwrap_or(0)
                            .saturating_add(live(&o.policy));
                        if retire_at < safe {
                            set_instant(find_key(tables, before_id)?, "retire_at", safe)?;
                            said.push(format!(
                                "key {before_id} mints until key {} takes over: it now \
                                 retires at {}",
                                next.id(),
                                at(safe)
                            ));
                        }
                    }
                }
            }
        }
        cut_off(find_key(tables, id)?);
        let written = validate_and_write(path, &doc, Some(&o.policy))?;
        said.push(cut_off_said);
        said.push(Timeline::of_keyring(&written, now).to_text());
        return Ok(said.join("\n"));
    }
    let Some(next) = order.get(i + 1) else {
        return Err(KeysError::Refused(format!(
            "key {id} is the last key to mint{}: retiring it would leave no key to mint. \
             Schedule a successor first (`reqstate keys rotate {k}`)",
            if id == minting { " and mints now" } else { "" }
        )));
    };
    let takeover = next.mint_from().unwrap_or(0);
    let safe = takeover.saturating_add(live(&o.policy));
    let retire_at = o.at.unwrap_or(now);
    if retire_at < safe {
        return Err(KeysError::Refused(format!(
            "retiring key {id} at {} would refuse live tokens: it mints until key {} takes over \
             at {}, and the tokens it mints until then are accepted until {} ({}); from {} to {} \
             they would be refused as retired_key. Retire it at {} or later (`--at {}`), or pass \
             --force to cut it off now (a leaked key)",
            at(retire_at),
            next.id(),
            at(takeover),
            at(safe),
            policy_text(&o.policy),
            at(retire_at),
            at(safe),
            at(safe),
            at(safe)
        )));
    }
    set_instant(
        find_key(key_tables(&mut doc, path)?, id)?,
        "retire_at",
        retire_at,
    )?;
    let written = validate_and_write(path, &doc, Some(&o.policy))?;
    Ok(format!(
        "key {id} retires at {} ({}): its tokens are refused (retired_key) from then on\n{}",
        at(retire_at),
        relative(retire_at, now),
        Timeline::of_keyring(&written, now).to_text()
    ))
}
