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
"""

from __future__ import annotations

import logging
from typing import Any

from mcp.server.request_state import InvalidRequestState

from ._client import Client
from .errors import ReqstateError

__all__ = ["DEFAULT_AAD", "SidecarCodec"]

DEFAULT_AAD = b"reqstate/mcp-python-sdk/request-state/v1"
"""The associated data every `SidecarCodec` token is bound to unless `aad=` says otherwise."""

logger = logging.getLogger(__name__)


class SidecarCodec:
    """An `mcp.server.request_state.RequestStateCodec` backed by a reqstate sidecar.

    `target` and `token` are those of `reqstate_client.Client` (or pass an
    existing `client=`). `timeout` bounds each Seal/Unseal in seconds.
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

        Raises:
            ReqstateError: the sidecar failed or could not be reached.
        """
        sealed = self.client.seal(bytes(payload), aad=self.aad, timeout=self.timeout)
        self.last_key_id = sealed.key_id
        return sealed.token

    def unseal(self, token: str) -> bytes:
        """The payload `seal` sealed.

        Raises:
            InvalidRequestState: on any failure: malformed, altered, unknown,
                retired or foreign key, another aad, or no answer from the sidecar.
        """
        if not isinstance(token, str) or not token:
            raise InvalidRequestState("malformed")
        try:
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

    def close(self) -> None:
        """Closes the client this codec created (not one passed in as `client=`)."""
        if self._owns_client:
            self.client.close()

    def __enter__(self) -> SidecarCodec:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
