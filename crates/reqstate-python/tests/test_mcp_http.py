"""The compact boundary over real HTTP: the conformance server
(tests/mcp-conformance/servers/python/server.py, `MCPServer` with
`reqstate.mcp.bind`) as its own process, stateless Streamable HTTP, spoken
to by the official SDK's client with `Authorization: Bearer <name>` as the
principal: a flow completes for its caller, the same state presented by
another caller or with other arguments is refused with -32602 and one
`reqstate refused ...` line on the server's stderr."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from conftest import REPO, key_toml
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client
from mcp_types import INVALID_PARAMS, ElicitRequestParams, ElicitResult, InputRequiredResult, TextContent

SERVER = REPO / "tests" / "mcp-conformance" / "servers" / "python" / "server.py"
TOOL = "reqstate_adversarial"
CONFIRM: dict[str, types.InputResponse] = {"confirm": ElicitResult(action="accept", content={"ok": True})}


class Running:
    def __init__(self, process: subprocess.Popen[str], url: str, log: Path) -> None:
        self.process, self.url, self.log = process, url, log

    def refusals(self) -> list[str]:
        return [line for line in self.log.read_text().splitlines() if line.startswith("reqstate refused ")]


@pytest.fixture
def server(tmp_dir: Path) -> Iterator[Running]:
    log = tmp_dir / "server.log"
    env = {**os.environ, "REQSTATE_KEYS": "version = 1\n" + key_toml(1, "xchacha20-poly1305", "primary"), "PORT": "0"}
    with open(log, "w") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-u", str(SERVER)], stdout=subprocess.PIPE, stderr=stderr, text=True, env=env
        )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # blocks until the server prints it (or exits)
        assert line.startswith("listening http://127.0.0.1:"), (line, log.read_text())
        yield Running(process, line.split()[1], log)
    finally:
        process.terminate()
        process.wait(timeout=10)


def client(url: str, principal: str | None) -> Client:
    headers = {"authorization": f"Bearer {principal}"} if principal else {}
    return Client(streamable_http_client(url, http_client=httpx2.AsyncClient(headers=headers, timeout=30)))


async def round_one(url: str, principal: str | None, n: int) -> str:
    async with client(url, principal) as c:
        first = await c.session.call_tool(TOOL, {"n": n}, allow_input_required=True)
        assert isinstance(first, InputRequiredResult) and first.request_state is not None
        assert set(first.input_requests or {}) == {"confirm"}
        return first.request_state


async def round_two(url: str, principal: str | None, n: int, state: str) -> Any:
    """The result, or the MCPError it raised (caught inside the client's
    context, which would wrap it in an exception group)."""
    async with client(url, principal) as c:
        try:
            return await c.session.call_tool(
                TOOL, {"n": n}, input_responses=CONFIRM, request_state=state, allow_input_required=True
            )
        except MCPError as error:
            return error


def text_of(result: Any) -> str:
    assert isinstance(result, types.CallToolResult) and not result.is_error, result
    assert isinstance(result.content[0], TextContent)
    return result.content[0].text


async def refused(call: Any) -> None:
    error = await call
    assert isinstance(error, MCPError), error
    assert error.error.code == INVALID_PARAMS
    assert error.error.message == "Invalid or expired requestState"


def test_principal_and_arguments_are_bound_over_http(server: Running) -> None:
    async def go() -> None:
        state = await round_one(server.url, "alice", 7)
        assert len(state) < 110  # 108 for XChaCha's reference claims: this one is smaller
        await refused(round_two(server.url, "mallory", 7, state))
        await refused(round_two(server.url, None, 7, state))
        await refused(round_two(server.url, "alice", 8, state))
        assert text_of(await round_two(server.url, "alice", 7, state)) == "n=7 confirmed"
        # The SDK's own input-required loop, answering the elicitation itself.
        answered: list[str] = []

        async def answer(context: Any, params: ElicitRequestParams) -> ElicitResult:
            answered.append(params.message)
            return ElicitResult(action="accept", content={"ok": True})

        async with Client(
            streamable_http_client(server.url, http_client=httpx2.AsyncClient(headers={"authorization": "Bearer bob"})),
            elicitation_callback=answer,
        ) as c:
            assert text_of(await c.call_tool(TOOL, {"n": 3})) == "n=3 confirmed"
        assert answered == ["Confirm n=3?"]

    anyio.run(go)
    deadline = time.monotonic() + 5
    while len(server.refusals()) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    lines = server.refusals()
    assert lines == [f'reqstate refused tools/call "{TOOL}": authentication_failed: ' + lines[0].split(": ", 2)[2]] * 3
    assert "alice" not in "".join(lines) and "mallory" not in "".join(lines)
