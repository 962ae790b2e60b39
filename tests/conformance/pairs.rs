//! The table (table.rs) through every ordered (minter, verifier) pair of
//! implementations: every verifier gives every minter's token the same
//! answer, field by field, and HMAC mints are byte-identical across
//! implementations and across runs.

use serde_json::Value;

use crate::fixtures::fixtures;
use crate::implementations::{implementations, mint_token, run, verify_args};
use crate::shapes::outcome;
use crate::sidecar_process::TestResult;
use crate::table::{Edit, cases};

fn tamper(token: &str) -> String {
    let mut chars: Vec<char> = token.chars().collect();
    let at = chars.len() / 2;
    chars[at] = if chars[at] == 'A' { 'B' } else { 'A' };
    chars.into_iter().collect()
}

#[test]
fn table_through_every_ordered_pair() -> TestResult {
    let fx = fixtures()?;
    let imps = implementations();
    let mut checked = 0;
    let user_42 = fx.dir.path().join("user-42.txt");
    std::fs::write(&user_42, "user-42")?;
    for case in cases(&user_42.display().to_string()) {
        // A single-use token carries a random id (FORMAT.md §5.1): every
        // mint differs, HMAC ones too.
        let single_use = case.mint.iter().any(|a| a == "--single-use");
        let deterministic = case.algorithm_is_hmac && !single_use;
        // Every implementation mints; HMAC tokens must be identical.
        let mut minted: Vec<(String, Value)> = Vec::new();
        for minter in &imps {
            let what = format!("{} / mint by {}", case.name, minter.name);
            let (token, object) = mint_token(&fx, minter, case.mint_keyring, &case.mint, &what)?;
            if let Some((first_token, first)) = minted.first() {
                assert_eq!(
                    object["issued_at"], first["issued_at"],
                    "{what}: issued_at differs from {}",
                    imps[0].name
                );
                assert_eq!(object["expires_at"], first["expires_at"], "{what}");
                assert_eq!(object["key_id"], first["key_id"], "{what}");
                if deterministic {
                    assert_eq!(
                        &token, first_token,
                        "{what}: HMAC token differs from {}'s",
                        imps[0].name
                    );
                } else if single_use {
                    assert_ne!(
                        &token, first_token,
                        "{what}: two single-use tokens are equal"
                    );
                }
            }
            if deterministic {
                // Deterministic within one implementation too.
                let (again, _) = mint_token(&fx, minter, case.mint_keyring, &case.mint, &what)?;
                assert_eq!(again, token, "{what}: two HMAC mints differ");
            } else if single_use {
                let (again, _) = mint_token(&fx, minter, case.mint_keyring, &case.mint, &what)?;
                assert_ne!(again, token, "{what}: two single-use mints are equal");
                // Its header says kind 2 (0x19 HMAC, 0x1A XChaCha: "GQ", "Gg").
                assert!(
                    token.starts_with("GQ") || token.starts_with("Gg"),
                    "{what}: not a kind-2 header: {token}"
                );
            }
            minted.push((token, object));
        }
        // Every verifier judges every minter's token.
        for (minter, (token, _)) in imps.iter().zip(&minted) {
            let token = match case.edit {
                Edit::None => token.clone(),
                Edit::Tamper => tamper(token),
            };
            for verifier in &imps {
                let what = format!(
                    "{} / minted by {}, verified by {}",
                    case.name, minter.name, verifier.name
                );
                let (args, stdin) =
                    verify_args(&fx, case.verify_keyring, &case.verify, &token, case.pass)?;
                let out = run(verifier, &args, stdin.as_deref())?;
                let got = outcome(&what, &out, "verify")?;
                assert_eq!(got, case.expect, "{what}");
                checked += 1;
            }
        }
    }
    assert!(checked >= 50, "only {checked} verifications ran");
    Ok(())
}
