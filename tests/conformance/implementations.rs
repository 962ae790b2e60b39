//! Every implementation of docs/CLI.md in one list (`implementations()`),
//! how one of them is run, how a token is minted with one and handed to
//! `verify`, and the check that every listed implementation starts and
//! documents the flags of docs/CLI.md.

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

use crate::fixtures::{Fixtures, strings};
use crate::shapes::{Outcome, outcome};
use crate::sidecar_process::{self, TestResult};

/// One implementation of docs/CLI.md: the argv prefix that runs it (the
/// subcommand and flags are appended).
pub(crate) struct Implementation {
    pub(crate) name: &'static str,
    argv: Vec<String>,
}

/// EVERY implementation of the command line, in one place: the Rust binary,
/// the TypeScript package (`reqstate-ts`, clients/typescript) and the Python
/// package (`python -m reqstate`, crates/reqstate-python); every case below
/// runs through every ordered pair of them.
pub(crate) fn implementations() -> Vec<Implementation> {
    vec![
        Implementation {
            name: "rust",
            argv: vec![
                sidecar_process::binary()
                    .expect("the reqstate binary")
                    .display()
                    .to_string(),
            ],
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
        .join("..")
        .join(path)
        .display()
        .to_string()
}

/// Runs `imp` with `args` (and `stdin`, if any) on a clean environment (no
/// `REQSTATE_KEYRING`, no insecure-permissions override); what it printed.
pub(crate) fn run(
    imp: &Implementation,
    args: &[String],
    stdin: Option<&str>,
) -> TestResult<Output> {
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

/// How the token reaches `verify`.
#[derive(Clone, Copy)]
pub(crate) enum Pass {
    Flag,
    Positional,
    Stdin,
}

/// The `verify` arguments with `keyring`, `args` and `token` passed as
/// `pass` says, and the stdin text that goes with them.
pub(crate) fn verify_args(
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

/// Mints with `imp` and `keyring`: the token and the success object (its
/// shape checked); any other outcome is an error naming `what`.
pub(crate) fn mint_token(
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
