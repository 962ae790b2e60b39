//! Cross-implementation conformance of the `mint` / `verify` command line (docs/CLI.md): every implementation in `IMPLEMENTATIONS` runs the same table, every ordered (minter, verifier) pair is checked field by field, HMAC mints must be byte-identical, and every output must have exactly the documented shape.
//!
//! Nothing is skipped: an implementation that is listed but cannot be run
//! fails the test, and every vector of `tests/vectors/v1.json` is either run
//! or excluded here by name of its operation with the reason.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};

#[path = "support/redis_server.rs"]
mod redis_server;
#[path = "support/sidecar_process.rs"]
mod sidecar_process;

use sidecar_process::TestResult;

/// One implementation of docs/CLI.md: the argv prefix that runs it (the
/// subcommand and flags are appended).
struct Implementation {
    name: &'static str,
    argv: Vec<String>,
}

/// EVERY implementation of the command line, in one place: the Rust binary,
/// the TypeScript package (`reqstate-ts`, clients/typescript) and the Python
/// package (`python -m reqstate`, crates/reqstate-python); every case below
/// runs through every ordered pair of them.
fn implementations() -> Vec<Implementation> {
    vec![
        Implementation {
            name: "rust",
            argv: vec![env!("CARGO_BIN_EXE_reqstate").into()],
        },
        // Built by clients/typescript/build.sh (scripts/test.sh runs it first).
        Implementation {
            name: "typescript",
            argv: vec!["node".into(), root("clients/typescript/dist/cli.js")],
        },
        // Installed by crates/reqstate-python/run-tests.sh into that
        // directory's .venv (scripts/test.sh runs it first).
        Implementation {
            name: "python",
            argv: vec![python(), "-m".into(), "reqstate".into()],
        },
    ]
}

/// The Python interpreter that has the `reqstate` package installed:
/// `$REQSTATE_PYTHON`, else the runner's virtualenv,
/// crates/reqstate-python/.venv/bin/python. One that is missing or cannot
/// import the package fails `every_implementation_is_runnable` (with the
/// runner named in its message): nothing is skipped.
fn python() -> String {
    match std::env::var("REQSTATE_PYTHON") {
        Ok(python) if !python.is_empty() => python,
        _ => root("crates/reqstate-python/.venv/bin/python"),
    }
}

fn root(path: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(path)
        .display()
        .to_string()
}

/// (implementation, vector name, cause) of vectors known to fail. Each is
/// asserted to still fail, so that a fixed one is taken off the list.
const KNOWN_GAPS: &[(&str, &str, &str)] = &[];

fn known_gap(implementation: &str, vector: &str) -> Option<&'static str> {
    KNOWN_GAPS
        .iter()
        .find(|(i, v, _)| *i == implementation && *v == vector)
        .map(|(_, _, cause)| *cause)
}

/// The reason names of docs/CLI.md: exactly `reqstate::Error::reason()`.
const REASONS: &[&str] = &[
    "too_large",
    "malformed",
    "unsupported_version",
    "unsupported_algorithm",
    "wrong_kind",
    "unknown_key",
    "retired_key",
    "algorithm_mismatch",
    "authentication_failed",
    "expired",
    "not_yet_valid",
    "wrong_step",
    "lifetime_too_long",
    "state_encoding",
    "state_decoding",
    "invalid_argument",
    "randomness_unavailable",
    "invalid_keyring",
    "single_use",
    "replayed",
    "replay_store_full",
    "replay_store_unavailable",
];

const NOW: u64 = 1_764_460_800;

// ---------------------------------------------------------------- running

/// What one run printed, its shape already checked against docs/CLI.md.
#[derive(Debug, Clone, PartialEq)]
enum Outcome {
    /// Exit 0 and the success object.
    Ok(Value),
    /// Exit 1 and the refusal object (its `message` checked and removed).
    Refused(Value),
    /// Exit 64, nothing on stdout, a message on stderr.
    Usage,
}

fn run(imp: &Implementation, args: &[String], stdin: Option<&str>) -> TestResult<Output> {
    let mut command = Command::new(&imp.argv[0]);
    command
        .args(&imp.argv[1..])
        .args(args)
        .env_remove("REQSTATE_KEYRING")
        .env_remove("REQSTATE_ALLOW_INSECURE_KEYRING_PERMISSIONS")
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().map_err(|e| {
        let hint = if imp.name == "python" {
            " (run `bash crates/reqstate-python/run-tests.sh` first, or set REQSTATE_PYTHON)"
        } else {
            ""
        };
        format!("{}: cannot run {:?}: {e}{hint}", imp.name, imp.argv)
    })?;
    if let Some(text) = stdin {
        child
            .stdin
            .take()
            .ok_or("no stdin")?
            .write_all(text.as_bytes())?;
    }
    Ok(child.wait_with_output()?)
}

fn is_lower_hex(s: &str) -> bool {
    s.len().is_multiple_of(2) && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn is_token_text(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// A check of one field's value.
type FieldCheck = fn(&Value) -> bool;

/// Checks that `object` has exactly the `required` keys plus any of
/// `optional`, each passing its check.
fn check_shape(
    what: &str,
    object: &Value,
    required: &[(&str, FieldCheck)],
    optional: &[&str],
) -> TestResult {
    let map = object
        .as_object()
        .ok_or_else(|| format!("{what}: not a JSON object: {object}"))?;
    for (key, check) in required {
        let value = map
            .get(*key)
            .ok_or_else(|| format!("{what}: field {key:?} missing in {object}"))?;
        if !check(value) {
            return Err(
                format!("{what}: field {key:?} has the wrong type or form in {object}").into(),
            );
        }
    }
    for key in map.keys() {
        if !required.iter().any(|(k, _)| k == key) && !optional.contains(&key.as_str()) {
            return Err(format!("{what}: undocumented field {key:?} in {object}").into());
        }
    }
    Ok(())
}

fn is_u64(v: &Value) -> bool {
    v.is_u64()
}
fn is_string(v: &Value) -> bool {
    v.is_string()
}
fn is_reason(v: &Value) -> bool {
    v.as_str().is_some_and(|r| REASONS.contains(&r))
}
fn is_message(v: &Value) -> bool {
    v.as_str().is_some_and(|m| !m.trim().is_empty())
}
fn is_token(v: &Value) -> bool {
    v.as_str().is_some_and(is_token_text)
}
fn is_hex(v: &Value) -> bool {
    v.as_str().is_some_and(|h| !h.is_empty() && is_lower_hex(h))
}
fn is_true(v: &Value) -> bool {
    v == &Value::Bool(true)
}
fn is_false(v: &Value) -> bool {
    v == &Value::Bool(false)
}

/// The one JSON line on stdout.
fn stdout_object(what: &str, out: &Output) -> TestResult<Value> {
    let text =
        std::str::from_utf8(&out.stdout).map_err(|_| format!("{what}: stdout is not UTF-8"))?;
    let line = text
        .strip_suffix('\n')
        .filter(|line| !line.contains('\n'))
        .ok_or_else(|| {
            format!(
                "{what}: stdout is not exactly one line: {text:?}\nstderr: {}",
                String::from_utf8_lossy(&out.stderr)
            )
        })?;
    Ok(serde_json::from_str(line).map_err(|e| format!("{what}: not JSON ({e}): {line}"))?)
}

fn outcome(what: &str, out: &Output, command: &str) -> TestResult<Outcome> {
    let stderr = String::from_utf8_lossy(&out.stderr);
    match out.status.code() {
        Some(0) => {
            let object = stdout_object(what, out)?;
            if command == "mint" {
                check_shape(
                    what,
                    &object,
                    &[
                        ("token", is_token),
                        ("key_id", is_u64),
                        ("issued_at", is_u64),
                        ("expires_at", is_u64),
                    ],
                    &[],
                )?;
            } else {
                check_shape(
                    what,
                    &object,
                    &[
                        ("valid", is_true),
                        ("step", is_string),
                        ("state_cbor_hex", is_hex),
                        ("key_id", is_u64),
                        ("issued_at", is_u64),
                        ("expires_at", is_u64),
                    ],
                    &["state"],
                )?;
            }
            Ok(Outcome::Ok(object))
        }
        Some(1) => {
            let mut object = stdout_object(what, out)?;
            if command == "mint" {
                check_shape(
                    what,
                    &object,
                    &[("reason", is_reason), ("message", is_message)],
                    &[],
                )?;
            } else {
                check_shape(
                    what,
                    &object,
                    &[
                        ("valid", is_false),
                        ("reason", is_reason),
                        ("message", is_message),
                    ],
                    &[],
                )?;
            }
            // The message is for people; it is not part of the contract.
            object
                .as_object_mut()
                .ok_or("not an object")?
                .remove("message");
            Ok(Outcome::Refused(object))
        }
        Some(64) => {
            if !out.stdout.is_empty() {
                return Err(format!(
                    "{what}: exit 64 with output on stdout: {}",
                    String::from_utf8_lossy(&out.stdout)
                )
                .into());
            }
            if stderr.trim().is_empty() {
                return Err(format!("{what}: exit 64 without a message on stderr").into());
            }
            Ok(Outcome::Usage)
        }
        other => Err(format!("{what}: unexpected exit {other:?}; stderr: {stderr}").into()),
    }
}

// ---------------------------------------------------------------- fixtures

struct Fixtures {
    dir: tempfile::TempDir,
    keyrings: BTreeMap<&'static str, String>,
    vectors: Value,
}

fn secret(seed: u8) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode([seed; 32])
}

fn key_toml(id: u64, algorithm: &str, status: &str, secret: &str) -> String {
    format!(
        "\n[[key]]\nid = {id}\nalgorithm = \"{algorithm}\"\nstatus = \"{status}\"\nsecret = \"{secret}\"\n"
    )
}

fn fixtures() -> TestResult<Fixtures> {
    let dir = tempfile::tempdir()?;
    let vectors: Value = serde_json::from_str(&std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vectors/v1.json"),
    )?)?;
    let mut texts: BTreeMap<&'static str, String> = BTreeMap::new();

    // The vectors' keyring, and each vector key alone as the primary.
    let mut all = String::from("version = 1\n");
    for key in vectors["keys"].as_array().ok_or("no keys")? {
        let id = key["id"].as_u64().ok_or("key id")?;
        let algorithm = key["algorithm"].as_str().ok_or("algorithm")?;
        let secret = key["secret"].as_str().ok_or("secret")?;
        all.push_str(&key_toml(
            id,
            algorithm,
            key["status"].as_str().ok_or("status")?,
            secret,
        ));
        let name: &'static str = Box::leak(format!("only-{id}").into_boxed_str());
        texts.insert(name, key_toml(id, algorithm, "primary", secret));
    }
    texts.insert("vectors", all);

    // The table's keyrings: id 1 HMAC, 2 XChaCha, 3 retired in "main".
    let (s1, s2, s3, s9) = (secret(1), secret(2), secret(3), secret(9));
    let hmac = "hmac-sha256";
    let xchacha = "xchacha20-poly1305";
    let ring = |keys: &[(u64, &str, &str, &str)]| -> String {
        keys.iter()
            .map(|(id, alg, status, secret)| key_toml(*id, alg, status, secret))
            .collect()
    };
    texts.insert(
        "main",
        ring(&[
            (1, hmac, "active", &s1),
            (2, xchacha, "primary", &s2),
            (3, hmac, "retired", &s3),
        ]),
    );
    texts.insert(
        "main-hmac",
        ring(&[
            (1, hmac, "primary", &s1),
            (2, xchacha, "active", &s2),
            (3, hmac, "retired", &s3),
        ]),
    );
    // Key 3 while it was still in use.
    texts.insert("old", ring(&[(3, hmac, "primary", &s3)]));
    // A key "main" has never heard of.
    texts.insert("stranger", ring(&[(9, hmac, "primary", &s9)]));
    // Id 2 under the other algorithm.
    texts.insert("impostor", ring(&[(2, hmac, "primary", &s2)]));
    texts.insert(
        "invalid",
        "[[key]]\nid = 1\nstatus = \"active\"\nsecret = \"AAAA\"\n".into(),
    );

    let mut keyrings = BTreeMap::new();
    for (name, text) in texts {
        let path = dir.path().join(format!("{name}.toml"));
        std::fs::write(&path, text)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
        keyrings.insert(name, path.display().to_string());
    }
    keyrings.insert(
        "missing",
        dir.path().join("missing.toml").display().to_string(),
    );
    Ok(Fixtures {
        dir,
        keyrings,
        vectors,
    })
}

impl Fixtures {
    fn keyring(&self, name: &str) -> TestResult<String> {
        Ok(self
            .keyrings
            .get(name)
            .ok_or_else(|| format!("no keyring {name}"))?
            .clone())
    }

    /// `--context-hex HEX`, or `--context-file` for a context too long for
    /// one argument (Linux allows 128 KiB).
    fn context_args(&self, hex: &str) -> TestResult<Vec<String>> {
        if hex.len() <= 16 * 1024 {
            return Ok(strings(&["--context-hex", hex]));
        }
        let path = self.dir.path().join(format!("context-{}.bin", hex.len()));
        std::fs::write(&path, hex::decode(hex)?)?;
        Ok(vec!["--context-file".into(), path.display().to_string()])
    }

    fn args(&self, command: &str, keyring: &str, rest: &[String]) -> TestResult<Vec<String>> {
        let mut args = vec![
            command.to_string(),
            "--keyring".into(),
            self.keyring(keyring)?,
        ];
        args.extend_from_slice(rest);
        Ok(args)
    }
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

fn now(at: u64) -> [String; 2] {
    ["--now".into(), at.to_string()]
}

// ---------------------------------------------------------------- the table

/// How the minted token is changed before it is verified.
#[derive(Clone, Copy)]
enum Edit {
    None,
    /// One base64url character in the middle replaced by another.
    Tamper,
}

/// How the token reaches `verify`.
#[derive(Clone, Copy)]
enum Pass {
    Flag,
    Positional,
    Stdin,
}

struct Case {
    name: &'static str,
    algorithm_is_hmac: bool,
    mint_keyring: &'static str,
    mint: Vec<String>,
    verify_keyring: &'static str,
    verify: Vec<String>,
    edit: Edit,
    pass: Pass,
    /// The verify outcome, `message` excluded.
    expect: Outcome,
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

fn refused(reason: &str) -> Outcome {
    Outcome::Refused(json!({ "valid": false, "reason": reason }))
}

const COUNTER_CBOR: &str = "a266616d6f756e74056763757272656e740a";

fn cases(user_42_file: &str) -> Vec<Case> {
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

fn tamper(token: &str) -> String {
    let mut chars: Vec<char> = token.chars().collect();
    let at = chars.len() / 2;
    chars[at] = if chars[at] == 'A' { 'B' } else { 'A' };
    chars.into_iter().collect()
}

fn verify_args(
    fx: &Fixtures,
    keyring: &str,
    args: &[String],
    token: &str,
    pass: Pass,
) -> TestResult<(Vec<String>, Option<String>)> {
    let mut rest = args.to_vec();
    let stdin = match pass {
        Pass::Flag => {
            rest.push(format!("--token={token}"));
            None
        }
        Pass::Positional => {
            rest.push("--".into());
            rest.push(token.into());
            None
        }
        Pass::Stdin => {
            rest.push("-".into());
            Some(format!("{token}\n"))
        }
    };
    Ok((fx.args("verify", keyring, &rest)?, stdin))
}

fn mint_token(
    fx: &Fixtures,
    imp: &Implementation,
    keyring: &str,
    args: &[String],
    what: &str,
) -> TestResult<(String, Value)> {
    let out = run(imp, &fx.args("mint", keyring, args)?, None)?;
    match outcome(what, &out, "mint")? {
        Outcome::Ok(minted) => Ok((
            minted["token"].as_str().ok_or("no token")?.to_string(),
            minted,
        )),
        other => Err(format!(
            "{what}: mint failed: {other:?}; stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
        .into()),
    }
}

#[test]
fn every_implementation_is_runnable() -> TestResult {
    let imps = implementations();
    assert!(!imps.is_empty());
    let mut names: Vec<_> = imps.iter().map(|i| i.name).collect();
    names.dedup();
    assert_eq!(names.len(), imps.len(), "implementation names repeat");
    for imp in &imps {
        // `--help` must work: a listed implementation that cannot start fails here.
        let out = run(imp, &strings(&["mint", "--help"]), None)?;
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}: mint --help: {}",
            imp.name,
            String::from_utf8_lossy(&out.stderr)
        );
        for flag in [
            "--keyring",
            "--tool",
            "--step",
            "--state-json",
            "--state-cbor-hex",
            "--ttl",
            "--context",
            "--context-hex",
            "--context-file",
            "--now",
            "--max-token-len",
            "--clock-leeway",
            "--max-lifetime",
            "--single-use",
        ] {
            assert!(
                String::from_utf8_lossy(&out.stdout).contains(flag),
                "{}: mint --help does not mention {flag}",
                imp.name
            );
        }
        let out = run(imp, &strings(&["verify", "--help"]), None)?;
        assert_eq!(out.status.code(), Some(0), "{}: verify --help", imp.name);
        assert!(String::from_utf8_lossy(&out.stdout).contains("--expected-step"));
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("--consume"),
            "{}: verify --help does not mention --consume",
            imp.name
        );
    }
    Ok(())
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
            // Keyring parsing is the core's, checked by tests/core_vectors.rs;
            // the command line only has to exit 64 on a refused keyring
            // (usage_errors_exit_64_with_a_message_and_no_json).
            "keyrings" => {}
            // Run by policy_vectors_are_refused_as_usage_errors_or_accepted.
            "policies" => {}
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
        let expected = Outcome::Refused(json!({ "reason": text(vector, "expect_fail")? }));
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

/// A vector's own `policy`, as the policy flags.
fn policy_args(name: &str, vector: &Value) -> TestResult<Vec<String>> {
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
            let value = policy[field]
                .as_u64()
                .ok_or_else(|| format!("vector {name:?}: policy.{field}"))?;
            args.extend(strings(&[flag, &value.to_string()]));
        }
    }
    Ok(args)
}

fn check_fields(name: &str, object: &Value, known: &[&str]) -> TestResult {
    for key in object.as_object().ok_or("not an object")?.keys() {
        if !known.contains(&key.as_str()) {
            return Err(format!(
                "vector {name:?}: field {key:?} unknown to this harness: handle it here"
            )
            .into());
        }
    }
    Ok(())
}

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
        check_fields(&name, vector, &["name", "policy", "expect_fail"])?;
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

/// One Redis, one spent-token record for every implementation (security
/// review round 3, finding 3: the TypeScript store once wrote records under
/// another prefix, so a token consumed through one was accepted through the
/// other). A single-use token consumed through any of them, the sidecar over
/// gRPC or a command line with `--replay-store` (all on their defaults), is
/// refused as `replayed` through every one, itself included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_redis_holds_one_spent_record_for_every_implementation() -> TestResult {
    use reqstate_proto::v1 as pb;

    let fx = fixtures()?;
    let dir = tempfile::tempdir()?;
    let redis = redis_server::RedisServer::start(&dir.path().join("redis"), false)?;
    let url = redis.tcp_url();
    let keyring = std::fs::read_to_string(fx.keyring("main")?)?;
    let sidecar = sidecar_process::Sidecar::start(
        sidecar_process::SidecarOptions::new(keyring)
            .arg("--replay-store")
            .arg(url.clone()),
    )
    .await?;
    let mut grpc = sidecar.unix_client().await?;
    let imps = implementations();
    let mut consumers: Vec<&str> = vec!["sidecar"];
    consumers.extend(imps.iter().map(|imp| imp.name));
    let binding = strings(&["--tool", "pay-invoice", "--context", "user-42"]);

    for (round, first) in consumers.iter().enumerate() {
        let mut mint_args = binding.clone();
        mint_args.extend(strings(&["--step", "confirm", "--single-use"]));
        mint_args.extend(strings(&[
            "--state-json",
            &format!("{{\"round\":{round}}}"),
        ]));
        let (token, _) = mint_token(&fx, &imps[0], "main", &mint_args, "single-use mint")?;
        // (reason, detail) of one consume through `who`.
        let mut consume = |who: &str| -> TestResult<(bool, String, String)> {
            if who == "sidecar" {
                let answer = tokio::task::block_in_place(|| {
                    tokio::runtime::Handle::current().block_on(grpc.verify(pb::VerifyRequest {
                        token: token.clone(),
                        tool: "pay-invoice".into(),
                        expected_step: Some("confirm".into()),
                        context: b"user-42".to_vec(),
                        consume: true,
                    }))
                })?
                .into_inner();
                let reason = pb::Reason::try_from(answer.reason)
                    .map(|r| r.as_str_name().trim_start_matches("REASON_").to_lowercase())
                    .unwrap_or_default();
                return Ok((answer.valid, reason, answer.detail));
            }
            let imp = imps
                .iter()
                .find(|imp| imp.name == who)
                .ok_or("no such implementation")?;
            let mut args = binding.clone();
            args.extend(strings(&[
                "--expected-step",
                "confirm",
                "--consume",
                "--replay-store",
                &url,
            ]));
            let (args, stdin) = verify_args(&fx, "main", &args, &token, Pass::Flag)?;
            let out = run(imp, &args, stdin.as_deref())?;
            let object = stdout_object(&format!("{who} consume"), &out)?;
            Ok((
                object["valid"] == json!(true),
                object["reason"].as_str().unwrap_or_default().to_string(),
                format!("{object} {}", String::from_utf8_lossy(&out.stderr)),
            ))
        };
        let (valid, reason, detail) = consume(first)?;
        assert!(
            valid,
            "{first}: the first consume was refused: {reason} {detail}"
        );
        for then in &consumers {
            let (valid, reason, detail) = consume(then)?;
            assert!(
                !valid && reason == "replayed",
                "consumed through {first}, then {then} answered {reason}: {detail}"
            );
        }
    }
    // One record per token, all under the one default prefix.
    assert_eq!(redis.count_keys("reqstate:spent:v1:")?, consumers.len());
    Ok(())
}
