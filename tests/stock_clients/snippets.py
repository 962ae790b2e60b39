"""The snippets of docs/SIDECAR.md ("Stock clients in every language") are the
code the stock clients run: each client marks its region(s) with
`[snippet LANG]` ... `[/snippet LANG]` comment lines, and the doc holds the
region, dedented (regions of one file joined in order, tabs as 4 spaces), in
the fenced block after `<!-- snippet LANG: PATH -->`.

    python3 tests/stock_clients/snippets.py --check   # exit 1 and a diff on drift
    python3 tests/stock_clients/snippets.py --write   # rewrite the doc's blocks

Run (--check) by tests/stock_clients/run.sh.
"""

from __future__ import annotations

import difflib
import re
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "SIDECAR.md"
# Every language whose snippet the doc must carry, and its client.
CLIENTS = {
    "go": "tests/stock_clients/go/client.go",
    "cpp": "tests/stock_clients/cpp/client.cc",
    "java": "tests/stock_clients/java/Client.java",
    "ruby": "tests/stock_clients/ruby/client.rb",
}
MARKER = re.compile(r"^<!-- snippet (\w+): (\S+) -->$")


class SnippetError(Exception):
    """A snippet marker is missing, unbalanced or names another file."""


def source_snippet(lang: str, path: str) -> list[str]:
    """The lines of the `[snippet lang]` regions of the client at `path`."""
    lines = (REPO / path).read_text(encoding="utf-8").splitlines()
    regions: list[list[str]] = []
    current: list[str] | None = None
    for number, line in enumerate(lines, 1):
        if line.strip().endswith(f"[snippet {lang}]"):
            if current is not None:
                raise SnippetError(f"{path}:{number}: [snippet {lang}] inside another")
            current = []
        elif line.strip().endswith(f"[/snippet {lang}]"):
            if current is None:
                raise SnippetError(f"{path}:{number}: [/snippet {lang}] without a start")
            regions.append(current)
            current = None
        elif current is not None:
            current.append(line.expandtabs(4))
    if current is not None:
        raise SnippetError(f"{path}: [snippet {lang}] never closed")
    if not regions:
        raise SnippetError(f"{path}: no [snippet {lang}] region")
    out: list[str] = []
    for region in regions:
        out.extend(textwrap.dedent("\n".join(region)).split("\n"))
    return out


def doc_blocks(doc: list[str]) -> dict[str, tuple[str, int, int]]:
    """Each marked block of the doc: lang -> (path, first line, end line), 0-based, end exclusive."""
    blocks: dict[str, tuple[str, int, int]] = {}
    for i, line in enumerate(doc):
        found = MARKER.match(line)
        if not found:
            continue
        lang, path = found.groups()
        if lang in blocks:
            raise SnippetError(f"{DOC.name}:{i + 1}: a second snippet for {lang}")
        if i + 1 >= len(doc) or not doc[i + 1].startswith("```"):
            raise SnippetError(f"{DOC.name}:{i + 1}: the marker is not followed by a code fence")
        end = i + 2
        while end < len(doc) and doc[end] != "```":
            end += 1
        if end == len(doc):
            raise SnippetError(f"{DOC.name}:{i + 2}: the code fence is never closed")
        blocks[lang] = (path, i + 2, end)
    return blocks


def main(argv: list[str]) -> int:
    if argv not in (["--check"], ["--write"]):
        print(__doc__, file=sys.stderr)
        return 2
    doc = DOC.read_text(encoding="utf-8").split("\n")
    try:
        blocks = doc_blocks(doc)
        problems: list[str] = []
        replacements: list[tuple[int, int, list[str]]] = []
        for lang, path in CLIENTS.items():
            if lang not in blocks:
                raise SnippetError(f"{DOC.name}: no `<!-- snippet {lang}: {path} -->` block")
            doc_path, start, end = blocks[lang]
            if doc_path != path:
                raise SnippetError(f"{DOC.name}: the {lang} snippet names {doc_path}, not {path}")
            want = source_snippet(lang, path)
            have = [line.expandtabs(4) for line in doc[start:end]]
            if have != want:
                diff = difflib.unified_diff(have, want, f"{DOC.name} ({lang})", path, lineterm="")
                problems.append("\n".join(diff))
            replacements.append((start, end, want))
        for extra in sorted(set(blocks) - set(CLIENTS)):
            raise SnippetError(f"{DOC.name}: a snippet for {extra}, which no client has")
    except SnippetError as error:
        print(f"snippets: {error}", file=sys.stderr)
        return 1
    if argv == ["--write"]:
        for start, end, want in sorted(replacements, reverse=True):
            doc[start:end] = want
        DOC.write_text("\n".join(doc), encoding="utf-8")
        print(f"snippets: wrote {len(replacements)} blocks of {DOC.relative_to(REPO)}")
        return 0
    if problems:
        print("snippets: docs/SIDECAR.md differs from the clients (fix, or run snippets.py --write):")
        print("\n".join(problems))
        return 1
    print(f"snippets: {len(CLIENTS)} blocks of docs/SIDECAR.md match the clients ({', '.join(CLIENTS)})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
