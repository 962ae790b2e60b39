"""An MCP server whose `requestState` is sealed by the reqstate sidecar.

The seed flow `increase-counter` in three rounds of one `tools/call`:

1. `{"current": 10}` and no state: ask the amount (elicitation);
2. the amount came back: ask for confirmation, carrying `{"current": 10, "amount": 5}`
   in `requestState`;
3. confirmed: commit the increase (`on_commit`) and return the new value, "15".

Round 2's state is single-use (`reqstate_client.mcp.single_use`): the retry
that confirms is accepted once, so replaying it (the same `requestState` and
the same answer) cannot commit the increase twice; the replay gets `-32602`.

The handler is re-entrant: the same code runs on the first call and on every
retry, branching on the state (which the SDK has already unsealed and checked)
and on the answers. Nothing is kept between rounds but the state, which the
SDK seals with `SidecarCodec`, so any replica holding the same sidecar keyring
can continue the flow, and a key rotation between rounds does not break it.

Run it over stdio next to a sidecar:

    reqstate serve --keyring keyring.toml --listen unix:/run/reqstate/reqstate.sock \
        --auth-token-file token &
    REQSTATE_TARGET=unix:///run/reqstate/reqstate.sock REQSTATE_TOKEN_FILE=token \
        python increase_counter_server.py
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.request_state import RequestStateSecurity
from mcp_types import ElicitRequest, ElicitRequestFormParams, ElicitResult, InputRequiredResult

from reqstate_client.mcp import SidecarCodec, single_use

SERVER_NAME = "counter-server"  # also the audience the SDK stamps into every state


def _ask(
    key: str, message: str, schema: dict[str, Any], state: dict[str, Any], *, once: bool = False
) -> InputRequiredResult:
    """One elicitation, with the state to carry to the next round (`once`: single-use)."""
    request = ElicitRequest(params=ElicitRequestFormParams(message=message, requested_schema=schema))
    text = json.dumps(state)
    return InputRequiredResult(input_requests={key: request}, request_state=single_use(text) if once else text)


def _accepted(answers: dict[str, Any], key: str) -> dict[str, Any] | None:
    answer = answers.get(key)
    if isinstance(answer, ElicitResult) and answer.action == "accept":
        return dict(answer.content or {})
    return None


def build_server(
    target: str,
    token: str | None = None,
    *,
    name: str = SERVER_NAME,
    codec: SidecarCodec | None = None,
    on_commit: Callable[[int, int], None] | None = None,
) -> MCPServer:
    """The MCP server, its requestState protected by the sidecar at `target`
    (or by `codec`, a SidecarCodec built by the caller).

    `on_commit(current, amount)` is the effect of a confirmed increase (say,
    writing the new value to a database): it runs once per confirmation,
    since the confirmation round's state is single-use."""
    if codec is None:
        codec = SidecarCodec(target, token=token)
    server = MCPServer(name, request_state_security=RequestStateSecurity(codec=codec, ttl=600))

    @server.tool(name="increase-counter", description="Increase a counter by an amount the user chooses")
    async def increase_counter(current: int, ctx: Context) -> str | InputRequiredResult:
        # The state arrives unsealed and verified (tool, arguments, audience, expiry).
        state: dict[str, Any] = json.loads(ctx.request_state) if ctx.request_state else {"step": "amount"}
        answers = dict(ctx.input_responses or {})

        if state["step"] == "amount":
            amount = _accepted(answers, "amount")
            if amount is None:  # round 1, or the user did not answer: ask
                return _ask(
                    "amount",
                    f"Increase {current} by how much?",
                    {"type": "object", "properties": {"amount": {"type": "integer"}}, "required": ["amount"]},
                    {"step": "amount"},
                )
            confirm = {"step": "confirm", "current": current, "amount": int(amount["amount"])}
            return _ask(
                "confirm",
                f"Increase {current} by {confirm['amount']}?",
                {"type": "object", "properties": {"confirm": {"type": "boolean"}}, "required": ["confirm"]},
                confirm,
                once=True,  # the retry that answers commits the increase: accept it once
            )

        if state["step"] == "confirm":
            answer = _accepted(answers, "confirm")
            if answer is None or answer.get("confirm") is not True:
                return f"cancelled; the counter stays at {state['current']}"
            if on_commit is not None:
                on_commit(state["current"], state["amount"])
            return str(state["current"] + state["amount"])

        raise ValueError(f"unknown step {state['step']!r}")

    return server


def main() -> None:
    target = os.environ.get("REQSTATE_TARGET", "unix:///run/reqstate/reqstate.sock")
    token = os.environ.get("REQSTATE_TOKEN")
    if token is None and os.environ.get("REQSTATE_TOKEN_FILE"):
        with open(os.environ["REQSTATE_TOKEN_FILE"], encoding="utf-8") as file:
            token = file.read().strip()
    build_server(target, token).run("stdio")


if __name__ == "__main__":
    main()
