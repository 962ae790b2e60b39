//! The table of mint → verify cases (docs/CLI.md's flags, FORMAT.md's
//! checks), under both algorithms, that pairs.rs runs through every ordered
//! (minter, verifier) pair.

use serde_json::{Value, json};

use crate::fixtures::{NOW, now, strings};
use crate::implementations::Pass;
use crate::shapes::{Outcome, refused};

/// How the minted token is changed before it is verified.
#[derive(Clone, Copy)]
pub(crate) enum Edit {
    None,
    /// One base64url character in the middle replaced by another.
    Tamper,
}

/// One mint → verify case: how to mint, how to verify, and the answer every
/// verifier must give for every minter's token.
pub(crate) struct Case {
    pub(crate) name: &'static str,
    pub(crate) algorithm_is_hmac: bool,
    pub(crate) mint_keyring: &'static str,
    pub(crate) mint: Vec<String>,
    pub(crate) verify_keyring: &'static str,
    pub(crate) verify: Vec<String>,
    pub(crate) edit: Edit,
    pub(crate) pass: Pass,
    /// The verify outcome, `message` excluded.
    pub(crate) expect: Outcome,
}

fn valid(step: &str, state: Option<Value>, cbor: &str, key_id: u64, ttl: u64) -> Outcome {
    let mut object = json!({
        "valid": true,
        "step": step,
        "state_cbor_hex": cbor,
        "key_id": key_id,
        "issued_at": NOW,
        "expires_at": NOW + ttl,
    });
    if let Some(state) = state {
        object["state"] = state;
    }
    Outcome::Ok(object)
}

const COUNTER_CBOR: &str = "a266616d6f756e74056763757272656e740a";

/// The table, once per algorithm (HMAC keyring "main-hmac", key 1; XChaCha
/// "main", key 2), plus the keys only "main" judges (HMAC only); `user_42_file`
/// holds the context `user-42` for `--context-file`.
pub(crate) fn cases(user_42_file: &str) -> Vec<Case> {
    let counter = || json!({"amount": 5, "current": 10});
    let mint = |extra: &[&str]| -> Vec<String> {
        let mut args = strings(&[
            "--tool",
            "counter",
            "--step",
            "confirm",
            "--state-json",
            r#"{"current":10,"amount":5}"#,
            "--ttl",
            "600",
            "--context",
            "user-42",
        ]);
        args.extend(now(NOW));
        args.extend(strings(extra));
        args
    };
    let verify_at = |at: u64, extra: &[&str]| -> Vec<String> {
        let mut args = strings(&[
            "--tool",
            "counter",
            "--expected-step",
            "confirm",
            "--context",
            "user-42",
        ]);
        args.extend(now(at));
        args.extend(strings(extra));
        args
    };
    let verify = |extra: &[&str]| verify_at(NOW + 10, extra);
    let mut cases = Vec::new();
    for (hmac, mint_keyring, key_id) in [(true, "main-hmac", 1), (false, "main", 2)] {
        let case = |name: &'static str,
                    mint: Vec<String>,
                    verify_keyring: &'static str,
                    verify: Vec<String>,
                    expect: Outcome| Case {
            name,
            algorithm_is_hmac: hmac,
            mint_keyring,
            mint,
            verify_keyring,
            verify,
            edit: Edit::None,
            pass: Pass::Flag,
            expect,
        };
        let ok = valid("confirm", Some(counter()), COUNTER_CBOR, key_id, 600);
        cases.extend([
            case("valid", mint(&[]), "main", verify(&[]), ok.clone()),
            case(
                "valid, verified by the minting keyring",
                mint(&[]),
                mint_keyring,
                verify(&[]),
                ok.clone(),
            ),
            Case {
                pass: Pass::Positional,
                ..case("token as the positional argument", mint(&[]), "main", verify(&[]), ok.clone())
            },
            Case {
                pass: Pass::Stdin,
                ..case("token on stdin (-)", mint(&[]), "main", verify(&[]), ok.clone())
            },
            case(
                "no --expected-step",
                mint(&[]),
                "main",
                strings(&["--tool", "counter", "--context", "user-42", "--now", &(NOW + 10).to_string()]),
                ok.clone(),
            ),
            case(
                "--context-hex at mint, --context at verify",
                {
                    let mut args = mint(&[]);
                    let at = args.iter().position(|a| a == "--context").unwrap_or(0);
                    args[at] = "--context-hex".into();
                    args[at + 1] = "757365722d3432".into();
                    args
                },
                "main",
                verify(&[]),
                ok.clone(),
            ),
            case(
                "--context-file at verify",
                mint(&[]),
                "main",
                {
                    let mut args = verify(&[]);
                    let at = args.iter().position(|a| a == "--context").unwrap_or(0);
                    args[at] = "--context-file".into();
                    args[at + 1] = user_42_file.into();
                    args
                },
                ok.clone(),
            ),
            case(
                "uppercase --context-hex",
                mint(&[]),
                "main",
                {
                    let mut args = verify(&[]);
                    let at = args.iter().position(|a| a == "--context").unwrap_or(0);
                    args[at] = "--context-hex".into();
                    args[at + 1] = "757365722D3432".into();
                    args
                },
                ok.clone(),
            ),
            Case {
                edit: Edit::Tamper,
                ..case("tampered", mint(&[]), "main", verify(&[]), refused("authentication_failed"))
            },
            case(
                "still valid within the leeway after expiry",
                mint(&[]),
                "main",
                verify_at(NOW + 600 + 59, &[]),
                ok.clone(),
            ),
            case(
                "expired at --now",
                mint(&[]),
                "main",
                verify_at(NOW + 600 + 60, &[]),
                refused("expired"),
            ),
            case(
                "expired at --now with --clock-leeway 0",
                mint(&[]),
                "main",
                verify_at(NOW + 600, &["--clock-leeway", "0"]),
                refused("expired"),
            ),
            case(
                "not yet valid at --now",
                mint(&[]),
                "main",
                verify_at(NOW - 61, &[]),
                refused("not_yet_valid"),
            ),
            case(
                "wrong step",
                mint(&[]),
                "main",
                {
                    let mut args = verify(&[]);
                    let at = args.iter().position(|a| a == "--expected-step").unwrap_or(0);
                    args[at + 1] = "pay".into();
                    args
                },
                refused("wrong_step"),
            ),
            case(
                "another tool",
                mint(&[]),
                "main",
                {
                    let mut args = verify(&[]);
                    args[1] = "decrease-counter".into();
                    args
                },
                refused("authentication_failed"),
            ),
            case(
                "another context",
                mint(&[]),
                "main",
                {
                    let mut args = verify(&[]);
                    let at = args.iter().position(|a| a == "--context").unwrap_or(0);
                    args[at + 1] = "user-43".into();
                    args
                },
                refused("authentication_failed"),
            ),
            case(
                "empty context at verify",
                mint(&[]),
                "main",
                strings(&["--tool", "counter", "--now", &(NOW + 10).to_string()]),
                refused("authentication_failed"),
            ),
            case(
                "longer than --max-token-len",
                mint(&[]),
                "main",
                verify(&["--max-token-len", "64"]),
                refused("too_large"),
            ),
            case(
                "lifetime above the verifier's --max-lifetime",
                {
                    let mut args = mint(&["--max-lifetime", "200000"]);
                    let at = args.iter().position(|a| a == "--ttl").unwrap_or(0);
                    args[at + 1] = "172800".into();
                    args
                },
                "main",
                verify(&[]),
                refused("lifetime_too_long"),
            ),
            case(
                "empty tool at verify",
                mint(&[]),
                "main",
                {
                    let mut args = verify(&[]);
                    args[1] = String::new();
                    args
                },
                refused("invalid_argument"),
            ),
            case(
                "byte-string state: no JSON form",
                strings(&[
                    "--tool", "t", "--step", "s", "--state-cbor-hex", "4401020304", "--now",
                    &NOW.to_string(),
                ]),
                "main",
                strings(&["--tool", "t", "--now", &NOW.to_string()]),
                valid("s", None, "4401020304", key_id, 600),
            ),
            case(
                "tagged state: no JSON form",
                strings(&[
                    "--tool", "t", "--step", "s", "--state-cbor-hex", "c11a692b8900", "--now",
                    &NOW.to_string(),
                ]),
                "main",
                strings(&["--tool", "t", "--now", &NOW.to_string()]),
                valid("s", None, "c11a692b8900", key_id, 600),
            ),
            case(
                "map with an integer key: no JSON form",
                strings(&[
                    "--tool", "t", "--step", "s", "--state-cbor-hex", "a101f6", "--now",
                    &NOW.to_string(),
                ]),
                "main",
                strings(&["--tool", "t", "--now", &NOW.to_string()]),
                valid("s", None, "a101f6", key_id, 600),
            ),
            case(
                "default state is null",
                strings(&["--tool", "t", "--step", "s", "--ttl", "1", "--now", &NOW.to_string()]),
                "main",
                strings(&["--tool", "t", "--now", &NOW.to_string()]),
                valid("s", Some(Value::Null), "f6", key_id, 1),
            ),
            case(
                "numbers: floats stay floats, integers integers",
                strings(&[
                    "--tool",
                    "t",
                    "--step",
                    "s",
                    "--state-json",
                    r#"[1.0, 1, -0, 0.1, 1e3, 18446744073709551615, -9223372036854775808, "é"]"#,
                    "--now",
                    &NOW.to_string(),
                ]),
                "main",
                strings(&["--tool", "t", "--now", &NOW.to_string()]),
                valid(
                    "s",
                    Some(json!([1.0, 1, 0, 0.1, 1000.0, 18446744073709551615u64, i64::MIN, "é"])),
                    "88f93c000100fb3fb999999999999af963d01bffffffffffffffff3b7fffffffffffffff62c3a9",
                    key_id,
                    600,
                ),
            ),
            case(
                "keys sorted by UTF-8 bytes, nested 16 levels",
                strings(&[
                    "--tool",
                    "t",
                    "--step",
                    "s",
                    "--state-json",
                    "{\"\u{1F600}\":1,\"\u{FF5E}\":2,\"b\":[[[[[[[[[[[[[[[]]]]]]]]]]]]]]],\"a\":{}}",
                    "--now",
                    &NOW.to_string(),
                ]),
                "main",
                strings(&["--tool", "t", "--now", &NOW.to_string()]),
                valid(
                    "s",
                    Some(json!({"\u{1F600}": 1, "\u{FF5E}": 2, "a": {}, "b": [[[[[[[[[[[[[[[]]]]]]]]]]]]]]]})),
                    "a46161a0616281818181818181818181818181818063efbd9e0264f09f988001",
                    key_id,
                    600,
                ),
            ),
        ]);
        // Single use (FORMAT.md §5.1, docs/CLI.md `--single-use`, `--consume`).
        cases.extend([
            case(
                "single-use: mint --single-use, verify --consume",
                mint(&["--single-use"]),
                "main",
                verify(&["--consume"]),
                ok.clone(),
            ),
            Case {
                pass: Pass::Stdin,
                ..case(
                    "single-use: consumed from stdin, by the minting keyring",
                    mint(&["--single-use"]),
                    mint_keyring,
                    verify(&["--consume"]),
                    ok.clone(),
                )
            },
            case(
                "single-use: verify without --consume is single_use",
                mint(&["--single-use"]),
                "main",
                verify(&[]),
                refused("single_use"),
            ),
            case(
                "single-use: a plain token to verify --consume is wrong_kind",
                mint(&[]),
                "main",
                verify(&["--consume"]),
                refused("wrong_kind"),
            ),
            case(
                "single-use: expired at --consume",
                mint(&["--single-use"]),
                "main",
                verify_at(NOW + 600 + 60, &["--consume"]),
                refused("expired"),
            ),
            case(
                "single-use: another step at --consume",
                mint(&["--single-use"]),
                "main",
                strings(&[
                    "--tool",
                    "counter",
                    "--expected-step",
                    "pay",
                    "--context",
                    "user-42",
                    "--consume",
                    "--now",
                    &(NOW + 10).to_string(),
                ]),
                refused("wrong_step"),
            ),
            Case {
                edit: Edit::Tamper,
                ..case(
                    "single-use: tampered, at --consume",
                    mint(&["--single-use"]),
                    "main",
                    verify(&["--consume"]),
                    refused("authentication_failed"),
                )
            },
        ]);
        // Keys only "main" judges: retired, unknown, another algorithm.
        for (name, keyring, reason) in [
            ("retired key", "old", "retired_key"),
            ("unknown key", "stranger", "unknown_key"),
            (
                "key id under another algorithm",
                "impostor",
                "algorithm_mismatch",
            ),
        ] {
            if hmac {
                cases.push(Case {
                    name,
                    algorithm_is_hmac: true,
                    mint_keyring: keyring,
                    mint: mint(&[]),
                    verify_keyring: "main",
                    verify: verify(&[]),
                    edit: Edit::None,
                    pass: Pass::Flag,
                    expect: refused(reason),
                });
            }
        }
    }
    cases
}
