//! Runs the example binary end to end: it exits 0 only when every promise
//! of the rotation held, and prints one line per step.

use std::process::Command;

#[test]
fn the_rotation_runs_end_to_end() -> Result<(), Box<dyn std::error::Error>> {
    let out = Command::new(env!("CARGO_BIN_EXE_reqstate-example-key-rotation")).output()?;
    let stdout = String::from_utf8(out.stdout)?;
    let stderr = String::from_utf8(out.stderr)?;
    assert!(
        out.status.success(),
        "exit {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status.code()
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines.len(),
        9,
        "one line per step and the verdict:\n{stdout}"
    );
    for (n, line) in lines[..8].iter().enumerate() {
        assert!(
            line.starts_with(&format!("{} ", n + 1)),
            "step {}: {line}",
            n + 1
        );
    }
    assert!(
        lines[4].contains("token A refused (retired_key)"),
        "{stdout}"
    );
    assert!(lines[5].contains("invalid keyring"), "{stdout}");
    assert!(lines[6].contains("mode 0644"), "{stdout}");
    assert_eq!(lines[8], "ok: every promise held");
    // No secret reaches the output: the keyring's secret lines are gone with
    // the temporary directory, but no base64 of 43 characters may appear.
    assert!(
        !stdout
            .split(|c: char| c.is_whitespace() || c == '`')
            .any(|w| w.len() >= 43
                && w.trim_end_matches('=')
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '+' || c == '/')),
        "{stdout}"
    );
    Ok(())
}
