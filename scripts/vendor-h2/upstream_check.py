#!/usr/bin/env python3
"""Is the vendored h2 still a release we should ship? Yanks, advisories and
newer releases of the crates.io version that vendor/h2 is.

    python3 scripts/vendor-h2/upstream_check.py
    python3 scripts/vendor-h2/upstream_check.py --advisory-db ~/src/advisory-db --require-advisories

Why this script exists: vendor/h2 is used through `[patch.crates-io]` as a
*path* dependency, and a path dependency has no registry source in
Cargo.lock. cargo-deny (and cargo-audit) match advisories and yanks by
registry source, so they never see h2 at all: without this check a RustSec
advisory or a yank of the h2 release we carry would go unnoticed.

What it checks, each on its own, and what it prints for each ("checked",
"NOT CHECKED" with the reason, or "FAILED"):

  index    crates.io's sparse index (index.crates.io): the vendored version
           is listed, not yanked, and its checksum is vendor/h2/UPSTREAM.toml's.
           A newer release that is not yanked is a WARNING only: an upstream
           release alone must not break CI.
  osv      OSV's API (api.osv.dev, which carries RustSec's advisories for
           crates.io): any advisory for the vendored version, unless withdrawn.
  rustsec  RustSec advisory-db checkouts on this machine: --advisory-db DIR,
           $REQSTATE_ADVISORY_DB (paths separated by ':'), cargo-audit's
           ~/.cargo/advisory-db and cargo-deny's ~/.cargo/advisory-dbs/*
           (under $CARGO_HOME when set): any advisory for h2 whose `patched`
           and `unaffected` requirements leave the vendored version out,
           unless withdrawn. Their age is printed: a stale copy is not proof.

The RustSec database itself lives on GitHub, which the project's machines
and CI cannot reach; on them only the index answers (OSV's host does not
resolve), and the script says so in a banner rather than passing quietly.

Exit status: 1 when the vendored version is yanked, not listed, has another
checksum, or has an advisory (FAILED); 0 otherwise, including when a source
could not be reached (the network is not a test dependency), unless
--require-advisories asks for at least one advisory source to have answered;
2 for a usage error.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402
from _common import (  # noqa: E402
    CRATE,
    HttpStatus,
    Unreachable,
    Version,
    requirement_matches,
    tomllib,
)

OSV_URL = "https://api.osv.dev/v1/query"


@dataclass
class Report:
    """What each source said."""

    lines: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    advisory_sources_checked: list[str] = field(default_factory=list)
    not_checked: list[str] = field(default_factory=list)

    def checked(self, source: str, text: str) -> None:
        self.lines.append(f"[{source}] checked: {text}")

    def skipped(self, source: str, text: str) -> None:
        self.lines.append(f"[{source}] NOT CHECKED: {text}")
        self.not_checked.append(source)

    def failed(self, source: str, text: str) -> None:
        self.lines.append(f"[{source}] FAILED: {text}")
        self.failures.append(f"{source}: {text}")

    def warn(self, source: str, text: str) -> None:
        self.lines.append(f"[{source}] WARNING: {text}")
        self.warnings.append(f"{source}: {text}")


# ---------------------------------------------------------------------------
# crates.io's index


def check_index(report: Report, args: argparse.Namespace, version: str, pinned: dict | None) -> None:
    url = f"{args.index_url.rstrip('/')}/{_common.index_path(CRATE)}"
    try:
        entries = _common.fetch_index(args.index_url, CRATE, args.timeout)
    except Unreachable as e:
        report.skipped("index", f"unreachable (network?): {e}; yanks and newer releases unknown")
        return
    except HttpStatus as e:
        report.skipped("index", f"{e}: not an index answer; yanks and newer releases unknown")
        return
    except ValueError as e:
        report.skipped("index", f"{url} answered, but not with a sparse index file ({e})")
        return
    ours = [entry for entry in entries if entry.version == version]
    if not ours:
        report.failed("index", f"{url} lists no {CRATE} {version}: the vendored version is not a crates.io release")
        return
    entry = ours[0]
    if entry.yanked:
        report.failed(
            "index",
            f"{CRATE} {version} is YANKED on crates.io ({url}): move vendor/h2 to a "
            "release that is not (scripts/vendor-h2/refresh.py --version X)",
        )
    else:
        report.checked("index", f"{CRATE} {version} is listed and not yanked ({url})")
    if pinned is None:
        report.failed("index", "vendor/h2/UPSTREAM.toml is missing: the checksum cannot be compared")
    elif pinned["version"] != version:
        report.failed(
            "index",
            f"vendor/h2/UPSTREAM.toml names {pinned['version']}, vendor/h2/Cargo.toml {version}",
        )
    elif pinned["sha256"] != entry.cksum:
        report.failed(
            "index",
            f"the index's checksum of {CRATE} {version} is {entry.cksum}, "
            f"vendor/h2/UPSTREAM.toml pins {pinned['sha256']}",
        )
    else:
        report.checked("index", f"its checksum is the one vendor/h2/UPSTREAM.toml pins ({entry.cksum[:16]}...)")

    current = Version.parse(version)
    newer = sorted(
        (Version.parse(e.version) for e in entries if not e.yanked and not Version.parse(e.version).pre),
        key=Version.key,
    )
    newer = [v for v in newer if v.key() > current.key()]
    if not newer:
        report.checked("index", f"no newer release than {version} (prereleases and yanked ones aside)")
        return
    compatible = [v for v in newer if requirement_matches(f"^{version}", v)]
    parts = []
    if compatible:
        parts.append(f"newest compatible {compatible[-1]}")
    if newer[-1] not in compatible:
        parts.append(f"newest {newer[-1]}")
    report.warn(
        "index",
        f"vendor/h2 is {CRATE} {version}; crates.io has {len(newer)} newer release(s) "
        f"({', '.join(parts)}). Not a failure: read its changelog and move with "
        f"python3 scripts/vendor-h2/refresh.py --version {newer[-1] if not compatible else compatible[-1]}",
    )


# ---------------------------------------------------------------------------
# OSV


def check_osv(report: Report, args: argparse.Namespace, version: str) -> None:
    query = json.dumps({"package": {"name": CRATE, "ecosystem": "crates.io"}, "version": version})
    try:
        body = _common.fetch(args.osv_url, args.timeout, data=query.encode())
        answer = json.loads(body)
        vulns = answer.get("vulns", [])
        if not isinstance(vulns, list):
            raise ValueError("'vulns' is not a list")
    except Unreachable as e:
        report.skipped("osv", f"unreachable: {e}")
        return
    except HttpStatus as e:
        report.skipped("osv", f"{e}")
        return
    except (ValueError, AttributeError) as e:
        report.skipped("osv", f"{args.osv_url} answered, but not with an OSV query result ({e})")
        return
    live = [v for v in vulns if isinstance(v, dict) and not v.get("withdrawn")]
    withdrawn = len(vulns) - len(live)
    for vuln in live:
        ids = ", ".join([str(vuln.get("id", "?"))] + [str(a) for a in vuln.get("aliases", [])])
        report.failed("osv", f"{CRATE} {version} is affected by {ids}: {vuln.get('summary', '(no summary)')}")
    if not live:
        note = f" ({withdrawn} withdrawn, ignored)" if withdrawn else ""
        report.checked("osv", f"no advisory for {CRATE} {version} at {args.osv_url}{note}")
    if answer.get("next_page_token"):
        report.failed("osv", "the answer has more pages than read: check by hand")
    report.advisory_sources_checked.append(f"OSV ({args.osv_url})")


# ---------------------------------------------------------------------------
# RustSec advisory-db checkouts


def advisory_db_candidates(args: argparse.Namespace) -> tuple[list[Path], list[str]]:
    """Explicit databases (which must exist) and discovered ones, and where
    it looked."""
    explicit = [Path(p).expanduser() for p in args.advisory_db]
    env = os.environ.get("REQSTATE_ADVISORY_DB", "")
    explicit += [Path(p).expanduser() for p in env.split(os.pathsep) if p]
    for path in explicit:
        if not (path / "crates").is_dir():
            print(f"usage: {path} is not a RustSec advisory-db checkout (no crates/ in it)", file=sys.stderr)
            raise SystemExit(2)
    cargo_home = Path(os.environ.get("CARGO_HOME", Path.home() / ".cargo"))
    looked = [
        "--advisory-db",
        "$REQSTATE_ADVISORY_DB",
        str(cargo_home / "advisory-db"),
        str(cargo_home / "advisory-dbs" / "*"),
    ]
    discovered = [cargo_home / "advisory-db"] + sorted((cargo_home / "advisory-dbs").glob("*"))
    found = explicit + [p for p in discovered if (p / "crates").is_dir()]
    return found, looked


def read_advisory(path: Path) -> dict:
    """An advisory's TOML front matter (the ```toml block of its .md)."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".toml":
        return tomllib.loads(text)
    start = text.find("```toml\n")
    end = text.find("\n```", start + 8)
    if start < 0 or end < 0:
        raise ValueError("no ```toml front matter")
    return tomllib.loads(text[start + 8 : end])


def affects(advisory: dict, version: Version) -> bool:
    """RustSec's rule: affected unless a `patched` or an `unaffected`
    requirement matches."""
    versions = advisory.get("versions", {})
    for key in ("patched", "unaffected"):
        requirements = versions.get(key, [])
        if not isinstance(requirements, list):
            raise ValueError(f"versions.{key} is not a list")
        if any(requirement_matches(str(r), version) for r in requirements):
            return False
    return True


def _age(db: Path) -> str:
    marker = next(
        (p for p in (db / ".git" / "FETCH_HEAD", db / ".git" / "HEAD", db / "crates") if p.exists()),
        db,
    )
    days = (time.time() - marker.stat().st_mtime) / 86400
    return f"updated {days:.0f} day(s) ago"


def check_rustsec(report: Report, args: argparse.Namespace, version: str) -> None:
    dbs, looked = advisory_db_candidates(args)
    if not dbs:
        report.skipped(
            "rustsec",
            "no advisory-db checkout on this machine (looked at " + ", ".join(looked) + "); "
            "RustSec's database is fetched from GitHub, which is unreachable here",
        )
        return
    current = Version.parse(version)
    for db in dbs:
        files = sorted((db / "crates" / CRATE).glob("*.md")) + sorted((db / "crates" / CRATE).glob("*.toml"))
        hits, withdrawn = [], 0
        try:
            for path in files:
                data = read_advisory(path)
                advisory = data.get("advisory", {})
                if advisory.get("package") != CRATE:
                    continue
                if advisory.get("withdrawn"):
                    withdrawn += 1
                    continue
                if affects(data, current):
                    kind = advisory.get("informational")
                    hits.append(
                        f"{advisory.get('id', path.stem)}"
                        f"{f' ({kind})' if kind else ''}: {advisory.get('title', '')}".rstrip(": ")
                    )
        except (OSError, ValueError, tomllib.TOMLDecodeError) as e:
            report.failed("rustsec", f"{db}: cannot read {path.name}: {e}")
            continue
        for hit in hits:
            report.failed("rustsec", f"{CRATE} {version} is affected by {hit} ({db})")
        if not hits:
            report.checked(
                "rustsec",
                f"{db}: {len(files)} advisory file(s) for {CRATE}, none affects {version}"
                f"{f' ({withdrawn} withdrawn)' if withdrawn else ''}; {_age(db)}",
            )
        report.advisory_sources_checked.append(f"RustSec advisory-db at {db} ({_age(db)})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Yanks, advisories and newer releases of the vendored h2 (cargo-deny cannot see it)."
    )
    parser.add_argument(
        "--advisory-db",
        action="append",
        default=[],
        metavar="DIR",
        help="a RustSec advisory-db checkout to use (repeatable)",
    )
    parser.add_argument(
        "--require-advisories",
        action="store_true",
        help="fail unless at least one advisory source (OSV or an advisory-db) was checked",
    )
    parser.add_argument("--timeout", type=float, default=10.0, help="network timeout per source, seconds")
    parser.add_argument("--vendor-dir", type=Path, default=_common.VENDOR_DIR, help=argparse.SUPPRESS)
    parser.add_argument("--index-url", default=_common.INDEX_URL, help=argparse.SUPPRESS)
    parser.add_argument("--osv-url", default=OSV_URL, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    version = _common.vendored_version(args.vendor_dir)
    pinned = _common.pinned_upstream(args.vendor_dir)
    report = Report()
    check_index(report, args, version, pinned)
    check_osv(report, args, version)
    check_rustsec(report, args, version)

    print(f"vendored {CRATE} {version} (vendor/h2; cargo-deny cannot see a path dependency):")
    for line in report.lines:
        print(f"  {line}")
    if report.advisory_sources_checked:
        print("advisories checked against: " + "; ".join(report.advisory_sources_checked))
    else:
        why = [line for line in report.lines if line.startswith(("[osv]", "[rustsec]"))]
        print(
            "\n  " + "*" * 72 + "\n"
            f"  WARNING: {CRATE} {version} was NOT checked for security advisories:\n"
            + "".join(f"    {line}\n" for line in why)
            + "  Check by hand where GitHub is reachable:\n"
            "    git clone https://github.com/rustsec/advisory-db\n"
            "    python3 scripts/vendor-h2/upstream_check.py --advisory-db advisory-db --require-advisories\n"
            "  " + "*" * 72
        )
    if report.failures:
        print(f"\nFAILED ({len(report.failures)}):", file=sys.stderr)
        for failure in report.failures:
            print(f"  - {failure}", file=sys.stderr)
        return 1
    if args.require_advisories and not report.advisory_sources_checked:
        print("\nFAILED: --require-advisories, and no advisory source was checked", file=sys.stderr)
        return 1
    summary = "passed"
    if report.warnings:
        summary += f" with {len(report.warnings)} warning(s)"
    if report.not_checked:
        summary += f"; not checked: {', '.join(report.not_checked)}"
    print(f"vendored {CRATE} upstream check {summary}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
