#!/usr/bin/env python3
"""The checks of scripts/artifacts.sh that read files rather than run them.

    artifacts.py publishable              (cargo metadata JSON on stdin)
        The workspace members a release publishes to crates.io: those whose
        manifest does not say `publish = false`, one `name version` a line.
    artifacts.py check-crate FILE.crate
        A packaged crate as crates.io would receive it: the metadata a
        crates.io page needs, no junk, and README links that work there.
        Prints one line (files, unpacked size); exit 1 with every problem.
    artifacts.py wheel-tag FILE.whl
        The wheel's `Tag:` lines (its .dist-info/WHEEL), comma-separated.
    artifacts.py table FILE.tsv
        The summary table of the rows `artifact<TAB>path<TAB>bytes<TAB>check`.

Python 3.11 standard library only (tomllib).
"""

from __future__ import annotations

import json
import re
import sys
import tarfile
import tomllib
import zipfile
from pathlib import PurePosixPath

# The fields crates.io shows and `cargo package` asks for, plus what makes a
# crate findable (keywords, categories) and readable (readme, documentation).
REQUIRED_FIELDS = ("description", "license", "readme", "documentation", "keywords", "categories")
# No file of a source crate needs to be this big; a bigger one is a fixture,
# a build output or a data file that belongs elsewhere.
MAX_FILE_BYTES = 256 * 1024
# Paths that never belong in a published crate.
JUNK = re.compile(r"(^|/)(\.venv|venv|node_modules|target|__pycache__|\.git|\.pytest_cache|dist)(/|$)|"
                  r"\.(whl|so|dylib|dll|a|o|rlib|pyc|crate|tgz|log)$")
# Hosts that were placeholders once: never a link a user can follow.
PLACEHOLDER = re.compile(r"https?://(?:[a-z0-9-]+\.)*(?:example\.(?:invalid|com|org|net)|localhost)\b", re.I)
INLINE_LINK = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)", re.M)
AUTOLINK = re.compile(r"<(https?://[^>\s]+)>")


def fail(problems: list[str], what: str) -> None:
    if problems:
        for p in problems:
            print(f"  {what}: {p}", file=sys.stderr)
        sys.exit(1)


def publishable() -> None:
    meta = json.load(sys.stdin)
    members = set(meta["workspace_members"])
    for pkg in sorted(meta["packages"], key=lambda p: p["name"]):
        # `publish = false` is [] in cargo metadata; null means any registry.
        if pkg["id"] in members and pkg.get("publish") != []:
            print(pkg["name"], pkg["version"])


def readme_links(text: str) -> list[str]:
    # Code (fenced blocks and inline spans) holds no links.
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    prose = re.sub(r"`[^`\n]*`", "", prose)
    return INLINE_LINK.findall(prose) + REFERENCE_DEF.findall(prose) + AUTOLINK.findall(prose)


def check_crate(path: str) -> None:
    problems: list[str] = []
    with tarfile.open(path, "r:gz") as tar:
        members = [m for m in tar.getmembers() if m.isfile()]
        if not members:
            fail([f"{path} holds no files"], path)
        root = PurePosixPath(members[0].name).parts[0]
        files = {str(PurePosixPath(*PurePosixPath(m.name).parts[1:])): m for m in members}

        def read(name: str) -> str:
            f = tar.extractfile(files[name])
            assert f is not None
            return f.read().decode("utf-8")

        manifest = tomllib.loads(read("Cargo.toml"))
        package = manifest.get("package", {})
        name = package.get("name", "?")
        for field in REQUIRED_FIELDS:
            if not package.get(field):
                problems.append(f"Cargo.toml has no `{field}`")
        doc = package.get("documentation", "")
        if doc and doc.rstrip("/") != f"https://docs.rs/{name}":
            problems.append(f"documentation = {doc!r}: expected https://docs.rs/{name}")
        for field in ("homepage", "repository", "documentation"):
            if PLACEHOLDER.search(str(package.get(field, ""))):
                problems.append(f"`{field}` is a placeholder: {package[field]}")
        if "LICENSE" not in files:
            problems.append("no LICENSE file")
        for rel, member in sorted(files.items()):
            if JUNK.search(rel):
                problems.append(f"{rel}: does not belong in a published crate")
            if member.size > MAX_FILE_BYTES:
                problems.append(f"{rel}: {member.size} bytes (over {MAX_FILE_BYTES}: a fixture or build output?)")

        readme = package.get("readme")
        if isinstance(readme, str) and readme in files:
            base = PurePosixPath(readme).parent
            for link in readme_links(read(readme)):
                if PLACEHOLDER.search(link):
                    problems.append(f"{readme}: placeholder link {link}")
                elif re.match(r"^[a-z][a-z0-9+.-]*:", link, re.I) or link.startswith("#"):
                    continue  # an absolute URL, or an anchor in the README itself
                else:
                    target = str(PurePosixPath(*(base / link.split("#")[0]).parts))
                    parts: list[str] = []
                    for part in PurePosixPath(target).parts:
                        if part == "..":
                            if not parts:
                                parts = ["<outside the package>"]
                                break
                            parts.pop()
                        elif part != ".":
                            parts.append(part)
                    resolved = "/".join(parts)
                    if parts == ["<outside the package>"]:
                        problems.append(f"{readme}: link {link} points outside the package (broken on crates.io)")
                    elif resolved not in files and not any(f.startswith(resolved + "/") for f in files):
                        problems.append(f"{readme}: link {link} names {resolved}, which is not in the package "
                                        "(broken on crates.io)")
            if PLACEHOLDER.search(read(readme)):
                problems.append(f"{readme}: mentions a placeholder URL")
        elif readme:
            problems.append(f"readme {readme!r} is not in the package")
    fail(problems, root)
    unpacked = sum(m.size for m in files.values())
    print(f"{root}: {len(files)} files, {unpacked} bytes unpacked; metadata complete, no junk, README links resolve")


def wheel_tag(path: str) -> None:
    with zipfile.ZipFile(path) as whl:
        [wheel] = [n for n in whl.namelist() if re.fullmatch(r"[^/]+\.dist-info/WHEEL", n)]
        tags = [line.split(":", 1)[1].strip() for line in whl.read(wheel).decode().splitlines()
                if line.startswith("Tag:")]
    print(",".join(tags))


def table(path: str) -> None:
    rows = [line.rstrip("\n").split("\t") for line in open(path, encoding="utf-8") if line.strip()]
    head = ["artifact", "path", "bytes", "MiB", "check"]
    body = [[a, p, b, f"{int(b) / 1048576:.2f}" if b.isdigit() else "-", c] for a, p, b, c in rows]
    widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head))]
    for r in [head, ["-" * w for w in widths], *body]:
        print("  ".join(c.rjust(w) if i in (2, 3) else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip())


def main() -> None:
    args = sys.argv[1:]
    match args:
        case ["publishable"]:
            publishable()
        case ["check-crate", path]:
            check_crate(path)
        case ["wheel-tag", path]:
            wheel_tag(path)
        case ["table", path]:
            table(path)
        case _:
            print(__doc__, file=sys.stderr)
            sys.exit(2)


if __name__ == "__main__":
    main()
