"""The Python snippets of clients/python/README.md run as written."""

from __future__ import annotations

import re
from typing import Any

import anyio
import pytest
from conftest import AUTH_TOKEN, PACKAGE_ROOT, Sidecar
from mcp import Client, MCPError
from mcp.server.mcpserver import MCPServer
from mcp_types import ElicitRequestParams, ElicitResult, InputRequiredResult, TextContent

from reqstate_client.mcp import SidecarCodec, is_single_use_token


def _snippets() -> list[str]:
    text = (PACKAGE_ROOT / "README.md").read_text(encoding="utf-8")
    return re.findall(r"^```python\n(.*?)^```$", text, re.MULTILINE | re.DOTALL)


def test_readme_has_the_snippets() -> None:
    snippets = _snippets()
    assert len(snippets) == 4
    assert "Client(" in snippets[0]
    assert "single_use=True" in snippets[1] and "consume=True" in snippets[1]
    assert "SidecarCodec(" in snippets[2]
    assert "single_use(" in snippets[3] and "@server.tool" in snippets[3]


def _run(index: int, namespace: dict[str, Any]) -> None:
    exec(compile(_snippets()[index], f"README.md snippet {index}", "exec"), namespace)


@pytest.mark.parametrize("index", [0, 1])
def test_readme_client_snippet_runs(sidecar: Sidecar, monkeypatch: pytest.MonkeyPatch, index: int) -> None:
    monkeypatch.setenv("REQSTATE_TARGET", sidecar.unix_target)
    monkeypatch.setenv("REQSTATE_TOKEN", AUTH_TOKEN)
    _run(index, {"__name__": "readme"})


def test_readme_mcp_snippets_run(sidecar: Sidecar, monkeypatch: pytest.MonkeyPatch) -> None:
    """The codec snippet, then the single-use handler on its server, driven by the SDK's client."""
    monkeypatch.setenv("REQSTATE_TARGET", sidecar.unix_target)
    monkeypatch.setenv("REQSTATE_TOKEN", AUTH_TOKEN)
    namespace: dict[str, Any] = {"__name__": "readme"}
    _run(2, namespace)
    codec = namespace["codec"]
    assert isinstance(codec, SidecarCodec)
    token = codec.seal(b"payload")
    assert codec.unseal(token) == b"payload"

    _run(3, namespace)
    server = namespace["server"]
    assert isinstance(server, MCPServer)

    async def answer(context: Any, params: ElicitRequestParams) -> ElicitResult:
        return ElicitResult(action="accept", content={"ok": True})

    async def flow() -> None:
        async with Client(server, elicitation_callback=answer) as client:
            result = await client.call_tool("redeem-coupon", {"coupon": "SPRING"})
            assert not result.is_error and len(result.content) == 1
            assert isinstance(result.content[0], TextContent) and result.content[0].text == "redeemed"
            first = await client.session.call_tool("redeem-coupon", {"coupon": "AUTUMN"}, allow_input_required=True)
            assert isinstance(first, InputRequiredResult) and first.request_state is not None
            assert is_single_use_token(first.request_state)
            state = first.request_state

            async def retry() -> object:
                return await client.session.call_tool(
                    "redeem-coupon",
                    {"coupon": "AUTUMN"},
                    input_responses={"ok": ElicitResult(action="accept", content={"ok": True})},
                    request_state=state,
                    allow_input_required=True,
                )

            await retry()
            with pytest.raises(MCPError) as replayed:
                await retry()
            assert replayed.value.error.code == -32602

    anyio.run(flow)
    assert namespace["redeemed"] == ["SPRING", "AUTUMN"]
    codec.close()
