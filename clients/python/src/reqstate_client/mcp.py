"""`SidecarCodec`: the official `mcp` SDK's requestState under reqstate's keys.

    from mcp.server.mcpserver import MCPServer
    from mcp.server.request_state import RequestStateSecurity
    from reqstate_client.mcp import SidecarCodec

    server = MCPServer(
        "counter-server",
        request_state_security=RequestStateSecurity(
            codec=SidecarCodec("unix:///run/reqstate/reqstate.sock", token=BEARER),
        ),
    )

The SDK (`mcp.server.request_state.RequestStateBoundary`) builds its own claims
envelope (expiry, method, tool, argument digest, audience, principal) and asks
the codec only to seal and open those bytes. `SidecarCodec` does that with the
sidecar's `Seal` / `Unseal`, so the tokens are XChaCha20-Poly1305 (or HMAC)
under the sidecar's keyring and follow its rotation and retirement.

Associated data: every token is sealed with the fixed `aad`
`DEFAULT_AAD = b"reqstate/mcp-python-sdk/request-state/v1"`. It is a domain
separator: a token minted by this codec opens only as an MCP Python SDK
request-state envelope, so a `Seal` output made by any other user of the same
sidecar (another SDK or purpose, with another aad) cannot be replayed here
and ours cannot be replayed there. Tool, arguments, audience, principal and
expiry need not be in the aad: the SDK already stamps them inside the sealed
envelope and checks them after `unseal`. Pass `aad=` to separate further
(for example per deployment); every server sharing tokens must use the same.

Failure is closed: `unseal` raises the SDK's `InvalidRequestState` for any
failure, a sidecar that is unreachable, slow or refuses the call included;
the SDK answers the client with its `-32602 Invalid or expired requestState`.
`seal` raises `ReqstateError`, which the SDK turns into an internal error
rather than returning unsealed state.

Both methods are synchronous, as the SDK's protocol requires: each makes one
gRPC call (bounded by `timeout`, 2 s by default) from the server's event loop.
Keep the sidecar next to the server (a Unix socket) so this costs well under
a millisecond.

Single-use rounds: a handler marks the state of the round that commits an
effect with `single_use(...)`:

    return InputRequiredResult(
        input_requests={"confirm": ...},
        request_state=single_use(json.dumps({"step": "confirm", "amount": 5})),
    )

`SidecarCodec.seal` then mints that envelope as a single-use token (the
sidecar's `Mint` with `single_use`, the state being the SDK's envelope with
the mark removed, bound to `aad`, expiring with the envelope) instead of
sealing it, and `unseal` consumes it (`Verify` with `consume`): the retry that
carries it is accepted once, on every sidecar that shares the replay store,
and any later retry with the same `requestState` gets the SDK's `-32602`.
The handler reads its state back unmarked. Consuming happens when the state
is opened, before the SDK checks its own claims (arguments, audience,
principal) and before the handler runs: a presentation that the SDK then
refuses, or a handler that fails, still spends the token, and a client's
network retry of the same request fails too. A replay store that cannot
record the token (full, unreachable) fails closed: `-32602`.
"""

from __future__ import annotations

import json
import logging
import math
import time
from typing import Any

from mcp.server.request_state import InvalidRequestState

from ._client import Client
from ._types import Reason, Unsealed
from .errors import ReqstateError

__all__ = [
    "DEFAULT_AAD",
    "SINGLE_USE_MARK",
    "SINGLE_USE_STEP",
    "SINGLE_USE_TOOL",
    "SidecarCodec",
    "is_single_use_token",
    "single_use",
]

DEFAULT_AAD = b"reqstate/mcp-python-sdk/request-state/v1"
"""The associated data every `SidecarCodec` token is bound to unless `aad=` says otherwise."""

SINGLE_USE_MARK = "reqstate:single-use:"
"""The prefix `single_use` puts before a round's state; `SidecarCodec.seal` removes it."""

SINGLE_USE_TOOL = "mcp-request-state"
"""The `tool` single-use envelopes are minted and consumed for (the SDK binds the real tool inside)."""

SINGLE_USE_STEP = "single-use"
"""The `step` single-use envelopes are minted with and expected at consume."""

# A token's first character is the top six bits of its header byte: the format
# version (4 bits, 1) and the kind (2 bits): 2 is a single-use state token.
_SINGLE_USE_KIND = 2
_BASE64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

logger = logging.getLogger(__name__)


def single_use(state: str) -> str:
    """Marks a round's `requestState` single-use (for `SidecarCodec`).

    Return `InputRequiredResult(..., request_state=single_use(text))` from the
    round that commits an effect: the retry carrying that state is accepted
    once (the sidecar consumes it) and a replay gets `-32602`. The handler
    reads `text` back, unmarked. Only `SidecarCodec` knows the mark: with
    another codec the state would reach the next round with the prefix and
    would not be single-use.
    """
    if not isinstance(state, str):
        raise TypeError("single_use takes the state text (str)")
    return state if state.startswith(SINGLE_USE_MARK) else SINGLE_USE_MARK + state


def is_single_use_token(token: str) -> bool:
    """Whether `token` says it is a single-use state token (format version 1, kind 2).

    Read from the unauthenticated header, to route a token: the sidecar
    authenticates the kind (a token routed wrongly is refused, never accepted).
    """
    # Two characters hold the whole header byte; the first its top six bits.
    if not isinstance(token, str) or len(token) < 2:
        return False
    sextet = _BASE64URL.find(token[0])
    return sextet >= 0 and sextet >> 2 == 1 and sextet & 0b11 == _SINGLE_USE_KIND


def _single_use_envelope(payload: bytes) -> tuple[bytes, int] | None:
    """The SDK envelope with the single-use mark removed and its lifetime in
    seconds, or None when the payload is not a marked envelope."""
    if SINGLE_USE_MARK.encode() not in payload:
        return None
    try:
        claims = json.loads(payload)
    except ValueError:
        return None
    if not isinstance(claims, dict):
        return None
    state = claims.get("s")
    if not isinstance(state, str) or not state.startswith(SINGLE_USE_MARK):
        return None
    claims["s"] = state[len(SINGLE_USE_MARK) :]
    exp = claims.get("exp")
    remaining = exp - time.time() if isinstance(exp, int | float) and not isinstance(exp, bool) else math.nan
    # The token lives as long as the envelope (its spent record as long as the
    # token): at least 1 s; an envelope without a usable expiry gets the
    # sidecar's default (0), and the SDK refuses it on unseal anyway.
    ttl = max(1, math.ceil(remaining)) if math.isfinite(remaining) else 0
    return json.dumps(claims, separators=(",", ":")).encode(), ttl


class SidecarCodec:
    """An `mcp.server.request_state.RequestStateCodec` backed by a reqstate sidecar.

    `target` and `token` are those of `reqstate_client.Client` (or pass an
    existing `client=`). `timeout` bounds each call to the sidecar in seconds
    (Seal/Unseal, or Mint/Verify for a round marked with `single_use`).
    """

    def __init__(
        self,
        target: str | None = None,
        token: str | None = None,
        *,
        aad: bytes = DEFAULT_AAD,
        timeout: float = 2.0,
        client: Client | None = None,
        **client_options: Any,
    ) -> None:
        if (target is None) == (client is None):
            raise ValueError("SidecarCodec takes exactly one of target or client=")
        if not isinstance(aad, bytes | bytearray):
            raise TypeError("aad must be bytes")
        self._owns_client = client is None
        if client is None:
            assert target is not None  # exactly one of them, checked above
            client = Client(target, token, timeout, **client_options)
        self.client = client
        self.aad = bytes(aad)
        self.timeout = timeout
        self.last_key_id: int | None = None
        """The key id of the last successful seal or unseal (for logs and tests)."""

    def seal(self, payload: bytes) -> str:
        """The sidecar's `Seal` of `payload` under its primary key, bound to `aad`.

        An SDK envelope whose state the handler marked with `single_use` is
        minted instead as a single-use token (`Mint` with `single_use`, tool
        `SINGLE_USE_TOOL`, step `SINGLE_USE_STEP`, context `aad`), the mark
        removed, expiring when the envelope does.

        Raises:
            ReqstateError: the sidecar failed or could not be reached.
        """
        marked = _single_use_envelope(bytes(payload))
        if marked is not None:
            envelope, ttl = marked
            minted = self.client.mint(
                SINGLE_USE_TOOL,
                SINGLE_USE_STEP,
                state=envelope,
                ttl_seconds=ttl,
                context=self.aad,
                single_use=True,
                timeout=self.timeout,
            )
            self.last_key_id = minted.key_id
            return minted.token
        sealed = self.client.seal(bytes(payload), aad=self.aad, timeout=self.timeout)
        self.last_key_id = sealed.key_id
        return sealed.token

    def unseal(self, token: str) -> bytes:
        """The payload `seal` sealed.

        A single-use token (from a round marked with `single_use`) is consumed:
        opened once, refused afterwards (`replayed`) on every sidecar sharing
        the replay store.

        Raises:
            InvalidRequestState: on any failure: malformed, altered, unknown,
                retired or foreign key, another aad, a single-use token already
                consumed or that the replay store could not record, or no
                answer from the sidecar.
        """
        if not isinstance(token, str) or not token:
            raise InvalidRequestState("malformed")
        try:
            if is_single_use_token(token):
                opened = self._consume(token)
            else:
                opened = self.client.unseal(token, aad=self.aad, timeout=self.timeout)
        except ReqstateError as error:
            # The message is log-only in the SDK; the wire answer stays frozen.
            logger.warning("requestState unseal failed closed: %s", error)
            raise InvalidRequestState("sidecar unavailable") from None
        except Exception as error:  # fail closed on anything unexpected
            logger.exception("requestState unseal failed closed")
            raise InvalidRequestState("codec error") from error
        if not opened.valid:
            raise InvalidRequestState(opened.reason.code)
        self.last_key_id = opened.key_id
        return opened.payload

    def _consume(self, token: str) -> Unsealed:
        """Consumes a single-use token minted by `seal`; the result as an `Unsealed`."""
        consumed = self.client.verify(
            token,
            SINGLE_USE_TOOL,
            expected_step=SINGLE_USE_STEP,
            context=self.aad,
            consume=True,
            timeout=self.timeout,
        )
        if not consumed.valid:
            return Unsealed(valid=False, reason=consumed.reason, detail=consumed.detail)
        if consumed.state is None:  # `seal` mints the envelope as bytes, never as JSON
            return Unsealed(valid=False, reason=Reason.STATE_DECODING, detail="a JSON state, not an envelope")
        return Unsealed(valid=True, reason=consumed.reason, payload=consumed.state, key_id=consumed.key_id)

    def close(self) -> None:
        """Closes the client this codec created (not one passed in as `client=`)."""
        if self._owns_client:
            self.client.close()

    def __enter__(self) -> SidecarCodec:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
