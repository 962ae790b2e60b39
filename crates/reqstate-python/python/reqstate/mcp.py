"""reqstate for the official `mcp` Python SDK, in-process.

Two ways, both on the same keyring (file, rotation, retirement) as the
sidecar and every other reqstate implementation:

**1. The SDK's envelope, sealed by reqstate** (`InProcessCodec`): a one-line
swap for the SDK's own `AESGCMRequestStateCodec`. The SDK keeps stamping and
checking its claims (expiry, method, tool, argument digest, audience,
principal); reqstate seals them under the keyring's primary key and opens
them under any active key.

    from mcp.server.mcpserver import MCPServer
    from mcp.server.request_state import RequestStateSecurity
    from reqstate import Codec, Keyring
    from reqstate.mcp import InProcessCodec

    keyring = Keyring.from_file("/run/reqstate/keyring.toml", auto_reload=True)
    server = MCPServer(
        "counter-server",
        request_state_security=RequestStateSecurity(codec=InProcessCodec(Codec(keyring))),
    )

Tokens are bound to `DEFAULT_AAD`, the same associated data as
`reqstate_client.mcp.SidecarCodec`: with the same keyring, a state sealed by
a server using the sidecar opens in one using this codec, and back (a fleet
can move between the two without failing a flow in progress).

**2. reqstate's own compact tokens** (`CompactStates`), for a handler that
owns its `requestState` (the SDK's lowlevel `Server`, which installs no
boundary): each round's token is 108 characters (XChaCha20-Poly1305) or 76
(HMAC) for the reference claims instead of about 300, bound to the tool, the
step it answers, the principal, the audience, the method and the exact
arguments (RFC 8785), and expiring with its own lifetime. See
crates/reqstate-python/examples/increase_counter_inprocess.py.

Both fail closed: a state that does not open is `InvalidRequestState` (the
SDK answers `-32602 Invalid or expired requestState`) or, with
`CompactStates`, the same `MCPError` directly; the reason goes to the log.

**Single-use rounds** (the round whose retry would repeat an effect): with
`CompactStates`, mint that round's token `single_use=True` and consume the
retry against a spent-token store shared by every replica,
`reqstate.redis.RedisReplayStore` (Redis >= 7.0, the `reqstate[redis]`
extra, the same records as the sidecars'): accepted once across the fleet
while every replica's clock is within `max_skew_ms` of Redis's, refused
(`replay_store_unavailable`), never accepted unrecorded, when it cannot be
recorded. The store is synchronous: call `consume` in a worker thread.

    store = RedisReplayStore(os.environ["REQSTATE_REPLAY_STORE"])
    binding = states.binding("increase-counter", arguments, principal)
    token = codec.mint(binding, "confirm", {"current": 10, "amount": 5}, single_use=True).token
    ...
    verified = await anyio.to_thread.run_sync(
        lambda: codec.consume(token, binding, store, expected_step="confirm"))

`InProcessCodec` sees only the SDK's sealed bytes and cannot make a round
single-use.
"""

from __future__ import annotations

import logging
from typing import Any

from mcp.server.request_state import InvalidRequestState
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from ._errors import ReqstateError, TokenRefused
from ._native import Binding, Codec, Keyring, Verified
from . import call_context

__all__ = ["DEFAULT_AAD", "CompactStates", "InProcessCodec", "invalid_request_state"]

DEFAULT_AAD = b"reqstate/mcp-python-sdk/request-state/v1"
"""The associated data every `InProcessCodec` token is bound to unless `aad=`
says otherwise (the same as `reqstate_client.mcp.DEFAULT_AAD`)."""

logger = logging.getLogger(__name__)


class InProcessCodec:
    """An `mcp.server.request_state.RequestStateCodec` on the linked core:
    `seal` and `unseal` cost microseconds and never leave the process.

    `codec` is a `reqstate.Codec` (or a `Keyring`, wrapped in a default
    `Codec`). Rotation is the keyring's: `keyring.reload()`, or
    `Keyring.from_file(..., auto_reload=True)`.
    """

    def __init__(self, codec: Codec | Keyring, *, aad: bytes = DEFAULT_AAD) -> None:
        if isinstance(codec, Keyring):
            codec = Codec(codec)
        if not isinstance(codec, Codec):
            raise TypeError("InProcessCodec takes a reqstate.Codec or a reqstate.Keyring")
        if not isinstance(aad, bytes | bytearray):
            raise TypeError("aad must be bytes")
        self.codec = codec
        self.aad = bytes(aad)
        self.last_key_id: int | None = None
        """The key id of the last successful seal or unseal (for logs and tests)."""

    def seal(self, payload: bytes) -> str:
        """`payload` sealed under the primary key, bound to `aad`.

        Raises:
            ReqstateError: the core made no token (the SDK answers with an
                internal error rather than unsealed state).
        """
        sealed = self.codec.seal(bytes(payload), self.aad)
        self.last_key_id = sealed.key_id
        return sealed.token

    def unseal(self, token: str) -> bytes:
        """The payload `seal` sealed.

        Raises:
            InvalidRequestState: malformed, altered, under an unknown, retired
                or foreign key, another aad; the message is the reason name.
        """
        if not isinstance(token, str) or not token:
            raise InvalidRequestState("malformed")
        try:
            opened = self.codec.unseal(token, self.aad)
        except TokenRefused as refused:
            raise InvalidRequestState(refused.reason) from None
        except Exception as error:  # fail closed on anything unexpected
            logger.exception("requestState unseal failed closed")
            raise InvalidRequestState("codec error") from error
        self.last_key_id = opened.key_id
        return opened.payload


def invalid_request_state(reason: str) -> MCPError:
    """The SDK's own answer to a state that does not open: `-32602` with the
    frozen message; the reason is for the log only."""
    logger.warning("requestState rejected: %s", reason)
    return MCPError(
        code=INVALID_PARAMS,
        message="Invalid or expired requestState",
        data={"reason": "invalid_request_state"},
    )


class CompactStates:
    """reqstate's compact, step-bound tokens as a handler's `requestState`.

    For a handler that owns its state (the SDK's lowlevel `Server`, whose
    `on_call_tool` receives `params.request_state` as the client sent it).
    Each token is bound to the tool, the caller's principal, `audience`
    (this server), the method and the exact arguments, and to the step it
    was minted for: `open(..., expected_step=...)` refuses a token from
    another round.

        states = CompactStates(Codec(keyring), audience="counter-server")
        token = states.mint("increase-counter", arguments, "confirm", {"current": 10, "amount": 5})
        ...
        verified = states.open(params.request_state, "increase-counter", arguments, expected_step="confirm")
    """

    def __init__(self, codec: Codec, audience: str, *, ttl: int = 600, method: str = "tools/call") -> None:
        self.codec = codec
        self.audience = audience
        self.ttl = ttl
        self.method = method

    def binding(self, tool: str, arguments: Any, principal: str = "") -> Binding:
        """The tool and call context a token of this call is bound to.

        `arguments` should be the arguments as received (the parsed dict, or
        better their JSON text); `principal` the authenticated caller (empty
        for none, e.g. stdio)."""
        return Binding(tool, call_context(principal, self.audience, self.method, arguments))

    def mint(
        self, tool: str, arguments: Any, step: str, state: Any, *, principal: str = "", ttl: int | None = None
    ) -> str:
        """A token for the next round: `state` (JSON-compatible, or bytes)
        for `step`, valid `ttl` seconds (default the instance's)."""
        binding = self.binding(tool, arguments, principal)
        return self.codec.mint(binding, step, state, ttl=self.ttl if ttl is None else ttl).token

    def open(
        self,
        token: str | None,
        tool: str,
        arguments: Any,
        *,
        expected_step: str | None = None,
        principal: str = "",
    ) -> Verified | None:
        """The verified contents of `token`, or None when there is none (the
        first round). Raises the SDK's `-32602` `MCPError` for any token that
        does not verify: altered, expired, for another tool, step, caller,
        server or arguments, under a retired or unknown key."""
        if token is None:
            return None
        try:
            binding = self.binding(tool, arguments, principal)
            return self.codec.verify(token, binding, expected_step=expected_step)
        except ReqstateError as refused:
            raise invalid_request_state(refused.reason) from None
