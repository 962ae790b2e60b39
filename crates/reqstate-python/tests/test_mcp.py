"""The official `mcp` 2.3.0 SDK's own client drives `increase-counter` to 15
through the in-process package, both ways (the SDK's envelope sealed by
`InProcessCodec`; reqstate's compact step-bound tokens), with tampered,
re-argued and expired states answered -32602, and a key rotation between
rounds applied by reloading the keyring file, the server never restarted."""

from __future__ import annotations

import base64
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import AUTH_TOKEN, PACKAGE_ROOT, Sidecar, key_toml, load_example, write_private
from mcp import Client, MCPError, StdioServerParameters
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.request_state import InvalidRequestState, RequestStateSecurity
from mcp_types import INVALID_PARAMS, CallToolResult, ElicitRequestParams, ElicitResult, InputRequiredResult, TextContent

from reqstate import Codec, InvalidArgument, Keyring, MintRefused
from reqstate.mcp import DEFAULT_AAD, MAX_TOKEN_LEN, CompactStates, InProcessCodec

TOOL = "increase-counter"
ARGS = {"current": 10}
XCHACHA = "xchacha20-poly1305"


example = load_example()


def keyring_file(directory: Path, *keys: tuple[int, str]) -> Path:
    return write_private(directory / "keyring.toml", "version = 1\n" + "".join(key_toml(i, XCHACHA, s) for i, s in keys))


class Answers:
    """The user: answers the amount and the confirmation; `between_rounds`
    runs after round 1's state was minted, before the client retries."""

    def __init__(self, amount: int = 5, between_rounds: Callable[[], None] | None = None) -> None:
        self.amount = amount
        self.between_rounds = between_rounds
        self.asked: list[str] = []

    async def __call__(self, context: Any, params: ElicitRequestParams) -> ElicitResult:
        self.asked.append(params.message)
        if "how much" in params.message:
            if self.between_rounds is not None:
                self.between_rounds()
            return ElicitResult(action="accept", content={"amount": self.amount})
        return ElicitResult(action="accept", content={"confirm": True})


class RecordingCodec(InProcessCodec):
    """InProcessCodec that remembers the key of every seal and unseal."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sealed: list[tuple[str, int]] = []
        self.opened: list[int] = []

    def seal(self, payload: bytes) -> str:
        token = super().seal(payload)
        assert self.last_key_id is not None
        self.sealed.append((token, self.last_key_id))
        return token

    def unseal(self, token: str) -> bytes:
        payload = super().unseal(token)
        assert self.last_key_id is not None
        self.opened.append(self.last_key_id)
        return payload


def _text(result: CallToolResult) -> str:
    assert not result.is_error, result
    assert len(result.content) == 1 and isinstance(result.content[0], TextContent)
    return result.content[0].text


def run(fn: Callable[[], Any]) -> Any:
    return anyio.run(fn)


def flow(server: Any, answers: Answers) -> str:
    async def go() -> str:
        async with Client(server, elicitation_callback=answers) as client:
            return _text(await client.call_tool(TOOL, ARGS))

    result: str = run(go)
    return result


async def first_round(client: Client, args: dict[str, Any] = ARGS) -> str:
    first = await client.session.call_tool(TOOL, args, allow_input_required=True)
    assert isinstance(first, InputRequiredResult) and first.request_state is not None
    return first.request_state


async def answer_amount(client: Client, state: str, args: dict[str, Any] = ARGS) -> Any:
    return await client.session.call_tool(
        TOOL,
        args,
        input_responses={"amount": ElicitResult(action="accept", content={"amount": 5})},
        request_state=state,
        allow_input_required=True,
    )


async def answer_confirm(client: Client, state: str, args: dict[str, Any] = ARGS) -> Any:
    return await client.session.call_tool(
        TOOL,
        args,
        input_responses={"confirm": ElicitResult(action="accept", content={"confirm": True})},
        request_state=state,
        allow_input_required=True,
    )


async def refused(call: Any) -> None:
    with pytest.raises(MCPError) as error:
        await call
    assert error.value.error.code == INVALID_PARAMS == -32602
    assert error.value.error.message == "Invalid or expired requestState"


def tampered(state: str) -> list[str]:
    flipped = state[:-4] + ("A" if state[-4] != "A" else "B") + state[-3:]
    return [state + "-TAMPERED", flipped, state[:-10], "garbage"]


# ------------------------------------------------------- 1. InProcessCodec


def test_sdk_codec_increase_counter_to_15(tmp_dir: Path) -> None:
    codec = RecordingCodec(Codec(Keyring.from_file(keyring_file(tmp_dir, (1, "primary")))))
    answers = Answers()
    assert flow(example.build_sdk_server(codec), answers) == "15"
    assert answers.asked == ["Increase 10 by how much?", "Increase 10 by 5?"]
    assert [k for _, k in codec.sealed] == [1, 1] and codec.opened == [1, 1]


def test_sdk_codec_refuses_tampered_reargued_and_expired_states(tmp_dir: Path) -> None:
    codec = Codec(Keyring.from_file(keyring_file(tmp_dir, (1, "primary"))))
    server = example.build_sdk_server(codec)
    short_lived = example.build_sdk_server(codec, ttl=0.5)

    async def go() -> None:
        async with Client(server) as client:
            state = await first_round(client)
            for bad in tampered(state):
                await refused(answer_amount(client, bad))
            await refused(answer_amount(client, state, {"current": 11}))  # changed arguments
            assert isinstance(await answer_amount(client, state), InputRequiredResult)  # still good
        async with Client(short_lived) as client:
            state = await first_round(client)
            await anyio.sleep(1.0)
            await refused(answer_amount(client, state))  # expired

    run(go)


def test_sdk_codec_rotation_between_rounds_by_reload(tmp_dir: Path) -> None:
    """Key 2 added (active), reloaded; promoted, reloaded; the flow goes on:
    key 1 opens round 1's state, key 2 seals round 2's. Then key 1 retired:
    round 1's state is refused at once. One server throughout."""
    path = keyring_file(tmp_dir, (1, "primary"))
    keyring = Keyring.from_file(path)
    codec = RecordingCodec(Codec(keyring))
    server = example.build_sdk_server(codec)

    def rotate() -> None:
        keyring_file(tmp_dir, (1, "primary"), (2, "active"))
        assert keyring.reload() is True
        keyring_file(tmp_dir, (1, "active"), (2, "primary"))
        assert keyring.reload() is True and keyring.primary_key_id == 2

    assert flow(server, Answers(between_rounds=rotate)) == "15"
    assert [k for _, k in codec.sealed] == [1, 2] and codec.opened == [1, 2]

    keyring_file(tmp_dir, (1, "retired"), (2, "primary"))
    assert keyring.reload() is True
    round_one = codec.sealed[0][0]
    with pytest.raises(InvalidRequestState, match="retired_key"):
        codec.unseal(round_one)

    async def replay() -> None:
        async with Client(server) as client:
            await refused(answer_amount(client, round_one))

    run(replay)


def test_in_process_and_sidecar_codecs_open_each_others_states() -> None:
    """Same keyring file, same associated data: a fleet can mix the two."""
    from reqstate_client.mcp import DEFAULT_AAD as SIDECAR_AAD
    from reqstate_client.mcp import SidecarCodec

    assert SIDECAR_AAD == DEFAULT_AAD
    sidecar = Sidecar()
    try:
        local = InProcessCodec(Keyring.from_file(sidecar.keyring))
        with SidecarCodec(sidecar.unix_target, AUTH_TOKEN) as remote:
            assert local.unseal(remote.seal(b'{"v":1}')) == b'{"v":1}'
            assert remote.unseal(local.seal(b'{"v":2}')) == b'{"v":2}'
            with pytest.raises(InvalidRequestState):
                local.unseal(remote.seal(b"x") + "-TAMPERED")
        with pytest.raises(InvalidRequestState, match="authentication_failed"):
            InProcessCodec(Keyring.from_file(sidecar.keyring), aad=b"other").unseal(local.seal(b"x"))
        with pytest.raises(InvalidRequestState):
            local.unseal("")
        with pytest.raises(TypeError):
            InProcessCodec("not a codec")  # type: ignore[arg-type]  # deliberately wrong: refused at run time
    finally:
        sidecar.stop()


# ------------------------------------------------------- 2. compact tokens


def test_compact_increase_counter_to_15(tmp_dir: Path) -> None:
    commits: list[tuple[int, int]] = []
    codec = Codec(Keyring.from_file(keyring_file(tmp_dir, (1, "primary"))))
    server = example.build_compact_server(codec, on_commit=lambda c, a: commits.append((c, a)))
    answers = Answers()
    assert flow(server, answers) == "15"
    assert answers.asked == ["Increase 10 by how much?", "Increase 10 by 5?"] and commits == [(10, 5)]


def test_compact_tokens_are_small_and_step_bound(tmp_dir: Path) -> None:
    codec = Codec(Keyring.from_file(keyring_file(tmp_dir, (1, "primary"))), clock_leeway=0)
    server = example.build_compact_server(codec)
    short_lived = example.build_compact_server(codec, ttl=1)

    async def go() -> None:
        async with Client(server) as client:
            state = await first_round(client)
            assert len(state) < 100  # the SDK's envelope is about 300
            second = await answer_amount(client, state)
            assert isinstance(second, InputRequiredResult) and second.request_state is not None
            confirm_state = second.request_state
            assert len(confirm_state) <= 108
            verified = CompactStates(codec, "counter-server").open(confirm_state, TOOL, ARGS, expected_step="confirm")
            assert verified is not None and verified.state == {"current": 10, "amount": 5}
            for bad in tampered(state):
                await refused(answer_amount(client, bad))
            await refused(answer_amount(client, state, {"current": 11}))  # changed arguments
            await refused(answer_confirm(client, state))  # round 1's token answering round 2: wrong step
            await refused(answer_amount(client, confirm_state))  # and the reverse
            assert _text(await answer_confirm(client, confirm_state)) == "15"
        async with Client(short_lived) as client:
            state = await first_round(client)
            await anyio.sleep(2.1)
            await refused(answer_amount(client, state))  # expired

    run(go)
    # Another server (audience) with the same keys refuses the state.
    other = example.build_compact_server(codec, name="another-server")

    async def elsewhere() -> None:
        async with Client(server) as client:
            state = await first_round(client)
        async with Client(other) as client:
            await refused(answer_amount(client, state))

    run(elsewhere)


def key_of(token: str) -> int:
    """The key id a compact token names (its second byte, for ids below 24)."""
    return base64.urlsafe_b64decode(token[:4])[1]


def test_compact_rotation_between_rounds_by_auto_reload(tmp_dir: Path) -> None:
    """The keyring file changes between rounds (key 2 added, then promoted);
    the server, never restarted, picks it up on its next use: round 1's
    token (key 1) still opens, round 2's is minted under key 2. Retiring a
    key refuses its tokens at once."""
    keyring = Keyring.from_file(keyring_file(tmp_dir, (1, "primary")), auto_reload=True, check_interval=0.0)
    codec = Codec(keyring)
    server = example.build_compact_server(codec)

    def rotate() -> None:
        keyring_file(tmp_dir, (1, "primary"), (2, "active"))
        assert keyring.primary_key_id == 1 and len(keyring) == 2
        keyring_file(tmp_dir, (1, "active"), (2, "primary"))

    async def go() -> None:
        async with Client(server) as client:
            state = await first_round(client)
            assert key_of(state) == 1
            rotate()
            second = await answer_amount(client, state)
            assert isinstance(second, InputRequiredResult) and second.request_state is not None
            assert key_of(second.request_state) == 2
            assert _text(await answer_confirm(client, second.request_state)) == "15"

            state = await first_round(client)
            assert key_of(state) == 2
            keyring_file(tmp_dir, (1, "active"), (2, "retired"), (3, "primary"))
            await refused(answer_amount(client, state))  # key 2 is retired now
            state = await first_round(client)
            assert key_of(state) == 3
            assert isinstance(await answer_amount(client, state), InputRequiredResult)

    run(go)
    assert [(k.id, k.status) for k in keyring.keys()] == [(1, "active"), (2, "retired"), (3, "primary")]
    def only_key_3() -> None:
        keyring_file(tmp_dir, (3, "primary"))

    assert flow(server, Answers(between_rounds=only_key_3)) == "15"


@pytest.mark.parametrize("way", ["bound", "sdk", "compact"])
def test_example_server_over_stdio(tmp_dir: Path, way: str) -> None:
    """The example as its own process, spoken to over stdio by the SDK's client."""
    path = keyring_file(tmp_dir, (1, "primary"))
    params = StdioServerParameters(
        command=sys.executable,
        args=[str(PACKAGE_ROOT / "examples" / "increase_counter_inprocess.py"), way, str(path)],
        env=dict(os.environ),
    )
    answers = Answers(amount=7)

    async def go() -> str:
        with anyio.fail_after(30):
            async with Client(params, elicitation_callback=answers) as client:
                return _text(await client.call_tool(TOOL, ARGS))

    assert run(go) == "17"
    assert answers.asked == ["Increase 10 by how much?", "Increase 10 by 7?"]


# ------------------------------------------------------- 3. InProcessCodec: size and readable keys


def test_sdk_codec_seals_what_the_sdks_own_codec_seals(tmp_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A 100 000-character handler state through MCPServer and InProcessCodec
    (its default codec limit of 8192 used to make that -32603); past the
    core's 1 MiB token limit the seal fails with the sizes in the log."""
    assert Codec(Keyring.ephemeral(), max_token_len=MAX_TOKEN_LEN).max_token_len == MAX_TOKEN_LEN
    with pytest.raises(ValueError, match="1048576"):
        Codec(Keyring.ephemeral(), max_token_len=MAX_TOKEN_LEN + 1)

    codec = InProcessCodec(Codec(Keyring.from_file(keyring_file(tmp_dir, (1, "primary")))))
    assert codec.codec.max_token_len == MAX_TOKEN_LEN
    sizes = {"big": 100_000, "huge": 800_000}
    server = MCPServer("big-server", request_state_security=RequestStateSecurity(codec=codec))

    @server.tool(name=TOOL)
    async def carry(current: int, ctx: Context) -> str | InputRequiredResult:
        if ctx.request_state is None:
            state = "x" * sizes["huge" if current < 0 else "big"]
            return InputRequiredResult(input_requests={}, request_state=state)
        return f"carried {len(ctx.request_state)}"

    async def go() -> None:
        async with Client(server) as client:
            state = await first_round(client)
            assert len(state) > 100_000
            assert _text(await answer_amount(client, state)) == "carried 100000"
            with pytest.raises(MCPError) as error:
                await first_round(client, {"current": -1})
            assert error.value.error.code == -32603

    run(go)
    logged = [r for r in caplog.records if r.exc_info is not None and isinstance(r.exc_info[1], MintRefused)]
    assert len(logged) == 1
    message = str(logged[0].exc_info[1]) if logged[0].exc_info else ""
    assert "too_large: the SDK's requestState envelope is" in message
    assert "the limit is 1048576" in message and "InProcessCodec(max_token_len=...)" in message
    smaller = InProcessCodec(Keyring.from_file(keyring_file(tmp_dir, (1, "primary"))), max_token_len=4096)
    with pytest.raises(MintRefused, match="the limit is 4096"):
        smaller.seal(b"y" * 4000)


def test_sdk_codec_refuses_an_integrity_only_primary(tmp_dir: Path) -> None:
    """The SDK's codec encrypts: an hmac-sha256 primary would leave the whole
    envelope readable by the client. Refused at construction and, after a
    reload made one primary, at seal; `allow_readable=True` accepts it."""
    hmac_only = write_private(tmp_dir / "hmac.toml", "version = 1\n" + key_toml(1, "hmac-sha256", "primary"))
    with pytest.raises(InvalidArgument, match="primary key 1 is hmac-sha256.*allow_readable=True"):
        InProcessCodec(Keyring.from_file(hmac_only))
    readable = InProcessCodec(Keyring.from_file(hmac_only), allow_readable=True)
    token = readable.seal(b'{"s":"visible"}')
    assert readable.unseal(token) == b'{"s":"visible"}'
    assert b"visible" in base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))  # readable indeed

    path = keyring_file(tmp_dir, (1, "primary"))
    keyring = Keyring.from_file(path)
    codec = InProcessCodec(keyring)
    sealed = codec.seal(b"secret")
    assert b"secret" not in base64.urlsafe_b64decode(sealed + "=" * (-len(sealed) % 4))
    write_private(path, "version = 1\n" + key_toml(1, XCHACHA, "active") + key_toml(2, "hmac-sha256", "primary"))
    assert keyring.reload() is True
    with pytest.raises(InvalidArgument, match="primary key 2 is hmac-sha256"):
        codec.seal(b"secret")
    assert codec.unseal(sealed) == b"secret"  # opening old states still works
