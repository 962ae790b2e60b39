#!/usr/bin/env python3
"""What a change touches, for the quick tier of the test command.

    python3 scripts/lib/changed.py [BASE]

Reads the files changed since BASE (a git revision: default the branch's
upstream if it has one, else HEAD, so only uncommitted work counts), the
working tree's uncommitted and untracked files included, and prints shell
assignments that scripts/test.sh --quick evaluates:

    changed_files=N           how many files changed
    packages="reqstate ..."   the workspace packages whose directory holds a
                              changed file (by the longest manifest directory)
    vectors=true|false        whether the shared vectors may have moved
    suites="..."              the other suites the change touches, one
                              command per line (the quick tier names them,
                              it does not run them)

A change to the root Cargo.toml or Cargo.lock touches the core (every
package depends on it), and a change that touches no package at all (docs,
scripts) gets the core too, so the quick tier always compiles and tests
something. Only the standard library: the quick tier must start in
milliseconds.
"""

import json
import os
import shlex
import subprocess
import sys

# Folders outside the Rust packages, and the suite that tests each.
SUITES = [
    ("clients/typescript/", "bash clients/typescript/run-tests.sh"),
    ("examples/cloudflare-worker/", "bash clients/typescript/run-tests.sh"),
    ("examples/node-whoami/", "bash clients/node/run-tests.sh"),
    ("clients/node/", "bash clients/node/run-tests.sh"),
    ("clients/python/", "bash clients/python/run-tests.sh"),
    ("crates/reqstate-python/", "bash crates/reqstate-python/run-tests.sh"),
    ("tests/mcp-conformance/", "bash tests/mcp-conformance/run.sh"),
    ("tests/stock_clients/", "bash tests/stock_clients/run.sh"),
    ("proto/", "bash tests/stock_clients/run.sh"),
    ("tests/vectors/", "cargo test -p reqstate-conformance"),
    ("tests/conformance/", "cargo test -p reqstate-conformance"),
    ("deploy/", "bash deploy/run-tests.sh"),
    ("fuzz/", "bash fuzz/run.sh 20"),
]


# Files outside a package whose snippets a package compiles as doctests.
DOCTESTED = {
    "README.md": "reqstate-example-key-rotation",
    "docs/KEYRING.md": "reqstate-example-key-rotation",
    "crates/reqstate/README.md": "reqstate-example-key-rotation",
}


def git(*args):
    return subprocess.run(
        ["git", *args], check=True, capture_output=True, text=True
    ).stdout


def default_base():
    probe = subprocess.run(
        ["git", "rev-parse", "--verify", "--quiet", "@{upstream}"],
        capture_output=True,
        text=True,
    )
    return "@{upstream}" if probe.returncode == 0 else "HEAD"


def changed_files(base):
    merge_base = git("merge-base", base, "HEAD").strip()
    files = set(git("diff", "--name-only", merge_base).split("\n"))
    files |= set(git("ls-files", "--others", "--exclude-standard").split("\n"))
    files.discard("")
    return sorted(files)


def workspace_packages(root):
    meta = json.loads(
        subprocess.run(
            ["cargo", "metadata", "--format-version", "1", "--no-deps", "--offline"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    )
    dirs = {}
    for package in meta["packages"]:
        directory = os.path.relpath(os.path.dirname(package["manifest_path"]), root)
        dirs[directory + "/"] = package["name"]
    return dirs


def owner(path, dirs):
    best = None
    for directory, name in dirs.items():
        if path.startswith(directory) and (best is None or len(directory) > len(best[0])):
            best = (directory, name)
    return best[1] if best else None


def main():
    if len(sys.argv) > 2:
        sys.exit("usage: changed.py [BASE]")
    base = sys.argv[1] if len(sys.argv) == 2 else default_base()
    root = git("rev-parse", "--show-toplevel").strip()
    os.chdir(root)
    files = changed_files(base)
    dirs = workspace_packages(root)

    packages = set()
    suites = []
    vectors = False
    for path in files:
        name = owner(path, dirs)
        if name:
            packages.add(name)
        if path in DOCTESTED:
            packages.add(DOCTESTED[path])
        if path.startswith("crates/reqstate-keyring-file/"):
            packages.add("reqstate-example-key-rotation")
        if path in ("Cargo.toml", "Cargo.lock"):
            packages.add("reqstate")
        if path.startswith(("crates/reqstate/", "tests/vectors/")):
            vectors = True
        for prefix, suite in SUITES:
            if path.startswith(prefix) and suite not in suites:
                suites.append(suite)
    if not packages:
        packages.add("reqstate")

    print(f"quick_base={shlex.quote(base)}")
    print(f"changed_files={len(files)}")
    print(f"packages={shlex.quote(' '.join(sorted(packages)))}")
    print(f"vectors={'true' if vectors else 'false'}")
    print(f"suites={shlex.quote(chr(10).join(suites))}")


if __name__ == "__main__":
    main()
