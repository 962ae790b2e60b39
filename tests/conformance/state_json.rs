//! tests/vectors/state_json.json through the sidecar and every command line:
//! one JSON text gives one state everywhere (docs/CLI.md, "JSON to CBOR: the
//! one mapping").
//!
//! - The sidecar over gRPC (the real binary, an HMAC-SHA256 keyring): each
//!   `json_cases` text minted as `MintRequest.state_json`. Accepted: the
//!   token, verified by the core crate with the same keyring, carries
//!   exactly `cbor_hex`, and Verify's `state_json` is the case's `state`,
//!   text for text. Refused: INVALID_ARGUMENT whose `google.rpc.ErrorInfo`
//!   and `reqstate-reason` trailer say `invalid_argument` (the command
//!   line's usage error) or `state_encoding`. The `cbor_hex_cases` are the
//!   command line's `--state-cbor-hex`, which the sidecar has no field for.
//! - Every command line of `implementations()`: `mint --state-json TEXT` and
//!   `mint --state-cbor-hex HEX`, then its own `verify`: `state_cbor_hex` is
//!   the case's bytes and `state` the case's JSON form (as text for the Rust
//!   implementations; for any, the printed value read back with number kinds
//!   as written and keys sorted is the case's), or left out when the case
//!   has none; refused: exit 64, or exit 1 with reason `state_encoding`.
//!   The runs go on a few threads, side by side.

use std::process::Output;

use serde_json::{Value, json};

use crate::fixtures::{Fixtures, NOW, check_fields, fixtures, now, strings};
use crate::implementations::{Implementation, Pass, implementations, run, verify_args};
use crate::shapes::{Outcome, outcome};
use crate::sidecar_process::{Sidecar, SidecarOptions, TestResult};

/// The keyring every case is minted with: key 1, HMAC-SHA256, primary.
const KEYRING: &str = "main-hmac";
const TOOL: &str = "state-json";
const STEP: &str = "s";
const CONTEXT: &[u8] = b"one mapping";
/// Threads running the command lines' cases.
const WORKERS: usize = 4;

/// One case of tests/vectors/state_json.json, its fields checked.
struct Case {
    name: String,
    /// `json` (a `json_cases` text) or `cbor_hex` (a `cbor_hex_cases` input).
    input: String,
    outcome: String,
    cbor_hex: Option<String>,
    state: Option<String>,
}

fn cases(file: &Value, section: &str, input: &str) -> TestResult<Vec<Case>> {
    let list = file[section]
        .as_array()
        .ok_or_else(|| format!("state_json.json: no {section}"))?;
    let mut out = Vec::new();
    for case in list {
        let name = case["name"].as_str().ok_or("a case without a name")?;
        check_fields(
            name,
            case,
            &["name", "rule", "json", "cbor_hex", "outcome", "state"],
        )?;
        let text = |key: &str| case[key].as_str().map(str::to_string);
        let outcome = text("outcome").ok_or_else(|| format!("{name}: no outcome"))?;
        if !["ok", "usage", "state_encoding"].contains(&outcome.as_str()) {
            return Err(format!("{name}: outcome {outcome:?} unknown to this harness").into());
        }
        if outcome == "ok" && text("cbor_hex").is_none() {
            return Err(format!("{name}: accepted without cbor_hex").into());
        }
        out.push(Case {
            name: name.to_string(),
            input: text(input).ok_or_else(|| format!("{name}: no {input}"))?,
            outcome,
            cbor_hex: text("cbor_hex"),
            state: text("state"),
        });
    }
    let outcomes: std::collections::BTreeSet<&str> =
        out.iter().map(|c| c.outcome.as_str()).collect();
    if outcomes.len() != 3 {
        return Err(
            format!("state_json.json {section}: outcomes {outcomes:?}, not all three").into(),
        );
    }
    Ok(out)
}

fn vectors() -> TestResult<Value> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("vectors/state_json.json");
    Ok(serde_json::from_str(&std::fs::read_to_string(path)?)?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sidecar_maps_state_json_by_the_one_mapping() -> TestResult {
    use reqstate_proto::v1 as pb;
    use tonic_types::StatusExt as _;

    let fx = fixtures()?;
    let keyring = std::fs::read_to_string(fx.keyring(KEYRING)?)?;
    let codec = reqstate::Codec::new(reqstate::Keyring::from_toml(&keyring)?);
    let sidecar = Sidecar::start(SidecarOptions::new(keyring)).await?;
    let mut grpc = sidecar.unix_client().await?;
    let mut failures = Vec::new();
    let json_cases = cases(&vectors()?, "json_cases", "json")?;
    for case in &json_cases {
        let minted = grpc
            .mint(pb::MintRequest {
                tool: TOOL.into(),
                step: STEP.into(),
                state_value: Some(pb::mint_request::StateValue::StateJson(case.input.clone())),
                ttl_seconds: 0,
                context: CONTEXT.to_vec(),
                single_use: false,
            })
            .await;
        let problem = match (case.outcome.as_str(), minted) {
            ("ok", Ok(minted)) => {
                let token = minted.into_inner().token;
                let expected = reqstate::Binding::with_context_bytes(TOOL, CONTEXT)?.any_step();
                let carried = hex::encode(codec.verify_raw(&token, expected)?.state);
                let answer = grpc
                    .verify(pb::VerifyRequest {
                        token,
                        tool: TOOL.into(),
                        expected_step: None,
                        context: CONTEXT.to_vec(),
                        consume: false,
                    })
                    .await?
                    .into_inner();
                let state = match answer.state_value {
                    Some(pb::verify_response::StateValue::StateJson(text)) => Some(text),
                    _ => None,
                };
                if Some(&carried) != case.cbor_hex.as_ref() {
                    Some(format!("the token carries {carried}"))
                } else if !answer.valid || state != case.state {
                    Some(format!(
                        "Verify answered valid={} state_json={state:?} ({})",
                        answer.valid, answer.detail
                    ))
                } else {
                    None
                }
            }
            ("ok", Err(status)) => Some(format!("refused: {status:?}")),
            (reason, Err(status)) => {
                let want = if reason == "usage" {
                    "invalid_argument"
                } else {
                    reason
                };
                let info = status.get_details_error_info();
                let trailer = status
                    .metadata()
                    .get("reqstate-reason")
                    .and_then(|v| v.to_str().ok());
                if status.code() != tonic::Code::InvalidArgument
                    || info.map(|i| i.reason) != Some(want.to_ascii_uppercase())
                    || trailer != Some(want)
                {
                    Some(format!(
                        "refused with {:?}, trailer {trailer:?}, not INVALID_ARGUMENT {want}: {status:?}",
                        status.code()
                    ))
                } else {
                    None
                }
            }
            (_, Ok(_)) => Some("accepted".to_string()),
        };
        if let Some(problem) = problem {
            failures.push(format!(
                "sidecar: {} ({}): {problem}",
                case.name, case.outcome
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases:\n{}",
        failures.len(),
        json_cases.len(),
        failures.join("\n")
    );
    Ok(())
}

#[test]
fn every_command_line_maps_state_json_by_the_one_mapping() -> TestResult {
    let fx = fixtures()?;
    let file = vectors()?;
    let json_cases = cases(&file, "json_cases", "json")?;
    let hex_cases = cases(&file, "cbor_hex_cases", "cbor_hex")?;
    let imps = implementations();
    // Every (implementation, flag, case) on one queue, run by a few
    // threads: most of the time is the interpreters starting.
    let mut jobs = Vec::new();
    for imp in &imps {
        for (flag, list) in [
            ("--state-json", &json_cases),
            ("--state-cbor-hex", &hex_cases),
        ] {
            jobs.extend(list.iter().map(|case| (imp, flag, case)));
        }
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let failures: Vec<String> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..WORKERS)
            .map(|_| {
                let (fx, jobs, next) = (&fx, &jobs, &next);
                scope.spawn(move || {
                    let mut failures = Vec::new();
                    while let Some((imp, flag, case)) =
                        jobs.get(next.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
                    {
                        if let Err(e) = one_case(fx, imp, flag, case) {
                            failures.push(format!(
                                "{}: {flag} {} ({}): {e}",
                                imp.name, case.name, case.outcome
                            ));
                        }
                    }
                    failures
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| {
                w.join()
                    .unwrap_or_else(|_| vec!["a worker panicked".into()])
            })
            .collect()
    });
    assert!(
        failures.is_empty(),
        "{} failures over {} implementations × {} cases:\n{}",
        failures.len(),
        imps.len(),
        json_cases.len() + hex_cases.len(),
        failures.join("\n")
    );
    Ok(())
}

/// `mint FLAG INPUT` with `imp`, then (accepted) its own `verify`.
fn one_case(fx: &Fixtures, imp: &Implementation, flag: &str, case: &Case) -> TestResult {
    let mut args = strings(&["--tool", TOOL, "--step", STEP, "--context-hex"]);
    args.push(hex::encode(CONTEXT));
    args.extend(now(NOW));
    args.extend([flag.to_string(), case.input.clone()]);
    let out = run(imp, &fx.args("mint", KEYRING, &args)?, None)?;
    let minted = outcome("mint", &out, "mint")?;
    let minted = match (case.outcome.as_str(), minted) {
        ("ok", Outcome::Ok(minted)) => minted,
        ("usage", Outcome::Usage) => return Ok(()),
        ("state_encoding", Outcome::Refused(refusal))
            if refusal == json!({"reason": "state_encoding"}) =>
        {
            return Ok(());
        }
        (_, other) => return Err(format!("mint: {other:?}; stderr: {}", stderr(&out)).into()),
    };
    let token = minted["token"].as_str().ok_or("no token")?;
    let mut args = strings(&["--tool", TOOL, "--context-hex"]);
    args.push(hex::encode(CONTEXT));
    args.extend(now(NOW));
    let (args, stdin) = verify_args(fx, KEYRING, &args, token, Pass::Flag)?;
    let out = run(imp, &args, stdin.as_deref())?;
    let Outcome::Ok(verified) = outcome("verify", &out, "verify")? else {
        return Err(format!("verify: refused: {}", stdout_text(&out)).into());
    };
    let want_hex = case
        .cbor_hex
        .as_deref()
        .ok_or("no cbor_hex")?
        .to_ascii_lowercase();
    if verified["state_cbor_hex"] != json!(want_hex) {
        return Err(format!("verify printed {}", stdout_text(&out)).into());
    }
    match (&case.state, verified.get("state")) {
        (None, None) => Ok(()),
        (Some(want), Some(printed)) => {
            // Read back as the mapping reads it (serde_json: a number with
            // `.` or an exponent is a float, keys sorted by their bytes):
            // any spelling of the same state passes.
            if serde_json::to_string(printed)? != *want {
                return Err(format!("verify printed the state {printed}, not {want}").into());
            }
            // The Rust implementations print exactly the case's text.
            let exact = format!("\"state\":{want}");
            let line = stdout_text(&out);
            let rust = imp.name == "rust" || imp.name == "python";
            let found = line
                .match_indices(&exact)
                .any(|(at, _)| matches!(line.as_bytes().get(at + exact.len()), Some(b',' | b'}')));
            if rust && !found {
                return Err(format!("verify printed {line}, not the text {exact}").into());
            }
            Ok(())
        }
        (want, printed) => Err(format!("state {printed:?}, the case has {want:?}").into()),
    }
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn stdout_text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).trim_end().to_string()
}
