#!/usr/bin/env python3
"""The shape of the workspace's Rust crates: per crate, its files and lines,
the import circles between its files, and its files over 1 000 lines.

    python3 scripts/house.py            print the table; exit 1 on a circle or a
                                        long file that is not in KNOWN below
    python3 scripts/house.py --json     the same as JSON

An import circle is two or more files of one crate that use each other,
directly or through others: `use crate::a::b`, `crate::a::b::f()`,
`use super::x` and `self::x` paths are resolved to the file that defines the
module (modules as files: `src/a.rs` or `src/a/mod.rs` is `a`, `src/a/b.rs`
is `a::b`). The crate root (`lib.rs`, `main.rs`) and a parent module's use of
its own submodules are structure, not edges. Comments and strings are not
read. Test files (`tests/`, `benches/`) are counted, not searched for circles.

KNOWN lists what the house still has and is being taken apart (issue 48,
steps 2 and 3): anything else fails, so a new circle or long file is seen in
the test command the day it appears.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 1000

# What is left for issue 48's later steps, by crate: circles as sorted file
# lists (relative to the crate's src/), files over LIMIT lines.
KNOWN_CIRCLES = {
    "reqstate-sidecar": [
        ["bearer.rs", "reload.rs"],
        ["call_gate.rs", "call_metrics.rs"],
        ["key_evidence.rs", "live_keyring.rs"],
        ["local.rs", "remote.rs"],
    ],
}
KNOWN_LONG: dict[str, list[str]] = {}

PATH = re.compile(r"\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)+)")
USE_GROUP = re.compile(r"\buse\s+(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)*)::\{([^;]*)\}\s*;", re.S)


def strip_comments_and_strings(text: str) -> str:
    """Rust source with comments, string and char literals blanked."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        elif c == "r" and re.match(r'r#*"', text[i:]):
            hashes = re.match(r"r(#*)\"", text[i:]).group(1)
            end = text.find('"' + hashes, i + len(hashes) + 2)
            i = n if end < 0 else end + len(hashes) + 1
            out.append('""')
        elif c == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            i += 1
            out.append('""')
        elif c == "'" and re.match(r"'(\\.|[^\\'])'", text[i:]):
            i += len(re.match(r"'(\\.|[^\\'])'", text[i:]).group(0))
        else:
            out.append(c)
            i += 1
    return "".join(out)


def module_of(src: Path, file: Path) -> tuple[str, ...]:
    parts = list(file.relative_to(src).with_suffix("").parts)
    if parts[-1] in ("lib", "main", "mod"):
        parts = parts[:-1]
    return tuple(parts)


def crate_graph(src: Path) -> tuple[dict[str, set[str]], dict[str, int]]:
    files = sorted(p for p in src.rglob("*.rs"))
    modules = {module_of(src, f): f for f in files if f.name not in ("main.rs",) or f.parent == src}
    roots = {(), }
    lines = {str(f.relative_to(src)): len(f.read_text(encoding="utf-8").splitlines()) for f in files}
    edges: dict[str, set[str]] = {str(f.relative_to(src)): set() for f in files}

    def resolve(base: tuple[str, ...], path: list[str]) -> tuple[str, ...] | None:
        """The longest module prefix of base + path that is a file."""
        full = list(base) + path
        for k in range(len(full), 0, -1):
            if tuple(full[:k]) in modules:
                return tuple(full[:k])
        return None

    for f in files:
        here = module_of(src, f)
        text = strip_comments_and_strings(f.read_text(encoding="utf-8"))
        targets: list[tuple[str, list[str]]] = []
        for m in USE_GROUP.finditer(text):
            head = [p for p in m.group(2).split("::") if p]
            for item in re.split(r"[,\s]+", m.group(3)):
                item = item.split("::")[0].strip("{} ")
                if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", item or "") and item != "self":
                    targets.append((m.group(1), head + [item]))
                elif item == "self":
                    targets.append((m.group(1), head))
        for m in PATH.finditer(text):
            targets.append((m.group(1), [p for p in m.group(2).split("::") if p]))
        for anchor, path in targets:
            if anchor == "crate":
                base: tuple[str, ...] = ()
            elif anchor == "super":
                base = here[:-1]
                while path and path[0] == "super":
                    base, path = base[:-1], path[1:]
            else:
                base = here
            target = resolve(base, path)
            if target is None or target in roots or target == here:
                continue
            if target[: len(here)] == here:  # a parent using its own submodule
                continue
            edges[str(f.relative_to(src))].add(str(modules[target].relative_to(src)))
    root_files = {str(modules[r].relative_to(src)) for r in roots if r in modules}
    for r in root_files:
        edges[r] = set()
    return edges, lines


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one file (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(found)


def main() -> int:
    report = []
    problems = []
    for manifest in sorted(ROOT.glob("crates/*/Cargo.toml")):
        crate = manifest.parent
        name = re.search(r'^name\s*=\s*"([^"]+)"', manifest.read_text(), re.M).group(1)
        src = crate / "src"
        edges, lines = crate_graph(src)
        test_lines = {
            str(p.relative_to(crate)): len(p.read_text(encoding="utf-8").splitlines())
            for d in ("tests", "benches")
            for p in sorted((crate / d).rglob("*.rs"))
        }
        found = circles(edges)
        long = sorted(f"src/{f}" for f, n in lines.items() if n > LIMIT) + sorted(
            f for f, n in test_lines.items() if n > LIMIT
        )
        report.append({
            "crate": name,
            "files": len(lines),
            "lines": sum(lines.values()),
            "test files": len(test_lines),
            "test lines": sum(test_lines.values()),
            "circles": found,
            "over 1000 lines": long,
        })
        for circle in found:
            if circle not in KNOWN_CIRCLES.get(name, []):
                problems.append(f"{name}: a new import circle: {' <-> '.join(circle)}")
        for f in long:
            if f not in KNOWN_LONG.get(name, []):
                problems.append(f"{name}: {f} is over {LIMIT} lines")
    if "--json" in sys.argv[1:]:
        print(json.dumps(report, indent=2))
    else:
        print(f"{'crate':<26} {'files':>5} {'lines':>6} {'tests':>5} {'lines':>6}  circles / files over {LIMIT} lines")
        for r in report:
            extra = "; ".join([" <-> ".join(c) for c in r["circles"]] + r["over 1000 lines"]) or "-"
            print(f"{r['crate']:<26} {r['files']:>5} {r['lines']:>6} {r['test files']:>5} {r['test lines']:>6}  {extra}")
    for p in problems:
        print(f"house.py: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
