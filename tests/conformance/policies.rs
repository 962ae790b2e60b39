//! The verify policy (FORMAT.md §8) as the command line's flags: a vector's
//! own `policy` turned into `--max-token-len`, `--clock-leeway` and
//! `--max-lifetime` (a knob it leaves out, no flag: the command's default),
//! and v1.json's `policies` refused as usage errors or accepted by every
//! implementation.

use serde_json::Value;

use crate::fixtures::{check_fields, fixtures, strings};
use crate::implementations::{implementations, mint_token, run};
use crate::shapes::{Outcome, outcome};
use crate::sidecar_process::TestResult;

/// A vector's own `policy`, as the policy flags.
pub(crate) fn policy_args(name: &str, vector: &Value) -> TestResult<Vec<String>> {
    let mut args = Vec::new();
    if let Some(policy) = vector.get("policy") {
        check_fields(
            name,
            policy,
            &["max_token_len", "clock_leeway", "max_lifetime"],
        )?;
        for (field, flag) in [
            ("max_token_len", "--max-token-len"),
            ("clock_leeway", "--clock-leeway"),
            ("max_lifetime", "--max-lifetime"),
        ] {
            // A knob the vector leaves out takes its default: no flag.
            if let Some(value) = policy.get(field) {
                let value = value
                    .as_u64()
                    .ok_or_else(|| format!("vector {name:?}: policy.{field}"))?;
                args.extend(strings(&[flag, &value.to_string()]));
            }
        }
    }
    Ok(args)
}

/// tests/vectors/v1.json's `policies` (both sides of each range of FORMAT.md
/// §8) as the policy flags of every command line: a refused policy is a
/// usage error (exit 64, a message, no JSON) before any token is looked at;
/// an accepted one lets the command run (whatever it then answers: with
/// `--max-token-len 64` the token itself is `too_large`).
#[test]
fn policy_vectors_are_refused_as_usage_errors_or_accepted() -> TestResult {
    let fx = fixtures()?;
    let imps = implementations();
    let token = mint_token(
        &fx,
        &imps[0],
        "main",
        &strings(&["--tool", "t", "--step", "s"]),
        "setup",
    )?
    .0;
    let vectors = fx.vectors["policies"].as_array().ok_or("policies")?;
    assert!(vectors.len() >= 10, "{} policy vectors", vectors.len());
    let mut ran = 0;
    for vector in vectors {
        let name = vector["name"]
            .as_str()
            .ok_or("policy vector name")?
            .to_owned();
        // `built` (the knobs' values once built) has no command-line form:
        // a command does not print its policy.
        check_fields(&name, vector, &["name", "policy", "expect_fail", "built"])?;
        let mut args = strings(&["--tool", "t"]);
        args.extend(policy_args(&name, vector)?);
        args.push(format!("--token={token}"));
        let argv = fx.args("verify", "main", &args)?;
        let refused = match vector.get("expect_fail").and_then(Value::as_str) {
            None => false,
            Some("invalid_argument") => true,
            Some(other) => return Err(format!("vector {name:?}: expect_fail {other:?}").into()),
        };
        for imp in &imps {
            let what = format!("policy vector {name:?} / {}", imp.name);
            let got = outcome(&what, &run(imp, &argv, None)?, "verify")?;
            if refused {
                assert_eq!(got, Outcome::Usage, "{what}");
            } else {
                assert_ne!(
                    got,
                    Outcome::Usage,
                    "{what}: an accepted policy was refused"
                );
            }
            ran += 1;
        }
    }
    assert_eq!(ran, vectors.len() * imps.len());
    Ok(())
}
