//! `reqstate-instructions`: the instruction-count gate.
//!
//! ```text
//! reqstate-instructions check   [--budgets FILE] [--only PREFIX]   (the default)
//! reqstate-instructions record  [--budgets FILE]
//! reqstate-instructions list
//! reqstate-instructions run OPERATION N
//! ```
//!
//! `check` runs every operation of [`workloads::OPERATIONS`] under valgrind's
//! callgrind twice, `N = 1000` and `N = 3000` times, and takes the
//! difference over 2000 as the operation's count: the process start, the
//! setup and valgrind's own start cancel out. It prints a table and fails
//! when a count, or its ratio to its floor's count, is above the budget in
//! budgets.toml by more than the file's tolerance. Instruction counts do not
//! move with the machine's load, which is why the test command checks them
//! and not wall-clock times. `record` measures and rewrites the budgets (to
//! be committed with the change that moved them, saying why).
//!
//! The counts depend on the build (release profile, target) and on the CPU
//! features valgrind reports (ring and sha2 pick their code by them): the
//! budgets hold for the project's machine, where the test command builds this
//! for `x86_64-unknown-linux-musl` with the static release binary. See
//! README.md.

#[path = "../support/reference.rs"]
mod reference;
mod workloads;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::sync::Mutex;

use serde::Deserialize;
use workloads::{OPERATIONS, Operation};

/// The two run lengths whose difference gives the count per operation.
const LOW: u64 = 1000;
const HIGH: u64 = 3000;

/// budgets.toml.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Budgets {
    /// How far above its budget a count may be, in percent, before the
    /// check fails.
    tolerance_percent: f64,
    /// Budget by operation name.
    operation: BTreeMap<String, Budget>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Budget {
    /// Instructions per operation.
    instructions: u64,
    /// Most instructions per operation as a multiple of its floor's.
    ratio: Option<f64>,
}

fn default_budgets() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("budgets.toml")
}

fn usage() -> &'static str {
    "usage: reqstate-instructions [check [--budgets FILE] [--only PREFIX] | record [--budgets FILE] | list | run OPERATION N]"
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        None | Some("check") => options(&args[args.len().min(1)..])
            .and_then(|(budgets, only)| check(&budgets, only.as_deref())),
        Some("record") => options(&args[1..]).and_then(|(budgets, only)| match only {
            Some(_) => Err("record measures every operation: --only is for check".into()),
            None => record(&budgets),
        }),
        Some("list") => {
            for op in OPERATIONS {
                println!("{:<36} {}", op.name, op.about);
            }
            Ok(true)
        }
        Some("run") => run(&args[1..]).map(|()| true),
        Some("-h" | "--help") => {
            println!("{}", usage());
            Ok(true)
        }
        Some(other) => Err(format!("unknown command {other:?}\n{}", usage())),
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(message) => {
            eprintln!("reqstate-instructions: {message}");
            ExitCode::from(2)
        }
    }
}

fn options(args: &[String]) -> Result<(PathBuf, Option<String>), String> {
    let mut budgets = default_budgets();
    let mut only = None;
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let mut value = || {
            args.next()
                .cloned()
                .ok_or_else(|| format!("{arg} needs a value"))
        };
        match arg.as_str() {
            "--budgets" => budgets = PathBuf::from(value()?),
            "--only" => only = Some(value()?),
            other => return Err(format!("unknown option {other:?}\n{}", usage())),
        }
    }
    Ok((budgets, only))
}

/// `run OPERATION N`: what valgrind runs.
fn run(args: &[String]) -> Result<(), String> {
    let [name, n] = args else {
        return Err(usage().into());
    };
    let n: u64 = n
        .parse()
        .map_err(|_| format!("N must be a whole number, not {n:?}"))?;
    let op = find(name)?;
    op.run(n).map_err(|e| format!("{name}: {e}"))
}

fn find(name: &str) -> Result<&'static Operation, String> {
    OPERATIONS
        .iter()
        .find(|op| op.name == name)
        .ok_or_else(|| format!("no operation {name:?} (`reqstate-instructions list`)"))
}

/// Instructions callgrind counts for `run OPERATION n` (user space, the
/// whole process).
fn collected(op: &Operation, n: u64) -> Result<u64, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
    let output = Command::new("valgrind")
        .args([
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            "--error-exitcode=99",
        ])
        .arg(&exe)
        .args(["run", op.name, &n.to_string()])
        .output()
        .map_err(|e| {
            format!("cannot run valgrind ({e}): install it (Debian: apt-get install valgrind)")
        })?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        return Err(format!(
            "{} (n = {n}) failed under valgrind ({}):\n{stderr}",
            op.name, output.status
        ));
    }
    stderr
        .lines()
        .find_map(|line| {
            let (_, count) = line.split_once("Collected :")?;
            count.trim().parse().ok()
        })
        .ok_or_else(|| format!("no \"Collected :\" line in callgrind's output:\n{stderr}"))
}

/// Each operation's instructions per call, measured two runs at a time.
fn measure(ops: &[&'static Operation]) -> Result<BTreeMap<&'static str, f64>, String> {
    let jobs: Vec<(&Operation, u64)> = ops
        .iter()
        .flat_map(|op| [(*op, LOW), (*op, HIGH)])
        .collect();
    let next = Mutex::new(jobs.iter());
    let results = Mutex::new(BTreeMap::new());
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get().min(4));
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                loop {
                    let Some(&(op, n)) = next.lock().expect("job list").next() else {
                        break;
                    };
                    let count = collected(op, n);
                    results.lock().expect("results").insert((op.name, n), count);
                }
            });
        }
    });
    let results = results.into_inner().map_err(|_| "a worker panicked")?;
    let mut per_op = BTreeMap::new();
    for op in ops {
        let low = results[&(op.name, LOW)].clone()?;
        let high = results[&(op.name, HIGH)].clone()?;
        if high <= low {
            return Err(format!(
                "{}: {HIGH} calls counted {high} instructions, {LOW} calls {low}: not an operation that runs per call",
                op.name
            ));
        }
        per_op.insert(op.name, (high - low) as f64 / (HIGH - LOW) as f64);
    }
    Ok(per_op)
}

fn read_budgets(path: &Path) -> Result<Budgets, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let budgets: Budgets = toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    if !(0.0..=50.0).contains(&budgets.tolerance_percent) {
        return Err(format!(
            "{}: tolerance_percent must be between 0 and 50",
            path.display()
        ));
    }
    for name in budgets.operation.keys() {
        find(name).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(budgets)
}

fn ratio_of(op: &Operation, counts: &BTreeMap<&str, f64>) -> Option<f64> {
    let floor = op.floor?;
    Some(counts.get(op.name)? / counts.get(floor)?)
}

fn check(path: &Path, only: Option<&str>) -> Result<bool, String> {
    let budgets = read_budgets(path)?;
    let selected: Vec<&Operation> = OPERATIONS
        .iter()
        .filter(|op| only.is_none_or(|prefix| op.name.starts_with(prefix)))
        .collect();
    if selected.is_empty() {
        return Err(format!("no operation starts with {only:?}"));
    }
    // A ratio needs its floor measured too.
    let mut measured: Vec<&'static Operation> = selected.clone();
    for op in &selected {
        if let Some(floor) = op.floor
            && !measured.iter().any(|m| m.name == floor)
        {
            measured.push(find(floor)?);
        }
    }
    let counts = measure(&measured)?;
    let slack = 1.0 + budgets.tolerance_percent / 100.0;
    let mut ok = true;
    println!(
        "instructions per call (callgrind; ({HIGH} calls - {LOW} calls) / {}), budgets {} (tolerance {} %)",
        HIGH - LOW,
        path.display(),
        budgets.tolerance_percent
    );
    println!(
        "{:<36} {:>9} {:>9} {:>7}  {:<28} {:>6} {:>6}  verdict",
        "operation", "count", "budget", "vs", "floor", "ratio", "budget"
    );
    for op in &selected {
        let count = counts[op.name];
        let ratio = ratio_of(op, &counts);
        let mut verdict = Vec::new();
        let budget = budgets.operation.get(op.name);
        match budget {
            None => verdict.push("no budget: run `reqstate-instructions record`".to_owned()),
            Some(b) => {
                if count > b.instructions as f64 * slack {
                    verdict.push(format!(
                        "OVER BUDGET by {:.1} %",
                        (count / b.instructions as f64 - 1.0) * 100.0
                    ));
                }
                match (ratio, b.ratio) {
                    (Some(r), Some(max)) if r > max * slack => {
                        verdict.push(format!("RATIO {r:.2}x over {max:.2}x"))
                    }
                    (Some(_), None) | (None, Some(_)) => verdict.push(
                        "ratio budget and floor disagree: run `reqstate-instructions record`"
                            .to_owned(),
                    ),
                    _ => {}
                }
                if verdict.is_empty() && count < b.instructions as f64 / slack / slack {
                    verdict.push(format!(
                        "ok, {:.1} % under: record the gain",
                        (1.0 - count / b.instructions as f64) * 100.0
                    ));
                }
            }
        }
        let failed = verdict.iter().any(|v| !v.starts_with("ok"));
        ok &= !failed;
        println!(
            "{:<36} {:>9.0} {:>9} {:>7}  {:<28} {:>6} {:>6}  {}",
            op.name,
            count,
            budget.map_or("-".into(), |b| b.instructions.to_string()),
            budget.map_or("-".into(), |b| format!(
                "{:+.1}%",
                (count / b.instructions as f64 - 1.0) * 100.0
            )),
            op.floor.unwrap_or("-"),
            ratio.map_or("-".into(), |r| format!("{r:.2}x")),
            budget
                .and_then(|b| b.ratio)
                .map_or("-".into(), |r| format!("{r:.2}x")),
            if verdict.is_empty() {
                "ok".to_owned()
            } else {
                verdict.join("; ")
            }
        );
    }
    if !ok {
        println!(
            "\nAn operation costs more than its budget. Find where (`valgrind --tool=callgrind \
             <this program> run OPERATION 3000`, then `callgrind_annotate --inclusive=yes`), \
             or if the cost is deliberate, `reqstate-instructions record` and commit the \
             budgets with the reason."
        );
    }
    Ok(ok)
}

fn record(path: &Path) -> Result<bool, String> {
    let old = read_budgets(path).ok();
    let tolerance_percent = old.as_ref().map_or(1.0, |b| b.tolerance_percent);
    let all: Vec<&Operation> = OPERATIONS.iter().collect();
    let counts = measure(&all)?;
    let mut body = format!("tolerance_percent = {tolerance_percent:?}\n");
    for op in OPERATIONS {
        let count = counts[op.name];
        body.push_str(&format!(
            "\n[operation.\"{}\"]\ninstructions = {}\n",
            op.name,
            count.ceil() as u64
        ));
        // Two decimals, rounded up: the ratio measured now passes.
        if let Some(r) = ratio_of(op, &counts) {
            body.push_str(&format!("ratio = {:.2}\n", (r * 100.0).ceil() / 100.0));
        }
        println!("{:<36} {:>9.0}", op.name, count);
    }
    let text = format!(
        "# Instruction budgets of the hot paths, checked by `reqstate-instructions check`\n\
         # (the test command). Written by `reqstate-instructions record`: commit a change of\n\
         # these with the reason in its message. Counts are per call, user-space instructions\n\
         # under callgrind, for the build benches/instructions/README.md describes.\n\n{body}"
    );
    // What was written must read back as what was measured.
    toml::from_str::<Budgets>(&text)
        .map_err(|e| format!("the budgets written do not parse: {e}"))?;
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    println!("wrote {}", path.display());
    Ok(true)
}
