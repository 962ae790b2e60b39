#!/usr/bin/env python3
"""Re-creates vendor/h2 from a crates.io release of h2 and reqstate.patch, or
proves (--check) that vendor/h2 is exactly that release plus that patch.

    python3 scripts/vendor-h2/refresh.py --check            # prove it
    python3 scripts/vendor-h2/refresh.py                    # re-create the vendored version
    python3 scripts/vendor-h2/refresh.py --version 0.4.21   # move to another release

The tree it writes (vendor/h2/PATCH.md says why each part is there):

    Cargo.toml      the release's manifest (the normalized one crates.io
                    serves), less its [[example]], [[bench]] and [[test]]
                    targets and every dev-dependency table: `trim_manifest`,
                    which proves with a TOML parser that it removed those keys
                    and changed nothing else
    LICENSE, README.md, src/
                    the release's; src/ with reqstate.patch applied
                    (`git apply`: exact context, no fuzz)
    UPSTREAM.toml   the release: version, the .crate's SHA-256 (the index's
                    `cksum`) and the upstream commit it was packaged from
    PATCH.md, reqstate.patch
                    the project's own; reqstate.patch is rewritten in its
                    canonical form (`diff -ru a/src b/src` of the release
                    against the result, without timestamps)

The release's .crate comes from `--crate FILE`, else cargo's download cache
when its SHA-256 is the expected one, else static.crates.io. The expected
SHA-256 is UPSTREAM.toml's when the version is the vendored one, else the one
crates.io's sparse index lists (a yanked version is refused).

--check builds the same tree in a temporary directory and compares it with
vendor/h2 file by file (content and executable bit; files missing or extra),
and reqstate.patch with its canonical form.

Exit status: 0 identical (or written); 1 a difference, a checksum that does
not match, a patch that does not apply; 2 a usage error, or the release could
not be had (network down, no cache): nothing was checked.
"""

from __future__ import annotations

import argparse
import difflib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path, PurePosixPath

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402
from _common import (  # noqa: E402
    CRATE,
    OURS,
    UPSTREAM_FILE,
    HttpStatus,
    Unreachable,
    Version,
    sha256_hex,
    tomllib,
)

EXIT_DIFFERS = 1
EXIT_NOT_CHECKED = 2
# A .crate is a few hundred KiB; refuse to unpack anything near this.
MAX_UNPACKED = 64 << 20
# The release's files that vendor/h2 keeps, besides the trimmed Cargo.toml.
KEPT = ("LICENSE", "README.md", "src")


class Failure(Exception):
    """The tree is not release + patch, or cannot be made so (exit 1)."""


class NotChecked(Exception):
    """The release could not be obtained (exit 2)."""


# ---------------------------------------------------------------------------
# The manifest

_DROPPED_TABLE = re.compile(
    r"\[\[(?:example|bench|test)\]\]"
    r"|\[(?:target\..+\.)?dev[-_]dependencies(?:\..+)?\]"
)
_DROPPED_KEYS = ("example", "bench", "test", "dev-dependencies", "dev_dependencies")


def _expected_after_trim(manifest: dict) -> dict:
    expected = {k: v for k, v in manifest.items() if k not in _DROPPED_KEYS}
    if "target" in manifest:
        targets = {}
        for cfg, table in manifest["target"].items():
            kept = {k: v for k, v in table.items() if k not in _DROPPED_KEYS}
            if kept:
                targets[cfg] = kept
        if targets:
            expected["target"] = targets
        else:
            del expected["target"]
    return expected


def trim_manifest(text: str) -> str:
    """The release's Cargo.toml without its example, bench and test targets
    and its dev-dependencies (a vendored copy builds none of them, and their
    files are not vendored).

    Line-based on cargo's normalized manifest (every table header alone on a
    line at column 0), removing each dropped table up to the next header;
    then both texts are parsed and the result must equal the original less
    exactly those keys, so a manifest this rule does not fit fails loudly
    instead of being cut wrongly.
    """
    out: list[str] = []
    dropping = False
    for line in text.splitlines(keepends=True):
        if line.startswith("["):
            dropping = bool(_DROPPED_TABLE.fullmatch(line.strip()))
        if not dropping:
            out.append(line)
    trimmed = "".join(out).rstrip("\n") + "\n"
    misfit = Failure(
        "Cargo.toml: trimming by table headers did not remove exactly the "
        "example, bench, test and dev-dependency tables (a multi-line "
        "value that starts a line with '['?); trim this release by hand "
        "and update trim_manifest"
    )
    try:
        original = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise Failure(f"the release's Cargo.toml is not TOML: {e}") from e
    try:
        result = tomllib.loads(trimmed)
    except tomllib.TOMLDecodeError as e:
        raise misfit from e
    if result != _expected_after_trim(original):
        raise misfit
    return trimmed


# ---------------------------------------------------------------------------
# The release


def _cargo_cache_candidates(version: str) -> list[Path]:
    home = Path(os.environ.get("CARGO_HOME", Path.home() / ".cargo"))
    return sorted((home / "registry" / "cache").glob(f"*/{CRATE}-{version}.crate"))


def obtain_crate(args: argparse.Namespace, version: str, expected: str) -> bytes:
    """The .crate bytes, checked against `expected` (lower-case hex SHA-256)."""
    if args.crate:
        data = Path(args.crate).read_bytes()
        source = str(args.crate)
    else:
        data = None
        for path in _cargo_cache_candidates(version):
            candidate = path.read_bytes()
            if sha256_hex(candidate) == expected:
                data, source = candidate, f"cargo's cache ({path})"
                break
            print(f"note: {path} has another SHA-256: not used", file=sys.stderr)
        if data is None:
            url = f"{args.download_url.rstrip('/')}/{CRATE}/{CRATE}-{version}.crate"
            try:
                data = _common.fetch(url, args.timeout, limit=MAX_UNPACKED)
            except Unreachable as e:
                raise NotChecked(f"could not download the release: {e}") from e
            except HttpStatus as e:
                raise Failure(f"crates.io has no {CRATE} {version}: {e}") from e
            source = url
    digest = sha256_hex(data)
    if digest != expected:
        raise Failure(
            f"{CRATE}-{version}.crate from {source} has SHA-256 {digest}, "
            f"expected {expected}: not the release that was vendored"
        )
    print(f"release: {CRATE}-{version}.crate from {source}, SHA-256 {digest} (as expected)")
    return data


def expected_checksum(args: argparse.Namespace, version: str) -> str:
    """UPSTREAM.toml's SHA-256 for the vendored version, else the index's
    (refusing a yanked version)."""
    pinned = _common.pinned_upstream(args.vendor_dir)
    if pinned and pinned["name"] == CRATE and pinned["version"] == version:
        return pinned["sha256"]
    try:
        entries = _common.fetch_index(args.index_url, CRATE, args.timeout)
    except Unreachable as e:
        raise NotChecked(
            f"{UPSTREAM_FILE} does not pin {CRATE} {version}, and the index "
            f"that would give its checksum is unreachable: {e}"
        ) from e
    except (HttpStatus, ValueError) as e:
        raise Failure(f"the index did not give {CRATE}'s versions: {e}") from e
    for entry in entries:
        if entry.version == version:
            if entry.yanked:
                raise Failure(f"{CRATE} {version} is yanked on crates.io: choose another release")
            return entry.cksum
    raise Failure(f"crates.io's index lists no {CRATE} {version}")


def unpack(data: bytes, version: str, dest: Path) -> Path:
    """Unpacks a .crate into `dest` and returns its top directory. Only
    regular files and directories under `h2-VERSION/`, no `..`, at most
    MAX_UNPACKED bytes."""
    top = f"{CRATE}-{version}"
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            members = tar.getmembers()
            total = 0
            for member in members:
                path = PurePosixPath(member.name)
                if path.is_absolute() or ".." in path.parts or path.parts[:1] != (top,):
                    raise Failure(f"the .crate holds {member.name!r}, outside {top}/")
                if not (member.isfile() or member.isdir()):
                    raise Failure(f"the .crate holds {member.name!r}, not a file or directory")
                total += member.size
                if total > MAX_UNPACKED:
                    raise Failure(f"the .crate unpacks to over {MAX_UNPACKED} bytes")
            tar.extractall(dest, members=members, filter="data")
    except (tarfile.TarError, OSError, EOFError) as e:
        raise Failure(f"the .crate is not a readable gzip tar: {e}") from e
    root = dest / top
    for name in KEPT + ("Cargo.toml",):
        if not (root / name).exists():
            raise Failure(f"the release has no {name}")
    return root


def upstream_record(version: str, digest: str, release: Path) -> str:
    """The text of UPSTREAM.toml."""
    lines = [
        "# Which crates.io release vendor/h2 is. Written by",
        "# scripts/vendor-h2/refresh.py; read by its --check and by",
        "# scripts/vendor-h2/upstream_check.py (vendor/h2/PATCH.md). Not edited by hand.",
        f'name = "{CRATE}"',
        f'version = "{version}"',
        f"# SHA-256 of {CRATE}-{version}.crate (crates.io's index `cksum`).",
        f'sha256 = "{digest}"',
    ]
    vcs = release / ".cargo_vcs_info.json"
    if vcs.exists():
        try:
            commit = json.loads(vcs.read_text())["git"]["sha1"]
        except (ValueError, KeyError, TypeError):
            commit = None
        if isinstance(commit, str) and re.fullmatch(r"[0-9a-f]{40}", commit):
            lines += [
                "# The upstream commit the release was packaged from (its .cargo_vcs_info.json).",
                f'vcs_commit = "{commit}"',
            ]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------
# The patch


def apply_patch(tree: Path, patch: Path) -> None:
    """`git apply -p1` in `tree` (exact context; git stops looking for a
    repository above the tree, so the path is never taken as one's)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env["GIT_CEILING_DIRECTORIES"] = str(tree.parent)
    result = subprocess.run(
        ["git", "apply", "-p1", "--whitespace=nowarn", str(patch)],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        raise Failure(
            f"{patch.name} does not apply to this release (port the change by hand, PATCH.md):\n{result.stderr.strip()}"
        )


def canonical_patch(release_src: Path, patched_src: Path, work: Path) -> str:
    """`diff -ru a/src b/src` of the release against the patched tree, with
    the timestamps of the ---/+++ lines removed."""
    a, b = work / "a", work / "b"
    for side in (a, b):
        if side.exists():
            shutil.rmtree(side)
    shutil.copytree(release_src, a / "src")
    shutil.copytree(patched_src, b / "src")
    result = subprocess.run(
        ["diff", "-ru", "a/src", "b/src"],
        cwd=work,
        env={**os.environ, "LC_ALL": "C"},
        capture_output=True,
    )
    if result.returncode == 0:
        raise Failure("reqstate.patch changes nothing")
    if result.returncode != 1:
        raise Failure(f"diff failed: {result.stderr.decode(errors='replace').strip()}")
    text = result.stdout.decode("utf-8")
    return re.sub(r"(?m)^(---|\+\+\+) ([^\t\n]+)\t.*$", r"\1 \2", text)


# ---------------------------------------------------------------------------
# The tree


def build(args: argparse.Namespace, version: str, work: Path) -> tuple[Path, str]:
    """Builds release + patch under `work`; returns the tree and the patch's
    canonical text."""
    patch = args.vendor_dir / "reqstate.patch"
    if not patch.exists():
        raise Failure(f"{patch} is missing")
    expected = expected_checksum(args, version)
    data = obtain_crate(args, version, expected)
    release = unpack(data, version, work / "release")
    tree = work / "tree"
    tree.mkdir()
    for name in KEPT:
        source = release / name
        if source.is_dir():
            shutil.copytree(source, tree / name, copy_function=shutil.copyfile)
        else:
            shutil.copyfile(source, tree / name)
    manifest = (release / "Cargo.toml").read_text(encoding="utf-8")
    (tree / "Cargo.toml").write_text(trim_manifest(manifest), encoding="utf-8")
    (tree / UPSTREAM_FILE).write_text(upstream_record(version, sha256_hex(data), release))
    apply_patch(tree, patch)
    return tree, canonical_patch(release / "src", tree / "src", work)


def files_of(root: Path, skip: tuple[str, ...] = ()) -> dict[str, Path]:
    """Every file under `root` by relative POSIX path, less `skip` (top
    level names) and Python caches."""
    found = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if rel in skip or "__pycache__" in path.parts:
            continue
        if path.is_symlink() or not (path.is_file() or path.is_dir()):
            found[rel] = path  # compared below, and reported as not a file
        elif path.is_file():
            found[rel] = path
    return found


def _excerpt(a: bytes, b: bytes, name: str, limit: int = 40) -> str:
    try:
        lines = list(
            difflib.unified_diff(
                a.decode().splitlines(),
                b.decode().splitlines(),
                f"release+patch/{name}",
                f"vendor/h2/{name}",
                lineterm="",
            )
        )
    except UnicodeDecodeError:
        return "    (binary)"
    more = f"\n    ... {len(lines) - limit} more lines" if len(lines) > limit else ""
    return "\n".join("    " + line for line in lines[:limit]) + more


def compare(tree: Path, vendor: Path, patch_text: str) -> list[str]:
    """The differences between release + patch and vendor/h2, in words."""
    problems = []
    want = files_of(tree)
    have = files_of(vendor, skip=OURS)
    for rel in sorted(want.keys() - have.keys()):
        problems.append(f"missing from vendor/h2: {rel}")
    for rel in sorted(have.keys() - want.keys()):
        problems.append(f"in vendor/h2 but not in release + patch: {rel}")
    for rel in sorted(want.keys() & have.keys()):
        ours = have[rel]
        if ours.is_symlink() or not ours.is_file():
            problems.append(f"vendor/h2/{rel} is not a regular file")
            continue
        a, b = want[rel].read_bytes(), ours.read_bytes()
        if a != b:
            problems.append(f"differs: {rel}\n{_excerpt(a, b, rel)}")
        if os.access(ours, os.X_OK) != os.access(want[rel], os.X_OK):
            problems.append(f"executable bit differs: {rel}")
    current = (vendor / "reqstate.patch").read_text(encoding="utf-8")
    if current != patch_text:
        problems.append(
            "reqstate.patch is not in canonical form (diff -ru a/src b/src of "
            "the release against release + patch; `refresh.py` rewrites it):\n"
            + _excerpt(patch_text.encode(), current.encode(), "reqstate.patch")
        )
    return problems


def write(tree: Path, vendor: Path, patch_text: str) -> None:
    """Replaces vendor/h2's release files with `tree`'s, keeping PATCH.md and
    writing the canonical reqstate.patch."""
    for entry in vendor.iterdir():
        if entry.name in OURS:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
    for entry in tree.iterdir():
        if entry.is_dir():
            shutil.copytree(entry, vendor / entry.name, copy_function=shutil.copyfile)
        else:
            shutil.copyfile(entry, vendor / entry.name)
    (vendor / "reqstate.patch").write_text(patch_text, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Re-create vendor/h2 as a crates.io release of h2 plus reqstate.patch, "
        "or prove that it is (--check).",
    )
    parser.add_argument("--check", action="store_true", help="compare, write nothing")
    parser.add_argument("--version", help="the h2 release (default: the vendored one)")
    parser.add_argument("--crate", type=Path, help="use this .crate file instead of downloading")
    parser.add_argument("--vendor-dir", type=Path, default=_common.VENDOR_DIR, help=argparse.SUPPRESS)
    parser.add_argument("--index-url", default=_common.INDEX_URL, help=argparse.SUPPRESS)
    parser.add_argument("--download-url", default=_common.DOWNLOAD_URL, help=argparse.SUPPRESS)
    parser.add_argument("--timeout", type=float, default=30.0, help="network timeout, seconds")
    args = parser.parse_args(argv)
    args.vendor_dir = args.vendor_dir.resolve()

    version = args.version or _common.vendored_version(args.vendor_dir)
    try:
        Version.parse(version)
    except ValueError as e:
        parser.error(str(e))
    if args.check and args.version and args.version != _common.vendored_version(args.vendor_dir):
        parser.error("--check compares with the vendored version; leave out --version")

    with tempfile.TemporaryDirectory(prefix="vendor-h2-") as temp:
        try:
            tree, patch_text = build(args, version, Path(temp))
        except NotChecked as e:
            print(f"vendor/h2 NOT CHECKED: {e}", file=sys.stderr)
            return EXIT_NOT_CHECKED
        except Failure as e:
            print(f"vendor/h2: FAILED: {e}", file=sys.stderr)
            return EXIT_DIFFERS
        if args.check:
            problems = compare(tree, args.vendor_dir, patch_text)
            if problems:
                print(
                    f"vendor/h2 is NOT {CRATE} {version} from crates.io plus reqstate.patch:",
                    file=sys.stderr,
                )
                for problem in problems:
                    print(f"  - {problem}", file=sys.stderr)
                print(
                    "re-create it with: python3 scripts/vendor-h2/refresh.py "
                    "(after moving a wanted change into reqstate.patch)",
                    file=sys.stderr,
                )
                return EXIT_DIFFERS
            count = len(files_of(tree))
            print(
                f"vendor/h2 is exactly {CRATE} {version} from crates.io (trimmed manifest) "
                f"plus reqstate.patch: {count} files identical, patch canonical"
            )
            return 0
        previous = _common.vendored_version(args.vendor_dir)
        write(tree, args.vendor_dir, patch_text)
    print(f"wrote vendor/h2: {CRATE} {version} + reqstate.patch")
    if previous != version:
        print(
            f"next, for {previous} -> {version}: the root Cargo.toml's "
            f'`h2 = {{ version = "{version}" }}`, `cargo update -p h2`, the version in '
            "vendor/h2/PATCH.md, then the tests PATCH.md names"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
