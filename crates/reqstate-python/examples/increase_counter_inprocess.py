"""The three-round `increase-counter`, in-process, three ways.

One `tools/call` in three rounds:

1. `{"current": 10}` and no state: ask the amount (elicitation);
2. the amount came back: ask for confirmation, carrying `{"current": 10, "amount": 5}`;
3. confirmed: return the new value, "15".

`build_bound_server`: the SDK's `MCPServer` with reqstate's compact
boundary in place of the SDK's (`reqstate.mcp.bind`, one line): each round's
token is bound to the tool, the arguments, the caller, this server and the
keys the round asked, and carries only the handler's state.

`build_sdk_server`: the SDK's `MCPServer` with its own `requestState`
envelope, sealed by reqstate in-process (`InProcessCodec`: a one-line swap
for `AESGCMRequestStateCodec`). The handler is the same as with the sidecar.

`build_compact_server`: the SDK's lowlevel `Server`, whose handler carries
reqstate's own compact tokens (`CompactStates`): each round's token is bound
to the tool, the caller, this server, the arguments, and the step it answers.

Both read keys from one keyring file, reloaded when it changes, so a key
rotation between rounds needs no restart. Run either over stdio:

    python increase_counter_inprocess.py bound /path/to/keyring.toml
    python increase_counter_inprocess.py sdk /path/to/keyring.toml
    python increase_counter_inprocess.py compact /path/to/keyring.toml
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.request_state import RequestStateSecurity
from mcp_types import ElicitRequest, ElicitRequestFormParams, ElicitResult, InputRequiredResult

import reqstate.mcp
from reqstate import Codec, Keyring
from reqstate.mcp import CompactStates, InProcessCodec

SERVER_NAME = "counter-server"  # the audience bound into every state
TOOL = "increase-counter"
AMOUNT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"amount": {"type": "integer"}},
    "required": ["amount"],
}
CONFIRM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"confirm": {"type": "boolean"}},
    "required": ["confirm"],
}


def _elicit(message: str, schema: dict[str, Any]) -> ElicitRequest:
    return ElicitRequest(params=ElicitRequestFormParams(message=message, requested_schema=schema))


def _accepted(answers: dict[str, Any], key: str) -> dict[str, Any] | None:
    answer = answers.get(key)
    if isinstance(answer, ElicitResult) and answer.action == "accept":
        return dict(answer.content or {})
    return None


# ------------------------------------------------ 1. the SDK's envelope, sealed by reqstate


def build_sdk_server(
    codec: Codec | InProcessCodec,
    *,
    name: str = SERVER_NAME,
    ttl: float = 600,
    on_commit: Callable[[int, int], None] | None = None,
) -> MCPServer:
    """`MCPServer` whose requestState the SDK seals with `InProcessCodec`."""
    sealer = codec if isinstance(codec, InProcessCodec) else InProcessCodec(codec)
    server = MCPServer(name, request_state_security=RequestStateSecurity(codec=sealer, ttl=ttl))
    add_increase_counter(server, on_commit)
    return server


def build_bound_server(
    keyring: Keyring | Codec,
    *,
    name: str = SERVER_NAME,
    ttl: int = 600,
    on_commit: Callable[[int, int], None] | None = None,
    **options: Any,
) -> MCPServer:
    """`MCPServer` with reqstate's compact boundary in place of the SDK's:
    the same handler, tokens of about 100 characters instead of 300."""
    server = reqstate.mcp.bind(MCPServer(name), keyring, ttl=ttl, **options)
    add_increase_counter(server, on_commit)
    return server


def add_increase_counter(server: MCPServer, on_commit: Callable[[int, int], None] | None = None) -> None:
    """The three-round tool; its state is plaintext JSON in `ctx.request_state`
    (the boundary, the SDK's or reqstate's, opens and checks it)."""

    @server.tool(name=TOOL, description="Increase a counter by an amount the user chooses")
    async def increase_counter(current: int, ctx: Context) -> str | InputRequiredResult:
        # The state arrives opened and checked (tool, arguments, audience, expiry).
        state: dict[str, Any] = json.loads(ctx.request_state) if ctx.request_state else {"step": "amount"}
        answers = dict(ctx.input_responses or {})
        if state["step"] == "amount":
            amount = _accepted(answers, "amount")
            if amount is None:
                return InputRequiredResult(
                    input_requests={"amount": _elicit(f"Increase {current} by how much?", AMOUNT_SCHEMA)},
                    request_state=json.dumps({"step": "amount"}),
                )
            confirm = {"step": "confirm", "current": current, "amount": int(amount["amount"])}
            return InputRequiredResult(
                input_requests={"confirm": _elicit(f"Increase {current} by {confirm['amount']}?", CONFIRM_SCHEMA)},
                request_state=json.dumps(confirm),
            )
        if state["step"] == "confirm":
            if "confirm" not in answers:  # not answered (yet): ask again (SEP-2322)
                return InputRequiredResult(
                    input_requests={"confirm": _elicit(f"Increase {state['current']} by {state['amount']}?", CONFIRM_SCHEMA)},
                    request_state=json.dumps(state),
                )
            answer = _accepted(answers, "confirm")
            if answer is None or answer.get("confirm") is not True:
                return f"cancelled; the counter stays at {state['current']}"
            if on_commit is not None:
                on_commit(state["current"], state["amount"])
            return str(state["current"] + state["amount"])
        raise ValueError(f"unknown step {state['step']!r}")


# ------------------------------------------------ 2. reqstate's compact tokens, step-bound


def build_compact_server(
    codec: Codec,
    *,
    name: str = SERVER_NAME,
    ttl: int = 600,
    on_commit: Callable[[int, int], None] | None = None,
) -> Server[Any]:
    """The lowlevel `Server`: the handler mints and verifies its own tokens."""
    states = CompactStates(codec, audience=name, ttl=ttl)

    async def list_tools(ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=TOOL,
                    description="Increase a counter by an amount the user chooses",
                    input_schema={
                        "type": "object",
                        "properties": {"current": {"type": "integer"}},
                        "required": ["current"],
                    },
                )
            ]
        )

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        if params.name != TOOL:
            raise ValueError(f"unknown tool {params.name!r}")
        arguments = dict(params.arguments or {})
        current = int(arguments["current"])
        answers = dict(params.input_responses or {})
        # Which round this is follows from the answer given; the token must
        # have been minted for exactly that round (its step).
        amount = _accepted(answers, "amount")
        confirm = _accepted(answers, "confirm")
        if params.request_state is None or (amount is None and confirm is None):
            token = states.mint(TOOL, arguments, "amount", None)
            return InputRequiredResult(
                input_requests={"amount": _elicit(f"Increase {current} by how much?", AMOUNT_SCHEMA)},
                request_state=token,
            )
        if amount is not None:
            states.open(params.request_state, TOOL, arguments, expected_step="amount")
            state = {"current": current, "amount": int(amount["amount"])}
            return InputRequiredResult(
                input_requests={"confirm": _elicit(f"Increase {current} by {state['amount']}?", CONFIRM_SCHEMA)},
                request_state=states.mint(TOOL, arguments, "confirm", state),
            )
        verified = states.open(params.request_state, TOOL, arguments, expected_step="confirm")
        assert verified is not None and confirm is not None
        carried: dict[str, int] = verified.state
        if confirm.get("confirm") is not True:
            text = f"cancelled; the counter stays at {carried['current']}"
        else:
            if on_commit is not None:
                on_commit(carried["current"], carried["amount"])
            text = str(carried["current"] + carried["amount"])
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)])

    return Server(name, on_list_tools=list_tools, on_call_tool=call_tool)


def main() -> None:
    way, path = sys.argv[1], sys.argv[2]
    codec = Codec(Keyring.from_file(path, auto_reload=True))
    if way == "sdk":
        build_sdk_server(codec).run("stdio")
    elif way == "bound":
        build_bound_server(codec.keyring).run("stdio")
    elif way == "compact":
        import anyio
        from mcp.server.stdio import stdio_server

        server = build_compact_server(codec)

        async def serve() -> None:
            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())

        anyio.run(serve)
    else:
        raise SystemExit("usage: increase_counter_inprocess.py (bound | sdk | compact) KEYRING")


if __name__ == "__main__":
    main()
