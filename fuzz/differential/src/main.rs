//! `keyring-eval`: random scheduled keyrings through the reqstate core, one
//! JSON line each (`{"input", "text", "now", "rust"}`), for `compare.mjs`.
//!
//! ```text
//! keyring-eval random COUNT SEED     COUNT inputs of SplitMix64 bytes
//! keyring-eval corpus DIR...         every file of the directories
//! ```
//!
//! Each input goes through the same `keyring_and_instant` as the
//! `keyring_schedule` fuzz target (the file is included by path), so a
//! corpus file replays here as the text and instant the target saw.

use std::io::Write as _;
use std::panic;
use std::process::ExitCode;

#[path = "../../src/schedule.rs"]
#[allow(dead_code)]
mod schedule;

/// SplitMix64: a reproducible stream for `random`.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn emit(out: &mut impl std::io::Write, input: &[u8]) -> std::io::Result<()> {
    let (text, now) = schedule::keyring_and_instant(input);
    // A violated invariant is a finding to report, not a reason to stop.
    let rust = panic::catch_unwind(|| schedule::evaluate(&text, now)).unwrap_or_else(|cause| {
        let why = cause
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| cause.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        serde_json::json!({ "panic": why })
    });
    let line = serde_json::json!({ "input": hex(input), "text": text, "now": now, "rust": rust });
    writeln!(out, "{line}")
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: keyring-eval random COUNT SEED | keyring-eval corpus DIR...";
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    panic::set_hook(Box::new(|_| {}));
    let result = match args.first().map(String::as_str) {
        Some("random") if args.len() == 3 => {
            let (Ok(count), Ok(seed)) = (args[1].parse::<u64>(), args[2].parse::<u64>()) else {
                eprintln!("{usage}");
                return ExitCode::from(2);
            };
            let mut rng = SplitMix(seed);
            (0..count).try_for_each(|_| {
                let len = 4 + (rng.next() % 120) as usize;
                let input: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
                emit(&mut out, &input)
            })
        }
        Some("corpus") if args.len() > 1 => args[1..].iter().try_for_each(|dir| {
            let mut files: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<_, _>>()?;
            files.sort_by_key(|e| e.file_name());
            files
                .iter()
                .try_for_each(|e| emit(&mut out, &std::fs::read(e.path())?))
        }),
        _ => {
            eprintln!("{usage}");
            return ExitCode::from(2);
        }
    };
    match result.and_then(|()| out.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("keyring-eval: {e}");
            ExitCode::FAILURE
        }
    }
}
