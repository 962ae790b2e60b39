"""Shared fixtures of the in-process package's tests.

The sidecar process helper is the Python client's own
(clients/python/tests/conftest.py, loaded here under another module name), so
both packages' tests start the real `reqstate serve` the same way.
"""

from __future__ import annotations

import base64
import importlib.util
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from redis_server import RedisServer

HERE = Path(__file__).resolve().parent
PACKAGE_ROOT = HERE.parent
REPO = PACKAGE_ROOT.parent.parent
VECTORS = REPO / "tests" / "vectors"
BIN = Path(os.environ.get("REQSTATE_BIN") or REPO / "target" / "debug" / "reqstate")
TS_CLI = REPO / "clients" / "typescript" / "dist" / "cli.js"
NOW = 1_764_460_800

# The sidecar's Python client (pure Python, in the repository): used from
# its source tree, not installed, so clients/python stays untouched.
sys.path.insert(0, str(REPO / "clients" / "python" / "src"))


def load_module(name: str, path: Path) -> ModuleType:
    """The Python file at `path`, imported as the module `name`."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_example() -> ModuleType:
    """examples/increase_counter_inprocess.py, the servers the mcp tests drive."""
    return load_module("increase_counter_inprocess", PACKAGE_ROOT / "examples" / "increase_counter_inprocess.py")


sidecar_support = load_module("reqstate_sidecar_support", REPO / "clients" / "python" / "tests" / "conftest.py")
Sidecar = sidecar_support.Sidecar
AUTH_TOKEN: str = sidecar_support.AUTH_TOKEN


def secret(seed: int) -> str:
    """A 32-byte secret as base64, different per seed."""
    return base64.b64encode(bytes([seed]) * 32).decode()


def key_toml(key_id: int, algorithm: str, status: str, seed: int | None = None) -> str:
    return (
        f'\n[[key]]\nid = {key_id}\nalgorithm = "{algorithm}"\nstatus = "{status}"\n'
        f'secret = "{secret(key_id if seed is None else seed)}"\n'
    )


def write_private(path: Path, text: str, mode: int = 0o600) -> Path:
    """Writes a file with `mode`, replacing it atomically (as an operator's tool does)."""
    tmp = path.with_name(path.name + ".writing")
    tmp.write_text(text, encoding="utf-8")
    tmp.chmod(mode)
    tmp.rename(path)
    return path


@pytest.fixture
def tmp_dir() -> Iterator[Path]:
    """A private temporary directory (mode 0700, as the keyring checks want)."""
    with tempfile.TemporaryDirectory(prefix="rqs-py-") as directory:
        yield Path(directory)


def run_cli(argv: list[str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """Runs a command line (no REQSTATE_* from the environment)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("REQSTATE_")}
    return subprocess.run(argv, input=stdin, capture_output=True, text=True, env=env, timeout=60, check=False)


def need(path: Path, how: str) -> Path:
    """A file the tests need: fails (never skips) when it is missing."""
    if not path.exists():
        raise AssertionError(f"{path} is missing: {how}")
    return path


@pytest.fixture(scope="session")
def redis_session() -> Iterator[RedisServer]:
    """One real redis-server for the session (tests/redis_server.py)."""
    with RedisServer() as started:
        yield started


@pytest.fixture
def redis_server(redis_session: RedisServer) -> RedisServer:
    """The session's redis-server, emptied, unpaused and writable for each test."""
    redis_session.admin.execute_command("CLIENT", "UNPAUSE")
    redis_session.admin.config_set("maxmemory", 0)
    redis_session.admin.flushall()
    return redis_session
