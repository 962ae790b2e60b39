//! README.md quotes source lines verbatim; this keeps the quotes true.
//!
//! Every fenced block preceded by `<!-- snippet: PATH FIRST-LAST -->` must be
//! exactly lines FIRST..=LAST of PATH (relative to the package root).

const README: &str = include_str!("../README.md");

#[test]
fn readme_snippets_are_the_quoted_source_lines() {
    let lines: Vec<&str> = README.lines().collect();
    let mut checked = 0;
    for (i, line) in lines.iter().enumerate() {
        let Some(spec) = line
            .strip_prefix("<!-- snippet: ")
            .and_then(|rest| rest.strip_suffix(" -->"))
        else {
            continue;
        };
        let (path, range) = spec.split_once(' ').expect("PATH FIRST-LAST");
        let (first, last) = range.split_once('-').expect("FIRST-LAST");
        let (first, last): (usize, usize) = (first.parse().unwrap(), last.parse().unwrap());

        assert!(lines[i + 1].starts_with("```rust"), "{spec}: no code block");
        let end = lines[i + 2..]
            .iter()
            .position(|l| *l == "```")
            .expect("closing fence")
            + i
            + 2;
        let quoted = &lines[i + 2..end];

        let source = std::fs::read_to_string(format!("{}/{path}", env!("CARGO_MANIFEST_DIR")))
            .unwrap_or_else(|e| panic!("{path}: {e}"));
        let source: Vec<&str> = source.lines().collect();
        assert_eq!(
            quoted,
            &source[first - 1..last],
            "README.md quotes {path} lines {first}-{last}, which now read differently: \
             update the quote or its line numbers"
        );
        checked += 1;
    }
    assert_eq!(
        checked, 2,
        "README.md should quote src/lib.rs and tests/flow.rs"
    );
}
