"""One `pip install` from the repository gives a working package: a fresh
virtualenv, `pip install "<checkout>/crates/reqstate-python[mcp]"` (maturin's
PEP 517 backend builds the native module from the sources; the SDK comes from
PyPI), then the README's quick start, extracted from the README, run with that
virtualenv's interpreter as a stdio server and driven to its answer by the
official SDK's client (this test's own virtualenv).

Needs cargo and PyPI, as the README says. The Rust build goes to
$CARGO_TARGET_DIR (default the repository's target/), so a second run is
incremental."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from conftest import PACKAGE_ROOT, key_toml, write_private
from mcp import Client, StdioServerParameters
from mcp_types import ElicitRequestParams, ElicitResult, TextContent

QUICK_START = re.compile(r"<!-- quick-start: begin -->\n```python\n(.*?)```\n<!-- quick-start: end -->", re.S)


def quick_start() -> str:
    found = QUICK_START.findall((PACKAGE_ROOT / "README.md").read_text(encoding="utf-8"))
    assert len(found) == 1, "README.md must have exactly one quick-start block"
    code: str = found[0]
    assert "reqstate.mcp.bind(MCPServer(" in code
    return code


def test_pip_install_from_the_checkout_runs_the_readme_quick_start(tmp_dir: Path) -> None:
    venv = tmp_dir / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)  # nothing of this checkout but what pip installs
    print(f"test_install: pip install {PACKAGE_ROOT}[mcp] into {venv}", file=sys.stderr)
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", f"{PACKAGE_ROOT}[mcp]"],
        check=True,
        timeout=1800,
        env=env,
        cwd=tmp_dir,
    )
    where = subprocess.run(
        [str(python), "-c", "import reqstate, reqstate.mcp, mcp; print(reqstate.__file__)"],
        capture_output=True, text=True, check=True, env=env, cwd=tmp_dir,
    ).stdout.strip()
    assert where.startswith(str(venv)), where  # the installed package, not the sources

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
