"""The fingerprint of what a wheel of this package is built from, for
build-wheel.sh: reads `cargo metadata --no-deps` on stdin, prints
"FINGERPRINT TARGET_DIRECTORY".

Hashed: every file of the Rust packages of this repository that the wheel
links (path dependencies followed from reqstate-python, dev-dependencies
aside; their tests, benches and examples and build caches left out), the
workspace's Cargo.toml and Cargo.lock, `rustc -vV`, `maturin --version` (the
interpreter's virtualenv's) and RUSTFLAGS.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

SKIP = {"tests", "benches", "bench", "examples", "target", "__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache"}


def main() -> None:
    meta = json.load(sys.stdin)
    root = meta["workspace_root"]
    dirs = {p["name"]: os.path.dirname(p["manifest_path"]) for p in meta["packages"]}
    deps = {p["name"]: p["dependencies"] for p in meta["packages"]}
    wanted: set[str] = set()
    todo = ["reqstate-python"]
    while todo:
        name = todo.pop()
        if name in wanted:
            continue
        wanted.add(name)
        for dep in deps.get(name, []):
            if dep.get("path") and dep["kind"] != "dev":
                dirs.setdefault(dep["name"], dep["path"])
                todo.append(dep["name"])
    files = [os.path.join(root, "Cargo.toml"), os.path.join(root, "Cargo.lock")]
    for name in sorted(wanted):
        for directory, subdirs, names in os.walk(dirs[name]):
            subdirs[:] = sorted(d for d in subdirs if d not in SKIP and not d.startswith(".venv"))
            files += [os.path.join(directory, n) for n in sorted(names) if not n.endswith(".pyc")]
    digest = hashlib.sha256()
    for path in files:
        with open(path, "rb") as f:
            data = f.read()
        digest.update(f"{os.path.relpath(path, root)}\0{len(data)}\0".encode())
        digest.update(data)
    maturin = os.path.join(os.path.dirname(sys.executable), "maturin")
    for command in (["rustc", "-vV"], [maturin, "--version"]):
        digest.update(subprocess.run(command, capture_output=True, check=True).stdout + b"\0")
    digest.update(os.environ.get("RUSTFLAGS", "").encode())
    print(digest.hexdigest(), meta["target_directory"])


if __name__ == "__main__":
    main()
