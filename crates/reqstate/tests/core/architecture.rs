//! The core crate's architecture, checked: its modules form a graph without
//! a cycle, in the order `crates/reqstate/src/lib.rs` lists them (each module
//! imports only from modules listed before it), and no module touches files,
//! the environment, processes or the network.

use std::collections::BTreeMap;
use std::path::Path;

fn source_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The module order of lib.rs's comment block (`//   name   what it is`).
fn listed_order() -> Vec<String> {
    let lib = std::fs::read_to_string(source_dir().join("lib.rs")).expect("lib.rs");
    lib.lines()
        .skip_while(|line| !line.starts_with("// The modules, ground floor first"))
        .skip(3)
        .take_while(|line| line.starts_with("//   "))
        .filter_map(|line| line.trim_start_matches("//").split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

/// A module's code without comments, doc comments and its `mod tests`.
fn code_of(module: &str) -> String {
    let text = std::fs::read_to_string(source_dir().join(format!("{module}.rs")))
        .unwrap_or_else(|e| panic!("{module}.rs: {e}"));
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(at) => &text[..at],
        None => &text,
    };
    text.lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The crate modules a module's code names (`crate::name`).
fn imports(code: &str, modules: &[String]) -> Vec<String> {
    let mut found: Vec<String> = code
        .match_indices("crate::")
        .filter_map(|(at, _)| {
            let rest = &code[at + "crate::".len()..];
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            modules.contains(&name).then_some(name)
        })
        .collect();
    found.sort();
    found.dedup();
    found
}

#[test]
fn every_module_imports_only_from_modules_listed_before_it() {
    let order = listed_order();
    let on_disk: Vec<String> = std::fs::read_dir(source_dir())
        .expect("src")
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter_map(|name| name.strip_suffix(".rs").map(str::to_owned))
        .filter(|name| name != "lib" && name != "design")
        .collect();
    for module in &on_disk {
        assert!(
            order.contains(module),
            "{module}.rs is not in lib.rs's module list {order:?}"
        );
    }
    let mut graph = BTreeMap::new();
    for (position, module) in order.iter().enumerate() {
        let uses = imports(&code_of(module), &order);
        for used in &uses {
            let used_at = order.iter().position(|m| m == used).expect("listed");
            assert!(
                used_at < position,
                "{module} imports {used}, which lib.rs lists after it: a cycle or a wrong order"
            );
        }
        graph.insert(module.clone(), uses);
    }
    // The graph is not trivially empty: the codec sits on top of the others.
    assert!(graph["codec"].len() >= 8, "{graph:?}");
    assert!(graph["types"].is_empty(), "{graph:?}");
}

#[test]
fn the_core_does_no_io() {
    let forbidden = [
        "std::fs",
        "std::env",
        "std::net",
        "std::process::Command",
        "std::io::Read",
        "std::io::Write",
        "File::open",
        "OpenOptions",
        "libc::",
    ];
    for module in listed_order() {
        let code = code_of(&module);
        for needle in forbidden {
            assert!(
                !code.contains(needle),
                "{module}.rs uses {needle}: the core does no I/O (docs: reqstate::design)"
            );
        }
    }
}
