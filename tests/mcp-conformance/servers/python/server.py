"""The conformance servers' contract (issue 26), on the official Python SDK
`mcp` 2.3.0: an `MCPServer` whose `requestState` is reqstate's compact token,
installed in one line (`reqstate.mcp.bind`), serving MCP 2026-07-28,
stateless, at http://127.0.0.1:$PORT/mcp.

Environment: REQSTATE_KEYS (keyring text: TOML with inline secrets; the
compact form is refused: the Python package does not read it),
PORT (0: any free port), REQSTATE_TTL_SECONDS (default 600),
REQSTATE_CLOCK_LEEWAY_SECONDS (default the policy's, 60). Prints
`listening <url>` on stdout when it accepts requests; every refused state is
one stderr line `reqstate refused <method> <tool>: <reason>: <message>`.

The tools are the official conformance suite's fixtures (the
`input-required-result-*` scenarios) plus `reqstate_adversarial` (`{n}`:
asks `confirm`, then answers `n=<n> confirmed`). Behind a verified token the
boundary drops answers under keys that round did not ask; each handler asks
again for what is missing (SEP-2322). States carry only what a handler needs
(most carry none: the token then binds only the call and the asked keys). `Authorization: Bearer <name>` is an
access token of the OAuth client `conformance` whose subject is `<name>` (a
test-only verifier: anyone may claim any name), and the drop-in binds its
default principal `["conformance",null,"<name>"]`, as the TypeScript server
does for the same header; no header binds `null` (docs/MCP.md, "The caller a
round is bound to").
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import sys
from typing import Any

import uvicorn
from mcp.server.auth.middleware.auth_context import auth_context_var
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import (
    CreateMessageRequest,
    CreateMessageRequestParams,
    ElicitRequest,
    ElicitRequestFormParams,
    InputRequest,
    InputRequiredResult,
    ListRootsRequest,
    SamplingMessage,
    TextContent,
)

import reqstate.mcp
from reqstate import Keyring

NAME = "reqstate-conformance-python"
AUDIENCE = "reqstate-conformance"


class BearerCaller:
    """Test-only ASGI wrapper: `Authorization: Bearer <name>` becomes the SDK's
    authenticated user (client `conformance`, subject `<name>`) in the context
    variable the SDK's own `AuthContextMiddleware` sets, so the drop-in binds
    its default principal exactly as behind a real token verifier."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        name = None
        if scope.get("type") == "http":
            for key, value in scope.get("headers", []):
                if key == b"authorization" and value.startswith(b"Bearer ") and len(value) > len(b"Bearer "):
                    name = value[len(b"Bearer ") :].decode("utf-8", "replace")
        if name is None:
            await self.app(scope, receive, send)
            return
        user = AuthenticatedUser(AccessToken(token=name, client_id="conformance", scopes=[], subject=name))
        reset = auth_context_var.set(user)
        try:
            await self.app(scope, receive, send)
        finally:
            auth_context_var.reset(reset)


def elicit(message: str, prop: str, kind: str = "string") -> InputRequest:
    schema = {"type": "object", "properties": {prop: {"type": kind}}, "required": [prop]}
    return ElicitRequest(params=ElicitRequestFormParams(message=message, requested_schema=schema))


def sample(text: str, max_tokens: int) -> InputRequest:
    return CreateMessageRequest(
        params=CreateMessageRequestParams(
            messages=[SamplingMessage(role="user", content=TextContent(type="text", text=text))],
            max_tokens=max_tokens,
        )
    )


def roots() -> InputRequest:
    return ListRootsRequest()


def ask(requests: dict[str, InputRequest], state: dict[str, Any] | None = None) -> InputRequiredResult:
    """A round. The boundary binds its token to the keys asked (the step)
    and carries `state` (if any) in it."""
    return InputRequiredResult(input_requests=requests, request_state=None if state is None else json.dumps(state))


def opened(ctx: Context) -> dict[str, Any] | None:
    """This round's verified state (None on a first round, or a round that
    carried none)."""
    return json.loads(ctx.request_state) if ctx.request_state else None


def answers(ctx: Context, *keys: str) -> dict[str, Any] | None:
    """The answers to `keys`, or None if any is missing. Behind a verified
    token the boundary has already dropped answers under keys that round did
    not ask, so another round's answers are never read as this one's."""
    given = dict(ctx.input_responses or {})
    found = {k: given[k] for k in keys if k in given}
    return found if len(found) == len(keys) else None


def elicited(answer: Any, field: str) -> Any:
    content = getattr(answer, "content", None)
    if getattr(answer, "action", None) == "accept" and isinstance(content, dict):
        return content.get(field)
    return None


def sampled_text(answer: Any) -> str:
    content = getattr(answer, "content", None)
    blocks = content if isinstance(content, list) else [content]
    return " ".join(b.text for b in blocks if isinstance(b, TextContent))


def build(keyring: Keyring, ttl: int, clock_leeway: int | None) -> MCPServer:
    # The TypeScript server's audience, so that cross.mjs can move a round between the two.
    options: dict[str, Any] = {"ttl": ttl, "audience": AUDIENCE}
    if clock_leeway is not None:
        options["clock_leeway"] = clock_leeway
    server = reqstate.mcp.bind(MCPServer(NAME), keyring, **options)

    @server.tool(name="test_input_required_result_elicitation")
    async def elicitation(ctx: Context) -> str | InputRequiredResult:
        got = answers(ctx, "user_name")
        name = elicited(got["user_name"], "name") if got else None
        if not isinstance(name, str):
            return ask({"user_name": elicit("What is your name?", "name")})
        return f"Hello, {name}!"

    @server.tool(name="test_input_required_result_sampling")
    async def sampling(ctx: Context) -> str | InputRequiredResult:
        got = answers(ctx, "capital_question")
        if got is None:
            return ask({"capital_question": sample("What is the capital of France?", 100)})
        return f"The model answered: {sampled_text(got['capital_question'])}"

    @server.tool(name="test_input_required_result_list_roots")
    async def list_roots(ctx: Context) -> str | InputRequiredResult:
        got = answers(ctx, "client_roots")
        if got is None:
            return ask({"client_roots": roots()})
        uris = [str(r.uri) for r in getattr(got["client_roots"], "roots", [])]
        return f"The client has {len(uris)} roots: {', '.join(uris)}"

    @server.tool(name="test_input_required_result_request_state")
    async def request_state(ctx: Context) -> str | InputRequiredResult:
        state = opened(ctx)
        got = answers(ctx, "confirm")
        if state is None or got is None:
            return ask({"confirm": elicit("Please confirm", "ok", "boolean")}, {"nonce": 7})
        if state.get("nonce") != 7:
            raise ValueError("the verified state is not the one minted")
        return "state-ok: the requestState came back verified"

    @server.tool(name="test_input_required_result_multiple_inputs")
    async def multiple_inputs(ctx: Context) -> str | InputRequiredResult:
        every = {
            "user_name": elicit("What is your name?", "name"),
            "greeting": sample("Generate a greeting", 50),
            "client_roots": roots(),
        }
        if reqstate.mcp.current_round() is None:  # no verified state: the first round
            return ask(every)
        missing = reqstate.mcp.unanswered()
        if missing is None or missing:  # ask again for what is missing
            return ask({k: every[k] for k in (missing or every)})
        got = answers(ctx, *every)
        assert got is not None
        return f"all {len(got)} inputs received: name={elicited(got['user_name'], 'name')}"

    @server.tool(name="test_input_required_result_multi_round")
    async def multi_round(ctx: Context) -> str | InputRequiredResult:
        state = opened(ctx)
        step1 = {"step1": elicit("Step 1: What is your name?", "name")}
        if state is None:
            return ask(step1, {"round": 1})
        if state["round"] == 1:
            got = answers(ctx, "step1")
            if got is None:
                return ask(step1, {"round": 1})
            name = elicited(got["step1"], "name")
            return ask({"step2": elicit("Step 2: What is your favorite color?", "color")}, {"round": 2, "name": name})
        got = answers(ctx, "step2")
        if got is None:
            return ask({"step2": elicit("Step 2: What is your favorite color?", "color")}, state)
        return f"{state['name']} likes {elicited(got['step2'], 'color')}"

    @server.tool(name="test_input_required_result_tampered_state")
    async def tampered_state(ctx: Context) -> str | InputRequiredResult:
        got = answers(ctx, "confirm") if reqstate.mcp.current_round() is not None else None
        if got is None:
            return ask({"confirm": elicit("Please confirm", "ok", "boolean")})
        return "the state verified"

    @server.tool(name="test_input_required_result_capabilities")
    async def capabilities(ctx: Context) -> str | InputRequiredResult:
        declared = ctx.client_capabilities
        requests: dict[str, InputRequest] = {}
        if declared is None or declared.sampling is not None:
            requests["greeting"] = sample("Generate a greeting", 50)
        if declared is None or declared.elicitation is not None:
            requests["user_name"] = elicit("What is your name?", "name")
        if reqstate.mcp.current_round() is None or reqstate.mcp.unanswered() != []:
            return ask(requests)
        return "inputs received"

    def confirm_n(n: int, ctx: Context) -> dict[str, Any] | InputRequiredResult:
        """The two rounds of `reqstate_adversarial` and `reqstate_cross`: ask
        `confirm` carrying {"n": n}; then the verified state."""
        state = opened(ctx)
        if state is None or answers(ctx, "confirm") is None:
            return ask({"confirm": elicit(f"Confirm n={n}?", "ok", "boolean")}, {"n": n})
        return state

    @server.tool(name="reqstate_adversarial")
    async def adversarial(n: int, ctx: Context) -> str | InputRequiredResult:
        state = confirm_n(n, ctx)
        return state if isinstance(state, InputRequiredResult) else f"n={state['n']} confirmed"

    @server.tool(name="reqstate_cross")
    async def cross(n: int, ctx: Context) -> str | InputRequiredResult:
        # The TypeScript server's `reqstate_cross`, round for round (cross.mjs): a state minted
        # there (the JSON object {"n": n}) arrives here as its JSON text.
        state = confirm_n(n, ctx)
        if isinstance(state, InputRequiredResult):
            return state
        return f"n={n} state={json.dumps(state, separators=(',', ':'))}"

    @server.prompt(name="test_input_required_result_prompt")
    async def prompt(ctx: Context) -> str | InputRequiredResult:
        got = answers(ctx, "user_context")
        context = elicited(got["user_context"], "context") if got else None
        if not isinstance(context, str):
            return ask({"user_context": elicit("What context should the prompt use?", "context")})
        return f"Use this context: {context}"

    return server


async def serve() -> None:
    keys = os.environ.get("REQSTATE_KEYS")
    if not keys:
        raise SystemExit("server.py: REQSTATE_KEYS (the keyring text) is required")
    port = int(os.environ.get("PORT", "0"))
    ttl = int(os.environ.get("REQSTATE_TTL_SECONDS", "600"))
    leeway_text = os.environ.get("REQSTATE_CLOCK_LEEWAY_SECONDS")
    if keys.lstrip()[:1].isdigit():
        raise SystemExit(
            "server.py: REQSTATE_KEYS is in the compact form (docs/KEYRING.md), which only the TypeScript "
            "package reads; give the keyring as TOML"
        )
    server = build(Keyring.from_toml(keys), ttl, int(leeway_text) if leeway_text else None)

    # One stderr line per refusal, nothing else from reqstate.
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    refusals = logging.getLogger("reqstate")
    refusals.addHandler(handler)
    refusals.setLevel(logging.INFO)
    refusals.propagate = False

    app = BearerCaller(server.streamable_http_app(stateless_http=True, json_response=True))
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    runner = uvicorn.Server(config)
    task = asyncio.create_task(runner.serve(sockets=[sock]))
    while not runner.started:
        if task.done():
            await task
            raise SystemExit("server.py: uvicorn stopped before it started")
        await asyncio.sleep(0.02)
    print(f"listening {url}", flush=True)
    await task


if __name__ == "__main__":
    asyncio.run(serve())
