//! tests/vectors/v1.json through every implementation: every `valid` and
//! `single_use` vector minted again by each and verified (or consumed)
//! crosswise, every `invalid` and `accepted` verify vector and every
//! `mint_invalid` mint vector run by each. What the command line cannot
//! express is excluded by name with the reason and listed in the output; a
//! section or field this harness does not know fails the test.

use serde_json::{Value, json};

use crate::fixtures::{check_fields, fixtures, now, strings};
use crate::implementations::{Pass, implementations, mint_token, run, verify_args};
use crate::policies::policy_args;
use crate::shapes::{Outcome, outcome, refused};
use crate::sidecar_process::TestResult;

/// (implementation, vector name, cause) of vectors known to fail. Each is
/// asserted to still fail, so that a fixed one is taken off the list.
const KNOWN_GAPS: &[(&str, &str, &str)] = &[];

fn known_gap(implementation: &str, vector: &str) -> Option<&'static str> {
    KNOWN_GAPS
        .iter()
        .find(|(i, v, _)| *i == implementation && *v == vector)
        .map(|(_, _, cause)| *cause)
}

/// Whether `hex` is exactly one well-formed CBOR data item.
fn one_cbor_item(hex: &str) -> bool {
    let Ok(bytes) = hex::decode(hex) else {
        return false;
    };
    let mut rest = &bytes[..];
    ciborium::from_reader::<ciborium::Value, _>(&mut rest).is_ok() && rest.is_empty()
}

#[test]
fn vectors_through_every_implementation() -> TestResult {
    let fx = fixtures()?;
    let imps = implementations();
    let text = |v: &Value, key: &str| -> TestResult<String> {
        Ok(v[key]
            .as_str()
            .ok_or_else(|| format!("vector field {key}"))?
            .to_string())
    };
    let mut ran = 0;
    for vector in fx.vectors["valid"].as_array().ok_or("no valid vectors")? {
        let name = text(vector, "name")?;
        let key_id = vector["key_id"].as_u64().ok_or("key_id")?;
        let key = fx.vectors["keys"]
            .as_array()
            .ok_or("keys")?
            .iter()
            .find(|k| k["id"].as_u64() == Some(key_id))
            .ok_or("vector key")?;
        let hmac = key["algorithm"] == "hmac-sha256";
        let at = vector["now"].as_u64().ok_or("now")?;
        let state_cbor = text(vector, "state_cbor")?;
        let expected = {
            let mut object = json!({
                "valid": true,
                "step": vector["step"],
                "state_cbor_hex": state_cbor,
                "key_id": key_id,
                "issued_at": vector["issued_at"],
                "expires_at": vector["expires_at"],
            });
            // Every valid vector's state has a JSON form (null is JSON null).
            object["state"] = vector["state_json"].clone();
            Outcome::Ok(object)
        };
        let common = |extra: &[&str]| -> TestResult<Vec<String>> {
            let mut args = strings(&["--tool", &text(vector, "tool")?]);
            args.extend(fx.context_args(&text(vector, "context")?)?);
            args.extend(now(at));
            args.extend(strings(extra));
            Ok(args)
        };
        let step = text(vector, "step")?;
        let ttl = vector["ttl"].as_u64().ok_or("ttl")?.to_string();
        let state_json = serde_json::to_string(&vector["state_json"])?;
        let mint_forms = [
            common(&[
                "--step",
                &step,
                "--ttl",
                &ttl,
                "--state-cbor-hex",
                &state_cbor,
            ])?,
            common(&["--step", &step, "--ttl", &ttl, "--state-json", &state_json])?,
        ];
        let only = format!("only-{key_id}");
        let mut tokens = vec![("vector".to_string(), text(vector, "token")?)];
        for imp in &imps {
            for args in &mint_forms {
                let what = format!("vector {name:?} / mint by {} {args:?}", imp.name);
                let (token, minted) = mint_token(&fx, imp, &only, args, &what)?;
                assert_eq!(minted["key_id"], key_id, "{what}");
                assert_eq!(minted["issued_at"], vector["issued_at"], "{what}");
                assert_eq!(minted["expires_at"], vector["expires_at"], "{what}");
                if hmac {
                    assert_eq!(token, tokens[0].1, "{what}: not the vector's token");
                }
                tokens.push((imp.name.to_string(), token));
            }
        }
        for (minter, token) in &tokens {
            for verifier in &imps {
                let what = format!(
                    "vector {name:?} / minted by {minter}, verified by {}",
                    verifier.name
                );
                let (args, stdin) = verify_args(
                    &fx,
                    "vectors",
                    &common(&["--expected-step", &step])?,
                    token,
                    Pass::Flag,
                )?;
                let got = outcome(&what, &run(verifier, &args, stdin.as_deref())?, "verify")?;
                assert_eq!(got, expected, "{what}");
                ran += 1;
            }
        }
    }

    // Single-use tokens (FORMAT.md §5.1): each implementation consumes the
    // vector's token (`verify --consume`) and refuses it to `verify`; each
    // mints one from the same inputs (another token id, so another token:
    // the claims are compared), which every implementation consumes.
    for vector in fx.vectors["single_use"]
        .as_array()
        .ok_or("no single_use vectors")?
    {
        let name = text(vector, "name")?;
        let key_id = vector["key_id"].as_u64().ok_or("key_id")?;
        let at = vector["now"].as_u64().ok_or("now")?;
        let step = text(vector, "step")?;
        let expected = Outcome::Ok(json!({
            "valid": true,
            "step": vector["step"],
            "state_cbor_hex": vector["state_cbor"],
            "key_id": key_id,
            "issued_at": vector["issued_at"],
            "expires_at": vector["expires_at"],
            "state": vector["state_json"],
        }));
        let common = |extra: &[&str]| -> TestResult<Vec<String>> {
            let mut args = strings(&["--tool", &text(vector, "tool")?]);
            args.extend(fx.context_args(&text(vector, "context")?)?);
            args.extend(now(at));
            args.extend(policy_args(&name, vector)?);
            args.extend(strings(extra));
            Ok(args)
        };
        let ttl = vector["ttl"].as_u64().ok_or("ttl")?.to_string();
        let mut tokens = vec![("vector".to_string(), text(vector, "token")?)];
        for imp in &imps {
            let what = format!(
                "single_use vector {name:?} / mint --single-use by {}",
                imp.name
            );
            let args = common(&[
                "--step",
                &step,
                "--ttl",
                &ttl,
                "--state-cbor-hex",
                &text(vector, "state_cbor")?,
                "--single-use",
            ])?;
            let (token, minted) = mint_token(&fx, imp, &format!("only-{key_id}"), &args, &what)?;
            assert_eq!(minted["issued_at"], vector["issued_at"], "{what}");
            assert_eq!(minted["expires_at"], vector["expires_at"], "{what}");
            assert_eq!(token.len(), text(vector, "token")?.len(), "{what}: length");
            assert_ne!(token, tokens[0].1, "{what}: the vector's token id again");
            tokens.push((imp.name.to_string(), token));
        }
        for (minter, token) in &tokens {
            for verifier in &imps {
                let what = format!(
                    "single_use vector {name:?} / minted by {minter}, consumed by {}",
                    verifier.name
                );
                let (args, stdin) = verify_args(
                    &fx,
                    "vectors",
                    &common(&["--expected-step", &step, "--consume"])?,
                    token,
                    Pass::Flag,
                )?;
                let got = outcome(&what, &run(verifier, &args, stdin.as_deref())?, "verify")?;
                assert_eq!(got, expected, "{what}");
                let (args, stdin) = verify_args(&fx, "vectors", &common(&[])?, token, Pass::Flag)?;
                let got = outcome(&what, &run(verifier, &args, stdin.as_deref())?, "verify")?;
                assert_eq!(
                    got,
                    refused("single_use"),
                    "{what}: verify without --consume"
                );
                ran += 2;
            }
        }
    }

    // The other sections: run below, or excluded here with the reason.
    // A section this harness does not know fails the test.
    for section in fx.vectors.as_object().ok_or("vectors")?.keys() {
        match section.as_str() {
            "description" | "format_version" | "policy" | "keys" | "valid" | "invalid"
            | "accepted" | "mint_invalid" | "single_use" => {}
            // docs/CLI.md has no seal/unseal.
            "sealed" => {}
            // The call context is computed by the SDKs, not by this command line.
            "call_context" => {}
            // Run by keyrings::keyring_vectors_through_every_implementation.
            "keyrings" => {}
            // Run by keyrings::schedule_vectors_through_every_implementation.
            "schedules" => {}
            // TOML texts for each implementation's own reader: the core's,
            // TypeScript's and Python's vector suites and verify_v1.py run
            // them (every command line reads its keyring through one of those).
            "keyring_texts" => {}
            // Run by policy_vectors_are_refused_as_usage_errors_or_accepted.
            "policies" => {}
            // The shared store's record lifetime: no command-line output shows
            // it; each implementation's unit runs the vectors, and
            // single_use.rs consumes through one real Redis with every one.
            "shared_lifetimes" => {}
            other => {
                return Err(format!(
                    "tests/vectors/v1.json has a section {other:?} that this harness does not \
                     know: run it here or exclude it with the reason"
                )
                .into());
            }
        }
    }
    let mut excluded: Vec<String> = Vec::new();
    let mut failures: Vec<String> = Vec::new();
    let sections = [
        ("invalid", fx.vectors["invalid"].as_array()),
        ("accepted", fx.vectors["accepted"].as_array()),
    ];
    for (section, entries) in sections {
        for vector in entries.into_iter().flatten() {
            let name = text(vector, "name")?;
            check_fields(
                &name,
                vector,
                &[
                    "name",
                    "operation",
                    "token",
                    "tool",
                    "context",
                    "now",
                    "expected_step",
                    "policy",
                    "expect_fail",
                    "decode_as",
                    "step",
                    "state_cbor",
                    "state_json",
                    "key_id",
                    "issued_at",
                    "expires_at",
                    "payload",
                    "spent",
                    "spent_record",
                    "record_until",
                ],
            )?;
            let consume = vector["operation"] == "consume";
            match vector["operation"].as_str() {
                Some("verify") => {}
                Some("consume") => {
                    // `verify --consume` starts each run with an empty
                    // spent-token record (docs/CLI.md): a store that already
                    // holds records has no command-line equivalent.
                    if vector["spent"].as_array().is_some_and(|s| !s.is_empty()) {
                        excluded.push(format!(
                            "{name}: `spent` records (the command line's record starts empty)"
                        ));
                        continue;
                    }
                }
                Some("unseal") => {
                    excluded.push(format!("{name}: unseal is not in docs/CLI.md"));
                    continue;
                }
                other => {
                    return Err(format!("vector {name:?}: unknown operation {other:?}").into());
                }
            }
            let expected = match vector["expect_fail"].as_str() {
                // The command line never decodes the state into a caller's
                // type, so step 14 of a typed caller has no equivalent.
                Some("state_decoding") if !vector["decode_as"].is_null() => {
                    excluded.push(format!("{name}: decode_as has no command-line equivalent"));
                    continue;
                }
                Some(reason) => refused(reason),
                None if section == "accepted" => {
                    let mut object = json!({ "valid": true });
                    for (from, to) in [
                        ("step", "step"),
                        ("state_cbor", "state_cbor_hex"),
                        ("key_id", "key_id"),
                        ("issued_at", "issued_at"),
                        ("expires_at", "expires_at"),
                        ("state_json", "state"),
                    ] {
                        if let Some(value) = vector.get(from) {
                            object[to] = value.clone();
                        }
                    }
                    Outcome::Ok(object)
                }
                None => return Err(format!("vector {name:?}: no expect_fail").into()),
            };
            let mut args = strings(&["--tool", &text(vector, "tool")?]);
            args.extend(fx.context_args(&text(vector, "context")?)?);
            args.extend(now(vector["now"].as_u64().ok_or("now")?));
            if let Some(step) = vector["expected_step"].as_str() {
                args.extend(strings(&["--expected-step", step]));
            }
            if consume {
                args.push("--consume".into());
            }
            args.extend(policy_args(&name, vector)?);
            for verifier in &imps {
                let what = format!("{section} vector {name:?} / verified by {}", verifier.name);
                let (argv, stdin) =
                    verify_args(&fx, "vectors", &args, &text(vector, "token")?, Pass::Flag)?;
                let mut got = outcome(&what, &run(verifier, &argv, stdin.as_deref())?, "verify")?;
                // Fields the vector does not give (its key id, the state's
                // JSON form) are left out of the comparison; their shape was
                // checked.
                if let (Outcome::Ok(got), Outcome::Ok(want)) = (&mut got, &expected) {
                    let want = want.as_object().ok_or("expected")?;
                    got.as_object_mut()
                        .ok_or("got")?
                        .retain(|key, _| want.contains_key(key));
                }
                if let Some(cause) = known_gap(verifier.name, &name) {
                    assert_ne!(got, expected, "{what}: passes now: take it off KNOWN_GAPS");
                    excluded.push(format!("{name}: {} ({cause})", verifier.name));
                    continue;
                }
                if got != expected {
                    failures.push(format!(
                        "{what}:\n    got      {got:?}\n    expected {expected:?}"
                    ));
                }
                ran += 1;
            }
        }
    }
    for vector in fx.vectors["mint_invalid"].as_array().into_iter().flatten() {
        let name = text(vector, "name")?;
        check_fields(
            &name,
            vector,
            &[
                "name",
                "operation",
                "key_id",
                "tool",
                "step",
                "state_cbor",
                "ttl",
                "context",
                "now",
                "policy",
                "random",
                "payload",
                "single_use",
                "expect_fail",
            ],
        )?;
        match vector["operation"].as_str() {
            Some("mint") => {}
            Some("seal") => {
                excluded.push(format!("{name}: seal is not in docs/CLI.md"));
                continue;
            }
            other => return Err(format!("vector {name:?}: unknown operation {other:?}").into()),
        }
        if vector["expect_fail"] == "randomness_unavailable" {
            // The command line cannot be handed a failing random source.
            excluded.push(format!("{name}: needs a failing random source"));
            continue;
        }
        let key_id = vector["key_id"].as_u64().ok_or("key_id")?;
        let mut args = strings(&[
            "--tool",
            &text(vector, "tool")?,
            "--step",
            &text(vector, "step")?,
        ]);
        args.extend(fx.context_args(&text(vector, "context")?)?);
        args.extend(now(vector["now"].as_u64().ok_or("now")?));
        args.extend(strings(&[
            "--ttl",
            &vector["ttl"].as_u64().ok_or("ttl")?.to_string(),
        ]));
        args.extend(strings(&["--state-cbor-hex", &text(vector, "state_cbor")?]));
        args.extend(policy_args(&name, vector)?);
        if vector["single_use"] == true {
            args.push("--single-use".into());
        }
        // State bytes that are not one CBOR item are refused by the command
        // line itself (docs/CLI.md, `--state-cbor-hex`: exit 64), where the
        // core, given bytes, says `state_encoding`.
        let expected = if one_cbor_item(&text(vector, "state_cbor")?) {
            Outcome::Refused(json!({ "reason": text(vector, "expect_fail")? }))
        } else {
            assert_eq!(vector["expect_fail"], "state_encoding", "{name}");
            Outcome::Usage
        };
        for minter in &imps {
            let what = format!("mint_invalid vector {name:?} / minted by {}", minter.name);
            let out = run(
                minter,
                &fx.args("mint", &format!("only-{key_id}"), &args)?,
                None,
            )?;
            assert_eq!(outcome(&what, &out, "mint")?, expected, "{what}");
            ran += 1;
        }
    }
    // Say what was left out, so that it is never silent.
    eprintln!(
        "{ran} vector runs; {} vectors excluded:\n  {}",
        excluded.len(),
        excluded.join("\n  ")
    );
    assert!(
        failures.is_empty(),
        "{} vectors failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(ran > 0);
    Ok(())
}
