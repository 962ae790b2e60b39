"""A real `mcp` 2.3.0 server whose requestState is sealed by a real sidecar,
driven by the SDK's own client (which retries `input_required` itself).

The server is examples/increase_counter_server.py, imported here and also run
as a subprocess over stdio.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

import anyio
import pytest
from conftest import AUTH_TOKEN, PACKAGE_ROOT, Sidecar, free_port
from mcp import Client, MCPError, StdioServerParameters
from mcp.server.mcpserver import MCPServer
from mcp.server.request_state import InvalidRequestState
from mcp_types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    CallToolResult,
    ElicitRequestParams,
    ElicitResult,
    InputRequiredResult,
    TextContent,
)

from reqstate_client import InvalidRequestError, KeyList, KeyStatus, Reason, TransportError
from reqstate_client.mcp import (
    DEFAULT_AAD,
    SINGLE_USE_MARK,
    SINGLE_USE_STEP,
    SINGLE_USE_TOOL,
    SidecarCodec,
    is_single_use_token,
    single_use,
)

EXAMPLE = PACKAGE_ROOT / "examples" / "increase_counter_server.py"
TOOL = "increase-counter"
ARGS = {"current": 10}


def _load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("increase_counter_server", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


example = _load_example()


class Answers:
    """The user: answers the amount and the confirmation, records what was asked.

    `between_rounds` runs (in a worker thread) when the amount is asked, that
    is after round 1's state was sealed and before the client retries with it.
    """

    def __init__(self, amount: int = 5, confirm: bool = True, between_rounds: Callable[[], None] | None = None):
        self.amount = amount
        self.confirm = confirm
        self.between_rounds = between_rounds
        self.asked: list[str] = []

    async def __call__(self, context: Any, params: ElicitRequestParams) -> ElicitResult:
        self.asked.append(params.message)
        if "how much" in params.message:
            if self.between_rounds is not None:
                await anyio.to_thread.run_sync(self.between_rounds)
            return ElicitResult(action="accept", content={"amount": self.amount})
        return ElicitResult(action="accept", content={"confirm": self.confirm})


def _text(result: CallToolResult) -> str:
    assert not result.is_error, result
    assert len(result.content) == 1 and isinstance(result.content[0], TextContent)
    return result.content[0].text


class RecordingCodec(SidecarCodec):
    """SidecarCodec that remembers which key sealed and opened each token."""

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


def _server_with(codec: SidecarCodec, on_commit: Callable[[int, int], None] | None = None) -> MCPServer:
    """The example's server, with a given codec (to observe it)."""
    server: MCPServer = example.build_server(codec.client.target, codec=codec, on_commit=on_commit)
    return server


def _status(keys: KeyList, key_id: int) -> KeyStatus | None:
    """The status of key `key_id`, None when the sidecar does not hold it."""
    key = keys.get(key_id)
    return None if key is None else key.status


def run(fn: Callable[[], Any]) -> Any:
    return anyio.run(fn)


def test_increase_counter_end_to_end(sidecar: Sidecar, transport: str) -> None:
    server = example.build_server(sidecar.target(transport), AUTH_TOKEN)
    answers = Answers(amount=5)

    async def flow() -> str:
        async with Client(server, elicitation_callback=answers) as client:
            return _text(await client.call_tool(TOOL, ARGS))

    assert run(flow) == "15"
    assert answers.asked == ["Increase 10 by how much?", "Increase 10 by 5?"]


def test_the_wire_state_is_a_sidecar_token(sidecar: Sidecar) -> None:
    """Round by round, by hand: what the client holds is sealed by the sidecar."""
    codec = RecordingCodec(sidecar.unix_target, AUTH_TOKEN)
    server = _server_with(codec)

    async def flow() -> None:
        async with Client(server) as client:
            first = await client.session.call_tool(TOOL, ARGS, allow_input_required=True)
            assert isinstance(first, InputRequiredResult)
            assert set(first.input_requests or {}) == {"amount"}
            state = first.request_state
            assert state is not None and "step" not in state and "amount" not in state
            with sidecar.client() as sidecar_client:
                opened = sidecar_client.unseal(state, aad=DEFAULT_AAD)
                assert opened.valid and opened.key_id == 1
                envelope = json.loads(opened.payload)
                # The SDK's own claims, inside the sidecar's seal.
                assert envelope["t"] == TOOL and envelope["m"] == "tools/call"
                assert envelope["aud"] == example.SERVER_NAME
                assert json.loads(envelope["s"]) == {"step": "amount"}
                assert not sidecar_client.unseal(state, aad=b"another aad").valid

            second = await client.session.call_tool(
                TOOL,
                ARGS,
                input_responses={"amount": ElicitResult(action="accept", content={"amount": 5})},
                request_state=state,
                allow_input_required=True,
            )
            assert isinstance(second, InputRequiredResult) and second.request_state is not None
            assert set(second.input_requests or {}) == {"confirm"}
            # Round 1 was sealed; round 2, which commits the increase, is a single-use token.
            assert not is_single_use_token(state) and is_single_use_token(second.request_state)
            with sidecar.client() as sidecar_client:
                peek = sidecar_client.verify(second.request_state, SINGLE_USE_TOOL, context=DEFAULT_AAD)
                assert peek.reason is Reason.SINGLE_USE  # a plain verify neither opens nor spends it
                assert sidecar_client.unseal(second.request_state, aad=DEFAULT_AAD).reason is Reason.WRONG_KIND
            third = await client.session.call_tool(
                TOOL,
                ARGS,
                input_responses={"confirm": ElicitResult(action="accept", content={"confirm": True})},
                request_state=second.request_state,
                allow_input_required=True,
            )
            assert isinstance(third, CallToolResult) and _text(third) == "15"

    run(flow)
    assert [key for _, key in codec.sealed] == [1, 1] and codec.opened == [1, 1]


async def _first_round(client: Client, args: dict[str, Any] = ARGS) -> str:
    first = await client.session.call_tool(TOOL, args, allow_input_required=True)
    assert isinstance(first, InputRequiredResult) and first.request_state is not None
    return first.request_state


async def _retry(client: Client, state: str, args: dict[str, Any] = ARGS) -> Any:
    return await client.session.call_tool(
        TOOL,
        args,
        input_responses={"amount": ElicitResult(action="accept", content={"amount": 5})},
        request_state=state,
        allow_input_required=True,
    )


def test_tampered_request_state_gets_invalid_params(sidecar: Sidecar, transport: str) -> None:
    server = example.build_server(sidecar.target(transport), AUTH_TOKEN)

    async def flow() -> None:
        async with Client(server) as client:
            state = await _first_round(client)
            flipped = state[:-4] + ("A" if state[-4] != "A" else "B") + state[-3:]
            for bad in (state + "-TAMPERED", flipped, state[:-10], "garbage"):
                with pytest.raises(MCPError) as refused:
                    await _retry(client, bad)
                assert refused.value.error.code == INVALID_PARAMS == -32602
                assert refused.value.error.message == "Invalid or expired requestState"
            # Genuine state replayed with other arguments: the SDK's own binding.
            with pytest.raises(MCPError) as other_args:
                await _retry(client, state, {"current": 11})
            assert other_args.value.error.code == -32602
            # The genuine state still works.
            assert isinstance(await _retry(client, state), InputRequiredResult)

    run(flow)


def test_state_from_another_server_is_refused(sidecar: Sidecar) -> None:
    """Same sidecar and keys, another audience: the SDK's aud claim refuses it."""
    ours = example.build_server(sidecar.unix_target, AUTH_TOKEN)
    theirs = example.build_server(sidecar.unix_target, AUTH_TOKEN, name="another-server")

    async def flow() -> None:
        async with Client(theirs) as client:
            state = await _first_round(client)
        async with Client(ours) as client:
            with pytest.raises(MCPError) as refused:
                await _retry(client, state)
            assert refused.value.error.code == -32602

    run(flow)


def test_unreachable_sidecar_fails_closed(sidecar: Sidecar, dead_unix_target: str) -> None:
    """A genuine state reaching a server whose sidecar is down gets -32602, never the handler."""
    alive = example.build_server(sidecar.unix_target, AUTH_TOKEN)
    cut_off = example.build_server(dead_unix_target, AUTH_TOKEN)

    async def flow() -> None:
        async with Client(alive) as client:
            state = await _first_round(client)
        async with Client(cut_off) as client:
            with pytest.raises(MCPError) as refused:
                await _retry(client, state)
            assert refused.value.error.code == -32602
            # Sealing cannot happen either: an internal error, not unsealed state.
            with pytest.raises(MCPError) as no_seal:
                await client.call_tool(TOOL, ARGS)
            assert no_seal.value.error.code == INTERNAL_ERROR == -32603

    run(flow)


def test_codec_fails_closed_on_every_failure(sidecar: Sidecar, dead_unix_target: str) -> None:
    with SidecarCodec(sidecar.unix_target, AUTH_TOKEN) as codec:
        token = codec.seal(b'{"v":1}')
        assert codec.last_key_id == 1
        assert codec.unseal(token) == b'{"v":1}'
        for bad in (token + "-TAMPERED", "", "x" * 9000, token[:-1]):
            with pytest.raises(InvalidRequestState):
                codec.unseal(bad)
        with pytest.raises(InvalidRequestState):
            codec.unseal(None)  # type: ignore[arg-type]  # deliberately not a str: refused at run time too
    with SidecarCodec(sidecar.unix_target, AUTH_TOKEN, aad=b"other") as other:
        with pytest.raises(InvalidRequestState, match=Reason.AUTHENTICATION_FAILED.code):
            other.unseal(token)
    with SidecarCodec(sidecar.unix_target, token="wrong") as unauthorized:
        with pytest.raises(InvalidRequestState):
            unauthorized.unseal(token)
    with SidecarCodec(dead_unix_target, AUTH_TOKEN) as dead:
        with pytest.raises(InvalidRequestState):
            dead.unseal(token)
        with pytest.raises(TransportError):
            dead.seal(b"x")
    with pytest.raises(ValueError):
        SidecarCodec()


def test_key_rotation_between_rounds(fresh_sidecar: Sidecar) -> None:
    """Round 1 sealed under key 1; then key 2 is added, reloaded, promoted,
    reloaded; the flow goes on: key 1 opens round 1's state, key 2 seals the next."""
    sidecar = fresh_sidecar
    codec = RecordingCodec(sidecar.unix_target, AUTH_TOKEN)
    server = _server_with(codec)

    def rotate() -> None:
        out = sidecar.keys_cli("new")
        assert "key 2" in out, out
        sidecar.sighup()
        sidecar.wait_for_keys("key 2 active", lambda k: _status(k, 2) is KeyStatus.ACTIVE)
        sidecar.keys_cli("promote", "2", "--force")  # key 2 is on the sidecar (checked above)
        sidecar.sighup()
        sidecar.wait_for_keys("key 2 primary", lambda k: k.primary is not None and k.primary.id == 2)

    answers = Answers(amount=5, between_rounds=rotate)

    async def flow() -> str:
        async with Client(server, elicitation_callback=answers) as client:
            return _text(await client.call_tool(TOOL, ARGS))

    assert run(flow) == "15"
    assert answers.asked == ["Increase 10 by how much?", "Increase 10 by 5?"]
    # Round 1 sealed under the old primary, rounds 2 under the new one; the
    # round-1 state opened under key 1 (now active) after the rotation.
    assert [key for _, key in codec.sealed] == [1, 2]
    assert codec.opened == [1, 2]
    keys = sidecar.wait_for_keys("rotation done", lambda k: k.primary is not None and k.primary.id == 2)
    assert _status(keys, 1) is KeyStatus.ACTIVE

    # Retiring key 1 cuts its tokens off at once: round 1's state is refused now.
    sidecar.keys_cli("retire", "1", "--force")  # a cut-off now, whatever is in flight
    sidecar.sighup()
    sidecar.wait_for_keys("key 1 retired", lambda k: _status(k, 1) is KeyStatus.RETIRED)
    round_one_state = codec.sealed[0][0]
    with sidecar.client() as client:
        assert client.unseal(round_one_state, aad=DEFAULT_AAD).reason is Reason.RETIRED_KEY

    async def replay() -> None:
        async with Client(server) as client:
            with pytest.raises(MCPError) as refused:
                await _retry(client, round_one_state)
            assert refused.value.error.code == -32602

    run(replay)


def test_example_server_over_stdio(sidecar: Sidecar) -> None:
    """The example as its own process, spoken to over stdio by the SDK's client."""
    params = StdioServerParameters(
        command=sys.executable,
        args=[str(EXAMPLE)],
        env={
            **os.environ,
            "REQSTATE_TARGET": sidecar.unix_target,
            "REQSTATE_TOKEN": AUTH_TOKEN,
        },
    )
    answers = Answers(amount=7)

    async def flow() -> str:
        with anyio.fail_after(30):
            async with Client(params, elicitation_callback=answers) as client:
                return _text(await client.call_tool(TOOL, ARGS))

    assert run(flow) == "17"
    assert answers.asked == ["Increase 10 by how much?", "Increase 10 by 7?"]


def test_declined_confirmation_keeps_the_counter(sidecar: Sidecar) -> None:
    server = example.build_server(sidecar.unix_target, AUTH_TOKEN)
    answers = Answers(amount=5, confirm=False)

    async def flow() -> str:
        async with Client(server, elicitation_callback=answers) as client:
            return _text(await client.call_tool(TOOL, ARGS))

    assert run(flow) == "cancelled; the counter stays at 10"


async def _confirm(client: Client, state: str, args: dict[str, Any] = ARGS) -> Any:
    """The last round's retry: the confirmation, with round 2's state."""
    return await client.session.call_tool(
        TOOL,
        args,
        input_responses={"confirm": ElicitResult(action="accept", content={"confirm": True})},
        request_state=state,
        allow_input_required=True,
    )


def test_single_use_final_round_cannot_be_replayed(sidecar: Sidecar, transport: str) -> None:
    """The SDK's client completes the flow once; replaying the last round's
    retry (same requestState, same inputResponses) gets -32602 and the
    increase is committed once."""
    codec = RecordingCodec(sidecar.target(transport), AUTH_TOKEN)
    commits: list[tuple[int, int]] = []
    server = _server_with(codec, on_commit=lambda current, amount: commits.append((current, amount)))
    answers = Answers(amount=5)

    async def flow() -> str:
        async with Client(server, elicitation_callback=answers) as client:
            return _text(await client.call_tool(TOOL, ARGS))

    assert run(flow) == "15"
    assert commits == [(10, 5)]
    assert len(codec.sealed) == 2 and codec.opened == [1, 1]
    last_state = codec.sealed[-1][0]
    assert is_single_use_token(last_state) and not is_single_use_token(codec.sealed[0][0])

    async def replay() -> None:
        for _ in range(2):  # a fresh connection each time: nothing per session helps
            async with Client(server) as client:
                with pytest.raises(MCPError) as refused:
                    await _confirm(client, last_state)
                assert refused.value.error.code == INVALID_PARAMS == -32602
                assert refused.value.error.message == "Invalid or expired requestState"

    run(replay)
    assert commits == [(10, 5)]
    with sidecar.client() as client:
        spent = client.verify(last_state, SINGLE_USE_TOOL, context=DEFAULT_AAD, consume=True)
        assert spent.reason is Reason.REPLAYED


def test_single_use_round_by_hand_and_on_another_replica(sidecar: Sidecar) -> None:
    """Round by round: the confirmation is accepted once; a second server on
    the same sidecar (another replica) refuses the replay too; round 1's
    state, not single-use, may be retried."""
    commits: list[tuple[int, int]] = []
    server = example.build_server(
        sidecar.unix_target, AUTH_TOKEN, on_commit=lambda current, amount: commits.append((current, amount))
    )
    replica = example.build_server(
        sidecar.tcp_target, AUTH_TOKEN, on_commit=lambda current, amount: commits.append((current, amount))
    )

    async def flow() -> None:
        async with Client(server) as client:
            state = await _first_round(client)
            second = await _retry(client, state)
            assert isinstance(second, InputRequiredResult) and second.request_state is not None
            final = second.request_state
            again = await _retry(client, state)  # round 1's state is not single-use
            assert isinstance(again, InputRequiredResult) and again.request_state is not None
            assert again.request_state != final  # each single-use token is distinct

            # Changed arguments: the SDK refuses the binding, after the sidecar
            # consumed the token; so this token is spent, and round 2 is redone.
            with pytest.raises(MCPError) as other_args:
                await _confirm(client, again.request_state, {"current": 11})
            assert other_args.value.error.code == -32602
            with pytest.raises(MCPError) as burnt:
                await _confirm(client, again.request_state)
            assert burnt.value.error.code == -32602

            third = await _confirm(client, final)
            assert isinstance(third, CallToolResult) and _text(third) == "15"
            with pytest.raises(MCPError) as replayed:
                await _confirm(client, final)
            assert replayed.value.error.code == -32602
        async with Client(replica) as client:
            with pytest.raises(MCPError) as elsewhere:
                await _confirm(client, final)
            assert elsewhere.value.error.code == -32602

    run(flow)
    assert commits == [(10, 5)]


def test_single_use_round_fails_closed_without_a_replay_store(dead_unix_target: str) -> None:
    """A sidecar whose replay store (Redis) is unreachable: the flow reaches
    the confirmation, whose retry gets -32602; nothing is committed."""
    no_store = Sidecar(args=["--replay-store", f"redis://127.0.0.1:{free_port()}", "--replay-timeout-ms", "200"])
    commits: list[tuple[int, int]] = []
    try:
        server = example.build_server(
            no_store.unix_target, AUTH_TOKEN, on_commit=lambda current, amount: commits.append((current, amount))
        )
        cut_off = example.build_server(dead_unix_target, AUTH_TOKEN, on_commit=lambda c, a: commits.append((c, a)))

        async def flow() -> None:
            async with Client(server) as client:
                second = await _retry(client, await _first_round(client))
                assert isinstance(second, InputRequiredResult) and second.request_state is not None
                with pytest.raises(MCPError) as refused:
                    await _confirm(client, second.request_state)
                assert refused.value.error.code == -32602
            async with Client(cut_off) as client:  # no sidecar at all: the same
                with pytest.raises(MCPError) as unreachable:
                    await _confirm(client, second.request_state)
                assert unreachable.value.error.code == -32602

        run(flow)
        assert commits == []
    finally:
        no_store.stop()


def test_codec_single_use_mark(sidecar: Sidecar) -> None:
    """`single_use` marks the envelope's state; the codec mints it single-use
    without the mark, and opens it once."""
    assert single_use('{"step":"confirm"}') == SINGLE_USE_MARK + '{"step":"confirm"}'
    assert single_use(single_use("x")) == single_use("x")
    with pytest.raises(TypeError):
        single_use(b"x")  # type: ignore[arg-type]  # deliberately not a str
    now = time.time()
    envelope = {"v": 1, "iat": now, "exp": now + 300.5, "m": "tools/call", "t": TOOL, "a": "x", "s": single_use("{}")}
    with SidecarCodec(sidecar.unix_target, AUTH_TOKEN) as codec:
        token = codec.seal(json.dumps(envelope, separators=(",", ":")).encode())
        assert is_single_use_token(token) and codec.last_key_id == 1
        with sidecar.client() as client:
            peek = client.verify(token, SINGLE_USE_TOOL, context=DEFAULT_AAD)
            assert peek.reason is Reason.SINGLE_USE
            # The token expires with the envelope (rounded up to the second).
            probe = client.verify(token, SINGLE_USE_TOOL, expected_step="none", context=DEFAULT_AAD, consume=True)
            assert probe.reason is Reason.WRONG_STEP  # refused before the store: not spent
        # An envelope that outlives the sidecar's --max-lifetime (one day by
        # default) is not minted: the SDK answers with an internal error.
        with pytest.raises(InvalidRequestError) as too_long:
            codec.seal(json.dumps({**envelope, "exp": now + 2 * 86400}).encode())
        assert too_long.value.reason is Reason.LIFETIME_TOO_LONG
        opened = json.loads(codec.unseal(token))
        assert opened == {**envelope, "s": "{}"}
        with pytest.raises(InvalidRequestState, match="^replayed$"):
            codec.unseal(token)
        # Only the envelope's state counts, and only as a prefix.
        for unmarked in (
            {**envelope, "s": "{}", "x": SINGLE_USE_MARK},
            {**envelope, "s": "{} " + SINGLE_USE_MARK},
        ):
            plain = codec.seal(json.dumps(unmarked).encode())
            assert not is_single_use_token(plain)
            assert codec.unseal(plain) == codec.unseal(plain) == json.dumps(unmarked).encode()
        assert not is_single_use_token(codec.seal(SINGLE_USE_MARK.encode()))  # not JSON: sealed as is
        # A single-use token of the same tool and step under another aad is refused.
        with SidecarCodec(sidecar.unix_target, AUTH_TOKEN, aad=b"other") as other:
            foreign = other.seal(json.dumps(envelope).encode())
            with pytest.raises(InvalidRequestState, match=Reason.AUTHENTICATION_FAILED.code):
                codec.unseal(foreign)
        with sidecar.client() as client:
            # Minted as JSON rather than as the envelope's bytes: refused, not opened.
            as_json = client.mint(
                SINGLE_USE_TOOL, SINGLE_USE_STEP, state_json="{}", context=DEFAULT_AAD, single_use=True
            )
            with pytest.raises(InvalidRequestState, match=Reason.STATE_DECODING.code):
                codec.unseal(as_json.token)
            other_step = client.mint(SINGLE_USE_TOOL, "other", state=b"{}", context=DEFAULT_AAD, single_use=True)
            with pytest.raises(InvalidRequestState, match=Reason.WRONG_STEP.code):
                codec.unseal(other_step.token)
    assert not is_single_use_token("") and not is_single_use_token("G") and not is_single_use_token("!!!!")
