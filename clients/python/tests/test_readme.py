"""The Python snippets of clients/python/README.md run as written."""

from __future__ import annotations

import re

import pytest
from conftest import AUTH_TOKEN, PACKAGE_ROOT, Sidecar

from reqstate_client.mcp import SidecarCodec


def _snippets() -> list[str]:
    text = (PACKAGE_ROOT / "README.md").read_text(encoding="utf-8")
    return re.findall(r"^```python\n(.*?)^```$", text, re.MULTILINE | re.DOTALL)


def test_readme_has_the_snippets() -> None:
    snippets = _snippets()
    assert len(snippets) == 2
    assert "Client(" in snippets[0] and "SidecarCodec(" in snippets[1]


@pytest.mark.parametrize("index", [0, 1])
def test_readme_snippet_runs(sidecar: Sidecar, monkeypatch: pytest.MonkeyPatch, index: int) -> None:
    monkeypatch.setenv("REQSTATE_TARGET", sidecar.unix_target)
    monkeypatch.setenv("REQSTATE_TOKEN", AUTH_TOKEN)
    namespace: dict[str, object] = {"__name__": "readme"}
    exec(compile(_snippets()[index], f"README.md snippet {index}", "exec"), namespace)
    if index == 1:
        codec = namespace["codec"]
        assert isinstance(codec, SidecarCodec)
        token = codec.seal(b"payload")
        assert codec.unseal(token) == b"payload"
        codec.close()
