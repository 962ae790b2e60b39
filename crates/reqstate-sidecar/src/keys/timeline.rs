//! The timeline `reqstate keys status|rotate|list` print: what each key does
//! at an instant, its schedule, and the transitions ahead. Built from a
//! keyring file (the core's evaluation) or from a running sidecar's
//! `ListKeys` answer, and printed the same way.

use reqstate::{KeyStatus, Keyring, TransitionKind};
use reqstate_proto::v1 as pb;
use serde_json::json;

use super::time::relative;

/// One key, as the timeline shows it.
#[derive(Debug, Clone)]
pub struct KeyRow {
    /// The key id.
    pub id: u32,
    /// The algorithm's name.
    pub algorithm: String,
    /// What the key does at the timeline's instant.
    pub now: KeyStatus,
    /// The status the file writes.
    pub file_status: KeyStatus,
    /// `created`, unix seconds.
    pub created_at: Option<u64>,
    /// `mint_from`, unix seconds.
    pub mint_from: Option<u64>,
    /// `retire_at`, unix seconds.
    pub retire_at: Option<u64>,
    /// A sidecar's evidence: when it last accepted a token of the key, and
    /// how many it minted and accepted (absent for a file).
    pub evidence: Option<Evidence>,
}

/// What a sidecar saw of a key since it started (ListKeys).
#[derive(Debug, Clone, Copy)]
pub struct Evidence {
    /// The last time it accepted a token naming the key.
    pub last_verified_at: Option<u64>,
    /// Tokens minted under the key.
    pub minted: u64,
    /// Tokens accepted under the key.
    pub verified: u64,
}

/// A scheduled change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Change {
    /// The instant.
    pub at: u64,
    /// The key.
    pub key_id: u32,
    /// Whether the key starts minting (else it retires).
    pub starts_minting: bool,
}

/// The keys at one instant and what is scheduled after it.
#[derive(Debug, Clone)]
pub struct Timeline {
    /// The instant, unix seconds.
    pub now: u64,
    /// The key minting at `now`.
    pub minting: u32,
    /// Every key, by id.
    pub keys: Vec<KeyRow>,
    /// Every scheduled change after `now`, in order.
    pub ahead: Vec<Change>,
    /// A sidecar's facts about itself, when the timeline comes from one.
    pub sidecar: Option<SidecarFacts>,
}

/// What a running sidecar says about the keyring it serves.
#[derive(Debug, Clone)]
pub struct SidecarFacts {
    /// The address asked.
    pub address: String,
    /// Keyrings loaded since it started.
    pub generation: u64,
    /// SHA-256 of the keyring file it serves.
    pub sha256: String,
    /// Its `--max-ttl`.
    pub max_ttl: u64,
    /// Its `--clock-leeway`.
    pub clock_leeway: u64,
}

/// A status's name as the timeline prints it.
fn doing(status: KeyStatus) -> &'static str {
    match status {
        KeyStatus::Primary => "mints",
        KeyStatus::Active => "verifies",
        KeyStatus::Retired => "refused",
    }
}

/// The text without the padding at the end of its lines.
pub(crate) fn trim_lines(text: &str) -> String {
    text.lines()
        .map(str::trim_end)
        .collect::<Vec<_>>()
        .join("\n")
}

fn instant_or_dash(at: Option<u64>) -> String {
    at.map(reqstate::rfc3339_utc).unwrap_or_else(|| "-".into())
}

impl Timeline {
    /// The timeline of a keyring at `now`, by the core's rules.
    pub fn of_keyring(keyring: &Keyring, now: u64) -> Timeline {
        let keys = keyring
            .keys()
            .into_iter()
            .map(|k| KeyRow {
                id: k.id().get(),
                algorithm: k.algorithm().name().to_string(),
                now: keyring.status_at(k, now),
                file_status: k.status(),
                created_at: k.created_at(),
                mint_from: k.mint_from(),
                retire_at: k.retire_at(),
                evidence: None,
            })
            .collect();
        let ahead = keyring
            .transitions()
            .into_iter()
            .filter(|t| t.at > now)
            .map(|t| Change {
                at: t.at,
                key_id: t.key_id.get(),
                starts_minting: t.kind == TransitionKind::StartsMinting,
            })
            .collect();
        Timeline {
            now,
            minting: keyring.minting_key(now).id().get(),
            keys,
            ahead,
            sidecar: None,
        }
    }

    /// The timeline a sidecar answered with `ListKeys`, at its clock.
    pub fn of_list_keys(address: &str, answer: &pb::ListKeysResponse) -> Timeline {
        let status = |s: pb::KeyStatus| match s {
            pb::KeyStatus::Primary => KeyStatus::Primary,
            pb::KeyStatus::Retired => KeyStatus::Retired,
            _ => KeyStatus::Active,
        };
        let algorithm = |a: pb::Algorithm| match a {
            pb::Algorithm::HmacSha256 => reqstate::Algorithm::HmacSha256.name().to_string(),
            pb::Algorithm::Xchacha20Poly1305 => {
                reqstate::Algorithm::XChaCha20Poly1305.name().to_string()
            }
            _ => "unspecified".to_string(),
        };
        let now = answer.now;
        let keys: Vec<KeyRow> = answer
            .keys
            .iter()
            .map(|k| KeyRow {
                id: k.id,
                algorithm: algorithm(k.algorithm()),
                now: status(k.status()),
                file_status: status(k.file_status()),
                created_at: k.created_at,
                mint_from: k.mint_from,
                retire_at: k.retire_at,
                evidence: Some(Evidence {
                    last_verified_at: k.last_verified_at,
                    minted: k.minted,
                    verified: k.verified,
                }),
            })
            .collect();
        let mut ahead: Vec<Change> = keys
            .iter()
            .flat_map(|k| {
                [
                    k.mint_from.map(|at| Change {
                        at,
                        key_id: k.id,
                        starts_minting: true,
                    }),
                    k.retire_at.map(|at| Change {
                        at,
                        key_id: k.id,
                        starts_minting: false,
                    }),
                ]
            })
            .flatten()
            .filter(|c| c.at > now)
            .collect();
        ahead.sort_by_key(|c| (c.at, !c.starts_minting, c.key_id));
        let minting = if answer.minting_key_id != 0 {
            answer.minting_key_id
        } else {
            keys.iter()
                .find(|k| k.now == KeyStatus::Primary)
                .map_or(0, |k| k.id)
        };
        Timeline {
            now,
            minting,
            keys,
            ahead,
            sidecar: Some(SidecarFacts {
                address: address.to_string(),
                generation: answer.keyring_generation,
                sha256: answer.keyring_sha256.clone(),
                max_ttl: answer.max_ttl_seconds,
                clock_leeway: answer.clock_leeway_seconds,
            }),
        }
    }

    /// The first change after `now`.
    pub fn next(&self) -> Option<Change> {
        self.ahead.first().copied()
    }

    fn describe(change: &Change) -> String {
        if change.starts_minting {
            format!("key {} starts minting", change.key_id)
        } else {
            format!(
                "key {} retires: its tokens are refused (retired_key)",
                change.key_id
            )
        }
    }

    /// The timeline as text: a header, one row per key, the changes ahead.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        if let Some(s) = &self.sidecar {
            out.push_str(&format!(
                "sidecar {}: keyring generation {}, sha256 {}, max-ttl {} s, leeway {} s\n",
                s.address,
                s.generation,
                if s.sha256.is_empty() { "-" } else { &s.sha256 },
                s.max_ttl,
                s.clock_leeway
            ));
        }
        out.push_str(&format!(
            "now {} ({}): key {} mints\n",
            reqstate::rfc3339_utc(self.now),
            self.now,
            self.minting
        ));
        out.push_str(&format!(
            "{:<6} {:<19} {:<9} {:<8} {:<21} {:<21}",
            "ID", "ALGORITHM", "NOW", "STATUS", "MINT_FROM", "RETIRE_AT"
        ));
        let with_evidence = self.keys.iter().any(|k| k.evidence.is_some());
        if with_evidence {
            out.push_str(" MINTED VERIFIED LAST_VERIFIED");
        }
        for k in &self.keys {
            out.push_str(&format!(
                "\n{:<6} {:<19} {:<9} {:<8} {:<21} {:<21}",
                k.id,
                k.algorithm,
                doing(k.now),
                k.file_status.name(),
                instant_or_dash(k.mint_from),
                instant_or_dash(k.retire_at)
            ));
            if let Some(e) = &k.evidence {
                out.push_str(&format!(
                    " {:<6} {:<8} {}",
                    e.minted,
                    e.verified,
                    instant_or_dash(e.last_verified_at)
                ));
            }
        }
        if self.ahead.is_empty() {
            out.push_str("\nnothing scheduled ahead");
        } else {
            out.push_str("\nahead:");
            for change in &self.ahead {
                out.push_str(&format!(
                    "\n  {} ({}): {}",
                    reqstate::rfc3339_utc(change.at),
                    relative(change.at, self.now),
                    Self::describe(change)
                ));
            }
        }
        if let Some(next) = self.next() {
            out.push_str(&format!(
                "\nnext transition: {} at {} ({})",
                Self::describe(&next),
                reqstate::rfc3339_utc(next.at),
                relative(next.at, self.now)
            ));
        }
        trim_lines(&out)
    }

    /// The timeline as JSON (`--json`).
    pub fn to_json(&self) -> serde_json::Value {
        let change = |c: &Change| {
            json!({
                "at": c.at,
                "key_id": c.key_id,
                "kind": if c.starts_minting { "starts_minting" } else { "retires" },
            })
        };
        let keys: Vec<serde_json::Value> = self
            .keys
            .iter()
            .map(|k| {
                let mut row = json!({
                    "id": k.id,
                    "algorithm": k.algorithm,
                    "status": k.now.name(),
                    "file_status": k.file_status.name(),
                    "created_at": k.created_at,
                    "mint_from": k.mint_from,
                    "retire_at": k.retire_at,
                });
                if let Some(e) = &k.evidence {
                    row["last_verified_at"] = json!(e.last_verified_at);
                    row["minted"] = json!(e.minted);
                    row["verified"] = json!(e.verified);
                }
                row
            })
            .collect();
        let mut out = json!({
            "now": self.now,
            "minting_key_id": self.minting,
            "keys": keys,
            "ahead": self.ahead.iter().map(change).collect::<Vec<_>>(),
            "next_transition": self.next().as_ref().map(change),
        });
        if let Some(s) = &self.sidecar {
            out["sidecar"] = json!({
                "address": s.address,
                "keyring_generation": s.generation,
                "keyring_sha256": s.sha256,
                "max_ttl_seconds": s.max_ttl,
                "clock_leeway_seconds": s.clock_leeway,
            });
        }
        out
    }
}
