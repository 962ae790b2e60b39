"""reqstate's compact `RequestStateBoundary` in the official `mcp` 2.3.0 SDK:
installed in one line on `MCPServer` and on the lowlevel `Server`, driven by
the SDK's own client. Each round's token carries only the handler's state and
is bound (in its call context) to the tool, the arguments, the method, the
principal and the audience, and to the keys the round asked (the step rule of
docs/MCP.md, checked against an independent JavaScript implementation); an
incomplete answer is asked again; refusals are the SDK's frozen -32602 with
the reason on the `reqstate` logger and the `on_refusal` hook."""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from conftest import REPO, key_toml, load_example, need, write_private
from mcp import Client, MCPError
from mcp.server import Server, ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.request_state import RequestStateBoundary as SDKBoundary
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS, ElicitResult, InputRequiredResult, TextContent

import reqstate.mcp
from reqstate import Binding, Codec, InvalidArgument, Keyring, TokenRefused, call_context, call_context_from_text
from reqstate.mcp import MAX_STEP_LEN, Refusal, RequestStateBoundary, step_of

TOOL = "increase-counter"
ARGS = {"current": 10}
NAME = "counter-server"


example = load_example()


def keyring_of(directory: Path, algorithm: str = "xchacha20-poly1305") -> Keyring:
    path = write_private(directory / "keyring.toml", "version = 1\n" + key_toml(1, algorithm, "primary"))
    return Keyring.from_file(path)


def run(fn: Callable[[], Any]) -> Any:
    return anyio.run(fn)


def accept(**content: Any) -> ElicitResult:
    return ElicitResult(action="accept", content=content)


async def call(client: Client, state: str | None, answers: dict[str, Any] | None, args: dict[str, Any] = ARGS) -> Any:
    return await client.session.call_tool(
        TOOL, args, input_responses=answers, request_state=state, allow_input_required=True
    )


async def first_state(client: Client, args: dict[str, Any] = ARGS) -> str:
    first = await call(client, None, None, args)
    assert isinstance(first, InputRequiredResult) and first.request_state is not None
    return first.request_state


def text_of(result: Any) -> str:
    assert isinstance(result, types.CallToolResult) and not result.is_error, result
    assert len(result.content) == 1 and isinstance(result.content[0], TextContent)
    return result.content[0].text


class Refusals:
    """The `on_refusal` hook and the `reqstate` logger's lines, side by side."""

    def __init__(self, caplog: pytest.LogCaptureFixture) -> None:
        self.caplog = caplog
        self.hooked: list[Refusal] = []
        caplog.set_level(logging.WARNING, logger="reqstate")

    def __call__(self, refusal: Refusal) -> None:
        self.hooked.append(refusal)

    def lines(self) -> list[str]:
        return [r.getMessage() for r in self.caplog.records if r.name == "reqstate" and "refused" in r.getMessage()]


async def refused(call_: Any) -> None:
    with pytest.raises(MCPError) as error:
        await call_
    assert error.value.error.code == INVALID_PARAMS == -32602
    assert error.value.error.message == "Invalid or expired requestState"
    assert error.value.error.data == {"reason": "invalid_request_state"}


# ------------------------------------------------------------------ the step rule

NODE_STEP = r"""
const crypto = require('crypto');
const out = [];
for (const keys of JSON.parse(require('fs').readFileSync(0, 'utf8'))) {
  const sorted = [...new Set(keys)].sort((a, b) => Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8')));
  const text = '[' + sorted.map((k) => JSON.stringify(k)).join(',') + ']';
  out.push(Buffer.byteLength(text, 'utf8') <= 256 ? text
    : 'sha256:' + crypto.createHash('sha256').update(text, 'utf8').digest('base64url'));
}
process.stdout.write(JSON.stringify(out));
"""

STEP_CASES: list[list[str]] = [
    [],
    ["confirm"],
    ["user_name", "greeting", "client_roots"],
    ["b", "a", "b"],  # duplicates
    ["\U0001f600", "\ufffd", "z", "\u00e9"],  # UTF-8 byte order, not UTF-16's
    ['qu"ote', "back\\slash", "tab\t", "nl\n", "cr\r", "bs\b", "ff\f", "nul\x00", "us\x1f", "del\x7f"],
    ["\u2028line", "\u2029para", "</script>", "é"],
    ["k" * 100, "j" * 100, "i" * 50],  # 260 bytes as an array: hashed
    ["k" * 124, "j" * 125],  # 256 bytes exactly: kept
    ["k" * 124, "j" * 126],  # 257 bytes: hashed
    ["\U0001f600" * 70],  # 282 bytes as UTF-8 (142 UTF-16 units): hashed
]


def test_step_rule_matches_an_independent_javascript_implementation() -> None:
    """docs/MCP.md's rule, written with node's JSON.stringify, Buffer.compare
    and crypto: byte for byte the same steps (the TypeScript drop-in's)."""
    node = subprocess.run(
        ["node", "-e", NODE_STEP], input=json.dumps(STEP_CASES), capture_output=True, text=True, check=True
    )
    expected = json.loads(node.stdout)
    assert [step_of(keys) for keys in STEP_CASES] == expected
    # The cases do exercise both forms and the boundary between them.
    assert expected[0] == "[]" and expected[1] == '["confirm"]'
    assert expected[2] == '["client_roots","greeting","user_name"]'
    assert expected[4] == '["z","\u00e9","\ufffd","\U0001f600"]'
    assert len(expected[8].encode()) == MAX_STEP_LEN and expected[8].startswith("[")
    assert all(expected[i].startswith("sha256:") and len(expected[i]) == 50 for i in (7, 9, 10))
    text = "[" + ",".join(json.dumps(k) for k in sorted(set(STEP_CASES[7]))) + "]"
    digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).decode().rstrip("=")
    assert expected[7] == "sha256:" + digest


def test_step_rule_matches_the_typescript_drop_in() -> None:
    """The same cases through @reqstate/codec's own `stepOfInputRequests`
    (clients/typescript/dist, from clients/typescript/build.sh)."""
    module = need(REPO / "clients" / "typescript" / "dist" / "mcp.js", "run clients/typescript/build.sh")
    script = (
        f"import({json.dumps(module.as_uri())}).then((m) => {{"
        "const cases = JSON.parse(require('fs').readFileSync(0, 'utf8'));"
        "process.stdout.write(JSON.stringify(cases.map((keys) => m.stepOfInputRequests(keys))));"
        "})"
    )
    node = subprocess.run(["node", "-e", script], input=json.dumps(STEP_CASES), capture_output=True, text=True)
    assert node.returncode == 0, node.stderr
    assert json.loads(node.stdout) == [step_of(keys) for keys in STEP_CASES]


def test_step_rule_refuses_keys_without_utf8() -> None:
    with pytest.raises(InvalidArgument, match="lone surrogate"):
        step_of(["ok", "\ud800"])
    with pytest.raises(InvalidArgument, match="must be a string"):
        step_of([1])  # type: ignore[list-item]  # deliberately wrong: refused at run time


# ------------------------------------------------------------------ MCPServer, one line


def test_bound_mcpserver_increase_counter_to_15_with_compact_tokens(tmp_dir: Path) -> None:
    keyring = keyring_of(tmp_dir)
    commits: list[tuple[int, int]] = []
    server = example.build_bound_server(keyring, on_commit=lambda c, a: commits.append((c, a)))
    chain = server.middleware
    assert not any(isinstance(m, SDKBoundary) for m in chain)
    assert sum(isinstance(m, RequestStateBoundary) for m in chain) == 1

    async def go() -> None:
        async with Client(server) as client:
            state = await first_state(client)
            # The binding is in the call context, not in the token: the
            # state, the step and the format's overhead (108 for XChaCha).
            binding = Binding(TOOL, call_context("null", NAME, "tools/call", ARGS))
            verified = Codec(keyring).verify(state, binding, expected_step='["amount"]')
            assert verified.state == json.dumps({"step": "amount"})
            assert len(state) <= 108 + len('["amount"]') + len(verified.state) - 10
            second = await call(client, state, {"amount": accept(amount=5)})
            assert isinstance(second, InputRequiredResult) and second.request_state is not None
            assert set(second.input_requests or {}) == {"confirm"}
            assert text_of(await call(client, second.request_state, {"confirm": accept(confirm=True)})) == "15"

    run(go)
    assert commits == [(10, 5)]


def test_refusals_are_frozen_on_the_wire_and_explained_to_the_operator(
    tmp_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    keyring = keyring_of(tmp_dir)
    refusals = Refusals(caplog)
    caller: list[str | None] = [None]

    def principal(ctx: ServerRequestContext[Any, Any]) -> str | None:
        return caller[0]

    server = example.build_bound_server(keyring, principal=principal, on_refusal=refusals)
    other_server = example.build_bound_server(keyring, name="another-server")

    async def go() -> None:
        async with Client(server) as client:
            state = await first_state(client)
            amount = {"amount": accept(amount=5)}
            for i in (5, 40, len(state) - 3):  # flipped characters
                flipped = state[:i] + ("A" if state[i] != "A" else "B") + state[i + 1 :]
                await refused(call(client, flipped, amount))
            await refused(call(client, state + "-TAMPERED", amount))
            await refused(call(client, state, amount, {"current": 11}))  # other arguments
            caller[0] = "mallory"
            await refused(call(client, state, amount))  # another principal
            caller[0] = None
            assert isinstance(await call(client, state, amount), InputRequiredResult)  # still good
        async with Client(other_server) as client:
            await refused(call(client, state, amount))  # another audience

    run(go)
    reasons = [r.reason for r in refusals.hooked]
    assert reasons[:3] == ["authentication_failed"] * 3
    assert reasons[3] in ("malformed", "authentication_failed")
    assert reasons[4:] == ["authentication_failed", "authentication_failed"]
    assert all(r.method == "tools/call" and r.tool == TOOL for r in refusals.hooked)
    lines = refusals.lines()
    assert len(lines) == 7  # six from the hooked server, one from the other
    assert lines[0] == (
        f'reqstate refused tools/call "{TOOL}": authentication_failed: the token does not verify for tools/call "{TOOL}" '
        "as called (its tool, arguments, method, principal or audience differ from the minting call, or it was altered)"
    )
    assert not any("mallory" in line or "current" in line or "amount" in line for line in lines)


def test_expired_state_is_refused_with_its_reason(tmp_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    refusals = Refusals(caplog)
    server = example.build_bound_server(keyring_of(tmp_dir), ttl=1, clock_leeway=0, on_refusal=refusals)

    async def go() -> None:
        async with Client(server) as client:
            state = await first_state(client)
            await anyio.sleep(2.1)
            await refused(call(client, state, {"amount": accept(amount=5)}))

    run(go)
    assert [r.reason for r in refusals.hooked] == ["expired"]
    assert refusals.lines()[0].startswith(f'reqstate refused tools/call "{TOOL}": expired: ')


def test_a_hook_that_raises_changes_nothing(tmp_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    def hook(refusal: Refusal) -> None:
        raise RuntimeError("hook bug")

    server = example.build_bound_server(keyring_of(tmp_dir), on_refusal=hook)

    async def go() -> None:
        async with Client(server) as client:
            await refused(call(client, "garbage", {"amount": accept(amount=5)}))

    run(go)
    assert any("on_refusal hook raised" in r.getMessage() for r in caplog.records)


def probe_server(keyring: Keyring, **options: Any) -> tuple[MCPServer, list[Any]]:
    """A tool asking `a`, `b` and `c`, that reports what the boundary let
    through: the answers' keys and `unanswered()`."""
    seen: list[Any] = []
    server = reqstate.mcp.bind(MCPServer(NAME), keyring, **options)

    @server.tool(name=TOOL)
    async def probe(current: int, ctx: Context) -> str | InputRequiredResult:
        seen.append((sorted(ctx.input_responses or {}), reqstate.mcp.unanswered(), ctx.request_state))
        if reqstate.mcp.current_round() is None or reqstate.mcp.unanswered():
            missing = reqstate.mcp.unanswered() or ["a", "b", "c"]
            requests = {k: example._elicit(f"{k}?", example.CONFIRM_SCHEMA) for k in missing}
            return InputRequiredResult(input_requests=requests, request_state="kept")
        return "complete"

    return server, seen


def test_incomplete_answers_are_asked_again_and_foreign_keys_dropped(tmp_dir: Path) -> None:
    server, seen = probe_server(keyring_of(tmp_dir))

    async def go() -> None:
        async with Client(server) as client:
            state = await first_state(client)
            partial = await call(client, state, {"a": accept(confirm=True), "x": accept(confirm=True)})
            assert isinstance(partial, InputRequiredResult) and partial.request_state is not None
            assert sorted(partial.input_requests or {}) == ["b", "c"]
            # The new round asked b and c only: an answer to a (round 1's key) is not this round's.
            again = await call(client, partial.request_state, {"a": accept(confirm=True), "b": accept(confirm=True)})
            assert isinstance(again, InputRequiredResult) and sorted(again.input_requests or {}) == ["c"]
            done = await call(client, state, {k: accept(confirm=True) for k in "abcxyz"})
            assert text_of(done) == "complete"

    run(go)
    assert seen == [
        ([], [], None),
        (["a"], ["b", "c"], "kept"),  # x dropped: not asked
        (["b"], ["c"], "kept"),  # a dropped: round 2 asked b and c
        (["a", "b", "c"], [], "kept"),
    ]


def test_incomplete_refuse_is_wrong_step(tmp_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    refusals = Refusals(caplog)
    server, _ = probe_server(keyring_of(tmp_dir), incomplete="refuse", on_refusal=refusals)

    async def go() -> None:
        async with Client(server) as client:
            state = await first_state(client)
            await refused(call(client, state, {"a": accept(confirm=True)}))
            assert text_of(await call(client, state, {k: accept(confirm=True) for k in "abc"})) == "complete"

    run(go)
    assert [r.reason for r in refusals.hooked] == ["wrong_step"]


def test_a_complete_rounds_state_replayed_with_another_rounds_answers_is_asked_again(tmp_dir: Path) -> None:
    """Round 2's token (asked `confirm`) with round 1's answer (`amount`):
    the handler never sees the amount, and asks for the confirmation again."""
    server = example.build_bound_server(keyring_of(tmp_dir))

    async def go() -> None:
        async with Client(server) as client:
            state = await first_state(client)
            second = await call(client, state, {"amount": accept(amount=5)})
            assert isinstance(second, InputRequiredResult) and second.request_state is not None
            replay = await call(client, second.request_state, {"amount": accept(amount=500)})
            assert isinstance(replay, InputRequiredResult) and set(replay.input_requests or {}) == {"confirm"}
            third = await call(client, state, {"confirm": accept(confirm=True)})
            # Round 1's token with round 2's answer: asked for the amount again.
            assert isinstance(third, InputRequiredResult) and set(third.input_requests or {}) == {"amount"}

    run(go)


def test_prompts_get_is_bound_too(tmp_dir: Path) -> None:
    keyring = keyring_of(tmp_dir)
    server = reqstate.mcp.bind(MCPServer(NAME), keyring)

    @server.prompt(name="greet")
    async def greet(ctx: Context) -> str | InputRequiredResult:
        answer = (ctx.input_responses or {}).get("who")
        if not isinstance(answer, ElicitResult) or answer.content is None:
            return InputRequiredResult(
                input_requests={"who": example._elicit("who?", example.CONFIRM_SCHEMA)}, request_state="p"
            )
        return f"hello {answer.content}"

    async def go() -> None:
        async with Client(server) as client:
            first = await client.session.get_prompt("greet", allow_input_required=True)
            assert isinstance(first, InputRequiredResult) and first.request_state is not None
            state = first.request_state
            binding = Binding("greet", call_context("null", NAME, "prompts/get", {}))
            assert Codec(keyring).verify(state, binding, expected_step='["who"]').state == "p"
            done = await client.session.get_prompt(
                "greet", input_responses={"who": accept(confirm=True)}, request_state=state, allow_input_required=True
            )
            assert isinstance(done, types.GetPromptResult)
            # The prompt's state answering the tool: another tool and method.
            await refused(call(client, state, {"amount": accept(amount=1)}))

    run(go)


# ------------------------------------------------------------------ lowlevel Server, one line


def test_bound_lowlevel_server(tmp_dir: Path) -> None:
    keyring = keyring_of(tmp_dir)

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | InputRequiredResult:
        answer = (params.input_responses or {}).get("ok")
        if params.request_state is None or answer is None:
            return InputRequiredResult(
                input_requests={"ok": example._elicit("ok?", example.CONFIRM_SCHEMA)}, request_state="low"
            )
        return types.CallToolResult(content=[TextContent(type="text", text=f"state {params.request_state}")])

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        schema = {"type": "object", "properties": {"current": {"type": "integer"}}}
        return types.ListToolsResult(tools=[types.Tool(name=TOOL, input_schema=schema)])

    server = reqstate.mcp.bind(Server("low-server", on_list_tools=list_tools, on_call_tool=call_tool), keyring)
    assert type(server.middleware[0]).__name__ == "OpenTelemetryMiddleware"
    assert isinstance(server.middleware[1], RequestStateBoundary) and server.middleware[1].audience == "low-server"

    async def go() -> None:
        async with Client(server) as client:
            state = await first_state(client)
            binding = Binding(TOOL, call_context("null", "low-server", "tools/call", ARGS))
            assert Codec(keyring).verify(state, binding, expected_step='["ok"]').state == "low"
            assert text_of(await call(client, state, {"ok": accept(confirm=True)})) == "state low"
            await refused(call(client, state[:-2], {"ok": accept(confirm=True)}))

    run(go)


def test_bind_refuses_what_it_cannot_install(tmp_dir: Path) -> None:
    keyring = keyring_of(tmp_dir)
    server = reqstate.mcp.bind(MCPServer(NAME), keyring)
    with pytest.raises(RuntimeError, match="already has a reqstate RequestStateBoundary"):
        reqstate.mcp.bind(server, keyring)
    bare = MCPServer(NAME)
    bare.middleware[:] = [m for m in bare.middleware if not isinstance(m, SDKBoundary)]
    with pytest.raises(RuntimeError, match=r"mcp>=2.3.0,<3"):
        reqstate.mcp.bind(bare, keyring)
    with pytest.raises(TypeError, match="MCPServer or lowlevel Server"):
        reqstate.mcp.bind(object(), keyring)
    with pytest.raises(InvalidArgument, match="max_lifetime"):
        RequestStateBoundary(keyring, ttl=86401)
    with pytest.raises(InvalidArgument, match="incomplete"):
        RequestStateBoundary(keyring, incomplete="maybe")  # type: ignore[arg-type]  # deliberately wrong
    with pytest.raises(TypeError):
        RequestStateBoundary("keys")  # type: ignore[arg-type]  # deliberately wrong


def test_bind_refuses_an_unnamed_server_without_an_audience(tmp_dir: Path) -> None:
    """Issue 50 item 4: an MCPServer given no name gets the SDK's default
    ("mcp-server"), which every unnamed server shares, so its rounds would
    be bound to an audience that is no one's: bind() refuses it, as the
    TypeScript bind refuses a server with no name, unless an audience is
    given."""
    keyring = keyring_of(tmp_dir)
    for unnamed in (MCPServer(), MCPServer("mcp-server"), MCPServer("")):
        with pytest.raises(InvalidArgument, match=r"no name of its own .*pass audience="):
            reqstate.mcp.bind(unnamed, keyring)
    server = reqstate.mcp.bind(MCPServer(), keyring, audience="billing")
    assert [m.audience for m in server.middleware if isinstance(m, RequestStateBoundary)] == ["billing"]
    named = reqstate.mcp.bind(MCPServer("counter"), keyring)
    assert [m.audience for m in named.middleware if isinstance(m, RequestStateBoundary)] == ["counter"]


# ------------------------------------------------------------------ sizes


def test_large_states_seal_with_a_keyring_and_fail_clearly_past_a_codecs_limit(
    tmp_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A 100 000-character state (the SDK's own codec seals it) works with
    the boundary made from a keyring (1 MiB tokens); a Codec's own
    max_token_len (8192 by default) is a -32603 with the reason logged."""
    keyring = keyring_of(tmp_dir)
    big = "x" * 100_000

    def server_with(codec: Codec | Keyring) -> MCPServer:
        server = reqstate.mcp.bind(MCPServer(NAME), codec)

        @server.tool(name=TOOL)
        async def carry(current: int, ctx: Context) -> str | InputRequiredResult:
            if ctx.request_state is None:
                return InputRequiredResult(
                    input_requests={"ok": example._elicit("ok?", example.CONFIRM_SCHEMA)}, request_state=big
                )
            return f"carried {len(ctx.request_state)}"

        return server

    async def go() -> None:
        async with Client(server_with(keyring)) as client:
            state = await first_state(client)
            assert len(state) > 100_000
            assert text_of(await call(client, state, {"ok": accept(confirm=True)})) == "carried 100000"
        async with Client(server_with(Codec(keyring))) as client:
            with pytest.raises(MCPError) as error:
                await call(client, None, None)
            assert error.value.error.code == INTERNAL_ERROR

    run(go)
    assert any(
        'could not mint tools/call "increase-counter": too_large: the token would be' in r.getMessage()
        and "the limit is 8192" in r.getMessage()
        for r in caplog.records
    )


def test_tokens_from_the_boundary_verify_as_plain_reqstate_tokens(tmp_dir: Path) -> None:
    """What another implementation (the TypeScript drop-in, the sidecar)
    verifies: the call context of docs/MCP.md and the step; a wrong step is
    `wrong_step`."""
    keyring = keyring_of(tmp_dir)
    server = example.build_bound_server(keyring)

    async def go() -> str:
        async with Client(server) as client:
            return await first_state(client, {"current": 3})

    state: str = run(go)
    codec = Codec(keyring)
    binding = Binding(TOOL, call_context_from_text("null", NAME, "tools/call", '{"current":3}'))
    assert codec.verify(state, binding).step == '["amount"]'
    with pytest.raises(TokenRefused) as error:
        codec.verify(state, binding, expected_step='["confirm"]')
    assert error.value.reason == "wrong_step"


def test_a_hashed_step_is_complete_with_its_keys_and_unnamed_when_not(tmp_dir: Path) -> None:
    """Asked keys over 256 bytes: the step is `sha256:...`, which cannot be
    read back, so a partial answer is incomplete with `unanswered()` None (the
    handler asks again from its own state) and all the keys complete it."""
    keyring = keyring_of(tmp_dir)
    keys = [f"question-{i:02d}-" + "x" * 20 for i in range(10)]
    seen: list[Any] = []
    server = reqstate.mcp.bind(MCPServer(NAME), keyring)

    @server.tool(name=TOOL)
    async def many(current: int, ctx: Context) -> str | InputRequiredResult:
        found = reqstate.mcp.current_round()
        seen.append((reqstate.mcp.unanswered(), None if found is None else (found.asked, found.complete)))
        if found is None or not found.complete:
            requests = {k: example._elicit(k, example.CONFIRM_SCHEMA) for k in keys}
            return InputRequiredResult(input_requests=requests)
        return "complete"

    async def go() -> None:
        async with Client(server) as client:
            state = await first_state(client)
            binding = Binding(TOOL, call_context("null", NAME, "tools/call", ARGS))
            assert Codec(keyring).verify(state, binding).step == step_of(keys)
            assert step_of(keys).startswith("sha256:")
            partial = await call(client, state, {k: accept(confirm=True) for k in keys[1:]})
            assert isinstance(partial, InputRequiredResult)
            assert text_of(await call(client, state, {k: accept(confirm=True) for k in keys})) == "complete"

    run(go)
    assert seen == [([], None), (None, (None, False)), ([], (None, True))]


def test_resources_read_is_bound_to_its_uri(tmp_dir: Path) -> None:
    keyring = keyring_of(tmp_dir)
    server = reqstate.mcp.bind(MCPServer(NAME), keyring)

    @server.resource("note://{name}")
    async def note(name: str, ctx: Context) -> str | InputRequiredResult:
        answer = (ctx.input_responses or {}).get("ok")
        if ctx.request_state is None or answer is None:
            return InputRequiredResult(
                input_requests={"ok": example._elicit("ok?", example.CONFIRM_SCHEMA)}, request_state=name
            )
        return f"note {ctx.request_state}"

    ok: dict[str, types.InputResponse] = {"ok": accept(confirm=True)}

    async def go() -> None:
        async with Client(server) as client:
            first = await client.session.read_resource("note://a", allow_input_required=True)
            assert isinstance(first, InputRequiredResult) and first.request_state is not None
            state = first.request_state
            binding = Binding("note://a", call_context("null", NAME, "resources/read", {}))
            assert Codec(keyring).verify(state, binding, expected_step='["ok"]').state == "a"
            done = await client.session.read_resource(
                "note://a", input_responses=ok, request_state=state, allow_input_required=True
            )
            assert isinstance(done, types.ReadResourceResult)
            contents = done.contents[0]
            assert isinstance(contents, types.TextResourceContents) and contents.text == "note a"
            await refused(
                client.session.read_resource("note://b", input_responses=ok, request_state=state, allow_input_required=True)
            )

    run(go)


@pytest.mark.parametrize("blocked", ["mcp", "mcp.server.context"])
def test_importing_without_the_sdk_says_which_versions_and_how(blocked: str) -> None:
    """Issue 40 item 7: `import reqstate.mcp` without the SDK (or with mcp
    1.x, which has no `mcp.server.context`) names the versions that work and
    the command that installs them, instead of a bare ModuleNotFoundError."""
    import sys as _sys

    code = f"import sys; sys.modules[{blocked!r}] = None; import reqstate.mcp"
    done = subprocess.run([_sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: reqstate.mcp needs the official MCP SDK for Python, mcp>=2.3.0,<3"), done.stderr
    assert "pip install 'reqstate[mcp]'" in last and "is installed" in last, last
