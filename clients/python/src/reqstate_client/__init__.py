"""Python client for the reqstate sidecar: mint, verify, seal and unseal MCP
`requestState` tokens over gRPC (`reqstate.v1.RequestState`).

    from reqstate_client import Client

    with Client("unix:///run/reqstate/reqstate.sock", token="...") as sidecar:
        minted = sidecar.mint("increase-counter", "confirm", state_json={"amount": 5})
        result = sidecar.verify(minted.token, "increase-counter", expected_step="confirm")
        assert result.valid and result.json() == {"amount": 5}

Single-use tokens: `mint(..., single_use=True)` is accepted once, by
`verify(..., consume=True)` (`Reason.REPLAYED` afterwards).

`reqstate_client.mcp.SidecarCodec` plugs the sidecar into the official `mcp`
SDK's `RequestStateSecurity`; `reqstate_client.mcp.single_use(state)` makes a
round's `requestState` single-use.

`reqstate_client.call_context(principal, audience, method, arguments_json)` is
the 32-byte context that binds a token to one call (docs/FORMAT.md §7),
identical to the core crate's `reqstate::call_context`.
"""

from ._client import DEFAULT_TIMEOUT, Client, grpc_target
from ._context import (
    MAX_ARGUMENTS_DEPTH,
    InvalidArgumentError,
    call_context,
    call_context_from_value,
    canonical_json,
)
from ._types import (
    Algorithm,
    ItemError,
    KeyInfo,
    KeyList,
    KeyStatus,
    Minted,
    MintItem,
    Reason,
    Sealed,
    Unsealed,
    Verified,
    VerifyItem,
)
from .errors import (
    AuthenticationError,
    InvalidRequestError,
    OverloadedError,
    PermissionDeniedError,
    ReqstateError,
    TransportError,
)

__version__ = "0.1.0"
"""The package's version, its one source: pyproject.toml reads it from here."""

__all__ = [
    "DEFAULT_TIMEOUT",
    "MAX_ARGUMENTS_DEPTH",
    "Algorithm",
    "AuthenticationError",
    "Client",
    "InvalidArgumentError",
    "InvalidRequestError",
    "ItemError",
    "KeyInfo",
    "KeyList",
    "KeyStatus",
    "MintItem",
    "Minted",
    "OverloadedError",
    "PermissionDeniedError",
    "Reason",
    "ReqstateError",
    "Sealed",
    "TransportError",
    "Unsealed",
    "Verified",
    "VerifyItem",
    "call_context",
    "call_context_from_value",
    "canonical_json",
    "grpc_target",
]
