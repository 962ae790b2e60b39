"""Shared by refresh.py and upstream_check.py (scripts/vendor-h2/).

Standard library only (Python 3.11+: tomllib, tarfile's extraction filters),
so that the checks run on a fresh machine before any virtual environment
exists.
"""

from __future__ import annotations

import hashlib
import json
import re
import socket
import ssl
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError as e:  # Python < 3.11
    raise SystemExit("scripts/vendor-h2 needs Python 3.11 or newer (tomllib)") from e

REPO = Path(__file__).resolve().parents[2]
VENDOR_DIR = REPO / "vendor" / "h2"
CRATE = "h2"
# crates.io's own addresses (the only registry hosts the machines and CI
# reach besides PyPI, npm and Debian).
INDEX_URL = "https://index.crates.io"
DOWNLOAD_URL = "https://static.crates.io/crates"
USER_AGENT = "reqstate-vendor-h2 (scripts/vendor-h2 of the reqstate repository)"
# Files of vendor/h2 that are the project's own, not the release's.
OURS = ("PATCH.md", "reqstate.patch")
# The record of which release the tree is (written by refresh.py).
UPSTREAM_FILE = "UPSTREAM.toml"


class Unreachable(Exception):
    """The network or the host did not answer (no HTTP status at all), or
    answered with a server-side error: nothing was learnt."""


class HttpStatus(Exception):
    """The host answered with an HTTP status other than 200."""

    def __init__(self, url: str, status: int):
        super().__init__(f"{url}: HTTP {status}")
        self.url = url
        self.status = status


def fetch(url: str, timeout: float, data: bytes | None = None, limit: int = 64 << 20) -> bytes:
    """GETs (or POSTs `data` as JSON to) `url` and returns the body of a 200.

    Raises `Unreachable` when no answer came (DNS, refused, reset, timeout,
    TLS failure) or the answer was a 5xx or 429, and `HttpStatus` for any
    other status. A body over `limit` bytes is refused.
    """
    headers = {"User-Agent": USER_AGENT}
    if data is not None:
        headers["Content-Type"] = "application/json"
    request = urllib.request.Request(url, data=data, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body = response.read(limit + 1)
            status = response.status
    except urllib.error.HTTPError as e:
        if e.code >= 500 or e.code == 429:
            raise Unreachable(f"{url}: HTTP {e.code} (server-side)") from e
        raise HttpStatus(url, e.code) from e
    except urllib.error.URLError as e:
        raise Unreachable(f"{url}: {describe_network_error(e.reason)}") from e
    except TimeoutError as e:
        raise Unreachable(f"{url}: no answer within {timeout:g} s") from e
    except (ConnectionError, ssl.SSLError, OSError) as e:
        raise Unreachable(f"{url}: {describe_network_error(e)}") from e
    if status != 200:
        raise HttpStatus(url, status)
    if len(body) > limit:
        raise Unreachable(f"{url}: answer larger than {limit} bytes, not read")
    return body


def describe_network_error(reason: object) -> str:
    """A network failure in words (name resolution, refused, timeout)."""
    if isinstance(reason, socket.gaierror):
        return f"name not resolved ({reason.strerror or reason})"
    if isinstance(reason, ConnectionRefusedError):
        return "connection refused"
    if isinstance(reason, (socket.timeout, TimeoutError)):
        return "timed out"
    return str(reason)


def index_path(name: str) -> str:
    """The sparse index path of a crate name (cargo's layout)."""
    lower = name.lower()
    if len(lower) <= 2:
        return f"{len(lower)}/{lower}"
    if len(lower) == 3:
        return f"3/{lower[0]}/{lower}"
    return f"{lower[0:2]}/{lower[2:4]}/{lower}"


@dataclass(frozen=True)
class IndexEntry:
    """One version line of a crate's sparse index file."""

    version: str
    yanked: bool
    cksum: str


def parse_index(body: bytes, name: str) -> list[IndexEntry]:
    """The version lines of a sparse index file. Raises ValueError when the
    body is not one (an HTML error page from a proxy, say)."""
    entries = []
    for number, line in enumerate(body.decode("utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            if record["name"].lower() != name.lower():
                raise ValueError(f"names {record['name']!r}, not {name!r}")
            entry = IndexEntry(
                version=str(record["vers"]),
                yanked=bool(record["yanked"]),
                cksum=str(record["cksum"]).lower(),
            )
            Version.parse(entry.version)
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"line {number} is not a sparse index entry: {e}") from e
        entries.append(entry)
    if not entries:
        raise ValueError("no version lines")
    return entries


def fetch_index(index_url: str, name: str, timeout: float) -> list[IndexEntry]:
    """A crate's entries from a sparse index (raises as `fetch`, and
    ValueError for a body that is not an index file)."""
    body = fetch(f"{index_url.rstrip('/')}/{index_path(name)}", timeout)
    return parse_index(body, name)


def sha256_hex(data: bytes) -> str:
    """The SHA-256 of `data`, lower-case hex (the index's `cksum`)."""
    return hashlib.sha256(data).hexdigest()


def read_toml(path: Path) -> dict:
    """A TOML file, parsed; errors name the file."""
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise SystemExit(f"{path}: {e}") from e


def vendored_version(vendor_dir: Path) -> str:
    """The version in vendor/h2/Cargo.toml."""
    manifest = read_toml(vendor_dir / "Cargo.toml")
    try:
        name = manifest["package"]["name"]
        version = manifest["package"]["version"]
    except KeyError as e:
        raise SystemExit(f"{vendor_dir / 'Cargo.toml'}: no package {e}") from e
    if name != CRATE:
        raise SystemExit(f"{vendor_dir / 'Cargo.toml'}: package {name!r}, not {CRATE!r}")
    Version.parse(version)
    return version


def pinned_upstream(vendor_dir: Path) -> dict | None:
    """vendor/h2/UPSTREAM.toml (name, version, sha256, vcs_commit), if any."""
    path = vendor_dir / UPSTREAM_FILE
    if not path.exists():
        return None
    record = read_toml(path)
    for key in ("name", "version", "sha256"):
        if not isinstance(record.get(key), str):
            raise SystemExit(f"{path}: no {key} (a string)")
    if not re.fullmatch(r"[0-9a-f]{64}", record["sha256"]):
        raise SystemExit(f"{path}: sha256 is not 64 lower-case hex digits")
    return record


# ---------------------------------------------------------------------------
# Semantic versions and Cargo's version requirements (the `semver` crate's
# rules, which RustSec's `patched` and `unaffected` lists use).

_NUMERIC = re.compile(r"0|[1-9][0-9]*")
_IDENT = re.compile(r"[0-9A-Za-z-]+")


def _prerelease_key(pre: str) -> tuple:
    """Sort key of a pre-release: none sorts after any; numeric identifiers
    before alphanumeric ones; numerically among themselves."""
    if not pre:
        return (1,)
    parts = []
    for ident in pre.split("."):
        if ident.isdigit():
            parts.append((0, int(ident), ""))
        else:
            parts.append((1, 0, ident))
    return (0, tuple(parts))


def _check_pre(pre: str, text: str) -> None:
    for ident in pre.split("."):
        if not _IDENT.fullmatch(ident):
            raise ValueError(f"bad pre-release in version {text!r}")
        if ident.isdigit() and not _NUMERIC.fullmatch(ident):
            raise ValueError(f"leading zero in version {text!r}")


@dataclass(frozen=True)
class Version:
    """A semantic version (build metadata kept but not compared)."""

    major: int
    minor: int
    patch: int
    pre: str = ""

    @staticmethod
    def parse(text: str) -> Version:
        """`MAJOR.MINOR.PATCH[-PRE][+BUILD]`; raises ValueError otherwise."""
        core, _, _build = text.strip().partition("+")
        core, _, pre = core.partition("-")
        numbers = core.split(".")
        if len(numbers) != 3 or not all(_NUMERIC.fullmatch(n) for n in numbers):
            raise ValueError(f"not a semantic version: {text!r}")
        if pre or "-" in text.split("+")[0]:
            _check_pre(pre, text)
        return Version(int(numbers[0]), int(numbers[1]), int(numbers[2]), pre)

    def key(self) -> tuple:
        """Sort key (semver precedence)."""
        return (self.major, self.minor, self.patch, _prerelease_key(self.pre))

    def __str__(self) -> str:
        base = f"{self.major}.{self.minor}.{self.patch}"
        return f"{base}-{self.pre}" if self.pre else base


@dataclass(frozen=True)
class _Comparator:
    op: str
    major: int
    minor: int | None
    patch: int | None
    pre: str


_COMPARATOR = re.compile(
    r"\s*(=|>=|<=|>|<|~|\^)?\s*"
    r"(\d+|\*|x|X)(?:\.(\d+|\*|x|X))?(?:\.(\d+|\*|x|X))?"
    r"(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?\s*"
)


def _parse_comparator(text: str) -> _Comparator | None:
    """One comparator; None for a bare `*` (matches any release)."""
    match = _COMPARATOR.fullmatch(text)
    if not match:
        raise ValueError(f"not a version requirement: {text!r}")
    op, major, minor, patch, pre = match.groups()
    wild = lambda part: part in ("*", "x", "X")  # noqa: E731
    if wild(major):
        if op or minor or patch or pre:
            raise ValueError(f"not a version requirement: {text!r}")
        return None
    if minor is not None and wild(minor):
        if patch is not None and not wild(patch):
            raise ValueError(f"not a version requirement: {text!r}")
        return _Comparator(op or "*", int(major), None, None, "")
    if patch is not None and wild(patch):
        return _Comparator(op or "*", int(major), int(minor), None, "")
    if pre is not None:
        if patch is None:
            raise ValueError(f"pre-release without a patch number: {text!r}")
        _check_pre(pre, text)
    return _Comparator(
        op or "^",
        int(major),
        None if minor is None else int(minor),
        None if patch is None else int(patch),
        pre or "",
    )


def _exact(c: _Comparator, v: Version) -> bool:
    if v.major != c.major:
        return False
    if c.minor is not None and v.minor != c.minor:
        return False
    if c.patch is not None and v.patch != c.patch:
        return False
    return v.pre == c.pre


def _greater(c: _Comparator, v: Version) -> bool:
    if v.major != c.major:
        return v.major > c.major
    if c.minor is None:
        return False
    if v.minor != c.minor:
        return v.minor > c.minor
    if c.patch is None:
        return False
    if v.patch != c.patch:
        return v.patch > c.patch
    return _prerelease_key(v.pre) > _prerelease_key(c.pre)


def _less(c: _Comparator, v: Version) -> bool:
    if v.major != c.major:
        return v.major < c.major
    if c.minor is None:
        return False
    if v.minor != c.minor:
        return v.minor < c.minor
    if c.patch is None:
        return False
    if v.patch != c.patch:
        return v.patch < c.patch
    return _prerelease_key(v.pre) < _prerelease_key(c.pre)


def _tilde(c: _Comparator, v: Version) -> bool:
    if v.major != c.major:
        return False
    if c.minor is not None and v.minor != c.minor:
        return False
    if c.patch is not None and v.patch != c.patch:
        return v.patch > c.patch
    return _prerelease_key(v.pre) >= _prerelease_key(c.pre)


def _caret(c: _Comparator, v: Version) -> bool:
    if v.major != c.major:
        return False
    if c.minor is None:
        return True
    if c.patch is None:
        return v.minor >= c.minor if c.major > 0 else v.minor == c.minor
    if c.major > 0:
        if v.minor != c.minor:
            return v.minor > c.minor
        if v.patch != c.patch:
            return v.patch > c.patch
    elif c.minor > 0:
        if v.minor != c.minor:
            return False
        if v.patch != c.patch:
            return v.patch > c.patch
    elif v.minor != c.minor or v.patch != c.patch:
        return False
    return _prerelease_key(v.pre) >= _prerelease_key(c.pre)


_MATCHERS = {
    "=": _exact,
    "*": _exact,
    ">": _greater,
    ">=": lambda c, v: _exact(c, v) or _greater(c, v),
    "<": _less,
    "<=": lambda c, v: _exact(c, v) or _less(c, v),
    "~": _tilde,
    "^": _caret,
}


def requirement_matches(requirement: str, version: Version) -> bool:
    """Whether `version` meets a Cargo requirement (`>= 0.4.2, < 0.5`,
    `^0.3.24`, `=1.2.3`, `0.4.*`): every comparator, and a pre-release only
    where a comparator names the same MAJOR.MINOR.PATCH with a pre-release
    (the `semver` crate's rule). Raises ValueError for a malformed one."""
    comparators = [_parse_comparator(part) for part in requirement.split(",")]
    comparators = [c for c in comparators if c is not None]
    if not all(_MATCHERS[c.op](c, version) for c in comparators):
        return False
    if not version.pre:
        return True
    return any(
        c.major == version.major and c.minor == version.minor and c.patch == version.patch and c.pre
        for c in comparators
    )
