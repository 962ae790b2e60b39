"""The caller a `RequestStateBoundary` binds (tests/vectors/mcp_principals.json,
the same strings as the TypeScript drop-in) and how a refusal writes the
client's tool name (tests/vectors/mcp_log_names.json), unit by unit and on
the real `mcp` SDK."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import VECTORS, key_toml, load_example, write_private
from mcp import Client, MCPError
from mcp.server.auth.middleware.auth_context import auth_context_var
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.request_state import authenticated_principal
from mcp_types import INVALID_PARAMS, ElicitResult, InputRequiredResult

import reqstate.mcp
from reqstate import Keyring
from reqstate.mcp import NoSubject, RequestStateBoundary, default_principal, log_name

PRINCIPALS: dict[str, Any] = json.loads((VECTORS / "mcp_principals.json").read_text(encoding="utf-8"))
LOG_NAMES: dict[str, Any] = json.loads((VECTORS / "mcp_log_names.json").read_text(encoding="utf-8"))
TOOL = "increase-counter"
example = load_example()


def token_of(auth: dict[str, Any]) -> AccessToken:
    claims = {"iss": auth["issuer"]} if "issuer" in auth else None
    return AccessToken(
        token="t", client_id=auth["client_id"], scopes=[], subject=auth.get("subject"), claims=claims
    )


@contextmanager
def authenticated(auth: dict[str, Any] | None) -> Iterator[None]:
    """The SDK's own auth context, as its bearer middleware sets it."""
    reset = auth_context_var.set(None if auth is None else AuthenticatedUser(token_of(auth)))
    try:
        yield
    finally:
        auth_context_var.reset(reset)


def test_every_default_principal_vector() -> None:
    assert len(PRINCIPALS["defaults"]) >= 12
    for case in PRINCIPALS["defaults"]:
        with authenticated(case["auth"]):
            if "expect_fail" in case:
                assert case["expect_fail"] == "no_subject"
                with pytest.raises(NoSubject) as refused:
                    default_principal(None)  # type: ignore[arg-type]
                assert refused.value.reason == "invalid_argument"
                assert "names no subject" in refused.value.message and "principal=" in refused.value.message
                continue
            got = default_principal(None)  # type: ignore[arg-type]
            assert got == case["principal"], case["name"]
            if case["auth"] is not None:
                # Byte for byte the SDK's own binding when the subject is known.
                assert got == authenticated_principal(None), case["name"]  # type: ignore[arg-type]
            boundary = RequestStateBoundary(Keyring.ephemeral("hmac-sha256"), audience="a")
            assert boundary._principal(None) == case["principal"], case["name"]  # type: ignore[arg-type]


def test_every_custom_principal_vector() -> None:
    assert len(PRINCIPALS["custom"]) >= 4
    defaults = {c["principal"] for c in PRINCIPALS["defaults"] if "principal" in c and c["auth"] is not None}
    for case in PRINCIPALS["custom"]:
        returned: str | None = case["returned"]

        def chosen(ctx: Any, returned: str | None = returned) -> str | None:
            return returned

        boundary = RequestStateBoundary(Keyring.ephemeral("hmac-sha256"), audience="a", principal=chosen)
        got = boundary._principal(None)  # type: ignore[arg-type]
        assert got == case["principal"], case["name"]
        assert got not in defaults, case["name"]
    with pytest.raises(reqstate.InvalidArgument, match="principal\\(\\) returned int"):
        RequestStateBoundary(Keyring.ephemeral("hmac-sha256"), audience="a", principal=lambda ctx: 7)._principal(  # type: ignore[arg-type, return-value]
            None  # type: ignore[arg-type]
        )


ALICE = {"client_id": "app-1", "issuer": "https://auth.example", "subject": "alice"}
BOB = {"client_id": "app-1", "issuer": "https://auth.example", "subject": "bob"}
NO_SUBJECT = {"client_id": "app-1", "issuer": "https://auth.example"}


def server_of(tmp_dir: Path) -> Any:
    path = write_private(tmp_dir / "keyring.toml", "version = 1\n" + key_toml(1, "xchacha20-poly1305", "primary"))
    return example.build_bound_server(Keyring.from_file(path))


async def call(server: Any, auth: dict[str, Any] | None, state: str | None, answers: Any = None) -> Any:
    # The server's tasks copy the context when the client starts them: the
    # access token is the caller's for the whole session.
    with authenticated(auth):
        async with Client(server) as client:
            try:
                return await client.session.call_tool(
                    TOOL, {"current": 10}, input_responses=answers, request_state=state, allow_input_required=True
                )
            except MCPError as error:  # raised here, not out of the client's task group
                return error


def refusal_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "reqstate" and "refused" in r.getMessage()]


def test_another_user_of_the_same_client_cannot_use_a_round(tmp_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="reqstate")
    server = server_of(tmp_dir)
    answers = {"amount": ElicitResult(action="accept", content={"amount": 5})}

    async def go() -> None:
        first = await call(server, ALICE, None)
        assert isinstance(first, InputRequiredResult) and first.request_state is not None
        state = first.request_state
        assert isinstance(await call(server, ALICE, state, answers), InputRequiredResult)  # alice goes on
        for other in (BOB, None, NO_SUBJECT):
            refused = await call(server, other, state, answers)
            assert isinstance(refused, MCPError)
            assert refused.error.code == INVALID_PARAMS
            assert refused.error.message == "Invalid or expired requestState"

    anyio.run(go)
    lines = refusal_lines(caplog)
    assert len(lines) == 3
    assert lines[0].startswith(f'reqstate refused tools/call "{TOOL}": authentication_failed: ')
    assert lines[2].startswith(f'reqstate refused tools/call "{TOOL}": invalid_argument: the access token names no subject')
    assert not any("alice" in line or "bob" in line for line in lines)


def test_a_token_without_a_subject_is_refused_not_bound_to_its_client(
    tmp_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="reqstate")
    server = server_of(tmp_dir)

    async def go() -> None:
        refused = await call(server, NO_SUBJECT, None)
        assert isinstance(refused, MCPError)
        assert refused.error.code == INVALID_PARAMS
        assert "the access token names no subject" in refused.error.message
        # No authentication at all is its own principal, and works.
        assert isinstance(await call(server, None, None), InputRequiredResult)

    anyio.run(go)
    minted = [r.getMessage() for r in caplog.records if r.name == "reqstate" and "could not mint" in r.getMessage()]
    assert len(minted) == 1 and "names no subject" in minted[0] and "principal=" in minted[0]


# ------------------------------------------------------------------ log names


def test_every_log_name_vector() -> None:
    assert len(LOG_NAMES["names"]) >= 11
    for case in LOG_NAMES["names"]:
        if "repeat" in case:
            name = case["repeat"]["character"] * case["repeat"]["count"]
        else:
            name = case["input"]
        got = log_name(name)
        assert got == case["logged"], case["name"]
        assert all(0x20 <= ord(c) <= 0x7E for c in got), case["name"]


FORGED = 'x\nWARNING reqstate refused tools/call "y": forged'


def test_a_forged_tool_name_is_one_quoted_log_line(tmp_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="reqstate")
    hooked: list[reqstate.mcp.Refusal] = []
    path = write_private(tmp_dir / "keyring.toml", "version = 1\n" + key_toml(1, "xchacha20-poly1305", "primary"))
    server = example.build_bound_server(Keyring.from_file(path), on_refusal=hooked.append)

    async def go() -> None:
        async with Client(server) as client:
            with pytest.raises(MCPError):
                await client.session.call_tool(
                    FORGED, {}, request_state="not-a-token", allow_input_required=True
                )

    anyio.run(go)
    records = [r for r in caplog.records if r.name == "reqstate"]
    assert len(records) == 1
    text = logging.Formatter("%(levelname)s %(message)s").format(records[0])
    assert len(text.splitlines()) == 1 and text.startswith("WARNING reqstate refused tools/call ")
    quoted = '"x\\u000aWARNING reqstate refused tools/call \\"y\\": forged"'
    assert records[0].getMessage() == (
        f"reqstate refused tools/call {quoted}: malformed: the requestState of tools/call {quoted} is not a reqstate token"
    )
    assert len(hooked) == 1 and hooked[0].tool == FORGED and "\n" not in hooked[0].message
