//! `reqstate-vectors`: generates the shared vectors, `tests/vectors/v1.json`
//! (the token format, FORMAT.md), `tests/vectors/state_json.json` (a
//! state's JSON → CBOR mapping and `--state-cbor-hex`, docs/CLI.md) and
//! `tests/vectors/call_context.json` (the call context, FORMAT.md §7), from
//! the definitions in this package.
//!
//! ```sh
//! cargo run -p reqstate-vectors -- write   # rewrite the files from the definitions
//! cargo run -p reqstate-vectors -- check   # fail if any file differs, byte for byte
//! ```
//!
//! `check` regenerates every file in memory and names the first vector that
//! differs; scripts/test.sh runs it. Everything else (the core's tests,
//! the sidecar's conformance tests, the TypeScript and Python packages, the
//! independent Python verifier) only reads the files. A change to the
//! vectors is a change to the format's specification: update docs/FORMAT.md
//! with it, and never edit the files by hand.

mod call_context;
mod compare;
mod schema;
mod state_json;
mod v1;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// How to regenerate, as every message says it.
const WRITE_COMMAND: &str = "cargo run -p reqstate-vectors -- write";

const USAGE: &str = "\
usage: reqstate-vectors <write|check>

  write   rewrite tests/vectors/v1.json, state_json.json and call_context.json
          from their definitions (tests/vectors/generate/src/)
  check   regenerate them in memory; fail, naming the first differing
          vector, if any file differs byte for byte";

/// A generated vector file.
struct Generated {
    /// The file's path from the repository's root, for messages.
    name: &'static str,
    /// Where the definitions are, for messages.
    definitions: &'static str,
    /// The file's path on disk.
    path: PathBuf,
    /// The file's exact text: pretty-printed JSON and a final newline.
    text: String,
}

/// Both files, generated from the definitions.
fn generate() -> Result<Vec<Generated>, String> {
    // tests/vectors/, this package's parent directory.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .ok_or("the package directory has no parent")?;
    let pretty = |name: &str, value: Result<String, serde_json::Error>| {
        value
            .map(|text| text + "\n")
            .map_err(|e| format!("{name}: cannot serialize the generated vectors: {e}"))
    };
    Ok(vec![
        Generated {
            name: "tests/vectors/v1.json",
            definitions: "tests/vectors/generate/src/v1.rs and v1/",
            path: dir.join("v1.json"),
            text: pretty("v1.json", serde_json::to_string_pretty(&v1::generate()))?,
        },
        Generated {
            name: "tests/vectors/state_json.json",
            definitions: "tests/vectors/generate/src/state_json.rs",
            path: dir.join("state_json.json"),
            text: pretty(
                "state_json.json",
                serde_json::to_string_pretty(&state_json::generate()),
            )?,
        },
        Generated {
            name: "tests/vectors/call_context.json",
            definitions: "tests/vectors/generate/src/call_context.rs",
            path: dir.join("call_context.json"),
            text: pretty(
                "call_context.json",
                serde_json::to_string_pretty(&call_context::generate()),
            )?,
        },
    ])
}

/// Rewrites every file whose text differs from its definitions.
fn write(files: &[Generated]) -> Result<(), String> {
    for file in files {
        if std::fs::read(&file.path).is_ok_and(|bytes| bytes == file.text.as_bytes()) {
            println!("{}: unchanged", file.name);
            continue;
        }
        // Written whole or not at all: a temporary file, then a rename.
        let partial = file.path.with_extension("json.partial");
        std::fs::write(&partial, &file.text)
            .and_then(|()| std::fs::rename(&partial, &file.path))
            .map_err(|e| format!("cannot write {}: {e}", file.path.display()))?;
        println!("{}: rewritten", file.name);
    }
    Ok(())
}

/// Fails, naming the first differing vector, if any file differs from its
/// definitions byte for byte.
fn check(files: &[Generated]) -> Result<(), String> {
    let mut stale = Vec::new();
    for file in files {
        let committed = match std::fs::read(&file.path) {
            Ok(bytes) => bytes,
            Err(e) => {
                stale.push(format!("{}: cannot read it: {e}", file.name));
                continue;
            }
        };
        let committed = match String::from_utf8(committed) {
            Ok(text) => text,
            Err(e) => {
                stale.push(format!("{}: not UTF-8: {e}", file.name));
                continue;
            }
        };
        if let Some(difference) = compare::first_difference(&committed, &file.text) {
            stale.push(format!(
                "{} differs from its definitions ({}): {difference}",
                file.name, file.definitions
            ));
        }
    }
    if stale.is_empty() {
        let names: Vec<_> = files.iter().map(|f| f.name).collect();
        println!("{}: match their definitions", names.join(", "));
        return Ok(());
    }
    Err(format!(
        "{}\nRegenerate with `{WRITE_COMMAND}` (never by hand; a change to the vectors is a \
         change to the format: update docs/FORMAT.md with it).",
        stale.join("\n")
    ))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mode: fn(&[Generated]) -> Result<(), String> = match args.as_slice() {
        [m] if m == "write" => write,
        [m] if m == "check" => check,
        [m] if m == "-h" || m == "--help" => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        _ => {
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    match generate().and_then(|files| mode(&files)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generation_is_deterministic_and_reads_back_through_the_schema() {
        let first = generate().expect("generate");
        let second = generate().expect("generate");
        for (a, b) in first.iter().zip(&second) {
            assert!(a.text == b.text, "{}: two runs differ", a.name);
            assert!(a.text.ends_with("}\n"), "{}", a.name);
        }
        let v1: schema::VectorFile = serde_json::from_str(&first[0].text).expect("v1 reads back");
        assert_eq!(v1, v1::generate());
        let cc: schema::CallContextFile =
            serde_json::from_str(&first[2].text).expect("call_context reads back");
        assert_eq!(cc, call_context::generate());
        assert!(
            cc.description
                .contains("tests/vectors/generate/src/call_context.rs")
        );
    }

    #[test]
    fn check_names_the_stale_file_and_the_command() {
        let dir = std::env::temp_dir().join(format!("reqstate-vectors-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let file = |name: &'static str, text: &str| Generated {
            name,
            definitions: "here",
            path: dir.join(name),
            text: text.to_owned(),
        };
        let files = [
            file(
                "a.json",
                "{\n  \"x\": [\n    {\n      \"name\": \"one\"\n    }\n  ]\n}\n",
            ),
            file("b.json", "{}\n"),
        ];
        // Missing: check fails and says so; write creates them; check passes.
        let missing = check(&files).expect_err("missing files pass");
        assert!(missing.contains("a.json: cannot read it"), "{missing}");
        assert!(missing.contains(WRITE_COMMAND), "{missing}");
        write(&files).expect("write");
        check(&files).expect("written files match");
        // One vector changed on disk: named, with the command.
        std::fs::write(
            dir.join("a.json"),
            "{\n  \"x\": [\n    {\n      \"name\": \"two\"\n    }\n  ]\n}\n",
        )
        .expect("edit");
        let stale = check(&files).expect_err("an edited file passes");
        assert!(
            stale.contains("a.json differs from its definitions (here)"),
            "{stale}"
        );
        assert!(stale.contains("x[0]"), "{stale}");
        assert!(!stale.contains("b.json"), "{stale}");
        assert!(stale.contains(WRITE_COMMAND), "{stale}");
        write(&files).expect("rewrite");
        check(&files).expect("rewritten files match");
        std::fs::remove_dir_all(&dir).expect("clean up");
    }
}
