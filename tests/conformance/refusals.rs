//! Bad input to every implementation: mint refusals are the core's reasons
//! in the core's order (exit 1), and usage errors (flags, state forms,
//! keyrings, policy ranges) exit 64 with a message and no JSON.

use serde_json::json;

use crate::fixtures::{NOW, fixtures, now, strings};
use crate::implementations::{implementations, mint_token, run};
use crate::shapes::{Outcome, outcome};
use crate::sidecar_process::TestResult;

#[test]
fn mint_refusals_are_the_cores_reasons_in_order() -> TestResult {
    let fx = fixtures()?;
    let base = |extra: &[&str]| -> Vec<String> {
        let mut args = strings(&["--tool", "t", "--step", "s"]);
        args.extend(now(NOW));
        args.extend(strings(extra));
        args
    };
    let deep = format!("{}{}", "[".repeat(17), "]".repeat(17));
    let cases: Vec<(&str, Vec<String>, &str)> = vec![
        ("ttl 0", base(&["--ttl", "0"]), "invalid_argument"),
        (
            "ttl above the maximum",
            base(&["--ttl", "86401"]),
            "lifetime_too_long",
        ),
        (
            "empty tool",
            {
                let mut a = base(&[]);
                a[1] = String::new();
                a
            },
            "invalid_argument",
        ),
        (
            "empty step",
            {
                let mut a = base(&[]);
                a[3] = String::new();
                a
            },
            "invalid_argument",
        ),
        (
            "state nested 17 levels (JSON)",
            base(&["--state-json", &deep]),
            "state_encoding",
        ),
        (
            "state nested 17 levels (CBOR)",
            base(&["--state-cbor-hex", &format!("{}f6", "81".repeat(17))]),
            "state_encoding",
        ),
        (
            "argument checks come before the state's",
            base(&["--ttl", "0", "--state-json", &deep]),
            "invalid_argument",
        ),
        (
            "the clock plus the ttl overflows",
            {
                let mut a = strings(&["--tool", "t", "--step", "s", "--ttl", "10"]);
                a.extend(now(u64::MAX - 5));
                a
            },
            "invalid_argument",
        ),
        (
            "token above --max-token-len",
            base(&[
                "--max-token-len",
                "64",
                "--state-json",
                &format!("{:?}", "x".repeat(100)),
            ]),
            "too_large",
        ),
    ];
    for imp in implementations() {
        for (name, args, reason) in &cases {
            for keyring in ["main", "main-hmac"] {
                let what = format!("{name} / mint by {} with {keyring}", imp.name);
                let out = run(&imp, &fx.args("mint", keyring, args)?, None)?;
                assert_eq!(
                    outcome(&what, &out, "mint")?,
                    Outcome::Refused(json!({ "reason": reason })),
                    "{what}"
                );
            }
        }
    }
    Ok(())
}

#[test]
fn usage_errors_exit_64_with_a_message_and_no_json() -> TestResult {
    let fx = fixtures()?;
    let token = {
        let imps = implementations();
        mint_token(
            &fx,
            &imps[0],
            "main",
            &strings(&["--tool", "t", "--step", "s"]),
            "setup",
        )?
        .0
    };
    let mint = |keyring: &str, extra: &[&str]| -> TestResult<Vec<String>> {
        let mut args = strings(&["--tool", "t", "--step", "s"]);
        args.extend(strings(extra));
        fx.args("mint", keyring, &args)
    };
    let verify = |keyring: &str, extra: &[&str]| -> TestResult<Vec<String>> {
        let mut args = strings(&["--tool", "t"]);
        args.extend(strings(extra));
        fx.args("verify", keyring, &args)
    };
    let t = format!("--token={token}");
    let cases: Vec<(&str, Vec<String>)> = vec![
        (
            "both context flags (mint)",
            mint("main", &["--context", "a", "--context-hex", "61"])?,
        ),
        (
            "both context flags (verify)",
            verify("main", &["--context", "a", "--context-hex", "61", &t])?,
        ),
        ("odd hex context", mint("main", &["--context-hex", "616"])?),
        (
            "non-hex context",
            verify("main", &["--context-hex", "zz", &t])?,
        ),
        ("invalid JSON state", mint("main", &["--state-json", "{"])?),
        (
            "JSON state with trailing text",
            mint("main", &["--state-json", "1 2"])?,
        ),
        (
            "repeated JSON key",
            mint("main", &["--state-json", r#"{"a":1,"a":1}"#])?,
        ),
        (
            "integer out of range",
            mint("main", &["--state-json", "18446744073709551616"])?,
        ),
        (
            "float out of range",
            mint("main", &["--state-json", "1e999"])?,
        ),
        (
            "both state flags",
            mint("main", &["--state-json", "1", "--state-cbor-hex", "01"])?,
        ),
        (
            "CBOR not in preferred serialization",
            mint("main", &["--state-cbor-hex", "1801"])?,
        ),
        (
            "CBOR with trailing bytes",
            mint("main", &["--state-cbor-hex", "0101"])?,
        ),
        ("bad CBOR hex", mint("main", &["--state-cbor-hex", "x1"])?),
        ("missing keyring (mint)", mint("missing", &[])?),
        ("missing keyring (verify)", verify("missing", &[&t])?),
        ("invalid keyring (mint)", mint("invalid", &[])?),
        ("invalid keyring (verify)", verify("invalid", &[&t])?),
        ("--now not a number", mint("main", &["--now", "soon"])?),
        ("--now negative", verify("main", &["--now=-1", &t])?),
        ("--ttl negative", mint("main", &["--ttl=-1"])?),
        (
            "--clock-leeway above 600",
            verify("main", &["--clock-leeway", "601", &t])?,
        ),
        ("--max-lifetime 0", mint("main", &["--max-lifetime", "0"])?),
        (
            "--max-token-len 0",
            verify("main", &["--max-token-len", "0", &t])?,
        ),
        ("no token", verify("main", &[])?),
        ("two tokens", verify("main", &[&t, "--", &token])?),
        (
            "no --tool",
            fx.args("verify", "main", std::slice::from_ref(&t))?,
        ),
        (
            "no --step at mint",
            fx.args("mint", "main", &strings(&["--tool", "t"]))?,
        ),
        (
            "no --keyring",
            strings(&["mint", "--tool", "t", "--step", "s"]),
        ),
        ("unknown flag", mint("main", &["--no-such-flag"])?),
    ];
    for imp in implementations() {
        for (name, args) in &cases {
            let what = format!("{name} / {}", imp.name);
            let out = run(&imp, args, None)?;
            assert_eq!(outcome(&what, &out, "mint")?, Outcome::Usage, "{what}");
        }
    }
    Ok(())
}
