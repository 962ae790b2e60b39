"""One `pip install` from the repository gives a working package: a fresh
virtualenv, `pip install "<checkout>/crates/reqstate-python[mcp]"` (maturin's
PEP 517 backend builds the native module from the sources; the SDK comes from
PyPI), then the README's quick start, extracted from the README, run with that
virtualenv's interpreter as a stdio server and driven to its answer by the
official SDK's client (this test's own virtualenv).

Needs cargo and PyPI, as the README says. The Rust build goes where a
user's goes: the package's own crates/reqstate-python/target (its
.cargo/config.toml; CARGO_TARGET_DIR is left out of pip's environment), so a
second run is incremental; and it runs while the test holds cargo's lock on
the workspace's target/ (as a `cargo build --release` would): a build that
waited on it fails the test at cargo's "Blocking waiting for file lock"."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from conftest import PACKAGE_ROOT, REPO, key_toml, write_private
from mcp import Client, StdioServerParameters
from mcp_types import ElicitRequestParams, ElicitResult, TextContent

QUICK_START = re.compile(r"<!-- quick-start: begin -->\n```python\n(.*?)```\n<!-- quick-start: end -->", re.S)


def quick_start() -> str:
    found = QUICK_START.findall((PACKAGE_ROOT / "README.md").read_text(encoding="utf-8"))
    assert len(found) == 1, "README.md must have exactly one quick-start block"
    code: str = found[0]
    assert "reqstate.mcp.bind(MCPServer(" in code
    return code


def test_the_package_has_a_target_directory_of_its_own() -> None:
    """cargo, run in the package's directory as pip runs it, builds in
    crates/reqstate-python/target, not in the workspace's target/."""
    env = {k: v for k, v in os.environ.items() if k != "CARGO_TARGET_DIR"}
    meta = subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--no-deps"],
        capture_output=True, text=True, check=True, env=env, cwd=PACKAGE_ROOT, timeout=120,
    )  # fmt: skip
    assert json.loads(meta.stdout)["target_directory"] == str(PACKAGE_ROOT / "target")


@contextlib.contextmanager
def workspace_build_lock() -> Iterator[None]:
    """Holds cargo's lock on the workspace's release build directory
    (<repo>/target/release/.cargo-lock), as a `cargo build --release` of the
    workspace does; one already held by such a build is as good."""
    release = REPO / "target" / "release"
    release.mkdir(parents=True, exist_ok=True)
    with open(release / ".cargo-lock", "a+b") as lock:
        with contextlib.suppress(BlockingIOError):
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        yield


def pip_install_without_waiting(python: Path, target: str, env: dict[str, str], cwd: Path) -> None:
    """`pip install -v target`, failed the moment cargo says it waits on a lock."""
    argv = [str(python), "-m", "pip", "install", "-v", "--disable-pip-version-check", target]
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=cwd) as pip:
        assert pip.stdout is not None
        tail: list[str] = []
        for line in pip.stdout:
            tail = [*tail[-40:], line]
            # "... on artifact directory" / "... on build directory" (the
            # package cache's lock, held briefly by any cargo, is not ours).
            if "Blocking waiting for file lock" in line and "package cache" not in line:
                pip.kill()
                raise AssertionError(f"the package build waits on a cargo lock: {line.strip()}")
        assert pip.wait(timeout=1800) == 0, "".join(tail)


def elf_section_names(path: Path) -> list[str]:
    """The section names of a 64-bit little-endian ELF file."""
    data = path.read_bytes()
    assert data[:4] == b"\x7fELF" and data[4] == 2 and data[5] == 1, "not a 64-bit little-endian ELF"
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    strtab_offset = struct.unpack_from("<Q", data, shoff + shstrndx * shentsize + 0x18)[0]
    names = []
    for i in range(shnum):
        name = struct.unpack_from("<I", data, shoff + i * shentsize)[0]
        end = data.index(b"\0", strtab_offset + name)
        names.append(data[strtab_offset + name : end].decode())
    return names


def test_pip_install_from_the_checkout_runs_the_readme_quick_start(tmp_dir: Path) -> None:
    venv = tmp_dir / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)  # nothing of this checkout but what pip installs
    env.pop("CARGO_TARGET_DIR", None)  # where a user's build goes
    print(f"test_install: pip install {PACKAGE_ROOT}[mcp] into {venv}", file=sys.stderr)
    with workspace_build_lock():
        pip_install_without_waiting(python, f"{PACKAGE_ROOT}[mcp]", env, tmp_dir)
    where = subprocess.run(
        [str(python), "-c", "import reqstate, reqstate.mcp, mcp; print(reqstate.__file__)"],
        capture_output=True, text=True, check=True, env=env, cwd=tmp_dir,
    ).stdout.strip()
    assert where.startswith(str(venv)), where  # the installed package, not the sources
    # pyproject's `strip = true`: no symbol table and no debug info in the
    # module (the release profile alone keeps the symbols).
    (native,) = Path(where).parent.glob("_native*.so")
    sections = elf_section_names(native)
    assert ".dynsym" in sections and ".symtab" not in sections, sections
    assert not [s for s in sections if s.startswith(".debug")], sections

    server = tmp_dir / "quick_start.py"
    server.write_text(quick_start(), encoding="utf-8")
    keyring = write_private(tmp_dir / "keyring.toml", "version = 1\n" + key_toml(1, "xchacha20-poly1305", "primary"))
    params = StdioServerParameters(
        command=str(python), args=[str(server)], env={**env, "REQSTATE_KEYRING": str(keyring)}, cwd=str(tmp_dir)
    )
    asked: list[str] = []

    async def answer(context: Any, params: ElicitRequestParams) -> ElicitResult:
        asked.append(params.message)
        return ElicitResult(action="accept", content={"amount": 5})

    async def go() -> tuple[str, str]:
        with anyio.fail_after(60):
            async with Client(params, elicitation_callback=answer) as client:
                first = await client.session.call_tool(
                    "increase_counter", {"current": 10}, allow_input_required=True
                )
                assert isinstance(first, types.InputRequiredResult) and first.request_state is not None
                result = await client.call_tool("increase_counter", {"current": 10})
                assert not result.is_error and isinstance(result.content[0], TextContent)
                return first.request_state, result.content[0].text

    state, text = anyio.run(go)
    assert text == "15" and asked == ["Increase 10 by?"]
    assert len(state) < 160  # the compact token, not the SDK's envelope (about 300)
